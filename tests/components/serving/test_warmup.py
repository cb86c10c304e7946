"""TF Serving's warmup file: eval examples for every signature, read back as TF Serving does."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf.meta_graph_pb2 import SignatureDef
from tensorflow_serving.apis import prediction_log_pb2

from tests.components.serving.served_models import (
    DIGITS,
    eval_examples,
    save_model,
    write_eval_split,
)
from tpu_pipeline.common.config import BUILTIN_DATA_DIR, BUILTIN_DATASETS, DatasetConfig
from tpu_pipeline.components.images.decode import decode_encoded_images
from tpu_pipeline.components.serving.warmup import (
    WARMUP_EXAMPLES,
    WARMUP_FILE,
    build_requests,
    signature_defs,
    write_warmup_requests,
)

PHOTOS = BUILTIN_DATA_DIR / "sign-language-digits"


def _signatures(tmp_path, *names: str) -> dict:
    """The exported model's SignatureDefs of `names`, in that order."""
    published = signature_defs(save_model(tmp_path / "model"))
    return {name: published[name] for name in names}


def test_each_signature_gets_the_same_eval_examples_in_its_own_input(tmp_path):
    serialized = eval_examples(tmp_path / "eval", 4)
    requests = build_requests(
        serialized, DIGITS, _signatures(tmp_path, "images", "pixels", "serving_default")
    )
    by_name = {r.model_spec.signature_name: r for r in requests}
    assert list(by_name) == ["images", "pixels", "serving_default"]

    examples = tf.make_ndarray(by_name["serving_default"].inputs["examples"])
    assert list(examples) == serialized
    pixels = tf.make_ndarray(by_name["pixels"].inputs["pixels"])
    stored = [
        tf.train.Example.FromString(s).features.feature["pixels"].float_list.value
        for s in serialized
    ]
    np.testing.assert_array_equal(pixels, np.reshape(stored, (4, 8, 8, 1)))
    # The images are 8-bit PNGs of those pixels (digits' 0..16 spread over 0..255).
    pngs = tf.make_ndarray(by_name["images"].inputs["images"])
    decoded = np.stack([tf.io.decode_png(png).numpy() for png in pngs]).astype(np.float32)
    np.testing.assert_allclose(decoded * 16 / 255, pixels, atol=16 / 255 / 2 + 1e-6)


def test_stored_photos_are_sent_to_images_as_they_are_and_decoded_to_pixels(tmp_path):
    photos = DatasetConfig(**BUILTIN_DATASETS["signs"])
    jpegs = [path.read_bytes() for path in sorted(PHOTOS.glob("validation/*/*.JPG"))[:2]]
    serialized = [
        tf.train.Example(
            features=tf.train.Features(
                feature={
                    photos.pixel_feature: tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[jpeg])
                    ),
                    photos.label_feature: tf.train.Feature(
                        int64_list=tf.train.Int64List(value=[0])
                    ),
                }
            )
        ).SerializeToString()
        for jpeg in jpegs
    ]
    images, pixels = build_requests(serialized, photos, _signatures(tmp_path, "images", "pixels"))
    assert list(tf.make_ndarray(images.inputs["images"])) == jpegs
    np.testing.assert_array_equal(
        tf.make_ndarray(pixels.inputs["pixels"]),
        decode_encoded_images(tf.constant(jpegs), photos).numpy(),
    )


def test_a_signature_without_a_request_builder_is_refused(tmp_path):
    serialized = eval_examples(tmp_path / "eval", 4)
    with pytest.raises(ValueError, match=r"no warmup request for signature\(s\) \['embeddings'\]"):
        build_requests(
            serialized,
            DIGITS,
            {**_signatures(tmp_path, "serving_default"), "embeddings": SignatureDef()},
        )


def test_the_warmup_file_parses_and_runs_as_tf_serving_replays_it(tmp_path):
    model_dir = save_model(tmp_path / "model")
    write_warmup_requests(model_dir, write_eval_split(tmp_path / "eval"), DIGITS)

    # As TF Serving reads it: TFRecords of PredictionLog, each a predict_log's request.
    path = tmp_path / "model" / WARMUP_FILE
    logs = [
        prediction_log_pb2.PredictionLog.FromString(record.numpy())
        for record in tf.data.TFRecordDataset(str(path))
    ]
    assert all(log.WhichOneof("log_type") == "predict_log" for log in logs)
    names = [log.predict_log.request.model_spec.signature_name for log in logs]
    assert names == list(signature_defs(model_dir)) == ["serving_default", "images", "pixels"]

    model = tf.saved_model.load(model_dir)
    classes = {}
    for log in logs:
        request = log.predict_log.request
        inputs = {key: tf.make_ndarray(proto) for key, proto in request.inputs.items()}
        outputs = model.signatures[request.model_spec.signature_name](**inputs)
        probabilities = outputs["probabilities"].numpy()
        assert probabilities.shape == (WARMUP_EXAMPLES, DIGITS.num_classes)
        np.testing.assert_allclose(probabilities.sum(axis=1), 1, atol=1e-5)
        classes[request.model_spec.signature_name] = probabilities.argmax(axis=1)
    # The same examples: examples and pixels give the same classes.
    np.testing.assert_array_equal(classes["serving_default"], classes["pixels"])


def test_the_examples_request_is_the_one_tfx_infravalidator_builds_batched(tmp_path):
    # TFX's request builder names the signature's serialized-examples input; ours carries
    # the same request with the examples in one batch.
    from tfx.components.infra_validator import request_builder

    serialized = eval_examples(tmp_path / "eval", 3)
    signatures = _signatures(tmp_path, "serving_default")
    tfx = request_builder._TFServingRpcRequestBuilder(model_name="", signatures=signatures)
    tfx._records = serialized
    tfx_requests = tfx.BuildRequests()
    (ours,) = build_requests(serialized, DIGITS, signatures)
    assert [r.model_spec for r in tfx_requests] == 3 * [ours.model_spec]
    assert [list(r.inputs) for r in tfx_requests] == 3 * [list(ours.inputs)]
    assert list(tf.make_ndarray(ours.inputs["examples"])) == serialized


def test_a_serving_default_that_takes_no_serialized_examples_is_refused(tmp_path):
    # TFX's builder checks the signature: one string input of shape [None].
    pixels_only = {"serving_default": _signatures(tmp_path, "pixels")["pixels"]}
    with pytest.raises(ValueError, match="accepts serialized record inputs"):
        build_requests(eval_examples(tmp_path / "eval", 2), DIGITS, pixels_only)
