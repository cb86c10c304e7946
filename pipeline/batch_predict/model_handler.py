"""The model step: Beam's RunInference, with a model handler for the pipeline's `serving_default`.

RunInference (`apache_beam.ml.inference.base`) is Beam's own model step: it
loads the model once per worker process and shares it between the process's
threads (Beam's `Shared`), batches with `BatchElements`, and reports the load
time and the batches' latency and sizes as metrics that Dataflow shows. What it
needs from us is a `ModelHandler` that loads and calls the model.

Why our own handler, and not one Beam or tfx_bsl ships:
- Beam's `TFModelHandlerTensor` / `TFModelHandlerNumpy`
  (`apache_beam.ml.inference.tensorflow_inference`) do not import with this
  stack: the module imports tensorflow_hub 0.15, which imports TensorFlow's
  estimator API that TF 2.16 no longer has. They would also call the model on
  tensors, not through a signature that takes serialized tf.Examples.
- tfx_bsl's `RunInference` with a `saved_model_spec` does call `serving_default`
  on serialized examples, but takes one record per Beam element and hands back
  one PredictionLog per record, filled tensor by tensor: per record that costs
  more than the digits model's own prediction, and the readable outputs would
  have to be read back out of each log.
This handler takes the reading step's chunks of records as elements (Beam
moves chunks, never single records), calls `serving_default` on batches of
`batch_size`, and hands on one `Predictions` per call.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf
from apache_beam.ml.inference.base import ModelHandler

from tpu_pipeline.components.serving.export import (
    SERVING_INPUT_KEY,
    SERVING_OUTPUT_KEY,
    SERVING_SIGNATURE,
)
from tpu_pipeline.pipeline.batch_predict.predictions import Predictions
from tpu_pipeline.pipeline.batch_predict.records import Records


class LoadedModel:
    """A SavedModel and its `serving_default`: the object keeps the signature's variables."""

    def __init__(self, model_dir: str):
        self.saved_model = tf.saved_model.load(model_dir)
        self.serve = self.saved_model.signatures[SERVING_SIGNATURE]


class ServingDefaultHandler(ModelHandler[Records, Predictions, LoadedModel]):
    """Loads a pushed SavedModel and predicts chunks of records through its `serving_default`.

    `BatchElements` (RunInference's batching) gathers chunks up to `batch_size`
    records, counted by `len`: a file of one photo is a chunk of one record, a
    TFRecord file gives chunks of `READ_CHUNK`, each a batch of its own.
    """

    def __init__(self, model_dir: str, batch_size: int):
        super().__init__()
        self._model_dir = model_dir
        self._batch_size = batch_size

    def load_model(self) -> LoadedModel:
        return LoadedModel(self._model_dir)

    def run_inference(
        self, batch: Sequence[Records], model: LoadedModel, inference_args=None
    ) -> list[Predictions]:
        """One `Predictions` per call of the model, `batch_size` records a call at most."""
        sources = [source for records in batch for source in records.sources]
        examples = [example for records in batch for example in records.examples]
        labels = [label for records in batch for label in records.labels]
        predictions = []
        for start in range(0, len(sources), self._batch_size):
            end = start + self._batch_size
            inputs = {SERVING_INPUT_KEY: tf.constant(examples[start:end])}
            scores = model.serve(**inputs)[SERVING_OUTPUT_KEY].numpy()
            predictions.append(
                Predictions(sources[start:end], examples[start:end], scores, labels[start:end])
            )
        return predictions

    def get_num_bytes(self, batch: Sequence[Records]) -> int:
        """The serialized examples' bytes (Beam's default pickles the whole batch to count)."""
        return sum(len(example) for records in batch for example in records.examples)

    def batch_elements_kwargs(self) -> dict:
        return {
            "min_batch_size": self._batch_size,
            "max_batch_size": self._batch_size,
            "element_size_fn": len,
        }
