"""The Vertex AI backend: the Model Registry entry, Vertex ML Metadata and the endpoint."""
