"""An in-memory Vertex AI that answers as the API reference says, and records every call.

It holds what the serving control plane reads and writes (Model Registry entries and
their versions, endpoints, Vertex ML Metadata, pipeline jobs) as `aiplatform_v1` types,
and keeps the rules the reference states and the tests rely on:

- every version has an `etag` that changes with each change of it; an UpdateModel
  carrying another `etag` is refused (ABORTED, or FAILED_PRECONDITION when the server is
  made with that code), one carrying none is a blind overwrite and is recorded as such;
- an UpdateModel's labels replace all of the version's labels (its update mask names
  what it writes);
- an alias names one version of an entry, and the entry always has one `default`;
- a deployed model with traffic cannot be undeployed;
- an UpdateArtifact or UpdateEndpoint carrying a stale `etag` is refused too.

Each call is recorded with the actor that made it (`transport(actor)`), and hooks run
before a call, so a test can make another actor act at any point of an action. Time is
the server's own (`clock`, `sleep`), shared by every actor.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable
from typing import Any

from google.api_core import exceptions

from tpu_pipeline.common import vertex_types as gca
from tpu_pipeline.common.vertex_api import ApiCall
from tpu_pipeline.serving_ops.vertex.transport import Transport

MODEL = "projects/p/locations/us-central1/models/123"
STORE = "projects/p/locations/us-central1/metadataStores/default"
CONTEXT = f"{STORE}/contexts/tpu-pipeline-digits"
SERVING = "gs://b/serving/digits"
ENDPOINT = "projects/p/locations/us-central1/endpoints/9"
NOW = 1796133600.0  # 2026-12-01T14:00:00+00:00


@dataclasses.dataclass
class Sent:
    """One call the server answered (or refused)."""

    actor: str
    call: ApiCall

    @property
    def method(self) -> str:
        return self.call.method.split(".")[1]

    @property
    def request(self) -> Any:
        return self.call.request


class Operation:
    """A long-running operation: done, with its result (or the error it ends with)."""

    def __init__(self, result: Any = None, error: BaseException | None = None):
        self._result, self._error = result, error

    def result(self, timeout: float | None = None) -> Any:
        if self._error is not None:
            raise self._error
        return self._result

    def done(self) -> bool:
        return True


class VertexServer:
    """Vertex AI's ModelService, EndpointService, MetadataService and PipelineService, in memory."""

    def __init__(self, conflict: type[exceptions.GoogleAPICallError] = exceptions.Aborted):
        self.conflict = conflict
        self.now = NOW
        self.entries: dict[str, dict[str, Any]] = {}  # name -> display name, versions by id
        self.endpoints: dict[str, gca.Endpoint] = {}
        self.artifacts: dict[str, gca.Artifact] = {}
        self.executions: dict[str, gca.Execution] = {}
        self.events: list[gca.Event] = []  # every event, as the lineage reads them
        self.contexts: dict[str, list[str]] = {CONTEXT: []}
        self.jobs = [
            gca.PipelineJob(
                name="projects/p/locations/us-central1/pipelineJobs/run-1",
                job_detail=gca.PipelineJobDetail(pipeline_context=gca.Context(name=CONTEXT)),
            )
        ]
        self.sent: list[Sent] = []
        self.blind_writes: list[Sent] = []
        self.hooks: list[Callable[[Sent], None]] = []
        self.failures: dict[str, list[BaseException]] = {}
        self._etags = 0
        self._created = 0

    # Time and transports.

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def transport(self, actor: str = "a") -> Transport:
        return Transport(lambda call: self.handle(actor, call), self.clock, self.sleep)

    def fail(self, method: str, error: BaseException, times: int = 1) -> None:
        """The next `times` calls of `method` ("UpdateArtifact") raise `error` (-1: every one)."""
        self.failures[method] = [error] * times if times >= 0 else [error] * 10**6

    def handle(self, actor: str, call: ApiCall) -> Any:
        sent = Sent(actor, call)
        for hook in list(self.hooks):
            hook(sent)
        self.sent.append(sent)
        failing = self.failures.get(sent.method)
        if failing:
            raise failing.pop(0)
        return getattr(self, f"_{_snake(sent.method)}")(copy.deepcopy(call.request))

    def changes(self, actor: str | None = None) -> list[Sent]:
        """The calls that change something (not Get, List or Query), in order."""
        return [
            s
            for s in self.sent
            if not s.method.startswith(("Get", "List", "Query")) and actor in (None, s.actor)
        ]

    # Building what a test starts from.

    def entry(
        self,
        *aliases_by_version: tuple[str, ...],
        display_name: str = "tpu-pipeline-digits",
        name: str = MODEL,
        metadata: bool = True,
        **labels_by_version: dict[str, str],
    ) -> str:
        """An entry whose versions 1, 2, ... have these aliases (and `v<id>=` labels), each
        pushed by a run from `SERVING/100<id>` with a blessing in ML Metadata (unless
        `metadata` is False: Vertex ML Metadata knows none of them)."""
        self.entries[name] = {"display_name": display_name, "versions": {}}
        for i, aliases in enumerate(aliases_by_version, start=1):
            version = gca.Model(
                name=name,
                display_name=display_name,
                version_id=str(i),
                version_aliases=list(aliases),
                artifact_uri=f"{SERVING}/{1000 + i}",
                labels=labels_by_version.get(f"v{i}", {}),
            )
            self._store(name, version)
            if metadata:
                self.push(str(i), blessed=1, name=name)
        return name

    def push(self, version_id: str, blessed: int, name: str = MODEL) -> None:
        """What a run's Trainer, Evaluator and Pusher record for one registry version."""
        destination = self.versions(name)[version_id].artifact_uri
        model = self._artifact(f"model-{version_id}", "tfx.Model")
        blessing = self._artifact(
            f"blessing-{version_id}",
            "tfx.ModelBlessing",
            blessed=blessed,
            current_model_id=model.name,
        )
        evaluator_output = self._artifact(f"evaluator-output-{version_id}", "tfx.ModelBlessing")
        pushed = self._artifact(
            f"pushed-{version_id}", "tfx.PushedModel", pushed_destination=destination
        )
        pusher, evaluator = f"{STORE}/executions/pusher-{version_id}", f"evaluator-{version_id}"
        self.events += [
            gca.Event(artifact=model.name, execution=pusher, type_=gca.Event.Type.INPUT),
            gca.Event(artifact=blessing.name, execution=pusher, type_=gca.Event.Type.INPUT),
            gca.Event(artifact=pushed.name, execution=pusher, type_=gca.Event.Type.OUTPUT),
            gca.Event(artifact=model.name, execution=evaluator, type_=gca.Event.Type.INPUT),
            gca.Event(
                artifact=evaluator_output.name, execution=evaluator, type_=gca.Event.Type.OUTPUT
            ),  # not the Pusher's
        ]

    def model_artifact(self, uri: str, name: str = f"{STORE}/artifacts/model-7") -> None:
        """A Model artifact a Trainer recorded at `uri` (what a bless looks up)."""
        self.artifacts[name] = gca.Artifact(
            name=name, schema_title="tfx.Model", uri=uri, etag=self._etag()
        )

    def endpoint(self, *deployed: tuple[str, str], display_name: str = "tpu-pipeline-digits"):
        """An endpoint with the deployed (deployed model id, version id) pairs; the last
        one has the traffic."""
        self.endpoints[ENDPOINT] = gca.Endpoint(
            name=ENDPOINT,
            display_name=display_name,
            deployed_models=[
                gca.DeployedModel(id=i, model=MODEL, model_version_id=v) for i, v in deployed
            ],
            traffic_split={deployed[-1][0]: 100} if deployed else {},
            etag=self._etag(),
        )
        return self.endpoints[ENDPOINT]

    # Reading what the state is.

    def entry_named(self, display_name: str) -> str:
        return next(n for n, e in self.entries.items() if e["display_name"] == display_name)

    def versions(self, name: str = MODEL) -> dict[str, gca.Model]:
        return self.entries[name]["versions"]

    def version(self, version_id: str, name: str = MODEL) -> gca.Model:
        return self.versions(name)[version_id]

    def default(self, name: str = MODEL) -> str:
        return next(v for v, m in self.versions(name).items() if "default" in m.version_aliases)

    def blessing(self, version_id: str) -> dict:
        return dict(self.artifacts[f"{STORE}/artifacts/blessing-{version_id}"].metadata)

    def updates(self) -> list[str]:
        """The artifacts UpdateArtifact was sent for, in order."""
        return [
            s.request.artifact.name.rsplit("/", 1)[1]
            for s in self.sent
            if s.method == "UpdateArtifact"
        ]

    def request(self, method: str) -> Any:
        """The first request of `method` ("UploadModel")."""
        return next(s.request for s in self.sent if s.method == method)

    # ModelService.

    def _list_models(self, request) -> list[gca.Model]:
        wanted = re.fullmatch(r'display_name="(.*)"', request.filter)[1]
        return [
            gca.Model(name=name, display_name=entry["display_name"])
            for name, entry in self.entries.items()
            if entry["display_name"] == wanted
        ]

    def _list_model_versions(self, request) -> list[gca.Model]:
        versions = list(self.versions(request.name).values())
        if request.filter:
            key, value = re.fullmatch(r'labels\.(\w+)="(.*)"', request.filter).groups()
            versions = [v for v in versions if v.labels.get(key) == value]
        return [copy.deepcopy(v) for v in versions]

    def _get_model(self, request) -> gca.Model:
        return copy.deepcopy(self._named(request.name))

    def _update_model(self, request) -> gca.Model:
        version = self._named(request.model.name)
        paths = set(request.update_mask.paths)
        assert paths and paths <= {"labels", "version_description"}, paths
        if not request.model.etag:
            self.blind_writes.append(self.sent[-1])
        elif request.model.etag != version.etag:
            raise self.conflict(f"{request.model.name}: etag {request.model.etag} is stale")
        if "labels" in paths:
            version.labels = dict(request.model.labels)
        if "version_description" in paths:
            version.version_description = request.model.version_description
        version.etag = self._etag()
        return copy.deepcopy(version)

    def _merge_version_aliases(self, request) -> gca.Model:
        version = self._named(request.name)
        entry = request.name.split("@")[0]
        for alias in request.version_aliases:
            bare = alias.lstrip("-")
            if alias.startswith("-"):
                if bare == "default":
                    raise exceptions.FailedPrecondition("an entry must keep one default version")
                version.version_aliases = [a for a in version.version_aliases if a != bare]
                version.etag = self._etag()
                continue
            for other in self.versions(entry).values():
                if bare in other.version_aliases and other is not version:
                    other.version_aliases = [a for a in other.version_aliases if a != bare]
                    other.etag = self._etag()
            if bare not in version.version_aliases:
                version.version_aliases.append(bare)
            version.etag = self._etag()
        return copy.deepcopy(version)

    def _upload_model(self, request) -> Operation:
        name = (
            request.parent_model
            or f"projects/p/locations/us-central1/models/{len(self.entries) + 900}"
        )
        if name not in self.entries:
            self.entries[name] = {"display_name": request.model.display_name, "versions": {}}
        versions = self.versions(name)
        version = gca.Model(
            request.model,
            name=name,
            version_id=str(max((int(v) for v in versions), default=0) + 1),
            version_aliases=[],
        )
        self._store(name, version)
        aliases = list(request.model.version_aliases) or ([] if len(versions) > 1 else ["default"])
        if aliases:
            self._merge_version_aliases(
                gca.MergeVersionAliasesRequest(
                    name=f"{name}@{version.version_id}", version_aliases=aliases
                )
            )
        return Operation(gca.UploadModelResponse(model=name, model_version_id=version.version_id))

    # EndpointService.

    def _list_endpoints(self, request) -> list[gca.Endpoint]:
        wanted = re.fullmatch(r'display_name="(.*)"', request.filter)[1]
        return [copy.deepcopy(e) for e in self.endpoints.values() if e.display_name == wanted]

    def _create_endpoint(self, request) -> Operation:
        name = f"projects/p/locations/us-central1/endpoints/{len(self.endpoints) + 10}"
        self.endpoints[name] = gca.Endpoint(request.endpoint, name=name, etag=self._etag())
        return Operation(copy.deepcopy(self.endpoints[name]))

    def _deploy_model(self, request) -> Operation:
        target = self.endpoints[request.endpoint]
        entry, version_id = request.deployed_model.model.split("@")
        deployed_id = f"d{len(target.deployed_models) + 1}-{version_id}"
        target.deployed_models.append(
            gca.DeployedModel(id=deployed_id, model=entry, model_version_id=version_id)
        )
        split = {deployed_id if k == "0" else k: v for k, v in request.traffic_split.items()}
        if split:
            target.traffic_split = split
        target.etag = self._etag()
        return Operation(gca.DeployModelResponse(deployed_model=target.deployed_models[-1]))

    def _undeploy_model(self, request) -> Operation:
        target = self.endpoints[request.endpoint]
        if target.traffic_split.get(request.deployed_model_id, 0):
            raise exceptions.FailedPrecondition("the deployed model still has traffic")
        kept = [d for d in target.deployed_models if d.id != request.deployed_model_id]
        target.deployed_models = kept
        target.etag = self._etag()
        return Operation(gca.UndeployModelResponse())

    def _update_endpoint(self, request) -> gca.Endpoint:
        target = self.endpoints[request.endpoint.name]
        assert list(request.update_mask.paths) == ["traffic_split"]
        if request.endpoint.etag and request.endpoint.etag != target.etag:
            raise self.conflict(f"{target.name}: etag {request.endpoint.etag} is stale")
        target.traffic_split = dict(request.endpoint.traffic_split)
        target.etag = self._etag()
        return copy.deepcopy(target)

    # MetadataService.

    def _list_artifacts(self, request) -> list[gca.Artifact]:
        if "pushed_destination" in request.filter:
            assert request.filter.startswith('schema_title="tfx.PushedModel" AND ')
            destination = request.filter.split('string_value="')[1].rstrip('"')
            return [
                copy.deepcopy(a)
                for a in self.artifacts.values()
                if a.schema_title == "tfx.PushedModel"
                and a.metadata.get("pushed_destination") == destination
            ]
        title, uri = re.fullmatch(r'schema_title="(.*)" AND uri="(.*)"', request.filter).groups()
        return [
            copy.deepcopy(a)
            for a in self.artifacts.values()
            if a.schema_title == title and a.uri == uri
        ]

    def _query_artifact_lineage_subgraph(self, request) -> gca.LineageSubgraph:
        assert request.max_hops == 2
        executions = {e.execution for e in self.events if e.artifact == request.artifact}
        events = [e for e in self.events if e.execution in executions]
        names = {e.artifact for e in events} | {request.artifact}
        return gca.LineageSubgraph(
            artifacts=[copy.deepcopy(self.artifacts[n]) for n in names if n in self.artifacts],
            events=copy.deepcopy(events),
        )

    def _update_artifact(self, request) -> gca.Artifact:
        target = self.artifacts[request.artifact.name]
        assert list(request.update_mask.paths) == ["metadata"]
        if request.artifact.etag and request.artifact.etag != target.etag:
            raise self.conflict(f"{target.name}: etag {request.artifact.etag} is stale")
        target.metadata = dict(request.artifact.metadata)
        target.etag = self._etag()
        return copy.deepcopy(target)

    def _create_artifact(self, request) -> gca.Artifact:
        self._created += 1
        name = f"{STORE}/artifacts/created-{self._created}"
        self.artifacts[name] = gca.Artifact(request.artifact, name=name, etag=self._etag())
        return copy.deepcopy(self.artifacts[name])

    def _create_execution(self, request) -> gca.Execution:
        self._created += 1
        name = f"{STORE}/executions/created-{self._created}"
        self.executions[name] = gca.Execution(request.execution, name=name)
        return copy.deepcopy(self.executions[name])

    def _add_execution_events(self, request) -> gca.AddExecutionEventsResponse:
        for event in request.events:
            self.events.append(gca.Event(event, execution=request.execution))
        return gca.AddExecutionEventsResponse()

    def _add_context_artifacts_and_executions(self, request):
        self.contexts.setdefault(request.context, []).extend(
            [*request.artifacts, *request.executions]
        )
        return gca.AddContextArtifactsAndExecutionsResponse()

    # PipelineService.

    def _list_pipeline_jobs(self, request) -> list[gca.PipelineJob]:
        return [gca.PipelineJob(name=job.name) for job in self.jobs]

    def _get_pipeline_job(self, request) -> gca.PipelineJob:
        return next(copy.deepcopy(job) for job in self.jobs if job.name == request.name)

    # Inside.

    def _named(self, name: str) -> gca.Model:
        entry, _, which = name.partition("@")
        versions = self.versions(entry)
        if which in versions:
            return versions[which]
        alias = which or "default"
        found = next((v for v in versions.values() if alias in v.version_aliases), None)
        if found is None:
            raise exceptions.NotFound(f"{name}: no such version")
        return found

    def _store(self, name: str, version: gca.Model) -> None:
        version.etag = self._etag()
        self.versions(name)[version.version_id] = version

    def _artifact(self, short: str, schema_title: str, **metadata) -> gca.Artifact:
        artifact = gca.Artifact(
            name=f"{STORE}/artifacts/{short}",
            schema_title=schema_title,
            metadata=metadata,
            etag=self._etag(),
        )
        self.artifacts[artifact.name] = artifact
        return artifact

    def _etag(self) -> str:
        self._etags += 1
        return f"etag-{self._etags}"


def _snake(method: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in method).lstrip("_")


def serving(
    monkeypatch, server: VertexServer, *argv: str, config: str = "kubeflow/vertex-tpu.yaml"
):
    """`tpu-pipeline serving ARGV --vertex --config CONFIG`, against `server` as actor "cli"."""
    from tpu_pipeline.cli.main import main
    from tpu_pipeline.common import vertex_api
    from tpu_pipeline.serving_ops.vertex import transport

    monkeypatch.setattr(vertex_api, "connect", lambda region: "credentials")
    monkeypatch.setattr(
        vertex_api, "send", lambda call, region, credentials: server.handle("cli", call)
    )
    monkeypatch.setattr(transport, "_now", server.clock)
    monkeypatch.setattr(transport, "_pause", server.sleep)
    return main(["serving", *argv, "--vertex", "--config", config])
