"""`tpu-pipeline run --data-dir` on a folder of CIFAR-sized photos: the recipe picks fast_cnn
with its own recipe and plans its epochs from a probe of this machine, the Trainer computes
its whitening layer from the training photos, and the pushed model averages each photo's and
its mirror's answers in its signatures.

The photos are generated: 32x32 JPEGs of three classes told apart by colour and layout, a
few hundred of them (the recipe's threshold for "thousands" is lowered for the test). A
one-minute budget plans the least a run trains, one epoch: what is checked is the wiring,
not the accuracy.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from tpu_pipeline.cli.main import EXIT_OK, main
from tpu_pipeline.components import imagenet_files
from tpu_pipeline.components.device.policy import cpu_precision
from tpu_pipeline.components.models import build_model, restore_exported_weights
from tpu_pipeline.components.models.fast_cnn import WHITENING_LAYER
from tpu_pipeline.pipeline.wiring import recipe

pytestmark = pytest.mark.slow

CLASSES = ("red_left", "green_top", "blue_right")
PER_CLASS = 100


# Where each class's bright patch sits (rows, columns): left, top, right.
PLACES = [(slice(8, 24), slice(2, 14)), (slice(2, 14), slice(8, 24)), (slice(8, 24), slice(18, 30))]


def _photo(kind: int, rng: np.random.Generator) -> Image.Image:
    """A noisy 32x32 photo whose bright patch's colour and place depend on its class."""
    pixels = rng.integers(0, 90, size=(32, 32, 3)).astype(np.uint8)
    rows, columns = PLACES[kind]
    pixels[rows, columns, kind] = rng.integers(170, 255)
    return Image.fromarray(pixels)


@pytest.fixture(scope="module")
def small_photos_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("small-photos")
    rng = np.random.default_rng(0)
    for kind, name in enumerate(CLASSES):
        (work / "photos" / name).mkdir(parents=True)
        for index in range(PER_CLASS):
            _photo(kind, rng).save(work / "photos" / name / f"{index}.jpg", quality=90)
    argv = [
        "run",
        "--data-dir",
        str(work / "photos"),
        "--output-dir",
        str(work / "out"),
        "--summary-json",
        str(work / "summary.json"),
        "--set",
        "trainer.time_budget_minutes=1",
        "--set",
        "evaluator.accuracy_lower_bound=0",
        "--set",
        "serving.tflite_variants=[]",
        "--set",
        "explain.mistakes=0",
        "--set",
        "explain.correct_per_class=0",
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(imagenet_files, "is_available", lambda weights: True)  # even so
        patch.setattr(recipe, "BUDGETED_MIN_PHOTOS", 200)
        code = main(argv)
    return code, json.loads((work / "summary.json").read_text()), work


def test_cifar_sized_photos_train_fast_cnn_with_its_own_recipe(small_photos_run):
    code, summary, _ = small_photos_run

    assert code == EXIT_OK, summary["error"]
    fields = summary["chosen_defaults"]["fields"]
    assert fields["trainer.model"]["value"] == "fast_cnn"
    assert fields["trainer.label_smoothing"]["reason"] == "fast_cnn's recipe"
    trained = summary["trainer"]
    assert trained["model"] == "fast_cnn" and trained["optimizer"] == "sgd"
    assert trained["label_smoothing"] == 0.2 and trained["weight_averaging"] == "lookahead"
    assert trained["test_time_flip"] is True and trained["learning_rate_decay"] == "linear"
    assert trained["augmentation"] == {
        "max_shift": [2, 2],
        "flip": True,
        "crop_area": None,
        "mirror_border": True,
        "flip_alternates": True,
    }
    assert trained["precision"] == cpu_precision()


def test_the_epochs_come_from_the_time_budget_at_the_rate_probed_here(small_photos_run):
    _, summary, _ = small_photos_run

    plan = summary["chosen_defaults"]["budget"]
    assert plan["model"] == "fast_cnn" and plan["precision"] == cpu_precision()
    assert plan["images_per_second"] > 0 and plan["budget_minutes"] == 1
    assert plan["epochs"] == 1 and plan["run_minutes"] > 1  # over the budget: one epoch
    assert summary["chosen_defaults"]["fields"]["trainer.epochs"]["value"] == 1
    assert summary["trainer"]["epochs"] == 1


def test_the_pushed_model_whitens_with_the_training_photos_and_answers_both_views(
    small_photos_run,
):
    import tensorflow as tf

    _, summary, work = small_photos_run
    # The served weights, in the network the recipe chose (the export keeps no Keras traces).
    network = build_model("fast_cnn", (32, 32, 3), len(CLASSES))
    assert restore_exported_weights(network, summary["pushed_model"])
    whitening = network.get_layer(WHITENING_LAYER).kernel.numpy()
    assert np.abs(whitening).max() > 1.0  # not zeros

    served = tf.saved_model.load(summary["pushed_model"])

    photos = sorted((work / "photos" / CLASSES[0]).iterdir())[:4]
    pixels = np.stack([np.asarray(Image.open(path), np.float32) for path in photos])
    answer = served.signatures["pixels"]
    both = answer(pixels=tf.constant(pixels))["probabilities"].numpy()
    mirrored = answer(pixels=tf.constant(pixels[:, :, ::-1]))["probabilities"].numpy()
    np.testing.assert_allclose(both, mirrored, atol=1e-5)  # the mean of both views either way
    encoded = tf.constant([path.read_bytes() for path in photos])
    from_bytes = served.signatures["images"](images=encoded)["probabilities"]
    np.testing.assert_allclose(from_bytes.numpy(), both, atol=1e-4)
