"""Runs TFX's own MNIST example pipeline, with its own settings, on our mnist.tfrecord.

`tfx.examples.mnist.mnist_pipeline_native_keras` is installed with TFX; only
its paths are replaced (its `__main__` reads ~/mnist). Prints its evaluation
metrics as one JSON line, so the benchmark compares accuracy as well as time.

    python -m benchmarks.peer WORKDIR
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import sys

import common  # noqa: F401 (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from common.config import BUILTIN_DATA_DIR


def main(workdir: pathlib.Path) -> None:
    from tfx.examples.mnist import mnist_pipeline_native_keras as peer
    from tfx.orchestration.beam.beam_dag_runner import BeamDagRunner

    from pipeline.evaluation_results import overall_metrics

    data_root = workdir / "data"
    data_root.mkdir(parents=True, exist_ok=True)
    # ImportExampleGen reads every file of its folder; ours also holds a README.
    # The .gz suffix tells its TFRecord reader the file is gzipped.
    shutil.copy(BUILTIN_DATA_DIR / "mnist" / "mnist.tfrecord.gz", data_root / "mnist.tfrecord.gz")
    pipeline_root = workdir / "pipeline_root"
    BeamDagRunner().run(
        peer._create_pipeline(
            pipeline_name="mnist_native_keras",
            pipeline_root=str(pipeline_root),
            data_root=str(data_root),
            module_file=os.path.join(os.path.dirname(peer.__file__), "mnist_utils_native_keras.py"),
            serving_model_dir=str(workdir / "serving_model"),
            metadata_path=str(workdir / "metadata.db"),
            beam_pipeline_args=peer._beam_pipeline_args,
        )
    )
    evaluation = next(pipeline_root.glob("Evaluator.mnist/evaluation/*"))
    metrics, _ = overall_metrics(str(evaluation))
    print("PEER_METRICS " + json.dumps(metrics), flush=True)


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
