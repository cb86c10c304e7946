"""Configuration values that must never be shown: webhook URLs, and the one rule for dumping them.

A webhook URL is a password: whoever reads its path (Slack's `/services/T/B/X`),
query (`?token=`) or `user:password@` can post as us. Reports, logs and compiled
specs are attached to tickets, so a secret field is a `SecretUrl`: pydantic's
SecretStr (`repr` and `str` show `**********`) that every dump,
`model_dump()` and `model_dump_json()` alike, turns into its scheme and host only
(`https://hooks.slack.com/***`). Code that posts asks for `get_secret_value()`.

Every way the code dumps a configuration goes through that serializer, and
`load_config` leaves a secret's value out of its error lines (SECRET_ERROR), so
there is no second place that must remember which fields are secret.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from typing import Annotated, Any

from pydantic import PlainSerializer, SecretStr, ValidationError, WrapValidator
from pydantic_core import PydanticCustomError

# The error type of every problem with a secret field: load_config shows no input for it.
SECRET_ERROR = "secret_value"
# What stands for a secret URL's path, query and user info wherever it is shown.
HIDDEN = "***"
# Beam's flags that carry credentials (apache_beam/options/pipeline_options.py). Beam
# reads the same credentials from the environment (the AWS chain, Azure's), so a
# configuration never needs them, and in beam_pipeline_args they would be printed in
# the report and compiled into every Beam step of a Vertex spec.
_BEAM_CREDENTIAL_FLAGS = (
    "--s3_access_key_id",
    "--s3_secret_access_key",
    "--s3_session_token",
    "--azure_connection_string",
)
# `scheme://user:password@`: a password written into a URL.
_URL_PASSWORD = re.compile(r"\b[a-z][a-z0-9+.-]*://[^/?#@\s]*:[^/?#@\s]*@", re.IGNORECASE)


def url_host(url: str) -> str:
    """The URL's host and port, never its `user:password@`: what messages may show."""
    try:
        parts = urllib.parse.urlsplit(url)
        host, port = parts.hostname or "", parts.port
    except ValueError:  # a port that is not a number
        return "an unparsable URL"
    if ":" in host:  # IPv6
        host = f"[{host}]"
    return f"{host}:{port}" if port else host or "no host"


def _shown_url(url: str) -> str:
    """The URL as dumps show it: its scheme and host, the rest hidden."""
    scheme = urllib.parse.urlsplit(url).scheme
    return f"{scheme}://{url_host(url)}/{HIDDEN}"


def _is_loopback(host: str) -> bool:
    """Whether `host` names this machine (localhost, 127.0.0.0/8, ::1): plain http stays here."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def webhook_url_problem(url: str) -> str | None:
    """Why `url` is not a webhook we post to, in words that never quote it; None if it is.

    https only, except to this machine: over plain http the URL's secret path and
    the message cross the network readable by anyone on the way.
    """
    not_a_url = (
        "must be an https:// URL with a host, such as a Slack incoming webhook "
        f"(https://hooks.slack.com/services/{HIDDEN})"
    )
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 (raises for a port that is not a number)
    except ValueError:
        return not_a_url
    if parts.scheme not in ("http", "https") or not host or any(c.isspace() for c in url):
        return not_a_url
    if parts.scheme == "http" and not _is_loopback(host):
        return (
            f"http:// to {url_host(url)} would send the secret URL and the message unencrypted: "
            "use https:// (plain http is allowed to localhost, 127.0.0.0/8 and ::1 only)"
        )
    return None


def _validated_webhook(value: Any, handler: Any) -> SecretStr:
    try:
        secret = handler(value)
    except ValidationError:
        raise PydanticCustomError(SECRET_ERROR, "must be a URL (text)") from None
    problem = webhook_url_problem(secret.get_secret_value())
    if problem:
        raise PydanticCustomError(SECRET_ERROR, problem)
    return secret


def _dumped(secret: SecretStr) -> str:
    return _shown_url(secret.get_secret_value())


# A webhook URL: https (or http to loopback), held as a secret, dumped as its host only.
SecretUrl = Annotated[
    SecretStr,
    WrapValidator(_validated_webhook),
    PlainSerializer(_dumped, return_type=str, when_used="always"),
]


def plain_credentials(tree: Any, path: str = "") -> str | None:
    """The first field of a dumped configuration holding a credential in plain text, and why.

    Only a SecretUrl may hold one: anywhere else (a data folder, a Beam flag) the
    value would be shown as it is. The answer names the field, never the value.
    """
    if isinstance(tree, dict):
        items = [(f"{path}.{key}" if path else str(key), value) for key, value in tree.items()]
    elif isinstance(tree, (list, tuple)):
        items = [(f"{path}[{index}]", value) for index, value in enumerate(tree)]
    elif isinstance(tree, str):
        flag = tree.split("=", 1)[0]
        if flag in _BEAM_CREDENTIAL_FLAGS:
            return (
                f"{path}: {flag} puts a credential where the report and compiled specs show "
                "it; leave it out and let Beam read it from the environment (AWS_* variables, "
                "an instance role, AZURE_* variables)"
            )
        if _URL_PASSWORD.search(tree):
            return (
                f"{path}: holds a URL with a user:password@, which the report and compiled "
                "specs would show; give the credentials another way (the environment, a "
                "service account)"
            )
        return None
    else:
        return None
    for key, value in items:
        found = plain_credentials(value, key)
        if found:
            return found
    return None
