"""An exported model's weights, restored into the same network built anew.

The export keeps no per-layer call traces (`components/serving/export.py`), so Keras
cannot revive the SavedModel as a model with a user's own unregistered layers; those
that want the weights in a Keras model (a warm start, a temperature-scaled copy) build
the configured network and read the weights from the SavedModel's checkpoint.
"""

from __future__ import annotations

import os

import tensorflow as tf
import tf_keras

from tpu_pipeline.common.work_dirs import WorkDirs

# A checkpoint key's ending for a variable's value, and the keys not of the network's weights.
_VARIABLE_VALUE = "/.ATTRIBUTES/VARIABLE_VALUE"
_NOT_THE_NETWORKS = ("optimizer/", "save_counter/")
# Where the model's own checkpoint is written to list its weights' paths.
WEIGHT_LISTS = WorkDirs("weight-list", "checkpoint listing a model's weights")


def restore_exported_weights(model: tf_keras.Model, export_dir: str) -> bool:
    """Gives `model` the weights of the model exported to `export_dir`, if it is the same network.

    Read from the SavedModel's checkpoint by the object paths Keras gives both models (so no
    class of the exported model is revived: a user's own layers need not be registered).
    Returns False, leaving `model` as it was, when a weight of `model` is missing there or
    has another shape (the configured network changed since).
    """
    exported = os.path.join(export_dir, tf.saved_model.VARIABLES_DIRECTORY, "variables")
    exported_shapes = dict(tf.train.list_variables(exported))
    with WEIGHT_LISTS.owned() as scratch:
        # The paths of the model's own weights: its own checkpoint lists them.
        own = os.path.join(scratch, "weights")
        tf.train.Checkpoint(model).write(own)
        own_shapes = {
            path: shape
            for path, shape in tf.train.list_variables(own)
            if path.endswith(_VARIABLE_VALUE) and not path.startswith(_NOT_THE_NETWORKS)
        }
    if any(exported_shapes.get(path) != shape for path, shape in own_shapes.items()):
        return False
    # Keys of the exported graph `model` lacks (the Transform layer, the signatures) stay unread.
    tf.train.Checkpoint(model).read(exported).expect_partial()
    return True
