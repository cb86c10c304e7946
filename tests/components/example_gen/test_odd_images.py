"""Images that decode but are odd among the rest (a GIF "not found" placeholder among JPEG
photos, a thumbnail, one photo under two classes) are named in one line, or stop the run."""

from __future__ import annotations

import io
import json
import logging

import numpy as np
import pytest
from PIL import Image

from tests.components.example_gen.conftest import make_dataset, run_executor
from tpu_pipeline.components.example_gen.errors import DataFormatError
from tpu_pipeline.components.example_gen.executor import read_odd_images
from tpu_pipeline.components.example_gen.notices import NOTICE_PREFIX
from tpu_pipeline.components.example_gen.odd_images import ImageFact, find_odd_images


def fact(where, label=0, split=None, image_format="jpeg", side=400, digest=None):
    return ImageFact(where, label, split, image_format, side, side, (digest or where).encode())


def test_a_gif_among_jpegs_is_of_a_format_unlike_the_rest_but_half_png_is_not_odd():
    photos = [fact(f"cats/{i}.jpg") for i in range(20)] + [fact("cats/missing.gif", 0, None, "gif")]
    assert find_odd_images(photos).found == {"format": ["cats/missing.gif"]}
    mixed = [fact(f"{i}.jpg") for i in range(5)] + [
        fact(f"{i}.png", image_format="png") for i in range(5)
    ]
    assert find_odd_images(mixed).found == {}


def test_tiny_is_relative_to_the_median_side_and_absolute_below_16_pixels():
    photos = [fact(f"{i}.jpg", side=2000) for i in range(9)] + [fact("thumb.jpg", side=400)]
    found = find_odd_images(photos)
    assert found.found == {"tiny": ["thumb.jpg"]}  # under 2000/4 = 500 pixels
    assert found.median_side == 2000
    # A dataset of small images is not tiny; a 1x1 pixel is, whatever the rest are.
    digits = [fact(f"{i}.png", side=28) for i in range(9)] + [fact("pixel.png", side=1)]
    assert find_odd_images(digits).found == {"tiny": ["pixel.png"]}


def test_the_same_bytes_under_two_classes_or_in_both_splits_are_duplicates_a_copy_is_not():
    images = [
        fact("cats/a.jpg", 0, digest="x"),
        fact("dogs/a.jpg", 1, digest="x"),  # another class
        fact("train/cats/b.jpg", 0, "train", digest="y"),
        fact("eval/cats/b.jpg", 0, "eval", digest="y"),  # another split
        fact("cats/c.jpg", 0, digest="z"),
        fact("cats/c-copy.jpg", 0, digest="z"),  # a copy in its own class: not odd
    ]
    assert find_odd_images(images).found == {
        "duplicate": ["cats/a.jpg", "dogs/a.jpg", "eval/cats/b.jpg", "train/cats/b.jpg"]
    }


def test_the_line_names_the_first_files_of_each_kind_and_how_many_more():
    photos = [fact(f"{i:02}.jpg") for i in range(40)] + [
        fact(f"missing-{i}.gif", image_format="gif", side=8) for i in range(4)
    ]
    line = find_odd_images(photos).line()
    assert line.startswith("4 of 44 images are odd (median side 400 px, most are jpeg): ")
    assert "4 tiny (missing-0.gif, missing-1.gif, missing-2.gif and 1 more)" in line
    assert "4 of a format unlike the rest (missing-0.gif" in line


def _save(path, image: Image.Image, image_format: str) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    image.save(buffer, image_format)
    path.write_bytes(buffer.getvalue())
    return buffer.getvalue()


@pytest.fixture
def photo_folder(tmp_path):
    """12 JPEG photos of 2 classes, a GIF placeholder, a thumbnail, and one photo in both."""
    rng = np.random.default_rng(0)
    folder = tmp_path / "photos"
    for index in range(12):
        pixels = rng.integers(0, 256, (120, 160, 3), np.uint8)
        _save(folder / str(index % 2) / f"{index:02}.jpg", Image.fromarray(pixels), "JPEG")
    _save(folder / "0" / "not-found.gif", Image.new("P", (120, 160)), "GIF")
    _save(folder / "1" / "thumb.jpg", Image.fromarray(pixels[:20, :20]), "JPEG")
    (folder / "1" / "02-again.jpg").write_bytes((folder / "0" / "02.jpg").read_bytes())
    return folder


def _photo_dataset(**source):
    return make_dataset("image_folder", "cifar10", source=dict(resize=True, **source))


def test_examplegen_names_the_odd_photos_in_one_line_and_keeps_them(photo_folder, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="absl"):  # as set, whatever ran before
        examples = run_executor(_photo_dataset(), photo_folder, tmp_path / "examples")
    notices = [r.getMessage() for r in caplog.records if r.getMessage().startswith(NOTICE_PREFIX)]
    assert len(notices) == 1, notices
    assert notices[0].startswith("data: 4 of 15 images are odd (median side 120 px, most are jpeg)")
    assert f"1 tiny ({photo_folder}/1/thumb.jpg)" in notices[0]
    assert f"1 of a format unlike the rest ({photo_folder}/0/not-found.gif)" in notices[0]
    assert f"2 the same bytes under another class or split ({photo_folder}/0/02.jpg, " in notices[0]
    assert len(examples["train"]) + len(examples["eval"]) == 15
    found = read_odd_images(str(tmp_path / "examples"))
    assert found.found["format"] == [f"{photo_folder}/0/not-found.gif"]
    assert json.loads(found.to_json())["images"] == 15


def test_odd_images_error_stops_examplegen_naming_the_first_odd_photo(photo_folder, tmp_path):
    with pytest.raises(DataFormatError) as raised:
        run_executor(_photo_dataset(odd_images="error"), photo_folder, tmp_path / "examples")
    message = str(raised.value)
    assert message.startswith(f"{photo_folder}/1/thumb.jpg: odd image; 4 of 15 images are odd")
    assert "\n" not in message
