"""The compiled Vertex AI pipeline spec says what the cluster will run: checked offline."""

from __future__ import annotations

import json

import pytest

from tests.kubeflow.conftest import (
    DEPLOYMENT_TARGETS,
    TPU_V3_8,
    executor,
    task_parameter,
    worker_pool,
    worker_pools,
)
from tpu_pipeline.common.config import REPO_ROOT, ConfigError, load_config, require_vertex
from tpu_pipeline.kubeflow.cluster_config import (
    CONTAINER_SOURCE_DIR,
    container_schema_file,
    runtime_parameter_defaults,
)

BEAM_TASKS = ("ExampleGen", "StatisticsGen", "Transform", "Evaluator")
WEBHOOK_SECRET = "projects/p/secrets/hook/versions/1"  # adds the exit handler's step


@pytest.mark.parametrize("target", DEPLOYMENT_TARGETS)
def test_every_shipped_deployment_config_compiles_to_the_full_dag(compile_spec, target):
    config, spec, _ = compile_spec(target)
    tasks = spec["pipelineSpec"]["root"]["dag"]["tasks"]
    assert set(tasks) == {
        "ExampleGen",
        "StatisticsGen",
        "ImportSchemaGen",
        "ExampleValidator",
        "DataGate",
        "Transform",
        "Trainer",
        "ServingPackager",
        "Explainer",
        "latest_blessed_model_resolver-model-resolver",
        "latest_blessed_model_resolver-model-blessing-resolver",
        "Evaluator",
        "Pusher",
    }
    assert set(tasks["Transform"]["dependentTasks"]) >= {"DataGate", "ExampleGen"}
    # The step after the Trainer makes the served model the Evaluator and the Pusher take.
    assert set(tasks["ServingPackager"]["dependentTasks"]) == {"Trainer", "ExampleGen", "Transform"}
    assert set(tasks["Evaluator"]["dependentTasks"]) >= {"ServingPackager", "ExampleGen"}
    assert set(tasks["Explainer"]["dependentTasks"]) == {"ServingPackager", "ExampleGen"}
    served = {"producerTask": "ServingPackager", "outputArtifactKey": "served_model"}
    for reader in ("Evaluator", "Pusher", "Explainer"):
        model = tasks[reader]["inputs"]["artifacts"]["model"]["taskOutputArtifact"]
        assert model == served, reader
    # The model card's inputs reach the Pusher on Vertex too.
    assert set(tasks["Pusher"]["dependentTasks"]) == {
        "Evaluator",
        "ServingPackager",
        "StatisticsGen",
    }
    pusher_inputs = tasks["Pusher"]["inputs"]["artifacts"]
    assert pusher_inputs["evaluation"]["taskOutputArtifact"]["producerTask"] == "Evaluator"
    assert pusher_inputs["statistics"]["taskOutputArtifact"]["producerTask"] == "StatisticsGen"
    # Warm start: the Trainer reads the last blessed model the resolver finds.
    base_model = tasks["Trainer"]["inputs"]["artifacts"]["base_model"]["taskOutputArtifact"]
    assert base_model["producerTask"] == "latest_blessed_model_resolver-model-resolver"
    assert spec["runtimeConfig"]["gcsOutputDirectory"] == config.vertex.pipeline_root


def test_with_block_push_the_span_shift_gate_is_a_step_before_the_pusher(compile_spec):
    _, plain, _ = compile_spec("cpu")  # data in spans: the gate only when asked for
    assert "SpanShiftGate" not in plain["pipelineSpec"]["root"]["dag"]["tasks"]
    _, spec, _ = compile_spec("cpu", **{"drift.block_push": True})
    tasks = spec["pipelineSpec"]["root"]["dag"]["tasks"]
    gate = tasks["SpanShiftGate"]
    assert set(gate["dependentTasks"]) == {
        "ServingPackager",
        "latest_blessed_model_resolver-model-resolver",
    }
    # The Pusher waits for the verdict and reads it.
    assert "SpanShiftGate" in tasks["Pusher"]["dependentTasks"]
    verdict = tasks["Pusher"]["inputs"]["artifacts"]["span_shift"]["taskOutputArtifact"]
    assert verdict == {"producerTask": "SpanShiftGate", "outputArtifactKey": "verdict"}
    assert task_parameter(spec, "SpanShiftGate", "drift_config")["block_push"] is True
    # A type TFX's Vertex entrypoint loads by itself (a custom one must be importable by name).
    components = spec["pipelineSpec"]["components"]
    output = components[gate["componentRef"]["name"]]["outputDefinitions"]["artifacts"]
    assert "title: tfx.JsonValue\n" in output["verdict"]["artifactType"]["instanceSchema"]
    args = executor(spec, "SpanShiftGate")["args"]
    assert args[args.index("--executor_class_path") + 1].startswith(
        "tpu_pipeline.components.span_shift_gate."
    )


def artifact_types(spec: dict):
    """(component, input or output, key, artifactType) of every artifact the spec declares."""
    for name, component in spec["pipelineSpec"]["components"].items():
        for side in ("inputDefinitions", "outputDefinitions"):
            for key, artifact in component.get(side, {}).get("artifacts", {}).items():
                yield name, side, key, artifact["artifactType"]


@pytest.mark.parametrize(
    "target, overrides",
    [(target, {}) for target in DEPLOYMENT_TARGETS]
    + [("cpu", {"drift.block_push": True, "notify.webhook_secret": WEBHOOK_SECRET})],
)
def test_every_artifact_type_loads_in_tfxs_vertex_entrypoint(compile_spec, target, overrides):
    """A step's container rebuilds each artifact from the spec's type schema with the code
    below (kubeflow_v2_run_executor): a TFX type by its `tfx.` title, any other by importing
    the title as a class path; one it cannot import fails the step before it runs."""
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_entrypoint_utils

    from tpu_pipeline.common.tfx_api import Artifact
    from tpu_pipeline.components.explainer import Explainer

    _, spec, _ = compile_spec(target, **overrides)
    loaded = {}
    for component, side, key, schema in artifact_types(spec):
        runtime = pipeline_spec_pb2.RuntimeArtifact(
            uri="gs://bucket/root/artifact",
            type=json_format.ParseDict(schema, pipeline_spec_pb2.ArtifactTypeSchema()),
        )
        artifacts = {key: pipeline_spec_pb2.ArtifactList(artifacts=[runtime])}
        (artifact,) = kubeflow_v2_entrypoint_utils.parse_raw_artifact_dict(artifacts)[key]
        loaded[component, side, key] = type(artifact)
    for where, cls in loaded.items():
        # Neither the generic Artifact nor a class TFX makes up for a type it cannot find.
        assert cls is not Artifact and not getattr(cls, "_AUTOGENERATED", False), where
        if not cls.__module__.startswith("tfx.types."):
            assert cls.__module__.split(".")[0] in {"tpu_pipeline", "components"}, where
    explanation = loaded["Explainer", "outputDefinitions", "explanation"]
    assert explanation is Explainer.SPEC_CLASS.OUTPUTS["explanation"].type


@pytest.mark.parametrize("target", DEPLOYMENT_TARGETS)
def test_steps_run_our_image_and_reference_user_code_by_dotted_path(compile_spec, target):
    config, spec, _ = compile_spec(target)
    executors = spec["pipelineSpec"]["deploymentSpec"]["executors"]
    images = {e["container"]["image"] for e in executors.values() if "container" in e}
    assert images == {config.vertex.pipeline_image}
    assert task_parameter(spec, "Trainer", "run_fn") == "tpu_pipeline.components.trainer.run_fn"
    assert task_parameter(spec, "Transform", "preprocessing_fn") == (
        "tpu_pipeline.components.preprocessing.preprocessing_fn"
    )
    assert (
        "tpu_pipeline.components.data_gate.DataGate_Executor" in executor(spec, "DataGate")["args"]
    )
    packager = executor(spec, "ServingPackager")["args"]
    assert "tpu_pipeline.components.packager.ServingPackager_Executor" in packager
    assert (
        "tpu_pipeline.components.explainer.Explainer_Executor"
        in executor(spec, "Explainer")["args"]
    )
    schema_file = task_parameter(spec, "ImportSchemaGen", "schema_file")
    assert schema_file == f"{CONTAINER_SOURCE_DIR}/schemas/digits/schema.pbtxt"
    assert (REPO_ROOT / schema_file.removeprefix(CONTAINER_SOURCE_DIR + "/")).is_file()


@pytest.mark.parametrize("target", DEPLOYMENT_TARGETS)
def test_spec_holds_no_local_paths_or_credentials(compile_spec, target):
    _, _, path = compile_spec(target)
    text = path.read_text()
    for local in (str(REPO_ROOT), str(REPO_ROOT.parent), "/tmp/", "/home/", "file://"):
        assert local not in text
    for secret in ("private_key", "client_secret", "refresh_token", "access_token", "BEGIN "):
        assert secret not in text


def test_data_root_and_train_args_are_runtime_parameters_with_config_defaults(compile_spec):
    config, spec, _ = compile_spec("cpu")
    assert set(spec["pipelineSpec"]["root"]["inputDefinitions"]["parameters"]) == {
        "data_root",
        "train_args",
    }
    defaults = spec["runtimeConfig"]["parameters"]
    assert defaults["data_root"]["stringValue"] == config.vertex.data_root
    assert json.loads(defaults["train_args"]["stringValue"]) == {
        "num_steps": config.trainer.train_steps
    }
    # Without train_steps, no num_steps: the Trainer runs whole epochs over the data.
    epochs_only = config.model_copy(
        update={"trainer": config.trainer.model_copy(update={"train_steps": None})}
    )
    assert json.loads(runtime_parameter_defaults(epochs_only)["train_args"]) == {}
    tasks = spec["pipelineSpec"]["root"]["dag"]["tasks"]
    example_gen = tasks["ExampleGen"]["inputs"]["parameters"]
    assert example_gen["input_base"] == {"componentInputParameter": "data_root"}
    assert tasks["Trainer"]["inputs"]["parameters"]["train_args"] == {
        "componentInputParameter": "train_args"
    }


def test_example_gen_reads_the_configured_window_of_latest_spans(compile_spec):
    """TFX resolves the newest span (its ExampleGen refuses a RollingRange of two, at run
    time, after compiling); our executor reads the window from the dataset section."""
    _, spec, _ = compile_spec("tpu")  # span-{SPAN} pattern, span_window: 2
    input_config = task_parameter(spec, "ExampleGen", "input_config")
    assert input_config["splits"][0]["pattern"] == "span-{SPAN}/*.tfrecord*"
    parameters = spec["pipelineSpec"]["root"]["dag"]["tasks"]["ExampleGen"]["inputs"]
    assert "range_config" not in parameters["parameters"]
    packed = task_parameter(spec, "ExampleGen", "custom_config")["custom_config"]["value"]
    assert json.loads(packed)["dataset"]["span_window"] == 2


def test_pipeline_step_trainer_runs_in_the_pipeline_image(compile_spec):
    _, spec, _ = compile_spec("cpu")
    assert "tfx.components.trainer.executor.GenericExecutor" in executor(spec, "Trainer")["args"]
    assert "ai_platform_training_args" not in task_parameter(spec, "Trainer", "custom_config")


def test_tpu_v5e_custom_job_asks_for_the_tpu_vm_and_tpu_image(compile_spec):
    config, spec, _ = compile_spec("tpu")
    custom_config = task_parameter(spec, "Trainer", "custom_config")
    assert custom_config["ai_platform_enable_vertex"] is True
    assert custom_config["ai_platform_vertex_region"] == config.vertex.region
    assert custom_config["ai_platform_training_args"]["project"] == config.vertex.project
    pool = worker_pool(spec)
    assert pool["machine_spec"] == {"machine_type": "ct5lp-hightpu-4t", "tpu_topology": "2x2"}
    assert pool["container_spec"]["image_uri"] == config.vertex.trainer.image
    assert pool["container_spec"]["image_uri"] != config.vertex.pipeline_image
    # run_fn inside the job connects to the TPU VM's own chips instead of probing.
    assert custom_config["trainer"]["accelerator"] == "tpu"
    assert custom_config["trainer"]["tpu_name"] == "local"
    # TFX's Vertex Trainer executor, subclassed so the image's ENTRYPOINT runs (tpu_job.py).
    assert (
        "tpu_pipeline.kubeflow.tpu_job.PodEntrypointTrainerExecutor"
        in executor(spec, "Trainer")["args"]
    )


def test_tpu_v3_8_custom_job_uses_cloud_tpu_with_eight_tpu_v3_cores(compile_spec):
    config, spec, _ = compile_spec("cpu", **TPU_V3_8)
    pool = worker_pool(spec)
    assert pool["machine_spec"] == {
        "machine_type": "cloud-tpu",
        "accelerator_type": "TPU_V3",
        "accelerator_count": 8,
    }
    assert pool["container_spec"]["image_uri"] == config.vertex.trainer.image
    trainer = task_parameter(spec, "Trainer", "custom_config")["trainer"]
    assert trainer["accelerator"] == "tpu"
    assert trainer["promised_devices"] == {
        "replicas": 8,
        "hosts": 1,
        "machine": "cloud-tpu with 8 x TPU_V3",
    }


def test_gpu_custom_job_asks_for_the_a100_count_and_requires_a_gpu(compile_spec):
    config, spec, _ = compile_spec("gpu")
    pool = worker_pool(spec)
    assert pool["machine_spec"] == {
        "machine_type": "a2-highgpu-1g",
        "accelerator_type": "NVIDIA_TESLA_A100",
        "accelerator_count": 1,
    }
    assert {"name": "TF_USE_LEGACY_KERAS", "value": "1"} in pool["container_spec"]["env"]
    custom_config = task_parameter(spec, "Trainer", "custom_config")
    assert custom_config["trainer"]["accelerator"] == "gpu"
    job_spec = custom_config["ai_platform_training_args"]["job_spec"]
    assert job_spec["service_account"] == config.vertex.service_account


def test_multi_worker_gpu_job_has_a_chief_pool_and_a_pool_of_identical_workers(compile_spec):
    config, spec, _ = compile_spec("gpu-multiworker")
    chief, workers = worker_pools(spec)
    assert chief["replica_count"] == 1  # Vertex AI makes the first pool's replica the chief
    assert workers["replica_count"] == config.vertex.trainer.replica_count - 1 == 3
    assert (
        chief["machine_spec"]
        == workers["machine_spec"]
        == {
            "machine_type": "a2-highgpu-2g",
            "accelerator_type": "NVIDIA_TESLA_A100",
            "accelerator_count": 2,
        }
    )
    assert chief["container_spec"] == workers["container_spec"]
    assert chief["container_spec"]["image_uri"] == config.vertex.pipeline_image
    # Every replica runs the same run_fn; TF_CONFIG (set by Vertex AI) makes them one cluster.
    assert task_parameter(spec, "Trainer", "custom_config")["trainer"]["accelerator"] == "gpu"
    assert task_parameter(spec, "Trainer", "run_fn") == "tpu_pipeline.components.trainer.run_fn"


def test_multi_host_tpu_slice_is_one_replica_with_a_topology_over_several_hosts(compile_spec):
    config, spec, _ = compile_spec("tpu-multihost")
    pool = worker_pool(spec)
    assert pool["machine_spec"] == {"machine_type": "ct5lp-hightpu-4t", "tpu_topology": "4x4"}
    assert pool["replica_count"] == 1
    assert pool["container_spec"]["image_uri"] == config.vertex.trainer.image
    assert config.vertex.trainer.hosts == 4  # 16 chips, 4 per host
    trainer = task_parameter(spec, "Trainer", "custom_config")["trainer"]
    # Not "local": that would see one host's 4 chips, not the slice's 16.
    assert trainer["accelerator"] == "tpu" and trainer["tpu_name"] is None


def test_beam_components_run_on_dataflow_in_our_image_when_configured(compile_spec):
    config, spec, _ = compile_spec("tpu")
    for task in BEAM_TASKS:
        args = executor(spec, task)["args"]
        assert "--runner=DataflowRunner" in args
        assert f"--project={config.vertex.project}" in args
        assert f"--region={config.vertex.region}" in args
        assert f"--temp_location={config.vertex.dataflow.temp_location}" in args
        assert f"--sdk_container_image={config.vertex.pipeline_image}" in args


def test_beam_components_run_in_their_step_without_dataflow(compile_spec):
    _, spec, _ = compile_spec("cpu")
    for task in BEAM_TASKS:
        assert not any(arg.startswith("--runner") for arg in executor(spec, task)["args"])


def test_pusher_registers_versions_of_one_model_only_when_configured(compile_spec):
    config, spec, _ = compile_spec("tpu")
    assert (
        "tpu_pipeline.serving_ops.vertex.pusher.RegistryPusherExecutor"
        in executor(spec, "Pusher")["args"]
    )
    registry = task_parameter(spec, "Pusher", "custom_config")["vertex_model_registry"]
    assert registry["model_display_name"] == config.vertex.model_registry.model_display_name
    assert registry["endpoint_display_name"] == "tpu-pipeline-digits"
    push_destination = task_parameter(spec, "Pusher", "push_destination")
    assert push_destination["filesystem"]["base_directory"] == config.vertex.serving_dir

    _, without_registry, _ = compile_spec("cpu")
    assert (
        "tpu_pipeline.components.pusher.AtomicPusherExecutor"
        in executor(without_registry, "Pusher")["args"]
    )
    assert "vertex_model_registry" not in json.dumps(without_registry)


@pytest.mark.parametrize("target", ["cpu", "tpu"])
def test_the_pusher_checks_the_candidate_in_a_model_server_on_vertex(compile_spec, target):
    config, spec, _ = compile_spec(target, **{"serving.check_timeout_seconds": 45})
    # The check runs in the Pusher's own step (InfraValidator cannot compile for Vertex):
    # its executor is the checking one, with the budget and the classes it checks against.
    custom_config = task_parameter(spec, "Pusher", "custom_config")
    assert custom_config["serving"]["check_timeout_seconds"] == 45
    assert custom_config["dataset"]["num_classes"] == config.dataset.num_classes
    assert ("vertex_model_registry" in custom_config) == (target == "tpu")
    args = " ".join(executor(spec, "Pusher")["args"])
    assert "AtomicPusherExecutor" in args or "RegistryPusherExecutor" in args


def test_compile_without_vertex_section_names_the_section_and_the_templates():
    with pytest.raises(ConfigError, match="vertex: section missing.*vertex-cpu.yaml"):
        require_vertex(load_config(None, {}))


def test_schema_outside_the_image_is_rejected(tmp_path):
    schema = tmp_path / "schema.pbtxt"
    schema.write_text("")
    config = load_config(None, {"dataset.schema_file": str(schema)})
    with pytest.raises(ConfigError, match="dataset.schema_file.*not in the image"):
        container_schema_file(config)
    gcs = load_config(None, {"dataset.schema_file": "gs://b/schema.pbtxt"})
    assert container_schema_file(gcs) == "gs://b/schema.pbtxt"


@pytest.mark.parametrize("target", ["cpu", "gpu", "tpu"])
def test_the_serving_packager_builds_the_same_tflite_variants_on_vertex(compile_spec, target):
    config, spec, _ = compile_spec(target, **{"serving.tflite_variants": ("float16", "int8")})
    # The ServingPackager converts and measures the variants in a step of its own, wherever
    # the Trainer runs (pipeline step or custom job); they sit in the model folder the
    # Pusher copies, as in a local run.
    serving = task_parameter(spec, "ServingPackager", "custom_config")["serving"]
    assert serving == config.serving.model_dump(mode="json")
    assert serving["tflite_variants"] == ["float16", "int8"]
    assert "serving" not in task_parameter(spec, "Trainer", "custom_config")
    pusher_args = " ".join(executor(spec, "Pusher")["args"])
    assert "AtomicPusherExecutor" in pusher_args or "RegistryPusherExecutor" in pusher_args


def test_the_steps_after_the_trainer_keep_their_work_on_vertex(compile_spec):
    # Each eval example's outcome is the Evaluator's: its limit is in the Evaluator's
    # custom_config, not the Trainer's (changing it does not retrain).
    _, spec, _ = compile_spec("cpu", **{"serving.measured_examples": 300})
    assert task_parameter(spec, "Evaluator", "custom_config")["eval_outcome_examples"] == 300
    assert "eval_outcome_examples" not in task_parameter(spec, "Trainer", "custom_config")
    # Without the ServingPackager, the Pusher makes the warmup requests from ExampleGen's
    # eval split for the Trainer's model.
    _, spec, _ = compile_spec("cpu", **{"serving.package": False})
    tasks = spec["pipelineSpec"]["root"]["dag"]["tasks"]
    assert "ServingPackager" not in tasks
    pusher_inputs = tasks["Pusher"]["inputs"]["artifacts"]
    assert pusher_inputs["examples"]["taskOutputArtifact"]["producerTask"] == "ExampleGen"
    assert pusher_inputs["model"]["taskOutputArtifact"]["producerTask"] == "Trainer"


def test_pruning_and_the_pruned_variant_reach_the_vertex_trainer(compile_spec):
    _, spec, _ = compile_spec(
        "tpu",
        **{"trainer.pruning.target_sparsity": 0.5, "serving.tflite_variants": ("pruned",)},
    )
    custom_config = task_parameter(spec, "Trainer", "custom_config")
    assert custom_config["trainer"]["pruning"]["target_sparsity"] == 0.5
    packager = task_parameter(spec, "ServingPackager", "custom_config")
    assert packager["serving"]["tflite_variants"] == ["pruned"]


def test_compiling_again_replaces_its_own_spec_and_never_a_users_file(compile_spec, tmp_path):
    from tpu_pipeline.common.owned_paths import UserPathError
    from tpu_pipeline.kubeflow.runner import compile_pipeline

    config, spec, path = compile_spec("cpu")
    compile_pipeline(config, path)  # the spec it wrote is its own to replace
    users = tmp_path / "pipeline.json"
    users.write_text('{"the user": "own spec"}')

    with pytest.raises(UserPathError, match="did not write"):
        compile_pipeline(config, users)

    assert json.loads(path.read_text())["pipelineSpec"] == spec["pipelineSpec"]
    assert users.read_text() == '{"the user": "own spec"}'
