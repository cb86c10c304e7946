"""What only Vertex AI Pipelines / Kubeflow needs: runner, containers, schedules.

The pipeline definition itself is shared with local runs: `tpu_pipeline.pipeline.wiring.graph.create_pipeline`.
"""

from tpu_pipeline import common  # noqa: F401 (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
