"""The `notify:` section: where the one message about each run's outcome is posted."""

from __future__ import annotations

import urllib.parse

from pydantic import Field, field_validator

from common.config.base import _Section


class NotifyConfig(_Section):
    """A Slack-compatible incoming webhook that hears how every run ended.

    Posting is bounded by `timeout_seconds` in total: a webhook that fails or
    hangs costs the run at most that and one warning line, never its outcome.
    """

    webhook: str = Field(
        description="http(s) URL that receives a JSON POST ({'text': ..., 'blocks': [...]})"
    )
    timeout_seconds: float = Field(
        default=10.0, gt=0, le=60, description="the longest posting may take, connect to answer"
    )

    @field_validator("webhook")
    @classmethod
    def _http_url(cls, url: str) -> str:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname or " " in url:
            raise ValueError(
                "must be an http:// or https:// URL with a host, "
                "such as a Slack incoming webhook (https://hooks.slack.com/services/...)"
            )
        return url
