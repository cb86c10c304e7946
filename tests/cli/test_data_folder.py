"""`tpu-pipeline run` on a data folder it cannot read: exit 3 and one line, before anything runs."""

from __future__ import annotations

import pytest

from tpu_pipeline.cli.main import EXIT_DATA_REJECTED, main


def _run(tmp_path, data_dir, *extra: str) -> int:
    return main(["run", "--data-dir", str(data_dir), "--output-dir", str(tmp_path / "out"), *extra])


def test_a_folder_without_tfrecords_names_the_pattern_and_what_it_found(tmp_path, capfd):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "train.npz").write_bytes(b"")

    assert _run(tmp_path, data_dir) == EXIT_DATA_REJECTED

    out, err = capfd.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"tpu-pipeline: dataset 'digits': no file in {data_dir} matches '*.tfrecord*' "
        "(the format's default); it holds train.npz "
        "(set dataset.format or dataset.file_pattern to read them)"
    ]
    assert not (tmp_path / "out" / "tpu-pipeline-digits" / "pipeline_root").exists()


@pytest.mark.parametrize(
    "patterns, message",
    [
        (
            ("fit/*.tfrecord", "holdout/*.tfrecord"),
            "dataset.split_patterns.eval 'holdout/*.tfrecord' matches no tfrecord input file in",
        ),
        (("*/*.tfrecord", "fit/b*"), "matched by both dataset.split_patterns.train"),
    ],
    ids=["matches-nothing", "overlap"],
)
def test_split_patterns_that_match_nothing_or_overlap_are_data_rejections(
    tmp_path, capfd, patterns, message
):
    data_dir = tmp_path / "data"
    (data_dir / "fit").mkdir(parents=True)
    for name in ("a.tfrecord", "b.tfrecord"):
        (data_dir / "fit" / name).write_bytes(b"")
    train, eval_ = patterns
    assignments = [f"dataset.split_patterns.train={train}", f"dataset.split_patterns.eval={eval_}"]

    code = _run(tmp_path, data_dir, *(arg for a in assignments for arg in ("--set", a)))

    assert code == EXIT_DATA_REJECTED
    (line,) = capfd.readouterr().err.splitlines()
    assert message in line and str(data_dir) in line
