"""The configuration: defaults that run, overrides that win, errors that name the field."""

import pathlib

import pytest

from tpu_pipeline.common.config import REPO_ROOT, ConfigError, load_config


def test_defaults_run_the_builtin_digits_with_the_batchnorm_cnn_and_augmentation_by_data():
    config = load_config()
    assert config.dataset.name == "digits"
    assert config.dataset.image_shape == (8, 8, 1)
    assert config.dataset.pixel_count == 64
    assert config.trainer.model == "cnn_bn"
    # Unset: the Trainer picks shifts for pixel data, crops and flips for photos.
    assert config.trainer.random_shift is None and config.trainer.random_flip is None
    assert config.trainer.accelerator == "auto"
    assert config.trainer.jit_compile is None  # follows the device


def test_builtin_dataset_name_expands_to_its_features_and_data():
    config = load_config(None, {"dataset": "mnist"})
    assert config.dataset.pixel_feature == "image_floats"
    assert config.dataset.label_feature == "image_class"
    assert config.dataset.image_shape == (28, 28, 1)
    # Shipped inside the repository: a plain clone has everything a run reads.
    data_dir = pathlib.Path(config.dataset.data_dir)
    assert data_dir.is_relative_to(REPO_ROOT)
    assert [path.name for path in data_dir.glob(config.dataset.file_pattern)] == [
        "mnist.tfrecord.gz"
    ]


def test_flags_override_the_file_and_keep_the_rest(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("dataset: mnist\ntrainer:\n  train_steps: 50\n  epochs: 5\n")
    config = load_config(str(path), {"trainer.train_steps": 70, "dataset.eval_percent": 30})
    assert config.trainer.train_steps == 70
    assert config.trainer.epochs == 5
    assert config.dataset.name == "mnist"
    assert config.dataset.eval_percent == 30


def test_unknown_builtin_dataset_lists_the_allowed_names():
    with pytest.raises(ConfigError, match=r"unknown built-in 'cifar'.*digits, mnist"):
        load_config(None, {"dataset": "cifar"})


def test_malformed_model_name_names_the_field():
    with pytest.raises(ConfigError, match="trainer.model"):
        load_config(None, {"trainer.model": "Res Net"})


def test_misspelled_field_is_rejected_not_ignored():
    with pytest.raises(ConfigError, match=r"trainer\.train_step: Extra inputs are not permitted"):
        load_config(None, {"trainer.train_step": 10})


def test_every_bad_field_is_reported_at_once():
    with pytest.raises(ConfigError) as error:
        load_config(
            None, {"trainer.per_replica_batch_size": 0, "evaluator.accuracy_lower_bound": 2}
        )
    assert "trainer.per_replica_batch_size" in str(error.value)
    assert "evaluator.accuracy_lower_bound" in str(error.value)


def test_fewer_steps_than_epochs_is_rejected():
    with pytest.raises(ConfigError, match=r"train_steps \(3\) must be at least epochs \(15\)"):
        load_config(None, {"trainer.train_steps": 3})


def test_config_file_that_is_not_a_mapping_names_the_file(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="list.yaml must hold a mapping"):
        load_config(str(path))


def test_missing_config_file_names_the_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read configuration file .*absent.yaml"):
        load_config(str(tmp_path / "absent.yaml"))


def test_run_folders_are_separate_per_dataset(tmp_path):
    digits = load_config(None, {"output_dir": str(tmp_path)})
    mnist = load_config(None, {"output_dir": str(tmp_path), "dataset": "mnist"})
    assert digits.run_dir != mnist.run_dir
    assert digits.metadata_path.parent == digits.run_dir
    assert digits.serving_dir.parent == digits.run_dir


def test_dataset_fields_without_a_name_override_the_default_dataset():
    config = load_config(None, {"dataset.data_dir": "/data/more-digits"})
    assert config.dataset.name == "digits"
    assert config.dataset.pixel_feature == "pixels"
    assert config.dataset.data_dir == "/data/more-digits"


def test_split_patterns_need_both_splits_named_in_the_error():
    with pytest.raises(ConfigError, match=r"dataset\.split_patterns\.eval: Field required"):
        load_config(None, {"dataset.split_patterns.train": "fit/*"})


def test_split_patterns_must_differ_and_replace_the_file_pattern():
    same = {"dataset.split_patterns.train": "a/*", "dataset.split_patterns.eval": "a/*"}
    with pytest.raises(ConfigError, match=r"dataset\.split_patterns: .*same pattern 'a/\*'"):
        load_config(None, same)
    patterns = {"train": "a/*", "eval": "b/*"}
    both = {"dataset.split_patterns": patterns, "dataset.file_pattern": "*.tfrecord"}
    with pytest.raises(ConfigError, match=r"dataset: .*leave out file_pattern"):
        load_config(None, both)
    # A built-in's own pattern gives way: split_patterns name the files it would.
    mnist = load_config(None, {"dataset": "mnist", "dataset.split_patterns": patterns}).dataset
    assert (mnist.file_pattern, mnist.split_patterns.eval) == (None, "b/*")


@pytest.mark.parametrize(
    "fields, stores",
    [
        ({}, False),  # the built-in digits: float TFRecords
        ({"dataset.format": "npz"}, False),
        ({"dataset.format": "csv"}, False),
        ({"dataset.format": "image_folder"}, True),
        ({"dataset.source.pixel_encoding": "image"}, True),  # TFRecords of PNG/JPEG bytes
    ],
)
def test_stores_encoded_images_is_true_for_image_sources_only(fields, stores):
    assert load_config(None, fields).dataset.stores_encoded_images is stores


@pytest.mark.parametrize(
    "data_format, stores",
    [("idx", True), ("cifar10_binary", True), ("tfrecord", False), ("npz", False), ("csv", False)],
)
def test_stores_8bit_pixels_only_for_formats_of_unsigned_byte_pixels(data_format, stores):
    dataset = load_config(None, {"dataset.format": data_format}).dataset
    assert dataset.stores_8bit_pixels is stores
    assert not dataset.stores_encoded_images  # pixel data keeps its own recipe, not photos'
    for name in ("mnist", "digits", "signs"):  # no built-in changes how it is stored
        assert not load_config(None, {"dataset": name}).dataset.stores_8bit_pixels


def test_max_image_side_needs_an_image_source_and_room_for_the_image_shape():
    with pytest.raises(ConfigError, match=r"max_image_side shrinks encoded images"):
        load_config(None, {"dataset.source.max_image_side": 512})
    photos = {"dataset.format": "image_folder", "dataset.image_shape": [224, 224, 3]}
    with pytest.raises(ConfigError, match=r"max_image_side \(200\) is below .* \(224\)"):
        load_config(None, {**photos, "dataset.source.max_image_side": 200})
    shrinking = load_config(None, {**photos, "dataset.source.max_image_side": 512})
    assert shrinking.dataset.source.max_image_side == 512


def test_notify_takes_an_http_or_https_webhook_with_a_bounded_timeout():
    config = load_config(None, {"notify.webhook": "https://hooks.slack.com/services/T/B/X"})
    assert config.notify.timeout_seconds == 10
    assert load_config().notify is None  # no webhook: nobody is told


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"notify.webhook": "ftp://hooks.example.com/x"}, r"notify\.webhook: must be an http"),
        ({"notify.webhook": "hooks.slack.com/services/x"}, r"notify\.webhook: must be an http"),
        ({"notify.webhook": "https:///no-host"}, r"notify\.webhook: must be an http"),
        ({"notify.webhook": "https://h", "notify.timeout_seconds": 0}, r"timeout_seconds"),
        ({"notify.webhook": "https://h", "notify.timeout_seconds": 600}, r"timeout_seconds"),
        ({"notify.timeout_seconds": 5}, r"notify: set one of notify\.webhook .* or notify\.webh"),
    ],
)
def test_a_bad_notify_section_names_the_field(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)


def test_the_serving_check_needs_a_positive_time_budget():
    assert load_config(None, {}).serving.check_timeout_seconds == 120
    with pytest.raises(ConfigError, match=r"serving.check_timeout_seconds: .*greater than 0"):
        load_config(None, {"serving.check_timeout_seconds": 0})
