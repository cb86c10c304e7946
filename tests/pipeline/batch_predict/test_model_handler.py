"""RunInference with our handler calls `serving_default` on serialized examples, in order."""

from __future__ import annotations

import apache_beam as beam
import numpy as np
import pytest
import tensorflow as tf
from apache_beam.ml.inference.base import RunInference
from apache_beam.testing.util import assert_that, equal_to

from tpu_pipeline.pipeline.batch_predict.model_handler import ServingDefaultHandler
from tpu_pipeline.pipeline.batch_predict.records import Records

CLASSES = 3


class _OneHotOfX(tf.Module):
    """A stand-in for a pushed model: `serving_default` parses examples, scores class `x`."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(self, serialized):
        features = tf.io.parse_example(serialized, {"x": tf.io.FixedLenFeature([], tf.int64)})
        return {"probabilities": tf.one_hot(features["x"], CLASSES)}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("model"))
    model = _OneHotOfX()
    tf.saved_model.save(model, path, signatures={"serving_default": model.serve})
    return path


def _records(file: str, xs: list[int]) -> Records:
    examples = [
        tf.train.Example(
            features=tf.train.Features(
                feature={"x": tf.train.Feature(int64_list=tf.train.Int64List(value=[x]))}
            )
        ).SerializeToString()
        for x in xs
    ]
    return Records([f"{file}:{index}" for index in range(len(xs))], examples, list(xs))


def test_a_batch_is_predicted_in_calls_of_batch_size_in_the_records_order(model_dir):
    handler = ServingDefaultHandler(model_dir, batch_size=3)
    batch = [_records("a", [0, 1, 2, 0, 1]), _records("b", [2, 2])]
    predictions = handler.run_inference(batch, handler.load_model())
    assert [len(p) for p in predictions] == [3, 3, 1]
    assert [s for p in predictions for s in p.sources] == [
        *(f"a:{i}" for i in range(5)),
        "b:0",
        "b:1",
    ]
    scores = np.concatenate([p.probabilities for p in predictions])
    assert scores.argmax(axis=-1).tolist() == [0, 1, 2, 0, 1, 2, 2]
    assert [label for p in predictions for label in p.labels] == [0, 1, 2, 0, 1, 2, 2]
    assert handler.get_num_bytes(batch) == sum(len(e) for r in batch for e in r.examples)


def test_run_inference_gathers_small_files_into_batches_of_batch_size(model_dir):
    """Files of one record each (a photo a file) reach the model together, not one by one."""
    files = [_records(f"photo-{index}.png", [index % CLASSES]) for index in range(8)]
    with beam.Pipeline() as pipeline:
        sizes = (
            pipeline
            | beam.Create(files)
            | RunInference(ServingDefaultHandler(model_dir, batch_size=4))
            | beam.Map(len)
        )
        assert_that(sizes, equal_to([4, 4]))
