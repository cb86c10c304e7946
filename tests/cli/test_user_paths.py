"""Every path a command takes from its user keeps the user's files: a path holding a file
the product did not write is refused in one line, exit 2, naming it, before any work.

The refusals here come before TensorFlow loads or any job runs; the same paths written
for real (a folder the product marked, a file it wrote) are covered by the end-to-end
tests of each command (tests/cli/test_predict_e2e.py, tests/pipeline/report/).
"""

from __future__ import annotations

import pathlib

import pytest

from tpu_pipeline.cli.main import EXIT_BAD_CONFIG, main

USERS_TEXT = "the user's own notes\n"


def _users_folder(path: pathlib.Path) -> pathlib.Path:
    path.mkdir(parents=True)
    (path / "notes.txt").write_text(USERS_TEXT)
    return path


def _refused(capfd, argv: list[str], named: pathlib.Path) -> None:
    code = main(argv)
    _, err = capfd.readouterr()
    lines = [line for line in err.splitlines() if line.startswith("tpu-pipeline:")]
    assert code == EXIT_BAD_CONFIG, err
    assert len(lines) == 1 and str(named) in lines[0] and "did not write" in lines[0], err


def _predict(model, data_dir, output, *extra) -> list[str]:
    return [
        "predict",
        "--model",
        str(model),
        "--data-dir",
        str(data_dir),
        "--output",
        str(output),
        *extra,
    ]


@pytest.fixture
def data_dir(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "digits.tfrecord").write_bytes(b"the user's data")
    return folder


def test_predict_explain_dir_holding_a_users_file_is_refused_and_the_file_stays(
    tmp_path, data_dir, capfd
):
    explain_dir = _users_folder(tmp_path / "explained")

    argv = _predict(tmp_path / "model", data_dir, tmp_path / "p.jsonl", "--explain", "2")
    _refused(capfd, [*argv, "--explain-dir", str(explain_dir)], explain_dir)

    assert sorted(p.name for p in explain_dir.iterdir()) == ["notes.txt"]
    assert (explain_dir / "notes.txt").read_text() == USERS_TEXT
    assert not (tmp_path / "p.jsonl").exists()


def test_predict_explain_dir_given_the_data_folder_leaves_the_data(tmp_path, data_dir, capfd):
    argv = _predict(tmp_path / "model", data_dir, tmp_path / "p.jsonl", "--explain", "2")

    _refused(capfd, [*argv, "--explain-dir", str(data_dir)], data_dir)

    assert (data_dir / "digits.tfrecord").read_bytes() == b"the user's data"


def test_predict_default_explain_dir_beside_the_output_is_checked_too(tmp_path, data_dir, capfd):
    beside = _users_folder(tmp_path / "p-explained")

    _refused(
        capfd, _predict(tmp_path / "m", data_dir, tmp_path / "p.jsonl", "--explain", "1"), beside
    )

    assert (beside / "notes.txt").read_text() == USERS_TEXT


def test_predict_output_at_a_users_file_is_refused(tmp_path, data_dir, capfd):
    output = tmp_path / "results.csv"
    output.write_text(USERS_TEXT)

    _refused(capfd, _predict(tmp_path / "model", data_dir, output), output)

    assert output.read_text() == USERS_TEXT


def test_predict_output_at_the_data_file_itself_is_refused(tmp_path, data_dir, capfd):
    """--output naming an input file (a slip of the shell's completion)."""
    data_file = data_dir / "digits.tfrecord"

    _refused(capfd, _predict(tmp_path / "model", data_dir, data_file), data_file)

    assert data_file.read_bytes() == b"the user's data"


def test_predict_summary_json_at_a_users_file_is_refused(tmp_path, data_dir, capfd):
    summary = tmp_path / "summary.json"
    summary.write_text(USERS_TEXT)

    argv = _predict(tmp_path / "model", data_dir, tmp_path / "p.csv")
    _refused(capfd, [*argv, "--summary-json", str(summary)], summary)

    assert summary.read_text() == USERS_TEXT


def test_run_summary_json_at_a_users_file_is_refused_before_the_run(tmp_path, capfd):
    summary = tmp_path / "summary.json"
    summary.write_text(USERS_TEXT)

    _refused(
        capfd,
        ["run", "--output-dir", str(tmp_path / "out"), "--summary-json", str(summary)],
        summary,
    )

    assert summary.read_text() == USERS_TEXT
    assert not (tmp_path / "out").exists()


def test_run_output_dir_whose_run_folder_is_a_users_folder_is_refused(tmp_path, capfd):
    run_dir = _users_folder(tmp_path / "out" / "tpu-pipeline-digits")

    _refused(capfd, ["run", "--output-dir", str(tmp_path / "out")], run_dir)

    assert sorted(p.name for p in run_dir.iterdir()) == ["notes.txt"]


def test_report_output_at_a_users_folder_is_refused(tmp_path, capfd):
    folder = _users_folder(tmp_path / "slides")
    (tmp_path / "run").mkdir()  # a run folder (a missing one is refused first, also exit 2)

    _refused(capfd, ["report", str(tmp_path / "run"), "--output", str(folder)], folder)

    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]


def test_data_generate_into_an_existing_folder_is_refused_exit_2(tmp_path, capfd):
    folder = _users_folder(tmp_path / "data")

    code = main(["data", "generate", "--format", "npz", "--count", "20", "--output", str(folder)])

    _, err = capfd.readouterr()
    assert code == EXIT_BAD_CONFIG and str(folder) in err
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
