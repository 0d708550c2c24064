"""Baobab at scale: the real job driver on 1,000 simulated slots, proposals at 100,000 trials, the API on
a 100,000-trial job, all on PostgreSQL.

A cluster of a thousand workers cannot run here, so the **driver** part runs the real
:class:`~baobab.advisor.JobDriver` (its strategies, stopping rules and store) against
:class:`~baobab.testing.SimulatedCluster`, whose trials take time on a virtual clock
(see :mod:`baobab.testing._simulated`): 100 jobs of 1,000 trials each on 1,000 slots, a
mix of strategies, early stopping (ASHA) on a third of the jobs. The driver's wall time
is charged to the virtual clock (``charge=True``): each moment it spends deciding, the
cluster waits for it, so its slowness shows as idle slots. It reports:

- slot utilisation in virtual time, over the whole run and while there was work to start
  (the drain at the end, the last trials finishing with nothing left to start, depends on
  the spread of trial durations and no scheduler avoids it);
- the driver's CPU time per trial (its own thread, in ``step`` and ``handle``; the
  simulated workers' writes are a real cluster's workers' and are not counted), and the
  share of it spent proposing;
- the memory the driver holds (``pympler.asizeof`` of its job states) as the trials
  mount, and its strategies' share.

Trials of a minute leave the driver 60 ms per trial on 1,000 slots; the **short** part
runs 10,000 trials of 5 s on the same 1,000 slots (200 ending a second), where a slow
driver would show as idle slots; the **advisors** part the same work, and trials of 1 s,
shared by 1, 2 and 4 drivers with leases (``baobab advisor`` processes), charged the slowest
driver's time of each turn as if each ran on a machine of its own; the **long** part one job
of 20,000 trials, for what the driver holds of a long job.

The **proposals** part runs ``bench/scale_proposals.py`` (each strategy's proposal latency
from trial 100 to 100,000 in one sub-job, against Optuna's ask/tell with TPE on the same
PostgreSQL and in memory), and the **api** part ``bench/scale_api.py`` (listing,
sorting, filtering, the changes feed and ``best_trials`` of jobs of 1k, 10k and 100k
trials through the real HTTP API). Each writes its own results; ``scale.md`` holds the
driver's and embeds the latest full report of the other two, each with its own date, so
one part can be rerun alone.

    .venv/bin/python bench/scale.py                       # every part, full size (about 80 minutes on 2 busy cores)
    .venv/bin/python bench/scale.py --parts driver        # one part
    .venv/bin/python bench/scale.py --quick               # 10 jobs, 10,000 trials, 100 slots; small parts

Results: ``bench/results/scale.md`` and ``scale.json`` (``scale-quick.*`` for ``--quick``).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from overhead import postgres_database  # noqa: E402
from pympler import asizeof  # noqa: E402
from setup_record import RunSetup, oldest, setup_markdown  # noqa: E402
from sqlalchemy import create_engine  # noqa: E402

from baobab import Settings  # noqa: E402
from baobab.advisor import JobDriver  # noqa: E402
from baobab.advisor.driver import _telemetry  # noqa: E402
from baobab.store import LocalEventChannel, create_engine_from_url, upgrade_database  # noqa: E402
from baobab.testing import (  # noqa: E402
    SimulatedCluster,
    SimulatedWork,
    Simulation,
    VirtualClock,
    add_simulated_jobs,
    run_simulation,
)

RESULTS = HERE / "results"
#: The parts with a script of their own, and the reports of their full runs that scale.md embeds.
PARTS = {"proposals": "scale_proposals.py", "api": "scale_api.py"}
PART_REPORTS = ("scale_proposals.md", "scale_api.md")
SERVER_URL = os.environ.get("BENCH_POSTGRES_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test")
#: The simulated workers' own connections: their commits need not wait for the disk nor be pinged first
#: (their writes are a real cluster's workers', not the driver's, and are not measured).
_WORKERS: dict[str, Any] = {"connect_args": {"options": "-c synchronous_commit=off"}}


def _proposal_seconds() -> dict[str, float]:
    """Wall seconds spent proposing so far, per strategy (the driver's Prometheus histogram)."""
    totals: dict[str, float] = {}
    for metric in _telemetry.PROPOSAL_SECONDS.collect():
        for sample in metric.samples:
            if sample.name.endswith("_sum"):
                totals[sample.labels["strategy"]] = sample.value
    return totals


def run_driver(
    *, jobs: int, trials: int, slots: int, gpus: int, median_s: float, advisors: int | None = None
) -> dict[str, Any]:
    """The real driver on a simulated cluster (see the module docstring); the figures of one run.

    ``advisors``: that many drivers share the jobs by leases (``baobab advisor`` processes); None: one
    driver without leases (``baobab up``)."""
    strategies = ("random", "random", "tpe", "random", "bayes", "random", "evolution", "random", "tpe", "random")
    with postgres_database(SERVER_URL) as url:
        upgrade_database(url)
        engine = create_engine_from_url(url)
        workers = create_engine(url, **_WORKERS)
        events = LocalEventChannel()
        clock = VirtualClock()
        cluster = SimulatedCluster(workers, events, clock, slots=slots, work=SimulatedWork(median_s=median_s, steps=3))
        with tempfile.TemporaryDirectory() as home:
            settings = Settings.from_env(environ={}, home=Path(home), cpu_slots=2)
            shared = {} if advisors is None else {"lease_s": settings.lease_s}
            drivers = [
                JobDriver(engine, cluster, events, settings, clock=clock, stop_check_s=3600, name=f"a{i}", **shared)
                for i in range(advisors or 1)
            ]
            for driver in drivers:  # each says it is alive before any takes up jobs, so they share from the start
                driver.renew_leases()
            asha = {"early_stopping": {"rule": "asha", "eta": 3}}
            third = jobs // 3
            add_simulated_jobs(
                engine, events, jobs=third, trials=trials, gpus=gpus, strategies=strategies, options=asha
            )
            add_simulated_jobs(engine, events, jobs=jobs - third, trials=trials, gpus=gpus, strategies=strategies)
            total = jobs * trials
            marks = [total * k // 10 for k in (1, 3, 5, 7, 9)]
            memory: list[dict[str, Any]] = []

            def sample(report: Simulation) -> None:
                if marks and report.trials >= marks[0]:
                    marks.pop(0)
                    gc.collect()
                    states = [job for driver in drivers for job in driver.jobs.values()]
                    strategies_held = [sub.strategy for job in states for sub in job.sub_jobs.values() if sub.strategy]
                    memory.append(
                        {
                            "finished": report.trials,
                            "jobs": len(states),
                            "driver_mb": asizeof.asizeof(states) / 1e6,
                            "strategies_mb": asizeof.asizeof(strategies_held) / 1e6,
                            "rss_mb": _rss_mb(),
                        }
                    )
                    print(f"  {report.trials:>7} trials, {memory[-1]['driver_mb']:.1f} MB held", flush=True)

            proposing = _proposal_seconds()
            report = run_simulation(drivers, cluster, on_loop=sample, charge=True)
            proposed = {k: v - proposing.get(k, 0.0) for k, v in _proposal_seconds().items()}
        engine.dispose()
        workers.dispose()
    n = report.trials
    return {
        "advisors": advisors,
        "trials_per_virtual_s": n / report.span_s if report.span_s else 0.0,
        "jobs": jobs,
        "trials": n,
        "slots": slots,
        "gpu_count": gpus,
        "median_trial_s": median_s,
        "strategies": sorted(set(strategies)),
        "placement": str(settings.placement),
        "outcomes": {str(k): v for k, v in report.outcomes.items()},
        "each_trial_once": set(report.ended.values()) == {1},
        "utilisation": report.utilisation,
        "utilisation_while_waiting": report.utilisation_while_waiting,
        "virtual_span_h": report.span_s / 3600,
        "driver_cpu_ms_per_trial": 1000 * report.driver_cpu_s / n,
        "driver_wall_ms_per_trial": 1000 * report.driver_wall_s / n,
        "proposal_wall_ms_per_trial": 1000 * sum(proposed.values()) / n,
        "proposal_wall_s_by_strategy": proposed,
        "wall_s": report.wall_s,
        "memory": memory,
        "rss_end_mb": _rss_mb(),
    }


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def render(results: dict[str, Any]) -> str:
    lines = [
        "# Baobab at scale",
        "",
        "Written by `bench/scale.py` (see its docstring for the method). Machine: "
        f"{results['machine']}, shared with other work: wall times, and the utilisation they are charged to, "
        "would be better on a machine of its own. "
        "Each part's date and setup are its own: a part can be rerun alone.",
        "",
    ]
    for part, render_part in (
        ("driver", _render_driver),
        ("short", _render_short),
        ("advisors", _render_advisors),
        ("long", _render_long),
    ):
        if results.get(part):
            lines += render_part(results[part])
            if "setup" in results[part]:  # parts from before bench/setup_record.py have none
                lines += [setup_markdown(results[part]["setup"]), ""]
    for report in PART_REPORTS:  # each part's own report, one heading level down
        path = RESULTS / report
        if path.exists():
            lines += [f"<!-- from {report} -->", _demoted(path.read_text()).rstrip(), ""]
    return "\n".join(lines) + "\n"


def _ms(d: dict[str, Any], key: str) -> str:
    return f"{d[key]:.2f} ms" if key in d else "not recorded in this run"


def _placed(d: dict[str, Any]) -> str:
    """Who placed the part's trials: the settings' default when it ran (parts from before it was
    recorded ran on the fixed rules, the default then)."""
    placement = d.get("placement", "rules")
    return f"placement `{placement}`" + (" (the planner)" if placement == "search" else " (the fixed rules)")


def _demoted(markdown: str) -> str:
    return "\n".join("#" + line if line.startswith("#") else line for line in markdown.splitlines())


def _render_memory(d: dict[str, Any]) -> list[str]:
    lines = [
        "| trials finished | jobs held | driver MB | of which strategies MB | process RSS MB |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {m['finished']:,} | {m['jobs']} | {m['driver_mb']:.1f} | {m['strategies_mb']:.1f} | {m['rss_mb']:.0f} |"
        for m in d["memory"]
    ]
    return [*lines, ""]


def _render_short(d: dict[str, Any]) -> list[str]:
    rate = d["slots"] / d["median_trial_s"]
    lines = [
        f"## Trials of {d['median_trial_s']:g} s on {d['slots']:,} slots ({d['date']})",
        "",
        f"The same driver and mix, {d['jobs']} jobs of {d['trials'] // d['jobs']:,} trials: the slots finish about "
        f"{rate:,.0f} trials a second, which the driver must turn into new ones as fast. Slot utilisation while "
        f"work waited {100 * d['utilisation_while_waiting']:.2f}% (the issue's aim: 95%); driver "
        f"{d['driver_cpu_ms_per_trial']:.2f} ms CPU and {d['driver_wall_ms_per_trial']:.2f} ms wall a trial, "
        f"{_proposing(d)}; each trial once: {'yes' if d['each_trial_once'] else '**no**'}; {_placed(d)}.",
        "",
    ]
    base = d.get("baseline")
    if base:
        lines += [
            f"The baseline, {base['code']}, ran the same part on the same machine just before: utilisation while "
            f"work waited {100 * base['utilisation_while_waiting']:.2f}%, driver {base['driver_cpu_ms_per_trial']:.2f}"
            f" ms CPU and {base['driver_wall_ms_per_trial']:.2f} ms wall a trial, {_proposing(base)}.",
            "",
        ]
    return lines


def _render_advisors(d: dict[str, Any]) -> list[str]:
    first = d["runs"][0]
    lines = [
        f"## Several advisors sharing the jobs ({d['date']})",
        "",
        f"The short part's jobs ({first['jobs']} of {first['trials'] // first['jobs']:,} trials on "
        f"{first['slots']:,} slots), and the same with trials of 1 s, shared by 1, 2 and 4 drivers with leases "
        "(`baobab advisor` processes): each takes up its fair share of the jobs. They take their turns one "
        "after another in one process, each seeing every event, and the clock is charged the slowest one's "
        "time of each turn, as if each ran on a machine of its own; the PostgreSQL they share serves them one "
        "at a time here, so its contention between them is not measured. Each driver fills every slot it "
        "sees (they do not split the slots), so with several the cluster holds more trials queued.",
        "",
        "| trials of | advisors | trials per second (virtual) | against one | slots busy while work waited "
        "| driver wall ms a trial (all drivers) | each trial once |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for run in d["runs"]:
        one = next(r for r in d["runs"] if r["median_trial_s"] == run["median_trial_s"] and r["advisors"] == 1)
        lines.append(
            f"| {run['median_trial_s']:g} s | {run['advisors']} | {run['trials_per_virtual_s']:,.0f} | "
            f"{run['trials_per_virtual_s'] / one['trials_per_virtual_s']:.2f}x | "
            f"{100 * run['utilisation_while_waiting']:.1f}% | {run['driver_wall_ms_per_trial']:.2f} | "
            f"{'yes' if run['each_trial_once'] else '**no**'} |"
        )
    return [*lines, ""]


def _proposing(d: dict[str, Any]) -> str:
    """The share of the driver's wall time spent proposing, and the strategy that took the most of it."""
    by_strategy = d["proposal_wall_s_by_strategy"]
    top = max(by_strategy, key=by_strategy.get)
    return (
        f"of which {d['proposal_wall_ms_per_trial']:.2f} ms proposing ({top} {by_strategy[top]:.0f} s of "
        f"{sum(by_strategy.values()):.0f} s)"
    )


def _render_long(d: dict[str, Any]) -> list[str]:
    return [
        f"## One job of {d['trials']:,} trials ({d['date']})",
        "",
        f"What the driver holds of one long job (random search, no early stopping, {d['slots']} slots): "
        f"each trial once: {'yes' if d['each_trial_once'] else '**no**'}; driver CPU "
        f"{d['driver_cpu_ms_per_trial']:.2f} ms a trial; utilisation while work waited "
        f"{100 * d['utilisation_while_waiting']:.2f}%; {_placed(d)}.",
        "",
        *_render_memory(d),
    ]


def _render_driver(d: dict[str, Any]) -> list[str]:
    lines = [
        f"## The driver on {d['slots']:,} simulated slots ({d['date']})",
        "",
        f"{d['jobs']} jobs of {d['trials'] // d['jobs']:,} trials each ({d['trials']:,} in all), GPU_COUNT="
        f"{d['gpu_count']} each, strategies {', '.join(d['strategies'])} in turn, ASHA on a third of the jobs; "
        f"trials of {d['median_trial_s']:g} s (median, log-normal) with three interim reports, on PostgreSQL. "
        f"The driver's wall time is charged to the virtual clock (the cluster waits while it decides); {_placed(d)}.",
        "",
        "| measure | value | aim |",
        "|---|---|---|",
        f"| trials, each run and ended once | {d['trials']:,}, {'yes' if d['each_trial_once'] else '**no**'} | |",
        f"| outcomes | {', '.join(f'{k} {v:,}' for k, v in sorted(d['outcomes'].items()))} | |",
        f"| slot utilisation while work waited | {100 * d['utilisation_while_waiting']:.2f}% | ≥ 98% |",
        f"| slot utilisation, drain at the end included | {100 * d['utilisation']:.2f}% | |",
        f"| driver CPU per trial | {d['driver_cpu_ms_per_trial']:.2f} ms | ≤ 5 ms |",
        f"| driver wall time per trial (with the store's round trips) | {_ms(d, 'driver_wall_ms_per_trial')} | |",
        f"| of which proposing (wall) | {d['proposal_wall_ms_per_trial']:.2f} ms | |",
        f"| virtual time | {d['virtual_span_h']:.1f} h | |",
        f"| wall time of the run | {d['wall_s'] / 60:.1f} min | |",
        "",
        "Proposing, wall seconds per strategy over the run: "
        + ", ".join(f"{k} {v:.1f} s" for k, v in sorted(d["proposal_wall_s_by_strategy"].items()))
        + ". The driver's own work per trial, with proposals that cost next to nothing, is the long job's "
        "figure below (random search).",
        "",
        "Memory the driver holds (its job states; `pympler.asizeof`) as the trials mount:",
        "",
        *_render_memory(d),
    ]
    return lines


#: What the simulated parts' setup favours; the advisors part adds to it.
FAVOURS = "the driver: the cluster is simulated (no worker, no network), only the driver's own time is real"
ADVISORS_FAVOUR = (
    "; the drivers take turns in one process, charged the slowest one's time of each turn as if each ran on a "
    "machine of its own, so their contention for the PostgreSQL they share is not measured"
)


def part_setup(part: str) -> RunSetup:
    """The record of one simulated part: the driver runs under the settings' defaults (``environ={}``)."""
    return RunSetup(
        FAVOURS + (ADVISORS_FAVOUR if part == "advisors" else ""),
        placement=Settings.from_env(environ={}).placement.value,
        fusion="not applicable (simulated trials)",
        warm_start="not applicable (simulated trials)",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parts = "driver,short,advisors,long,proposals,api"
    parser.add_argument("--parts", default=parts, help=f"comma-separated, of {parts}")
    parser.add_argument("--quick", action="store_true", help="10 jobs, 10,000 trials, 100 slots; small parts")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    name = "scale-quick" if args.quick else "scale"  # a quick run leaves the full results alone
    out = RESULTS / f"{name}.json"
    results: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    results["machine"] = f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    today = datetime.date.today().isoformat()
    if "driver" in parts:
        size = {"jobs": 10 if args.quick else 100, "trials": 1000, "slots": 100 if args.quick else 1000}
        print(f"driver: {size}", flush=True)
        started, setup = time.perf_counter(), part_setup("driver")
        results["driver"] = {**run_driver(**size, gpus=20, median_s=60.0), "date": today, "setup": setup.finish()}
        print(f"driver: done in {time.perf_counter() - started:.0f} s", flush=True)
    if "short" in parts:  # trials of 5 s: 1,000 slots then finish 200 a second, which the driver must keep up with
        size = {"jobs": 10 if args.quick else 20, "trials": 500, "slots": 100 if args.quick else 1000}
        print(f"short trials: {size}", flush=True)
        setup = part_setup("short")
        results["short"] = {**run_driver(**size, gpus=100, median_s=5.0), "date": today, "setup": setup.finish()}
    if "advisors" in parts:  # the short part's work, and trials of 1 s, shared by 1, 2 and 4 drivers
        size = {"jobs": 10 if args.quick else 20, "trials": 500, "slots": 100 if args.quick else 1000}
        setup, runs = part_setup("advisors"), []
        for median_s in (5.0, 1.0):
            for advisors in (1, 2, 4):
                print(f"advisors: {advisors}, trials of {median_s:g} s, {size}", flush=True)
                runs.append(run_driver(**size, gpus=100, median_s=median_s, advisors=advisors))
        results["advisors"] = {"date": today, "runs": runs, "setup": setup.finish()}
    if "long" in parts:
        size = {"jobs": 1, "trials": 5_000 if args.quick else 20_000, "slots": 200}
        print(f"long job: {size}", flush=True)
        setup = part_setup("long")
        results["long"] = {**run_driver(**size, gpus=200, median_s=60.0), "date": today, "setup": setup.finish()}
    for part, script in PARTS.items():
        if part in parts:  # a part of its own, writing its own results, which the report embeds
            print(f"{part}: bench/{script}", flush=True)
            subprocess.run([sys.executable, str(HERE / script), *(["--quick"] if args.quick else [])], check=True)
    results.pop("load_average", None)  # from before each part recorded its own setup
    # The index judges the whole result by its oldest part's record, as a part kept from an earlier run may be
    # stale; where a part recorded none, by nothing (the index then says the commit was not recorded).
    present = [results[part] for part in ("driver", "short", "advisors", "long") if results.get(part)]
    results.pop("setup", None)
    if present and all("setup" in part for part in present):
        results["setup"] = oldest([part["setup"] for part in present])
    RESULTS.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(render(results))
    print(render(results))


if __name__ == "__main__":
    main()
