"""Artifacts: datasets, templates and parameters under one fsspec URL.

An :class:`ArtifactStore` maps keys such as ``datasets/<id>/train.zip``,
``templates/<sha256>.py`` or ``params/<trial-id>.safetensors`` onto a local folder
(embedded mode) or any filesystem fsspec reaches (a shared volume, object storage).

Contract, for every backend:

- Keys are relative POSIX paths of parts made of letters, digits, ``.``, ``_`` and
  ``-``; a part may not start with ``.`` (those names are reserved for temporary files,
  and this also rules out ``.`` and ``..``). A bad key raises :class:`ArtifactError`
  naming the key and the rule, before anything is touched.
- Writes are atomic: the data goes to a temporary name next to the key and is moved
  onto the key only once complete, so a reader sees the old artifact or the new one,
  never half a file; a write that fails leaves nothing behind. Two writers of one key:
  the last move wins.
- A missing key raises :class:`ArtifactNotFoundError` (an :class:`ArtifactError` and a
  ``FileNotFoundError``) naming the key; :meth:`ArtifactStore.delete` of a missing key
  is not an error, so a restarted clean-up can run again.
- :meth:`ArtifactStore.files` lists the artifacts under a folder key and
  :meth:`ArtifactStore.delete_folder` removes them: the artifacts that come in many
  pieces (an inference job's request logs) are kept as a folder of them.
- The store keeps no state besides its fsspec filesystem, so one instance can be
  shared between threads.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import shutil
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, BinaryIO

import fsspec
from fsspec.implementations.local import LocalFileSystem

from baobab.exceptions import ArtifactError, ArtifactNotFoundError

__all__ = ["ArtifactError", "ArtifactNotFoundError", "ArtifactStore", "params_key", "validate_key"]

_CHUNK = 1 << 20
_PART = re.compile(r"[A-Za-z0-9_.-]+")
_TEMP_PREFIX = ".tmp-"


def params_key(trial_id: int) -> str:
    """The artifact key of a trial's parameters."""
    return f"params/trial-{trial_id}.safetensors"


def validate_key(key: str) -> str:
    """Returns ``key`` if it is a valid artifact key.

    Raises:
        ArtifactError: naming the key and the rule it breaks.
    """
    if not isinstance(key, str):
        raise TypeError(f"artifact keys are str, got {type(key).__name__}")
    if not key:
        raise ArtifactError("keys may not be empty", key=key)
    if "\\" in key:
        raise ArtifactError("keys use '/' and may not contain backslashes", key=key)
    if key.startswith("/"):
        raise ArtifactError("keys are relative and may not start with '/'", key=key)
    for part in key.split("/"):
        if not part:
            raise ArtifactError("keys may not have empty parts ('//' or a trailing '/')", key=key)
        if part in (".", ".."):
            raise ArtifactError(f"keys may not have '.' or '..' parts, got {part!r}", key=key)
        if part.startswith("."):
            raise ArtifactError(f"parts may not start with '.' (reserved for temporary files), got {part!r}", key=key)
        if not _PART.fullmatch(part):
            raise ArtifactError(f"parts may hold only letters, digits, '.', '_' and '-', got {part!r}", key=key)
    return key


class ArtifactStore:
    """Artifacts under one local folder or fsspec URL (``memory://``, ``s3://bucket/prefix``, ...).

    Args:
        url: A local folder (``~`` is expanded; created if missing) or an fsspec URL.
    """

    def __init__(self, url: str | os.PathLike[str]) -> None:
        self.url = os.fspath(url)
        self.fs, root = fsspec.core.url_to_fs(self.url)
        self._root = root.rstrip("/")
        if self.is_local:
            self.fs.makedirs(self._root, exist_ok=True)

    def __repr__(self) -> str:
        return f"ArtifactStore({self.url!r})"

    @property
    def is_local(self) -> bool:
        """Whether artifacts are files on this machine, readable through :meth:`local_path`."""
        return isinstance(self.fs, LocalFileSystem)

    # -- writing -------------------------------------------------------------------------

    @contextmanager
    def writer(self, key: str) -> Iterator[BinaryIO]:
        """Opens ``key`` for writing; the artifact appears only when the block ends without error.

        Raises:
            ArtifactError: for a bad key, or a key that is a folder of other artifacts.
        """
        path = self._path(key)
        if self.fs.isdir(path):
            raise ArtifactError("is a folder of other artifacts; choose another key", key=key)
        parent, name = posixpath.split(path)
        temp = f"{parent}/{_TEMP_PREFIX}{uuid.uuid4().hex}-{name}"
        self.fs.makedirs(parent, exist_ok=True)
        try:
            with self.fs.open(temp, "wb") as f:
                yield f
            self.fs.mv(temp, path)
        except BaseException:
            if self.fs.exists(temp):
                self.fs.rm(temp)
            raise

    def put_bytes(self, key: str, data: bytes | bytearray | memoryview) -> str:
        """Stores ``data`` under ``key`` atomically and returns its SHA-256 (hex)."""
        with self.writer(key) as f:
            f.write(data)
        return hashlib.sha256(data).hexdigest()

    def put_stream(self, key: str, source: IO[bytes] | Iterable[bytes]) -> str:
        """Stores a binary file object or an iterable of chunks atomically, a chunk at a time.

        For uploads that should not sit in memory whole (``request.stream``). If reading
        ``source`` fails midway, nothing is stored and the error propagates.

        Returns:
            The SHA-256 (hex) of what was stored.
        """
        chunks = iter(lambda: source.read(_CHUNK), b"") if hasattr(source, "read") else source
        digest = hashlib.sha256()
        with self.writer(key) as f:
            for chunk in chunks:
                digest.update(chunk)
                f.write(chunk)
        return digest.hexdigest()

    def put_file(self, key: str, local_path: str | os.PathLike[str]) -> str:
        """Copies a local file to ``key`` atomically, streamed; returns its SHA-256 (hex).

        Raises:
            OSError: when ``local_path`` cannot be read (then nothing is stored).
        """
        with open(local_path, "rb") as source:
            return self.put_stream(key, source)

    # -- reading -------------------------------------------------------------------------

    def exists(self, key: str) -> bool:
        return self.fs.isfile(self._path(key))

    def get_bytes(self, key: str) -> bytes:
        """Returns the whole artifact; use :meth:`open` or :meth:`local_path` for large ones."""
        with self.open(key) as f:
            return f.read()

    def open(self, key: str, mode: str = "rb") -> IO[Any]:
        """Opens an artifact for reading (``"rb"``, or ``"r"`` for UTF-8 text).

        Writing goes through :meth:`writer` or the ``put_*`` methods, which are atomic.

        Raises:
            ArtifactNotFoundError: when nothing is stored under ``key``.
        """
        if mode not in ("rb", "r"):
            raise ValueError(f"open() reads artifacts (mode 'rb' or 'r'), got mode {mode!r}; write with writer(key)")
        path = self._path(key)
        try:
            return self.fs.open(path, mode, **({"encoding": "utf-8"} if mode == "r" else {}))
        except (FileNotFoundError, IsADirectoryError):
            raise self._not_found(key) from None

    def sha256_of(self, key: str) -> str:
        """Returns the SHA-256 (hex) of an artifact, read in chunks."""
        digest = hashlib.sha256()
        with self.open(key) as f:
            for chunk in iter(lambda: f.read(_CHUNK), b""):
                digest.update(chunk)
        return digest.hexdigest()

    def local_path(self, key: str) -> Path:
        """Returns the file of an artifact on a local store, for readers that want a path.

        Raises:
            ArtifactError: when the store is not local (use :meth:`fetch_to`).
            ArtifactNotFoundError: when nothing is stored under ``key``.
        """
        if not self.is_local:
            raise ArtifactError(f"{self.url} is not a local folder; use fetch_to(key, local_dir)", key=key)
        return Path(self._existing(key))

    def fetch_to(self, key: str, local_dir: str | os.PathLike[str]) -> Path:
        """Returns a local file holding the artifact, downloading it at most once per version.

        On a local store this is the artifact's own file (nothing is copied). Otherwise
        the file is ``local_dir/<key's folder>/<version>/<key's name>``, where the version
        is the filesystem's checksum of the stored object (it changes when the object is
        rewritten), so a worker downloads each dataset or template once and a rewritten
        key is fetched again. Old versions are not cleaned up.

        Raises:
            ArtifactNotFoundError: when nothing is stored under ``key``.
        """
        if self.is_local:
            return self.local_path(key)
        path = self._existing(key)
        version = hashlib.sha256(str(self.fs.checksum(path)).encode()).hexdigest()[:16]
        folder, name = posixpath.split(key)
        target = Path(local_dir, *folder.split("/") if folder else (), version, name)
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            temp = target.with_name(f"{_TEMP_PREFIX}{uuid.uuid4().hex}-{name}")
            try:
                with self.fs.open(path, "rb") as source, open(temp, "wb") as f:
                    shutil.copyfileobj(source, f, _CHUNK)
                os.replace(temp, target)
            finally:
                temp.unlink(missing_ok=True)
        return target

    def files(self, folder: str) -> dict[str, int]:
        """The artifacts under the folder key ``folder``, at any depth: key → size in bytes, sorted by key.

        A folder that does not exist holds nothing; temporary files of writes under way are not listed.

        Raises:
            ArtifactError: for a bad key.
        """
        root = self._path(folder)
        found = self.fs.find(root, detail=True) if self.fs.isdir(root) else {}
        listed: dict[str, int] = {}
        for path, info in found.items():
            key = f"{folder}/{path.removeprefix(root + '/')}"
            if not any(part.startswith(".") for part in key.split("/")):
                listed[key] = int(info.get("size") or 0)
        return dict(sorted(listed.items()))

    # -- deleting ------------------------------------------------------------------------

    def delete(self, key: str) -> bool:
        """Removes an artifact; returns False when there was none (which is not an error)."""
        path = self._path(key)
        if not self.fs.isfile(path):
            return False
        try:
            self.fs.rm(path)
        except FileNotFoundError:  # removed by someone else meanwhile
            return False
        self._prune(key)
        return True

    def delete_folder(self, folder: str) -> bool:
        """Removes every artifact under the folder key ``folder``; False when there was no such folder.

        Temporary files of writes cut short (a killed process) go too. Like :meth:`delete`, a
        missing folder is not an error, so a restarted clean-up can run again.
        """
        root = self._path(folder)
        if not self.fs.isdir(root):
            return False
        try:
            self.fs.rm(root, recursive=True)
        except FileNotFoundError:  # removed by someone else meanwhile
            pass
        self._prune(folder)
        return True

    def _prune(self, key: str) -> None:
        """Remove the folders that held only ``key`` (a dataset's ``datasets/<id>/``) on a local disk.

        Top-level folders (``datasets``, ``params``) stay: a writer may be about to put a file
        in one it found. Object stores have no empty folders to leave behind.
        """
        if not self.is_local:
            return
        parts = key.split("/")[:-1]
        while len(parts) > 1:
            try:
                os.rmdir(self._path("/".join(parts)))
            except OSError:  # not empty, or gone
                return
            parts.pop()

    # -- keys ----------------------------------------------------------------------------

    def _path(self, key: str) -> str:
        return f"{self._root}/{validate_key(key)}"

    def _existing(self, key: str) -> str:
        path = self._path(key)
        if not self.fs.isfile(path):
            raise self._not_found(key)
        return path

    def _not_found(self, key: str) -> ArtifactNotFoundError:
        return ArtifactNotFoundError(f"no such artifact in {self.url}", key=key)
