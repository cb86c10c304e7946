"""The Explainer TFX runs after the served model is made: why it answered as it did.

It reads the model the Pusher would publish (the ServingPackager's, or the Trainer's with
`serving.package` false) and maps its most confident mistakes and a few right answers
per class (`components/explain/`) into an artifact of its own, which the report draws
(`tpu_pipeline.ModelExplanation`: a type Vertex AI's step container can import by its name).
An analysis, not part of the model: it is never pushed, nothing waits for it, it is
cached on its own (changing `explain:` reruns it alone) and left out of the pipeline
when `explain` asks for no image (`mistakes` and `correct_per_class` 0).
The function below is the component's spec and its executor both.
TFX names the executor by this module's path in compiled pipelines, so it stays here.
"""

import json

from tpu_pipeline.common.tfx_api import (
    InputArtifact,
    OutputArtifact,
    Parameter,
    component,
    path_utils,
)
from tpu_pipeline.common.tfx_api import standard_artifacts as artifacts
from tpu_pipeline.components.contract import read_dataset, read_explain
from tpu_pipeline.components.explain.eval_split import explain_eval_split
from tpu_pipeline.components.packager import split_files
from tpu_pipeline.components.serving.answers import PixelClassifier

from tpu_pipeline import ModelExplanation


@component
def Explainer(  # noqa: N802 (TFX names components in CamelCase)
    model: InputArtifact[artifacts.Model],
    examples: InputArtifact[artifacts.Examples],
    explanation: OutputArtifact[ModelExplanation],
    custom_config: Parameter[str],
) -> None:
    """Writes the attributions of `model`'s eval answers into `explanation`.

    `custom_config` is `contract.explainer_sections` as JSON: the dataset and the
    `explain` section (how many images, which method, its settings).
    """
    config = json.loads(custom_config)
    explain_eval_split(
        explanation.uri,
        PixelClassifier(path_utils.serving_model_path(model.uri)),
        split_files(examples, "eval"),
        read_dataset(config),
        read_explain(config),
    )
