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
- `records.py`: the first step: each file's records, checked as ExampleGen checks them.
- `model_handler.py`: the model step's handler for Beam's RunInference (`serving_default`).
- `job.py`: the Beam pipeline: read and check records, batch, predict, count, write.
"""

from tpu_pipeline.pipeline.batch_predict.job import BatchResult, run_batch_predictions

__all__ = ["BatchResult", "run_batch_predictions"]
