"""What the report reads of TFDV statistics: a binary photo by its size, not a placeholder."""

from __future__ import annotations

import io

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_data_validation as tfdv
from PIL import Image

from tpu_pipeline.common.tfx_api import standard_artifacts
from tpu_pipeline.pipeline.report.collect import RunReport
from tpu_pipeline.pipeline.report.data_facts import STATISTICS_FILE, DataFacts, read_statistics
from tpu_pipeline.pipeline.report.html import render_html
from tpu_pipeline.pipeline.results.run_summary import RunSummary


def _jpeg(side: int) -> bytes:
    pixels = np.random.default_rng(side).integers(0, 256, (side, side, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG")
    return buffer.getvalue()


def _example(photo: bytes) -> bytes:
    feature = {
        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[photo])),
        "image_format": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"jpeg"])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


@pytest.fixture(scope="module")
def photo_statistics(tmp_path_factory):
    """StatisticsGen-shaped statistics of three JPEGs, computed by TFDV; (artifact, sizes)."""
    root = tmp_path_factory.mktemp("statistics")
    photos = [_jpeg(side) for side in (16, 40, 64)]
    records = root / "examples.tfrecord"
    with tf.io.TFRecordWriter(str(records)) as writer:
        for photo in photos:
            writer.write(_example(photo))
    (root / "Split-train").mkdir()
    statistics = tfdv.generate_statistics_from_tfrecord(
        str(records), output_path=str(root / "data_stats.tfrecord")
    )
    (root / "Split-train" / STATISTICS_FILE).write_bytes(statistics.SerializeToString())
    artifact = standard_artifacts.ExampleStatistics()
    artifact.uri = str(root)
    artifact.split_names = '["train"]'
    return artifact.mlmd_artifact, [len(photo) for photo in photos]


def test_an_encoded_photo_feature_is_described_by_its_mean_size_not_a_placeholder(
    photo_statistics,
):
    artifact, sizes = photo_statistics

    (train,) = read_statistics(artifact)

    features = {feature.name: feature for feature in train.features}
    image = features["image"]
    assert image.values == []  # TFDV saw only `__BYTES_VALUE__` there
    assert image.average_bytes == pytest.approx(np.mean(sizes), rel=1e-4)
    # A text feature keeps its values and has no size.
    assert features["image_format"].values == [("jpeg", 3)]
    assert features["image_format"].average_bytes is None


def test_the_report_shows_a_photo_features_size_and_no_placeholder(photo_statistics):
    artifact, sizes = photo_statistics
    summary = RunSummary.without_results("tpu-pipeline-photos", [], RuntimeError("stopped"), None)
    report = RunReport("tpu-pipeline-photos", "run", "/runs/photos", summary, "", None, {})
    report.data = DataFacts(read_statistics(artifact), anomalies=[])

    html = render_html(report, {})

    assert "__BYTES_VALUE__" not in html
    assert f"binary, {np.mean(sizes) / 1024:.1f} KB a value on average" in html
    assert "image_height, image_width and image_format" in html  # where sizes and formats are
