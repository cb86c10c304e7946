"""What a Vertex AI run would meet is said before anything is compiled or sent, in one line."""

from __future__ import annotations

import re

import pytest

from tests.kubeflow.conftest import DEPLOYMENT_CONFIGS, own_project_config
from tpu_pipeline.cli.main import main
from tpu_pipeline.common.config import REPO_ROOT, ConfigError
from tpu_pipeline.kubeflow.presubmit import check_cron, image_folders

# A folder of photos named by the user, read from Cloud Storage: no schema shipped for it.
FLOWERS = [
    "--set",
    "dataset.name=flowers",
    "--set",
    "dataset.format=image_folder",
    "--set",
    "dataset.pixel_feature=image",
    "--set",
    "dataset.label_feature=label",
    "--set",
    "dataset.num_classes=5",
]


def _refused(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    (line,) = err.splitlines()
    return line


@pytest.mark.parametrize(
    "command",
    [["compile"], ["submit", "--dry-run"], ["schedule", "create", "--dry-run"]],
    ids=" ".join,
)
def test_the_shipped_placeholder_project_is_refused_in_one_line(tmp_path, capsys, command):
    spec = tmp_path / "pipeline.json"
    where = ["--output", str(spec)] if command == ["compile"] else ["--pipeline-json", str(spec)]
    line = _refused(capsys, [*command, "--config", str(DEPLOYMENT_CONFIGS["cpu"]), *where])
    assert line.startswith(
        "tpu-pipeline: vertex.project: your-gcp-project still names the placeholder project"
    )
    assert list(tmp_path.iterdir()) == []  # nothing compiled, no requests written


def test_the_placeholder_anywhere_in_the_vertex_section_is_refused(tmp_path, capsys):
    config = own_project_config(tmp_path)
    root = "vertex.pipeline_root=gs://your-gcp-project-tpu-pipeline/root"
    line = _refused(capsys, ["compile", "--config", str(config), "--set", root])
    assert line.startswith("tpu-pipeline: vertex.pipeline_root: gs://your-gcp-project-tpu")


def test_a_cron_vertex_cannot_read_is_refused_before_the_schedule_is_built(tmp_path, capsys):
    argv = ["schedule", "create", "--config", str(own_project_config(tmp_path))]
    line = _refused(capsys, [*argv, "--cron", "weekly", "--dry-run"])
    assert line == (
        "tpu-pipeline: cron 'weekly': 1 field(s), not 5; give minute hour day-of-month month "
        "day-of-week, e.g. '0 3 * * 1' (Mondays 03:00 in vertex.schedule.time_zone)"
    )


@pytest.mark.parametrize(
    "cron", ["0 3 * * 1", "*/15 0-6 1,15 JAN-MAR mon-fri", "30 2 * * 7", "0 0 1 */3 *"]
)
def test_cron_expressions_vertex_reads_pass(cron):
    check_cron(cron)


@pytest.mark.parametrize(
    ("cron", "problem"),
    [
        ("@weekly", "1 field(s), not 5"),
        ("0 3 * *", "4 field(s), not 5"),
        ("61 3 * * 1", "minute '61' is not a value, range or step from 0 to 59"),
        ("0 3 * * 8", "day-of-week '8' is not a value, range or step from 0 to 7"),
        ("0 3 0 * *", "day-of-month '0' is not a value, range or step from 1 to 31"),
        ("0 3 * * MON;", "day-of-week 'MON;' is not a value, range or step from 0 to 7"),
    ],
)
def test_cron_expressions_vertex_cannot_read_say_which_field(cron, problem):
    with pytest.raises(ConfigError, match=re.escape(f"cron '{cron}': {problem}")):
        check_cron(cron)


def test_a_schema_file_the_image_will_not_hold_is_refused(tmp_path, capsys):
    output = tmp_path / "pipeline.json"
    argv = ["compile", "--config", str(own_project_config(tmp_path)), "--output", str(output)]
    line = _refused(capsys, [*argv, *FLOWERS])
    assert line.startswith(
        f"tpu-pipeline: dataset.schema_file: {REPO_ROOT / 'schemas/flowers/schema.pbtxt'} "
        "does not exist, so the image will not hold it"
    )
    # A file that exists here, in a folder kubeflow/Dockerfile does not copy.
    elsewhere = REPO_ROOT / "docs" / "index.md"
    line = _refused(capsys, [*argv, *FLOWERS, "--set", f"dataset.schema_file={elsewhere}"])
    assert line == (
        f"tpu-pipeline: dataset.schema_file: {elsewhere} is in docs/, which kubeflow/Dockerfile "
        "does not copy into the image; put it under schemas/"
    )
    assert not output.exists()


def test_the_image_holds_the_folders_the_dockerfile_copies():
    assert image_folders() == [
        "cli",
        "common",
        "pipeline",
        "components",
        "tpu_pipeline",
        "serving_ops",
        "kubeflow",
        "schemas",
    ]


def test_a_small_network_from_scratch_at_imagenet_size_is_a_warning_not_a_refusal(tmp_path, capsys):
    output = tmp_path / "pipeline.json"
    argv = ["compile", "--config", str(own_project_config(tmp_path)), "--output", str(output)]
    # Shipped photos (schemas/signs), at the 224x224 a photo config compiled without a size gets.
    photos = ["--set", "dataset=signs", "--set", "dataset.image_shape=[224,224,3]"]
    assert main([*argv, *photos]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        "tpu-pipeline: warning: trainer.model resnet20 trains from scratch at 224x224: slow, "
        "and weak on a few thousand photos; set trainer.model: mobilenet_v2 with "
        "trainer.pretrained_weights: imagenet, or dataset.image_shape at most 64x64"
    ]
    assert out.startswith(f"wrote {output}")
    # The same photos at the size from-scratch networks learn at: nothing to say.
    assert main([*argv, "--set", "dataset=signs"]) == 0
    assert capsys.readouterr().err == ""
