"""`tpu-pipeline predict` tells when the images it is given have moved from the model's own.

On the pipeline's pushed digits model, through the real CLI: a fresh sample of real
digits stays quiet; real photos of hands at the digits' 8x8 gray are a shift, named in
one line on stderr, in the summary JSON and on the webhook, and `--fail-on-drift`
makes it exit 3 with the predictions written all the same.
"""

from __future__ import annotations

import json
import pathlib
import shutil

import numpy as np
import pytest
from PIL import Image
from sklearn.datasets import load_digits

from tests.common.webhook_server import webhook_server
from tpu_pipeline.cli.main import main
from tpu_pipeline.common.config import BUILTIN_DATA_DIR
from tpu_pipeline.components.drift.reference import REFERENCE_PATH

pytestmark = pytest.mark.slow

DIGITS = 1797  # scikit-learn's digits, all of them the pipeline's data
SIGNALS = {"brightness", "contrast", "sharpness", "confidence", "predicted_class", "unsure"}
COMPARED = SIGNALS - {"confidence"}  # compared as the share of unsure answers


def _write_npz(folder, images: np.ndarray, labels: np.ndarray):
    folder.mkdir(parents=True)
    np.savez(folder / "images.npz", x_train=images.astype(np.float32), y_train=labels)
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Two folders of 200 8x8 images each: real digits, and the shipped hand photos."""
    root = tmp_path_factory.mktemp("kinds")
    rng = np.random.default_rng(7)
    digits = load_digits()
    chosen = rng.choice(len(digits.images), 200, replace=False)
    same = _write_npz(root / "digits", digits.images[chosen], digits.target[chosen])
    photos = sorted((BUILTIN_DATA_DIR / "sign-language-digits").glob("*/*/*.JPG"))[:200]
    hands = np.stack(
        [
            np.asarray(Image.open(p).convert("L").resize((8, 8)), np.float32) * 16 / 255
            for p in photos
        ]
    )
    other = _write_npz(root / "hands", hands, np.array([int(p.parent.name) for p in photos]))
    return same, other


def _predict(capfd, model, data_dir, output, *extra):
    flags = ["--model", str(model), "--data-dir", str(data_dir), "--output", str(output)]
    code = main(["predict", *flags, "--format", "npz", *extra])
    out, err = capfd.readouterr()
    return code, out, err


def test_the_pushed_model_keeps_the_signals_of_its_training_and_eval_images(digits_run):
    config, summary = digits_run
    kept = json.loads((pathlib.Path(summary.pushed_model) / REFERENCE_PATH).read_text())
    # Image signals of the training split, the model's answers on the eval split (whole
    # here: digits' splits are under serving.measured_examples).
    assert set(kept["train"]) == {"brightness", "contrast", "sharpness"}
    assert set(kept["eval"]) == {"predicted_class", "confidence"}  # unsure: the job's threshold
    assert len(kept["eval"]["confidence"]) == summary.metrics["example_count"]
    assert len(kept["train"]["brightness"]) == DIGITS - summary.metrics["example_count"]
    assert config.serving.measured_examples > DIGITS


def test_a_fresh_sample_of_real_digits_is_no_shift(digits_run, folders, tmp_path, capfd):
    config, _ = digits_run
    summary_path = tmp_path / "summary.json"
    code, out, err = _predict(
        capfd, config.run_dir, folders[0], tmp_path / "p.csv",
        "--fail-on-drift", "--summary-json", str(summary_path),
    )  # fmt: skip
    assert code == 0, err
    (line,) = [line for line in err.splitlines() if line.startswith("data shift:")]
    assert line.startswith("data shift: none in 5 signals of 200 records"), line
    drift = json.loads(summary_path.read_text())["drift"]
    assert drift["checked"] and not drift["shifted"]
    assert {signal["signal"] for signal in drift["signals"]} == COMPARED
    assert "wrote 200 predictions" in out


def test_photos_of_hands_are_a_shift_in_one_line_on_the_webhook_and_exit_3_if_asked(
    digits_run, folders, tmp_path, capfd
):
    config, _ = digits_run
    output = tmp_path / "p.jsonl"
    with webhook_server() as (url, server):
        code, out, err = _predict(
            capfd, config.run_dir, folders[1], output, "--fail-on-drift",
            "--summary-json", str(tmp_path / "s.json"), "--set", f"notify.webhook={url}",
        )  # fmt: skip
    assert code == 3, err
    (line,) = [line for line in err.splitlines() if line.startswith("data shift:")]
    assert line.startswith("data shift: ") and "signals moved from the model's reference" in line
    for moved in ("brightness", "contrast", "predicted_class"):
        assert moved in line
    assert "Traceback" not in err
    assert len(output.read_text().splitlines()) == 200  # written all the same
    drift = json.loads((tmp_path / "s.json").read_text())["drift"]
    shifted = {s["signal"] for s in drift["signals"] if s["shifted"]}
    assert {"brightness", "contrast", "predicted_class"} <= shifted
    ((_, message),) = server.received
    assert "the data moved" in message["text"]
    assert line in json.dumps(message)

    # Without --fail-on-drift a shift is told, not an error.
    code, _, err = _predict(capfd, config.run_dir, folders[1], tmp_path / "again.csv")
    assert code == 0 and "signals moved" in err


def test_a_model_without_a_reference_a_damaged_one_and_a_handful_of_images_say_why_not(
    digits_run, folders, tmp_path, capfd
):
    config, summary = digits_run
    copy = tmp_path / "serving_model" / "1"
    shutil.copytree(summary.pushed_model, copy)
    (copy / REFERENCE_PATH).unlink()
    code, _, err = _predict(capfd, copy, folders[1], tmp_path / "p.csv", "--fail-on-drift")
    assert code == 0, err
    assert f"data shift: not checked: {copy} keeps no {REFERENCE_PATH}" in err

    (copy / REFERENCE_PATH).write_text('{"train": {"brightness": [4.5')  # cut off
    code, _, err = _predict(capfd, copy, folders[1], tmp_path / "d.csv", "--fail-on-drift")
    assert code == 0 and (tmp_path / "d.csv").exists(), err
    assert f"data shift: not checked: {copy / REFERENCE_PATH} is damaged (JSONDecodeError" in err
    assert "Traceback" not in err

    few = _write_npz(tmp_path / "few", np.zeros((5, 8, 8)), np.zeros(5, dtype=np.int64))
    code, _, err = _predict(capfd, config.run_dir, few, tmp_path / "q.csv", "--fail-on-drift")
    assert code == 0, err
    assert "data shift: not checked: 5 records, under drift.min_records (30)" in err
