"""`tpu-pipeline run --data-dir photos`, nothing else: a folder of class folders of real photos
runs to a report with the folders' class names and the photos' channels.

The photos are the shipped hand photos, copied into class folders with names (not digits),
without split folders, so the run carves its own eval split. Short training: what is
checked is that the folder is read right, not what the model learns.
"""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from tpu_pipeline.cli.main import EXIT_DATA_REJECTED, EXIT_OK, main
from tpu_pipeline.common.config import BUILTIN_DATA_DIR, load_config
from tpu_pipeline.components import imagenet_files
from tpu_pipeline.schemas import SCHEMAS_DIR

pytestmark = pytest.mark.slow

HANDS = BUILTIN_DATA_DIR / "sign-language-digits" / "train"
CLASSES = {"fist": "0", "palm": "5", "two": "2"}


@pytest.fixture(scope="module")
def folder_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("folder")
    photos = work / "Hand Signs"
    for name, digit in CLASSES.items():
        (photos / name).mkdir(parents=True)
        for photo in sorted((HANDS / digit).iterdir())[:12]:
            shutil.copy(photo, photos / name / photo.name)
    schemas_before = sorted(path.name for path in SCHEMAS_DIR.iterdir())
    argv = ["run", "--data-dir", str(photos), "--output-dir", str(work / "out")]
    short = [
        "--summary-json",
        str(work / "summary.json"),
        "--save-config",
        str(work / "hands.yaml"),
        "--train-steps",
        "6",
        "--set",
        "trainer.epochs=2",
        "--set",
        "evaluator.accuracy_lower_bound=0",
        "--set",
        "serving.tflite_variants=[float32]",
        "--set",
        "explain.mistakes=0",
        "--set",
        "explain.correct_per_class=0",
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(imagenet_files, "is_available", lambda weights: False)
        code = main([*argv, *short])
    summary = json.loads((work / "summary.json").read_text())
    return code, summary, work, schemas_before


def test_the_folder_alone_runs_with_its_class_names_and_colour(folder_run):
    code, summary, work, _ = folder_run

    assert code == EXIT_OK, summary["error"]
    assert summary["class_names"] == ["fist", "palm", "two"]
    assert summary["chosen_defaults"]["fields"]["dataset.image_shape"]["value"][2] == 3
    html = (work / "out" / "tpu-pipeline-hand-signs" / "report" / "report.html").read_text()
    assert all(name in html for name in CLASSES)


def test_its_schema_is_bootstrapped_in_the_run_folder_never_beside_the_built_ins(folder_run):
    _, summary, work, schemas_before = folder_run

    assert summary["schema_bootstrapped"] == str(
        work / "out" / "tpu-pipeline-hand-signs" / "schema" / "schema.pbtxt"
    )
    assert sorted(path.name for path in SCHEMAS_DIR.iterdir()) == schemas_before


def test_the_saved_configuration_pins_the_same_dataset(folder_run):
    _, _, work, _ = folder_run
    saved = yaml.safe_load((work / "hands.yaml").read_text())

    pinned = load_config(str(work / "hands.yaml")).dataset

    assert saved["dataset"]["source"]["label_names"] == ["fist", "palm", "two"]
    assert pinned.name == "hand-signs" and pinned.image_shape[2] == 3
    assert pinned.format == "image_folder" and pinned.num_classes == 3


def test_an_odd_folder_stops_with_one_line_and_exit_3_before_any_component(tmp_path, capfd):
    photos = tmp_path / "photos"
    for name in CLASSES:
        (photos / name).mkdir(parents=True)
    shutil.copy(next((HANDS / "0").iterdir()), photos / "fist")

    code = main(["run", "--data-dir", str(photos), "--output-dir", str(tmp_path / "out")])

    _, err = capfd.readouterr()
    assert code == EXIT_DATA_REJECTED
    assert err.strip() == f"tpu-pipeline: {photos / 'palm'}: a class folder without images"
    assert not (tmp_path / "out").exists()
