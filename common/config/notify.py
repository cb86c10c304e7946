"""The `notify:` section: where the one message about each run's outcome is posted."""

from __future__ import annotations

import re

from pydantic import ConfigDict, Field, field_validator, model_validator

from tpu_pipeline.common.config.base import _Section
from tpu_pipeline.common.config.secrets import SecretUrl

# Secret Manager's name of one version of a secret (`latest` is a version alias).
SECRET_VERSION_PATTERN = r"^projects/[^/\s]+/secrets/[^/\s]+/versions/[^/\s]+$"


class NotifyConfig(_Section):
    """A Slack-compatible incoming webhook that hears how every run ended.

    The URL is a secret: `webhook` holds it (a SecretUrl, shown as its host only
    in every dump), or `webhook_secret` names the Secret Manager version that
    holds it, read when the message is posted. On Vertex AI only the second is
    allowed: a compiled spec's parameters are readable by whoever can view the job.

    Reading the secret and posting are each bounded by `timeout_seconds`: a
    webhook that fails or hangs costs the run at most that and one warning line,
    never its outcome.
    """

    model_config = ConfigDict(hide_input_in_errors=True)

    webhook: SecretUrl | None = Field(
        default=None,
        description="https URL (http to loopback only) that receives a JSON POST "
        "({'text': ..., 'blocks': [...]}); a secret, shown as its host only",
    )
    webhook_secret: str | None = Field(
        default=None,
        description="Secret Manager version holding the webhook URL: "
        "projects/PROJECT/secrets/SECRET/versions/VERSION (required on Vertex AI)",
    )
    timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        le=60,
        description="the longest reading the secret, and then posting, may each take",
    )

    @field_validator("webhook_secret")
    @classmethod
    def _secret_version(cls, name: str | None) -> str | None:
        if name is not None and not re.fullmatch(SECRET_VERSION_PATTERN, name):
            raise ValueError(
                "must name a Secret Manager secret version: "
                "projects/PROJECT/secrets/SECRET/versions/VERSION (a number, or latest)"
            )
        return name

    @model_validator(mode="after")
    def _one_webhook(self) -> NotifyConfig:
        if (self.webhook is None) == (self.webhook_secret is None):
            raise ValueError(
                "set one of notify.webhook (the URL) or notify.webhook_secret "
                "(projects/PROJECT/secrets/SECRET/versions/VERSION, which holds it)"
            )
        return self
