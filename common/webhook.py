"""Posting one JSON message to a Slack-compatible incoming webhook, within a bound.

A notification is a courtesy to people, never part of a run's result: posting
answers within `timeout_s` in total (urllib's socket timeout covers a server
that accepts and says nothing; a thread bounds one that drips an answer
forever), and every failure becomes one warning line instead of an exception.
The warning names the webhook's host only: a webhook URL is a secret.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from common.timeouts import call_with_timeout

# Slack shows at most 3,000 characters in a section block (Block Kit's limit).
_SECTION_LIMIT = 3000


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


def _post(url: str, message: dict[str, Any], timeout_s: float) -> int:
    request = urllib.request.Request(
        url,
        data=json.dumps(message).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        return response.status


def post_message(url: str, message: dict[str, Any], timeout_s: float) -> str | None:
    """Posts `message` as JSON to `url`; returns None, or one line saying why it was not taken.

    Never raises for the webhook's sake and never takes much longer than `timeout_s`.
    """
    host = urllib.parse.urlsplit(url).netloc
    try:
        call_with_timeout(lambda: _post(url, message, timeout_s), timeout_s, f"webhook {host}")
    except TimeoutError:  # the socket's own timeout, or the total bound
        return f"notify.webhook ({host}) did not answer within {timeout_s:g} s"
    except urllib.error.HTTPError as error:
        return f"notify.webhook ({host}) refused the message: HTTP {error.code} {error.reason}"
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        return f"notify.webhook ({host}) was not reached: {reason}"
    return None
