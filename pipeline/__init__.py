"""The pipeline layer, by concern: `wiring/` builds the TFX graph and its inputs, `local/`
runs it on this machine, `results/` says what a run did, `data_tools/` looks at data before
a run; `report/`, `runs/`, `tracking/` and `batch_predict/` build on those."""

from tpu_pipeline import common  # noqa: F401 (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
