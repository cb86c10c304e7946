"""The report's sample predictions: the served model on real eval examples, a batch at a time."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tests.components.serving.served_models import DIGITS, eval_examples, save_model
from tpu_pipeline.components.images.examples import parse_pixels
from tpu_pipeline.components.serving.export import SERVING_INPUT_KEY, SERVING_OUTPUT_KEY
from tpu_pipeline.pipeline.report.serving_facts import (
    PREDICT_BATCH,
    load_signatures,
    predict_samples,
)


def test_samples_are_predicted_a_batch_at_a_time_mistakes_first(tmp_path):
    serve = load_signatures(save_model(tmp_path / "model"))["serving_default"]
    records = eval_examples(tmp_path / "eval", count=100)
    batch_sizes = []

    def recording_serve(**inputs):
        batch_sizes.append(int(inputs[SERVING_INPUT_KEY].shape[0]))
        return serve(**inputs)

    samples = predict_samples(recording_serve, records, DIGITS, shown=6)

    assert batch_sizes == [PREDICT_BATCH] * 3 + [100 - 3 * PREDICT_BATCH]
    whole = serve(**{SERVING_INPUT_KEY: tf.constant(records)})[SERVING_OUTPUT_KEY].numpy()
    pixels, labels = (tensor.numpy() for tensor in parse_pixels(tf.constant(records), DIGITS))
    wrong = np.flatnonzero(whole.argmax(axis=1) != labels)
    right = np.flatnonzero(whole.argmax(axis=1) == labels)
    assert len(wrong) >= 3 and len(right) >= 3  # the untrained model gets both kinds
    assert samples.examined == 100 and samples.mistakes == len(wrong)
    # Half the grid is mistakes, then right answers, each in eval order.
    chosen = [*wrong[:3], *right[:3]]
    np.testing.assert_array_equal(samples.images, pixels[chosen])
    np.testing.assert_array_equal(samples.true_labels, labels[chosen])
    np.testing.assert_array_equal(samples.predicted, whole.argmax(axis=1)[chosen])
    np.testing.assert_allclose(samples.confidence, whole.max(axis=1)[chosen], rtol=1e-6)
