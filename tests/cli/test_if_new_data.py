"""`run --if-new-data` with nothing new: exit 0 at once, one line, and no TensorFlow import."""

from __future__ import annotations

import subprocess
import sys

from tpu_pipeline.common.config import load_config
from tpu_pipeline.common.run_lock import claim_run_folder
from tpu_pipeline.pipeline.wiring.input_fingerprint import (
    fingerprint_inputs,
    input_patterns,
    record_success,
)

# The command as cron starts it, then a look at what it imported.
PROBE = (
    "import sys\n"
    "from cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    "print('imported tensorflow' if 'tensorflow' in sys.modules else 'no tensorflow')\n"
    "sys.exit(code)\n"
)


def test_nothing_new_exits_0_in_one_line_without_loading_tensorflow(tmp_path):
    data_dir, output_dir = tmp_path / "data", tmp_path / "out"
    data_dir.mkdir()
    (data_dir / "digits.tfrecord").write_bytes(b"records")
    flags = {"dataset.data_dir": str(data_dir), "output_dir": str(output_dir)}
    config = load_config(None, flags)
    claim_run_folder(config)  # as the last successful run did
    inputs = fingerprint_inputs(config, data_dir, input_patterns(config.dataset))
    record_success(config.run_dir, inputs)  # as the last successful run did

    args = ["run", "--if-new-data", "--data-dir", str(data_dir), "--output-dir", str(output_dir)]
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"tpu-pipeline: nothing to do: no new data since the last successful run in "
        f"{config.run_dir}",
        "no tensorflow",
    ]
    assert result.stderr == ""
    assert not (config.run_dir / "logs").exists()
