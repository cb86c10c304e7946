"""What a run is made of: the TFX graph (`graph.py`), its node ids, the data folder it reads,
the defaults chosen from that data (`recipe.py`) and the fingerprint of its inputs.

The same graph compiles for Vertex AI (`kubeflow/`) and runs locally (`pipeline/local/`).
"""
