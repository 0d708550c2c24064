"""Proposal latency against history size: Baobab's strategies, with Optuna's ask/tell as the peer.

Issue 18 asks that a proposal stay flat from trial 100 to trial 100,000 of one sub-job: at
most 10 ms p99 for ``random`` and ``tpe``, 50 ms for ``bayes``. For each strategy and each
history size this fills the strategy's history to that size quickly (``observe`` of
synthetic records, no proposal), then times ``proposals`` proposals, each followed by the
``observe`` of its result (the loop a job driver runs), with ``pending`` trials out.

Two search spaces:

- ``mixed``: two floats (one log-scale), two integers (one log-scale) and two
  categoricals; continuous, so no point is ever taken twice.
- ``nb201``: NAS-Bench-201's cell, six positions of five operations (15,625 points) as
  one ArchKnob. A discrete space's strategies skip observed and pending points, so the
  history is filled with distinct points and stops at 10,000 (64% of the space); past
  that a proposal would be hunting the last untaken points.

Scores are a fixed function of the knobs (:func:`synthetic_score`), so the models have
something to fit; the figures are times, not search quality (``bench/strategies.py``
measures that).

The peer is Optuna 5 itself, used as its users do, on the same trial counts: a study
prefilled with ``study.add_trials`` (so that 100,000 trials are reachable), then
``ask`` + ``suggest_*`` + ``tell`` timed, with ``TPESampler`` on PostgreSQL
(``RDBStorage``, a database created for the run and dropped after) and in memory. Optuna
adds each asked trial to the study, so its history grows the same way.

:func:`measure` is the function other benchmarks call (``bench/scale.py`` embeds its
table); it returns plain JSON data. The command line writes
``results/scale_proposals.json`` and ``.md``::

    python bench/scale_proposals.py            # every strategy and peer, 100 to 100,000 (minutes)
    python bench/scale_proposals.py --quick    # 100 and 1,000 only, fewer proposals
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import os
import platform
import sys
import time
import tracemalloc
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from baobab.advisor import FlatPoint, TrialRecord, TrialStatus, make_strategy
from baobab.model import ArchKnob, CategoricalKnob, FloatKnob, IntegerKnob, KnobConfig, Knobs

RESULTS = Path(__file__).parent / "results"
STRATEGIES = ("random", "tpe", "bayes", "evolution")
PEERS = ("optuna-tpe-postgres", "optuna-tpe-memory")
COUNTS = (100, 1_000, 10_000, 100_000)
QUICK_COUNTS = (100, 1_000)
#: The issue's aims: p99 proposal ms per strategy.
AIMS_MS = {"random": 10.0, "tpe": 10.0, "bayes": 50.0}
#: The default database server for the PostgreSQL peer; ``--postgres`` or BAOBAB_BENCH_POSTGRES overrides it.
POSTGRES = os.environ.get("BAOBAB_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
#: The most points of the discrete space a history fills: past that a proposal hunts for the last free points.
DISCRETE_FILL = 10_000


def mixed_config() -> KnobConfig:
    return {
        "lr": FloatKnob(1e-5, 1.0, is_exp=True),
        "momentum": FloatKnob(0.0, 0.99),
        "units": IntegerKnob(8, 1024, is_exp=True),
        "depth": IntegerKnob(1, 8),
        "optimizer": CategoricalKnob(["sgd", "adam", "rmsprop"]),
        "activation": CategoricalKnob(["relu", "gelu", "tanh", "silu"]),
    }


def nb201_config() -> KnobConfig:
    ops = ["none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3"]
    return {"cell": ArchKnob([list(ops) for _ in range(6)])}


SPACES: dict[str, Callable[[], KnobConfig]] = {"mixed": mixed_config, "nb201": nb201_config}


def synthetic_score(knobs: Mapping[str, Any]) -> float:
    """A smooth score of the knobs with one optimum: numbers near a point, choices by position."""
    if "cell" in knobs:
        ops = nb201_config()["cell"].items[0]
        return float(sum((i + 1) * ops.index(op) % 7 for i, op in enumerate(knobs["cell"])))
    return (
        -((math.log10(knobs["lr"]) + 2.5) ** 2)
        - (knobs["momentum"] - 0.9) ** 2
        - (math.log2(knobs["units"]) - 7) ** 2 / 10
        - abs(knobs["depth"] - 3) / 4
        + ["sgd", "adam", "rmsprop"].index(knobs["optimizer"]) / 10
        + ["relu", "gelu", "tanh", "silu"].index(knobs["activation"]) / 20
    )


def _fill_points(config: KnobConfig, n: int, rng: np.random.Generator) -> list[FlatPoint]:
    """``n`` random flat points of ``config``; distinct in a discrete space (at most its size)."""
    strategy = make_strategy("random", config, seed=0)
    space = strategy.search_space
    if space.is_discrete:
        sizes = [len(d.choices) if d.is_categorical else int(d.high - d.low) + 1 for d in space.dimensions]
        total = math.prod(sizes)
        codes = rng.choice(total, size=min(n, total), replace=False)
        points = []
        for code in codes.tolist():
            point = []
            for dim, size in zip(space.dimensions, sizes, strict=True):
                code, digit = divmod(code, size)
                point.append(digit if dim.is_categorical else int(dim.low) + digit)
            points.append(tuple(point))
        return points
    return [space.from_unit(u) for u in space.sample_unit(rng, n)]


def _record(trial_id: int, knobs: Knobs, failure_every: int) -> TrialRecord:
    if failure_every and trial_id % failure_every == failure_every - 1:
        return TrialRecord(trial_id, knobs, TrialStatus.FAILED)
    return TrialRecord(trial_id, knobs, TrialStatus.COMPLETED, synthetic_score(knobs))


def _summary(times_s: Sequence[float], wall_s: float) -> dict[str, float]:
    ms = np.asarray(times_s) * 1e3
    return {
        "p50_ms": round(float(np.percentile(ms, 50)), 3),
        "p99_ms": round(float(np.percentile(ms, 99)), 3),
        "max_ms": round(float(ms.max()), 3),
        "per_second": round(len(ms) / wall_s, 1),
    }


def _counts_for(space: str, counts: Sequence[int]) -> list[int]:
    if space == "nb201":
        return [c for c in counts if c <= DISCRETE_FILL]
    return list(counts)


def measure(
    strategy: str,
    counts: Sequence[int] = COUNTS,
    *,
    space: str = "mixed",
    proposals: int = 100,
    pending: int = 4,
    failure_every: int = 20,
    seed: int = 0,
    memory: bool = False,
) -> dict[str, Any]:
    """Proposal latency of one Baobab strategy at each history size.

    Args:
        strategy: a strategy name (``random``, ``tpe``, ``bayes``, ``evolution``, ...).
        counts: history sizes, ascending; ``nb201`` stops at 10,000.
        space: ``mixed`` or ``nb201`` (see the module docstring).
        proposals: proposals timed at each size (each one then observed, so the history grows by as many).
        pending: trials out while proposing (the ``pending`` argument, as the driver passes its running trials).
        failure_every: every this-many-th record is a failure (0: none).
        seed: the strategy's seed and the fill's.
        memory: also measure the bytes the strategy holds per record (tracemalloc over the fill; slows the fill).

    Returns:
        ``{"strategy", "space", "pending", "proposals", "points": [...]}`` where each point is
        ``{"count", "fill_s", "propose": {"p50_ms", "p99_ms", "max_ms", "per_second"},
        "observe": {...same keys}, "loop_per_second"}`` (``loop_per_second``: proposals and
        their observes per second), and with ``memory`` also ``"bytes_per_record"`` and
        ``"mb_per_100k"`` measured at the largest count.
    """
    config = SPACES[space]()
    counts = _counts_for(space, counts)
    rng = np.random.default_rng(seed)
    top = counts[-1] + len(counts) * proposals
    fill = _fill_points(config, top, rng)
    s = make_strategy(strategy, config, seed=seed)
    # Pending trials: proposals of trials that have not finished, taken out of the fill so a
    # discrete space never sees them observed.
    unflatten = s.search_space.unflatten  # fresh knob values per record, as the driver's are
    out = [unflatten(fill.pop()) for _ in range(pending)]
    result: dict[str, Any] = {"strategy": strategy, "space": space, "pending": pending, "proposals": proposals}
    points = []
    observed = 0  # records observed, and the next trial id
    filled = 0  # fill points used
    if memory:
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
    for count in counts:
        start = time.perf_counter()
        while observed < count:
            s.observe(_record(observed, unflatten(fill[filled]), failure_every))
            observed += 1
            filled += 1
        fill_s = time.perf_counter() - start
        if memory and count == counts[-1]:
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - before
            tracemalloc.stop()
            result["bytes_per_record"] = round(held / count)
            result["mb_per_100k"] = round(held / count * 100_000 / 2**20, 1)
        propose_s, observe_s = [], []
        loop_start = time.perf_counter()
        for _ in range(proposals):
            t0 = time.perf_counter()
            knobs = s.propose(observed, out)
            t1 = time.perf_counter()
            s.observe(_record(observed, knobs, failure_every))
            t2 = time.perf_counter()
            observed += 1
            propose_s.append(t1 - t0)
            observe_s.append(t2 - t1)
        loop_s = time.perf_counter() - loop_start
        points.append(
            {
                "count": count,
                "fill_s": round(fill_s, 2),
                "propose": _summary(propose_s, sum(propose_s)),
                "observe": _summary(observe_s, sum(observe_s)),
                "loop_per_second": round(proposals / loop_s, 1),
            }
        )
    result["points"] = points
    return result
