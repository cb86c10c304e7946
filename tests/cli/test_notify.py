"""A run stopped before any component still tells the webhook, once, how it ended."""

from __future__ import annotations

from tests.common.webhook_server import webhook_server
from tpu_pipeline.cli.main import main


def test_a_missing_data_folder_is_told_as_data_rejected_and_a_refusing_webhook_is_one_warning(
    tmp_path, capfd
):
    missing = tmp_path / "nowhere"
    args = ["run", "--data-dir", str(missing), "--output-dir", str(tmp_path / "out")]
    with webhook_server() as (url, webhook):
        assert main([*args, "--set", f"notify.webhook={url}"]) == 3
    ((_, message),) = webhook.received
    title, why, *_ = message["text"].splitlines()
    assert title.endswith(": *data rejected*")
    assert why.startswith(
        f"DataSourceError: dataset 'digits': data folder {missing} does not exist"
    )
    capfd.readouterr()

    with webhook_server(status=500) as (url, webhook):
        assert main([*args, "--set", f"notify.webhook={url}"]) == 3  # the run's own exit code
    _, err = capfd.readouterr()
    assert err.splitlines()[-1] == (
        f"tpu-pipeline: dataset 'digits': data folder {missing} does not exist "
        "(it would be searched for '*.tfrecord*')"
    )
    (warning,) = [line for line in err.splitlines() if "warning" in line]
    assert warning.startswith("tpu-pipeline: warning: notify.webhook (127.0.0.1:")
    assert warning.endswith(
        "refused the message: HTTP 500 Internal Server Error; the run's result stands"
    )
