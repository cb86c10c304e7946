"""The `compile`, `submit` and `schedule` subcommands of `tpu-pipeline`.

`--dry-run` sends nothing and needs no network: it prints what a person checks
(project, region, service account, pipeline root, image, parameters, schedule) and
writes, as JSON, exactly the requests a real run would send to a file it names.
Without it, missing credentials or network fail in seconds with one line. Before
either, `kubeflow/presubmit.py` refuses what the Vertex AI run would fail on. TFX
and the Vertex AI SDK are imported inside the commands (10-20 s), after the cheap
checks.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any

from tpu_pipeline.cli.config_flags import add_config_flags, config_from_args
from tpu_pipeline.common.config import ConfigError, PipelineConfig

VERTEX_COMMANDS = ("compile", "submit", "schedule")
SCHEDULE_ACTIONS = ("create", "update", "pause", "resume", "list", "delete")
DEFAULT_SPEC = "pipeline.json"


def add_vertex_commands(commands: argparse._SubParsersAction) -> None:
    """Registers `compile`, `submit` and `schedule` on the `tpu-pipeline` parser."""
    compile_ = commands.add_parser("compile", help="compile the pipeline for Vertex AI / Kubeflow")
    compile_.add_argument(
        "--target", choices=["vertex"], default="vertex", help="orchestrator to compile for"
    )
    compile_.add_argument(
        "--output",
        type=pathlib.Path,
        default=pathlib.Path(DEFAULT_SPEC),
        metavar="FILE",
        help=f"the pipeline spec file (JSON) to write (default: {DEFAULT_SPEC})",
    )

    submit = commands.add_parser("submit", help="run the compiled pipeline once on Vertex AI")
    schedule = commands.add_parser("schedule", help="manage the pipeline's Vertex AI schedule")
    schedule.add_argument("action", choices=SCHEDULE_ACTIONS, help="what to do with the schedule")
    schedule.add_argument("--cron", help="cron expression (default: vertex.schedule.cron)")
    for command in (submit, schedule):
        command.add_argument(
            "--pipeline-json",
            type=pathlib.Path,
            default=pathlib.Path(DEFAULT_SPEC),
            metavar="FILE",
            help=f"the pipeline spec file `compile` wrote (default: {DEFAULT_SPEC})",
        )
        command.add_argument(
            "--data-root",
            metavar="URI",
            help="gs:// folder of the data for this run (default: the compiled one)",
        )
        command.add_argument("--train-steps", type=int, help="train steps for this run")
        command.add_argument(
            "--dry-run",
            action="store_true",
            help="send nothing: print what to check and write the requests to a file",
        )
        command.add_argument(
            "--requests",
            type=pathlib.Path,
            metavar="FILE",
            help="with --dry-run: the file for the requests in full (default: beside "
            "--pipeline-json, <name>.<command>-requests.json)",
        )
    for command in (compile_, submit, schedule):
        add_config_flags(command, "YAML configuration file with a vertex: section")


def run_vertex_command(args: argparse.Namespace) -> int:
    """Runs `compile`, `submit` or `schedule`; returns the exit code."""
    config = config_from_args(args)
    from tpu_pipeline.kubeflow.cluster_config import require_webhook_secret
    from tpu_pipeline.kubeflow.presubmit import check_for_vertex

    require_webhook_secret(config)  # no spec, job or schedule carries the webhook URL
    for warning in check_for_vertex(config, args.command, _schedule_cron(config, args)):
        print(f"tpu-pipeline: warning: {warning}", file=sys.stderr)
    if args.command == "compile":
        return _compile(config, args.output)
    if args.dry_run:  # a file of the user's there is refused before the SDK's slow import
        from tpu_pipeline.common.owned_paths import check_replaceable

        check_replaceable(requests_file(args), "--requests")
    from tpu_pipeline.common.vertex_api import VertexUnreachableError, connect

    try:
        credentials = None if args.dry_run else connect(_region(config))
        if args.command == "submit":
            return _submit(config, args, credentials)
        return _schedule(config, args, credentials)
    except VertexUnreachableError as error:
        print(f"tpu-pipeline: Vertex AI unreachable: {error}", file=sys.stderr)
        return 1


def _schedule_cron(config: PipelineConfig, args: argparse.Namespace) -> str | None:
    """The cron a `schedule create` or `update` sends: --cron, else vertex.schedule.cron."""
    if args.command != "schedule" or args.action not in ("create", "update"):
        return None
    return args.cron or (config.vertex.schedule.cron if config.vertex else None)


def _region(config: PipelineConfig) -> str:
    from tpu_pipeline.common.config import require_vertex

    return require_vertex(config).region


def _compile(config: PipelineConfig, output: pathlib.Path) -> int:
    from tpu_pipeline.kubeflow.runner import compile_pipeline

    spec = compile_pipeline(config, output)
    tasks = spec["pipelineSpec"]["root"]["dag"]["tasks"]
    print(f"wrote {output}: {len(tasks)} tasks, image {config.vertex.pipeline_image}")
    return 0


def _refuse_spec_with_webhook_url(spec_file: pathlib.Path) -> None:
    """Refuses a spec compiled before `notify.webhook_secret`: its exit handler holds the URL.

    Sent, the URL would be a parameter of the job (and of every job a schedule starts).
    """
    try:
        tasks = json.loads(spec_file.read_text())["pipelineSpec"]["root"]["dag"]["tasks"]
        # The handler's task: NotifyWebhook before it also logged to Vertex AI Experiments.
        handler = next(tasks[name] for name in ("RunEnded", "NotifyWebhook") if name in tasks)
        parameters = handler["inputs"]["parameters"]
    except (OSError, ValueError, KeyError, TypeError, StopIteration):
        return  # no handler, or a file the job builder will say is wrong
    if "webhook" in parameters:
        raise ConfigError(
            f"{spec_file}: compiled with the webhook URL as a parameter of its exit handler; "
            "compile it again (notify.webhook_secret) and delete this file"
        )


def _job(config: PipelineConfig, args: argparse.Namespace, credentials: Any) -> Any:
    from google.auth.credentials import AnonymousCredentials

    from tpu_pipeline.kubeflow import vertex_requests

    _refuse_spec_with_webhook_url(args.pipeline_json)
    values = vertex_requests.parameter_values(args.data_root, args.train_steps)
    # Building the job reads only the spec; dry runs need no real credentials.
    return vertex_requests.pipeline_job(
        config, args.pipeline_json, values, credentials or AnonymousCredentials()
    )


def requests_file(args: argparse.Namespace) -> pathlib.Path:
    """Where `--dry-run` writes the requests: --requests, else beside the compiled spec."""
    if args.requests:
        return args.requests
    step = args.command if args.command == "submit" else f"schedule-{args.action}"
    return args.pipeline_json.with_name(f"{args.pipeline_json.stem}.{step}-requests.json")


def show_dry_run(args: argparse.Namespace, calls: dict[str, Any]) -> None:
    """What `--dry-run` shows: the values to check, and the file holding every request."""
    from tpu_pipeline.common.owned_paths import write_owned
    from tpu_pipeline.kubeflow.request_summary import requests_json, row, summary_lines

    requests = {step: call.to_dict() for step, call in calls.items()}
    path = requests_file(args)
    write_owned(path, requests_json(requests), "--requests")
    said = args.command if args.command == "submit" else f"schedule {args.action}"
    print(f"{said} --dry-run: nothing sent")
    for line in summary_lines(requests):
        print(line)
    print(row("requests", f"{path} (each in full, in order)"))


def _submit(config: PipelineConfig, args: argparse.Namespace, credentials: Any) -> int:
    from tpu_pipeline.common.vertex_api import send
    from tpu_pipeline.kubeflow.vertex_requests import create_job_call

    call = create_job_call(config, _job(config, args, credentials))
    if args.dry_run:
        show_dry_run(args, {"submit": call})
        return 0
    job = send(call, config.vertex.region, credentials)
    print(f"submitted {job.name}: https://console.cloud.google.com/vertex-ai/pipelines")
    return 0


def _schedule(config: PipelineConfig, args: argparse.Namespace, credentials: Any) -> int:
    from tpu_pipeline.common.vertex_api import send
    from tpu_pipeline.kubeflow import vertex_requests as requests

    region = config.vertex.region
    if args.action == "list":
        call = requests.list_schedules_call(config)
        if args.dry_run:
            show_dry_run(args, {"list": call})
            return 0
        for found in send(call, region, credentials):
            print(f"{found.name}  {found.display_name}  {found.state.name}  {found.cron}")
        return 0

    lookup = requests.find_schedule_call(config)
    schedule = None
    if args.action in ("create", "update"):
        job = _job(config, args, credentials)
        schedule = requests.schedule_resource(
            config, job, args.cron, credentials or job.credentials
        )
    if args.dry_run:
        show_dry_run(args, _planned_calls(args.action, config, lookup, schedule))
        return 0
    existing = list(send(lookup, region, credentials))
    if args.action == "create" and not existing:
        created = send(requests.create_schedule_call(config, schedule), region, credentials)
        print(f"created schedule {created.name} ({created.cron})")
        return 0
    if not existing:
        name = requests.schedule_display_name(config)
        print(
            f"tpu-pipeline: no schedule named {name!r} in {requests.parent(config)}",
            file=sys.stderr,
        )
        return 1
    name = existing[0].name
    if schedule is not None:  # create of an existing schedule updates it: never a duplicate
        send(requests.update_schedule_call(schedule, name), region, credentials)
    else:
        send(requests.named_schedule_call(args.action, name), region, credentials)
    print(f"{args.action}: {name}")
    return 0


def _planned_calls(
    action: str, config: PipelineConfig, lookup: Any, schedule: Any
) -> dict[str, Any]:
    """What a real run sends for `action`, in order; the lookup decides create vs. update."""
    from tpu_pipeline.kubeflow import vertex_requests as requests

    found = requests.FOUND_SCHEDULE
    if action == "create":
        return {
            "lookup": lookup,
            "if_none_found": requests.create_schedule_call(config, schedule),
            "if_found": requests.update_schedule_call(schedule, found),
        }
    if action == "update":
        return {"lookup": lookup, "update": requests.update_schedule_call(schedule, found)}
    return {"lookup": lookup, action: requests.named_schedule_call(action, found)}
