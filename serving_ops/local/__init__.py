"""The local backend: a run folder's serving folder (`serving_model/`) and ML Metadata store."""
