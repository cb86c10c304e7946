"""Writes a pushed version's card into its folder: `model_card.json` and `model_card.html`.

The card goes inside the version folder, so it moves with the version (set aside,
restored, uploaded to the Model Registry) and TF Serving, which loads only the
SavedModel, ignores it. It is written after the version is published, because only
then is the version's number known: each file goes to a hidden name first and is
renamed into place, the HTML page first and the JSON last, so `model_card.json` is
there only with its page, never half-written. A push cut short between the publish and
the card leaves a version without one; the next run recognises the version as served
and writes the card then (`write_model_card` writes only where there is none).

On Cloud Storage an object appears whole when its upload ends, so each file is written
straight to its name, and only if absent (`common/gcs_objects.py`): a writer killed
mid-upload leaves nothing, two writers at once never overwrite each other, and no
hidden partial is ever made there, so none is ever cleared (a clear-up could not tell a
dead writer's from a live one's).
"""

from __future__ import annotations

import json
import os
import posixpath
from typing import Any

import jinja2

from tpu_pipeline.common import fileio, gcs_objects
from tpu_pipeline.common.atomic_file import replaced_when_done, scratch_prefix

CARD_JSON = "model_card.json"
CARD_HTML = "model_card.html"


def render_html(card: dict[str, Any]) -> str:
    """The card as one readable HTML page, from the JSON data (the one source of both)."""
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("tpu_pipeline.components.model_card", ""),
        autoescape=True,
        undefined=jinja2.Undefined,  # the schema's fields are optional
    )
    template = environment.get_template("model_card.html.j2")
    return template.render(card=card, shown=_shown)


def _shown(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:.4f}"


def has_model_card(version_dir: str) -> bool:
    return fileio.exists(os.path.join(version_dir, CARD_JSON))


def write_model_card(version_dir: str, card: dict[str, Any]) -> str:
    """Writes the card into `version_dir` unless one is there; returns the JSON's path.

    On a local disk callers hold the serving lock (an OS lock, held while its holder
    lives), so no other writer is mid-write here: a hidden `.model_card.*.partial-*`
    folder beside the card is what a killed writer left (kill -9 skips its clean-up),
    and it goes first, wherever the card stands, so a version that is uploaded or
    restored carries none. On Cloud Storage there are no partials to clear.
    """
    json_path = os.path.join(version_dir, CARD_JSON)
    if gcs_objects.is_gcs(version_dir):
        gcs_objects.create(posixpath.join(version_dir, CARD_HTML), render_html(card))
        gcs_objects.create(posixpath.join(version_dir, CARD_JSON), _card_json(card))
        return json_path
    _remove_partials_left_by_a_killed_writer(version_dir)
    if has_model_card(version_dir):
        return json_path
    _write_then_rename(os.path.join(version_dir, CARD_HTML), render_html(card))
    _write_then_rename(json_path, _card_json(card))
    return json_path


def _card_json(card: dict[str, Any]) -> str:
    return json.dumps(card, indent=2) + "\n"


def read_model_card(version_dir: str) -> dict[str, Any] | None:
    """The card of a version, or None if it has none."""
    if not has_model_card(version_dir):
        return None
    with fileio.open(os.path.join(version_dir, CARD_JSON)) as handle:
        return json.loads(handle.read())


def _remove_partials_left_by_a_killed_writer(version_dir: str) -> None:
    partials = tuple(scratch_prefix(name) for name in (CARD_HTML, CARD_JSON))
    for entry in fileio.listdir(version_dir):
        if entry.rstrip("/").startswith(partials):
            fileio.rmtree(os.path.join(version_dir, entry.rstrip("/")))


def _write_then_rename(path: str, text: str) -> None:
    """Writes `text` to `path` (local or on an object store), whole or not at all."""
    with replaced_when_done(path) as partial, fileio.open(partial, "w") as handle:
        handle.write(text)
