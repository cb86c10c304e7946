"""Sends Vertex AI requests, failing in seconds with one clear line when it cannot.

Left to itself the SDK retries an unreachable API for about two minutes
(STACK.md). So before anything is sent we check, each under a short timeout,
that Application Default Credentials exist and that the regional endpoint
answers; then each call runs once, with a deadline and no retries.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import urllib.parse
from collections.abc import Mapping
from typing import Any

from tpu_pipeline.common.timeouts import call_with_timeout

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
CHECK_TIMEOUT_S = 5.0
CALL_TIMEOUT_S = 60.0
# How long `serving bless --vertex` waits for its upload (a long-running operation).
UPLOAD_TIMEOUT_S = 900.0


@dataclasses.dataclass(frozen=True)
class ApiCall:
    """One Vertex AI API call: which service method, and its request."""

    method: str
    request: Any

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "request": json.loads(type(self.request).to_json(self.request)),
        }


class VertexUnreachableError(RuntimeError):
    """Vertex AI cannot be called from here: no credentials, or no network to it."""


def api_host(region: str) -> str:
    return f"{region}-aiplatform.googleapis.com"


def default_credentials(timeout_s: float = CHECK_TIMEOUT_S) -> Any:
    """Application Default Credentials, or a VertexUnreachableError saying how to get them."""
    import google.auth
    from google.auth import exceptions

    try:
        credentials, _ = call_with_timeout(
            lambda: google.auth.default(scopes=[CLOUD_PLATFORM_SCOPE]),
            timeout_s,
            "looking up Google Cloud credentials",
            on_timeout=VertexUnreachableError,
        )
    except exceptions.DefaultCredentialsError:
        raise VertexUnreachableError(
            "no Google Cloud credentials: run `gcloud auth application-default login` "
            "or set GOOGLE_APPLICATION_CREDENTIALS to a service account key file"
        ) from None
    return credentials


def first_hop(region: str, environ: Mapping[str, str] = os.environ) -> tuple[str, int]:
    """Where a call's TCP connection goes: the proxy gRPC would use, else the endpoint."""
    for name in ("grpc_proxy", "https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY"):
        if environ.get(name):
            proxy = urllib.parse.urlsplit(environ[name])
            return proxy.hostname, proxy.port or 80
    return api_host(region), 443


def check_reachable(region: str, timeout_s: float = CHECK_TIMEOUT_S) -> None:
    """Opens (and closes) a TCP connection to the regional Vertex AI endpoint or the proxy."""
    host, port = first_hop(region)
    try:
        call_with_timeout(
            lambda: socket.create_connection((host, port), timeout=timeout_s).close(),
            timeout_s,
            f"connecting to {host}:{port}",
            on_timeout=VertexUnreachableError,
        )
    except OSError as error:
        raise VertexUnreachableError(
            f"cannot reach {host}:{port} ({error.strerror or error}); check the network, "
            "proxy and region"
        ) from None


def connect(region: str) -> Any:
    """Credentials for calling Vertex AI in `region`, once both checks pass."""
    credentials = default_credentials()
    check_reachable(region)
    return credentials


def send(call: Any, region: str, credentials: Any) -> Any:
    """Makes one API call (an `ApiCall`): one try, with a deadline."""
    from google.cloud.aiplatform_v1 import (
        EndpointServiceClient,
        MetadataServiceClient,
        ModelServiceClient,
        PipelineServiceClient,
        ScheduleServiceClient,
        TensorboardServiceClient,
    )

    service, method = call.method.split(".")
    client_type = {
        "EndpointService": EndpointServiceClient,
        "MetadataService": MetadataServiceClient,
        "ModelService": ModelServiceClient,
        "PipelineService": PipelineServiceClient,
        "ScheduleService": ScheduleServiceClient,
        "TensorboardService": TensorboardServiceClient,
    }
    client = client_type[service](
        credentials=credentials, client_options={"api_endpoint": api_host(region)}
    )
    snake_case = "".join(f"_{c.lower()}" if c.isupper() else c for c in method).lstrip("_")
    return getattr(client, snake_case)(request=call.request, retry=None, timeout=CALL_TIMEOUT_S)
