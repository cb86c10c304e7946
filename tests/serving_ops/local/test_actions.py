"""A serving action moves the folder and ML Metadata as one operation, and survives being cut."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys

import pytest

from tests.serving_ops.local.test_baseline import baseline, store_with_two_blessed_models
from tpu_pipeline.cli.main import main
from tpu_pipeline.common.config import REPO_ROOT, load_config
from tpu_pipeline.components.serving.publish import pushed_versions
from tpu_pipeline.components.serving.versions import set_aside_versions
from tpu_pipeline.serving_ops.local import actions as serving_actions
from tpu_pipeline.serving_ops.local.actions import ServingActionError
from tpu_pipeline.serving_ops.local.intent_file import INTENT_FILE, read_intent

CHILD_ENV = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"}


def run_folder(tmp_path):
    """A run folder whose store holds two blessed models, served as versions 100 and 101."""
    config = load_config(None, {"output_dir": str(tmp_path / "output")})
    _, (older, newer) = store_with_two_blessed_models(
        tmp_path, config.metadata_path, config.serving_dir
    )
    return config, older, newer


def cli(config, *args: str) -> int:
    return main(["serving", *args, "--output-dir", str(config.output_dir)])


# Rolls back, and is killed (SIGKILL) where ML Metadata would follow the folder.
_KILLED_BETWEEN_THE_STEPS = """
import os, signal, sys
from tpu_pipeline.common.config import load_config
from tpu_pipeline.serving_ops.local import actions as serving_actions

def killed(config):
    os.kill(os.getpid(), signal.SIGKILL)

serving_actions._follow = killed
serving_actions.rollback(load_config(None, {"output_dir": sys.argv[1]}), "wrong labels")
"""


def killed_between_the_steps(script: str, config) -> None:
    """Runs `script` on the run folder in a child process, which must die by SIGKILL."""
    child = subprocess.run(
        [sys.executable, "-c", script, str(config.output_dir)],
        env=CHILD_ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr


def test_rollback_moves_the_folder_and_the_baseline_in_one_call(tmp_path):
    config, older, _ = run_folder(tmp_path)

    lines = serving_actions.rollback(config, "wrong labels")

    assert lines[0].startswith("rolled back 101 to ") and lines[0].endswith("; serving 100")
    assert lines[1:] == ["baseline: withdrawn 1 blessing(s) in ML Metadata"]
    assert baseline(config.metadata_path) == older
    assert not (config.run_dir / INTENT_FILE).exists()


@pytest.mark.slow  # the killed child imports TensorFlow (~35 s on a busy 2-core machine)
def test_kill_9_between_the_folder_and_ml_metadata_is_finished_by_the_next_command(
    tmp_path, capsys
):
    config, older, newer = run_folder(tmp_path)
    killed_between_the_steps(_KILLED_BETWEEN_THE_STEPS, config)
    # Half done: the folder moved, the baseline is still the model taken out of service.
    assert set_aside_versions(str(config.serving_dir)) == ["101"]
    assert baseline(config.metadata_path) == newer
    assert read_intent(config.run_dir).action == "rollback"

    assert cli(config, "list") == 0

    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("tpu-pipeline: finished the interrupted `serving rollback` of 101 ")
    assert line.endswith(": baseline: withdrawn 1 blessing(s) in ML Metadata")
    assert baseline(config.metadata_path) == older
    assert not (config.run_dir / INTENT_FILE).exists()


@pytest.mark.slow
def test_a_run_finishes_a_left_over_action_before_it_resolves_its_baseline(tmp_path, monkeypatch):
    from tpu_pipeline.pipeline.local import runner as local_runner

    config, older, _ = run_folder(tmp_path)
    killed_between_the_steps(_KILLED_BETWEEN_THE_STEPS, config)
    seen = []

    class ResolvingRunner:
        """Stands in for LocalDagRunner: the Resolver would read this baseline first."""

        def run(self, pipeline, run_options=None):
            seen.append(baseline(config.metadata_path))

    monkeypatch.setattr(local_runner, "LocalDagRunner", ResolvingRunner)
    out = io.StringIO()
    local_runner.run_local(config, out)

    assert seen == [older]
    assert "tpu-pipeline: finished the interrupted `serving rollback` of 101 " in out.getvalue()


@contextlib.contextmanager
def store_held_locked(path):
    """Another process holds the SQLite store with BEGIN EXCLUSIVE (as a writer can)."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time\n"
            "connection = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "connection.execute('BEGIN EXCLUSIVE')\n"
            "print('locked', flush=True)\n"
            "time.sleep(600)",
            str(path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "locked\n"
        yield
    finally:
        holder.kill()
        holder.wait()


def test_a_locked_store_is_one_line_and_exit_1_and_the_next_command_finishes(tmp_path, capsys):
    config, older, newer = run_folder(tmp_path)

    with store_held_locked(config.metadata_path):
        assert cli(config, "rollback", "--reason", "wrong labels") == 1

    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("tpu-pipeline: `serving rollback` of 101 ")
    assert "changed the serving folder" in line and "LockedMetadataError" in line
    assert "database is locked" in line and INTENT_FILE in line
    assert baseline(config.metadata_path) == newer and read_intent(config.run_dir) is not None

    assert cli(config, "unpin") == 0  # any serving command finishes the rollback first
    (finished,) = capsys.readouterr().err.splitlines()
    assert finished.startswith("tpu-pipeline: finished the interrupted `serving rollback` of 101 ")
    assert set_aside_versions(str(config.serving_dir)) == ["101"]
    assert not (config.run_dir / INTENT_FILE).exists()
    assert baseline(config.metadata_path) == older


@contextlib.contextmanager
def lock_held_by_another_process(code: str, folder):
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True, env=CHILD_ENV
    )
    try:
        assert holder.stdout.readline() == "locked\n"
        yield holder.pid
    finally:
        holder.kill()
        holder.wait()


_HOLD_RUN_LOCK = (
    "import pathlib, sys, time\n"
    "from common.run_lock import exclusive_run\n"
    "with exclusive_run(pathlib.Path(sys.argv[1])):\n"
    "    print('locked', flush=True); time.sleep(600)"
)
# As the Pusher holds it for its whole serving check.
_HOLD_SERVING_LOCK = (
    "import sys, time\n"
    "from components.serving.versions import serving_lock\n"
    "with serving_lock(sys.argv[1]):\n"
    "    print('locked', flush=True); time.sleep(600)"
)


@pytest.mark.parametrize(
    "code, folder, holder",
    [
        (_HOLD_RUN_LOCK, "run_dir", "run"),
        pytest.param(_HOLD_SERVING_LOCK, "serving_dir", "a push", marks=pytest.mark.slow),
    ],
    ids=["a run", "the Pusher"],
)
def test_rollback_says_whom_it_waits_for_and_gives_up_with_nothing_changed(
    tmp_path, capsys, code, folder, holder
):
    config, _, newer = run_folder(tmp_path)

    with lock_held_by_another_process(code, getattr(config, folder)) as pid:
        assert cli(config, "rollback", "--reason", "bad", "--wait", "1") == 1

    waiting, refused = capsys.readouterr().err.splitlines()
    assert waiting.startswith(f"tpu-pipeline: serving rollback: waiting up to 1 s for {holder} ")
    assert f"(pid {pid}, started " in waiting
    assert f"{holder} (pid {pid}, started " in refused and "still after " in refused
    assert pushed_versions(str(config.serving_dir)) == ["100", "101"]
    assert baseline(config.metadata_path) == newer
    assert not (config.run_dir / INTENT_FILE).exists()


def test_restore_runs_the_serving_check_and_refuses_a_version_that_fails_it(tmp_path):
    config, _, _ = run_folder(tmp_path)
    serving_actions.rollback(config, "wrong labels")

    # The test models have no warmup requests: the real check refuses them before any server.
    with pytest.raises(ServingActionError, match=r"^not restored: the candidate failed the "):
        serving_actions.restore(config, "101")

    assert set_aside_versions(str(config.serving_dir)) == ["101"]
    assert not (config.run_dir / INTENT_FILE).exists()


def with_a_refused_model(tmp_path, config) -> int:
    """Adds a third Model, which the Evaluator refused, to `run_folder`'s store; its id."""
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2
    from tfx.orchestration import metadata

    from tests.components.serving.test_publish import save_model
    from tests.serving_ops.local.test_baseline import LIVE, PIPELINE, output_event

    store = metadata_store.MetadataStore(
        metadata.sqlite_metadata_connection_config(str(config.metadata_path))
    )
    uri = tmp_path / "Trainer/model/refused"
    save_model(uri / "Format-Serving", 5.0)
    model = metadata_store_pb2.Artifact(
        type_id=store.get_artifact_type("Model").id, uri=str(uri), state=LIVE
    )
    blessing = metadata_store_pb2.Artifact(
        type_id=store.get_artifact_type("ModelBlessing").id, state=LIVE
    )
    blessing.custom_properties["blessed"].int_value = 0
    store.put_artifact_type(metadata_store_pb2.ArtifactType(name="PushedModel"))  # as a Pusher's
    context = store.get_context_by_type_and_name("pipeline", PIPELINE)
    execution = metadata_store_pb2.Execution(type_id=store.get_execution_type("Trainer").id)
    [model_id] = store.put_artifacts([model])
    model.id = model_id
    blessing.custom_properties["current_model_id"].int_value = model_id
    store.put_execution(
        execution, [(model, output_event("model")), (blessing, output_event("blessing"))], [context]
    )
    return model_id


def passing_check(monkeypatch) -> None:
    from tests.cli.test_serving_commands import passing_check as stand_in

    stand_in(monkeypatch)


def test_bless_prints_what_it_did_not_the_last_runs_summary(tmp_path, capsys, monkeypatch):
    config, _, _ = run_folder(tmp_path)
    refused = with_a_refused_model(tmp_path, config)
    passing_check(monkeypatch)

    assert cli(config, "bless", "--reason", "accepted for the demo") == 0

    lines = capsys.readouterr().out.splitlines()
    model_dir = tmp_path / "Trainer/model/refused"
    assert lines[0] == f"blessed model {refused} ({model_dir}) by hand (accepted for the demo)"
    assert lines[1] == "serving check: passed (serving_default in 0.1 s; stand-in up in 0.2 s)"
    (version,) = set(pushed_versions(str(config.serving_dir))) - {"100", "101"}
    assert lines[2] == f"pushed as version {version}: {config.serving_dir / version}"
    assert lines[3].startswith("ML Metadata: recorded the manual blessing (blessing ")
    assert lines[4].startswith("report: ")
    assert len(lines) == 5  # no "blessed: no ... pushed: nothing" of the run before
    assert baseline(config.metadata_path) == refused


def test_a_card_that_cannot_be_written_leaves_the_blessing_standing_and_says_why(
    tmp_path, capsys, monkeypatch
):
    from tpu_pipeline.serving_ops.local import blessing as manual_blessing

    config, _, _ = run_folder(tmp_path)
    refused = with_a_refused_model(tmp_path, config)
    passing_check(monkeypatch)

    def no_room(*args):
        raise OSError("[Errno 28] No space left on device")

    monkeypatch.setattr(manual_blessing, "write_model_card", no_room)

    assert cli(config, "bless", "--reason", "accepted for the demo") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[3] == "model card: not written (OSError: [Errno 28] No space left on device)"
    assert lines[4].startswith("ML Metadata: recorded the manual blessing (blessing ")
    assert baseline(config.metadata_path) == refused


def test_bless_refuses_a_model_that_fails_the_serving_check(tmp_path, capsys):
    config, _, newer = run_folder(tmp_path)
    with_a_refused_model(tmp_path, config)

    # The test model has no warmup requests: the real check refuses it before any server.
    assert cli(config, "bless", "--reason", "accepted for the demo") == 1

    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("tpu-pipeline: not blessed: the candidate failed the serving check")
    assert "tf_serving_warmup_requests is missing" in line
    assert pushed_versions(str(config.serving_dir)) == ["100", "101"]
    assert baseline(config.metadata_path) == newer
    assert not (config.run_dir / INTENT_FILE).exists()


# Blesses with a stand-in serving check, and is killed where ML Metadata would record it.
_BLESS_KILLED_BETWEEN_THE_STEPS = """
import os, signal, sys
from tpu_pipeline.common.config import load_config
from tpu_pipeline.components.serving import server_check
from tpu_pipeline.serving_ops.local import actions as serving_actions
from tpu_pipeline.serving_ops.local import blessing as manual_blessing

def killed(*args):
    os.kill(os.getpid(), signal.SIGKILL)

server_check.check_model = lambda *args: server_check.ServingCheckResult((), 0, 0, "stand-in")
manual_blessing.record = killed
serving_actions.bless(load_config(None, {"output_dir": sys.argv[1]}), "accepted for the demo")
"""


@pytest.mark.slow  # the killed child imports TensorFlow
def test_kill_9_between_publishing_and_recording_a_blessing_is_recorded_next(tmp_path, capsys):
    config, _, newer = run_folder(tmp_path)
    refused = with_a_refused_model(tmp_path, config)
    killed_between_the_steps(_BLESS_KILLED_BETWEEN_THE_STEPS, config)
    (version,) = set(pushed_versions(str(config.serving_dir))) - {"100", "101"}
    assert baseline(config.metadata_path) == newer  # published, not yet recorded

    assert cli(config, "list") == 0

    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(
        f"tpu-pipeline: finished the interrupted `serving bless` of model {refused} "
    )
    assert f"recorded the manual blessing of version {version} (blessing " in line
    assert baseline(config.metadata_path) == refused


def test_bless_takes_the_model_folder_the_report_shows(tmp_path, capsys, monkeypatch):
    config, _, _ = run_folder(tmp_path)
    refused = with_a_refused_model(tmp_path, config)
    passing_check(monkeypatch)
    shown = (
        tmp_path / "Trainer/model/refused/Format-Serving"
    )  # the report's "Serving signatures of"

    assert cli(config, "bless", str(shown), "--reason", "accepted for the demo") == 0

    out = capsys.readouterr().out
    assert out.startswith(f"blessed model {refused} ({shown.parent}) by hand (accepted for")
    assert baseline(config.metadata_path) == refused


def test_bless_of_the_run_folder_takes_its_newest_model(tmp_path, capsys, monkeypatch):
    config, _, _ = run_folder(tmp_path)
    refused = with_a_refused_model(tmp_path, config)
    passing_check(monkeypatch)

    assert cli(config, "bless", str(config.run_dir), "--reason", "accepted for the demo") == 0

    newest = tmp_path / "Trainer/model/refused"
    assert capsys.readouterr().out.startswith(f"blessed model {refused} ({newest}) by hand")
    assert baseline(config.metadata_path) == refused


def test_bless_of_a_folder_that_is_no_model_says_what_to_give_and_changes_nothing(tmp_path, capsys):
    config, _, newer = run_folder(tmp_path)
    with_a_refused_model(tmp_path, config)
    elsewhere = tmp_path / "another-output" / "tpu-pipeline-digits"

    assert cli(config, "bless", str(config.serving_dir), "--reason", "demo") == 1
    assert cli(config, "bless", str(elsewhere), "--reason", "demo") == 1

    inside, outside = capsys.readouterr().err.splitlines()
    assert f"no model at {config.serving_dir} of pipeline tpu-pipeline-digits" in inside
    assert "give the model folder the report shows (RUN/pipeline_root/ServingPackager/" in inside
    assert f"{elsewhere} is outside this run folder ({config.run_dir})" in outside
    assert baseline(config.metadata_path) == newer
    assert pushed_versions(str(config.serving_dir)) == ["100", "101"]


def test_bless_takes_a_model_id_as_model_or_as_model_id_but_not_both(tmp_path, capsys):
    config, older, _ = run_folder(tmp_path)

    assert cli(config, "bless", str(older), "--reason", "demo") == 1
    assert f"model {older} (" in capsys.readouterr().err  # blessed already: found by its id
    assert cli(config, "bless", str(older), "--model-id", str(older), "--reason", "demo") == 2
    assert "give MODEL or --model-id, not both" in capsys.readouterr().err
