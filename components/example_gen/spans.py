"""Which spans a run reads when `dataset.span_window` asks for more than the newest.

TFX 1.16's ExampleGen reads one span per execution: its input processor refuses a
`RollingRange` of more than one span, and the Vertex AI compiler compiles no resolver
that would gather several Examples artifacts for the Trainer. So TFX resolves the
newest span (its driver, fingerprint and `span` property stay TFX's), and the executor
reads the window itself: the `span_window` newest spans up to that one which have
files, older spans first. Every example then records the span it came from
(`provenance.py`), which the Evaluator slices by.
"""

from __future__ import annotations

import posixpath
import re

import tensorflow as tf

from tpu_pipeline.common.tfx_api import example_gen_utils

# `{SPAN}` or `{SPAN:width}`, the spellings TFX's ExampleGen accepts.
_SPAN_SPEC = re.compile(r"\{SPAN(?::\d+)?\}")


def _glob_part_as_regex(part: str) -> str:
    """A glob without `{SPAN}` as a regex of one path: `*` and `?` stay inside a folder."""
    return "".join(
        "[^/]*" if char == "*" else "[^/]" if char == "?" else re.escape(char) for char in part
    )


def spans_present(data_root: str, pattern: str) -> list[int]:
    """The span numbers of the files matching `pattern` (with `{SPAN}`) under `data_root`."""
    full = posixpath.join(data_root, pattern)
    parts = _SPAN_SPEC.split(full)
    regex = re.compile(
        _glob_part_as_regex(parts[0])
        + "".join(
            ("(?P<span>[0-9]+)" if index == 0 else "(?P=span)") + _glob_part_as_regex(part)
            for index, part in enumerate(parts[1:])
        )
    )
    found = set()
    for path in tf.io.gfile.glob(_SPAN_SPEC.sub("*", full)):
        match = regex.fullmatch(path)
        if match:
            found.add(int(match.group("span")))
    return sorted(found)


def window_spans(data_root: str, pattern: str, newest: int, window: int) -> list[int]:
    """The `window` newest spans up to `newest` that have files, oldest first.

    Fewer when fewer spans exist (the first runs of a new data feed); `newest` is always
    one of them, as TFX resolved it from the same files.
    """
    earlier = [span for span in spans_present(data_root, pattern) if span < newest]
    return [*earlier[-(window - 1) :], newest] if window > 1 else [newest]


def span_pattern(pattern: str, span: int) -> str:
    """`pattern` with `{SPAN}` filled in for `span`, zero-padded to a `{SPAN:width}`."""
    return example_gen_utils.get_pattern_for_span_version(pattern, True, False, False, span, None)
