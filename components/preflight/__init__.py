"""TPU preflight: prove on a CPU, in seconds, that the training step will run on a TPU.

A TPU job that fails to compile fails after the VM, the data and the container
are up, and is billed by the hour. Every check here works from the traced
training step (forward, loss, gradients, optimizer update: Keras's own
`train_step`) with the TPU's precision policy and the static per-replica input
shapes, and XLA lowers that same step, so what fails on the TPU fails here,
named by check, layer and op.

By what they check: `config_checks` (policy, batch, input), `step_checks` (the
traced and compiled step), `graph_scan` (the step's ops), `memory` (the
accelerator's memory); `run` runs them in named groups, `report` words the results.
"""

from tpu_pipeline.components.preflight.report import CheckResult, PreflightError, PreflightReport
from tpu_pipeline.components.preflight.run import ALL_CHECKS, require_preflight, run_preflight

__all__ = [
    "ALL_CHECKS",
    "CheckResult",
    "PreflightError",
    "PreflightReport",
    "require_preflight",
    "run_preflight",
]
