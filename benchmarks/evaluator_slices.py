"""The `evaluator_slices` bench section: what measuring every slice adds to the Evaluator.

TFX's own Evaluator executor evaluates one finished run's model on its eval split
twice per repeat, taking turns: with the pipeline's eval config (the whole split, each
class, and for photos each format and size bucket) and with the same config cut to
the whole split. Both write the metrics, plots and validation the pipeline writes.
"""

from __future__ import annotations

import glob
import pathlib
import statistics
import tempfile
import time

from google.protobuf import json_format
from tfx.components.evaluator.executor import Executor
from tfx.types import artifact_utils, standard_artifacts

from tpu_pipeline.common.config import load_config
from tpu_pipeline.components.evaluation.eval_config import build_eval_config


def _newest(pattern: str) -> str:
    found = sorted(glob.glob(pattern), key=lambda path: int(pathlib.Path(path).name))
    if not found:
        raise FileNotFoundError(f"no artifact matches {pattern}: run the pipeline first")
    return found[-1]


def _evaluate(examples_uri: str, model_uri: str, eval_config, output: pathlib.Path) -> float:
    """Seconds the Evaluator executor takes for `eval_config` on the eval split."""
    examples = standard_artifacts.Examples()
    examples.uri = examples_uri
    examples.split_names = artifact_utils.encode_split_names(["train", "eval"])
    model = standard_artifacts.Model()
    model.uri = model_uri
    evaluation = standard_artifacts.ModelEvaluation()
    evaluation.uri = str(output / "evaluation")
    blessing = standard_artifacts.ModelBlessing()
    blessing.uri = str(output / "blessing")
    started = time.perf_counter()
    Executor().Do(
        {"examples": [examples], "model": [model]},
        {"evaluation": [evaluation], "blessing": [blessing]},
        {"eval_config": json_format.MessageToJson(eval_config)},
    )
    return time.perf_counter() - started


def slice_seconds(output_dir: pathlib.Path, dataset: str, repeats: int) -> dict[str, float]:
    """Median Evaluator seconds with and without the slices, on the newest run of
    `dataset` under `output_dir`; also how many slices TFMA measured."""
    config = load_config(None, {"dataset": dataset, "output_dir": str(output_dir)})
    root = config.pipeline_root
    examples_uri = _newest(str(root / "ExampleGen" / "examples" / "*"))
    model_uri = _newest(str(root / "ServingPackager" / "served_model" / "*"))
    sliced = build_eval_config(config.dataset)
    whole = build_eval_config(config.dataset)
    del whole.slicing_specs[1:]  # the whole split only: the config before slices
    seconds: dict[str, list[float]] = {"sliced": [], "whole": []}
    with tempfile.TemporaryDirectory() as scratch:
        for repeat in range(repeats):
            for name, eval_config in (("sliced", sliced), ("whole", whole)):
                output = pathlib.Path(scratch) / f"{name}-{repeat}"
                seconds[name].append(_evaluate(examples_uri, model_uri, eval_config, output))
    return {name: statistics.median(values) for name, values in seconds.items()}
