"""Posting to a webhook: against real HTTP servers on loopback that accept, refuse or hang."""

from __future__ import annotations

import base64
import http.client
import io
import socket
import urllib.error
import urllib.request

import pytest

from tests.common.webhook_server import webhook_server
from tpu_pipeline.common.config import webhook_url_problem
from tpu_pipeline.common.webhook import post_message, slack_message

MESSAGE = slack_message("run *blessed and pushed*", ["accuracy=0.98"])
# What no warning may show: the user info, the path's token and the query's.
SECRET_PARTS = ("hookuser", "hookpass", "TPATHTOKEN42", "QUERYTOKEN99")


def secret_url(host: str, scheme: str = "https") -> str:
    return f"{scheme}://hookuser:hookpass@{host}/services/TPATHTOKEN42?token=QUERYTOKEN99"


def assert_no_secret(text: str) -> None:
    assert not [part for part in SECRET_PARTS if part in text], text


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


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_a_failure_line_and_is_never_followed(status):
    with webhook_server() as (target, elsewhere):
        with webhook_server(status=status, location=target) as (url, server):
            warning = post_message(url, MESSAGE, timeout_s=5)
    port = server.server_port
    assert warning.startswith(f"notify.webhook (127.0.0.1:{port}) answered HTTP {status} ")
    assert "a redirect: not followed" in warning and "SECRET" not in warning
    assert len(server.received) == 1 and elsewhere.received == []  # no GET, no second POST


def test_user_info_in_the_url_is_sent_as_basic_authentication_and_never_shown():
    with webhook_server() as (url, server):
        with_user = url.replace("http://", "http://hookuser:hookpass@")
        assert post_message(with_user, MESSAGE, timeout_s=5) is None
    assert server.received == [("application/json", MESSAGE)]
    assert server.authorizations == [f"Basic {base64.b64encode(b'hookuser:hookpass').decode()}"]
    with webhook_server(status=500) as (url, server):
        warning = post_message(url.replace("http://", "http://hookuser:hookpass@"), MESSAGE, 5)
    assert warning.startswith(f"notify.webhook (127.0.0.1:{server.server_port}) refused")
    assert_no_secret(warning)


@pytest.mark.parametrize("host", ["hooks.example.com", "10.0.0.7", "[fe80::1]"])
def test_plain_http_to_another_machine_is_refused_before_anything_is_sent(host):
    warning = post_message(secret_url(host, "http"), MESSAGE, timeout_s=5)
    assert warning.startswith(f"notify.webhook ({host}): not posted: http:// to {host} would ")
    assert_no_secret(warning)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_plain_http_to_this_machine_is_posted(host):
    with webhook_server() as (url, server):
        assert post_message(url.replace("127.0.0.1", host), MESSAGE, timeout_s=5) is None
    assert len(server.received) == 1
    # The rest of 127.0.0.0/8 and IPv6's ::1 are this machine too (no server listens there).
    assert webhook_url_problem("http://127.1.2.3:1/hook") is None
    assert webhook_url_problem("http://[::1]:1/hook") is None


def _raising(error: Exception):
    def open_(self, request, data=None, timeout=None):
        raise error

    return open_


URL = secret_url("hooks.example.com")
DECODED = URL.replace("hookuser:hookpass@", "")  # what urllib's request carries on


@pytest.mark.parametrize(
    "error",
    [
        urllib.error.URLError(f"cannot open {URL}"),
        urllib.error.URLError(OSError(f"[Errno 8] no route for {DECODED}")),
        urllib.error.HTTPError(DECODED, 502, f"Bad Gateway for {DECODED}", {}, io.BytesIO()),
        urllib.error.HTTPError(DECODED, 302, f"Found: {DECODED}", {}, io.BytesIO()),
        http.client.InvalidURL("nonnumeric port: 'hookpass@hooks.example.com'"),
        ValueError("unknown url type: '/services/TPATHTOKEN42%3Ftoken%3DQUERYTOKEN99'"),
        ConnectionResetError(f"reset by peer while posting to {URL}"),
    ],
    ids=lambda error: type(error).__name__,
)
def test_an_error_whose_text_embeds_the_url_is_shown_with_the_host_only(monkeypatch, error):
    monkeypatch.setattr(urllib.request.OpenerDirector, "open", _raising(error))
    warning = post_message(URL, MESSAGE, timeout_s=5)
    assert warning.startswith("notify.webhook (hooks.example.com) ")
    assert_no_secret(warning)
    assert "hooks.example.com" in warning
