"""The data cache: a dataset decoded and preprocessed once per machine, mapped by every trial.

The templates here read ``.npz`` datasets and count each decode in a file beside the dataset
(``<path>.loads``), which is how the tests see a build across processes. Most tests call
:class:`DataCache` as TorchModel's data loader would; one trains through it, and the last runs
a real job of four concurrent trials in worker processes.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sqlalchemy import select
from worker_world import Platform, driving

from baobab.model import CategoricalKnob, FixedKnob, IntegerKnob, Task, TorchModel, TrialContext, trial_context
from baobab.store import (
    Event,
    EventKind,
    JobStatus,
    LocalEventChannel,
    SubJob,
    TrainJob,
    Trial,
    TrialState,
    add_train_job,
    session_scope,
)
from baobab.testing import wait_until
from baobab.worker import DataCache

ROWS = 64
FEATURES = 4
TEMPLATE = "0123456789abcdef:Counted"


class Counted(TorchModel):
    """Reads ``x`` and ``y`` of an npz file, noting each read in ``<file>.loads``; the default preprocess."""

    @staticmethod
    def get_knob_config():
        return {
            "width": IntegerKnob(2, 16),
            "scale": CategoricalKnob([1.0, 2.0]),
            "epochs": FixedKnob(2),
            "batch_size": FixedKnob(16),
        }

    def build_module(self, downscale):
        width = self.knobs["width"]
        return torch.nn.Sequential(
            torch.nn.Linear(self.input_shape[0], width), torch.nn.ReLU(), torch.nn.Linear(width, self.output_size)
        )

    def load_data(self, dataset_path):
        with open(f"{dataset_path}.loads", "a") as f:
            f.write("load\n")
        with np.load(dataset_path) as data:
            return data["x"], data["y"]

    def fit_module(self, module, inputs, targets):
        self.fit_inputs = inputs


class Scaled(Counted):
    """Its preprocess reads the ``scale`` knob."""

    def preprocess(self, inputs):
        return torch.from_numpy(inputs * np.float32(self.knobs["scale"]))


class Labelled(Counted):
    """As TorchMlp does: the first decode (the training set's) sets the class names, later ones read them."""

    def __init__(self, **knobs):
        super().__init__(**knobs)
        self.classes = None

    def load_data(self, dataset_path):
        inputs, _ = super().load_data(dataset_path)
        with np.load(dataset_path) as data:
            names = data["names"].tolist()
        if self.classes is None:
            self.classes = sorted(set(names))
        return inputs, np.array([self.classes.index(name) for name in names])


def knobs(**overrides: Any) -> dict[str, Any]:
    return {"width": 4, "scale": 1.0, "epochs": 2, "batch_size": 16, **overrides}


def dataset(folder: Path, name: str, *, rows: int = ROWS, features: int = FEATURES, seed: int = 0) -> tuple[str, str]:
    """An npz dataset (``x`` float32, ``y`` and class ``names`` from the first feature's sign): path and checksum."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, features)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    path = folder / f"{name}.npz"
    np.savez(path, x=x, y=y, names=np.array(["yes" if v else "no" for v in y]))
    return str(path), hashlib.sha256(path.read_bytes()).hexdigest()


def loads(path: str) -> int:
    """How many times a template decoded the dataset at ``path``."""
    counter = Path(f"{path}.loads")
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def decoding(model: TorchModel, path: str) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
    """What TorchModel hands its data loader: load_data, then preprocess, as NumPy arrays."""

    def load() -> tuple[np.ndarray, np.ndarray]:
        inputs, targets = model.load_data(path)
        return model.preprocess(inputs).numpy(), np.asarray(targets)

    return load


def fetch(cache: DataCache, model: TorchModel, path: str, checksum: str, log: list[str] | None = None) -> Any:
    """The dataset at ``path`` through ``cache``, as TorchModel's data loader asks for it; its log lines to ``log``."""
    lines = [] if log is None else log
    return cache.load(model, template=TEMPLATE, dataset=checksum, load=decoding(model, path), log=lines.append)


def _ask(root: str, path: str, checksum: str, building: Any, asking: Any, results: Any) -> None:
    """One process's request (run in a process of its own): the first one's decode waits until the second asks."""
    model = Counted(**knobs())
    decode = decoding(model, path)

    def slow_load() -> tuple[np.ndarray, np.ndarray]:
        building.set()
        asking.wait(60)  # set once the other process waits for this build's lock
        return decode()

    log: list[str] = []
    inputs, targets = DataCache(Path(root), budget_mb=16).load(
        model, template=TEMPLATE, dataset=checksum, load=slow_load, log=log.append
    )
    results.put((np.array(inputs), np.array(targets), log))


def waits_for_a_file_lock(pid: int) -> bool:
    """Whether process ``pid`` is blocked in ``flock``: the kernel lists each waiter in /proc/locks, marked "->"."""
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if fields[1:3] == ["->", "FLOCK"] and int(fields[5]) == pid:
            return True
    return False


def test_two_processes_asking_for_one_entry_build_it_once(tmp_path: Path) -> None:
    path, checksum = dataset(tmp_path, "train")
    context = multiprocessing.get_context("spawn")
    building, asking, results = context.Event(), context.Event(), context.Queue()
    args = (str(tmp_path / "cache"), path, checksum, building, asking, results)
    first = context.Process(target=_ask, args=args)
    first.start()
    assert building.wait(60), "the first process never started decoding"
    second = context.Process(target=_ask, args=args)
    second.start()
    try:  # the only lock it can wait for is the one the first process holds while it builds
        wait_until(
            lambda: waits_for_a_file_lock(second.pid), timeout=60, what="the second process to wait for the build"
        )
    finally:
        asking.set()
    answers = [results.get(timeout=60) for _ in range(2)]
    for process in (first, second):
        process.join(30)
        assert process.exitcode == 0

    assert loads(path) == 1
    with np.load(path) as data:
        for inputs, targets, _ in answers:
            np.testing.assert_array_equal(inputs, data["x"])
            np.testing.assert_array_equal(targets, data["y"])
    logs = sorted(line for _, _, log in answers for line in log)
    assert "decoded and preprocessed here" in logs[0] and "shared with the other trials on this machine" in logs[0]
    assert "mapped from this machine's data cache" in logs[1]


def test_a_trial_through_the_cache_trains_on_the_mapped_file_as_it_would_on_its_own_decode(tmp_path: Path) -> None:
    path, checksum = dataset(tmp_path, "train")
    cache = DataCache(tmp_path / "cache", budget_mb=16)

    def trial(shared: bool) -> tuple[Counted, float]:
        model = Counted(**knobs())
        context = TrialContext()
        if shared:
            context.data_loader = cache.loader(model, template=TEMPLATE, datasets={path: checksum}, log=context.log)
        with trial_context(context):
            model.train(path, seed=7)
            return model, model.evaluate(path)

    alone, alone_score = trial(shared=False)
    for _ in range(2):  # the first trial builds the entry, the second maps it
        shared, shared_score = trial(shared=True)
        assert shared_score == alone_score
        for name, value in alone.dump_parameters().items():
            np.testing.assert_array_equal(shared.dump_parameters()[name], value)
    assert loads(path) == 2 + 1  # alone: to train and to evaluate; through the cache: once for both trials

    # The tensor the trial trained on lies in the mapped file: no process copy was made.
    (entry,) = cache.entries()
    address = shared.fit_inputs.data_ptr()
    mapped = [line.split() for line in Path("/proc/self/maps").read_text().splitlines()]
    files = {
        fields[-1] for fields in mapped if len(fields) == 6 and int(fields[0].split("-")[0], 16) <= address
        and address < int(fields[0].split("-")[1], 16)
    }  # fmt: skip
    assert files == {str(cache.root / "entries" / entry.key / "inputs.npy")}


def test_a_preprocess_that_reads_a_knob_gets_an_entry_per_value_and_one_that_reads_none_one_in_all(
    tmp_path: Path,
) -> None:
    path, checksum = dataset(tmp_path, "train")
    with np.load(path) as data:
        raw = data["x"]
    points = [(1.0, 4), (2.0, 4), (1.0, 8), (2.0, 16)]

    scaled = DataCache(tmp_path / "scaled", budget_mb=16)
    for scale, width in points:
        inputs, _ = fetch(scaled, Scaled(**knobs(scale=scale, width=width)), path, checksum)
        np.testing.assert_array_equal(inputs, raw * np.float32(scale))
    assert loads(path) == 2
    assert len(scaled.entries()) == 2

    plain = DataCache(tmp_path / "plain", budget_mb=16)
    for scale, width in points:
        inputs, _ = fetch(plain, Counted(**knobs(scale=scale, width=width)), path, checksum)
        np.testing.assert_array_equal(inputs, raw)
    assert loads(path) == 2 + 1
    assert len(plain.entries()) == 1


def test_eviction_keeps_the_entries_within_the_budget_least_recently_mapped_first(tmp_path: Path) -> None:
    cache = DataCache(tmp_path / "cache", budget_mb=1)
    # 8,000 x 8 float32 inputs and int64 targets: 320 KB an entry, three fit in 1 MiB and four do not.
    sets = {name: dataset(tmp_path, name, rows=8000, features=8, seed=i) for i, name in enumerate("abcd")}
    mapped = {}
    for name in ("a", "b", "c", "a", "d"):
        mapped[name] = fetch(cache, Counted(**knobs()), *sets[name])[0]
        assert sum(entry.size for entry in cache.entries()) <= cache.budget_bytes

    assert len(cache.entries()) == 3
    # a was mapped again after b, so b went; the arrays of b still read right (an unlinked mapping stays valid).
    with np.load(sets["b"][0]) as data:
        np.testing.assert_array_equal(mapped["b"], data["x"])
    fetch(cache, Counted(**knobs()), *sets["a"])
    assert loads(sets["a"][0]) == 1
    fetch(cache, Counted(**knobs()), *sets["b"])
    assert loads(sets["b"][0]) == 2


def test_an_entry_larger_than_the_whole_budget_is_not_kept(tmp_path: Path) -> None:
    cache = DataCache(tmp_path / "cache", budget_mb=1)
    path, checksum = dataset(tmp_path, "big", rows=40_000, features=8)  # 1.3 MB of inputs
    logs: list[str] = []
    for _ in range(2):
        inputs, _ = fetch(cache, Counted(**knobs()), path, checksum, logs)
        with np.load(path) as data:
            np.testing.assert_array_equal(inputs, data["x"])
    assert loads(path) == 2
    assert cache.entries() == []
    refusal = r"not shared: \d+ MiB is more than the whole cache may hold \(BAOBAB_DATA_CACHE_MB=1\)$"
    assert re.search(r"decoded and preprocessed here in [\d.]+ s CPU; " + refusal, logs[0]), logs[0]
    assert re.search(r": decoded here; " + refusal, logs[1]), logs[1]  # told by the marker: no wait for a build


def test_what_the_loading_sets_on_the_model_comes_back_and_what_it_reads_keys_the_entry(tmp_path: Path) -> None:
    cache = DataCache(tmp_path / "cache", budget_mb=16)
    train, train_sum = dataset(tmp_path, "train", seed=0)
    val, val_sum = dataset(tmp_path, "val", seed=1)

    first = Labelled(**knobs())
    fetch(cache, first, train, train_sum)
    second = Labelled(**knobs())
    _, targets = fetch(cache, second, train, train_sum)
    assert loads(train) == 1
    assert second.classes == first.classes == ["no", "yes"]  # set again from the entry, not by a decode

    # The validation set is decoded with the training set's classes: they are part of its key.
    _, in_order = fetch(cache, second, val, val_sum)
    reversed_classes = Labelled(**knobs())
    reversed_classes.classes = ["yes", "no"]
    _, reversed_targets = fetch(cache, reversed_classes, val, val_sum)
    assert loads(val) == 2
    np.testing.assert_array_equal(reversed_targets, 1 - in_order)
    fetch(cache, Labelled(**knobs()), train, train_sum)
    fetch(cache, second, val, val_sum)
    assert (loads(train), loads(val)) == (1, 2)


def test_a_value_the_loading_reads_that_is_not_json_leaves_each_trial_to_decode(tmp_path: Path) -> None:
    cache = DataCache(tmp_path / "cache", budget_mb=16)
    path, checksum = dataset(tmp_path, "train")
    logs: list[str] = []
    for _ in range(2):
        model = Labelled(**knobs())
        model.classes = ("no", "yes")  # a tuple: JSON would give back a list
        fetch(cache, model, path, checksum, logs)
    assert loads(path) == 2
    assert cache.entries() == []
    assert all(line.endswith("not shared: its loading reads a value that is not JSON") for line in logs)


def test_a_job_of_four_concurrent_trials_decodes_each_dataset_once(platform: Platform) -> None:
    events = LocalEventChannel()
    with driving(platform, events, workers=4):
        template_id = platform.template("shared_data.py")
        with session_scope(platform.engine) as session:
            job = add_train_job(
                session,
                owner_id=platform.owner_id,
                app=f"shared-{uuid.uuid4().hex[:8]}",
                app_version=1,
                task=Task.TABULAR_CLASSIFICATION,
                train_dataset_id=platform.datasets[0],
                val_dataset_id=platform.datasets[1],
                budget={"MODEL_TRIAL_COUNT": 4, "GPU_COUNT": 0},
                # fusion off: under "auto" the first trial's measurement would decode for it, in its own context
                train_args={"signal_dir": str(platform.signal_dir), "siblings": 4},
                target="y",
                options={"fusion": "off"},
                seed=1,
                sub_jobs=[(template_id, "random")],
            )
            job_id = job.id
        events.publish(Event(EventKind.JOB_CREATED, job_id))
        wait_until(lambda: _job(platform, job_id).status.is_finished(), timeout=180, what="the job to finish")

    assert _job(platform, job_id).status is JobStatus.COMPLETED
    with session_scope(platform.engine) as session:
        query = select(Trial).join(SubJob, Trial.sub_job_id == SubJob.id).where(SubJob.train_job_id == job_id)
        trials = list(session.scalars(query))
    assert [t.status for t in trials] == [TrialState.COMPLETED] * 4, [(t.status, t.error) for t in trials]
    assert len(list(platform.signal_dir.glob("training-*"))) == 4  # four processes, all training at once
    decoded = (platform.signal_dir / "loads").read_text().splitlines()
    assert len(decoded) == len(set(decoded)) == 2  # the training and the validation set, each once
    lines = [line for t in trials for line in platform.logs(t.id) if line.startswith("dataset ")]
    assert sum("decoded and preprocessed here" in line for line in lines) == 2  # the training and validation sets
    assert sum("mapped from this machine's data cache" in line for line in lines) == 6


def _job(platform: Platform, job_id: int) -> TrainJob:
    with session_scope(platform.engine) as session:
        return session.get_one(TrainJob, job_id)
