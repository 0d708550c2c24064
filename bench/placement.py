"""Placement: the simulator's fidelity (predicted against measured makespans of 10 mixed jobs), and the
gain of the searched placement over the baselines on a mixed workload.

Part 1, **fidelity**. The platform (``baobab up``, SQLite, 2 local workers, 2 slots) runs
three templates of different sizes on a ``--images`` subset of Fashion-MNIST:
scikit-learn's logistic regression and the MLP on the pixels, the CNN on the images (about
a second to a minute a trial, by their knobs). First a warm-up job per template
(``--warmup`` trials) gives the cost model its first measurements; then 10 jobs of one or
two templates, 3 to 6 trials each, fusion off and no early stopping (what the simulator
plays is then what the driver runs: one trial per slot, first come first served), one
after another. For each job:

- **forecast**: ``Client.forecast_train_job`` before the job is created: the simulator on
  the cost model of every earlier trial, with the job's trials taken to be like the
  measured ones (their knobs are not proposed yet);
- **replay**: after the job ran, its trials' actual knobs played by the simulator
  (``fcfs``) on a cost model of the *earlier* jobs' trials only (the job's own times
  unseen), which is what the driver's planner would see once the trials are proposed;
- **measured**: the job's first trial start to its last trial end.

Errors are ``|predicted - measured| / measured``; the aim is a median error of at most 15%. The
predicted-against-measured chart is ``placement_fidelity.png``.
What the setup favours: one job at a time on a quiet machine, every template measured
before it is forecast (the warm-up), and fusion and early stopping off; ASHA's stops and
fused groups are not in it yet, nor are concurrent jobs.

Part 2, **gain**: three jobs at once on the same 2 slots (the MLP, the CNN and the
logistic regression as above, ``--gain-trials`` trials each), once a way, each way on a fresh
platform with ``BAOBAB_PLACEMENT`` set: ``fcfs`` (one trial per slot, first come first
served; the jobs' fusion off, so that no trial spends time measuring a fusion profile
that fcfs would not use), ``rules`` (the fixed rules, with groups sized by each
structure's profile), ``largest_first`` (groups of the profiled best size, longest first)
and ``search`` (the driver's default); all but fcfs with fusion ``auto``. In a repeat every
way's jobs have the same seeds, so that they propose the same first trials. Reported: trials
completed per hour (completed trials over the time from the first start to the last end)
and each job's best validation score over time. The aim is ``search`` at 1.5 times
``fcfs``'s trials per hour. The planner decides only once every job has a completed trial
(the rules place the first ones), and it sees slots, not threads.

Part 2 on a GPU, ``--gpu`` (gain only; ``placement_gpu.md``): the MLP and the CNN jobs, each with
``GPU_COUNT`` 1, on a platform of one worker on one CUDA GPU, so that one trial holds the GPU at a
time: ``fcfs`` (fusion off) is one trial per GPU; under the other ways fused groups are sized by
the profile each structure's first trial measures on the GPU (its step times, its stack bounded by
the device's free memory).

    .venv/bin/python bench/placement.py                      # about 20 minutes
    .venv/bin/python bench/placement.py --jobs 2 --warmup 2 --gain-trials 3 --images 1000 --out /tmp/placement
    python bench/placement.py --gpu --gain-trials 8                # on a CUDA machine
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import platform
import random
import statistics
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
from setup_record import RunSetup, setup_markdown
from shared_data import build_datasets

from baobab.advisor.placement import CostModel, Job, Machine, Pending, choose_plan
from baobab.sdk import Client
from baobab.store import build_fashion_mnist
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
FORMATS = {"pixels": "TABULAR", "images": "IMAGE_FILES"}


def _time(value: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(value)


def build(folder: Path, images: int) -> dict[str, dict[str, Path]]:
    pixels = build_datasets(folder / "pixels", images)
    built = build_fashion_mnist(folder / "images", limit=images, val_fraction=0.1, seed=0)
    return {
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


class Platform:
    """A fresh platform on ``home`` with the datasets and templates uploaded, placing trials by ``placement``."""

    def __init__(
        self,
        home: Path,
        data: dict[str, dict[str, Path]],
        placement: str,
        gpus: int = 0,
        more: Iterable[tuple[str, str]] = (),
    ) -> None:
        settings = {
            "BAOBAB_ADMIN_EMAIL": EMAIL,
            "BAOBAB_ADMIN_PASSWORD": PASSWORD,
            "BAOBAB_CPU_SLOTS": str(SLOTS),
            "BAOBAB_PLACEMENT": placement,
            **dict(more),
        }
        self.local = LocalPlatform(home, workers=gpus or SLOTS, settings=settings)
        self.data, self.gpus = data, gpus

    def __enter__(self) -> Platform:
        self.local.__enter__()
        self.client = client = Client(self.local.url)
        client.login(EMAIL, PASSWORD)
        self.datasets = {
            (kind, part): client.create_dataset(f"{kind} {part}", path, format=FORMATS[kind])["id"]
            for kind, parts in self.data.items()
            for part, path in parts.items()
        }
        self.models, self.ids = {}, {}
        for key, (file, class_name, task) in TEMPLATES.items():
            model = client.create_model(EXAMPLES / file, task=task, class_name=class_name, name=key)
            self.models[model["id"]], self.ids[key] = key, model["id"]
        return self

    def __exit__(self, *exc: object) -> None:
        self.local.__exit__(*exc)

    def spec(
        self, app: str, keys: list[str], kind: str, trials: int, fusion: str = "off", seed: int | None = None
    ) -> dict[str, Any]:
        seeded = {} if seed is None else {"seed": seed}
        return {
            **seeded,
            "app": app,
            "task": TEMPLATES[keys[0]][2],
            "train_dataset_id": self.datasets[kind, "train"],
            "val_dataset_id": self.datasets[kind, "val"],
            "model_ids": [self.ids[k] for k in keys],
            "budget": {"MODEL_TRIAL_COUNT": trials, "GPU_COUNT": self.gpus},
            "options": {"fusion": fusion, "warm_start": False},
        }

    def wait(self, job: dict[str, Any]) -> dict[str, Any]:
        return self.client.wait_for_train_job(job["app"], job["app_version"], timeout=3600, progress=False)


def fidelity(data: dict[str, dict[str, Path]], folder: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Part 1: each job's forecast and replay against its measured makespan."""
    rng = random.Random(args.seed)
    # one template a job, or the two tabular ones together (a kind is a template on a dataset)
    mixes = [(["sklearn"], "pixels"), (["mlp"], "pixels"), (["cnn"], "images"), (["mlp", "sklearn"], "pixels")]
    rows = []
    with Platform(folder / "fidelity", data, "rules") as bench:
        history: list[dict[str, Any]] = []
        for key, kind in [("sklearn", "pixels"), ("mlp", "pixels"), ("cnn", "images")]:
            print(f"fidelity: warm-up of {key} on {kind}", flush=True)
            job = bench.client.create_train_job(**bench.spec(f"warmup-{key}-{kind}", [key], kind, args.warmup))
            history += job_trials(bench.client, bench.wait(job), bench.models, kind)
        for n in range(args.jobs):
            keys, kind = mixes[n] if n < len(mixes) else rng.choice(mixes)
            body = bench.spec(f"job-{n}", keys, kind, rng.randint(3, 6))
            forecast = bench.client.forecast_train_job(**{**body, "slots": SLOTS})
            blind = next((f["seconds"] for f in forecast["forecasts"] if f["method"] == "fcfs"), None)
            trials_run = job_trials(bench.client, bench.wait(bench.client.create_train_job(**body)), bench.models, kind)
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
    return rows


GAIN_WAYS = ("fcfs", "rules", "largest_first", "search")
#: The jobs' fusion option under each way: fcfs never fuses, so its jobs do not measure fusion profiles either.
FUSION = {"fcfs": "off", "rules": "auto", "largest_first": "auto", "search": "auto"}
#: The gain workload: (app, templates, dataset), all created at once.
GAIN_JOBS = (("mlp", ["mlp"], "pixels"), ("cnn", ["cnn"], "images"), ("sklearn", ["sklearn"], "pixels"))
#: On a GPU: the torch jobs alone, and the ways to compare (each ~ a fresh platform, so few).
GPU_JOBS, GPU_WAYS = GAIN_JOBS[:2], ("fcfs", "rules", "search")


def gain(data: dict[str, dict[str, Path]], folder: Path, args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Part 2: the same three jobs at once under each placement, the ways in turn ``--repeats`` times; trials
    per hour (the median repeat's) and best scores over time (the first repeat's)."""
    ways: dict[str, dict[str, Any]] = {}
    rng = random.Random(args.seed)
    # Every way of a repeat searches from the same seeds: one trial at a time, the same knobs (fused groups
    # and the order trials end in still change what the strategies see).
    seeds = {(app, repeat): rng.randrange(2**31) for repeat in range(args.repeats) for app, _, _ in GAIN_JOBS}
    for repeat, way in itertools.product(range(args.repeats), GPU_WAYS if args.gpu else GAIN_WAYS):
        print(f"gain: {way}, repeat {repeat + 1}", flush=True)
        home = folder / f"gain-{way}-{repeat}"
        with Platform(home, data, way, gpus=int(args.gpu), more=args.setting) as bench:
            jobs = {
                app: bench.client.create_train_job(
                    **bench.spec(app, keys, kind, args.gain_trials, fusion=FUSION[way], seed=seeds[app, repeat])
                )
                for app, keys, kind in (GPU_JOBS if args.gpu else GAIN_JOBS)
            }
            finished = {app: bench.wait(job) for app, job in jobs.items()}
            rows = []
            for app, job in finished.items():
                for row in bench.client.iter_trials(job["app"], job["app_version"]):
                    if row["started_at"] and row["finished_at"]:
                        rows.append((app, row))
        start = min(_time(row["started_at"]) for _, row in rows)
        end = max(_time(row["finished_at"]) for _, row in rows)
        span = (end - start).total_seconds()
        completed = [(app, row) for app, row in rows if row["status"] == "COMPLETED"]
        timeline = sorted(
            ((_time(row["finished_at"]) - start).total_seconds(), app, row["score"], row["fused_group"] is not None)
            for app, row in completed
        )
        run = {
            "completed": len(completed),
            "span_s": round(span, 1),
            "trials_per_hour": round(len(completed) / span * 3600, 1),
            "fused": sum(fused for *_, fused in timeline),
            "best": {app: max((score for _, a, score, _ in timeline if a == app and score is not None), default=None)
                     for app, _, _ in (GPU_JOBS if args.gpu else GAIN_JOBS)},
        }  # fmt: skip
        print(json.dumps(run), flush=True)
        ways.setdefault(way, {**run, "timeline": timeline, "repeats": []})["repeats"].append(run)
    for w in ways.values():  # the median repeat's rate; the rest is the first repeat's
        w["trials_per_hour"] = statistics.median(run["trials_per_hour"] for run in w["repeats"])
    return ways


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=4, help="trials of each template's warm-up job")
    parser.add_argument("--gain-trials", type=int, default=12, help="trials of each job of the gain workload")
    parser.add_argument("--images", type=int, default=2000, help="Fashion-MNIST images of the MLP and CNN sets")
    parser.add_argument("--parts", default="fidelity,gain")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3, help="of the gain part's ways, in turn")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--gpu", action="store_true", help="the gain part alone, on one CUDA GPU")
    parser.add_argument("--setting", type=lambda s: tuple(s.split("=", 1)), action="append", default=[],
                        help="BAOBAB_NAME=VALUE: one more setting of the gain's platforms (repeatable)")  # fmt: skip
    args = parser.parse_args()
    parts = {"gain"} if args.gpu else set(args.parts.split(","))
    setup = run_setup(parts, args)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print("building the datasets", flush=True)
        data = build(folder / "data", args.images)
        rows = fidelity(data, folder, args) if "fidelity" in parts else []
        ways = gain(data, folder, args) if "gain" in parts else {}
    write(rows, ways, args, setup.finish())


def run_setup(parts: set[str], args: argparse.Namespace) -> RunSetup:
    """The record of the parts run: each part's placement and fusion, and what each favours."""
    ways = GPU_WAYS if args.gpu else GAIN_WAYS
    placement, fusion, favours = {}, {}, []
    if "fidelity" in parts:
        placement["fidelity"], fusion["fidelity"] = "rules", "off"
        favours.append(
            "the forecast: each job runs alone, every template measured before it is forecast (the warm-up), "
            "fusion and early stopping off; ASHA's stops, fused groups and concurrent jobs are not in it"
        )
    if "gain" in parts:
        placement["gain"] = f"each way in turn ({', '.join(ways)})"
        fusion["gain"] = ", ".join(f"{way} {FUSION[way]}" for way in ways)
        favours.append(
            "the gain: no way in particular: the same jobs from the same seeds on a fresh platform per way, in "
            "turn; fcfs's jobs run with fusion off, so none of its trials measures a fusion profile it would not "
            "use; the planner sees slots, not threads"
            + ("; one trial or fused group at a time on the GPU" if args.gpu else "")
        )
    more = {"more_settings": ", ".join(f"{k}={v}" for k, v in args.setting)} if args.setting else {}
    return RunSetup("; ".join(favours), placement=placement, fusion=fusion, warm_start=False, **more)


def _error(predicted: float | None, measured: float) -> float | None:
    return None if predicted is None or measured <= 0 else abs(predicted - measured) / measured


def write(
    rows: list[dict[str, Any]], ways: dict[str, dict[str, Any]], args: argparse.Namespace, setup: dict[str, Any]
) -> None:
    for row in rows:
        row["forecast_error"] = _error(row["forecast_s"], row["measured_s"])
        row["replay_error"] = _error(row["replay_s"], row["measured_s"])
    medians = {
        way: statistics.median(e for e in (r[f"{way}_error"] for r in rows) if e is not None)
        for way in ("forecast", "replay")
        if any(r[f"{way}_error"] is not None for r in rows)
    }
    when = datetime.date.today().isoformat()
    stem = "placement_gpu" if args.gpu else "placement"
    where = f"one {gpu_name()}, one trial or fused group at a time" if args.gpu else f"{SLOTS} slots"
    machine = f"{platform.machine()}, {where}, Python {platform.python_version()}"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.json").write_text(
        json.dumps({"date": when, "machine": machine, "args": vars(args) | {"out": str(args.out)}, "setup": setup,
                    "fidelity": rows, "median_error": medians, "gain": ways}, indent=2)
    )  # fmt: skip
    lines = [
        "# Placement: the simulator's fidelity and the searched placement's gain",
        "",
        f"`bench/placement.py`, run {when} ({machine}; {setup['minutes']:.1f} min in all); its setup, and what "
        "each part's setup favours, at the end.",
    ]
    if rows:
        lines += [
            "",
            "## Fidelity",
            "",
            f"Each job ran alone on {SLOTS} slots, fusion and early stopping off, after a warm-up job of "
            f"{args.warmup} trials per template.",
            "",
            "| job | templates | trials | measured (s) | forecast (s) | error | replay (s) | error |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            fe = "—" if r["forecast_error"] is None else f"{r['forecast_error']:.0%}"
            re_ = "—" if r["replay_error"] is None else f"{r['replay_error']:.0%}"
            lines.append(
                f"| {r['job']} | {r['templates']} | {r['trials']} | {r['measured_s']:.1f} | "
                f"{r['forecast_s'] or '—'} | {fe} | {r['replay_s'] or '—'} | {re_} |"
            )
        fidelity_chart(rows, args.out / f"{stem}_fidelity.png")
        lines += [
            "",
            f"![predicted against measured]({stem}_fidelity.png)",
            "",
            "Median error (aim: at most 15%): " + ", ".join(f"{k} {v:.0%}" for k, v in medians.items()) + ". "
            "*forecast*: before the job is created, its trials taken to be like the measured ones; "
            "*replay*: the job's own knobs, once proposed, on a cost model of the earlier jobs only.",
        ]
    if ways:
        base, jobs = ways["fcfs"]["trials_per_hour"], GPU_JOBS if args.gpu else GAIN_JOBS
        lines += [
            "",
            "## Gain",
            "",
            f"{len(jobs)} jobs at once ({', '.join(app for app, _, _ in jobs)}; {args.gain_trials} trials each; "
            f"fusion off under fcfs, auto otherwise) on {where}, a fresh platform per way; the ways ran in "
            f"turn {args.repeats} times. Trials per hour: the median repeat's, each repeat's in brackets; the "
            "rest, and the chart: the first repeat's.",
            "",
            "| placement | completed | span (s) | trials per hour | vs fcfs | fused trials | best scores |",
            "|---|---|---|---|---|---|---|",
        ]
        for way, w in ways.items():
            best = ", ".join(f"{app} {score:.3f}" for app, score in w["best"].items() if score is not None)
            each = ", ".join(f"{run['trials_per_hour']:.0f}" for run in w["repeats"])
            lines.append(
                f"| {way} | {w['completed']} | {w['span_s']} | {w['trials_per_hour']:.0f} ({each}) | "
                f"{w['trials_per_hour'] / base:.2f}x | {w['fused']} | {best} |"
            )
        lines += ["", "Aim: search at 1.5x fcfs's trials per hour.", "", f"![trials over time]({stem}.png)"]
        chart(ways, args.out / f"{stem}.png")
    lines += ["", setup_markdown(setup)]
    (args.out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def gpu_name() -> str:
    import torch  # the platform's trials import it; here only to name the GPU

    if not torch.cuda.is_available():
        return "CPU, no GPU (a check of the script)"
    props = torch.cuda.get_device_properties(0)
    return f"{props.name} ({props.total_memory / 2**30:.0f} GiB)"


def fidelity_chart(rows: list[dict[str, Any]], path: Path) -> None:
    """Each job's predicted makespan (forecast and replay) against the measured one, with the 15% band."""
    matplotlib.use("Agg")
    fig, ax = plt.subplots(figsize=(4.8, 4.2))
    top = max([r["measured_s"] for r in rows] + [r[k] or 0.0 for r in rows for k in ("forecast_s", "replay_s")]) * 1.1
    ax.plot([0, top], [0, top], color="grey", linewidth=1, label="predicted = measured")
    ax.fill_between([0, top], [0, 0.85 * top], [0, 1.15 * top], color="grey", alpha=0.15, label="within 15%")
    for key, marker in (("forecast_s", "o"), ("replay_s", "x")):
        points = [(r["measured_s"], r[key]) for r in rows if r[key] is not None]
        ax.scatter([m for m, _ in points], [p for _, p in points], marker=marker, label=key.removesuffix("_s"))
    ax.set_xlabel("measured makespan (s)")
    ax.set_ylabel("predicted makespan (s)")
    ax.set_title("the simulator: predicted against measured")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def chart(ways: dict[str, dict[str, Any]], path: Path) -> None:
    """Completed trials and each job's best validation score against time, a line per placement."""
    matplotlib.use("Agg")
    apps = list(next(iter(ways.values()))["best"])
    fig, axes = plt.subplots(1, 1 + len(apps), figsize=(4 * (1 + len(apps)), 3.2))
    for way, w in ways.items():
        times = [t for t, *_ in w["timeline"]]
        axes[0].step(times, range(1, len(times) + 1), where="post", label=way)
        for ax, app in zip(axes[1:], apps, strict=True):
            best, xs, ys = None, [], []
            for t, a, score, _ in w["timeline"]:
                if a == app and score is not None:
                    best = score if best is None else max(best, score)
                    xs.append(t)
                    ys.append(best)
            ax.step(xs, ys, where="post", label=way)
            ax.set_title(f"{app}: best validation score")
            ax.set_xlabel("seconds")
    axes[0].set_title("trials completed")
    axes[0].set_xlabel("seconds")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
