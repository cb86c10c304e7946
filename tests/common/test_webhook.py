"""Posting to a webhook: against real HTTP servers on loopback that accept, refuse or hang."""

from __future__ import annotations

import socket

from common.webhook import post_message, slack_message
from tests.common.webhook_server import webhook_server

MESSAGE = slack_message("run *blessed and pushed*", ["accuracy=0.98"])


def test_a_webhook_that_accepts_receives_the_message_as_json():
    with webhook_server() as (url, server):
        assert post_message(url, MESSAGE, timeout_s=5) is None
    assert server.received == [("application/json", MESSAGE)]


def test_a_webhook_answering_500_becomes_one_warning_without_the_secret_path():
    with webhook_server(status=500) as (url, server):
        warning = post_message(url, MESSAGE, timeout_s=5)
    assert warning == (
        f"notify.webhook (127.0.0.1:{server.server_port}) refused the message: "
        "HTTP 500 Internal Server Error"
    )
    assert "SECRET" not in warning and len(server.received) == 1


def test_a_webhook_that_never_answers_is_given_up_after_the_timeout():
    with webhook_server(hang=True) as (url, server):
        warning = post_message(url, MESSAGE, timeout_s=0.5)
        # The server answers only once the block ends: returning at all is the bound.
        assert not server.release.is_set()
    assert warning == f"notify.webhook (127.0.0.1:{server.server_port}) did not answer within 0.5 s"
    assert len(server.received) == 1


def test_an_unreachable_webhook_becomes_one_warning():
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    warning = post_message(f"http://127.0.0.1:{port}/hook", MESSAGE, timeout_s=5)
    assert warning.startswith(f"notify.webhook (127.0.0.1:{port}) was not reached: ")
    assert "refused" in warning.lower()


def test_a_slack_message_carries_text_for_any_client_and_blocks_for_slack():
    message = slack_message("title", ["a=1", "b=2"])
    assert message["text"] == "title\na=1\nb=2"
    assert [block["text"]["text"] for block in message["blocks"]] == ["title", "a=1\nb=2"]
    assert slack_message("title", [])["blocks"] == [
        {"type": "section", "text": {"type": "mrkdwn", "text": "title"}}
    ]
