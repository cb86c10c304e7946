"""Runs TFX's own MNIST example pipeline on our mnist.tfrecord, two ways.

`tfx.examples.mnist.mnist_pipeline_native_keras` is installed with TFX; only
its paths are replaced (its `__main__` reads ~/mnist). As shipped it runs on
BeamDagRunner with Beam's multi-process direct runner; `--in-process` runs it
the way ours runs, for a like-for-like comparison: LocalDagRunner, one process,
no Beam flags. `--train-steps N` trains N steps instead of the example's 5,000 (the
benchmark's smoke size). Prints its evaluation metrics as one JSON line, so the
benchmark compares accuracy as well as time.

    python -m benchmarks.peer WORKDIR [--in-process] [--train-steps N]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil

from tpu_pipeline import common  # noqa: F401 (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from tpu_pipeline.common.config import BUILTIN_DATA_DIR


def main(workdir: pathlib.Path, in_process: bool = False, train_steps: int | None = None) -> None:
    from tfx.examples.mnist import mnist_pipeline_native_keras as peer
    from tfx.orchestration.beam.beam_dag_runner import BeamDagRunner
    from tfx.proto import trainer_pb2
    from tfx.types.standard_component_specs import TRAIN_ARGS_KEY
    from tfx.utils import proto_utils

    from tpu_pipeline.common.tfx_api import LocalDagRunner
    from tpu_pipeline.components.evaluation.results import overall_metrics

    data_root = workdir / "data"
    data_root.mkdir(parents=True, exist_ok=True)
    # ImportExampleGen reads every file of its folder; ours also holds a README.
    # The .gz suffix tells its TFRecord reader the file is gzipped.
    shutil.copy(BUILTIN_DATA_DIR / "mnist" / "mnist.tfrecord.gz", data_root / "mnist.tfrecord.gz")
    pipeline_root = workdir / "pipeline_root"
    runner = LocalDagRunner() if in_process else BeamDagRunner()
    pipeline = peer._create_pipeline(
        pipeline_name="mnist_native_keras",
        pipeline_root=str(pipeline_root),
        data_root=str(data_root),
        module_file=os.path.join(os.path.dirname(peer.__file__), "mnist_utils_native_keras.py"),
        serving_model_dir=str(workdir / "serving_model"),
        metadata_path=str(workdir / "metadata.db"),
        beam_pipeline_args=[] if in_process else peer._beam_pipeline_args,
    )
    if train_steps is not None:  # its module trains one epoch of the steps it is given
        trainer = next(c for c in pipeline.components if TRAIN_ARGS_KEY in c.exec_properties)
        # The component keeps its arguments as JSON, as it compiles them.
        trainer.exec_properties[TRAIN_ARGS_KEY] = proto_utils.proto_to_json(
            trainer_pb2.TrainArgs(num_steps=train_steps)
        )
    runner.run(pipeline)
    evaluation = next(pipeline_root.glob("Evaluator.mnist/evaluation/*"))
    metrics, _ = overall_metrics(str(evaluation))
    print("PEER_METRICS " + json.dumps(metrics), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peer")
    parser.add_argument("workdir", type=pathlib.Path)
    parser.add_argument("--in-process", action="store_true")
    parser.add_argument("--train-steps", type=int)
    args = parser.parse_args()
    main(args.workdir, args.in_process, args.train_steps)
