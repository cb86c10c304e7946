"""AutoGraph settings shared by everything that traces our graphs: the run, the Trainer, probes.

A module of its own, light to import, so the TPU preflight can trace a step
the way the Trainer does without importing TFX's Trainer machinery (~9 s).
"""

from __future__ import annotations

from tensorflow.python.autograph.core import config as autograph_config

# Packages whose graph code is written graph-safe (`tf.cond`, `tf.while_loop`, static Python
# control flow only), so AutoGraph's rewriting of their functions buys nothing:
# - tf_keras: TF 2.16 exempts the `keras` package but not `tf_keras`; converting it cost
#   ~11 s per Trainer run on this stack (STACK.md).
# - tensorflow_transform: traces its own functions with `autograph=False`; applying the
#   transform graph converted 60 of its functions a run, 0.9 s.
# - tpu_pipeline: ours (input parsing, decoding, augmentation, serving signatures), 1.4 s a
#   run of converting 60 functions; a tensor-valued `if` in it would fail at tracing, loudly.
# A user's own module (a model, a preprocessing function) is still converted as before.
GRAPH_SAFE_PACKAGES = ("tf_keras", "tensorflow_transform", "tpu_pipeline")


def skip_autograph_for_graph_safe_code() -> None:
    """Stops AutoGraph from converting GRAPH_SAFE_PACKAGES' functions in this process."""
    present = {str(rule) for rule in autograph_config.CONVERSION_RULES}
    missing = tuple(
        autograph_config.DoNotConvert(package)
        for package in GRAPH_SAFE_PACKAGES
        if f"DoNotConvert rule for {package}" not in present
    )
    autograph_config.CONVERSION_RULES = (*missing, *autograph_config.CONVERSION_RULES)
