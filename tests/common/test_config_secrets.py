"""Secrets in the configuration: the webhook is a SecretUrl, its Secret Manager name is checked,
and a credential in any other field is refused at load time without being quoted."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tpu_pipeline.common.config import REPO_ROOT, ConfigError, NotifyConfig, load_config

URL = "https://hookuser:hookpass@hooks.example.com:8443/services/TPATHTOKEN42?token=QUERYTOKEN99"
SECRET_PARTS = ("hookuser", "hookpass", "TPATHTOKEN42", "QUERYTOKEN99")


def assert_no_secret(text: str) -> None:
    assert not [part for part in SECRET_PARTS if part in text], text


def test_the_webhook_is_kept_whole_for_posting_and_shown_as_scheme_and_host_only():
    notify = load_config(None, {"notify.webhook": URL}).notify
    assert notify.webhook.get_secret_value() == URL
    assert notify.model_dump()["webhook"] == "https://hooks.example.com:8443/***"
    assert str(notify.webhook) == "**********"
    assert notify.webhook_secret is None and notify.timeout_seconds == 10


@pytest.mark.parametrize(
    "url",
    [
        "http://hooks.example.com/services/TPATHTOKEN42",
        "http://10.0.0.7:8080/services/TPATHTOKEN42",
        "http://[2001:db8::1]/services/TPATHTOKEN42",
    ],
)
def test_plain_http_to_another_host_is_a_config_error_naming_the_field(url):
    with pytest.raises(ConfigError) as raised:
        load_config(None, {"notify.webhook": url})
    (line,) = str(raised.value).splitlines()[1:]
    assert line.startswith("  notify.webhook: http:// to ") and "use https://" in line
    assert_no_secret(str(raised.value))


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/hook",
        "http://127.9.9.9/hook",
        "http://[::1]:9/hook",
        "http://localhost/x",
    ],
)
def test_plain_http_to_this_machine_is_allowed(url):
    assert load_config(None, {"notify.webhook": url}).notify.webhook.get_secret_value() == url


def test_an_error_constructing_the_section_directly_does_not_quote_the_webhook():
    with pytest.raises(ValidationError) as raised:
        NotifyConfig(webhook=URL.replace("https", "http"))
    assert_no_secret(str(raised.value))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"notify.webhook": URL, "notify.webhook_secret": "projects/p/secrets/s/versions/1"},
            r"notify: set one of",
        ),
        (
            {"notify.webhook_secret": "projects/p/secrets/s"},
            r"notify\.webhook_secret: must name a Secret Manager secret version: projects/PROJECT/",
        ),
        ({"notify.webhook_secret": "https://hooks.example.com/x"}, r"notify\.webhook_secret: must"),
    ],
)
def test_notify_takes_exactly_one_webhook_and_a_well_formed_secret_name(overrides, message):
    with pytest.raises(ConfigError, match=message) as raised:
        load_config(None, overrides)
    assert_no_secret(str(raised.value))


@pytest.mark.parametrize("version", ["1", "42", "latest"])
def test_a_secret_version_names_its_project_secret_and_version(version):
    name = f"projects/my-project/secrets/tpu-pipeline-webhook/versions/{version}"
    notify = load_config(None, {"notify.webhook_secret": name}).notify
    assert notify.webhook_secret == name and notify.webhook is None


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"beam_pipeline_args": ["--s3_secret_access_key=QUERYTOKEN99"]}, "beam_pipeline_args[0]"),
        (
            {"beam_pipeline_args": ["--direct_num_workers=2", "--s3_session_token", "x"]},
            "beam_pipeline_args[1]",
        ),
        ({"beam_pipeline_args": ["--azure_connection_string=AccountKey=hookpass"]}, "beam_"),
        ({"dataset.data_dir": "hdfs://hookuser:hookpass@namenode/data"}, "dataset.data_dir"),
        ({"trainer.tpu_name": "grpc://hookuser:hookpass@10.0.0.2:8470"}, "trainer.tpu_name"),
        ({"vertex.labels": {"team": "https://hookuser:hookpass@x"}}, "vertex.labels.team"),
    ],
)
def test_a_credential_in_any_other_field_is_a_config_error_naming_the_field(overrides, field):
    with pytest.raises(ConfigError) as raised:
        load_config(str(REPO_ROOT / "kubeflow" / "vertex-cpu.yaml"), overrides)
    assert f"<root>: {field}" in str(raised.value)
    assert_no_secret(str(raised.value))


def test_beam_flags_and_urls_without_credentials_are_left_alone():
    config = load_config(
        None,
        {
            "beam_pipeline_args": ["--direct_num_workers=2", "--s3_region_name=eu-west-1"],
            "dataset.data_dir": "gs://bucket/data",
            "trainer.tpu_name": "grpc://10.0.0.2:8470",
        },
    )
    assert config.beam_pipeline_args == ["--direct_num_workers=2", "--s3_region_name=eu-west-1"]
