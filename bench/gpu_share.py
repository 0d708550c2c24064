"""A user's GPU job through ``baobab up``: one trial per GPU, trials sharing it, and fused trials.

Issue 30's GPU benchmark. Each way is one run of :func:`user_job.run_once` with ``GPU_COUNT`` 1 on a
fresh ``baobab up --workers SLOTS`` (SQLite, local worker processes that all see the GPU), the
example CNN (``examples/models/torch_cnn.py``) on Fashion-MNIST's ``--images`` train + validation
images for ``--minutes`` of ``TIME_HOURS``, its best trial then served and tested. The ways:

- ``one-per-gpu``: no option (today's default: the job's GPU runs one trial at a time);
- ``shared``: ``resources.gpu_share: "auto"``: several trials on the GPU as separate processes,
  as many as the measured memory and throughput allow (``baobab.advisor._gpu_share``);
- ``fused``: ``fusion: "auto"``: same-shaped trials stacked into one process where a profile says
  it pays.

Reported per way: completed trials and trials per hour (the ratio to one per GPU is the
figure), the median trial's seconds, the most trials at once, the best validation accuracy, the
served trial's test accuracy, the job's GPU-share decisions, and the GPU's memory and utilisation
sampled by ``nvidia-smi`` every second while the job ran. Written to ``bench/results/gpu_share.md``
and ``.json`` with the GPU's name. Every way's job has the same seed (:data:`SEED`), so its first
proposals are the same. What the setup favours: each way starts from a fresh platform, so the ways
that measure first (shared, fused) pay for it inside the same short budget, against them; the
ways run one after another, so a cache warmed by the first (the page cache of torch's libraries)
helps the later ones.

    python bench/gpu_share.py   # with a CUDA build of PyTorch (.venv pins the CPU one): about 9 minutes
    python bench/gpu_share.py --minutes 1 --images 600 --gpus 0 --ways one-per-gpu,fused --out /tmp/gs  # CPU smoke
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from setup_record import RunSetup, setup_markdown
from user_job import run_once

from baobab.store import FASHION_MNIST_SOURCE, build_fashion_mnist

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
#: way -> (BAOBAB_PLACEMENT, the job's options)
WAYS: dict[str, tuple[str, dict[str, Any]]] = {
    "one-per-gpu": ("rules", {}),
    "shared": ("rules", {"resources": {"gpu_share": "auto"}}),
    "fused": ("rules", {"fusion": "auto"}),
}
FAVOURS = (
    "none of the ways in particular: the same seed, each from a fresh platform, run one after another (a cache the "
    "first warmed helps the later ones); the shared and fused ways measure inside the same budget"
)
#: Every way's job: the same proposals, so the ways differ in how trials run, not in which.
SEED = 7
_QUERY = ("nvidia-smi", "--query-gpu=memory.used,utilization.gpu", "--format=csv,noheader,nounits")


class GpuSampler(threading.Thread):
    """``nvidia-smi``'s memory used (MiB) and utilisation (%) of GPU 0, every second until stopped."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[tuple[float, float]] = []
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(1.0):
            try:
                line = subprocess.run(_QUERY, capture_output=True, text=True, timeout=5, check=True).stdout
                used, busy = (float(v) for v in line.splitlines()[0].split(","))
            except (OSError, subprocess.SubprocessError, ValueError, IndexError):
                continue
            self.samples.append((used, busy))

    def stop(self) -> dict[str, Any] | None:
        self._done.set()
        self.join()
        if not self.samples:
            return None
        used, busy = zip(*self.samples, strict=True)
        return {
            "samples": len(self.samples),
            "memory_mb_max": max(used),
            "memory_mb_mean": statistics.fmean(used),
            "utilisation_mean": statistics.fmean(busy),
        }


def gpu_name() -> str:
    try:
        import torch

        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            return f"{props.name}, {props.total_memory / 2**30:.0f} GiB (torch {torch.__version__})"
    except ImportError:
        pass
    return "no GPU"


def _number(value: float | None, digits: int = 4) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def write_report(runs: list[dict[str, Any]], meta: dict[str, Any], setup: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_share.json").write_text(json.dumps({"meta": meta, "runs": runs, "setup": setup}, indent=2) + "\n")
    base = next((r for r in runs if r["way"] == "one-per-gpu"), None)
    lines = [
        "# A user's GPU job: one trial per GPU, trials sharing it, fused trials",
        "",
        f"`bench/gpu_share.py` at commit {setup['commit'][:7]}, {setup['date']}, on **{meta['gpu']}** "
        f"({setup['machine']}): the example CNN, {meta['images']} Fashion-MNIST train + validation images, "
        f"GPU_COUNT {meta['gpus']}, {meta['minutes']:g} minutes a job, `baobab up --workers {meta['slots']}`, "
        "one run a way. See the script's docstring for what each way is and what the setup favours.",
        "",
        "| way | completed | trials per hour | vs one-per-gpu | median trial s | most at once | best validation "
        "| test accuracy | GPU memory max MiB | GPU busy mean % |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        ratio = f"{r['completed'] / base['completed']:.2f}x" if base and base["completed"] else "—"
        gpu = r.get("gpu") or {}
        lines.append(
            f"| {r['way']} | {r['completed']} | {r['completed'] / (meta['minutes'] / 60):.0f} | {ratio} | "
            f"{r['median_trial_s']} | {r['most_at_once']} | {_number(r['best_validation'])} | "
            f"{_number(r['test_accuracy'])} | {_number(gpu.get('memory_mb_max'), 0)} | "
            f"{_number(gpu.get('utilisation_mean'), 0)} |"
        )
    lines += [
        "",
        "Trials per hour count the completed trials of the whole job, the shared way's measuring at one and two "
        "per GPU included. GPU busy is `nvidia-smi`'s utilisation: the share of each second in which a kernel ran.",
        "",
        "The shared way's decisions (the job's `gpu_share`). Each gain compares the trials that ran wholly at one "
        "level with those of the level below: different trials, of other knobs, so a gain above 2x for a doubling "
        "says the later trials were also shorter.",
        "",
    ]
    for r in runs:
        share = r.get("gpu_share")
        if share:
            lines += [f"- {change['level']} per GPU: {change['reason']}" for change in share["changes"]]
            if share["retried_alone"]:
                lines.append(f"- ran again alone after running out of GPU memory: trials {share['retried_alone']}")
    lines += ["", setup_markdown(setup)]
    (out / "gpu_share.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=2.5, help="TIME_HOURS of each job, in minutes")
    parser.add_argument("--images", type=int, default=60000, help="train + validation images (default: all)")
    parser.add_argument("--slots", type=int, default=8, help="worker processes of baobab up")
    parser.add_argument("--gpus", type=int, default=1, help="GPU_COUNT of each job (0: a CPU smoke run)")
    parser.add_argument("--source", default=FASHION_MNIST_SOURCE, help="the folder of Fashion-MNIST's IDX files")
    parser.add_argument("--ways", default=",".join(WAYS), help=f"comma-separated, of {', '.join(WAYS)}")
    parser.add_argument("--no-serve", action="store_true", help="skip serving and testing the best trial")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if set(args.ways.split(",")) - set(WAYS):
        parser.error(f"--ways: of {', '.join(WAYS)}")
    setup = RunSetup(FAVOURS, fusion="per way (see ways)", warm_start="on (the default)", placement="rules")
    meta = {
        "gpu": gpu_name(),
        "minutes": args.minutes,
        "images": args.images,
        "slots": args.slots,
        "gpus": args.gpus,
        "ways": {way: {"placement": p, "options": o} for way, (p, o) in WAYS.items()},
    }
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="baobab-bench-gpu-share-") as tmp:
        folder = Path(tmp)
        build_fashion_mnist(folder / "images", limit=args.images, val_fraction=0.1, seed=0, source=args.source)
        images = {name: str(folder / "images" / f"{name}.zip") for name in ("train", "val", "test")}
        for way in args.ways.split(","):
            print(f"{way}: {args.minutes:g} minutes", flush=True)
            sampler = GpuSampler()
            sampler.start()
            try:
                serve = not args.no_serve
                run = run_once(way, 0, images, args, folder, ways=WAYS, gpus=args.gpus, serve=serve, seed=SEED)
            finally:
                gpu = sampler.stop()
            run["gpu"] = gpu
            runs.append(run)
            print(
                f"{way}: {run['completed']} completed, median {run['median_trial_s']} s, {run['most_at_once']} at "
                f"once, best {run['best_validation']}, test {run['test_accuracy']}, gpu {gpu}, share "
                f"{json.dumps(run.get('gpu_share'))}",
                flush=True,
            )
            write_report(runs, meta, setup.finish(), args.out)  # each way's: a run cut short keeps the ones it ended
    print(f"wrote {args.out / 'gpu_share.md'}", flush=True)


if __name__ == "__main__":
    main()
