"""`tpu-pipeline predict --data-dir photos` with nothing else, on the pipeline's digits model.

The folder is recognised as `run` recognises one (class folders: also scored; a flat
folder: predicted without labels), in the model's own classes and image shape: the
digits model was trained on 8x8 float pixels, the folder holds PNG photos of digits,
decoded into the model's pixels. A class folder the model does not know stops the job
with exit 3 before anything is written.
"""

from __future__ import annotations

import csv
import json
import pathlib

import pytest

from tests.cli.digit_photos import write_digit_photos
from tpu_pipeline.cli.main import EXIT_DATA_REJECTED, EXIT_OK, main

pytestmark = pytest.mark.slow


def _predict(capfd, model, data_dir, output):
    code = main(
        ["predict", "--model", str(model), "--data-dir", str(data_dir), "--output", str(output)]
    )
    out, err = capfd.readouterr()
    return code, out, err


def test_a_folder_of_class_folders_alone_is_predicted_and_scored_in_the_models_terms(
    digits_run, tmp_path, capfd
):
    config, _ = digits_run
    photos = write_digit_photos(tmp_path / "my digits", per_class=3)
    output = tmp_path / "p.csv"

    code, out, err = _predict(capfd, config.run_dir, photos, output)

    assert code == EXIT_OK, err
    lines = err.splitlines()
    assert lines[0].startswith(
        f"tpu-pipeline: recognised {photos}: class folders: 30 photos of 10 classes"
    ), err
    (note,) = [line for line in lines if "the model's terms" in line]
    assert "its image shape 8x8x1 (the photos are resized and converted to it)" in note
    rows = list(csv.DictReader(output.open()))
    assert len(rows) == 30 and all(row["label"] for row in rows)
    accuracy = sum(row["class"] == row["label"] for row in rows) / len(rows)
    assert accuracy > 0.8  # the model's own digits, as PNGs: read right, labels right
    assert "wrote 30 predictions" in out and "30 labelled, accuracy" in out


def test_a_flat_folder_of_photos_is_predicted_without_labels(digits_run, tmp_path, capfd):
    config, _ = digits_run
    incoming = write_digit_photos(tmp_path / "incoming", per_class=12, classes={"": 7})
    output = tmp_path / "p.csv"

    code, out, err = _predict(capfd, config.run_dir, incoming, output)

    assert code == EXIT_OK, err
    assert err.splitlines()[0] == (
        f"tpu-pipeline: recognised {incoming}: 12 photos without class folders, grayscale "
        "(1 channel): predicted without labels"
    )
    rows = list(csv.DictReader(output.open()))
    assert len(rows) == 12 and not any(row["label"] for row in rows)
    assert sum(row["class_name"] == "7" for row in rows) > 9  # twelve sevens, seen as such
    assert "labelled" not in out


def test_class_folders_the_model_does_not_know_stop_with_one_line_and_exit_3(
    digits_run, tmp_path, capfd
):
    config, _ = digits_run
    photos = write_digit_photos(tmp_path / "pets", per_class=6, classes={"cat": 3, "dog": 5})
    output = tmp_path / "p.csv"

    code, _, err = _predict(capfd, config.run_dir, photos, output)

    assert code == EXIT_DATA_REJECTED
    assert err.splitlines()[-1] == (
        f"tpu-pipeline: {photos}: class folder cat is not a class of the model "
        "(0, 1, 2, 3, 4, 5, 6, 7, 8, 9); predict it with the model trained on it, or move it out"
    )
    assert not output.exists()


def test_the_pushed_model_keeps_the_dataset_fields_it_answers_in(digits_run):
    _, summary = digits_run
    info = json.loads(
        (pathlib.Path(summary.pushed_model) / "assets.extra" / "training_info.json").read_text()
    )

    kept = info["dataset"]
    assert (kept["image_shape"], kept["num_classes"]) == ([8, 8, 1], 10)
    assert (kept["pixel_feature"], kept["label_feature"], kept["format"]) == (
        "pixels",
        "label",
        "tfrecord",
    )
    assert kept["source"]["image_value_range"] == [0.0, 16.0]  # how its photos are scaled
