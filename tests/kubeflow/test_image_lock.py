"""The TPU image's unknowable pins: trusted on first use, recorded in one lock, checked after."""

from __future__ import annotations

import pytest

from tpu_pipeline.kubeflow import image_lock, tpu_image
from tpu_pipeline.kubeflow.image_lock import UnresolvableError

BASE, LIBTPU = "a" * 64, "b" * 64


def _registries(monkeypatch, base: str | None, libtpu: str | None) -> None:
    """What the registries answer now (None: not reachable from here)."""

    def answer(value):
        def resolve(source: str) -> str:
            if value is None:
                raise UnresolvableError("no network")
            return value

        return resolve

    monkeypatch.setattr(tpu_image, "image_digest", answer(base))
    monkeypatch.setattr(tpu_image, "file_sha256", answer(libtpu))


def _build_args(base: str, libtpu: str) -> str:
    return (
        f"--build-arg BASE_IMAGE={tpu_image.TPU_POD_BASE_IMAGE}@sha256:{base} "
        f"--build-arg LIBTPU_SHA256={libtpu}"
    )


def test_the_first_build_that_reaches_the_registries_writes_the_lock(tmp_path, monkeypatch, capsys):
    lock = tmp_path / "tpu-image.lock"
    _registries(monkeypatch, BASE, LIBTPU)

    assert tpu_image.main(lock) == 0
    out, err = capsys.readouterr()
    assert (out, err) == (_build_args(BASE, LIBTPU) + "\n", "")
    assert image_lock.read_lock(lock) == {
        tpu_image.TPU_POD_BASE_TAG: BASE,
        tpu_image.LIBTPU_URL: LIBTPU,
    }
    assert f"{tpu_image.LIBTPU_URL} sha256:{LIBTPU}\n" in lock.read_text()


def test_later_builds_verify_the_lock_and_leave_it_as_it_was(tmp_path, monkeypatch, capsys):
    lock = tmp_path / "tpu-image.lock"
    _registries(monkeypatch, BASE, LIBTPU)
    assert tpu_image.main(lock) == 0
    written = lock.read_text()
    capsys.readouterr()

    assert tpu_image.main(lock) == 0
    assert capsys.readouterr().out == _build_args(BASE, LIBTPU) + "\n"
    assert lock.read_text() == written


def test_a_source_that_changed_since_it_was_recorded_is_refused_in_one_line(
    tmp_path, monkeypatch, capsys
):
    lock = tmp_path / "tpu-image.lock"
    _registries(monkeypatch, BASE, LIBTPU)
    assert tpu_image.main(lock) == 0
    written = lock.read_text()
    capsys.readouterr()
    _registries(monkeypatch, BASE, "c" * 64)  # libtpu.so's bytes changed at the same URL

    assert tpu_image.main(lock) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"kubeflow/tpu_image: {tpu_image.LIBTPU_URL}: now sha256:{'c' * 64}, but {lock} "
        f"recorded sha256:{LIBTPU} on first use; find out why it changed before trusting it "
        "(to accept it, delete its line and build again)"
    ]
    assert lock.read_text() == written


def test_without_network_a_recorded_lock_builds_and_says_it_was_not_checked(
    tmp_path, monkeypatch, capsys
):
    lock = tmp_path / "tpu-image.lock"
    _registries(monkeypatch, BASE, LIBTPU)
    assert tpu_image.main(lock) == 0
    capsys.readouterr()
    _registries(monkeypatch, None, LIBTPU)

    assert tpu_image.main(lock) == 0
    out, err = capsys.readouterr()
    assert out == _build_args(BASE, LIBTPU) + "\n"
    assert err.splitlines() == [
        f"kubeflow/tpu_image: warning: {tpu_image.TPU_POD_BASE_TAG}: not checked against its "
        "source (no network); building with the digest tpu-image.lock recorded"
    ]


def test_without_network_and_no_lock_the_build_stops_in_one_line(tmp_path, monkeypatch, capsys):
    lock = tmp_path / "tpu-image.lock"
    _registries(monkeypatch, None, None)

    assert tpu_image.main(lock) == 1
    out, err = capsys.readouterr()
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith(f"kubeflow/tpu_image: {tpu_image.TPU_POD_BASE_TAG}: cannot be resolved")
    assert not lock.exists()


def test_a_damaged_lock_line_is_named(tmp_path):
    lock = tmp_path / "tpu-image.lock"
    lock.write_text("# header\nsomething sha256:short\n")
    with pytest.raises(image_lock.LockError, match=r"tpu-image.lock:2: expected"):
        image_lock.read_lock(lock)
