"""The global Keras precision policy, set for the length of one build.

Layers created without a `dtype` (a user's model, Keras applications) take the
global policy; setting it around their build makes them compute in bfloat16 on a
TPU like the built-ins, and restoring it keeps the rest of the process unchanged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import tf_keras


@contextlib.contextmanager
def global_policy(policy: tf_keras.mixed_precision.Policy) -> Iterator[None]:
    """Sets `policy` as Keras's global precision policy inside the block, then restores it."""
    previous = tf_keras.mixed_precision.global_policy()
    tf_keras.mixed_precision.set_global_policy(policy)
    try:
        yield
    finally:
        tf_keras.mixed_precision.set_global_policy(previous)
