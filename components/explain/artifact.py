"""The Explainer's artifact type: a folder of attribution maps (`store.py`).

Its TYPE_NAME is `tpu_pipeline.ModelExplanation`, the product's import name and the class's
name, because TFX 1.16's Vertex AI step container rebuilds a custom artifact type by
importing the compiled spec's schema title as a class path: the name must import.
`tpu_pipeline/__init__.py` answers that import with this class; ML Metadata keeps the
same name, locally too. A type TFX defines is used wherever one fits; this one has none.
"""

from tpu_pipeline.common.tfx_api import Artifact


class ModelExplanation(Artifact):
    """The Explainer's output: a folder of attribution maps."""

    TYPE_NAME = "tpu_pipeline.ModelExplanation"
