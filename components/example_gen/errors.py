"""The one error bad input raises, and the checks every format shares before reading.

Every message is one line that starts with the file (and the record or row
where known), so a person can go straight to the broken input.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import IO

# Pickle protocols 2-5 start with the PROTO opcode and the protocol number.
_PICKLE_PROTOCOLS = range(2, 6)
PICKLE_REFUSAL = (
    "is a Python pickle, which can run code when loaded, so it is never read; "
    "use the CIFAR-10 binary version (data_batch_N.bin) or a numeric .npz archive"
)


class DataFormatError(ValueError):
    """A source file cannot become examples; the message names the file and record."""


def looks_like_pickle(head: bytes) -> bool:
    """Whether the first bytes of a file are a pickle's header (protocol 2 or later)."""
    return len(head) >= 2 and head[0] == 0x80 and head[1] in _PICKLE_PROTOCOLS


@contextlib.contextmanager
def open_source(path: str, refuse_pickles: bool = True) -> Iterator[IO[bytes]]:
    """Opens a source file (local or gs://), refusing pickles and naming the file on any error.

    GFile reads lazily, so the first bytes are read here: a file that cannot be
    read fails now, with its name, instead of deep inside a parser. TFRecord
    readers pass `refuse_pickles=False`: a record length can start with the
    same two bytes, so they check for a pickle only once the file fails to parse.
    """
    import tensorflow as tf  # here, so the CLI can import this module without TensorFlow

    try:
        handle = tf.io.gfile.GFile(path, "rb")
        head = handle.read(2)
        handle.seek(0)
    except (OSError, tf.errors.OpError) as error:
        raise DataFormatError(f"{path}: cannot read the file: {_reason(error)}") from None
    with handle:
        if refuse_pickles and looks_like_pickle(head):
            raise DataFormatError(f"{path}: {PICKLE_REFUSAL}")
        yield handle


def _reason(error: BaseException) -> str:
    message = getattr(error, "message", None) or str(error)
    return message.splitlines()[0] if message else type(error).__name__


def op_error_reason(error) -> str:
    """A TensorFlow op error's message without the op and function names around it."""
    message = error.message.splitlines()[0]
    message = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", message)
    return message.split(" [Op:")[0]


def data_format_error_in(error: BaseException) -> str | None:
    """The first line of a DataFormatError, however Beam re-raised or wrapped it (else None)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, DataFormatError):
            return str(seen).splitlines()[0].split(" [while running")[0]
        seen = seen.__cause__ or seen.__context__
    return None
