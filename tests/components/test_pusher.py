"""The Pusher's executor: a blessed candidate is pushed only once a model server answered it."""

from __future__ import annotations

import json
import pathlib

import pytest

from tests.components.serving.served_models import DIGITS, save_model, write_eval_split
from tpu_pipeline.common.config import load_config
from tpu_pipeline.common.tfx_api import artifact_utils, proto_utils, pusher_pb2, standard_artifacts
from tpu_pipeline.components.contract import pusher_sections
from tpu_pipeline.components.pusher import (
    ALREADY_PUSHED_PROPERTY,
    SERVING_CHECK_PROPERTY,
    SERVING_CHECK_SERVER_PROPERTY,
    AtomicPusherExecutor,
)
from tpu_pipeline.components.serving.publish import pushed_versions
from tpu_pipeline.components.serving.server_check import ServingCheckError
from tpu_pipeline.components.serving.warmup import (
    WARMUP_FILE,
    read_warmup_requests,
    write_warmup_requests,
)


def _push(
    tmp_path: pathlib.Path,
    broken: dict[str, str] | None = None,
    evaluation: str | None = None,
    span_shift: dict | None = None,
    examples: standard_artifacts.Examples | None = None,
):
    """Runs the executor on a blessed candidate (saved once per `tmp_path`), with the
    Evaluator's output at `evaluation` and the SpanShiftGate's verdict `span_shift` if
    given; returns (pushed_model, serving dir)."""
    model = standard_artifacts.Model()
    model.uri = str(tmp_path / "model")
    if not (tmp_path / "model").exists():
        candidate = save_model(tmp_path / "model" / "Format-Serving", broken)
        write_warmup_requests(candidate, write_eval_split(tmp_path / "eval"), DIGITS)
    blessing = standard_artifacts.ModelBlessing()
    blessing.set_int_custom_property("blessed", 1)
    pushed_model = standard_artifacts.PushedModel()
    pushed_model.uri = str(tmp_path / "pushed_model")
    serving_dir = tmp_path / "serving"
    destination = pusher_pb2.PushDestination(
        filesystem=pusher_pb2.PushDestination.Filesystem(base_directory=str(serving_dir))
    )
    config = load_config(None, {"output_dir": str(tmp_path / "out")})
    exec_properties = {
        "push_destination": proto_utils.proto_to_json(destination),
        "custom_config": json.dumps(pusher_sections(config)),
    }
    inputs = {"model": [model], "model_blessing": [blessing]}
    if evaluation is not None:
        inputs["evaluation"] = [standard_artifacts.ModelEvaluation()]
        inputs["evaluation"][0].uri = evaluation
    if span_shift is not None:
        written = standard_artifacts.JsonValue()
        written.uri = str(tmp_path / "verdict")
        written.value = span_shift
        inputs["span_shift"] = [standard_artifacts.JsonValue()]  # read from its file, as TFX does
        inputs["span_shift"][0].uri = written.uri
    if examples is not None:
        inputs["examples"] = [examples]
    AtomicPusherExecutor().Do(
        inputs,
        {"pushed_model": [pushed_model]},
        exec_properties,
    )
    return pushed_model, serving_dir


def test_a_candidate_that_passes_the_check_is_pushed_with_its_warmup_file(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # the Python model server
    pushed_model, serving_dir = _push(tmp_path)
    (version,) = pushed_versions(str(serving_dir))
    assert (serving_dir / version / WARMUP_FILE).is_file()
    check = pushed_model.get_string_custom_property(SERVING_CHECK_PROPERTY)
    assert check.startswith("passed (serving_default, images, pixels in ")
    assert "; model_server.py up in " in check
    # Which server checked it, for the run summary: tensorflow_model_server is not on PATH.
    assert pushed_model.get_string_custom_property(SERVING_CHECK_SERVER_PROPERTY) == (
        "model_server.py"
    )


def test_a_span_the_span_shift_gate_stopped_is_not_pushed_and_says_why(tmp_path, monkeypatch):
    from tpu_pipeline.components.pusher import PUSH_REFUSED_PROPERTY

    monkeypatch.setenv("PATH", str(tmp_path))
    shifted = {"checked": True, "shifted": True, "headline": "span shift: 1 of 3 signals moved"}
    pushed_model, serving_dir = _push(tmp_path, span_shift=shifted)
    assert pushed_model.get_int_custom_property("pushed") == 0
    assert not pushed_versions(str(serving_dir))
    refused = pushed_model.get_string_custom_property(PUSH_REFUSED_PROPERTY)
    assert refused.startswith("held back by drift.block_push: the new span's images moved")


def test_a_candidate_that_fails_the_check_is_not_pushed(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(
        ServingCheckError,
        match=r"^signature 'pixels': answered shape \[8, 9\], expected \[8, 10\].*"
        r" \(checked with model_server\.py\)$",
    ):
        _push(tmp_path, {"pixels": "wrong_shape"})
    assert not pushed_versions(str(tmp_path / "serving"))


def test_a_card_that_cannot_be_written_leaves_the_push_standing_and_says_why(tmp_path, monkeypatch):
    from tpu_pipeline.components.pusher import MODEL_CARD_ERROR_PROPERTY, MODEL_CARD_PROPERTY

    def no_room(*args):
        raise OSError("[Errno 28] No space left on device")

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(AtomicPusherExecutor, "_write_model_card", no_room)
    pushed_model, serving_dir = _push(tmp_path)

    assert pushed_model.get_int_custom_property("pushed") == 1
    assert len(pushed_versions(str(serving_dir))) == 1
    assert pushed_model.get_string_custom_property(MODEL_CARD_PROPERTY) == ""
    assert pushed_model.get_string_custom_property(MODEL_CARD_ERROR_PROPERTY) == (
        "OSError: [Errno 28] No space left on device"
    )


def test_a_push_without_the_evaluation_writes_no_card(tmp_path, monkeypatch):
    from tpu_pipeline.components.pusher import MODEL_CARD_PROPERTY

    monkeypatch.setenv("PATH", str(tmp_path))
    pushed_model, serving_dir = _push(tmp_path)  # model and blessing only, as TFX's Pusher

    (version,) = pushed_versions(str(serving_dir))
    assert not (serving_dir / version / "model_card.json").exists()
    assert pushed_model.get_string_custom_property(MODEL_CARD_PROPERTY) == ""


@pytest.mark.slow  # TFMA's Beam job and a model server
def test_a_served_version_without_a_card_gets_one_when_the_pusher_sees_it_again(
    tmp_path, monkeypatch
):
    import numpy as np

    from tests.pipeline.tfma_results import write_evaluation
    from tpu_pipeline.components.pusher import MODEL_CARD_PROPERTY

    monkeypatch.setenv("PATH", str(tmp_path))
    labels = np.arange(40) % 10
    evaluation = write_evaluation(
        str(tmp_path / "evaluation"), labels, np.eye(10)[labels] * 0.9 + 0.01, dataset=DIGITS
    )
    first, serving_dir = _push(tmp_path, evaluation=evaluation)
    (version,) = pushed_versions(str(serving_dir))
    card_file = serving_dir / version / "model_card.json"
    assert first.get_string_custom_property(MODEL_CARD_PROPERTY) == str(card_file)
    card = json.loads(card_file.read_text())
    assert card["model_details"]["version"]["name"] == version
    assert "Serving check before the push: passed (" in card["model_details"]["documentation"]

    card_file.unlink()  # as after a push cut short between the publish and the card
    again, _ = _push(tmp_path, evaluation=evaluation)
    assert again.get_int_custom_property(ALREADY_PUSHED_PROPERTY) == 1
    assert pushed_versions(str(serving_dir)) == [version]
    assert json.loads(card_file.read_text())["model_details"]["version"]["name"] == version
    assert again.get_string_custom_property(MODEL_CARD_PROPERTY) == str(card_file)


def test_a_trainers_model_without_warmup_requests_is_pushed_with_them_from_the_eval_split(
    tmp_path, monkeypatch
):
    # serving.package false: no ServingPackager made the warmup requests; the Pusher gets
    # ExampleGen's examples and publishes a copy of the model with them.
    monkeypatch.setenv("PATH", str(tmp_path))
    save_model(tmp_path / "model" / "Format-Serving")
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / "examples")
    examples.split_names = artifact_utils.encode_split_names(["eval"])
    write_eval_split(tmp_path / "examples" / "Split-eval")
    pushed_model, serving_dir = _push(tmp_path, examples=examples)

    (version,) = pushed_versions(str(serving_dir))
    assert [
        r.model_spec.signature_name for r in read_warmup_requests(str(serving_dir / version))
    ] == [
        "serving_default",
        "images",
        "pixels",
    ]
    assert pushed_model.get_string_custom_property(SERVING_CHECK_PROPERTY).startswith("passed (")
    # The Trainer's model stays as it was: a step writes only into its own output.
    assert not (tmp_path / "model" / "Format-Serving" / WARMUP_FILE).exists()
