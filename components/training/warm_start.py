"""Starts a model from a previous one's weights, when the architecture allows it."""

from __future__ import annotations

import tf_keras
from absl import logging

from tpu_pipeline.components.models import restore_exported_weights


def warm_start(model: tf_keras.Model, base_model_dir: str) -> bool:
    """Copies the weights of a previous model (the last blessed one) into `model`.

    Retraining on a new span then starts from what the last model learned
    instead of from scratch. A base model of another architecture (the config
    changed) cannot lend its weights; training then starts from scratch.
    """
    if not restore_exported_weights(model, base_model_dir):
        logging.warning("Not warm-starting: %s has another architecture", base_model_dir)
        return False
    logging.info("Warm-started from %s", base_model_dir)
    return True
