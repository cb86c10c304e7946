"""`trainer.pretrained_weights: imagenet` with no network: one line, exit 2, nothing run, the
summary JSON saying why, and no TensorFlow loaded (what keeps the stop to seconds)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import yaml

from tpu_pipeline.cli.main import EXIT_BAD_CONFIG, main
from tpu_pipeline.components import imagenet_files
from tpu_pipeline.components.models import BACKBONES
from tpu_pipeline.pipeline.local import runner as local_runner


class _NoRunner:
    def run(self, pipeline):
        raise AssertionError("a component ran")


@pytest.fixture
def photos_config(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "photos.tfrecord").touch()  # never read: the run stops before
    config = {
        "output_dir": str(tmp_path / "out"),
        "dataset": {
            "name": "photos",
            "data_dir": str(tmp_path / "data"),
            "image_shape": [64, 64, 3],
            "pixel_feature": "image",
            "label_feature": "label",
            "num_classes": 3,
        },
        "trainer": {"model": "efficientnet_b0", "pretrained_weights": "imagenet"},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_imagenet_offline_exits_2_with_one_line_naming_the_url_before_any_component(
    photos_config, tmp_path, monkeypatch, capfd
):
    (tmp_path / "home" / ".keras").mkdir(parents=True)  # an empty Keras cache
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(imagenet_files, "can_reach", lambda host, *args, **kwargs: False)
    monkeypatch.setattr(local_runner, "LocalDagRunner", _NoRunner)

    summary_path = tmp_path / "summary.json"
    code = main(["run", "--config", str(photos_config), "--summary-json", str(summary_path)])

    out, err = capfd.readouterr()
    assert code == EXIT_BAD_CONFIG, out + err
    weights = BACKBONES["efficientnet_b0"].imagenet_weights((64, 64, 3))
    (line,) = [line for line in err.splitlines() if "pretrained_weights" in line]
    assert line == f"tpu-pipeline: {imagenet_files.fetch_instructions(weights)}"
    assert f"curl -o {weights.name} {weights.url}" in line
    assert out == ""
    summary = json.loads(summary_path.read_text())
    assert summary["error"] == f"ConfigError: {imagenet_files.fetch_instructions(weights)}"
    assert (summary["succeeded"], summary["components"], summary["pushed_model"]) == (
        False,
        [],
        None,
    )


def test_the_offline_stop_loads_no_tensorflow(photos_config, tmp_path):
    (tmp_path / "home" / ".keras").mkdir(parents=True)
    summary_path = tmp_path / "summary.json"
    script = textwrap.dedent(
        f"""
        import sys
        from tpu_pipeline.components import imagenet_files
        imagenet_files.can_reach = lambda *args, **kwargs: False
        from tpu_pipeline.cli.main import main
        code = main(["run", "--config", {str(photos_config)!r},
                     "--summary-json", {str(summary_path)!r}])
        print(code, "tensorflow" in sys.modules)
        """
    )
    env = {**os.environ, "HOME": str(tmp_path / "home")}

    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )

    assert done.stdout.split()[-2:] == ["2", "False"], done.stdout + done.stderr
    assert "pretrained_weights: imagenet needs" in json.loads(summary_path.read_text())["error"]


def test_pretrained_weights_on_the_default_model_exits_2_naming_the_field(tmp_path, capfd):
    code = main(
        [
            "run",
            "--output-dir",
            str(tmp_path / "out"),
            "--set",
            "trainer.pretrained_weights=imagenet",
        ]
    )

    _, err = capfd.readouterr()
    assert code == EXIT_BAD_CONFIG
    assert "trainer.pretrained_weights: model 'cnn_bn' is not a backbone" in err
