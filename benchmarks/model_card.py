"""The `model_card` bench section: what the Pusher's model card costs.

On one finished run, the card of its newest model made again from the same ML Metadata
inputs the Pusher had (`facts.gather`: TFMA's metrics, slices and calibration, TFDV's
statistics, the model's files; then the JSON and the page written), timed per repeat.
"""

from __future__ import annotations

import pathlib
import statistics
import tempfile
import time

from tpu_pipeline.common.config import load_config
from tpu_pipeline.components.model_card import card, facts
from tpu_pipeline.components.model_card.write import write_model_card
from tpu_pipeline.serving_ops.local.blessing import open_store, pusher_inputs, trainer_model_dir


def card_seconds(output_dir: pathlib.Path, dataset: str, repeats: int) -> dict:
    """Median seconds to make and write the card, and how many metrics it lists."""
    config = load_config(None, {"dataset": dataset, "output_dir": str(output_dir)})
    store = open_store(config.metadata_path)
    model = max(store.get_artifacts_by_type("Model"), key=lambda m: m.id)
    inputs = pusher_inputs(store, model.id)
    if inputs is None:
        raise LookupError(f"{config.metadata_path}: no Pusher had model {model.id}")
    seconds, metrics = [], 0
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as folder:
            started = time.perf_counter()
            found = facts.gather(
                model=inputs["model"],
                model_dir=trainer_model_dir(model),
                evaluation=inputs["evaluation"],
                blessing=facts.evaluator_blessing(
                    inputs["model_blessing"], inputs["evaluation"].uri, config.dataset
                ),
                blessing_artifact=inputs["model_blessing"],
                statistics=inputs.get("statistics"),
                dataset=config.dataset,
                slice_rule=config.evaluator,
                version=str(int(time.time())),
                version_dir=folder,
                serving_check=None,
            )
            made = card.model_card(found)
            write_model_card(folder, made)
            seconds.append(time.perf_counter() - started)
            metrics = len(made["quantitative_analysis"]["performance_metrics"])
    return {"seconds": statistics.median(seconds), "metrics": metrics}
