"""Batch predictions: a pushed model over a folder of raw files, as readable rows.

Why it lives in `pipeline/`: it is a Beam job the `tpu-pipeline predict` command
runs, not code TFX calls, so it does not belong in `components/`; and it is
built from `components/` pieces (ExampleGen's format readers and checks, the
serving signature's names, the Pusher's version layout), which only layers
above `components/` may import. `cli/predict_command.py` parses the flags and
calls `run_batch_predictions`.

- `model_path.py`: which SavedModel a `--model` path means (a version, or the newest).
- `predictions.py`: one prediction as a row (top-k, class names) in each output format.
- `outputs.py`: the output file, chosen by its extension, written aside and renamed.
- `job.py`: the Beam pipeline: read and check records, batch, predict, write.
"""

from pipeline.batch_predict.job import BatchResult, run_batch_predictions

__all__ = ["BatchResult", "run_batch_predictions"]
