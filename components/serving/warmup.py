"""TF Serving's warmup file: real eval-split requests for every signature a model publishes.

TF Serving replays `assets.extra/tf_serving_warmup_requests` (a TFRecord file of
`PredictionLog` records) when it loads a version, so no client's first request pays
for initialising the graph. The ServingPackager writes it into the model it makes, as
TFX's InfraValidator with `make_warmup` does, one request per signature the export
defines (with `serving.package` false, the Pusher into the copy of the Trainer's model it
publishes); the Pusher's serving check (`server_check.py`) sends the same requests to a
model server before the push.

`serving_default` takes serialized examples, the one kind of request TFX's
InfraValidator builds: its request builder finds the signature's input and makes
the request, and the file is written with TFX's own TFRecord writer. Its builder
sends one example per request and only serialized records; a warmup request here
is a batch of eval examples, as clients send them, and `images` and `pixels` take
what their clients send, so those two requests are built here.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2
from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

from tpu_pipeline.common import tfx_api  # TFX loads on first use: the model server needs none of it
from tpu_pipeline.common.config import DatasetConfig
from tpu_pipeline.components.images.decode import MAX_8BIT
from tpu_pipeline.components.images.examples import parse_pixels
from tpu_pipeline.components.serving.export import (
    IMAGES_INPUT_KEY,
    IMAGES_SIGNATURE,
    PIXELS_INPUT_KEY,
    PIXELS_SIGNATURE,
    SERVING_SIGNATURE,
)

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
# Eval examples in each request: enough to be a real batch, few enough to replay at once.
WARMUP_EXAMPLES = 8


def signature_defs(saved_model_dir: str) -> dict[str, meta_graph_pb2.SignatureDef]:
    """The signatures the SavedModel publishes, `serving_default` first, then by name.

    Read from saved_model.pb, without loading the model.
    """
    with tf.io.gfile.GFile(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as handle:
        saved_model = saved_model_pb2.SavedModel.FromString(handle.read())
    signatures = saved_model.meta_graphs[0].signature_def
    # `__saved_model_init_op` is TF's own initialiser, not a signature a client calls.
    names = sorted(signatures, key=lambda name: (name != SERVING_SIGNATURE, name))
    return {name: signatures[name] for name in names if not name.startswith("__")}


def _encoded_images(
    serialized: list[bytes], pixels: Callable[[], tf.Tensor], dataset: DatasetConfig
) -> np.ndarray:
    """What an `images` client sends: the stored photo bytes, or the `pixels()` as 8-bit PNGs."""
    if dataset.stores_encoded_images:
        spec = {dataset.pixel_feature: tf.io.FixedLenFeature([1], tf.string)}
        return tf.io.parse_example(serialized, spec)[dataset.pixel_feature][:, 0].numpy()
    low, high = dataset.source.image_value_range  # the inverse of `scale_pixels`
    eight_bit = tf.cast(
        tf.clip_by_value(tf.round((pixels() - low) * MAX_8BIT / (high - low)), 0, 255), tf.uint8
    )
    return np.array([tf.io.encode_png(image).numpy() for image in eight_bit], dtype=object)


def _examples_request(
    name: str, signature: meta_graph_pb2.SignatureDef, serialized: list[bytes]
) -> predict_pb2.PredictRequest:
    """TFX InfraValidator's request for a signature of serialized examples, all in one request.

    TFX's builder finds the signature's input (its one string input of shape [None], or
    ValueError) and builds a request per example; their inputs are joined into one batch.
    """
    builder = tfx_api.infra_validator_request_builder._TFServingRpcRequestBuilder(
        model_name="", signatures={name: signature}
    )
    builder._records = list(serialized)  # what its ReadExamplesArtifact reads from an artifact
    first, *_ = per_example = builder.BuildRequests()
    (input_key,) = first.inputs
    examples = [tf.make_ndarray(request.inputs[input_key]) for request in per_example]
    first.inputs[input_key].CopyFrom(tf.make_tensor_proto(np.concatenate(examples)))
    return first


def build_requests(
    serialized: list[bytes],
    dataset: DatasetConfig,
    signatures: Mapping[str, meta_graph_pb2.SignatureDef],
) -> list[predict_pb2.PredictRequest]:
    """One request per signature (in `signatures`' order), each carrying the same eval
    examples in its own input.

    Raises:
      ValueError: a signature this module cannot build a request for (a new
        signature in `export.py` needs its request here, or it would go unchecked).
    """

    @functools.cache
    def pixels() -> tf.Tensor:
        """What a `pixels` client sends: the examples' pixels, photos decoded and resized."""
        return parse_pixels(tf.constant(serialized), dataset)[0]

    builders = {
        SERVING_SIGNATURE: lambda: _examples_request(
            SERVING_SIGNATURE, signatures[SERVING_SIGNATURE], serialized
        ),
        IMAGES_SIGNATURE: lambda: _request(
            IMAGES_SIGNATURE, IMAGES_INPUT_KEY, _encoded_images(serialized, pixels, dataset)
        ),
        PIXELS_SIGNATURE: lambda: _request(PIXELS_SIGNATURE, PIXELS_INPUT_KEY, pixels().numpy()),
    }
    unknown = sorted(set(signatures) - set(builders))
    if unknown:
        raise ValueError(f"no warmup request for signature(s) {unknown}: add one in {__name__}")
    return [builders[name]() for name in signatures]


def _request(name: str, input_key: str, values: np.ndarray) -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest(model_spec=model_pb2.ModelSpec(signature_name=name))
    request.inputs[input_key].CopyFrom(tf.make_tensor_proto(values))
    return request


def write_warmup_requests(
    saved_model_dir: str, eval_files: list[str], dataset: DatasetConfig
) -> list[predict_pb2.PredictRequest]:
    """Writes a request per published signature, from the first eval examples, as TF Serving
    reads them: `PredictionLog` records with a `predict_log` each."""
    signatures = signature_defs(saved_model_dir)
    files = sorted(path for pattern in eval_files for path in tf.io.gfile.glob(pattern))
    records = tf.data.TFRecordDataset(files, compression_type="GZIP").take(WARMUP_EXAMPLES)
    serialized = [record.numpy() for record in records]
    if not serialized:
        raise ValueError(f"no eval examples for the warmup requests in {eval_files}")
    requests = build_requests(serialized, dataset, signatures)
    tfx_api.io_utils.write_tfrecord_file(
        os.path.join(saved_model_dir, WARMUP_FILE),
        *(
            prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)
            )
            for request in requests
        ),
    )
    return requests


def read_warmup_requests(model_dir: str) -> list[predict_pb2.PredictRequest]:
    """The predict requests of a model folder's warmup file, as TF Serving parses them.

    Raises:
      FileNotFoundError: the model folder has no warmup file.
    """
    path = os.path.join(model_dir, WARMUP_FILE)
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(
            f"{path} is missing: the model was exported without warmup requests"
        )
    logs = [
        prediction_log_pb2.PredictionLog.FromString(record.numpy())
        for record in tf.data.TFRecordDataset(path)
    ]
    return [log.predict_log.request for log in logs]
