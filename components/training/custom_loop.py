"""The custom training loop (`trainer.loop: custom`), as the TPU guides write one.

A `tf.GradientTape` step runs on every replica through `strategy.run`, over a
distributed dataset, several steps per `tf.function` call so that a TPU or
GPU is not left waiting on the host between steps. The loop drives the same
Keras callbacks `fit` uses (backups, TensorBoard, the epoch lines, the
learning rate) and reports the same metrics under the same names, so the
rest of the pipeline cannot tell which loop trained the model.
"""

from __future__ import annotations

import tensorflow as tf
import tf_keras


class _Metrics:
    """Loss and accuracy for one phase, named as Keras's `fit` names them."""

    def __init__(self, prefix: str):
        self.loss = tf_keras.metrics.Mean(f"{prefix}loss")
        self.accuracy = tf_keras.metrics.SparseCategoricalAccuracy(f"{prefix}accuracy")

    def update(
        self,
        per_example_loss: tf.Tensor,
        labels: tf.Tensor,
        probabilities: tf.Tensor,
        weights: tf.Tensor | None = None,
    ):
        self.loss.update_state(per_example_loss, sample_weight=weights)
        self.accuracy.update_state(labels, probabilities, sample_weight=weights)

    def reset(self) -> None:
        self.loss.reset_state()
        self.accuracy.reset_state()

    def results(self) -> dict[str, float]:
        return {m.name: float(m.result()) for m in (self.loss, self.accuracy)}


class CustomLoop:
    """Compiled step functions for one model under one strategy.

    Args:
      model: a compiled model (its optimizer is the one the loop applies).
      strategy: the strategy the model's variables were created under.
      global_batch_size: examples per step over all replicas; the loss is
        averaged over it, so gradients summed across replicas are the mean.
      jit_compile: compile each replica step with XLA.
    """

    def __init__(
        self,
        model: tf_keras.Model,
        strategy: tf.distribute.Strategy,
        global_batch_size: int,
        jit_compile: bool,
    ):
        self.model = model
        self.strategy = strategy
        self._global_batch_size = global_batch_size
        # The loss the model was compiled with (`trainer.label_smoothing` included), per
        # example: the step weighs and sums it itself.
        self._loss = type(model.loss).from_config(
            {**model.loss.get_config(), "reduction": tf_keras.losses.Reduction.NONE}
        )
        with strategy.scope():
            self.train_metrics = _Metrics("")
            self.eval_metrics = _Metrics("val_")
        self._replica_train_step = tf.function(self.train_step, jit_compile=jit_compile)
        self._replica_eval_step = tf.function(self._eval_step, jit_compile=jit_compile)

    def train_step(
        self, images: tf.Tensor, labels: tf.Tensor, weights: tf.Tensor | None = None
    ) -> dict[str, tf.Tensor]:
        """One replica's step: forward, loss, gradients, update (what preflight traces).

        `weights` (per example: `trainer.class_weight`) scale each example's loss,
        as Keras's `fit` applies sample weights. Returns this replica's share of the
        loss, as Keras's `train_step` returns its loss.
        """
        optimizer = self.model.optimizer
        scales_loss = isinstance(optimizer, tf_keras.mixed_precision.LossScaleOptimizer)
        with tf.GradientTape() as tape:
            probabilities = self.model(images, training=True)
            per_example_loss = self._loss(labels, probabilities)
            if weights is not None:
                per_example_loss *= weights
            # Each replica's share of the global mean: summed over replicas it is the mean.
            # (tf.nn.compute_average_loss would add an Assert, a host op TPUs cannot run.)
            loss = tf.reduce_sum(per_example_loss) / self._global_batch_size
            if self.model.losses:  # e.g. weight decay as layer regularizers
                loss += tf.add_n(self.model.losses) / self.strategy.num_replicas_in_sync
            # float16: scale up so small gradients do not underflow
            scaled_loss = optimizer.get_scaled_loss(loss) if scales_loss else loss
        variables = self.model.trainable_variables
        gradients = tape.gradient(scaled_loss, variables)
        if scales_loss:
            gradients = optimizer.get_unscaled_gradients(gradients)
        optimizer.apply_gradients(zip(gradients, variables, strict=True))
        self.train_metrics.update(per_example_loss, labels, probabilities)
        return {"loss": loss}

    def _eval_step(self, images: tf.Tensor, labels: tf.Tensor, weights: tf.Tensor) -> None:
        # Weighted: the zero-weight examples that fill the last eval batch must not count.
        probabilities = self.model(images, training=False)
        self.eval_metrics.update(self._loss(labels, probabilities), labels, probabilities, weights)

    @tf.function
    def train_steps(self, iterator: tf.distribute.DistributedIterator, steps: tf.Tensor) -> None:
        """Runs `steps` training steps in one call: one host round trip for all of them."""
        for _ in tf.range(steps):
            self.strategy.run(self._replica_train_step, args=next(iterator))

    @tf.function
    def evaluate(self, dataset: tf.distribute.DistributedDataset) -> None:
        """One pass over the (distributed) evaluation dataset of weighted examples."""
        for images, labels, weights in dataset:
            self.strategy.run(self._replica_eval_step, args=(images, labels, weights))


def train_custom_loop(
    model: tf_keras.Model,
    strategy: tf.distribute.Strategy,
    train_dataset: tf.distribute.DistributedDataset,
    eval_dataset: tf.distribute.DistributedDataset,
    *,
    epochs: int,
    steps_per_epoch: int,
    steps_per_execution: int,
    global_batch_size: int,
    jit_compile: bool,
    callbacks: list[tf_keras.callbacks.Callback],
    initial_epoch: int = 0,
) -> tf_keras.callbacks.History:
    """Trains like `model.fit` would, with the loop written out.

    Starts at `initial_epoch` (as `fit`'s), or at the epoch after the last one
    backed up: the BackupAndRestore callback restores the weights, optimizer and
    epoch counter when training begins, exactly as in `fit`.
    """
    loop = CustomLoop(model, strategy, global_batch_size, jit_compile)
    history = tf_keras.callbacks.History()
    callback_list = tf_keras.callbacks.CallbackList(
        [*callbacks, history], model=model, epochs=epochs, steps=steps_per_epoch, verbose=0
    )
    model.stop_training = False
    callback_list.on_train_begin()
    # The same private hook fit uses to read the backed-up epoch counter.
    initial_epoch, _ = model._maybe_load_initial_counters_from_ckpt(steps_per_epoch, initial_epoch)
    iterator = iter(train_dataset)
    for epoch in range(initial_epoch, epochs):
        loop.train_metrics.reset()
        loop.eval_metrics.reset()
        callback_list.on_epoch_begin(epoch)
        step = 0
        while step < steps_per_epoch:
            steps = min(steps_per_execution, steps_per_epoch - step)
            callback_list.on_train_batch_begin(step)
            loop.train_steps(iterator, tf.constant(steps))
            step += steps
            callback_list.on_train_batch_end(step - 1)
        logs = loop.train_metrics.results()
        callback_list.on_test_begin()
        loop.evaluate(eval_dataset)
        callback_list.on_test_end()
        logs.update(loop.eval_metrics.results())
        callback_list.on_epoch_end(epoch, logs)
        if model.stop_training:
            break
    with strategy.scope():  # as `fit` ends: an averaged optimizer's weights become the model's
        model.optimizer.finalize_variable_values(model.trainable_variables)
    callback_list.on_train_end()
    return history
