"""Decoded, preprocessed datasets shared by the trials on one machine, as memory-mapped files.

A TorchModel trial starts by decoding its datasets (``load_data``) and running them through
``preprocess``; every trial process did it again and kept its own copy, so eight trials of
one job on one machine decoded the same file eight times and held eight copies of it.
:class:`DataCache` does it once per machine: the first trial that needs a dataset writes the
preprocessed inputs and the targets as ``.npy`` files under the worker's cache folder, and
every trial maps them. Their pages are the page cache's, shared by every process that maps
them. The mapping is copy-on-write: a template that writes into its inputs gets private copies
of the pages it writes, and neither the file nor another trial sees it (a read-only mapping
would kill such a process with SIGSEGV instead). Such a mapping counts against the worker's
``RLIMIT_DATA`` (``BAOBAB_TRIAL_MEMORY_MB``) like the private copy it replaces, though it takes
no memory of its own.

**The key.** ``load_data`` and ``preprocess`` must be deterministic functions of the dataset
and of what the template reads while they run: knob values, train args and the model's own
attributes (``TorchMlp`` reads its ``target`` train arg, and the training set's classes when
it decodes the validation set). A build records what it reads (the model's ``knobs`` and
``train_args`` become dicts that note the keys read, and its class a subclass that notes the
instance attributes read), and the names go to ``names/``, one file per template. An entry's
key is the SHA-256 of the dataset's checksum, the template's checksum and class, those names
with the values they had, and the versions of the libraries that decode and preprocess. So a
``preprocess`` that reads a knob gets an entry per value of it, and one that reads none one
entry for every trial of the template. A build that reads more than the names known (another
branch) adds to them; an entry is filed under every name its own build read, so the names
file only says where to look: an entry found is right for the model that finds it. The
attributes a build set (``TorchMlp``'s ``classes``) are kept with the entry as JSON and set
again on each model that maps it. A value read or set that is not JSON (a fitted scaler, a
tensor) leaves the dataset to be decoded in each trial, as it was before this cache. Library
versions other than those in :func:`_versions` are not part of the key: after upgrading a
library that a template's ``preprocess`` uses, delete the cache folder.

**Concurrency.** ``fcntl`` locks on files in ``locks/``: the first build of a template holds
that template's lock (the other processes wait to learn what it reads), and every later build
its entry's lock (the others wait, then map what it built). An entry is written under a
temporary name and renamed into place, so nobody maps half of one.

**Eviction.** After each new entry, the entries least recently mapped (the time is recorded on
their ``entry.json`` at each mapping) go until the rest fit in the budget. An entry being
built or opened is skipped; one that a live process maps may go: on Linux its pages stay valid
until the last process unmaps them, and its disk space is freed then. An entry larger than the
whole budget is not kept, and a marker in ``refused/`` tells the other processes to decode for
themselves instead of waiting for it.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import importlib.metadata
import json
import logging
import os
import platform
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from baobab.worker._data_reads import Name, key_values, order, recording, snapshot, state_set

__all__ = ["DataCache", "DataEntry", "DataLoader", "Load"]

logger = logging.getLogger("baobab.worker")

#: What TorchModel hands the loader: decodes and preprocesses a dataset, returns (inputs, targets).
Load = Callable[[], tuple[Any, Any]]
#: ``TrialContext.data_loader``: ``(dataset_path, load) -> (inputs, targets)``.
DataLoader = Callable[[str, Load], tuple[Any, Any]]

#: Raise when the layout or meaning of an entry changes: entries of another format are never found.
_FORMAT = 1
_MIB = 2**20
#: The libraries whose versions are part of every key: those that decode datasets and run TorchModel.
_LIBRARIES = ("baobab", "numpy", "pandas", "pillow", "torch")
#: Markers and building folders older than this are removed (their process died, or the budget may have grown).
_STALE_S = 3600.0


@dataclass(frozen=True)
class DataEntry:
    """An entry of a :class:`DataCache`: its key, its size on disk and when a process last mapped it."""

    key: str
    size: int
    used_ns: int


class DataCache:
    """Preprocessed datasets in ``root``, shared by the processes of one machine (see the module docstring).

    Processes and threads may share it: each call takes the file locks it needs.

    Args:
        root: a folder for this cache alone (a worker's ``<cache>/data``); made when missing.
        budget_mb: what its entries may take on disk together, in MiB (``BAOBAB_DATA_CACHE_MB``).

    Raises:
        ValueError: ``budget_mb`` is less than 1.
    """

    def __init__(self, root: Path, *, budget_mb: int) -> None:
        if budget_mb < 1:
            raise ValueError(f"budget_mb={budget_mb}: a data cache needs a budget of at least 1 MiB")
        self.root = root
        self.budget_bytes = budget_mb * _MIB

    def loader(
        self, model: Any, *, template: str, datasets: Mapping[str, str], log: Callable[[str], None]
    ) -> DataLoader:
        """A trial's ``TrialContext.data_loader``: the datasets at the paths of ``datasets`` through this cache.

        Args:
            model: the trial's model, whose reads are recorded and whose attributes are set on a hit.
            template: the template's checksum and class name, ``"<checksum>:<class>"``.
            datasets: local path → the dataset's checksum; other paths are loaded directly.
            log: the trial's log (whether a dataset was decoded here or mapped, and why it was not kept).
        """

        def load_dataset(path: str, load: Load) -> tuple[Any, Any]:
            checksum = datasets.get(path)
            if checksum is None:
                return load()
            return self.load(model, template=template, dataset=checksum, load=load, log=log)

        return load_dataset

    def load(
        self,
        model: Any,
        *,
        template: str,
        dataset: str,
        load: Load,
        log: Callable[[str], None] = lambda line: None,
    ) -> tuple[Any, Any]:
        """``load()``'s inputs and targets for ``model``, mapped from an entry; built by calling ``load`` when missing.

        Returns:
            Two NumPy arrays mapped from the cache (copy-on-write), or what ``load()``
            returned where the entry cannot be kept.
        """
        while True:
            names = self._names(template)
            if names is None:
                with _locked(self._lock_path("template-" + _digest(template))):
                    names = self._names(template)
                    if names is None:  # nobody knows yet what this template reads: find out, holding the others back
                        return self._build(model, template, dataset, load, None, log)
            values = key_values(snapshot(model, names), names)
            if values is None:
                log(f"dataset {dataset[:12]}: decoded here; not shared: its loading reads a value that is not JSON")
                return load()
            key = _entry_key(template, dataset, values)
            with _locked(self._lock_path(key)):
                found = self._open(key, model)
                if found is not None:
                    log(f"dataset {dataset[:12]}: mapped from this machine's data cache (entry {key[:12]})")
                    return found
                refused = self._refused(key)
                if refused is None and (self._names(template) or frozenset()) <= names:
                    return self._build(model, template, dataset, load, names, log)
            if refused is not None:
                log(f"dataset {dataset[:12]}: decoded here; not shared: {refused}")
                return load()
            # The build this process waited for read more than the names it looked under: look under all of them.

    # -- building ------------------------------------------------------------------------

    def _build(
        self,
        model: Any,
        template: str,
        dataset: str,
        load: Load,
        known: frozenset[Name] | None,
        log: Callable[[str], None],
    ) -> tuple[Any, Any]:
        """Call ``load`` recording what it reads, and keep what it gave unless it cannot be shared.

        ``known``: the names the caller looked under; None for a template's first build. The
        names are saved after the entry is published: a process that reads them then finds it.
        """
        before = snapshot(model)
        references = dict(vars(model))
        started = time.process_time()
        with recording(model) as reads:
            inputs, targets = load()
        seconds = time.process_time() - started
        names = (known or frozenset()) | reads
        values = key_values(before, names)
        state = state_set(references, before, model)
        key = None if values is None else _entry_key(template, dataset, values)
        reason = _unshareable(inputs, targets, values, state, self.budget_bytes)
        done = f"dataset {dataset[:12]}: decoded and preprocessed here in {seconds:.2f} s CPU"
        if reason is not None or key is None or state is None:
            if key is not None and reason is not None:
                self._refuse(key, reason)
            if names != known:
                self._save_names(template, names)
            log(f"{done}; not shared: {reason}")
            return inputs, targets
        try:
            self._publish(key, inputs, targets, state)
        except OSError as e:  # a full disk: the trial goes on with what it decoded
            logger.warning("cannot write data cache entry %s in %s: %s", key, self.root, e)
            log(f"{done}; not shared: cannot write the data cache: {e}")
            return inputs, targets
        if names != known:
            self._save_names(template, names)
        self._evict(keep=key)
        found = self._open(key, model, restore=False)
        if found is None:  # evicted at once by another process's build: a budget this small keeps little
            log(f"{done}; not shared: another trial's entry took its place in the cache")
            return inputs, targets
        log(f"{done}; shared with the other trials on this machine (entry {key[:12]})")
        return found  # the mapping: this process keeps no copy of its own once the arrays above are dropped

    def _publish(self, key: str, inputs: np.ndarray, targets: np.ndarray, state: dict[str, Any]) -> None:
        entries = self.root / "entries"
        building = entries / f".building-{uuid.uuid4().hex}"
        building.mkdir(parents=True)
        try:
            np.save(building / "inputs.npy", inputs, allow_pickle=False)
            np.save(building / "targets.npy", targets, allow_pickle=False)
            (building / "entry.json").write_text(json.dumps({"format": _FORMAT, "state": state}))
            with contextlib.suppress(OSError):  # filed meanwhile by a build that read the same: keep that one
                os.rename(building, entries / key)
        finally:
            shutil.rmtree(building, ignore_errors=True)

    # -- finding ---------------------------------------------------------------------------

    def _open(self, key: str, model: Any, *, restore: bool = True) -> tuple[np.ndarray, np.ndarray] | None:
        entry = self.root / "entries" / key
        try:
            meta = json.loads((entry / "entry.json").read_text())
            inputs = np.load(entry / "inputs.npy", mmap_mode="c", allow_pickle=False)
            targets = np.load(entry / "targets.npy", mmap_mode="c", allow_pickle=False)
            now = time.time_ns()  # given, not UTIME_NOW: the kernel's clock ticks too coarsely to order entries
            os.utime(entry / "entry.json", ns=(now, now))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            logger.warning("data cache entry %s cannot be read (%s); building it again", entry, e)
            _remove(entry)
            return None
        if restore:
            vars(model).update(meta["state"])
        return inputs, targets

    def _names(self, template: str) -> frozenset[Name] | None:
        """What builds of ``template`` read, as far as known; None before its first build."""
        try:
            data = json.loads(self._names_path(template).read_text())
        except FileNotFoundError:
            return None
        except ValueError:  # a torn write cannot happen (it is renamed into place); a damaged disk can
            return None
        return frozenset((str(attribute), None if key is None else str(key)) for attribute, key in data)

    def _save_names(self, template: str, names: frozenset[Name]) -> None:
        """Add ``names`` to what the template's file holds (under a lock of its own: the first build of a
        template calls this holding the template's lock)."""
        path = self._names_path(template)
        path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(self._lock_path("names-" + _digest(template))):
            merged = (self._names(template) or frozenset()) | names
            temp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
            temp.write_text(json.dumps(sorted(merged, key=order)))
            os.replace(temp, path)

    def _refuse(self, key: str, reason: str) -> None:
        path = self.root / "refused" / key
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{key}.{uuid.uuid4().hex}")
        temp.write_text(reason)
        os.replace(temp, path)

    def _refused(self, key: str) -> str | None:
        try:
            return (self.root / "refused" / key).read_text()
        except FileNotFoundError:
            return None

    def _names_path(self, template: str) -> Path:
        return self.root / "names" / f"{_digest(template)}.json"

    def _lock_path(self, name: str) -> Path:
        return self.root / "locks" / f"{name}.lock"

    # -- eviction --------------------------------------------------------------------------

    def entries(self) -> list[DataEntry]:
        """The entries kept now, the least recently mapped first."""
        entries = []
        for entry in _listing(self.root / "entries"):
            if entry.name.startswith("."):
                continue  # being built or removed
            try:
                used = (entry / "entry.json").stat().st_mtime_ns
                size = sum(f.stat().st_size for f in entry.iterdir())
            except FileNotFoundError:
                continue  # removed meanwhile
            entries.append(DataEntry(entry.name, size, used))
        return sorted(entries, key=lambda e: (e.used_ns, e.key))

    def _evict(self, *, keep: str) -> None:
        """Remove the least recently mapped entries (never ``keep``, nor one that is locked) until the rest fit."""
        with _locked(self._lock_path("evict")):
            entries = self.entries()
            total = sum(entry.size for entry in entries)
            for entry in entries:
                if total <= self.budget_bytes:
                    break
                if entry.key == keep:
                    continue
                lock = self._lock_path(entry.key)
                with _locked(lock, wait=False) as held:
                    if held:
                        _remove(self.root / "entries" / entry.key)
                        lock.unlink(missing_ok=True)  # at worst a process that opened it builds the entry again
                        total -= entry.size
            now = time.time()
            leftovers = [p for p in _listing(self.root / "entries") if p.name.startswith(".")]
            for path in leftovers + _listing(self.root / "refused"):
                with contextlib.suppress(FileNotFoundError):
                    if now - path.stat().st_mtime <= _STALE_S:
                        continue
                    if path.is_dir():
                        shutil.rmtree(path)  # a build whose process died
                    else:
                        path.unlink()  # a refusal the budget or the template may since have left behind


def _unshareable(
    inputs: Any, targets: Any, values: list[list[Any]] | None, state: dict[str, Any] | None, budget: int
) -> str | None:
    """Why a build cannot be kept; None when it can."""
    if values is None:
        return "its loading reads a value that is not JSON"
    if state is None:
        return "its loading sets or deletes a model attribute whose value is not JSON"
    arrays = (inputs, targets)
    if not all(isinstance(a, np.ndarray) and not a.dtype.hasobject for a in arrays):
        kinds = ", ".join(f"{type(a).__name__} of {getattr(a, 'dtype', '?')}" for a in arrays)
        return f"preprocess() and load_data() gave {kinds}, not NumPy arrays of numbers"
    size = inputs.nbytes + targets.nbytes
    if size > budget:
        return f"{size / _MIB:.0f} MiB is more than the whole cache may hold (BAOBAB_DATA_CACHE_MB={budget // _MIB})"
    return None


def _entry_key(template: str, dataset: str, values: list[list[Any]]) -> str:
    text = json.dumps(
        {"format": _FORMAT, "versions": _versions(), "template": template, "dataset": dataset, "reads": values},
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()


@functools.cache
def _versions() -> dict[str, str | None]:
    """Python's and the decoding libraries' versions, from their metadata: whether one is imported must not matter."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in _LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _listing(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except FileNotFoundError:
        return []


def _remove(entry: Path) -> None:
    """Take an entry out of sight at once (a rename), then delete it."""
    hidden = entry.with_name(f".removed-{uuid.uuid4().hex}")
    try:
        os.rename(entry, hidden)
    except FileNotFoundError:
        return
    shutil.rmtree(hidden, ignore_errors=True)


@contextlib.contextmanager
def _locked(path: Path, *, wait: bool = True) -> Iterator[bool]:
    """Hold an exclusive ``flock`` on ``path`` (made when missing) for the block; yields False when
    ``wait`` is False and another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
