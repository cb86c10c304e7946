"""The `attributions` bench section: what the Explainer's attribution step costs.

On one finished run's exported model, the step itself (`explain_eval_split`: the
eval answers searched, the chosen images read again and mapped, the files
written) with the default settings, timed per repeat; for photos also the other
method on the same images, taking turns, since XRAI is integrated gradients from two
baselines plus a segmentation.
"""

from __future__ import annotations

import glob
import pathlib
import statistics
import tempfile
import time

from tpu_pipeline.common.config import ExplainConfig, load_config
from tpu_pipeline.components.contract import read_dataset
from tpu_pipeline.components.explain.eval_split import explain_eval_split
from tpu_pipeline.components.serving.answers import PixelClassifier
from tpu_pipeline.pipeline.report.collect import trainer_custom_config
from tpu_pipeline.pipeline.report.run_store import open_latest_run


def _newest(pattern: str) -> str:
    found = sorted(glob.glob(pattern), key=lambda path: int(pathlib.Path(path).name))
    if not found:
        raise FileNotFoundError(f"no artifact matches {pattern}: run the pipeline first")
    return found[-1]


def step_seconds(
    output_dir: pathlib.Path, dataset: str, repeats: int, methods: tuple[str, ...]
) -> dict[str, dict]:
    """Per method: median seconds of the whole step, of the maps alone, and images mapped."""
    config = load_config(None, {"dataset": dataset, "output_dir": str(output_dir)})
    trained = read_dataset(trainer_custom_config(open_latest_run(config.run_dir)))  # its image size
    root = config.pipeline_root
    eval_files = sorted(
        glob.glob(_newest(str(root / "ExampleGen" / "examples" / "*")) + "/Split-eval/*")
    )
    # Loaded once, outside the timing, as the Explainer loads the served model once.
    served = root / "ServingPackager" / "served_model" / "*"
    classify = PixelClassifier(_newest(str(served)) + "/Format-Serving")
    found: dict[str, dict[str, list]] = {m: {"step": [], "maps": [], "images": []} for m in methods}
    with tempfile.TemporaryDirectory() as scratch:
        for repeat in range(repeats):
            for method in methods:
                started = time.perf_counter()
                explained = explain_eval_split(
                    f"{scratch}/{method}-{repeat}",
                    classify,
                    eval_files,
                    trained,
                    ExplainConfig(method=method),
                )
                found[method]["step"].append(time.perf_counter() - started)
                found[method]["maps"].append(explained.settings["seconds"])
                found[method]["images"].append(len(explained.chosen))
    return {
        method: {
            "step": statistics.median(values["step"]),
            "maps": statistics.median(values["maps"]),
            "images": values["images"][0],
            "side": trained.image_shape[0],
        }
        for method, values in found.items()
    }
