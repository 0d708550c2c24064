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

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before NumPy loads: one BLAS thread, as bench/strategies.py
import platform
import sys
import time
import tracemalloc
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState, create_trial

from baobab.advisor import FlatPoint, TrialRecord, TrialStatus, make_strategy
from baobab.model import ArchKnob, CategoricalKnob, FloatKnob, IntegerKnob, KnobConfig, Knobs

sys.path.insert(0, str(Path(__file__).parent))  # the sibling benchmark, whichever way this one is loaded
from overhead import postgres_database  # noqa: E402
from setup_record import RunSetup, setup_markdown  # noqa: E402
from strategies import optuna_knobs  # noqa: E402

RESULTS = Path(__file__).parent / "results"
STRATEGIES = ("random", "tpe", "bayes", "evolution")
PEERS = ("optuna-tpe-postgres", "optuna-tpe-memory")
COUNTS = (100, 1_000, 10_000, 100_000)
QUICK_COUNTS = (100, 1_000)
#: Optuna on PostgreSQL stops here by default: its prefill (``add_trials``, one transaction per
#: trial) took 20 to 100 ms a trial on the shared 2-core machine, over half an hour for 100,000.
POSTGRES_COUNTS = (100, 1_000)
#: The issue's aims: p99 proposal ms per strategy.
AIMS_MS = {"random": 10.0, "tpe": 10.0, "bayes": 50.0}
#: The default database server for the PostgreSQL peer; ``--postgres`` or BAOBAB_BENCH_POSTGRES overrides it.
POSTGRES = os.environ.get("BAOBAB_BENCH_POSTGRES", "postgresql+psycopg2://postgres@127.0.0.1:5432/test")
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


def _memory(
    strategy: str, config: KnobConfig, fill: list[FlatPoint], failure_every: int, seed: int
) -> dict[str, float]:
    """Bytes a fresh strategy holds per record after observing ``fill`` (tracemalloc, in a pass of its
    own: tracing slows every allocation, so no proposal is timed under it)."""
    s = make_strategy(strategy, config, seed=seed)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for trial_id, point in enumerate(fill):
            s.observe(_record(trial_id, s.search_space.unflatten(point), failure_every))
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    return {"bytes_per_record": round(held / len(fill)), "mb_per_100k": round(held / len(fill) * 100_000 / 2**20, 1)}


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
        result.update(_memory(strategy, config, fill[: counts[-1]], failure_every, seed))
    for count in counts:
        start = time.perf_counter()
        while observed < count:
            s.observe(_record(observed, unflatten(fill[filled]), failure_every))
            observed += 1
            filled += 1
        fill_s = time.perf_counter() - start
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


#: Slots one scheduling pass fills at once, for :func:`measure_passes`.
PASS_SIZES = (4, 64, 256)


def measure_passes(
    strategy: str, count: int = 1000, *, sizes: Sequence[int] = PASS_SIZES, passes: int = 3, seed: int = 0
) -> dict[str, Any]:
    """Proposal latency against the trials pending: passes that fill ``size`` slots at once.

    The history is filled to ``count``; then each pass asks for ``size`` proposals, each with the
    ones before it pending (as the job driver's scheduling pass does when that many slots free at
    once), and observes their results afterwards. A strategy whose proposal time grows with the
    pending trials shows it here, where :func:`measure` keeps four pending.

    Returns:
        ``{"strategy", "space", "count", "passes", "points": [{"size", "propose": {...}}]}``.
    """
    config = SPACES["mixed"]()
    rng = np.random.default_rng(seed)
    fill = _fill_points(config, count, rng)
    s = make_strategy(strategy, config, seed=seed)
    unflatten = s.search_space.unflatten
    for trial_id, point in enumerate(fill):
        s.observe(_record(trial_id, unflatten(point), failure_every=20))
    observed = count
    points = []
    for size in sizes:
        times_s: list[float] = []
        for _ in range(passes):
            pending: list[Knobs] = []
            for _ in range(size):
                t0 = time.perf_counter()
                pending.append(s.propose(observed + len(pending), pending))
                times_s.append(time.perf_counter() - t0)
            for knobs in pending:
                s.observe(_record(observed, knobs, failure_every=20))
                observed += 1
        points.append({"size": size, "propose": _summary(times_s, sum(times_s))})
    return {"strategy": strategy, "space": "mixed", "count": count, "passes": passes, "points": points}


def _passes_table(results: list[dict[str, Any]]) -> str:
    sizes = [p["size"] for p in results[0]["points"]] if results else []
    lines = [
        "| method | " + " | ".join(f"{n} at once: p50 / p99 ms" for n in sizes) + " | p50, most / fewest |",
        "|---|" + "---:|" * (len(sizes) + 1),
    ]
    for r in results:
        cells = [f"{p['propose']['p50_ms']:.2f} / {p['propose']['p99_ms']:.2f}" for p in r["points"]]
        growth = r["points"][-1]["propose"]["p50_ms"] / max(r["points"][0]["propose"]["p50_ms"], 1e-9)
        lines.append(f"| {r['strategy']} | " + " | ".join(cells) + f" | {growth:.2f}x |")
    return "\n".join(lines)


# --- the peer: Optuna's ask/tell ------------------------------------------------------


def _optuna_distributions(config: KnobConfig) -> dict[str, BaseDistribution]:
    """The distributions ``optuna_knobs`` suggests for ``config``, by parameter name."""
    distributions: dict[str, BaseDistribution] = {}
    for name, knob in config.items():
        if isinstance(knob, ArchKnob):
            for i, choices in enumerate(knob.items):
                distributions[f"{name}{i}"] = CategoricalDistribution(list(choices))
        elif isinstance(knob, CategoricalKnob):
            distributions[name] = CategoricalDistribution(list(knob.values))
        elif isinstance(knob.value_min, int) and isinstance(knob.value_max, int):
            distributions[name] = IntDistribution(knob.value_min, knob.value_max, log=knob.is_exp)
        else:
            distributions[name] = FloatDistribution(knob.value_min, knob.value_max, log=knob.is_exp)
    return distributions


def _optuna_params(config: KnobConfig, knobs: Knobs) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for name, knob in config.items():
        if isinstance(knob, ArchKnob):
            params.update({f"{name}{i}": value for i, value in enumerate(knobs[name])})
        else:
            params[name] = knobs[name]
    return params


def measure_peer(
    peer: str,
    counts: Sequence[int] = COUNTS,
    *,
    space: str = "mixed",
    proposals: int = 20,
    budget_s: float = 120.0,
    pending: int = 4,
    failure_every: int = 20,
    seed: int = 0,
    postgres: str = POSTGRES,
    prefill_chunk: int = 1000,
) -> dict[str, Any]:
    """Optuna's TPESampler (its defaults) at each history size, as its users run it: ``ask``, suggest each
    knob, ``tell``.

    The study is prefilled with ``study.add_trials`` (the same synthetic points and scores as
    :func:`measure`, failures as PRUNED trials) in chunks of ``prefill_chunk``; ``pending``
    trials are asked first and left RUNNING. At each size up to ``proposals`` trials are
    timed, fewer when they take more than ``budget_s`` together (at least three).

    Args:
        peer: ``optuna-tpe-postgres`` (RDBStorage on a database created on ``postgres``'s
            server and dropped after) or ``optuna-tpe-memory``.

    Returns:
        As :func:`measure`, each point with ``"timed"`` (trials timed), ``"ask_tell"`` (the
        times of ask + suggestions + tell) and ``"prefill_s"`` (the ``add_trials`` time to reach
        the size) in place of ``propose``/``observe``/``fill_s``.
    """
    if peer not in PEERS:
        raise ValueError(f"unknown peer {peer!r}; known: {', '.join(PEERS)}")
    config = SPACES[space]()
    counts = _counts_for(space, counts)
    if peer == "optuna-tpe-postgres":
        with postgres_database(postgres) as url:
            storage = optuna.storages.RDBStorage(url)
            try:
                return _measure_optuna(
                    peer,
                    storage,
                    config,
                    space,
                    counts,
                    proposals,
                    budget_s,
                    pending,
                    failure_every,
                    seed,
                    prefill_chunk,
                )
            finally:
                storage.engine.dispose()
    return _measure_optuna(
        peer, None, config, space, counts, proposals, budget_s, pending, failure_every, seed, prefill_chunk
    )


def _measure_optuna(
    peer: str,
    storage: optuna.storages.BaseStorage | None,
    config: KnobConfig,
    space: str,
    counts: Sequence[int],
    proposals: int,
    budget_s: float,
    pending: int,
    failure_every: int,
    seed: int,
    prefill_chunk: int,
) -> dict[str, Any]:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=storage, sampler=optuna.samplers.TPESampler(seed=seed), direction="maximize")
    distributions = _optuna_distributions(config)
    unflatten = make_strategy("random", config, seed=0).search_space.unflatten
    fill = _fill_points(config, counts[-1] + len(counts) * proposals, np.random.default_rng(seed))
    for _ in range(pending):
        study.ask(distributions)
    points, finished, filled = [], 0, 0
    for count in counts:
        start = time.perf_counter()
        while finished < count:
            chunk = []
            for _ in range(min(prefill_chunk, count - finished)):
                record = _record(finished, unflatten(fill[filled]), failure_every)
                params = _optuna_params(config, record.knobs)
                if record.status is TrialStatus.COMPLETED:
                    chunk.append(create_trial(params=params, distributions=distributions, value=record.score))
                else:
                    chunk.append(create_trial(params=params, distributions=distributions, state=TrialState.PRUNED))
                finished += 1
                filled += 1
            study.add_trials(chunk)
        prefill_s = time.perf_counter() - start
        times: list[float] = []
        loop_start = time.perf_counter()
        while len(times) < proposals and (len(times) < 3 or sum(times) < budget_s):
            t0 = time.perf_counter()
            trial = study.ask()
            knobs = optuna_knobs(trial, config)
            record = _record(finished, knobs, failure_every)
            if record.status is TrialStatus.COMPLETED:
                study.tell(trial, record.score)
            else:
                study.tell(trial, state=TrialState.PRUNED)
            times.append(time.perf_counter() - t0)
            finished += 1
        loop_s = time.perf_counter() - loop_start
        points.append(
            {
                "count": count,
                "prefill_s": round(prefill_s, 2),
                "timed": len(times),
                "ask_tell": _summary(times, sum(times)),
                "loop_per_second": round(len(times) / loop_s, 1),
            }
        )
        print(f"  {peer} {space} {count}: {points[-1]}", file=sys.stderr, flush=True)
    return {"strategy": peer, "space": space, "pending": pending, "proposals": proposals, "points": points}


# --- the report -----------------------------------------------------------------------


def _table(results: list[dict[str, Any]]) -> str:
    """One row per method and history size: p50/p99 ms and proposals per second."""
    head = "| method | space | trials in history | p50 ms | p99 ms | max ms | proposals/s | aim (p99) |"
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for result in results:
        name = result["strategy"]
        for point in result["points"]:
            timed = point.get("propose") or point["ask_tell"]
            aim = f"<= {AIMS_MS[name]:g} ms" if name in AIMS_MS else ""
            if aim:
                aim += " ok" if timed["p99_ms"] <= AIMS_MS[name] else " MISSED"
            lines.append(
                f"| {name} | {result['space']} | {point['count']:,} | {timed['p50_ms']:.2f} | {timed['p99_ms']:.2f} "
                f"| {timed['max_ms']:.2f} | {point['loop_per_second']:,.0f} | {aim} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 and 1,000 trials, fewer proposals, no 100k peer")
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--peers", default=",".join(PEERS))
    parser.add_argument("--spaces", default=",".join(SPACES))
    parser.add_argument("--counts", help="history sizes, comma-separated (default 100,1000,10000,100000)")
    parser.add_argument("--memory-peer-counts", help="history sizes for Optuna in memory (default: --counts)")
    parser.add_argument("--postgres-counts", help="history sizes for Optuna on PostgreSQL (default 100,1000)")
    parser.add_argument("--proposals", type=int, default=200, help="proposals timed per size and strategy")
    parser.add_argument("--peer-proposals", type=int, default=20, help="ask/tell timed per size and peer")
    parser.add_argument("--peer-budget-s", type=float, default=120.0, help="time per size and peer before stopping")
    parser.add_argument("--pending", type=int, default=4)
    parser.add_argument("--postgres", default=POSTGRES, help="server for the PostgreSQL peer (a database is created)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    counts = _ints(args.counts) or list(QUICK_COUNTS if args.quick else COUNTS)
    peer_counts = {
        "optuna-tpe-memory": _ints(args.memory_peer_counts) or counts,
        "optuna-tpe-postgres": _ints(args.postgres_counts) or [c for c in counts if c <= POSTGRES_COUNTS[-1]],
    }
    proposals = 30 if args.quick else args.proposals
    peer_proposals = 5 if args.quick else args.peer_proposals
    strategies = [s for s in args.strategies.split(",") if s]
    peers = [p for p in args.peers.split(",") if p]
    unknown = sorted(set(peers) - set(PEERS)) + sorted(set(args.spaces.split(",")) - set(SPACES))
    if unknown:
        parser.error(f"unknown peers or spaces: {', '.join(unknown)}")

    started = time.perf_counter()
    setup = RunSetup(
        "Baobab: its strategies run in-process with no store, as the driver calls them (the driver writes each "
        "trial to PostgreSQL apart from the proposal; bench/scale.py measures that); Optuna's PostgreSQL figures "
        "include its storage round trips, which is how Optuna runs with more than one worker",
        placement="not applicable (no job driver: the strategies are called directly)",
        fusion="not applicable (no trial trains)",
        warm_start="not applicable (no trial trains)",
    )
    results, memory = [], {}
    for space in args.spaces.split(","):
        for name in strategies:
            start = time.perf_counter()
            result = measure(
                name, counts, space=space, proposals=proposals, pending=args.pending, memory=space == "mixed"
            )
            result["seconds"] = round(time.perf_counter() - start, 1)
            if "mb_per_100k" in result:
                memory[name] = result["bytes_per_record"]
            results.append(result)
            print(f"{name} {space}: {result['seconds']} s", file=sys.stderr, flush=True)
        for peer in peers:
            start = time.perf_counter()
            result = measure_peer(
                peer,
                peer_counts[peer],
                space=space,
                proposals=peer_proposals,
                budget_s=args.peer_budget_s,
                pending=args.pending,
                postgres=args.postgres,
            )
            result["seconds"] = round(time.perf_counter() - start, 1)
            results.append(result)
            print(f"{peer} {space}: {result['seconds']} s", file=sys.stderr, flush=True)

    passes = []
    for name in strategies:  # the pending trials of a pass that fills many slots at once
        start = time.perf_counter()
        passes.append(measure_passes(name, sizes=PASS_SIZES[:2] if args.quick else PASS_SIZES))
        print(f"{name} passes: {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)

    meta = {
        "date": datetime.date.today().isoformat(),
        "cores": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "optuna": optuna.__version__,
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "seconds": round(time.perf_counter() - started, 1),
        "quick": args.quick,
        "pending": args.pending,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    name = "scale_proposals-quick" if args.quick else "scale_proposals"
    record = setup.finish()
    (args.out / f"{name}.json").write_text(
        json.dumps({"meta": meta, "results": results, "passes": passes, "setup": record}, indent=1) + "\n"
    )
    (args.out / f"{name}.md").write_text(report(meta, results, memory, passes, record))
    print(report(meta, results, memory, passes, record))


def _extrapolated(results: list[dict[str, Any]]) -> str:
    """Minutes the PostgreSQL prefill would take for 100,000 trials at the rate measured at its largest size."""
    rates = [
        r["points"][-1]["prefill_s"] / r["points"][-1]["count"]
        for r in results
        if r["strategy"] == "optuna-tpe-postgres"
    ]
    if not rates:
        return "(not run)"
    return f"about {min(rates) * 100_000 / 60:.0f} to {max(rates) * 100_000 / 60:.0f} minutes"


def _ints(text: str | None) -> list[int]:
    return [int(c) for c in text.split(",")] if text else []


def report(
    meta: dict[str, Any],
    results: list[dict[str, Any]],
    memory: Mapping[str, int],
    passes: list[dict[str, Any]],
    setup: dict[str, Any],
) -> str:
    """The Markdown report of a run (``bench/scale.py`` embeds :func:`_table` of the same results)."""
    prefill = [
        f"{r['strategy']} ({r['space']}): "
        + ", ".join(f"{p['count']:,} in {p['prefill_s']:.0f} s" for p in r["points"])
        for r in results
        if r["strategy"] == "optuna-tpe-postgres"
    ]
    memory_lines = ", ".join(f"{name} {b} B ({b * 100_000 / 2**20:.0f} MiB per 100,000)" for name, b in memory.items())
    return f"""# Proposal latency against history size

Written by `bench/scale_proposals.py` on {meta["date"]}, {meta["cores"]} cores ({meta["machine"]}, Python
{meta["python"]}, Optuna {meta["optuna"]}), one BLAS thread, in {meta["seconds"]:.0f} s; load average
{meta["load_average_at_end"]} at the end: a machine shared with other work, so the p99 and max columns
carry other processes' pauses (the issue's aims are marked; a miss on a busy machine says so).

Each Baobab strategy's history is filled to the size with synthetic records (a fixed
score of the knobs, one in 20 failed), then proposals are timed, each followed by the
`observe` of its result, with {meta["pending"]} trials pending. `proposals/s` counts the
proposals and their observes. Spaces: `mixed` (two floats, two integers, two
categoricals) and `nb201` (NAS-Bench-201's cell: six positions of five operations,
15,625 points, filled with distinct points up to 10,000, where avoiding taken points
matters).

The peer is Optuna's `TPESampler()` with its defaults, as its users run it: `ask`, a
suggestion per knob, `tell`, on PostgreSQL (`RDBStorage`, a database created for the
run) and in memory; its study is prefilled with `study.add_trials` (the same points and
scores, failures as PRUNED) and has the same trials pending.

{_table(results)}

A scheduling pass that fills many slots at once asks a strategy for as many proposals in a
row, each with the ones before it pending. Here each strategy's history holds 1,000 records
of the `mixed` space; each pass proposes N points that way and then observes them, three
passes per N. The last column is how much a proposal's median grows from the smallest pass
to the largest (the issue's aim: not at all).

{_passes_table(passes)}

Memory a strategy holds per record (tracemalloc over the fill of the `mixed` space, at
the largest size): {memory_lines or "not measured"}.

Optuna on PostgreSQL stops at {POSTGRES_COUNTS[-1]:,} trials here (`--postgres-counts` takes more): its
prefill goes through `study.add_trials`, which Optuna runs as one transaction per trial,
and took {"; ".join(prefill) or "not run"}: at that rate 100,000 trials take
{_extrapolated(results)}, past this benchmark's quarter of an hour. Its ask/tell time already grows
with the trial count between 100 and {POSTGRES_COUNTS[-1]:,} (each `ask` reads every trial of the
study), as does Optuna's in memory (up to 100,000).

{setup_markdown(setup)}
"""


if __name__ == "__main__":
    main()
