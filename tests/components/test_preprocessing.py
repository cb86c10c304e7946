"""preprocessing_fn, run by TFT's Beam implementation on real digits."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

from tpu_pipeline.cli.synthetic_data import synthetic_dataset
from tpu_pipeline.common.config import load_config
from tpu_pipeline.components.contract import IMAGE_KEY, LABEL_KEY
from tpu_pipeline.components.preprocessing import preprocessing_fn
from tpu_pipeline.components.serving.export import scale_8bit_pixels, scaled_8bit_values


@pytest.fixture(scope="module")
def transformed_digits(tmp_path_factory):
    from sklearn.datasets import load_digits  # imported here: collecting need not pay it

    digits = load_digits()
    rows = [
        {"pixels": pixels.astype(np.float32), "label": [int(label)]}
        for pixels, label in zip(digits.data[:200], digits.target[:200], strict=True)
    ]
    metadata = dataset_metadata.DatasetMetadata(
        schema_utils.schema_from_feature_spec(
            {
                "pixels": tf.io.FixedLenFeature([64], tf.float32),
                "label": tf.io.FixedLenFeature([1], tf.int64),
            }
        )
    )
    custom_config = {"dataset": load_config().dataset.model_dump(mode="json")}
    with tft_beam.Context(temp_dir=str(tmp_path_factory.mktemp("tft"))):
        (transformed, _), _ = (rows, metadata) | tft_beam.AnalyzeAndTransformDataset(
            lambda inputs: preprocessing_fn(inputs, custom_config)
        )
    return digits, transformed


def test_pixels_become_images_scaled_by_the_data_range(transformed_digits):
    digits, transformed = transformed_digits
    first = transformed[0]
    assert first[IMAGE_KEY].shape == (8, 8, 1)
    # The data's range is [0, 16], so scaling by it divides by 16.
    np.testing.assert_allclose(first[IMAGE_KEY][..., 0], digits.images[0] / 16.0, atol=1e-6)
    images = np.stack([row[IMAGE_KEY] for row in transformed])
    assert images.min() == 0.0 and images.max() == 1.0


def test_labels_pass_through_as_flat_int64(transformed_digits):
    digits, transformed = transformed_digits
    labels = [int(row[LABEL_KEY]) for row in transformed]
    assert labels == list(digits.target[:200])


def test_8bit_pixels_stored_as_bytes_transform_and_serve_as_the_same_floats(eight_bit_transform):
    images, before, after, graph = eight_bit_transform

    np.testing.assert_array_equal(after, before)
    assert after.min() == 0.0 and after.max() == 1.0
    # The `pixels` signature's floats: the graph's own, looked up for each 8-bit value.
    layer = tft.TFTransformOutput(graph).transform_features_layer()
    dataset = synthetic_dataset("idx")
    served = scale_8bit_pixels(tf.constant(images, tf.float32), scaled_8bit_values(layer, dataset))
    np.testing.assert_array_equal(served.numpy(), before)
