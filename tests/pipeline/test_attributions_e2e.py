"""The Trainer's attribution step on the real digits run: what it explains is what is served."""

from __future__ import annotations

import numpy as np
import pytest

from tests.pipeline.e2e_helpers import eval_answers, executions_of, mlmd_store, split_files
from tpu_pipeline.components.explain.maps import (
    baseline_images,
    integrated_gradients,
    model_function,
)
from tpu_pipeline.components.serving.answers import PixelClassifier, eval_pixels
from tpu_pipeline.pipeline.report import write_report
from tpu_pipeline.pipeline.report.collect import collect_report

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def explained(digits_run):
    config, summary = digits_run
    return collect_report(config.run_dir, summary, config).attributions


def test_ml_metadata_keeps_the_explanation_under_the_type_vertex_ai_imports(digits_run):
    """The local store's type is the one a Vertex AI step imports by name, and TFX's
    readers of ML Metadata map it back to that class, not to one made up on the fly."""
    from tfx.types import artifact_utils

    import tpu_pipeline

    config, _ = digits_run
    store = mlmd_store(config)
    (execution,) = executions_of(store, config, "Explainer")
    (output,) = [
        event.artifact_id
        for event in store.get_events_by_execution_ids([execution.id])
        if event.type == event.OUTPUT
    ]
    (artifact,) = store.get_artifacts_by_id([output])
    (artifact_type,) = store.get_artifact_types_by_id([artifact.type_id])
    assert artifact_type.name == "tpu_pipeline.ModelExplanation"
    assert artifact_utils.get_artifact_type_class(artifact_type) is tpu_pipeline.ModelExplanation
    assert store.get_artifacts_by_type("tpu_pipeline.ModelExplanation") == [artifact]


def test_confident_mistakes_come_first_then_the_surest_right_answer_of_each_class(
    digits_run, explained
):
    config, summary = digits_run
    probabilities, labels = eval_answers(summary.pushed_model, config)
    predicted, top = probabilities.argmax(axis=1), probabilities.max(axis=1)
    wrong = np.flatnonzero(predicted != labels)
    expected_mistakes = wrong[np.argsort(-top[wrong], kind="stable")][: config.explain.mistakes]
    mistakes = [c for c in explained.chosen if c.mistake]
    right = [c for c in explained.chosen if not c.mistake]

    assert explained.chosen[: len(mistakes)] == mistakes  # every mistake before any right one
    assert [c.index for c in mistakes] == list(expected_mistakes)
    assert [c.label for c in right] == list(range(10))  # every digit was right somewhere
    for answer in right:
        of_class = (labels == answer.label) & (predicted == labels)
        assert answer.probability == pytest.approx(top[of_class].max(), abs=1e-5)
    for answer in explained.chosen:  # the served model's own answers on the same examples
        assert (answer.label, answer.predicted) == (labels[answer.index], predicted[answer.index])
        assert answer.probability == pytest.approx(top[answer.index], abs=1e-5)
    assert explained.settings["examined_examples"] == len(labels)


def test_each_map_is_the_served_models_integrated_gradients_of_that_image(digits_run, explained):
    config, summary = digits_run
    assert explained.method == "integrated_gradients"
    height, width, _ = config.dataset.image_shape
    assert explained.maps.shape == (len(explained.chosen), height, width)
    assert explained.images.shape == (len(explained.chosen), *config.dataset.image_shape)
    classify = PixelClassifier(summary.pushed_model)
    first = explained.chosen[0]
    image = eval_pixels(split_files(config, "eval"), config.dataset, [first.index])[first.index]
    (black,) = baseline_images(("black",), config.dataset)
    attribution = integrated_gradients(model_function(classify), image, first.predicted, black, 64)
    answers = classify(np.stack([image, black])).numpy()[:, first.predicted]
    # Completeness, on the served signature: the map's raw values add up to its answer.
    assert attribution.sum() == pytest.approx(answers[0] - answers[1], abs=0.05)
    strongest = np.unravel_index(np.abs(attribution).sum(axis=-1).argmax(), (height, width))
    assert explained.maps[0][strongest] == pytest.approx(1.0, abs=1e-3)


def test_the_report_shows_the_maps_and_says_what_they_are(digits_run, explained, tmp_path):
    config, _ = digits_run
    html = write_report(config.run_dir, output_dir=tmp_path).html.read_text(encoding="utf-8")
    assert 'id="attributions-caption">Integrated gradients maps' in html
    mistakes = sum(c.mistake for c in explained.chosen)
    assert 0 < mistakes < config.explain.mistakes  # digits: a few mistakes only
    assert f"all {mistakes} of its mistakes among the first" in html
    assert 'alt="attributions"' in html


def test_the_summary_lists_what_was_explained_and_prints_one_line(digits_run, explained):
    _, summary = digits_run
    assert summary.attributions["method"] == "integrated_gradients"
    assert summary.attributions["chosen"] == [c.as_json() for c in explained.chosen]
    mistakes = sum(c.mistake for c in explained.chosen)
    examined = explained.settings["examined_examples"]
    line = summary.describe_attributions()
    assert line.startswith(
        f"attributions: {mistakes} mistakes and 10 right answers of {examined} eval examples "
        "mapped with integrated gradients ("
    )
    assert line in summary.to_text().splitlines()


def test_grad_cam_weighs_the_served_models_last_feature_maps_and_points_where_it_matters(
    digits_run, explained
):
    from tpu_pipeline.common.config import ExplainConfig
    from tpu_pipeline.components.explain.eval_split import explain_images

    config, summary = digits_run
    classify = PixelClassifier(summary.pushed_model)
    right = [c for c in explained.chosen if not c.mistake]
    found = eval_pixels(split_files(config, "eval"), config.dataset, [c.index for c in right])
    images = [found[c.index] for c in right]
    kept = classify.feature_map_gradients(np.stack(images[:1]), right[0].predicted)
    assert kept["feature_maps"].shape == (1, 2, 2, 64)  # cnn_bn's block2_pool
    assert kept["gradients"].shape == (1, 2, 2, 64) and np.abs(kept["gradients"]).max() > 0

    grad_cam = explain_images(
        classify, images, right, config.dataset, ExplainConfig(method="grad_cam")
    )
    assert grad_cam.method == "grad_cam" and grad_cam.settings["baselines"] == []
    assert grad_cam.maps.shape == (len(right), 8, 8)
    assert grad_cam.maps.min() >= 0 and grad_cam.maps.max() == pytest.approx(1.0)
    # Faithful to the served model: blanking the quarter the map ranks highest costs the
    # predicted class more probability than blanking the quarter it ranks lowest.
    drops = []
    for image, answer, heat in zip(images, right, grad_cam.maps, strict=True):
        quarters = [(r, c) for r in (0, 4) for c in (0, 4)]
        ranked = sorted(quarters, key=lambda q: heat[q[0] : q[0] + 4, q[1] : q[1] + 4].mean())
        blanked = []
        for r, c in (ranked[-1], ranked[0]):
            copy = image.copy()
            copy[r : r + 4, c : c + 4] = 0.0
            blanked.append(copy)
        answers = classify(np.stack(blanked)).numpy()[:, answer.predicted]
        drops.append(answers[1] - answers[0])  # lowest-ranked kept more than highest-ranked
    assert np.mean(drops) > 0, drops
