"""Pipeline wiring details that decide caching."""

from pipeline.config import load_config
from pipeline.pipeline import component_custom_config, user_code_fingerprint


def test_changing_user_code_changes_its_fingerprint(tmp_path):
    (tmp_path / "trainer.py").write_text("def run_fn(fn_args):\n    pass\n")
    before = user_code_fingerprint(tmp_path)
    assert user_code_fingerprint(tmp_path) == before
    (tmp_path / "trainer.py").write_text("def run_fn(fn_args):\n    return 1\n")
    assert user_code_fingerprint(tmp_path) != before


def test_component_config_carries_the_code_version_and_the_sections_user_code_reads():
    custom_config = component_custom_config(load_config())
    assert custom_config["code_version"] == user_code_fingerprint()
    assert custom_config["dataset"]["pixel_feature"] == "pixels"
    assert custom_config["trainer"]["model"] == "mnist_cnn"
