"""Reading one secret version from Google Cloud Secret Manager, within a bound.

`notify.webhook_secret` names the version that holds the webhook URL, so the URL
itself is in no configuration file, compiled spec or pipeline parameter: the
process that posts reads it when it posts, with its own credentials (on Vertex
AI the pipeline's service account, which needs roles/secretmanager.secretAccessor
on that secret).

The client finds credentials with `google.auth.default()`, which can wait on the
GCE metadata server with no deadline, so the whole read runs under
`call_with_timeout`.
"""

from __future__ import annotations

from tpu_pipeline.common.timeouts import call_with_timeout


def read_secret_version(name: str, timeout_s: float) -> str:
    """The text held by secret version `name` (projects/P/secrets/S/versions/V).

    Raises:
      TimeoutError: no answer within `timeout_s` (credentials or the API).
      google.api_core.exceptions.GoogleAPIError, google.auth.exceptions.GoogleAuthError:
        no credentials, no permission, no such secret or version.
      UnicodeDecodeError: the secret holds bytes that are not UTF-8 text.
    """

    def access() -> str:
        from google.cloud import secretmanager

        client = secretmanager.SecretManagerServiceClient()
        response = client.access_secret_version(name=name, timeout=timeout_s)
        return response.payload.data.decode("utf-8").strip()

    return call_with_timeout(access, timeout_s, f"reading secret {name}")
