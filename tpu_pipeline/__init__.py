"""Artifact types of our own, importable by their type name.

TFX 1.16's Vertex AI compiler writes a custom artifact type into the pipeline spec under its
TYPE_NAME, which must read `namespace.Type`; the step's container entrypoint
(`kubeflow_v2_entrypoint_utils`) turns that title back into a class by importing it as a
class path. So each type here is named `tpu_pipeline.<Class>` and lives at the top of this
package: the name a step's container imports, and the one ML Metadata keeps, locally too.
Types TFX defines itself are used where one fits; this package holds only the others.
"""

from tpu_pipeline.common.tfx_api import Artifact


class ModelExplanation(Artifact):
    """The Explainer's output: a folder of attribution maps (`components/explain/store.py`)."""

    TYPE_NAME = "tpu_pipeline.ModelExplanation"
