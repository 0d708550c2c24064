"""Trials on one GPU: one after another, several processes sharing the device, fused, and fusion "auto".

K trials of one example template that differ only in learning rate and seed (``bench/fusion.py``'s
cases: the CNN of 8 and 16 channels, the 784-32-10 MLP) train on the same Fashion-MNIST subset on
one CUDA GPU, four ways in the same run, for K = 1, 4, 16, 64:

1. **one per GPU**: the K trials one after another in one process, as a GPU worker runs trials
   today (one trial per GPU);
2. **shared**: the K trials over ``--processes`` processes on the same GPU at once, each a trial at
   a time (what fractional GPUs do: the device shared, no limit on what each takes);
3. **fused**: ``baobab.model.train_fused`` over the K in one process;
4. **auto**: the groups the job driver forms under ``train_args.fusion = "auto"`` for a one-GPU
   job, from the profile a worker measures on the GPU (``baobab.model.profile_fusion``, its stack
   bounded by 80% of the device's free memory, as ``baobab.worker`` bounds it), one after another.
   The profile's own time is reported beside it, not in it.

Every process reads the data through one ``baobab.worker.DataCache`` filled before the clocks
start, and trains one short trial of each case first (CUDA's context, cuDNN's first calls). Rows/s
= training rows x epochs x K / wall seconds from the first trial's ``train()`` to the last one's
parameters back. Each fused member's validation accuracy is compared with its run alone (same
seed); cuDNN's kernels are not deterministic, so neither run is bit-exact.

    python bench/gpu.py                # with a CUDA build of torch (.venv pins the CPU one): 3.5 minutes on an H200
    python bench/gpu.py --smoke --out /tmp/gpu           # tiny, and allowed on the CPU: checks the script
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import multiprocessing
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from fusion import (
    Case,
    Data,
    _context,
    _fused,
    _independent,
    _setup,
    _template,
    _train_path,
    _warm,
    cases,
    evaluate,
    members,
)
from setup_record import RunSetup, setup_markdown
from shared_data import build_datasets

from baobab.advisor import AUTO_MAX_GROUP, packed_size
from baobab.model import profile_fusion
from baobab.store import read_image_files

HERE = Path(__file__).parent
#: Share of the GPU's free memory a profiled stack may fill (baobab.worker._fusion_profile's).
GPU_SHARE = 0.8
WAYS = ("one per GPU", "shared", "fused", "auto")


def _ready(data: Data, threads: int, chosen: list[Case]) -> None:
    """A pool process's data and threads, and one short trial of each case (CUDA's context, cuDNN's first calls)."""
    _setup(data, threads)
    for case in chosen:
        _warm(case)


def _peak_fused(job: tuple[Case, list[tuple[dict[str, Any], int]]]) -> tuple[list[Any], float, int]:
    """The fused way in its process: the members' parameters, CPU seconds, and peak GPU memory."""
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    params, cpu = _fused(job)
    peak = torch.cuda.max_memory_allocated() if torch.cuda.is_available() else 0
    return params, cpu, peak


def _unit(job: tuple[Case, list[tuple[dict[str, Any], int]]]) -> list[Any]:
    """A unit as a GPU worker runs it: a trial alone, or a fused group."""
    case, jobs = job
    if len(jobs) > 1:
        return _fused(job)[0]
    return [_independent((case, *jobs[0], False))[0]]


def _profile(case: Case) -> dict[str, Any]:
    """What a worker on this GPU measures for the case's first trial under fusion "auto"."""
    knobs, seed = members(case, 1)[0]
    model = _template(case)(**knobs)
    memory = int(torch.cuda.mem_get_info()[0] * GPU_SHARE) if torch.cuda.is_available() else None
    profile = profile_fusion(model, _train_path(case), max_group=AUTO_MAX_GROUP, context=_context(model, case),
                             train_args={"seed": seed, **case.train_args}, memory_bytes=memory)  # fmt: skip
    return profile.to_json()


def _accuracy(job: tuple[Case, dict[str, Any], Any]) -> float:
    case, knobs, params = job
    return evaluate(case, knobs, params)


def auto_groups(k: int, profile: dict[str, Any]) -> list[int]:
    """The group sizes the driver forms for K trials of one structure on a one-GPU job."""
    rates = {int(size): rate for size, rate in profile["samples_per_s"].items()}
    sizes: list[int] = []
    while (left := k - sum(sizes)) > 0:
        sizes.append(min(left, packed_size(rates, profile["best"], left, 1)))
    return sizes


@dataclasses.dataclass
class Row:
    model: str
    k: int
    rows: int  # training rows x epochs x K
    wall_s: dict[str, float] = dataclasses.field(default_factory=dict)
    groups: list[int] = dataclasses.field(default_factory=list)
    fused_peak_mib: float = 0.0
    accuracy_alone: list[float] = dataclasses.field(default_factory=list)
    accuracy_diff: float = 0.0  # largest |fused member - its run alone|

    def rate(self, way: str) -> float:
        return self.rows / self.wall_s[way]

    def ratio(self, way: str) -> float:
        return self.wall_s["one per GPU"] / self.wall_s[way]


def run_case(case: Case, one: Any, shared: Any, train_rows: int) -> tuple[list[Row], dict[str, Any]]:
    profile = one.apply(_profile, (case,))
    print(f"{case.name}: profile best {profile['best']} of {profile['samples_per_s']} ({profile['seconds']} s)")
    rows = []
    for k in case.ks:
        jobs = members(case, k)
        row = Row(case.name, k, train_rows * case.epochs * k, groups=auto_groups(k, profile))
        trials = [(case, knobs, seed, False) for knobs, seed in jobs]
        start = time.perf_counter()
        alone = [params for params, _ in one.map(_independent, trials, chunksize=1)]
        row.wall_s["one per GPU"] = time.perf_counter() - start
        start = time.perf_counter()
        shared.map(_independent, trials, chunksize=1)
        row.wall_s["shared"] = time.perf_counter() - start
        start = time.perf_counter()
        fused, _, peak = one.apply(_peak_fused, ((case, jobs),))
        row.wall_s["fused"] = time.perf_counter() - start
        row.fused_peak_mib = peak / 2**20
        starts = np.cumsum([0, *row.groups])
        start = time.perf_counter()
        one.map(_unit, [(case, jobs[a:b]) for a, b in zip(starts, starts[1:], strict=False)], chunksize=1)
        row.wall_s["auto"] = time.perf_counter() - start
        knobs = [knobs for knobs, _ in jobs]
        row.accuracy_alone = one.map(_accuracy, [(case, kn, p) for kn, p in zip(knobs, alone, strict=True)])
        mine = one.map(_accuracy, [(case, kn, p) for kn, p in zip(knobs, fused, strict=True)])
        row.accuracy_diff = max(abs(a - b) for a, b in zip(mine, row.accuracy_alone, strict=True))
        rows.append(row)
        ratios = ", ".join(f"{way} {row.ratio(way):.2f}x" for way in WAYS[1:])
        print(f"{case.name} K={k}: one per GPU {row.rate('one per GPU'):,.0f} rows/s; {ratios}", flush=True)
    return rows, profile


def gpu_name() -> str:
    if not torch.cuda.is_available():
        return "no GPU (CPU smoke run)"
    props = torch.cuda.get_device_properties(0)
    return f"{props.name}, {props.total_memory / 2**30:.0f} GiB"


def write(rows: list[Row], profiles: dict[str, dict[str, Any]], meta: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    payload = {**meta, "profiles": profiles, "rows": [dataclasses.asdict(r) for r in rows]}
    (out / "gpu.json").write_text(json.dumps(payload, indent=2) + "\n")
    lines = [
        '# Trials on one GPU: one after another, sharing the device, fused, and fusion "auto"',
        "",
        f"Written by `bench/gpu.py{' --smoke' if meta['smoke'] else ''}` on {meta['date']}: **{meta['gpu']}** "
        f"(driver {meta['driver']}), PyTorch {meta['torch']}, {meta['cores']} CPU cores; "
        f"{meta['setup']['minutes']:.1f} minutes. {meta['train_rows']:,} Fashion-MNIST training rows, batch size 64; "
        f'"shared" runs {meta["processes"]} processes on the GPU at once. See the script\'s docstring for the ways.',
        "",
        "| model | K | one per GPU rows/s | shared | fused | auto (its groups) | fused peak memory "
        "| val accuracy alone | largest fused - alone |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        groups = "+".join(map(str, r.groups)) if len(r.groups) <= 4 else f"{len(r.groups)} of {max(r.groups)}"
        lines.append(
            f"| {r.model} | {r.k} | {r.rate('one per GPU'):,.0f} | {r.ratio('shared'):.2f}x "
            f"| **{r.ratio('fused'):.2f}x** "
            f"| {r.ratio('auto'):.2f}x ({groups}) | {r.fused_peak_mib:,.0f} MiB "
            f"| {min(r.accuracy_alone):.3f}-{max(r.accuracy_alone):.3f} | {r.accuracy_diff:.4f} |"
        )
    lines += ["", "Ratios are throughput against one per GPU, in the same run on the same GPU.", ""]
    lines += ["| model | profile: rows/s by group size | chosen | measuring took | stopped because |",
              "|---|---|---:|---:|---|"]  # fmt: skip
    for model, p in profiles.items():
        rates = ", ".join(f"{size}: {rate:,.0f}" for size, rate in p["samples_per_s"].items())
        lines.append(f"| {model} | {rates} | {p['best']} | {p['seconds']:.1f} s | {p['reason'] or '-'} |")
    cnn = next((r for r in rows if r.model.startswith("cnn") and r.k == 16), None)
    if cnn is not None:
        held = "holds" if cnn.ratio("fused") >= 3 else "does not hold"
        lines += ["", f"The aim of the cross-trial engine on a GPU, at least 3x at K=16 for the CNN, {held} here: "
                  f"{cnn.ratio('fused'):.2f}x fused, {cnn.ratio('auto'):.2f}x under auto."]  # fmt: skip
    lines += ["", setup_markdown(meta["setup"])]
    (out / "gpu.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=12000, help="training plus validation images")
    parser.add_argument("--mlp-epochs", type=int, default=3)
    parser.add_argument("--cnn-epochs", type=int, default=1)
    parser.add_argument("--processes", type=int, default=4, help="of the shared way")
    parser.add_argument("--ks", type=lambda s: tuple(map(int, s.split(","))), default=(1, 4, 16, 64))
    parser.add_argument("--smoke", action="store_true", help="K = 1 and 2 on 600 images; runs on the CPU too")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    if args.smoke:
        args.limit, args.ks, args.processes = 600, (1, 2), 2
    elif not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU here: bench/gpu.py measures a GPU (--smoke runs on the CPU)")
    # fusion.cases' fields: the MLP and the CNN, each at args.ks, once
    args.cnn_ks, args.repeats = args.ks, 1
    chosen = [c for c in cases(args) if c.file != "torch_adapter.py"]
    setup = RunSetup(
        "fusion: the members are alike in shape and length (none leaves its stack early), the data is decoded "
        "once and kept on the GPU by each process, and no platform overhead is in any way's time",
        placement="not applicable (no job driver: the ways run in pools of this script)",
        fusion="per way: one per GPU and shared (off), fused, auto",
        warm_start="off (every trial trains from scratch)",
        gpu=gpu_name(),
    )
    with tempfile.TemporaryDirectory(prefix="baobab-bench-gpu-") as tmp:
        folder = Path(tmp)
        csv = build_datasets(folder, args.limit)
        images = {name: str(folder / "images" / f"{name}.zip") for name in ("train", "val")}
        (folder / "cache").mkdir()
        np.savez(folder / "base.npz")  # no adapter case here: fusion's processes load an empty zoo
        train_rows = len(read_image_files(images["train"]).labels)
        data = Data({"csv": {k: str(v) for k, v in csv.items()}, "images": images}, str(folder / "cache"),
                    train_rows, str(folder / "base.npz"))  # fmt: skip
        spawn = multiprocessing.get_context("spawn")  # CUDA does not survive a fork
        threads = max(1, (os.cpu_count() or 1) // args.processes)
        rows, profiles = [], {}
        with (
            spawn.Pool(1, initializer=_ready, initargs=(data, threads, chosen)) as one,  # fills the cache first
            spawn.Pool(args.processes, initializer=_ready, initargs=(data, threads, chosen)) as shared,
        ):
            for case in chosen:
                case_rows, profiles[case.name] = run_case(case, one, shared, train_rows)
                rows += case_rows
    driver = "-"
    if torch.cuda.is_available():
        query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
        driver = subprocess.run(query, capture_output=True, text=True, check=False).stdout.strip() or "-"
    meta = {
        "date": datetime.date.today().isoformat(),
        "gpu": gpu_name(),
        "driver": driver,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cores": os.cpu_count(),
        "processes": args.processes,
        "train_rows": train_rows,
        "epochs": {"mlp": args.mlp_epochs, "cnn": args.cnn_epochs},
        "smoke": args.smoke,
        "setup": setup.finish(),
    }
    write(rows, profiles, meta, args.out)


if __name__ == "__main__":
    main()
