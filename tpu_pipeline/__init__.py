"""tpu-pipeline's one import name: `tpu_pipeline.<folder>` for each of the repository's packages.

The repository keeps its packages at the top (`pipeline/`, `components/`, `kubeflow/`, ...),
as the product's layout asks, while an installed distribution must add a single name to
site-packages: `kubeflow` is the Kubeflow SDK's own distribution, `pipeline` and `common`
are anyone's. setup.py's `package_dir` installs each folder as `tpu_pipeline.<folder>`; in
a checkout (setup.py beside this folder), the checkout's root joins this package's search
path so that the same names import the working tree without an install.
"""

import importlib
import os

# Our artifact types, by the names TFX's Vertex AI step container imports them as class
# paths (`tpu_pipeline.ModelExplanation`); loaded on first use, as TensorFlow comes with them.
_ARTIFACT_TYPES = {"ModelExplanation": "tpu_pipeline.components.explain.artifact"}

_CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isfile(os.path.join(_CHECKOUT, "setup.py")):
    __path__.append(_CHECKOUT)  # noqa: F821 (a package's __path__ is set by the import system)


def __getattr__(name: str):
    """An artifact type of ours, imported on first use; anything else is not here."""
    if name in _ARTIFACT_TYPES:
        return getattr(importlib.import_module(_ARTIFACT_TYPES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
