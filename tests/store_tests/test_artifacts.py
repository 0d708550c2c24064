"""Artifact store: the same contract on a local folder and on fsspec's in-memory filesystem."""

from __future__ import annotations

import hashlib
import io
import re
import tracemalloc
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from baobab.store._artifacts import ArtifactError, ArtifactNotFoundError, ArtifactStore


@pytest.fixture(params=["local", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ArtifactStore]:
    if request.param == "local":
        yield ArtifactStore(tmp_path / "artifacts")
        return
    memory = ArtifactStore(f"memory://baobab-test-{uuid.uuid4().hex}")  # one process-wide store: a fresh root
    yield memory
    if memory.fs.exists(memory.url):
        memory.fs.rm(memory.url, recursive=True)


def stored_files(store: ArtifactStore) -> list[str]:
    """Every file under the store's root, temporary ones included, relative to the root."""
    root = store.fs._strip_protocol(store.url).rstrip("/")
    return sorted(path.removeprefix(root + "/") for path in store.fs.find(root))


def test_round_trip_and_sha256(store: ArtifactStore) -> None:
    data = b"PK\x03\x04 not really a zip"
    digest = store.put_bytes("datasets/7/train.zip", data)
    assert digest == hashlib.sha256(data).hexdigest() == store.sha256_of("datasets/7/train.zip")
    assert store.get_bytes("datasets/7/train.zip") == data
    assert store.exists("datasets/7/train.zip")
    assert not store.exists("datasets/7")  # a folder is not an artifact
    with store.open("datasets/7/train.zip") as f:
        assert f.read(2) == b"PK"

    store.put_bytes("templates/abc.py", "print('é')\n".encode())
    with store.open("templates/abc.py", "r") as f:
        assert f.read() == "print('é')\n"
    assert stored_files(store) == ["datasets/7/train.zip", "templates/abc.py"]  # no temporary left behind


def test_overwrite_replaces_the_whole_artifact(store: ArtifactStore) -> None:
    store.put_bytes("params/t1.safetensors", b"x" * 1000)
    store.put_bytes("params/t1.safetensors", b"short")
    assert store.get_bytes("params/t1.safetensors") == b"short"
    assert stored_files(store) == ["params/t1.safetensors"]


def failing_chunks() -> Iterator[bytes]:
    yield b"first half, "
    raise ConnectionResetError("client went away")


class FailingFile(io.RawIOBase):
    """A readable file whose second read fails, like an upload cut off midway."""

    def __init__(self) -> None:
        self.reads = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        self.reads += 1
        if self.reads > 1:
            raise OSError("disk read error")
        return b"a" * 100


@pytest.mark.parametrize(("source", "error"), [(failing_chunks, ConnectionResetError), (FailingFile, OSError)])
def test_failed_write_leaves_old_artifact_and_no_partial_file(store: ArtifactStore, source, error) -> None:
    store.put_bytes("datasets/1/train.zip", b"old")
    with pytest.raises(error):
        store.put_stream("datasets/1/train.zip", source())
    with pytest.raises(error):
        store.put_stream("datasets/2/train.zip", source())
    assert store.get_bytes("datasets/1/train.zip") == b"old"
    assert not store.exists("datasets/2/train.zip")
    assert stored_files(store) == ["datasets/1/train.zip"]


def test_failure_inside_writer_stores_nothing(store: ArtifactStore) -> None:
    with pytest.raises(RuntimeError, match="boom"), store.writer("params/t2.safetensors") as f:
        f.write(b"partial")
        raise RuntimeError("boom")
    assert stored_files(store) == []


def test_put_file_streams_a_large_file(store: ArtifactStore, tmp_path: Path) -> None:
    size = 8 << 20
    local = tmp_path / "big.bin"
    local.write_bytes(bytes(range(256)) * (size // 256))
    expected = hashlib.sha256(local.read_bytes()).hexdigest()

    tracemalloc.start()
    try:
        digest = store.put_file("datasets/9/train.zip", local)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert digest == expected == store.sha256_of("datasets/9/train.zip")
    if store.is_local:  # the in-memory filesystem holds the artifact itself in memory
        assert peak < size // 2, f"put_file allocated {peak} bytes for an {size}-byte file"


def test_put_file_of_a_vanished_file_stores_nothing(store: ArtifactStore, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        store.put_file("datasets/3/train.zip", tmp_path / "gone.zip")
    assert stored_files(store) == []


@pytest.mark.parametrize(
    ("key", "rule"),
    [
        ("", "keys may not be empty"),
        ("/etc/passwd", "keys are relative and may not start with '/'"),
        ("datasets/../../etc/passwd", "keys may not have '.' or '..' parts, got '..'"),
        ("datasets/./x", "keys may not have '.' or '..' parts, got '.'"),
        ("datasets\\1\\train.zip", "keys use '/' and may not contain backslashes"),
        ("datasets//train.zip", "keys may not have empty parts"),
        ("datasets/1/", "keys may not have empty parts"),
        ("datasets/.tmp-x", "parts may not start with '.' (reserved for temporary files), got '.tmp-x'"),
        ("s3://bucket/x", "parts may hold only letters, digits, '.', '_' and '-', got 's3:'"),
        ("datasets/my file.zip", "parts may hold only letters, digits, '.', '_' and '-', got 'my file.zip'"),
    ],
)
def test_bad_keys_are_refused_naming_key_and_rule(store: ArtifactStore, key: str, rule: str) -> None:
    for operation in (
        lambda: store.put_bytes(key, b"x"),
        lambda: store.get_bytes(key),
        lambda: store.exists(key),
        lambda: store.delete(key),
    ):
        with pytest.raises(ArtifactError, match="^" + re.escape(f"artifact {key!r}: {rule}")) as info:
            operation()
        assert info.value.key == key
        assert not isinstance(info.value, ArtifactNotFoundError)
    assert stored_files(store) == []


def test_missing_keys_raise_artifact_not_found(store: ArtifactStore, tmp_path: Path) -> None:
    store.put_bytes("datasets/1/train.zip", b"x")
    for operation in (
        lambda key: store.get_bytes(key),
        lambda key: store.open(key),
        lambda key: store.sha256_of(key),
        lambda key: store.fetch_to(key, tmp_path / "cache"),
    ):
        for key in ("datasets/1/valid.zip", "datasets/1"):  # nothing there; a folder
            with pytest.raises(ArtifactNotFoundError, match=f"artifact '{key}': no such artifact in ") as info:
                operation(key)
            assert info.value.key == key and isinstance(info.value, FileNotFoundError)


def test_delete_is_idempotent(store: ArtifactStore) -> None:
    store.put_bytes("params/t1.safetensors", b"x")
    assert store.delete("params/t1.safetensors") is True
    assert store.delete("params/t1.safetensors") is False
    assert not store.exists("params/t1.safetensors") and stored_files(store) == []


def test_write_onto_a_folder_is_refused(store: ArtifactStore) -> None:
    store.put_bytes("datasets/1/train.zip", b"x")
    with pytest.raises(ArtifactError, match=r"artifact 'datasets/1': is a folder of other artifacts"):
        store.put_bytes("datasets/1", b"y")


def test_open_refuses_write_modes(store: ArtifactStore) -> None:
    with pytest.raises(ValueError, match=r"open\(\) reads artifacts .* got mode 'wb'; write with writer\(key\)"):
        store.open("templates/a.py", "wb")


def test_local_path_and_fetch_to(store: ArtifactStore, tmp_path: Path) -> None:
    store.put_bytes("templates/abc.py", b"v1")
    cache = tmp_path / "cache"
    fetched = store.fetch_to("templates/abc.py", cache)
    assert fetched.read_bytes() == b"v1"
    if store.is_local:
        assert store.local_path("templates/abc.py") == fetched  # read in place, nothing copied
        assert not cache.exists()
        return

    with pytest.raises(ArtifactError, match=r"'templates/abc.py': memory://.* is not a local folder; use fetch_to"):
        store.local_path("templates/abc.py")
    assert fetched.is_relative_to(cache / "templates") and fetched.name == "abc.py"
    assert store.fetch_to("templates/abc.py", cache) == fetched  # cached: same version, same file
    fetched.write_bytes(b"tampered")  # proves the second fetch did not download again
    assert store.fetch_to("templates/abc.py", cache).read_bytes() == b"tampered"

    store.put_bytes("templates/abc.py", b"v2")  # a rewritten key is a new version
    refetched = store.fetch_to("templates/abc.py", cache)
    assert refetched != fetched and refetched.read_bytes() == b"v2"
    assert [p.name for p in cache.rglob("*") if p.is_file()] == ["abc.py", "abc.py"]  # no temporary left


def test_local_store_creates_and_expands_its_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    store = ArtifactStore("~/deep/artifacts")
    assert (tmp_path / "deep" / "artifacts").is_dir() and store.is_local
    store.put_bytes("a/b.bin", b"z")
    assert (tmp_path / "deep" / "artifacts" / "a" / "b.bin").read_bytes() == b"z"


def test_files_lists_a_folder_at_any_depth_and_delete_folder_removes_it(store: ArtifactStore) -> None:
    assert store.files("logs/job-1") == {}  # nothing there yet
    assert store.delete_folder("logs/job-1") is False
    store.put_bytes("logs/job-1/2026-01-02/b.jsonl", b"22")
    store.put_bytes("logs/job-1/2026-01-02/a.jsonl", b"1")
    store.put_bytes("logs/job-1/top.jsonl", b"333")
    store.put_bytes("logs/job-10/a.jsonl", b"not job 1's")
    with store.writer("logs/job-1/2026-01-03/c.jsonl") as f:  # a write under way is not listed
        f.write(b"half")
        assert store.files("logs/job-1") == {
            "logs/job-1/2026-01-02/a.jsonl": 1,
            "logs/job-1/2026-01-02/b.jsonl": 2,
            "logs/job-1/top.jsonl": 3,
        }
        with pytest.raises(ArtifactError, match="keys may not have '.' or '..' parts"):
            store.files("logs/..")
        assert store.delete_folder("logs/job-1/top.jsonl") is False  # a file is not a folder
        assert store.exists("logs/job-1/top.jsonl")
    assert list(store.files("logs/job-1")) == [
        "logs/job-1/2026-01-02/a.jsonl",
        "logs/job-1/2026-01-02/b.jsonl",
        "logs/job-1/2026-01-03/c.jsonl",
        "logs/job-1/top.jsonl",
    ]
    # A temporary file a killed writer left behind goes with its folder too.
    root = store.fs._strip_protocol(store.url).rstrip("/")
    store.fs.pipe(f"{root}/logs/job-1/2026-01-03/.tmp-left-behind", b"x")
    assert store.delete_folder("logs/job-1") is True
    assert store.files("logs/job-1") == {}
    assert stored_files(store) == ["logs/job-10/a.jsonl"]
    assert store.delete_folder("logs/job-1") is False  # again: nothing to do, no error
