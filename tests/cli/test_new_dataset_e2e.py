"""A user's own data through the CLI: one command from MNIST-style IDX files to a pushed model.

The first run of a dataset without a schema bootstraps it with TFDV, says so in
one line and trains on; the second run uses that schema unchanged. The class
names the configuration gives show in the summary, the report and TensorBoard.
IDX pixels are unsigned bytes, stored as bytes (`stores_8bit_pixels`): the
bootstrapped schema says BYTES, and the pushed model serves the stored examples
and the same pixels as floats alike.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import tensorflow as tf
from ml_metadata.proto import metadata_store_pb2

from tests.components.example_gen.conftest import record_ends
from tests.pipeline.e2e_helpers import (
    eval_answers,
    executions_of,
    mlmd_store,
    serving_accuracy,
    split_files,
)
from tests.pipeline.report.page_claims import false_sentences, read_page
from tpu_pipeline.cli.main import EXIT_DATA_REJECTED, main
from tpu_pipeline.cli.synthetic_data import write_synthetic
from tpu_pipeline.common.config import load_config
from tpu_pipeline.components.images.examples import parse_pixels
from tpu_pipeline.components.serving.temperature import calibration_error
from tpu_pipeline.pipeline.report import write_report_files
from tpu_pipeline.pipeline.report.collect import SAMPLES_SHOWN, collect_report
from tpu_pipeline.pipeline.report.tensorboard_logs import summary_kinds
from tpu_pipeline.pipeline.wiring.data_sources import write_digits_tfrecord

pytestmark = pytest.mark.slow

NAMES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def _write_config(tmp_path, schema_file) -> str:
    data_dir = write_synthetic(tmp_path / "raw", "idx", 600, "mnist", 120, seed=3)
    config = tmp_path / "own-digits.yaml"
    config.write_text(
        f"""
output_dir: {tmp_path / "out"}
dataset:
  name: own-digits
  data_dir: {data_dir}
  format: idx
  image_shape: [28, 28, 1]
  pixel_feature: pixels
  label_feature: label
  num_classes: 10
  schema_file: {schema_file}
  source:
    label_names: [{", ".join(NAMES)}]
trainer:
  train_steps: 120
serving:
  tflite_variants: []
  temperature_scaling: true
"""
    )
    return str(config)


def _assert_pixels_signature_serves_the_stored_examples_floats(saved_model_dir, config):
    """`pixels` on the floats the stored bytes decode to predicts what `serving_default` does."""
    records = [r.numpy() for r in tf.data.TFRecordDataset(split_files(config, "eval"), "GZIP")]
    pixels, _ = parse_pixels(tf.constant(records[:32]), config.dataset)
    signatures = tf.saved_model.load(str(saved_model_dir)).signatures
    from_examples = signatures["serving_default"](examples=tf.constant(records[:32]))
    from_pixels = signatures["pixels"](pixels=pixels)
    np.testing.assert_allclose(
        from_pixels["probabilities"], from_examples["probabilities"], atol=1e-6
    )


def _assert_the_served_model_carries_its_temperature_fit(summary: dict, config) -> None:
    """The fit on the 120 eval digits is what the served model's answers and the
    Evaluator's calibration error show: after the scaling if it was applied, else before."""
    fit = summary["trainer"]["temperature_scaling"]
    assert fit["examples"] == 120
    assert fit["applied"] == (fit["calibration_error_after"] < fit["calibration_error_before"])
    served = fit["calibration_error_after" if fit["applied"] else "calibration_error_before"]
    probabilities, labels = eval_answers(summary["pushed_model"], config)
    assert calibration_error(probabilities, labels) == pytest.approx(served, abs=1e-6)
    assert summary["calibration"]["expected_calibration_error"] == pytest.approx(served, abs=1e-4)


def _run(config: str, summary_path, capfd) -> tuple[int, str, dict]:
    code = main(["run", "--config", config, "--summary-json", str(summary_path)])
    _, err = capfd.readouterr()
    return code, err, json.loads(summary_path.read_text())


def test_first_run_of_a_new_dataset_bootstraps_its_schema_and_trains(tmp_path, capfd):
    schema_file = tmp_path / "schemas" / "own-digits" / "schema.pbtxt"
    config_file = _write_config(tmp_path, schema_file)
    config = load_config(config_file)

    code, err, summary = _run(config_file, tmp_path / "first.json", capfd)

    assert code == 0, err
    assert summary["succeeded"] and summary["blessed"] and summary["pushed_model"]
    assert schema_file.exists() and summary["schema_bootstrapped"] == str(schema_file)
    told = [line for line in err.splitlines() if line.startswith("schema:")]
    assert len(told) == 1, err
    assert told[0].startswith(f"schema: wrote {schema_file}, inferred by TFDV")
    assert re.search(r"\(label 0 to 9, shape \[1\]; pixels bytes, shape \[1\]\)", told[0])
    assert "review it before relying on it" in told[0]
    # ExampleGen ran once, before the schema; the whole run then took it from the cache.
    shown = [line for line in err.splitlines() if "] ExampleGen" in line]
    assert len(shown) == 2 and "executed" in shown[1], err  # its running and result lines
    states = [e.last_known_state for e in executions_of(mlmd_store(config), config, "ExampleGen")]
    assert states == [metadata_store_pb2.Execution.COMPLETE, metadata_store_pb2.Execution.CACHED]
    statuses = {c["id"]: c["status"] for c in summary["components"]}
    assert statuses["ExampleGen"] == "executed" and statuses["Trainer"] == "executed"
    assert summary["metrics"]["example_count"] == 120  # the t10k files' own test split
    assert serving_accuracy(summary["pushed_model"], config) == pytest.approx(
        summary["metrics"]["accuracy"], abs=1e-6
    )
    _assert_pixels_signature_serves_the_stored_examples_floats(summary["pushed_model"], config)
    _assert_the_served_model_carries_its_temperature_fit(summary, config)

    # Class names wherever classes are shown: summary, report, TensorBoard.
    assert summary["class_names"] == NAMES
    per_class = summary["per_class_metrics"]
    assert [c["class_name"] for c in per_class] == NAMES
    assert sum(c["examples"] for c in per_class) == sum(c["predicted"] for c in per_class) == 120
    report = collect_report(config.run_dir)
    assert report.class_names == NAMES
    assert [c.class_name for c in report.evaluation.per_class] == NAMES
    html = (config.run_dir / "report" / "report.html").read_text(encoding="utf-8")
    for name in NAMES:
        assert f"<tr><td>{name}</td>" in html
    # The data was checked against the schema inferred from it, the run's and the rebuilt
    # report say so (the rebuilt one from ML Metadata), and the bytes pixels show a size.
    rebuilt = write_report_files(report, tmp_path / "rebuilt").html.read_text(encoding="utf-8")
    assert report.summary.schema_bootstrapped == str(schema_file)
    for page in (html, rebuilt):
        assert "temperature scaling: T=" in page
        for section in ("data", "evaluation"):  # evaluation: the temperature fit's line
            assert false_sentences(read_page(page), report, section) == []
        assert "this run inferred the schema" in page and "curated" not in page
        assert "__BYTES_VALUE__" not in page and "binary, 784 B a value on average" in page
    samples = report.samples
    assert samples.examined == 120 and len(samples.predicted) == SAMPLES_SHOWN
    assert samples.images.shape[1:] == (28, 28, 1)
    assert 1 - samples.mistakes / samples.examined == pytest.approx(
        summary["metrics"]["accuracy"], abs=1e-6
    )
    log_dir = report.training.log_dir
    assert "classes" in summary_kinds(log_dir)["text"]
    events = tf.io.gfile.glob(f"{log_dir}/run/events.out.tfevents.*")
    written = b"".join(open(path, "rb").read() for path in events)
    assert b"| 3 | three |" in written

    # The second run uses the schema as it is: nothing new is inferred or written.
    bootstrapped = schema_file.read_bytes()
    code, err, summary = _run(config_file, tmp_path / "second.json", capfd)

    assert code == 0, err
    assert schema_file.read_bytes() == bootstrapped
    assert summary["schema_bootstrapped"] is None
    assert not [line for line in err.splitlines() if line.startswith("schema:")]
    statuses = {c["id"]: c["status"] for c in summary["components"]}
    assert statuses["ImportSchemaGen"] == statuses["Transform"] == "cached"


def test_a_new_dataset_whose_files_are_bad_is_rejected_and_gets_no_schema(tmp_path, capfd):
    data_dir = tmp_path / "cut"
    write_digits_tfrecord(data_dir / "digits.tfrecord")
    data = (data_dir / "digits.tfrecord").read_bytes()
    (data_dir / "digits.tfrecord").write_bytes(data[: record_ends(data)[99] + 3])
    schema_file = tmp_path / "letters.pbtxt"
    config = tmp_path / "letters.yaml"
    config.write_text(
        f"output_dir: {tmp_path / 'out'}\ndataset:\n  name: letters\n  data_dir: {data_dir}\n"
        "  image_shape: [8, 8, 1]\n  pixel_feature: pixels\n  label_feature: label\n"
        f"  num_classes: 10\n  schema_file: {schema_file}\n"
    )

    code = main(["run", "--config", str(config)])

    _, err = capfd.readouterr()
    assert code == EXIT_DATA_REJECTED, err
    assert "the file ends inside the header" in err  # ExampleGen's own error, not the schema's
    assert not schema_file.exists()
    assert "schema:" not in err
