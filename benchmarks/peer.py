"""Runs TFX's own MNIST example pipeline on our mnist.tfrecord, two ways.

`tfx.examples.mnist.mnist_pipeline_native_keras` is installed with TFX; only
its paths are replaced (its `__main__` reads ~/mnist). As shipped it runs on
BeamDagRunner with Beam's multi-process direct runner; `--in-process` runs it
the way ours runs, for a like-for-like comparison: LocalDagRunner, one process,
no Beam flags. Prints its evaluation metrics as one JSON line, so the benchmark
compares accuracy as well as time.

    python -m benchmarks.peer WORKDIR [--in-process]
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import sys

from tpu_pipeline import common  # noqa: F401 (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from tpu_pipeline.common.config import BUILTIN_DATA_DIR


def main(workdir: pathlib.Path, in_process: bool = False) -> None:
    from tfx.examples.mnist import mnist_pipeline_native_keras as peer
    from tfx.orchestration.beam.beam_dag_runner import BeamDagRunner

    from tpu_pipeline.common.tfx_api import LocalDagRunner
    from tpu_pipeline.components.evaluation.results import overall_metrics

    data_root = workdir / "data"
    data_root.mkdir(parents=True, exist_ok=True)
    # ImportExampleGen reads every file of its folder; ours also holds a README.
    # The .gz suffix tells its TFRecord reader the file is gzipped.
    shutil.copy(BUILTIN_DATA_DIR / "mnist" / "mnist.tfrecord.gz", data_root / "mnist.tfrecord.gz")
    pipeline_root = workdir / "pipeline_root"
    runner = LocalDagRunner() if in_process else BeamDagRunner()
    runner.run(
        peer._create_pipeline(
            pipeline_name="mnist_native_keras",
            pipeline_root=str(pipeline_root),
            data_root=str(data_root),
            module_file=os.path.join(os.path.dirname(peer.__file__), "mnist_utils_native_keras.py"),
            serving_model_dir=str(workdir / "serving_model"),
            metadata_path=str(workdir / "metadata.db"),
            beam_pipeline_args=[] if in_process else peer._beam_pipeline_args,
        )
    )
    evaluation = next(pipeline_root.glob("Evaluator.mnist/evaluation/*"))
    metrics, _ = overall_metrics(str(evaluation))
    print("PEER_METRICS " + json.dumps(metrics), flush=True)


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]), in_process="--in-process" in sys.argv[2:])
