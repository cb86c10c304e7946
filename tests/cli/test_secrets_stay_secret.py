"""A webhook URL is a secret: no dump of the configuration, file a run writes, line it prints
or compiled Vertex spec holds any part of it but its host.

The secret webhook has all three secret parts, `user:password@`, a token in the path and one
in the query, and every way the code dumps a configuration is tried on it.
"""

from __future__ import annotations

import base64
import json
import pathlib

import pytest

from tests.common.webhook_server import webhook_server
from tests.kubeflow.conftest import own_project_config
from tpu_pipeline.cli.main import main
from tpu_pipeline.common.config import REPO_ROOT, load_config
from tpu_pipeline.components import contract
from tpu_pipeline.pipeline.results.run_summary import RunSummary
from tpu_pipeline.pipeline.wiring.input_fingerprint import (
    LAST_SUCCESS_FILE,
    fingerprint_inputs,
    record_success,
)

SECRET_PARTS = ("hookuser", "hookpass", "TPATHTOKEN42", "QUERYTOKEN99")
SECRET_NAME = "projects/your-gcp-project/secrets/tpu-pipeline-webhook/versions/latest"
VERTEX_CPU = str(REPO_ROOT / "kubeflow" / "vertex-cpu.yaml")


def secret_webhook(host: str = "hooks.example.com", scheme: str = "https") -> str:
    return f"{scheme}://hookuser:hookpass@{host}/services/TPATHTOKEN42/B0/X0?token=QUERYTOKEN99"


def secrets_in(text: str | bytes) -> list[str]:
    """The secret parts `text` holds (bytes: any file, ML Metadata's SQLite store included)."""
    if isinstance(text, bytes):
        return [part for part in SECRET_PARTS if part.encode() in text]
    return [part for part in SECRET_PARTS if part in text]


def secrets_in_files(folder: pathlib.Path) -> dict[str, list[str]]:
    """Each file under `folder` that holds a secret part, with the parts it holds."""
    found = {}
    for path in folder.rglob("*"):
        if path.is_file() and secrets_in(path.read_bytes()):
            found[str(path.relative_to(folder))] = secrets_in(path.read_bytes())
    return found


def test_every_dump_of_a_configuration_shows_the_webhooks_host_only(tmp_path):
    from tpu_pipeline.pipeline.report import write_report

    config = load_config(None, {"notify.webhook": secret_webhook(), "output_dir": str(tmp_path)})
    dumps = {
        "model_dump": json.dumps(config.model_dump()),  # plain values, no SecretStr objects
        "model_dump(json)": json.dumps(config.model_dump(mode="json")),
        "model_dump_json": config.model_dump_json(),
        "notify section": config.notify.model_dump_json(),
        "repr": repr(config),
        "str": str(config),
        "f-string": f"{config.notify} {config.notify.webhook} {config.notify.webhook!r}",
        "a copy": config.model_copy(update={"pipeline_name": "other"}).model_dump_json(),
        # The custom_config each TFX component gets, recorded in ML Metadata.
        "custom_config": json.dumps(
            [
                contract.trainer_sections(config, "v1"),
                contract.pusher_sections(config),
                contract.tuner_sections(config, "v1"),
            ]
        ),
    }
    assert {way: secrets_in(text) for way, text in dumps.items() if secrets_in(text)} == {}
    assert config.model_dump()["notify"]["webhook"] == "https://hooks.example.com/***"
    assert config.notify.webhook.get_secret_value() == secret_webhook()  # what the poster uses

    # The run fingerprint, last_successful_run.json.
    config.run_dir.mkdir(parents=True)
    record_success(config.run_dir, fingerprint_inputs(config, tmp_path, ("*.tfrecord",)))
    assert secrets_in((config.run_dir / LAST_SUCCESS_FILE).read_text()) == []

    # The report's Configuration section, and every other file of the report.
    summary = RunSummary.without_results(config.full_pipeline_name, [], None, None)
    files = write_report(config.run_dir, summary, config)
    assert "https://hooks.example.com/***" in files.html.read_text()
    assert secrets_in_files(config.run_dir) == {}


@pytest.mark.parametrize(
    "webhook",
    [secret_webhook(scheme="http"), secret_webhook(scheme="ftp"), [secret_webhook()]],
    ids=["http-to-another-host", "not-http", "not-text"],
)
def test_a_refused_webhook_is_a_config_error_naming_the_field_and_never_quoting_it(
    tmp_path, capfd, webhook
):
    config_file = tmp_path / "notify.yaml"
    config_file.write_text(json.dumps({"notify": {"webhook": webhook}}))  # YAML reads JSON
    assert main(["run", "--config", str(config_file), "--output-dir", str(tmp_path)]) == 2
    out, err = capfd.readouterr()
    assert err.startswith("tpu-pipeline: invalid configuration (") and "notify.webhook: " in err
    assert secrets_in(out + err) == []
    assert list(tmp_path.iterdir()) == [config_file]  # nothing was run or written


@pytest.mark.parametrize(
    "command",
    [
        ["compile"],
        ["submit", "--dry-run"],
        ["schedule", "create", "--dry-run"],
        ["schedule", "pause", "--dry-run"],
    ],
    ids=lambda command: " ".join(command),
)
def test_a_plain_webhook_for_vertex_is_a_config_error_naming_the_secret_field(
    tmp_path, capfd, command
):
    spec = tmp_path / "pipeline.json"
    flags = ["--config", VERTEX_CPU, "--set", f"notify.webhook={secret_webhook()}"]
    where = ["--output", str(spec)] if command == ["compile"] else ["--pipeline-json", str(spec)]
    assert main([*command, *flags, *where]) == 2
    out, err = capfd.readouterr()
    assert err.startswith("tpu-pipeline: notify.webhook: on Vertex AI the URL would be ")
    assert "set notify.webhook_secret: projects/PROJECT/secrets/SECRET/versions/VERSION" in err
    assert secrets_in(out + err) == [] and out == ""
    assert not spec.exists()


def test_compile_submit_and_schedule_for_vertex_carry_the_secrets_name_only(tmp_path, capfd):
    spec = tmp_path / "pipeline.json"
    config = str(own_project_config(tmp_path))
    flags = ["--config", config, "--set", f"notify.webhook_secret={SECRET_NAME}"]
    assert main(["compile", *flags, "--output", str(spec)]) == 0
    printed = [capfd.readouterr().out]
    for command in (["submit"], ["schedule", "create"]):
        assert main([*command, *flags, "--pipeline-json", str(spec), "--dry-run"]) == 0
        printed.append(capfd.readouterr().out)
    sent = [
        tmp_path / "pipeline.submit-requests.json",
        tmp_path / "pipeline.schedule-create-requests.json",
    ]
    for text in (spec.read_text(), *(path.read_text() for path in sent)):
        assert SECRET_NAME in text
        assert "hooks." not in text and 'webhook"' not in text  # no URL, no `webhook` parameter
    assert secrets_in("".join(printed)) == []


@pytest.mark.slow
def test_a_whole_run_writes_and_prints_no_part_of_the_webhook_but_its_host(tmp_path, capfd):
    """A real local run told to a secret (loopback) webhook: every file under the run folder
    (report, logs, ML Metadata, pipeline_root, last_successful_run.json), the summary JSON,
    stdout and stderr."""
    out_dir, summary_json = tmp_path / "out", tmp_path / "summary.json"
    with webhook_server(status=500) as (url, webhook):
        host = url.split("/")[2]
        args = [
            "run",
            "--output-dir",
            str(out_dir),
            "--train-steps",
            "20",
            "--set",
            "trainer.epochs=1",
            "--set",
            "serving.tflite_variants=[]",
            "--set",
            f"notify.webhook={secret_webhook(host, 'http')}",
            "--summary-json",
            str(summary_json),
        ]
        code = main(args)
    out, err = capfd.readouterr()
    assert code == 0, out + err
    ((_, message),) = webhook.received  # the secret's user info went as Basic authentication
    assert webhook.authorizations == [f"Basic {base64.b64encode(b'hookuser:hookpass').decode()}"]
    assert f"tpu-pipeline: warning: notify.webhook ({host}) refused the message: HTTP 500" in err
    assert (out_dir / "tpu-pipeline-digits" / "report" / "report.html").is_file()
    assert secrets_in(out + err) == []
    assert secrets_in(summary_json.read_bytes()) == []
    assert secrets_in_files(out_dir) == {}


@pytest.mark.parametrize("command", [["submit"], ["schedule", "create"]], ids=" ".join)
def test_a_spec_compiled_with_the_url_as_a_parameter_is_never_sent(tmp_path, capfd, command):
    """pipeline.json as compiled before notify.webhook_secret: the URL a constant of the handler."""
    url = {"runtimeValue": {"constantValue": {"stringValue": secret_webhook()}}}
    handler = {"inputs": {"parameters": {"webhook": url}}}
    spec = tmp_path / "pipeline.json"
    spec.write_text(
        json.dumps({"pipelineSpec": {"root": {"dag": {"tasks": {"NotifyWebhook": handler}}}}})
    )
    config = str(own_project_config(tmp_path))
    flags = ["--config", config, "--set", f"notify.webhook_secret={SECRET_NAME}"]
    assert main([*command, *flags, "--pipeline-json", str(spec), "--dry-run"]) == 2
    out, err = capfd.readouterr()
    assert err == (
        f"tpu-pipeline: {spec}: compiled with the webhook URL as a parameter of its exit "
        "handler; compile it again (notify.webhook_secret) and delete this file\n"
    )
    assert out == ""
