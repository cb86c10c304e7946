"""Fixtures shared by the components' tests.

TensorFlow, TFT and Beam are imported inside the fixtures that use them: a conftest's
imports are paid by every test below it, even by `pytest -k one_test --collect-only`.
"""

import numpy as np
import pytest

from tests.components.object_store import object_store  # noqa: F401 (a fixture)
from tpu_pipeline.cli.synthetic_data import synthetic_dataset


def _analyze_and_transform(rows, feature_spec, dataset, temp_dir, output_dir=None):
    """Transformed images; with `output_dir`, the graph and raw metadata as TFX's Transform
    writes them."""
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, metadata_io, schema_utils

    from tpu_pipeline.components.contract import IMAGE_KEY
    from tpu_pipeline.components.preprocessing import preprocessing_fn

    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(feature_spec))
    custom_config = {"dataset": dataset.model_dump(mode="json")}
    with tft_beam.Context(temp_dir=temp_dir):
        (transformed, _), transform_fn = (rows, metadata) | tft_beam.AnalyzeAndTransformDataset(
            lambda inputs: preprocessing_fn(inputs, custom_config)
        )
        if output_dir:
            _ = transform_fn | tft_beam.WriteTransformFn(output_dir)
    if output_dir:
        metadata_io.write_metadata(metadata, f"{output_dir}/metadata")
    return np.stack([row[IMAGE_KEY] for row in transformed])


@pytest.fixture(scope="module")
def eight_bit_transform(tmp_path_factory):
    """uint8 images [40, 28, 28, 1], Transform's images of them stored as floats and stored as
    bytes, and the folder of the bytes' Transform graph."""
    import tensorflow as tf

    tmp = tmp_path_factory.mktemp("eight-bit")
    # A range inside 0..255, so min-max scaling is not the identity.
    images = np.random.default_rng(0).integers(10, 201, size=(40, 28, 28, 1)).astype(np.uint8)
    labels = [[i % 10] for i in range(len(images))]
    label_spec = tf.io.FixedLenFeature([1], tf.int64)
    as_floats = synthetic_dataset("npz")
    as_bytes = synthetic_dataset("idx")
    assert as_bytes.stores_8bit_pixels and not as_floats.stores_8bit_pixels
    before = _analyze_and_transform(
        [
            {"pixels": i.reshape(-1).astype(np.float32), "label": y}
            for i, y in zip(images, labels, strict=True)
        ],
        {"pixels": tf.io.FixedLenFeature([784], tf.float32), "label": label_spec},
        as_floats,
        str(tmp / "tft-floats"),
    )
    graph = str(tmp / "graph")
    after = _analyze_and_transform(
        [{"pixels": [i.tobytes()], "label": y} for i, y in zip(images, labels, strict=True)],
        {"pixels": tf.io.FixedLenFeature([1], tf.string), "label": label_spec},
        as_bytes,
        str(tmp / "tft-bytes"),
        graph,
    )
    return images, before, after, graph
