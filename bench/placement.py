"""The placement simulator's fidelity: predicted against measured makespans of 10 mixed jobs.

Part 1 of the placement benchmark (issue 17). The platform (``baobab up``, SQLite, 2 local
workers, 2 slots) runs three templates of different sizes: scikit-learn's logistic
regression on breast cancer (about a second a trial), the MLP on Fashion-MNIST pixels and
the CNN on Fashion-MNIST images (each a ``--images`` subset: seconds to a minute a trial,
by their epochs and widths). First a warm-up job per template (``--warmup`` trials) gives
the cost model its first measurements; then 10 jobs of one or two templates, 3 to 6 trials
each, fusion off and no early stopping (what the simulator plays is then what the driver
runs: one trial per slot, first come first served), one after another. For each job:

- **forecast**: ``Client.forecast_train_job`` before the job is created: the simulator on
  the cost model of every earlier trial, with the job's trials taken to be like the
  measured ones (their knobs are not proposed yet);
- **replay**: after the job ran, its trials' actual knobs played by the simulator
  (``fcfs``) on a cost model of the *earlier* jobs' trials only (the job's own times
  unseen), which is what the driver's planner would see once the trials are proposed;
- **measured**: the job's first trial start to its last trial end.

Errors are ``|predicted - measured| / measured``; the aim is a median error of at most 15%.
What the setup favours: one job at a time on a quiet machine, every template measured
before it is forecast (the warm-up), and fusion and early stopping off; ASHA's stops and
fused groups are not in it yet, nor are concurrent jobs (part 2, the gain of the searched
placement, needs the driver to use the planner, which it does not yet).

    .venv/bin/python bench/placement.py                      # about 15 minutes
    .venv/bin/python bench/placement.py --jobs 2 --warmup 2 --images 1000 --out /tmp/placement   # a smoke run
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from shared_data import build_datasets
from sklearn.datasets import load_breast_cancer

from baobab.advisor.placement import CostModel, Job, Machine, Pending, choose_plan
from baobab.sdk import Client
from baobab.store import build_fashion_mnist, write_tabular
from baobab.testing import LocalPlatform

HERE = Path(__file__).parent
EXAMPLES = HERE.parent / "examples" / "models"
EMAIL, PASSWORD = "bench@example.com", "bench-password"
SLOTS = 2
#: key: template file, class, task
TEMPLATES = {
    "sklearn": ("sklearn_tabular.py", "SkTabularClassifier", "TABULAR_CLASSIFICATION"),
    "mlp": ("torch_mlp.py", "TorchMlp", "TABULAR_CLASSIFICATION"),
    "cnn": ("torch_cnn.py", "TorchCnn", "IMAGE_CLASSIFICATION"),
}
FORMATS = {"cancer": "TABULAR", "pixels": "TABULAR", "images": "IMAGE_FILES"}


def _time(value: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(value)


def build(folder: Path, images: int) -> dict[str, dict[str, Path]]:
    cancer = load_breast_cancer(as_frame=True).frame
    cancer = cancer.rename(columns={c: f"f{i}" for i, c in enumerate(cancer.columns) if c != "target"})
    cut = int(len(cancer) * 0.8)
    pixels = build_datasets(folder / "pixels", images)
    built = build_fashion_mnist(folder / "images", limit=images, val_fraction=0.1, seed=0)
    return {
        "cancer": {
            "train": write_tabular(folder / "cancer-train.csv", cancer.iloc[:cut]),
            "val": write_tabular(folder / "cancer-val.csv", cancer.iloc[cut:]),
        },
        "pixels": {"train": pixels["train"], "val": pixels["val"]},
        "images": {split.name: split.path for split in built.splits if split.name != "test"},
    }


def job_trials(client: Client, job: dict[str, Any], models: dict[int, str], data: str) -> list[dict[str, Any]]:
    """The job's finished trials: their kind (template on ``data``), knobs, start and end."""
    out = []
    for row in client.iter_trials(job["app"], job["app_version"]):
        if row["status"] == "COMPLETED" and row["started_at"] and row["finished_at"]:
            start, end = _time(row["started_at"]), _time(row["finished_at"])
            out.append({"kind": f"{models[row['model_id']]}@{data}", "knobs": row["knobs"], "start": start, "end": end})
    return out


def replay(history: list[dict[str, Any]], trials: list[dict[str, Any]]) -> float:
    """The simulator's makespan for ``trials`` (their knobs, in the order they started), one per slot,
    on a cost model of ``history`` alone."""
    cost = CostModel()
    for t in history:
        cost.observe(t["kind"], "", t["knobs"], seconds=(t["end"] - t["start"]).total_seconds())
    ordered = sorted(trials, key=lambda t: t["start"])
    pending = [Pending(n, 1, t["kind"], "", t["knobs"]) for n, t in enumerate(ordered)]
    choice = choose_plan(
        pending,
        machines=[Machine("local", cores=SLOTS, slots=SLOTS)],
        jobs={1: Job(1, cap=SLOTS)},
        cost=cost,
        method="fcfs",
    )
    assert choice.outcome is not None, choice.fallback
    return choice.outcome.makespan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=4, help="trials of each template's warm-up job")
    parser.add_argument("--images", type=int, default=3000, help="Fashion-MNIST images of the MLP and CNN sets")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print("building the datasets", flush=True)
        data = build(folder / "data", args.images)
        settings = {"BAOBAB_ADMIN_EMAIL": EMAIL, "BAOBAB_ADMIN_PASSWORD": PASSWORD, "BAOBAB_CPU_SLOTS": str(SLOTS)}
        with LocalPlatform(folder / "home", workers=SLOTS, settings=settings) as baobab:
            client = Client(baobab.url)
            client.login(EMAIL, PASSWORD)
            datasets = {
                (kind, part): client.create_dataset(f"{kind} {part}", path, format=FORMATS[kind])["id"]
                for kind, parts in data.items()
                for part, path in parts.items()
            }
            models, ids = {}, {}
            for key, (file, class_name, task) in TEMPLATES.items():
                model = client.create_model(EXAMPLES / file, task=task, class_name=class_name, name=key)
                models[model["id"]], ids[key] = key, model["id"]

            def spec(app: str, keys: list[str], kind: str, trials: int) -> dict[str, Any]:
                return {
                    "app": app,
                    "task": TEMPLATES[keys[0]][2],
                    "train_dataset_id": datasets[kind, "train"],
                    "val_dataset_id": datasets[kind, "val"],
                    "model_ids": [ids[k] for k in keys],
                    "budget": {"MODEL_TRIAL_COUNT": trials, "GPU_COUNT": 0},
                    "train_args": {"fusion": "off", "warm_start": False},
                }

            def run(body: dict[str, Any]) -> dict[str, Any]:
                job = client.create_train_job(**body)
                return client.wait_for_train_job(job["app"], job["app_version"], timeout=3600, progress=False)

            # one template a job on its own data, or the two tabular ones on the pixels (logistic
            # regression on 784 pixels is a size of its own: a kind is a template on a dataset)
            mixes = [(["sklearn"], "cancer"), (["mlp"], "pixels"), (["cnn"], "images"), (["mlp", "sklearn"], "pixels")]
            history: list[dict[str, Any]] = []
            for key, kind in [("sklearn", "cancer"), ("sklearn", "pixels"), ("mlp", "pixels"), ("cnn", "images")]:
                print(f"warm-up: {key} on {kind}", flush=True)
                history += job_trials(client, run(spec(f"warmup-{key}-{kind}", [key], kind, args.warmup)), models, kind)
            rows = []
            for n in range(args.jobs):
                keys, kind = mixes[n] if n < len(mixes) else rng.choice(mixes)
                body = spec(f"job-{n}", keys, kind, rng.randint(3, 6))
                forecast = client.forecast_train_job(**{**body, "slots": SLOTS})
                blind = next((f["seconds"] for f in forecast["forecasts"] if f["method"] == "fcfs"), None)
                done = run(body)
                trials_run = job_trials(client, done, models, kind)
                measured = (max(t["end"] for t in trials_run) - min(t["start"] for t in trials_run)).total_seconds()
                known = [t for t in history if t["kind"] in {r["kind"] for r in trials_run}]
                replayed = replay(known, trials_run) if known else None
                row = {
                    "job": n,
                    "templates": "+".join(keys) + f" on {kind}",
                    "trials": len(trials_run),
                    "measured_s": round(measured, 2),
                    "forecast_s": None if blind is None else round(blind, 2),
                    "replay_s": None if replayed is None else round(replayed, 2),
                    "forecast_fallback": forecast["fallback"],
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
                history += trials_run
    write(rows, args, time.perf_counter() - began)


def _error(predicted: float | None, measured: float) -> float | None:
    return None if predicted is None or measured <= 0 else abs(predicted - measured) / measured


def write(rows: list[dict[str, Any]], args: argparse.Namespace, wall_s: float) -> None:
    for row in rows:
        row["forecast_error"] = _error(row["forecast_s"], row["measured_s"])
        row["replay_error"] = _error(row["replay_s"], row["measured_s"])
    medians = {
        way: statistics.median(e for e in (r[f"{way}_error"] for r in rows) if e is not None)
        for way in ("forecast", "replay")
        if any(r[f"{way}_error"] is not None for r in rows)
    }
    when = datetime.date.today().isoformat()
    machine = f"{platform.machine()}, {SLOTS} slots, Python {platform.python_version()}"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "placement.json").write_text(
        json.dumps({"date": when, "machine": machine, "args": vars(args) | {"out": str(args.out)},
                    "wall_s": round(wall_s, 1), "jobs": rows, "median_error": medians}, indent=2)
    )  # fmt: skip
    lines = [
        "# Placement: the simulator's fidelity",
        "",
        f"`bench/placement.py`, run {when} ({machine}; {wall_s / 60:.1f} min). Each job ran alone on "
        f"the platform's {SLOTS} slots, fusion and early stopping off, after a warm-up job of "
        f"{args.warmup} trials per template; see the script's docstring for what the setup favours.",
        "",
        "| job | templates | trials | measured (s) | forecast (s) | error | replay (s) | error |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        fe = "—" if r["forecast_error"] is None else f"{r['forecast_error']:.0%}"
        re_ = "—" if r["replay_error"] is None else f"{r['replay_error']:.0%}"
        lines.append(
            f"| {r['job']} | {r['templates']} | {r['trials']} | {r['measured_s']:.1f} | {r['forecast_s'] or '—'} | "
            f"{fe} | {r['replay_s'] or '—'} | {re_} |"
        )
    lines += ["", "Median error (aim: at most 15%): " + ", ".join(f"{k} {v:.0%}" for k, v in medians.items()) + "."]
    lines += [
        "",
        "*forecast*: before the job is created, its trials taken to be like the measured ones; "
        "*replay*: the job's own knobs, once proposed, on a cost model of the earlier jobs only.",
    ]
    (args.out / "placement.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
