"""Pipeline wiring details that decide caching."""

import json

import pytest

from tpu_pipeline.common.config import ConfigError, load_config
from tpu_pipeline.components.contract import component_sections
from tpu_pipeline.components.example_gen.formats import file_pattern
from tpu_pipeline.pipeline.wiring.graph import (
    NodeIds,
    code_version,
    create_pipeline,
    user_code_fingerprint,
)


def test_changing_user_code_changes_its_fingerprint(tmp_path):
    (tmp_path / "trainer.py").write_text("def run_fn(fn_args):\n    pass\n")
    before = user_code_fingerprint(tmp_path)
    assert user_code_fingerprint(tmp_path) == before
    (tmp_path / "trainer.py").write_text("def run_fn(fn_args):\n    return 1\n")
    assert user_code_fingerprint(tmp_path) != before


def test_component_config_carries_the_code_version_and_the_sections_user_code_reads():
    config = load_config()
    custom_config = component_sections(config, code_version(config))
    assert custom_config["code_version"] == user_code_fingerprint()
    assert custom_config["dataset"]["pixel_feature"] == "pixels"
    assert custom_config["trainer"]["model"] == "cnn_bn"


def test_editing_the_users_model_package_changes_the_code_version(tmp_path, monkeypatch):
    package = tmp_path / "team_models"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "layers.py").write_text("WIDTH = 8\n")
    (package / "cnn.py").write_text("def build(image_shape, num_classes):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = load_config(None, {"trainer.model": "team_models.cnn:build"})

    before = code_version(config)
    assert before.startswith(user_code_fingerprint() + "+")
    # Another module of the same package: the model may import it.
    (package / "layers.py").write_text("WIDTH = 16\n")
    assert code_version(config) != before


def test_replacing_the_pretrained_weights_file_at_its_path_changes_the_code_version(tmp_path):
    """The config holds only the path: without this, a new file would reuse a cached Trainer."""
    weights = tmp_path / "backbone.h5"
    weights.write_bytes(b"first weights")
    config = load_config(
        None, {"trainer.model": "mobilenet_v2", "trainer.pretrained_weights": str(weights)}
    )

    before = code_version(config)
    assert before.startswith(user_code_fingerprint() + "+weights-")
    assert code_version(config) == before
    weights.write_bytes(b"second, longer weights")
    assert code_version(config) != before
    assert code_version(load_config()) == user_code_fingerprint()  # no weights file: no suffix


@pytest.mark.parametrize(
    "field, value",
    [("trainer.model", "no_such_model"), ("dataset.format", "no_such_format")],
)
def test_a_name_no_registry_knows_fails_before_anything_runs(tmp_path, field, value):
    config = load_config(None, {field: value})

    with pytest.raises(ConfigError, match=rf"{field}: unknown .*'{value}'; allowed: "):
        create_pipeline(
            config, data_root=str(tmp_path), pipeline_root=str(tmp_path), serving_dir=str(tmp_path)
        )


def test_each_format_reads_its_own_files_unless_the_dataset_names_a_pattern():
    npz = load_config(None, {"dataset.format": "npz"}).dataset
    assert file_pattern(npz) == "*.npz"
    assert file_pattern(npz.model_copy(update={"file_pattern": "x/*.npz"})) == "x/*.npz"


def _pipeline(tmp_path, **overrides):
    config = load_config(None, overrides)
    root = str(tmp_path)
    return config, create_pipeline(config, data_root=root, pipeline_root=root, serving_dir=root)


def test_without_tuning_the_graph_has_no_tuner_and_the_trainer_no_hyperparameters(tmp_path):
    _, pipeline = _pipeline(tmp_path)
    ids = [c.id for c in pipeline.components]
    assert NodeIds.TUNER not in ids
    (trainer,) = [c for c in pipeline.components if c.id == NodeIds.TRAINER]
    assert "hyperparameters" not in trainer.inputs


def test_with_tuning_the_trainer_trains_with_the_tuners_best_values(tmp_path):
    config, pipeline = _pipeline(tmp_path, **{"tuner.enabled": True, "tuner.trial_steps": 25})
    by_id = {c.id: c for c in pipeline.components}
    tuner, trainer = by_id[NodeIds.TUNER], by_id[NodeIds.TRAINER]
    assert trainer.inputs["hyperparameters"] is tuner.outputs["best_hyperparameters"]
    assert tuner.inputs["transform_graph"] is by_id[NodeIds.TRANSFORM].outputs["transform_graph"]
    assert tuner.exec_properties["tuner_fn"] == "tpu_pipeline.components.tuner.tuner_fn"
    assert '"num_steps": 25' in tuner.exec_properties["train_args"]  # the per-trial budget
    # What a trial reads, and the code version: the same data, code and search space are cached.
    custom_config = json.loads(tuner.exec_properties["custom_config"])
    assert custom_config["tuner"] == config.tuner.model_dump(mode="json")
    assert custom_config["code_version"] == user_code_fingerprint()
    assert custom_config["trainer"] == config.trainer.model_dump(mode="json")


def test_the_evaluator_and_the_pusher_take_the_model_the_serving_packager_makes(tmp_path):
    config, pipeline = _pipeline(tmp_path)
    by_id = {c.id: c for c in pipeline.components}
    trainer, packager = by_id[NodeIds.TRAINER], by_id[NodeIds.SERVING_PACKAGER]
    assert packager.inputs["model"] is trainer.outputs["model"]
    assert packager.inputs["transform_graph"] is by_id[NodeIds.TRANSFORM].outputs["transform_graph"]
    served = packager.outputs["served_model"]
    for reader in (NodeIds.EVALUATOR, NodeIds.PUSHER, NodeIds.EXPLAINER):
        assert by_id[reader].inputs["model"] is served, reader
    ids = [c.id for c in pipeline.components]
    assert ids.index(NodeIds.TRAINER) < ids.index(NodeIds.SERVING_PACKAGER)
    assert ids.index(NodeIds.SERVING_PACKAGER) < ids.index(NodeIds.EVALUATOR)
    # Each step reads its own sections: the Trainer neither `serving` nor `explain`.
    sections = {
        node: json.loads(by_id[node].exec_properties["custom_config"])
        for node in (NodeIds.TRAINER, NodeIds.SERVING_PACKAGER, NodeIds.EXPLAINER)
    }
    assert "serving" not in sections[NodeIds.TRAINER]
    assert "explain" not in sections[NodeIds.TRAINER]
    assert sections[NodeIds.SERVING_PACKAGER]["serving"] == config.serving.model_dump(mode="json")
    assert sections[NodeIds.EXPLAINER]["explain"] == config.explain.model_dump(mode="json")
    assert {s["code_version"] for s in sections.values()} == {user_code_fingerprint()}


def test_changing_what_is_packaged_or_explained_leaves_the_trainers_cache_key_alone(tmp_path):
    def exec_properties(**overrides):
        _, pipeline = _pipeline(tmp_path, **overrides)
        return {
            c.id: c.exec_properties["custom_config"]
            for c in pipeline.components
            if c.id in (NodeIds.TRAINER, NodeIds.SERVING_PACKAGER, NodeIds.EXPLAINER)
        }

    before = exec_properties()
    fewer = exec_properties(**{"serving.tflite_variants": ["float32"], "explain.steps": 8})
    assert fewer[NodeIds.TRAINER] == before[NodeIds.TRAINER]
    assert fewer[NodeIds.SERVING_PACKAGER] != before[NodeIds.SERVING_PACKAGER]
    assert fewer[NodeIds.EXPLAINER] != before[NodeIds.EXPLAINER]


def test_switched_off_the_steps_after_the_trainer_leave_the_graph(tmp_path):
    _, pipeline = _pipeline(
        tmp_path,
        **{"serving.package": False, "explain.mistakes": 0, "explain.correct_per_class": 0},
    )
    by_id = {c.id: c for c in pipeline.components}
    assert NodeIds.SERVING_PACKAGER not in by_id and NodeIds.EXPLAINER not in by_id
    trained = by_id[NodeIds.TRAINER].outputs["model"]
    assert by_id[NodeIds.EVALUATOR].inputs["model"] is trained
    assert by_id[NodeIds.PUSHER].inputs["model"] is trained


def test_temperature_scaling_needs_the_serving_packager():
    with pytest.raises(ConfigError, match="temperature_scaling is fitted by the ServingPackager"):
        load_config(None, {"serving.package": False, "serving.temperature_scaling": True})


def test_with_block_push_a_span_shift_gate_judges_the_served_model_before_the_pusher(tmp_path):
    spans = {"dataset.file_pattern": "span-{SPAN}/*.tfrecord"}
    config, pipeline = _pipeline(tmp_path, **spans, **{"drift.block_push": True})
    by_id = {c.id: c for c in pipeline.components}
    gate, pusher = by_id[NodeIds.SPAN_SHIFT_GATE], by_id[NodeIds.PUSHER]
    # The report's two models: the one the Pusher would publish, and the Evaluator's baseline.
    assert gate.inputs["model"] is by_id[NodeIds.SERVING_PACKAGER].outputs["served_model"]
    baseline = by_id[NodeIds.BASELINE_RESOLVER].outputs["model"]
    assert (
        gate.inputs["baseline_model"]
        is baseline
        is by_id[NodeIds.EVALUATOR].inputs["baseline_model"]
    )
    assert json.loads(gate.exec_properties["drift_config"]) == config.drift.model_dump(mode="json")
    assert pusher.inputs["span_shift"] is gate.outputs["verdict"]
    ids = [c.id for c in pipeline.components]
    assert ids.index(NodeIds.SPAN_SHIFT_GATE) < ids.index(NodeIds.PUSHER)


def test_without_block_push_or_spans_there_is_no_gate_and_the_pusher_pushes_as_before(tmp_path):
    for overrides in (
        {"dataset.file_pattern": "span-{SPAN}/*.tfrecord"},
        {"drift.block_push": True},  # no spans: no served span to compare a new one with
    ):
        _, pipeline = _pipeline(tmp_path, **overrides)
        by_id = {c.id: c for c in pipeline.components}
        assert NodeIds.SPAN_SHIFT_GATE not in by_id, overrides
        assert "span_shift" not in by_id[NodeIds.PUSHER].inputs, overrides
