"""The plain Keras script the photo pipeline is compared with: same network, same epochs.

    python -m benchmarks.keras_photos PHOTOS_DIR SIDE EPOCHS MODEL

`PHOTOS_DIR` holds `train/<class>/` and `validation/<class>/`. The script reads both with
`image_dataset_from_directory` (resized to SIDE x SIDE, batch 64, shuffled), scales to
0..1 as the pipeline's model expects, trains the built-in MODEL with Adam at the
pipeline's default rate and prints one JSON line: seconds (imports excluded) and
validation accuracy.
"""

from __future__ import annotations

import json
import os
import sys
import time

from tpu_pipeline import common  # noqa: F401 (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tf_keras  # noqa: E402

from tpu_pipeline.common.config import TrainerConfig  # noqa: E402
from tpu_pipeline.components.models import build_model, compile_model  # noqa: E402


def main(photos: str, side: int, epochs: int, model_name: str) -> None:
    started = time.perf_counter()
    splits = {
        name: tf_keras.utils.image_dataset_from_directory(
            os.path.join(photos, name),
            image_size=(side, side),
            batch_size=64,
            shuffle=name == "train",
            seed=42,
        ).map(lambda images, labels: (images / 255.0, labels))
        for name in ("train", "validation")
    }
    classes = sum(1 for entry in os.scandir(os.path.join(photos, "train")) if entry.is_dir())
    model = build_model(model_name, (side, side, 3), classes)
    compile_model(model, tf_keras.optimizers.Adam(TrainerConfig().learning_rate), False, "float32")
    model.fit(splits["train"], epochs=epochs, verbose=0)
    _, accuracy = model.evaluate(splits["validation"], verbose=0)
    print(json.dumps({"seconds": time.perf_counter() - started, "accuracy": accuracy}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
