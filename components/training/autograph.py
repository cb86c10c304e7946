"""AutoGraph settings shared by everything that traces tf_keras training steps.

A module of its own, light to import, so the TPU preflight can trace a step
the way the Trainer does without importing TFX's Trainer machinery (~9 s).
"""

from __future__ import annotations

from tensorflow.python.autograph.core import config as autograph_config


def skip_autograph_for_tf_keras() -> None:
    """Stops AutoGraph from converting tf_keras's own code on the first `fit`.

    TF 2.16 exempts the `keras` package but not `tf_keras`; converting it cost
    ~11 s per Trainer run on this stack (STACK.md). tf_keras's code is already
    graph-safe, so converting it buys nothing.
    """
    if not any(
        str(rule) == "DoNotConvert rule for tf_keras" for rule in autograph_config.CONVERSION_RULES
    ):
        rule = autograph_config.DoNotConvert("tf_keras")
        autograph_config.CONVERSION_RULES = (rule, *autograph_config.CONVERSION_RULES)
