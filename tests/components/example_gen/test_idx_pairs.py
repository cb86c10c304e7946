"""IDX files come in pairs (images and labels): a file without its partner is an error, and a
train split carved out of test files alone is said in one line."""

from __future__ import annotations

import gzip
import logging

import numpy as np
import pytest

from tests.components.example_gen.conftest import make_dataset, run_executor
from tpu_pipeline.components.example_gen.errors import DataFormatError
from tpu_pipeline.components.example_gen.formats import FORMATS, list_inputs
from tpu_pipeline.components.example_gen.notices import NOTICE_PREFIX


def write_idx(path, array: np.ndarray) -> None:
    """A real IDX file of unsigned bytes: magic 0x0000080N, N big-endian sizes, the values."""
    header = np.array([0, 0, 0x08, array.ndim], np.uint8).tobytes()
    sizes = np.array(array.shape, ">u4").tobytes()
    data = header + sizes + array.astype(np.uint8).tobytes()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)


def write_pair(folder, prefix: str, count: int, images=True, labels=True) -> None:
    rng = np.random.default_rng(count)
    if images:
        write_idx(folder / f"{prefix}-images-idx3-ubyte.gz", rng.integers(0, 256, (count, 28, 28)))
    if labels:
        write_idx(folder / f"{prefix}-labels-idx1-ubyte.gz", np.arange(count) % 10)


def test_a_labels_file_without_its_images_file_is_an_error_naming_the_missing_file(tmp_path):
    write_pair(tmp_path, "train", 20, images=False)
    write_pair(tmp_path, "t10k", 10)
    with pytest.raises(DataFormatError) as raised:
        list_inputs(str(tmp_path / "*ubyte*"), FORMATS["idx"])
    message = str(raised.value)
    assert message.startswith(f"{tmp_path}/train-labels-idx1-ubyte.gz: no images file ")
    assert f"{tmp_path}/train-images-idx3-ubyte[.gz]" in message
    assert "\n" not in message


def test_an_images_file_without_its_labels_file_is_an_error_before_reading(tmp_path):
    write_pair(tmp_path, "train", 20, labels=False)
    write_pair(tmp_path, "t10k", 10)
    with pytest.raises(DataFormatError, match=r"train-images-idx3-ubyte.gz: no labels file .*"):
        list_inputs(str(tmp_path / "*ubyte*"), FORMATS["idx"])


def test_a_train_split_carved_out_of_test_files_is_said_in_one_line(tmp_path, caplog):
    source = tmp_path / "source"
    source.mkdir()
    write_pair(source, "t10k", 40)
    with caplog.at_level(logging.WARNING, logger="absl"):  # as set, whatever ran before
        examples = run_executor(make_dataset("idx"), source, tmp_path / "examples")
    notices = [r.getMessage() for r in caplog.records if r.getMessage().startswith(NOTICE_PREFIX)]
    assert len(notices) == 1, notices
    assert "t10k-images-idx3-ubyte.gz" in notices[0]
    assert "train split is carved out of them, 80/20" in notices[0]
    assert len(examples["train"]) + len(examples["eval"]) == 40


def test_a_dataset_with_its_own_train_file_gets_no_notice(tmp_path, caplog):
    source = tmp_path / "source"
    source.mkdir()
    write_pair(source, "train", 30)
    write_pair(source, "t10k", 10)
    with caplog.at_level(logging.WARNING, logger="absl"):  # as set, whatever ran before
        examples = run_executor(make_dataset("idx"), source, tmp_path / "examples")
    assert not [r for r in caplog.records if r.getMessage().startswith(NOTICE_PREFIX)]
    assert (len(examples["train"]), len(examples["eval"])) == (30, 10)
