"""Finding the data folder a run reads: a wrong folder is a data rejection in one line."""

import pytest

from tpu_pipeline.common.config import load_config
from tpu_pipeline.components.example_gen.errors import DataFormatError
from tpu_pipeline.pipeline.wiring.data_sources import DataSourceError, prepare_data_root
from tpu_pipeline.pipeline.wiring.graph import example_gen_splits


def _config(data_dir, **overrides):
    return load_config(None, {"dataset.data_dir": str(data_dir), **overrides})


def test_a_missing_folder_is_named_with_the_pattern_it_would_be_searched_for(tmp_path):
    with pytest.raises(DataSourceError) as raised:
        prepare_data_root(_config(tmp_path / "nowhere"))
    assert str(raised.value) == (
        f"dataset 'digits': data folder {tmp_path / 'nowhere'} does not exist "
        "(it would be searched for '*.tfrecord*')"
    )
    assert isinstance(raised.value, DataFormatError)  # a data rejection: exit code 3


def test_a_folder_without_matching_files_says_what_it_holds(tmp_path):
    for name in ("a.npz", "b.npz", "notes/readme.txt"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("")
    with pytest.raises(DataSourceError) as raised:
        prepare_data_root(_config(tmp_path))
    assert str(raised.value) == (
        f"dataset 'digits': no file in {tmp_path} matches '*.tfrecord*' (the format's default); "
        "it holds a.npz, b.npz, notes/readme.txt "
        "(set dataset.format or dataset.file_pattern to read them)"
    )


def test_an_empty_folder_is_called_empty(tmp_path):
    with pytest.raises(DataSourceError, match="matches '\\*.npz' \\(dataset.file_pattern\\); "):
        prepare_data_root(_config(tmp_path, **{"dataset.file_pattern": "*.npz"}))
    with pytest.raises(DataSourceError, match="the folder is empty$"):
        prepare_data_root(_config(tmp_path))


def test_split_patterns_are_checked_before_the_run(tmp_path):
    (tmp_path / "fit").mkdir()
    (tmp_path / "fit" / "a.tfrecord").write_bytes(b"")
    config = _config(
        tmp_path,
        **{"dataset.split_patterns": {"train": "fit/*.tfrecord", "eval": "holdout/*.tfrecord"}},
    )
    with pytest.raises(DataFormatError, match=r"split_patterns\.eval 'holdout/\*.tfrecord' match"):
        prepare_data_root(config)
    (tmp_path / "holdout").mkdir()
    (tmp_path / "holdout" / "b.tfrecord").write_bytes(b"")
    assert prepare_data_root(config) == tmp_path


def test_split_patterns_become_one_input_split_each_and_no_hash_split():
    patterns = {"train": "fit/*", "eval": "holdout/*"}
    configs = example_gen_splits(load_config(None, {"dataset.split_patterns": patterns}).dataset)
    inputs = {split.name: split.pattern for split in configs["input_config"].splits}
    assert inputs == patterns
    assert not configs["output_config"].split_config.splits
    default = example_gen_splits(load_config(None).dataset)
    assert [split.hash_buckets for split in default["output_config"].split_config.splits] == [
        80,
        20,
    ]
