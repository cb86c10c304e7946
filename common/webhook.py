"""Posting one JSON message to a Slack-compatible incoming webhook, within a bound.

A notification is a courtesy to people, never part of a run's result: posting
answers within `timeout_s` in total (urllib's socket timeout covers a server
that accepts and says nothing; a thread bounds one that drips an answer
forever), and every failure becomes one warning line instead of an exception.

A webhook URL is a secret (common/config/secrets.py): warnings name its host
only, and the text of any error they quote has the URL's user info, path and
query cut out. The poster also refuses what would leak the secret or lose the
message: plain http to another machine, and redirects (urllib would follow a
302 or 303 with a GET that has no body, and send the secret path to wherever
the redirect points).
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from tpu_pipeline.common.config import HIDDEN, NotifyConfig, url_host, webhook_url_problem
from tpu_pipeline.common.secret_manager import read_secret_version
from tpu_pipeline.common.timeouts import call_with_timeout

# Slack shows at most 3,000 characters in a section block (Block Kit's limit).
_SECTION_LIMIT = 3000
# Pieces of a URL shorter than this are left in error texts: cutting every "a" out of a
# message would make it unreadable, and such a piece guards nothing.
_SHORTEST_HIDDEN = 4


def slack_message(text: str, details: list[str]) -> dict[str, Any]:
    """A Slack-compatible message: `text` for any client, and blocks with the details.

    Webhooks that are not Slack's (Mattermost, Rocket.Chat, Teams' Slack-compatible
    ones) read `text`; Slack shows the blocks.
    """
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]
    if details:
        body = "\n".join(details)[:_SECTION_LIMIT]
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": body}})
    return {"text": "\n".join([text, *details]), "blocks": blocks}


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Turns every 3xx into an HTTPError instead of following it."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


def _request(url: str, message: dict[str, Any]) -> urllib.request.Request:
    """The POST; a `user:password@` in the URL becomes Basic authentication, as curl does.

    urllib itself would take the user info for part of the host name.
    """
    parts = urllib.parse.urlsplit(url)
    headers = {"Content-Type": "application/json"}
    if parts.username is not None:
        user, password = (urllib.parse.unquote(p or "") for p in (parts.username, parts.password))
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
        url = urllib.parse.urlunsplit(parts._replace(netloc=url_host(url)))
    return urllib.request.Request(
        url, data=json.dumps(message).encode(), headers=headers, method="POST"
    )


def _post(url: str, message: dict[str, Any], timeout_s: float) -> int:
    with _OPENER.open(_request(url, message), timeout=timeout_s) as response:
        return response.status


def _secret_pieces(url: str) -> list[str]:
    """Every part of `url` that is secret, as written and percent-decoded, longest first."""
    parts = urllib.parse.urlsplit(url)
    pieces = {
        url,
        parts.netloc.rpartition("@")[0],
        parts.username or "",
        parts.password or "",
        parts.path + ("?" + parts.query if parts.query else ""),
        parts.path,
        parts.query,
        parts.fragment,
        *parts.path.split("/"),
        *(value for _, value in urllib.parse.parse_qsl(parts.query)),
    }
    pieces |= {urllib.parse.unquote(piece) for piece in pieces}
    return sorted((p for p in pieces if len(p) >= _SHORTEST_HIDDEN), key=len, reverse=True)


def without_secret(text: str, url: str) -> str:
    """`text` with every secret part of `url` (user info, path, query) replaced by HIDDEN."""
    for piece in _secret_pieces(url):
        text = text.replace(piece, HIDDEN)
    return text


def post_message(
    url: str, message: dict[str, Any], timeout_s: float, field: str = "notify.webhook"
) -> str | None:
    """Posts `message` as JSON to `url`; returns None, or one line saying why it was not taken.

    Args:
      url: the webhook's URL, the secret itself.
      message: the JSON body (see `slack_message`).
      timeout_s: the most posting may take, connecting to answering.
      field: the configuration field the URL came from, for the warning.

    Never raises for the webhook's sake, never takes much longer than `timeout_s`,
    and never returns any part of `url` but its host.
    """
    where = f"{field} ({url_host(url)})"
    problem = webhook_url_problem(url)
    if problem:
        return f"{where}: not posted: {problem}"
    try:
        call_with_timeout(lambda: _post(url, message, timeout_s), timeout_s, f"webhook {where}")
    except TimeoutError:  # the socket's own timeout, or the total bound
        return f"{where} did not answer within {timeout_s:g} s"
    except urllib.error.HTTPError as error:
        reason = without_secret(str(error.reason), url)
        if 300 <= error.code < 400:
            return (
                f"{where} answered HTTP {error.code} {reason}, a redirect: not followed (it "
                "would lose the message and carry the secret URL on); set the URL it leads to"
            )
        return f"{where} refused the message: HTTP {error.code} {reason}"
    except urllib.error.URLError as error:
        return f"{where} was not reached: {without_secret(str(error.reason), url)}"
    except Exception as error:  # an invalid URL, a broken connection: a warning
        return f"{where} was not reached: {without_secret(f'{error}', url) or type(error).__name__}"
    return None


def post_notification(notify: NotifyConfig, message: dict[str, Any]) -> str | None:
    """Posts `message` to the webhook `notify` configures; returns None or one warning line.

    With `webhook_secret`, the URL is read from Secret Manager first, within
    `timeout_seconds`; an unreadable secret is a warning like an unreachable webhook.
    """
    if notify.webhook is not None:
        return post_message(notify.webhook.get_secret_value(), message, notify.timeout_seconds)
    name = notify.webhook_secret
    try:
        url = read_secret_version(name, notify.timeout_seconds)
    except Exception as error:  # credentials, permission, the API: a warning
        first_line = (str(error).strip().splitlines() or [""])[0]
        return f"notify.webhook_secret {name} was not read: {type(error).__name__}: {first_line}"
    return post_message(url, message, notify.timeout_seconds, f"notify.webhook_secret {name}")
