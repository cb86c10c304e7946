"""Pushing: atomic versions, never the same model twice, nothing half-written."""

import os

import pytest
import tensorflow as tf

from tpu_pipeline.components.serving import publish
from tpu_pipeline.components.serving.publish import push_model_version, pushed_versions


def save_model(path, value: float) -> str:
    module = tf.Module()
    module.weight = tf.Variable(value)
    module.predict = tf.function(
        lambda x: x * module.weight, input_signature=[tf.TensorSpec([None])]
    )
    tf.saved_model.save(module, str(path))
    return str(path)


class Clock:
    def __init__(self, now: int):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_model_is_named_by_the_hashes_tensorflow_reads_from_its_fingerprint(tmp_path):
    """Read without TensorFlow's proto class, the hashes are the ones that class reads."""
    from tensorflow.core.protobuf import fingerprint_pb2

    model = save_model(tmp_path / "model", 1.0)
    with open(os.path.join(model, "fingerprint.pb"), "rb") as file:
        theirs = fingerprint_pb2.FingerprintDef.FromString(file.read())
    expected = (
        theirs.saved_model_checksum,
        theirs.graph_def_program_hash,
        theirs.signature_def_hash,
        theirs.saved_object_graph_hash,
        theirs.checkpoint_hash,
        (),  # no TFLite files
    )
    assert all(expected[:5]) and publish.model_fingerprint(model) == expected
    assert publish.model_fingerprint(save_model(tmp_path / "other", 2.0)) != expected


def test_first_push_creates_a_numbered_version_with_the_whole_model(tmp_path):
    model = save_model(tmp_path / "model", 1.0)
    result = push_model_version(model, str(tmp_path / "serving"), clock=Clock(1000))
    assert result.newly_pushed and result.version == "1000"
    assert pushed_versions(str(tmp_path / "serving")) == ["1000"]
    loaded = tf.saved_model.load(result.version_dir)
    assert float(loaded.predict(tf.constant([2.0]))[0]) == 2.0


def test_the_same_model_is_not_pushed_twice(tmp_path):
    model = save_model(tmp_path / "model", 1.0)
    first = push_model_version(model, str(tmp_path / "serving"), clock=Clock(1000))
    again = push_model_version(model, str(tmp_path / "serving"), clock=Clock(2000))
    assert not again.newly_pushed
    assert again.version_dir == first.version_dir
    assert pushed_versions(str(tmp_path / "serving")) == ["1000"]


def test_the_check_before_publishing_runs_for_a_new_model_only_and_can_stop_it(tmp_path):
    model = save_model(tmp_path / "model", 1.0)
    serving = str(tmp_path / "serving")
    checked = []
    push_model_version(model, serving, clock=Clock(1000), before_publish=checked.append)
    push_model_version(model, serving, clock=Clock(2000), before_publish=checked.append)
    assert checked == [model]  # the served model is not checked again

    def refuse(model_dir):
        raise RuntimeError("signature 'pixels' failed")

    other = save_model(tmp_path / "other", 2.0)
    with pytest.raises(RuntimeError, match="pixels"):
        push_model_version(other, serving, clock=Clock(3000), before_publish=refuse)
    assert pushed_versions(serving) == ["1000"] and sorted(os.listdir(serving)) == ["1000"]


def test_a_model_with_other_weights_gets_a_later_version_even_if_the_clock_lags(tmp_path):
    serving = str(tmp_path / "serving")
    push_model_version(save_model(tmp_path / "a", 1.0), serving, clock=Clock(1000))
    second = push_model_version(save_model(tmp_path / "b", 3.0), serving, clock=Clock(900))
    assert second.newly_pushed and second.version == "1001"
    assert pushed_versions(serving) == ["1000", "1001"]


def test_a_failed_copy_leaves_no_version_and_no_staging_folder(tmp_path, monkeypatch):
    serving = tmp_path / "serving"
    push_model_version(save_model(tmp_path / "a", 1.0), str(serving), clock=Clock(1000))
    real_copy = publish.tfx_api.io_utils.copy_dir

    def copy_then_fail(source, destination):
        real_copy(source, destination)
        raise OSError("disk full")

    monkeypatch.setattr(publish.tfx_api.io_utils, "copy_dir", copy_then_fail)
    with pytest.raises(OSError, match="disk full"):
        push_model_version(save_model(tmp_path / "b", 2.0), str(serving), clock=Clock(2000))
    assert sorted(os.listdir(serving)) == ["1000"]


def local_files(folder) -> dict[str, bytes]:
    folder = str(folder)
    return {
        os.path.relpath(os.path.join(parent, name), folder): open(
            os.path.join(parent, name), "rb"
        ).read()
        for parent, _, names in os.walk(folder)
        for name in names
    }


def versions_with_saved_model(bucket, state) -> dict[str, dict[str, bytes]]:
    """The version folders a model server would load in `state` (of the emulator's bucket
    `serving/`), with their files."""
    folders = {key.split("/")[1] for key in state if key.startswith("serving/")}
    loadable = {}
    for version in folders:
        files = bucket.files_under(f"{bucket.uri}/serving/{version}", state)
        if "saved_model.pb" in files:
            loadable[version] = files
    return loadable


def test_renaming_a_folder_on_the_object_store_exposes_saved_model_pb_first(object_store):
    # Why the push cannot stage and rename there: the fake behaves like Cloud Storage.
    for name in ("saved_model.pb", "variables/variables.index"):
        with publish.fileio.open(f"gs://bucket/staging/{name}", "wb") as file:
            file.write(b"x")
    publish.fileio.rename("gs://bucket/staging", "gs://bucket/serving/1")
    seen = [set(object_store.files_under("gs://bucket/serving/1", s)) for s in object_store.history]
    assert {"saved_model.pb"} in seen


def test_a_push_to_an_object_store_never_shows_saved_model_pb_before_the_rest(tmp_path, gcs_bucket):
    model = save_model(tmp_path / "model", 1.0)
    serving = f"{gcs_bucket.uri}/serving"
    result = push_model_version(model, serving, clock=Clock(1000))
    assert result.newly_pushed and result.version_dir == f"{serving}/1000"
    whole = local_files(model)
    assert len(gcs_bucket.history) == len(whole)  # one state per object: all checked below
    for state in gcs_bucket.history:
        for version, files in versions_with_saved_model(gcs_bucket, state).items():
            assert files == whole, f"version {version} loadable before it was whole"
    assert gcs_bucket.files_under(serving) == {  # the version's claim is gone with the copy
        f"1000/{name}": data for name, data in whole.items()
    }

    again = push_model_version(model, serving, clock=Clock(2000))
    assert not again.newly_pushed and again.version == "1000"


def test_a_copy_cut_short_on_an_object_store_is_removed_and_never_taken_for_the_model(
    tmp_path, gcs_bucket, monkeypatch
):
    serving = f"{gcs_bucket.uri}/serving"
    model = save_model(tmp_path / "model", 1.0)
    real_copy = publish.fileio.copy

    def fail_on_saved_model(source, destination, overwrite=False):
        if destination.endswith("saved_model.pb"):
            raise OSError("connection reset")
        real_copy(source, destination, overwrite)

    monkeypatch.setattr(publish.fileio, "copy", fail_on_saved_model)
    with pytest.raises(OSError, match="connection reset"):
        push_model_version(model, serving, clock=Clock(1000))
    assert gcs_bucket.files_under(serving) == {}

    # A copy cut short by a killed process stays behind: it is not the pushed model.
    for name, data in local_files(model).items():
        if name != "saved_model.pb":
            with publish.fileio.open(f"{serving}/1000/{name}", "wb") as handle:
                handle.write(data)
    monkeypatch.setattr(publish.fileio, "copy", real_copy)
    assert pushed_versions(serving) == []
    result = push_model_version(model, serving, clock=Clock(900))
    assert result.newly_pushed and result.version == "1001"


def add_tflite(model_dir: str, files: dict[str, bytes]) -> None:
    os.makedirs(os.path.join(model_dir, "tflite"), exist_ok=True)
    for name, content in files.items():
        with open(os.path.join(model_dir, "tflite", name), "wb") as handle:
            handle.write(content)


def test_tflite_variants_land_in_the_same_version_as_their_saved_model(tmp_path):
    model = save_model(tmp_path / "model", 1.0)
    add_tflite(model, {"int8.tflite": b"int8 model", "measurements.json": b"{}"})
    result = push_model_version(model, str(tmp_path / "serving"), clock=Clock(1000))
    with open(os.path.join(result.version_dir, "tflite", "int8.tflite"), "rb") as handle:
        assert handle.read() == b"int8 model"
    assert sorted(os.listdir(tmp_path / "serving")) == ["1000"]  # no staging folder left


def test_new_measurements_alone_do_not_make_a_new_version(tmp_path):
    serving = str(tmp_path / "serving")
    first = save_model(tmp_path / "a", 1.0)
    add_tflite(first, {"int8.tflite": b"int8 model", "measurements.json": b'{"ms": 1}'})
    push_model_version(first, serving, clock=Clock(1000))
    add_tflite(first, {"measurements.json": b'{"ms": 2}'})
    assert not push_model_version(first, serving, clock=Clock(2000)).newly_pushed


def test_the_same_saved_model_with_other_tflite_variants_is_a_new_version(tmp_path):
    serving = str(tmp_path / "serving")
    model = save_model(tmp_path / "a", 1.0)
    add_tflite(model, {"float32.tflite": b"float32 model"})
    push_model_version(model, serving, clock=Clock(1000))
    add_tflite(model, {"int8.tflite": b"int8 model"})
    second = push_model_version(model, serving, clock=Clock(2000))
    assert second.newly_pushed and pushed_versions(serving) == ["1000", "2000"]


def test_on_an_object_store_the_tflite_variants_are_there_before_saved_model_pb(
    tmp_path, gcs_bucket
):
    model = save_model(tmp_path / "model", 1.0)
    add_tflite(model, {"int8.tflite": b"int8 model"})
    serving = f"{gcs_bucket.uri}/serving"
    push_model_version(model, serving, clock=Clock(1000))
    for state in gcs_bucket.history:
        for files in versions_with_saved_model(gcs_bucket, state).values():
            assert files["tflite/int8.tflite"] == b"int8 model"
    again = push_model_version(model, serving, clock=Clock(2000))
    assert not again.newly_pushed
