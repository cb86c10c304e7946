"""A run folder's runs, read back from ML Metadata without TensorFlow.

`history` notes what a run knows at its end (its configuration, its summary, the
fingerprint of its inputs) on the run's own `pipeline_run` context, and reads every
run of a folder back, newest first, with what ML Metadata itself records (when, which
span, which model, which version was pushed). `compare` says what differs between two
runs, down to the eval examples that flipped; `text` writes both for the terminal.
`tpu-pipeline runs`, `runs diff` and the report's run history read them.
"""
