"""The quick look at an image folder: training photos counted, their sizes from headers."""

from __future__ import annotations

from PIL import Image

from tpu_pipeline.common.config import load_config
from tpu_pipeline.pipeline.data_tools.data_survey import survey_image_folder


def _photo(path, size):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, (120, 30, 200)).save(path)


def _folder_config(data_dir, **dataset):
    fields = {
        "name": "pets",
        "data_dir": str(data_dir),
        "format": "image_folder",
        "pixel_feature": "image",
        "label_feature": "label",
        "num_classes": 2,
        **dataset,
    }
    return load_config(None, {"dataset": fields}).dataset


def test_a_folder_per_class_counts_the_train_share_and_the_median_shorter_side(tmp_path):
    for i in range(8):
        _photo(tmp_path / "cat" / f"{i}.jpg", (300, 200))
        _photo(tmp_path / "dog" / f"{i}.png", (90, 400))
    (tmp_path / "dog" / "notes.txt").write_text("not a photo")  # skipped, not fatal

    survey = survey_image_folder(_folder_config(tmp_path, eval_percent=25))

    assert survey.train_examples == 13  # 75% of 17 files
    assert survey.median_short_side in (90, 200)
    assert survey.sampled == 16


def test_split_folders_and_patterns_name_the_training_photos(tmp_path):
    for split, count in (("train", 6), ("validation", 2)):
        for i in range(count):
            _photo(tmp_path / split / "a" / f"{i}.jpg", (64, 64))

    by_folder = survey_image_folder(_folder_config(tmp_path, file_pattern="*/*/*"))
    by_pattern = survey_image_folder(
        _folder_config(
            tmp_path, split_patterns={"train": "train/*/*.jpg", "eval": "validation/*/*.jpg"}
        )
    )

    assert by_folder.train_examples == by_pattern.train_examples == 6
    assert by_pattern.median_short_side == 64


def test_other_formats_and_empty_folders_have_no_survey(tmp_path):
    assert survey_image_folder(load_config(None, {}).dataset) is None
    assert survey_image_folder(_folder_config(tmp_path)) is None


def test_the_default_pattern_is_example_gens():
    from tpu_pipeline.components.example_gen.formats import source_format
    from tpu_pipeline.pipeline.data_tools.data_survey import IMAGE_FOLDER_PATTERN

    assert source_format(_folder_config("/x")).default_pattern == IMAGE_FOLDER_PATTERN
