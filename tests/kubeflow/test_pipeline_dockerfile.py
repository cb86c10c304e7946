"""The pipeline image installs TensorFlow Serving's model server, pinned and verified.

No Docker engine here: these read kubeflow/Dockerfile and check it against the lock.
"""

from __future__ import annotations

import re

from tpu_pipeline.common.config import REPO_ROOT

DOCKERFILE = REPO_ROOT / "kubeflow" / "Dockerfile"
TF_SERVING_APT = "https://storage.googleapis.com/tensorflow-serving-apt"
KEYRING = "/usr/share/keyrings/tensorflow-serving.gpg"


def _locked_version(package: str) -> str:
    lock = (REPO_ROOT / "requirements.lock").read_text()
    return re.search(rf"^{re.escape(package)}==(\S+)$", lock, re.MULTILINE).group(1)


def _arg(name: str) -> str:
    found = re.search(rf"^ARG {name}=(\S+)$", DOCKERFILE.read_text(), re.MULTILINE)
    assert found, f"kubeflow/Dockerfile has no ARG {name}=..."
    return found.group(1)


def _minor(version: str) -> list[str]:
    return version.split(".")[:2]


def test_the_model_server_is_pinned_to_the_locked_tensorflow_minor():
    version = _arg("TF_SERVING_VERSION")
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), version
    assert _minor(version) == _minor(_locked_version("tensorflow"))
    # The same TF Serving release as the client library the check's requests come from.
    assert _minor(version) == _minor(_locked_version("tensorflow-serving-api"))
    assert '"tensorflow-model-server=${TF_SERVING_VERSION}"' in DOCKERFILE.read_text()


def test_the_apt_repository_is_trusted_only_through_the_pinned_key():
    text = DOCKERFILE.read_text()
    fingerprint = _arg("TF_SERVING_KEY_FINGERPRINT")
    assert re.fullmatch(r"[0-9A-F]{40}", fingerprint), "a whole fingerprint, not a key id"
    source = f"deb [arch=amd64 signed-by={KEYRING}] {TF_SERVING_APT} stable "
    assert f"{source}tensorflow-model-server tensorflow-model-server-universal" in text
    check = text.index('grep -qx "fpr:::::::::${TF_SERVING_KEY_FINGERPRINT}:"')
    keyring = text.index(f'--export "${{TF_SERVING_KEY_FINGERPRINT}}" > {KEYRING}')
    install = text.index("tensorflow-model-server=${TF_SERVING_VERSION}")
    # The key is checked before apt trusts it, and apt trusts it before the install.
    assert check < keyring < text.index(source) < install
    assert "apt-key" not in text and "[trusted=yes]" not in text
    assert "set -eu" in text[:check]  # a failed check stops the build
