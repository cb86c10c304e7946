"""`tf.train.Example` records read without TensorFlow, for a look at a folder in a second.

Importing TensorFlow takes 10-20 s and prints a screen of start-up lines; recognising
what a folder of TFRecords holds (`recognize.py`) needs neither: the record framing
is a length, a checksum and the bytes, and `tf.train.Example`'s message types are
declared here from TensorFlow's own `example.proto` and `feature.proto` (field names
and numbers as published; protobuf parses them as TensorFlow does). ExampleGen still
reads the data with TensorFlow, checksums and all (`tfrecords.py`).
"""

from __future__ import annotations

import gzip
import pathlib
import struct
from collections.abc import Iterator

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_REP = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
_OPT = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
_TYPES = descriptor_pb2.FieldDescriptorProto
_MSG = _TYPES.TYPE_MESSAGE


def _message(name: str, *fields: tuple) -> descriptor_pb2.DescriptorProto:
    message = descriptor_pb2.DescriptorProto(name=name)
    for field_name, number, label, kind, type_name, packed in fields:
        field = message.field.add(name=field_name, number=number, label=label, type=kind)
        if type_name:
            field.type_name = type_name
        if packed:
            field.options.packed = True
    return message


def _example_class():
    file = descriptor_pb2.FileDescriptorProto(
        name="tpu_pipeline_example.proto", package="tpu_pipeline_example", syntax="proto3"
    )
    prefix = ".tpu_pipeline_example."
    file.message_type.extend(
        [
            _message("BytesList", ("value", 1, _REP, _TYPES.TYPE_BYTES, "", False)),
            _message("FloatList", ("value", 1, _REP, _TYPES.TYPE_FLOAT, "", True)),
            _message("Int64List", ("value", 1, _REP, _TYPES.TYPE_INT64, "", True)),
            _message(
                "Feature",
                (
                    "bytes_list",
                    1,
                    _OPT,
                    _MSG,
                    prefix + "BytesList",
                    False,
                ),
                (
                    "float_list",
                    2,
                    _OPT,
                    _MSG,
                    prefix + "FloatList",
                    False,
                ),
                (
                    "int64_list",
                    3,
                    _OPT,
                    _MSG,
                    prefix + "Int64List",
                    False,
                ),
            ),
        ]
    )
    entry = _message(
        "FeatureEntry",
        ("key", 1, _OPT, _TYPES.TYPE_STRING, "", False),
        ("value", 2, _OPT, _MSG, prefix + "Feature", False),
    )
    entry.options.map_entry = True
    features = _message(
        "Features",
        (
            "feature",
            1,
            _REP,
            _MSG,
            prefix + "Features.FeatureEntry",
            False,
        ),
    )
    features.nested_type.append(entry)
    file.message_type.append(features)
    file.message_type.append(
        _message(
            "Example",
            ("features", 1, _OPT, _MSG, prefix + "Features", False),
        )
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.MessageFactory(pool).GetPrototype(
        pool.FindMessageTypeByName("tpu_pipeline_example.Example")
    )


Example = _example_class()


_READ_PIECE = 1 << 20


def _read_up_to(handle, size: int) -> bytes:
    """`size` bytes, or fewer where the file ends: read a piece at a time, so that a header
    that is no TFRecord's (a length of exabytes) never asks for more memory than the file."""
    pieces = []
    while size > 0 and (piece := handle.read(min(size, _READ_PIECE))):
        pieces.append(piece)
        size -= len(piece)
    return b"".join(pieces)


def read_serialized(path: pathlib.Path) -> Iterator[bytes]:
    """Each record's bytes of a plain or gzipped TFRecord file (checksums not checked).

    Raises:
      ValueError: the file ends inside a record.
    """
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rb") as handle:
        while header := handle.read(12):
            if len(header) < 12:
                raise ValueError(f"{path}: ends inside a record's header")
            (length,) = struct.unpack("<Q", header[:8])
            data = _read_up_to(handle, length + 4)
            if len(data) < length + 4:
                raise ValueError(f"{path}: ends inside a record")
            yield data[:length]
