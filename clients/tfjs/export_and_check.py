"""Converts the newest pushed model to a TF.js graph model and proves it in Node (`make tfjs`).

The converter cannot run inside the pipeline's locked stack (docs/serving/tfjs.md
says why), so it runs from its own environment (`.tfjs-venv`, from
clients/tfjs/requirements.lock) on the pushed SavedModel's `pixels` signature.
The result is kept only if pure-JS TensorFlow.js in Node (predict.js) gives the
SavedModel's predictions on the run's eval examples: same class for every
example, probabilities within 1e-4. It lands in `<run>/tfjs/<version>/`, named
after the model version it was converted from.

    .venv/bin/python clients/tfjs/export_and_check.py [--config FILE] [--set FIELD=VALUE ...]
"""

from __future__ import annotations

import argparse
import glob
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import tensorflow as tf

from tpu_pipeline.common.config import load_config
from tpu_pipeline.components.serving.export import (
    PIXELS_INPUT_KEY,
    PIXELS_SIGNATURE,
    SERVING_OUTPUT_KEY,
)
from tpu_pipeline.components.serving.publish import pushed_versions
from tpu_pipeline.components.serving.tflite_variants import read_split

HERE = pathlib.Path(__file__).resolve().parent
TOLERANCE = 1e-4


def newest_eval_files(pipeline_root: pathlib.Path) -> list[str]:
    """The eval split of the run's newest ExampleGen output."""
    splits = glob.glob(str(pipeline_root / "*ExampleGen" / "examples" / "*" / "Split-eval"))
    if not splits:
        raise SystemExit(f"no ExampleGen eval split under {pipeline_root}: run `make run` first")
    newest = max(splits, key=lambda path: int(pathlib.Path(path).parent.name))
    return sorted(glob.glob(f"{newest}/*"))


def convert(converter: str, saved_model_dir: str, output_dir: pathlib.Path) -> None:
    """Runs `tensorflowjs_converter` on the `pixels` signature (TF.js cannot parse examples)."""
    command = [
        converter,
        "--input_format=tf_saved_model",
        f"--signature_name={PIXELS_SIGNATURE}",
        "--saved_model_tags=serve",
        saved_model_dir,
        str(output_dir),
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"tensorflowjs_converter failed:\n{result.stderr[-3000:]}")


def predict_in_node(model_dir: pathlib.Path, pixels: np.ndarray, work_dir: pathlib.Path) -> dict:
    samples = work_dir / "samples.json"
    flat = pixels.reshape(len(pixels), -1)
    samples.write_text(json.dumps({"shape": list(pixels.shape[1:]), "pixels": flat.tolist()}))
    result = subprocess.run(
        ["node", str(HERE / "predict.js"), str(model_dir), str(samples)],
        capture_output=True,
        text=True,
        cwd=HERE,
    )
    if result.returncode != 0:
        raise SystemExit(f"node predict.js failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="the run's configuration file")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    parser.add_argument("--converter", default=".tfjs-venv/bin/tensorflowjs_converter")
    args = parser.parse_args(argv)
    overrides = dict(item.split("=", 1) for item in args.set)
    config = load_config(args.config, overrides)

    versions = pushed_versions(str(config.serving_dir))
    if not versions:
        raise SystemExit(f"no pushed model under {config.serving_dir}: run `make run` first")
    version_dir = str(config.serving_dir / versions[-1])
    pixels, labels = read_split(newest_eval_files(config.pipeline_root), config.dataset)
    serve = tf.saved_model.load(version_dir).signatures[PIXELS_SIGNATURE]
    expected = serve(**{PIXELS_INPUT_KEY: tf.constant(pixels)})[SERVING_OUTPUT_KEY].numpy()

    destination = config.run_dir / "tfjs" / versions[-1]
    with tempfile.TemporaryDirectory() as work:
        work_dir = pathlib.Path(work)
        convert(args.converter, version_dir, work_dir / "model")
        result = predict_in_node(work_dir / "model", pixels, work_dir)
        got = np.array(result["probabilities"])
        largest_difference = float(np.abs(got - expected).max())
        same_class = float(np.mean(got.argmax(axis=1) == expected.argmax(axis=1)))
        print(
            f"TF.js ({result['backend']} backend) vs SavedModel on {len(labels)} eval examples: "
            f"same class {same_class:.2%}, largest probability difference "
            f"{largest_difference:.1e}; accuracy {np.mean(got.argmax(axis=1) == labels):.4f} "
            f"vs {np.mean(expected.argmax(axis=1) == labels):.4f}"
        )
        if same_class < 1 or largest_difference > TOLERANCE:
            print("TF.js model does not match the SavedModel; not kept", file=sys.stderr)
            return 1
        if destination.exists():
            shutil.rmtree(destination)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(work_dir / "model"), destination)
    size = sum(path.stat().st_size for path in destination.iterdir())
    print(f"TF.js graph model ({size / 1024:.0f} KB) of version {versions[-1]}: {destination}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
