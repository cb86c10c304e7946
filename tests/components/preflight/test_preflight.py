"""TPU preflight: each kind of TPU problem, planted in a small model, is caught and named."""

from __future__ import annotations

import pytest
import tensorflow as tf
import tensorflow_transform as tft
import tf_keras
from tfx.components.trainer.fn_args_utils import FnArgs

from tpu_pipeline.cli.main import EXIT_FAILED, EXIT_OK, main
from tpu_pipeline.common.config import BUILTIN_DATASETS, DatasetConfig, PruningConfig, TrainerConfig
from tpu_pipeline.components import trainer
from tpu_pipeline.components.contract import IMAGE_KEY, trainer_sections
from tpu_pipeline.components.device.strategy import StrategyChoice
from tpu_pipeline.components.models import BACKBONES, MODEL_BUILDERS
from tpu_pipeline.components.preflight import (
    ALL_CHECKS,
    PreflightError,
    require_preflight,
    run_preflight,
)
from tpu_pipeline.components.preflight import run as preflight_run
from tpu_pipeline.components.preflight.config_checks import check_batch_split, check_static_input
from tpu_pipeline.components.preflight.run import COMPILED_STEP_CHECKS, TRACED_STEP_CHECKS
from tpu_pipeline.components.training import setup
from tpu_pipeline.pipeline.wiring.graph import code_version

DIGITS = DatasetConfig(**BUILTIN_DATASETS["digits"])
CIFAR_SHAPED = {**BUILTIN_DATASETS["digits"], "name": "cifar10", "image_shape": (32, 32, 3)}
TRAINER = TrainerConfig(per_replica_batch_size=16)


def _small_model(planted: tf_keras.layers.Layer | None = None, output_dtype: str = "float32"):
    """Returns a builder of Dense -> [planted layer] -> softmax over 8x8 digits."""

    def build(precision: str) -> tf_keras.Model:
        inputs = tf_keras.Input(shape=DIGITS.image_shape, name=IMAGE_KEY)
        x = tf_keras.layers.Flatten(dtype=precision)(inputs)
        x = tf_keras.layers.Dense(16, activation="relu", dtype=precision)(x)
        if planted is not None:
            x = planted(x)
        outputs = tf_keras.layers.Dense(
            10, activation="softmax", dtype=output_dtype, name="scores"
        )(x)
        return tf_keras.Model(inputs, outputs)

    return build


def _preflight(builder, trainer: TrainerConfig = TRAINER):
    return run_preflight(DIGITS, trainer, replicas=8, model_builder=builder)


def test_small_clean_model_passes_every_check():
    report = _preflight(_small_model())

    assert report.passed, report.to_text()
    assert {c.status for c in report.checks} == {"pass"}
    assert tuple(c.name for c in report.checks) == ALL_CHECKS


def test_custom_loop_step_passes_every_check_with_the_tpu_steps_per_execution():
    report = _preflight(_small_model(), TrainerConfig(per_replica_batch_size=16, loop="custom"))

    assert report.passed, report.to_text()
    assert {c.status for c in report.checks} == {"pass"}
    assert "loop custom" in report.title
    assert report.check("steps_per_execution").detail == "50 steps per call compile to one program"


@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_a_step_with_pruning_wrappers_passes_every_check(loop):
    pruning = PruningConfig(target_sparsity=0.5)
    report = _preflight(
        _small_model(), TrainerConfig(per_replica_batch_size=16, loop=loop, pruning=pruning)
    )

    assert report.passed, report.to_text()
    assert {c.status for c in report.checks} == {"pass"}
    # The wrapped model was checked: its layers are the wrappers (the memory check names them).
    assert "prune_low_magnitude_scores" in report.to_text()


def test_more_steps_per_execution_than_an_epoch_has_is_a_warning():
    trainer = TrainerConfig(
        per_replica_batch_size=16, train_steps=60, epochs=6, steps_per_execution=20
    )

    report = _preflight(_small_model(), trainer)

    assert report.passed
    check = report.check("steps_per_execution")
    assert check.status == "warn"
    assert "20 steps per call but only 10 per epoch" in check.detail


# XLA:CPU compiles ResNet-20's bfloat16 training step for minutes on a loaded 2-core machine.
@pytest.mark.parametrize(
    "model",
    [
        pytest.param(name, marks=pytest.mark.slow) if name == "resnet20" else name
        for name in sorted(MODEL_BUILDERS)
        if name not in BACKBONES  # 28x28 MNIST is too small for them: see below
    ],
)
@pytest.mark.parametrize(
    "dataset", [BUILTIN_DATASETS["mnist"], CIFAR_SHAPED], ids=["mnist", "cifar"]
)
def test_every_builtin_model_passes_with_the_default_tpu_policy(model, dataset):
    report = run_preflight(DatasetConfig(**dataset), TrainerConfig(model=model))

    assert report.passed, report.to_text()
    assert report.check("tpu_policy").detail == "XLA, precision mixed_bfloat16"
    assert report.check("xla_compile").status == "pass"
    # One real bfloat16 step ran, compiled by XLA, at the configured per-replica batch.
    assert report.check("train_step_runs").status == "pass"
    assert report.check("accelerator_memory").status == "pass"


# 25-75 s each for XLA:CPU to compile and run one bfloat16 step, at batch 8 to keep it there.
@pytest.mark.slow
@pytest.mark.parametrize("model", sorted(BACKBONES))
def test_every_backbone_passes_with_the_default_tpu_policy_on_small_colour_images(model):
    report = run_preflight(
        DatasetConfig(**CIFAR_SHAPED), TrainerConfig(model=model, per_replica_batch_size=8)
    )

    assert report.passed, report.to_text()
    assert report.check("tpu_policy").detail == "XLA, precision mixed_bfloat16"
    assert report.check("train_step_runs").status == "pass"
    assert report.check("steps_per_execution").status == "pass"


def test_a_backbone_on_images_too_small_fails_at_model_builds_naming_the_minimum():
    report = run_preflight(
        DatasetConfig(**BUILTIN_DATASETS["mnist"]), TrainerConfig(model="resnet50")
    )

    assert not report.passed
    assert "needs images of at least 32x32" in report.check("model_builds").detail
    assert report.check("train_step_runs").status == "skip"


def test_a_user_model_is_preflighted_like_a_builtin():
    trainer = TrainerConfig(
        model="tests.components.user_models:small_cnn", per_replica_batch_size=16
    )
    report = run_preflight(DIGITS, trainer)

    assert report.passed, report.to_text()
    assert report.check("model_builds").status == "pass"
    assert report.check("train_step_runs").status == "pass"


def test_a_broken_user_model_fails_preflight_naming_the_problem():
    trainer = TrainerConfig(model="tests.components.user_models:wrong_output_shape")
    report = run_preflight(DIGITS, trainer)

    assert not report.passed
    assert "expected (None, 10)" in report.check("model_builds").detail
    assert report.check("train_step_runs").status == "skip"


def test_a_model_too_big_for_the_accelerator_fails_naming_the_largest_layers():
    trainer = TrainerConfig(
        model="tests.components.user_models:huge_dense", accelerator_memory_gib=0.05
    )
    report = run_preflight(DIGITS, trainer)

    check = report.check("accelerator_memory")
    assert check.status == "fail", report.to_text()
    # 64 x 60,000 float32 weights, their gradients and Adam's two slots: ~59 MiB > 51 MiB.
    assert "of 0.05 GiB per replica" in check.detail
    assert "largest: huge " in check.detail
    assert "trainer.accelerator_memory_gib" in check.detail


@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_float64_inside_a_layer_is_named(loop):
    widen = tf_keras.layers.Lambda(
        lambda x: tf.cast(tf.cast(x, tf.float64) * 2.0, x.dtype), name="widen"
    )

    report = _preflight(_small_model(widen), TrainerConfig(per_replica_batch_size=16, loop=loop))

    assert not report.passed
    assert report.check("no_float64").status == "fail"
    assert "layer widen" in report.check("no_float64").detail


def test_data_dependent_shape_is_named():
    def add_distinct_count(x):
        distinct, _ = tf.unique(tf.reshape(tf.cast(x > 0, tf.int32), [-1]))
        return x + tf.cast(tf.size(distinct), x.dtype)

    report = _preflight(_small_model(tf_keras.layers.Lambda(add_distinct_count, name="distinct")))

    check = report.check("static_shapes")
    assert check.status == "fail"
    assert "layer distinct" in check.detail and "(Unique)" in check.detail


def test_python_function_inside_the_model_is_a_host_op():
    def through_python(x):
        return tf.ensure_shape(tf.py_function(lambda t: t, [x], x.dtype), x.shape)

    report = _preflight(_small_model(tf_keras.layers.Lambda(through_python, name="python")))

    check = report.check("no_host_ops")
    assert check.status == "fail"
    assert "layer python" in check.detail and "EagerPyFunc" in check.detail
    assert report.check("xla_compile").status == "fail"
    # What needs a compiled step is skipped, by group, and nothing else.
    assert [c.name for c in report.checks if c.status == "skip"] == list(COMPILED_STEP_CHECKS)


def test_string_ops_inside_the_model_are_host_ops():
    def round_trip_text(x):
        return tf.strings.to_number(tf.strings.as_string(x), out_type=x.dtype)

    report = _preflight(_small_model(tf_keras.layers.Lambda(round_trip_text, name="text")))

    check = report.check("no_host_ops")
    assert check.status == "fail"
    assert "layer text" in check.detail and "uses strings" in check.detail


def test_mixed_precision_output_that_is_not_float32_fails():
    report = _preflight(_small_model(output_dtype="mixed_bfloat16"))

    check = report.check("float32_outputs")
    assert check.status == "fail"
    assert "scores outputs bfloat16" in check.detail


def test_model_that_does_not_fit_the_transformed_images_fails_to_trace():
    def wrong_shape(precision: str) -> tf_keras.Model:
        inputs = tf_keras.Input(shape=(28, 28, 1), name=IMAGE_KEY)
        outputs = tf_keras.layers.Dense(10, activation="softmax")(tf_keras.layers.Flatten()(inputs))
        return tf_keras.Model(inputs, outputs)

    report = _preflight(wrong_shape)

    assert report.check("train_step_traces").status == "fail"
    skipped = tuple(c.name for c in report.checks if c.status == "skip")
    assert skipped == TRACED_STEP_CHECKS + COMPILED_STEP_CHECKS


def test_float16_policy_is_rejected_for_tpu_before_building_anything():
    report = _preflight(_small_model(), TrainerConfig(precision="mixed_float16"))

    assert report.check("tpu_policy").status == "fail"
    assert "mixed_bfloat16" in report.check("tpu_policy").detail
    assert report.check("xla_compile").status == "skip"


def test_global_batch_must_divide_across_replicas():
    assert check_batch_split(100, 8).status == "fail"
    assert check_batch_split(96, 8).status == "warn"  # 12 per replica: not a whole TPU tile
    assert check_batch_split(128, 8).status == "pass"


def test_variable_length_or_string_features_are_not_static_input():
    features = {
        IMAGE_KEY: tf.io.VarLenFeature(tf.float32),
        "label": tf.io.FixedLenFeature([], tf.string),
    }

    result, tensor_specs = check_static_input(features, 16)

    assert result.status == "fail" and tensor_specs == {}
    assert f"{IMAGE_KEY}: VarLenFeature" in result.detail
    assert "label: string" in result.detail


def test_require_preflight_raises_with_the_report():
    with pytest.raises(PreflightError, match="tpu_policy"):
        require_preflight(DIGITS, TrainerConfig(precision="mixed_float16"), replicas=8)


def test_cli_preflight_exits_non_zero_and_names_the_failed_check(capsys):
    code = main(["preflight", "--set", "trainer.precision=mixed_float16"])

    assert code == EXIT_FAILED
    assert "FAIL  tpu_policy" in capsys.readouterr().out


def test_cli_preflight_passes_the_mnist_configuration(capsys):
    assert main(["preflight", "--dataset", "mnist", "--replicas", "4"]) == EXIT_OK
    assert "4 replicas x 64" in capsys.readouterr().out


def _transform_graph_dir(config) -> str:
    return str(next(config.pipeline_root.glob("Transform/transform_graph/*")))


@pytest.mark.slow
def test_real_transform_output_gives_the_model_static_float_images(digits_run):
    config, _ = digits_run
    transform_output = tft.TFTransformOutput(_transform_graph_dir(config))

    report = run_preflight(config.dataset, config.trainer, transform_output=transform_output)

    assert report.passed, report.to_text()
    assert "image float32 [64, 8, 8, 1], label int64 [64]" in report.check("static_input").detail


@pytest.mark.slow
def test_trainer_runs_preflight_before_training_on_a_tpu(digits_run, monkeypatch, tmp_path):
    config, _ = digits_run
    fake_tpu = StrategyChoice(tf.distribute.get_strategy(), "tpu", 8, "fake TPU")
    monkeypatch.setattr(setup, "resolve_strategy", lambda _: fake_tpu)  # where run_fn asks
    monkeypatch.setattr(preflight_run, "build_model", _float64_builtin_model)
    fn_args = FnArgs(
        custom_config=trainer_sections(config, code_version(config)),  # as the Trainer gets it
        transform_graph_path=_transform_graph_dir(config),
        model_run_dir=str(tmp_path / "model_run" / "1"),
        serving_model_dir=str(tmp_path / "serving"),
        train_steps=1,
    )

    with pytest.raises(PreflightError, match="FAIL  no_float64"):
        trainer.run_fn(fn_args)


def _float64_builtin_model(name, image_shape, num_classes, precision):
    """A stand-in for build_model whose hidden layer computes in float64."""
    widen = tf_keras.layers.Lambda(lambda x: tf.cast(tf.cast(x, tf.float64), x.dtype), name="widen")
    return _small_model(widen)(precision)
