"""Shared data loading: eight concurrent trials of one job on one machine, with the data cache on and off.

``baobab up --workers 8`` (SQLite, local worker processes) runs one train job of eight trials of
``examples/models/torch_mlp.py`` on Fashion-MNIST as a TABULAR dataset (784 pixel columns and a
``target``, built from Debian's ``dataset-fashion-mnist`` through
``baobab.store.build_fashion_mnist``), twice in the same run: with ``BAOBAB_DATA_CACHE_MB=4096``
(each dataset decoded and preprocessed once, every trial maps it) and with ``0`` (each trial
decodes its own, as before the cache). The template is TorchMlp itself, subclassed in the file
uploaded to time its hooks: ``load_data`` and ``preprocess`` log the CPU seconds of their process
while they run, and training is one epoch (the data loading is what is measured; eight trials
still train at once). Warm start and fusion are off: each trial loads and trains alone.

Measured, for the eight worker processes together (found by their command line, which names the
platform's home):

- resident memory, sampled every 0.2 s from ``/proc/<pid>/smaps_rollup`` while the job runs: the
  peak of the summed RSS (which counts a page shared by eight processes eight times), of the
  summed PSS (a shared page split between the processes that map it) and of the summed private
  memory (USS);
- CPU seconds in ``load_data`` and ``preprocess`` (the sum of what the template logged), and the
  CPU seconds of the worker processes from the job's creation to its end (``/proc/<pid>/stat``),
  which include importing torch, training, the reload check and what the cache itself costs.

    .venv/bin/python bench/shared_data.py                 # the full set (54,000 training rows): about 2 minutes
    .venv/bin/python bench/shared_data.py --limit 10000   # a quicker run
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from setup_record import RunSetup, setup_markdown

from baobab._contained import descendants_of
from baobab.sdk import Client
from baobab.store import build_fashion_mnist, read_image_files, write_tabular
from baobab.testing import LocalPlatform

HERE = Path(__file__).parent
RESULTS = HERE / "results"
TEMPLATE = HERE.parent / "examples" / "models" / "torch_mlp.py"
TRIALS = 8
EMAIL, PASSWORD = "bench@example.com", "bench-password"
#: Appended to torch_mlp.py in the uploaded file: TorchMlp, timed.
TIMING = '''

import time as _bench_time


class TimedMlp(TorchMlp):
    """TorchMlp for one epoch, logging the CPU seconds of its process in load_data and preprocess."""

    def epochs(self):
        return 1

    def load_data(self, dataset_path):
        started = _bench_time.process_time()
        try:
            return super().load_data(dataset_path)
        finally:
            self.context.log(f"bench load_data cpu_s={_bench_time.process_time() - started:.4f}")

    def preprocess(self, inputs):
        started = _bench_time.process_time()
        try:
            return super().preprocess(inputs)
        finally:
            self.context.log(f"bench preprocess cpu_s={_bench_time.process_time() - started:.4f}")
'''
_CPU_LINE = re.compile(r"^bench (load_data|preprocess) cpu_s=([0-9.]+)$")
_PAGE_KB = ("Rss", "Pss", "Private_Clean", "Private_Dirty")


@dataclass
class Run:
    cache: str
    wall_s: float = 0.0
    idle_rss_mb: float = 0.0
    peak_rss_mb: float = 0.0
    peak_pss_mb: float = 0.0
    peak_uss_mb: float = 0.0
    load_data_cpu_s: float = 0.0
    preprocess_cpu_s: float = 0.0
    worker_cpu_s: float = 0.0
    decodes: int = 0
    mapped: int = 0
    scores: list[float] = field(default_factory=list)


def build_datasets(folder: Path, limit: int | None) -> dict[str, Path]:
    """Fashion-MNIST's train and val splits as TABULAR CSVs: pixels p0..p783 and the class in ``target``."""
    built = build_fashion_mnist(folder / "images", limit=limit, val_fraction=0.1, seed=0)
    files = {}
    for split in built.splits:
        if split.name == "test":
            continue
        data = read_image_files(split.path)
        frame = pd.DataFrame(data.images.reshape(len(data.images), -1), columns=[f"p{i}" for i in range(784)])
        frame["target"] = data.labels
        files[split.name] = write_tabular(folder / f"{split.name}.csv", frame)
    return files


def worker_pids(home: Path) -> list[int]:
    """The local worker processes of the platform on ``home`` (their --confinement argument names it): the
    executor's, not the template processes each starts in a PID namespace of its own (forks with its command line)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"baobab.worker._process" in args and any(str(home).encode() in a for a in args):
            pids.append(int(entry.name))
    return sorted(pid for pid in pids if not set(pids) & _ancestors(pid))


def _ancestors(pid: int) -> set[int]:
    found, parents = set(), _parents()
    while (pid := parents.get(pid, 0)) > 1 and pid not in found:
        found.add(pid)
    return found


def _parents() -> dict[int, int]:
    """Each process's parent, as /proc tells now."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return parents


def trees(pids: list[int]) -> list[int]:
    """``pids`` and every process below them now (the template processes come and go with trials)."""
    return sorted({*pids, *(pid for top in pids for pid in descendants_of(top))})


def memory_kb(pid: int) -> dict[str, int]:
    """Rss, Pss and private (USS) kB of a process; zeros once it is gone."""
    values = dict.fromkeys(_PAGE_KB, 0)
    try:
        lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    except OSError:
        return values
    for line in lines:
        name, _, rest = line.partition(":")
        if name in values:
            values[name] = int(rest.split()[0])
    return values


def cpu_s(pid: int) -> float:
    """The CPU seconds of ``pid`` and of its children it reaped; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime, stime, cutime, cstime


class Sampler(threading.Thread):
    """Samples the summed memory of ``pids`` every 0.2 s and keeps the peaks (MiB)."""

    def __init__(self, pids: list[int]) -> None:
        super().__init__(daemon=True)
        self.pids = pids
        self.peak = {"rss": 0.0, "pss": 0.0, "uss": 0.0}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.2):
            samples = [memory_kb(pid) for pid in trees(self.pids)]
            sums = {
                "rss": sum(s["Rss"] for s in samples),
                "pss": sum(s["Pss"] for s in samples),
                "uss": sum(s["Private_Clean"] + s["Private_Dirty"] for s in samples),
            }
            for name, kb in sums.items():
                self.peak[name] = max(self.peak[name], kb / 1024)


def run(cache_mb: int, folder: Path, files: dict[str, Path], template: Path) -> Run:
    home = folder / f"home-cache-{cache_mb}"
    settings = {
        "BAOBAB_ADMIN_EMAIL": EMAIL,
        "BAOBAB_ADMIN_PASSWORD": PASSWORD,
        "BAOBAB_CPU_SLOTS": str(TRIALS),
        "BAOBAB_DATA_CACHE_MB": str(cache_mb),
    }
    result = Run(cache="on" if cache_mb else "off")
    with LocalPlatform(home, workers=TRIALS, settings=settings) as local:
        client = Client(local.url)
        client.login(EMAIL, PASSWORD)
        train = client.create_dataset("fm train", files["train"], format="TABULAR")
        val = client.create_dataset("fm val", files["val"], format="TABULAR")
        model = client.create_model(template, task="TABULAR_CLASSIFICATION", class_name="TimedMlp")
        pids = worker_pids(home)
        if len(pids) != TRIALS:
            raise SystemExit(f"found {len(pids)} worker processes of {home}, not {TRIALS}")
        result.idle_rss_mb = sum(memory_kb(pid)["Rss"] for pid in trees(pids)) / 1024
        before = {pid: cpu_s(pid) for pid in trees(pids)}
        sampler = Sampler(pids)
        sampler.start()
        started = time.perf_counter()
        client.create_train_job(
            "shared-data",
            "TABULAR_CLASSIFICATION",
            train_dataset_id=train["id"],
            val_dataset_id=val["id"],
            model_ids=[model["id"]],
            budget={"MODEL_TRIAL_COUNT": TRIALS, "GPU_COUNT": 0},
            options={"warm_start": False, "fusion": "off"},
            strategy="random",
            seed=0,
        )
        job = client.wait_for_train_job("shared-data", timeout=3600, progress=False)
        result.wall_s = time.perf_counter() - started
        sampler.done.set()
        sampler.join()
        result.worker_cpu_s = sum(cpu_s(pid) - before.get(pid, 0.0) for pid in trees(pids))
        if job["trial_counts"].get("COMPLETED") != TRIALS:
            raise SystemExit(f"cache {result.cache}: not every trial completed: {job['trial_counts']}")
        result.peak_rss_mb, result.peak_pss_mb, result.peak_uss_mb = (sampler.peak[k] for k in ("rss", "pss", "uss"))
        for trial in client.iter_trials("shared-data"):
            result.scores.append(trial["score"])
            for log in client.get_trial_logs(trial["id"]):
                line = log["line"]
                timed = _CPU_LINE.match(line)
                if timed and timed.group(1) == "load_data":
                    result.load_data_cpu_s += float(timed.group(2))
                elif timed:
                    result.preprocess_cpu_s += float(timed.group(2))
                result.decodes += "decoded and preprocessed here" in line
                result.mapped += "mapped from this machine's data cache" in line
    return result


def write_report(runs: list[Run], files: dict[str, Path], limit: int | None, setup: dict[str, Any]) -> None:
    RESULTS.mkdir(exist_ok=True)
    # Each run under "cache=off" and "cache=on", the names the docs' figures select them by, beside the setup.
    data = {**{f"cache={r.cache}": asdict(r) for r in runs}, "setup": setup}
    (RESULTS / "shared_data.json").write_text(json.dumps(data, indent=2) + "\n")
    rows = {name: len(pd.read_csv(path, usecols=["target"])) for name, path in files.items()}
    on, off = (next(r for r in runs if r.cache == c) for c in ("on", "off"))
    lines = [
        "# Shared data loading: 8 concurrent trials of one job on one machine",
        "",
        f"`bench/shared_data.py{f' --limit {limit}' if limit else ''}`, {datetime.date.today()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}: `baobab up --workers {TRIALS}` (SQLite), "
        f"one job of {TRIALS} trials of `examples/models/torch_mlp.py` (one epoch each, warm start and fusion off) "
        f"on Fashion-MNIST as TABULAR CSVs ({rows['train']:,} training and {rows['val']:,} validation rows of 784 "
        "pixels), with the data cache on (`BAOBAB_DATA_CACHE_MB=4096`) and off (`0`), in the same run.",
        "",
        "| | cache off | cache on | on / off |",
        "|---|---:|---:|---:|",
    ]
    for label, attribute, unit in (
        ("peak summed RSS of the trial processes", "peak_rss_mb", "MiB"),
        ("peak summed PSS (shared pages split)", "peak_pss_mb", "MiB"),
        ("peak summed private memory (USS)", "peak_uss_mb", "MiB"),
        ("CPU in load_data (all trials)", "load_data_cpu_s", "s"),
        ("CPU in preprocess (all trials)", "preprocess_cpu_s", "s"),
        ("CPU of the worker processes during the job", "worker_cpu_s", "s"),
        ("job wall time", "wall_s", "s"),
    ):
        a, b = getattr(off, attribute), getattr(on, attribute)
        lines.append(f"| {label} ({unit}) | {a:,.1f} | {b:,.1f} | {b / a:.2f} |")
    lines += [
        f"| datasets decoded / mapped (trial logs) | {off.decodes} / {off.mapped} | {on.decodes} / {on.mapped} | |",
        "",
        f"The idle workers held {off.idle_rss_mb:,.0f} and {on.idle_rss_mb:,.0f} MiB of RSS together before the job "
        "(before importing torch). RSS counts each mapped page once per process that maps it, so it overstates what "
        "the cache's mapping costs: PSS and USS say what the machine holds. With the cache off every trial keeps a "
        "decoded copy (in the dataset reader's per-process cache) and TorchMlp's preprocessed float32 copy; with "
        "it on the one trial that decoded a dataset still keeps its reader's copy, and the others map the file. "
        "Every trial of the job's first wave also decodes the validation set once more for the reload check "
        "(`sample_queries`, through the reader), which the cache does not cover. Scores are equal in both "
        f"configurations: {sorted(off.scores) == sorted(on.scores)}.",
        "",
        setup_markdown(setup),
    ]
    (RESULTS / "shared_data.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="training plus validation images (default: all)")
    args = parser.parse_args()
    setup = RunSetup(
        "the cache: 8 trials of one job on one machine, all on the same data (the case it is for)",
        fusion="off",
        warm_start=False,
        data_cache="per run: off (BAOBAB_DATA_CACHE_MB=0), on (4096)",
    )
    with tempfile.TemporaryDirectory(prefix="baobab-shared-data-") as tmp:
        folder = Path(tmp)
        files = build_datasets(folder, args.limit)
        template = folder / "timed_mlp.py"
        template.write_text(TEMPLATE.read_text() + TIMING)
        runs = []
        for cache_mb in (0, 4096):
            runs.append(run(cache_mb, folder, files, template))
            print(json.dumps(asdict(runs[-1])))
        write_report(runs, files, args.limit, setup.finish())
    print((RESULTS / "shared_data.md").read_text())


if __name__ == "__main__":
    main()
