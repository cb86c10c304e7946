"""`--model` means a pushed version: the folder itself, or the newest whole version of a folder."""

from __future__ import annotations

import pytest

from tpu_pipeline.common.config import ConfigError
from tpu_pipeline.pipeline.batch_predict.model_path import resolve_model_version


def _version(base, name, whole=True):
    folder = base / name
    folder.mkdir(parents=True)
    if whole:
        (folder / "saved_model.pb").write_bytes(b"")
    return folder


def test_a_version_folder_is_itself(tmp_path):
    version = _version(tmp_path / "serving_model", "17")
    assert resolve_model_version(str(version)) == str(version)


def test_a_run_or_serving_folder_means_its_highest_whole_version(tmp_path):
    serving = tmp_path / "run" / "serving_model"
    _version(serving, "9")
    newest = _version(serving, "10")  # numerically, not as text: 10 > 9
    _version(serving, "11", whole=False)  # an object-store copy cut short: not served
    _version(serving, ".staging-12-abc")  # not a version name
    assert resolve_model_version(str(serving)) == str(newest)
    assert resolve_model_version(str(tmp_path / "run") + "/") == str(newest)


def test_a_folder_without_a_pushed_model_is_refused_naming_it(tmp_path):
    (tmp_path / "serving_model").mkdir()
    with pytest.raises(ConfigError, match=rf"--model {tmp_path}: holds no pushed model"):
        resolve_model_version(str(tmp_path))
    with pytest.raises(ConfigError, match="no such folder"):
        resolve_model_version(str(tmp_path / "missing"))
