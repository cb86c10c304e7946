"""What a run sends a tracker: the configuration through its secret-aware dump, the defaults
chosen from the data, and names every tracker takes."""

from __future__ import annotations

import json

from tests.cli.test_secrets_stay_secret import secret_webhook, secrets_in
from tpu_pipeline.common.config import load_config
from tpu_pipeline.pipeline.results.run_summary import ComponentResult, RunSummary
from tpu_pipeline.pipeline.tracking.record import metric_name, metrics_of, params_of, tracked_run


def _summary(config) -> RunSummary:
    summary = RunSummary.without_results(
        config.full_pipeline_name, [ComponentResult("Trainer", "executed", 12.5)], None, None
    )
    summary.chosen_defaults = {
        "fields": {"trainer.epochs": {"value": 40, "reason": "1,200 training photos"}},
        "fallback": None,
    }
    summary.trainer = {"device": "cpu", "num_replicas": 1, "augmentation": {"flip": True}}
    return summary


def test_a_secret_reaches_the_tracker_as_its_host_only(tmp_path):
    config = load_config(None, {"notify.webhook": secret_webhook(), "output_dir": str(tmp_path)})
    tracked = tracked_run(config, _summary(config), tmp_path)
    sent = json.dumps([tracked.params, tracked.tags, tracked.description, tracked.summary_json])
    assert secrets_in(sent) == []
    assert tracked.params["notify.webhook"] == "https://hooks.example.com/***"


def test_params_are_the_resolved_configuration_the_chosen_defaults_and_how_it_trained(tmp_path):
    config = load_config(None, {"trainer.train_steps": 300, "output_dir": str(tmp_path)})
    params = params_of(config, _summary(config))
    assert params["trainer.train_steps"] == "300"
    assert params["dataset.name"] == "digits"
    assert params["serving.tflite_variants"] == '["float32", "float16", "dynamic_int8", "int8"]'
    assert params["chosen.trainer.epochs"] == "40"
    assert params["trained_with.device"] == "cpu" and params["trained_with.num_replicas"] == "1"
    assert "trained_with.augmentation" not in params  # a mapping is no param value


def test_metric_names_keep_what_trackers_take_and_replace_the_rest():
    assert metric_name("eval.class.T-shirt/top.recall") == "eval.class.T-shirt/top.recall"
    assert metric_name("eval.slice.image_size.up to 64 px.accuracy") == (
        "eval.slice.image_size.up to 64 px.accuracy"
    )
    assert metric_name("eval.class.cat (tabby)+1.recall") == "eval.class.cat _tabby__1.recall"


def test_a_run_that_stopped_early_logs_what_it_has(tmp_path):
    config = load_config(None, {"output_dir": str(tmp_path)})
    summary = _summary(config)
    metrics = metrics_of(summary)
    assert metrics == {"blessed": 0.0, "succeeded": 1.0, "component.Trainer.seconds": 12.5}
