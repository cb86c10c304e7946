"""What only Vertex AI Pipelines / Kubeflow needs: runner, containers, schedules.

The pipeline definition itself is shared with local runs: `pipeline.pipeline.create_pipeline`.
"""
