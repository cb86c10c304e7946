"""Test-time flips live in the exported signatures: the served model is the evaluated one."""

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft

from tests.components.serving.byte_examples import serialized_byte_examples
from tpu_pipeline.cli.synthetic_data import synthetic_dataset
from tpu_pipeline.components.models import build_model
from tpu_pipeline.components.serving.export import export_serving_model


def test_every_signature_answers_the_mean_of_each_image_and_its_mirror(
    eight_bit_transform, tmp_path
):
    images, _, transformed, graph = eight_bit_transform
    dataset = synthetic_dataset("idx")
    model = build_model("mnist_cnn", dataset.image_shape, dataset.num_classes)
    export_dir = str(tmp_path / "model")
    export_serving_model(
        model, tft.TFTransformOutput(graph), dataset, export_dir, {}, test_time_flip=True
    )
    one_view = model(transformed).numpy()
    both_views = (one_view + model(transformed[:, :, ::-1]).numpy()) / 2
    assert not np.allclose(one_view, both_views, atol=1e-3)  # a model that tells them apart

    served = tf.saved_model.load(export_dir).signatures
    requests = {
        "serving_default": {"examples": tf.constant(serialized_byte_examples(images))},
        "pixels": {"pixels": tf.constant(images.astype(np.float32))},
    }
    for name, request in requests.items():
        answers = served[name](**request)["probabilities"].numpy()
        np.testing.assert_allclose(answers, both_views, atol=1e-5, err_msg=name)
