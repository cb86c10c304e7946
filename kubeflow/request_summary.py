"""What a person checks in a Vertex AI request before it is sent, read from the request itself.

A dry run's requests run to thousands of lines of JSON (each job carries the
compiled pipeline spec); a reviewer wants the handful of values that decide where
and as whom the job runs, and what it is given: the project, region, service
account, pipeline root, image, parameters and schedule. They are read here from
the very requests a real run sends (the full ones are written to a file), so the
summary cannot disagree with them.
"""

from __future__ import annotations

import json
from typing import Any

# The label column's width: the values line up under each other.
_WIDTH = 17


def _job_of(request: dict[str, Any]) -> dict[str, Any] | None:
    """The PipelineJob a CreatePipelineJob request, or a schedule's, starts."""
    if "pipelineJob" in request:
        return request["pipelineJob"]
    schedule = request.get("schedule", {})
    return schedule.get("createPipelineJobRequest", {}).get("pipelineJob")


def _parameters(job: dict[str, Any]) -> str:
    runtime = job.get("runtimeConfig", {})
    values = dict(runtime.get("parameterValues", {}))
    for name, value in runtime.get("parameters", {}).items():
        values[name] = next(iter(value.values()), "") if isinstance(value, dict) else value
    return ", ".join(f"{name}={values[name]}" for name in sorted(values)) or "(the compiled ones)"


def _images(job: dict[str, Any]) -> str:
    executors = job.get("pipelineSpec", {}).get("deploymentSpec", {}).get("executors", {})
    images = {e["container"]["image"] for e in executors.values() if "container" in e}
    return ", ".join(sorted(images)) or "(none named)"


def _schedule(schedule: dict[str, Any]) -> str:
    runs = schedule.get("maxConcurrentRunCount", "1")
    text = f"{schedule.get('cron', '')}, at most {runs} run(s) at a time"
    if schedule.get("startTime"):
        text += f", from {schedule['startTime']}"
    if schedule.get("endTime"):
        text += f", until {schedule['endTime']}"
    return text


def summary_lines(calls: dict[str, dict[str, Any]]) -> list[str]:
    """One line per value a person checks, then one naming each call in order.

    Args:
      calls: the requests by step, as `ApiCall.to_dict` gives them.
    """
    requests = [call["request"] for call in calls.values()]
    parent = next((r["parent"] for r in requests if r.get("parent")), "")
    rows: list[tuple[str, str]] = []
    if parent:
        parts = parent.split("/")  # projects/<project>/locations/<region>
        rows += [("project", parts[1]), ("region", parts[3])]
    job = next((_job_of(r) for r in requests if _job_of(r)), None)
    if job is not None:
        rows += [
            ("service account", job.get("serviceAccount") or "(the project's default)"),
            ("pipeline root", job.get("runtimeConfig", {}).get("gcsOutputDirectory", "")),
            ("image", _images(job)),
            ("parameters", _parameters(job)),
        ]
    schedule = next((r["schedule"] for r in requests if "cron" in r.get("schedule", {})), None)
    if schedule is not None:
        rows.append(("schedule", _schedule(schedule)))
    rows.append(("calls", "; ".join(f"{step}: {call['method']}" for step, call in calls.items())))
    return [row(label, value) for label, value in rows]


def row(label: str, value: str) -> str:
    """One line of the summary: the label, then the value in its column."""
    return f"  {label:<{_WIDTH}}{value}"


def requests_json(calls: dict[str, dict[str, Any]]) -> str:
    """Every request in full, in order: what the file beside the summary holds."""
    return json.dumps(calls, indent=2) + "\n"
