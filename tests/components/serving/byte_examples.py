"""The examples ExampleGen stores for 8-bit pixel formats (IDX, CIFAR-10 binary), for tests."""

import numpy as np
import tensorflow as tf


def serialized_byte_examples(images: np.ndarray, feature: str = "pixels") -> list[bytes]:
    """Each uint8 image as a serialized tf.Example holding its pixels as one bytes value."""
    return [
        tf.train.Example(
            features=tf.train.Features(
                feature={
                    feature: tf.train.Feature(bytes_list=tf.train.BytesList(value=[i.tobytes()]))
                }
            )
        ).SerializeToString()
        for i in images
    ]
