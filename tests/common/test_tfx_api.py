"""Every TFX name the product uses still lives where common/tfx_api.py looks for it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tpu_pipeline.common import tfx_api


@pytest.mark.parametrize("name", tfx_api.__all__)
def test_every_tfx_name_resolves(name):
    assert getattr(tfx_api, name) is not None


def test_an_unknown_name_says_where_to_add_it():
    with pytest.raises(AttributeError, match="add its TFX path to _PATHS"):
        tfx_api.NoSuchComponent  # noqa: B018


def test_asking_for_one_name_does_not_import_the_vertex_sdk():
    """The point of the facade: local runs never pay for the Vertex AI SDK."""
    code = (
        "import sys; from common.tfx_api import FnArgs, Trainer;"
        "print('google.cloud.aiplatform' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )

    assert result.stdout.strip() == "False"
