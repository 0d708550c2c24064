"""A user's job, as the issue reported it: the example CNN on a few thousand images, 2 CPU slots, 6 minutes.

Whether the defaults are earned (issue 30): each way runs ``--repeats`` times (3 by default),
one run after another, each on ``baobab up --workers SLOTS`` (``baobab.testing.LocalPlatform``:
SQLite, local worker processes) in a fresh home, so that no zoo model or fusion profile of an
earlier run carries over. A run uploads Fashion-MNIST's subset (Debian's ``dataset-fashion-mnist``
through ``baobab.store.build_fashion_mnist``: ``--images`` train + validation images, the test
set cut in proportion), the example CNN (``examples/models/torch_cnn.py``), and starts one train
job with ``TIME_HOURS`` = ``--minutes`` / 60 and ``GPU_COUNT`` 0 and no other option but the
way's. The ways:

- ``defaults``: this commit's defaults, ``BAOBAB_PLACEMENT=rules`` and no ``fusion`` option (off);
- ``search-auto``: the old defaults' settings, ``BAOBAB_PLACEMENT=search`` and ``fusion: "auto"``,
  on this commit (so its profiles run under the new gate: the old cap is gone from the code);
- ``rules-auto``: ``BAOBAB_PLACEMENT=rules`` and ``fusion: "auto"`` under the new profiling gate.

Reported per run and per way (mean and range over the repeats): trials completed, the best
validation accuracy, the test accuracy of the served model (the best COMPLETED trial, served
by an inference job, the test images sent through its predictor), the seconds the trials spent
measuring fusion profiles against the seconds they ran, the job's ``fusion_profiling`` decision,
and where the API has it (``GET .../time_breakdown``), the seconds per phase. Written to
``bench/results/user_job.md`` and ``.json`` with the commit, the settings and the machine's load
at the start and end. The issue's rule: a default other than the rules and no fusion stays only
where it reaches the same best score with at least as many completed trials over 3 repeats.

    .venv/bin/python bench/user_job.py                     # 3 ways x 3 repeats x 6 minutes: about an hour
    .venv/bin/python bench/user_job.py --repeats 1 --minutes 1 --images 1000 --out /tmp/user-job  # a smoke run
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from baobab.sdk import Client
from baobab.store import build_fashion_mnist, read_image_files
from baobab.testing import LocalPlatform

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent / "examples" / "models"
RESULTS = HERE / "results"
EMAIL, PASSWORD = "bench@example.com", "bench-password"
#: way -> (BAOBAB_PLACEMENT, the job's options)
WAYS: dict[str, tuple[str, dict[str, Any]]] = {
    "defaults": ("rules", {}),
    "search-auto": ("search", {"fusion": "auto"}),
    "rules-auto": ("rules", {"fusion": "auto"}),
}
BATCH = 100  # test queries per predict request


def run_once(
    way: str,
    repeat: int,
    images: dict[str, str],
    args: argparse.Namespace,
    folder: Path,
    *,
    ways: dict[str, tuple[str, dict[str, Any]]] = WAYS,
    gpus: int = 0,
    serve: bool = True,
    seed: int | None = None,
) -> dict[str, Any]:
    """One run of one way of ``ways``: a fresh platform, one train job of ``gpus`` GPU_COUNT (and ``seed``: the same
    proposals for every way), its best trial served and tested (unless not ``serve``)."""
    placement, options = ways[way]
    started = time.perf_counter()
    settings = {
        "BAOBAB_ADMIN_EMAIL": EMAIL,
        "BAOBAB_ADMIN_PASSWORD": PASSWORD,
        "BAOBAB_CPU_SLOTS": str(args.slots),
        "BAOBAB_PLACEMENT": placement,
    }
    with LocalPlatform(folder / f"{way}-{repeat}-home", workers=args.slots, settings=settings) as baobab:
        client = Client(baobab.url)
        client.login(EMAIL, PASSWORD)
        train = client.create_dataset("fashion-mnist train", images["train"], format="IMAGE_FILES")["id"]
        val = client.create_dataset("fashion-mnist val", images["val"], format="IMAGE_FILES")["id"]
        model = client.create_model(EXAMPLES / "torch_cnn.py", task="IMAGE_CLASSIFICATION", class_name="TorchCnn")
        job = client.create_train_job(
            f"{way}-{repeat}",
            "IMAGE_CLASSIFICATION",
            train_dataset_id=train,
            val_dataset_id=val,
            model_ids=[model["id"]],
            budget={"TIME_HOURS": args.minutes / 60, "GPU_COUNT": gpus},
            options=options,
            seed=seed,
        )
        job = client.wait_for_train_job(job["app"], job["app_version"], timeout=60 * args.minutes + 900, progress=False)
        trials = list(client.iter_trials(job["app"], job["app_version"]))
        breakdown = _time_breakdown(client, job)
        served = _serve_and_test(client, job, trials, images["test"]) if serve else None
    ran = [_seconds(t) for t in trials if t["started_at"] and t["finished_at"]]
    profiles = [t["fusion_profile"] for t in trials if t.get("fusion_profile")]
    scored = [t["score"] for t in trials if t["status"] == "COMPLETED" and t["score"] is not None]
    return {
        "way": way,
        "repeat": repeat,
        "placement": placement,
        "options": options,
        "status": job["status"],
        "completed": sum(t["status"] == "COMPLETED" for t in trials),
        "trials": len(trials),
        "fused": sum(t["fused_group"] is not None for t in trials),
        "best_validation": max(scored, default=None),
        "test_accuracy": served,
        "trial_s": round(sum(ran), 1),
        "median_trial_s": round(statistics.median(ran), 1) if ran else None,
        "most_at_once": _most_at_once(trials),
        "profiles": len(profiles),
        "profile_s": round(sum(float(p.get("seconds", 0.0)) for p in profiles), 1),
        "fusion_profiling": job.get("fusion_profiling"),
        "gpu_share": job.get("gpu_share"),
        "time_breakdown": breakdown,
        "wall_s": round(time.perf_counter() - started, 1),
    }


def _most_at_once(trials: list[dict[str, Any]]) -> int:
    """The most trials that ran at the same time."""
    edges = sorted(
        (datetime.datetime.fromisoformat(t[key]), step)
        for t in trials
        if t["started_at"] and t["finished_at"]
        for key, step in (("started_at", 1), ("finished_at", -1))
    )
    running = most = 0
    for _, step in edges:  # an end sorts before a start at the same instant
        running += step
        most = max(most, running)
    return most


def _seconds(trial: dict[str, Any]) -> float:
    start, end = (datetime.datetime.fromisoformat(trial[k]) for k in ("started_at", "finished_at"))
    return (end - start).total_seconds()


def _time_breakdown(client: Client, job: dict[str, Any]) -> dict[str, Any] | None:
    """The job's seconds per phase where this platform's API has them (None where it has not yet)."""
    get = getattr(client, "get_time_breakdown", None)
    if get is None:
        return None
    try:
        breakdown: dict[str, Any] = get(job["app"], job["app_version"])
    except Exception as e:  # an API without the endpoint: the rest of the run still counts
        print(f"no time breakdown: {e}", flush=True)
        return None
    return breakdown


def _serve_and_test(client: Client, job: dict[str, Any], trials: list[dict[str, Any]], test: str) -> float | None:
    """The test accuracy of the best COMPLETED trial, served by an inference job (None: none completed)."""
    done = [t for t in trials if t["status"] == "COMPLETED" and t["has_params"] and t["score"] is not None]
    if not done:
        return None
    best = max(done, key=lambda t: t["score"])
    inference = client.create_inference_job(job["app"], job["app_version"], trial_ids=[best["id"]])
    served = client.wait_for_inference_job(inference["id"], timeout=600)
    data = read_image_files(test)
    correct = 0
    for first in range(0, len(data.labels), BATCH):
        answer = client.predict(
            data.images[first : first + BATCH], predictor_url=served["predictor_url"], api_key=inference["api_key"]
        )
        predicted = np.asarray(answer["predictions"]).argmax(axis=1)
        correct += int((predicted == data.labels[first : first + BATCH]).sum())
    client.stop_inference_job(inference["id"])
    return correct / len(data.labels)


def summary(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per way: mean, low and high of each measure over its repeats."""
    out: dict[str, dict[str, Any]] = {}
    for way in dict.fromkeys(r["way"] for r in runs):
        mine = [r for r in runs if r["way"] == way]
        out[way] = {"repeats": len(mine)}
        for key in ("completed", "best_validation", "test_accuracy", "profile_s", "trial_s"):
            values = [r[key] for r in mine if r[key] is not None]
            out[way][key] = (
                {"mean": statistics.fmean(values), "low": min(values), "high": max(values)} if values else None
            )
    return out


def _cell(stat: dict[str, Any] | None, digits: int) -> str:
    if stat is None:
        return "—"
    return f"{stat['mean']:.{digits}f} ({stat['low']:.{digits}f}–{stat['high']:.{digits}f})"


def write_report(runs: list[dict[str, Any]], meta: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    ways = summary(runs)
    (out / "user_job.json").write_text(json.dumps({"meta": meta, "summary": ways, "runs": runs}, indent=2) + "\n")
    lines = [
        "# A user's job: the example CNN on 2 CPU slots, defaults against the experimental options",
        "",
        f"`make bench-user-job` (bench/user_job.py) at commit {meta['commit']}, {meta['date']}: "
        f"{meta['images']} train + validation images, {meta['minutes']:g} minutes a run, {meta['slots']} slots, "
        f"{meta['repeats']} repeat(s) a way; load average {meta['load_start']:.2f} at the start, "
        f"{meta['load_end']:.2f} at the end ({meta['cores']} cores, {meta['machine']}).",
        "",
        "Mean (low–high) over the repeats:",
        "",
        "| way | placement | options | completed | best validation | test accuracy | profiling s | trial s |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for way, stats in ways.items():
        placement, options = WAYS[way]
        lines.append(
            f"| {way} | {placement} | `{json.dumps(options)}` | {_cell(stats['completed'], 1)} | "
            f"{_cell(stats['best_validation'], 4)} | {_cell(stats['test_accuracy'], 4)} | "
            f"{_cell(stats['profile_s'], 1)} | {_cell(stats['trial_s'], 0)} |"
        )
    lines += ["", "Each run:", "", "| way | repeat | status | completed | fused | profiles | decision | phases |"]
    lines.append("|---|---:|---|---:|---:|---:|---|---|")
    for r in runs:
        decisions = "; ".join(d["reason"] for d in (r["fusion_profiling"] or {}).values()) or "—"
        phases = _phases(r["time_breakdown"])
        lines.append(
            f"| {r['way']} | {r['repeat']} | {r['status']} | {r['completed']} | {r['fused']} | {r['profiles']} | "
            f"{decisions} | {phases} |"
        )
    (out / "user_job.md").write_text("\n".join(lines) + "\n")


def _phases(breakdown: dict[str, Any] | None) -> str:
    """The job's seconds per phase, as the API's breakdown gives them (its top-level numbers)."""
    if not breakdown:
        return "—"
    numbers = breakdown.get("seconds", breakdown)
    parts = [f"{k} {v:.0f}" for k, v in numbers.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return ", ".join(parts) or "—"


def _ways(value: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in WAYS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"ways are {', '.join(WAYS)}; got {value!r}")
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=6.0, help="TIME_HOURS of each job, in minutes (default 6)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each way (default 3)")
    parser.add_argument("--images", type=int, default=4000, help="train + validation images (default 4,000)")
    parser.add_argument("--slots", type=int, default=2, help="trials at once (default 2, as the user's job)")
    parser.add_argument("--ways", type=_ways, default=list(WAYS), help=f"comma-separated, of {', '.join(WAYS)}")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"where the report goes (default {RESULTS})")
    args = parser.parse_args()
    if args.minutes <= 0 or args.repeats < 1 or args.slots < 1:
        parser.error("--minutes must be above 0, --repeats and --slots at least 1")
    load_start, runs = os.getloadavg()[0], []
    with tempfile.TemporaryDirectory(prefix="baobab-bench-user-job-") as tmp:
        folder = Path(tmp)
        build_fashion_mnist(folder / "images", limit=args.images, val_fraction=0.1, seed=0)
        images = {name: str(folder / "images" / f"{name}.zip") for name in ("train", "val", "test")}
        for repeat in range(args.repeats):  # ways interleaved, so that the machine's load falls on each alike
            for way in args.ways:
                print(f"{way}, run {repeat + 1} of {args.repeats}: {args.minutes:g} minutes", flush=True)
                run = run_once(way, repeat, images, args, folder)
                runs.append(run)
                print(
                    f"{way}: {run['completed']} completed, best validation {run['best_validation']}, "
                    f"test accuracy {run['test_accuracy']}, {run['profile_s']} s profiling of {run['trial_s']} s",
                    flush=True,
                )
    meta = {
        "date": datetime.date.today().isoformat(),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True, check=False
        ).stdout.strip(),
        "minutes": args.minutes,
        "repeats": args.repeats,
        "images": args.images,
        "slots": args.slots,
        "ways": {way: {"placement": WAYS[way][0], "options": WAYS[way][1]} for way in args.ways},
        "cores": len(os.sched_getaffinity(0)),
        "machine": platform.machine(),
        "load_start": load_start,
        "load_end": os.getloadavg()[0],
    }
    write_report(runs, meta, args.out)
    print(f"wrote {args.out / 'user_job.md'}", flush=True)


if __name__ == "__main__":
    main()
