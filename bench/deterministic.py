"""What deterministic mode costs in wall time: the same job with and without ``deterministic``.

The real job driver, strategy and store (SQLite) run one job against a simulated cluster
on a virtual clock (:class:`baobab.testing.SimulatedCluster`), so the figures are
virtual seconds: they depend on the trial lengths drawn, not on this machine. Each job
has 200 trials of random search (the window's cost does not depend on the strategy:
what waits is the start of a trial, not its proposal) on ``S`` slots (GPU_COUNT = S),
with log-normal trial lengths (median 60 s, sigma ``spread`` of their logarithm) drawn
from a seed per repeat, the same for both modes. Measured per run: the job's wall time
(first trial start to last trial end) and, in deterministic mode, what the job stored of
its wait (seconds with a slot held idle by the window, and those slot-seconds).

The command line writes ``results/deterministic.json`` and ``.md``::

    python bench/deterministic.py            # S = 2, 4, 8; spread 0.5 and 1.0; 3 repeats (a few minutes)
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from setup_record import RunSetup, setup_markdown
from sqlalchemy import select

from baobab import Settings
from baobab.advisor import JobDriver, _deterministic
from baobab.store import LocalEventChannel, TrainJob, create_engine_from_url, session_scope, upgrade_database
from baobab.testing import SimulatedCluster, SimulatedWork, VirtualClock, add_simulated_jobs, run_simulation

RESULTS = Path(__file__).resolve().parent / "results"
TRIALS = 200
SLOTS = (2, 4, 8)
SPREADS = (0.5, 1.0)
#: The windows compared: the default, and twice it (a job's window is stored when it starts: set before each job).
WINDOWS = (_deterministic.WINDOW, 2 * _deterministic.WINDOW)
REPEATS = 3


@dataclass(frozen=True)
class _Lengths(SimulatedWork):
    """Trial lengths from the repeat's seed and the trial id; the score from the knobs alone."""

    repeat: int = 0

    def draw(self, trial_id: int, knobs: Any) -> tuple[float, float]:
        rng = np.random.default_rng([self.repeat, trial_id])
        return self.median_s * math.exp(self.spread * float(rng.standard_normal())), self.score(knobs)


def run(slots: int, spread: float, repeat: int, window: int | None, home: Path) -> dict[str, float]:
    """One job to its end in a database of its own (trial ids, which draw the lengths, from 1), deterministic
    with ``window`` unless None; its wall time in virtual seconds and, when deterministic, its stored wait."""
    name = f"s{slots}-{spread}-{repeat}-{window}"
    deterministic = window is not None
    if window is not None:
        _deterministic.WINDOW = window
    url = f"sqlite:///{home / name}.db"
    upgrade_database(url)
    engine = create_engine_from_url(url)
    events, clock = LocalEventChannel(), VirtualClock()
    cluster = SimulatedCluster(engine, events, clock, slots=slots, work=_Lengths(spread=spread, repeat=repeat))
    settings = Settings.from_env(environ={}, home=home, cpu_slots=slots)
    driver = JobDriver(engine, cluster, events, settings, clock=clock, stop_check_s=3600)
    options = {"deterministic": True} if deterministic else {}
    (job_id,) = add_simulated_jobs(engine, events, jobs=1, trials=TRIALS, gpus=slots, options=options)
    report = run_simulation(driver, cluster, max_virtual_s=365 * 24 * 3600)
    with session_scope(engine) as session:
        placement = session.scalar(select(TrainJob.placement).where(TrainJob.id == job_id)) or {}
    engine.dispose()
    wait = placement.get("deterministic") or {}
    return {"wall_s": report.span_s, "wait_s": wait.get("wait_s", 0.0), "idle_slot_s": wait.get("idle_slot_s", 0.0)}


def main() -> None:
    # No options: a parser all the same, so that --help says what this runs instead of running it.
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    setup = RunSetup(
        "nothing: virtual time, the same trial lengths for both modes",
        placement=Settings.from_env(environ={}).placement.value,  # what run()'s driver runs under
        fusion="off",
        warm_start="not applicable (simulated trials, no weights)",
    )
    rows: list[dict[str, Any]] = []
    default = _deterministic.WINDOW
    plains: dict[tuple[int, float, int], dict[str, float]] = {}  # the plain job runs once per draw
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        for window in WINDOWS:
            for slots in SLOTS:
                for spread in SPREADS:
                    ratios, plain_s, det_s, waits = [], [], [], []
                    for repeat in range(REPEATS):
                        key = (slots, spread, repeat)
                        plain = plains[key] = plains.get(key) or run(slots, spread, repeat, None, home)
                        det = run(slots, spread, repeat, window, home)
                        ratios.append(det["wall_s"] / plain["wall_s"])
                        plain_s.append(plain["wall_s"])
                        det_s.append(det["wall_s"])
                        waits.append(det["idle_slot_s"] / (slots * det["wall_s"]))
                    rows.append(_row(window, slots, spread, plain_s, det_s, ratios, waits))
                    print(rows[-1], flush=True)
    _deterministic.WINDOW = default
    result = {
        "trials": TRIALS,
        "window": default,
        "repeats": REPEATS,
        "median_trial_s": 60.0,
        "rows": rows,
        "by_key": {f"w{row['window']}_s{row['slots']}_spread{row['spread']}": row for row in rows},
        "setup": setup.finish(),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "deterministic.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "deterministic.md").write_text(_markdown(result))


def _row(
    window: int,
    slots: int,
    spread: float,
    plain_s: list[float],
    det_s: list[float],
    ratios: list[float],
    waits: list[float],
) -> dict[str, Any]:
    return {
        "window": window,
        "slots": slots,
        "spread": spread,
        "wall_s_plain": [round(s, 1) for s in plain_s],
        "wall_s_deterministic": [round(s, 1) for s in det_s],
        "ratio": [round(r, 4) for r in ratios],
        "median_ratio": round(statistics.median(ratios), 4),
        "idle_share": [round(w, 4) for w in waits],
        "median_idle_share": round(statistics.median(waits), 4),
    }


def _markdown(result: dict[str, Any]) -> str:
    lines = [
        "# What deterministic mode costs in wall time",
        "",
        f"Written by `bench/deterministic.py` on {result['setup']['date']}: one job of {result['trials']} "
        f"random-search trials on S slots (GPU_COUNT = S), window W = {result['window']} (the default) and twice "
        "it, on a simulated cluster in virtual time (the real driver and store; the figures depend on the trial "
        "lengths drawn, not on the machine). Trial lengths are log-normal, median 60 s, sigma `spread` of their "
        f"logarithm, {result['repeats']} draws, the same draw for both modes. `ratio` is the deterministic job's "
        "wall time (first start to last end) over the plain job's; `idle share` the slot-seconds the window held "
        "idle over the deterministic job's slot-seconds.",
        "",
        "| W | slots | spread | wall time plain (s) | deterministic (s) | ratio (median) | idle share (median) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        lines.append(
            f"| {row['window']} | {row['slots']} | {row['spread']} | {statistics.median(row['wall_s_plain']):,.0f} | "
            f"{statistics.median(row['wall_s_deterministic']):,.0f} | {row['median_ratio']:.3f}x | "
            f"{100 * row['median_idle_share']:.1f}% |"
        )
    lines += ["", setup_markdown(result["setup"])]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
