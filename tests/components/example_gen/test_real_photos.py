"""The real photos the repository ships, through the real ExampleGen executor."""

from __future__ import annotations

import hashlib
import io

import pytest
from PIL import Image

from tests.components.example_gen.conftest import SIGN_DIGITS, real_photos, run_executor
from tpu_pipeline.common.config import DatasetConfig

SPLIT_FOLDERS = {"train": "train", "eval": "validation"}


def _dataset(**source) -> DatasetConfig:
    return DatasetConfig(
        name="sign-digits",
        data_dir=str(SIGN_DIGITS),
        format="image_folder",
        split_patterns={"train": "train/*/*.JPG", "eval": "validation/*/*.JPG"},
        image_shape=(100, 100, 3),
        pixel_feature="image",
        label_feature="label",
        num_classes=10,
        source={"resize": True, **source},  # one stray photo is 3024x3024
    )


def _stored(examples) -> dict[str, tuple[bytes, int]]:
    """{sha256 of the stored image: (image bytes, label)} of each example."""
    stored = {}
    for example in examples:
        features = example.features.feature
        assert set(features) == {"image", "label", "image_height", "image_width", "image_format"}
        assert features["image_format"].bytes_list.value == [b"jpeg"]
        (image,) = features["image"].bytes_list.value
        stored[hashlib.sha256(image).hexdigest()] = (image, features["label"].int64_list.value[0])
    return stored


def _files(split: str) -> dict[str, tuple[bytes, int]]:
    """The same, of the photo files in a split's folder; the label is the class folder."""
    files = {}
    for path in real_photos():
        if path.parts[-3] == SPLIT_FOLDERS[split]:
            data = path.read_bytes()
            files[hashlib.sha256(data).hexdigest()] = (data, int(path.parent.name))
    return files


@pytest.fixture(scope="module")
def photo_splits(tmp_path_factory):
    output = tmp_path_factory.mktemp("photos") / "examples"
    return output, run_executor(_dataset(), SIGN_DIGITS, output)


def test_real_photos_are_stored_as_their_files_bytes_with_their_folders_labels(photo_splits):
    _, splits = photo_splits

    for split in ("train", "eval"):
        assert _stored(splits[split]) == _files(split), split
    assert (len(splits["train"]), len(splits["eval"])) == (241, 60)


def test_the_same_photos_are_written_to_the_same_shards_in_the_same_order(photo_splits, tmp_path):
    first_output, _ = photo_splits

    run_executor(_dataset(), SIGN_DIGITS, tmp_path / "again")

    for split in ("Split-train", "Split-eval"):
        first = sorted((first_output / split).iterdir())
        again = sorted((tmp_path / "again" / split).iterdir())
        assert [path.name for path in first] == [path.name for path in again]
        assert [path.read_bytes() for path in first] == [path.read_bytes() for path in again]
    assert len(list((first_output / "Split-train").iterdir())) == 4  # 241 photos: ~64 a file
    assert len(list((first_output / "Split-eval").iterdir())) == 1


def test_max_image_side_shrinks_only_the_stray_phone_photo(tmp_path):
    splits = run_executor(_dataset(max_image_side=256), SIGN_DIGITS, tmp_path / "examples")

    stored, files = _stored(splits["train"]), _files("train")
    changed = [image for key, (image, _) in stored.items() if key not in files]
    (shrunk,) = changed  # every other photo is at most 256 pixels a side: bytes unchanged
    assert Image.open(io.BytesIO(shrunk)).size == (256, 256)
    assert len(shrunk) < 100_000 < max(len(data) for data, _ in files.values())
    assert len(stored) == len(files)
