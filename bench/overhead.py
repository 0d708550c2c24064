"""Per-trial overhead and worker utilisation of the platform, against a bare loop and Optuna.

Two workloads, each run three ways on the same machine in the same run:

- ``noop``: 500 trials whose training does nothing;
- ``sleep``: 100 trials that each sleep one second.

1. **Baobab**: ``baobab up --workers 2`` (SQLite, local worker processes) in a fresh
   home; the trials of one train job (random strategy: this measures the platform,
   not the search) go through the whole stack — job driver, trial rows, worker
   processes, parameters written to the artifact store, results stored, events.
   Time is the job's own ``started_at`` → ``finished_at``.
2. **bare loop**: the same template calls (build, train, evaluate, dump and
   serialise the parameters) in two plain processes, no platform at all.
3. **Optuna**: two processes, each running ``study.optimize`` on one study in one
   journal file (Optuna's storage for several processes on one machine), the same calls
   in its objective: two processes, as Baobab runs two workers.

Overhead per trial = (wall time - bare wall time) x 2 workers / trials; utilisation =
the bare loop's busy time / (2 x wall time).

With ``--executor celery`` Baobab runs in cluster mode instead (``baobab api``,
``advisor`` and two ``worker`` machines of one slot each, on PostgreSQL and Redis, see
:class:`baobab.testing.LocalCluster`), the peer is a bare Celery worker on the same Redis
doing the same calls per task (``bench/celery_peer.py``), and the one-second workload
also runs on one worker machine, for the speedup from one to two.

    .venv/bin/python bench/overhead.py                      # full run, about four minutes
    .venv/bin/python bench/overhead.py --quick              # 100 + 20 trials
    .venv/bin/python bench/overhead.py --executor celery    # cluster mode; needs PostgreSQL and Redis
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import redis
from setup_record import RunSetup, setup_markdown
from sqlalchemy import create_engine, text

from baobab.model import load_template
from baobab.sdk import Client
from baobab.store import params_to_bytes
from baobab.testing import LocalCluster, LocalPlatform, wait_until

HERE = Path(__file__).parent
TEMPLATE = HERE / "templates" / "sleeper.py"
RESULTS = HERE / "results"
WORKERS = 2
EMAIL, PASSWORD = "bench@example.com", "bench-password"


@dataclass(frozen=True)
class Workload:
    name: str
    trials: int
    sleep_s: float


@dataclass(frozen=True)
class Measure:
    workload: str
    system: str
    trials: int
    wall_s: float
    overhead_ms: float
    utilisation: float


def _one_trial(args: tuple[float, float]) -> float:
    """The template's work for one trial, as a worker does it; returns its busy seconds."""
    x, sleep_s = args
    cls = load_template(str(TEMPLATE), "Sleeper")
    start = time.perf_counter()
    model = cls(x=x)
    model.train("", sleep_s=sleep_s)
    model.evaluate("")
    params_to_bytes(model.dump_parameters())
    return time.perf_counter() - start


def run_bare(workload: Workload) -> tuple[float, float]:
    """Wall time of the trials in two plain processes, and the sum of their busy times."""
    xs = np.random.default_rng(0).random(workload.trials)
    with multiprocessing.get_context("spawn").Pool(WORKERS) as pool:
        pool.map(_one_trial, [(0.5, 0.0)] * WORKERS)  # import and load before the clock starts
        start = time.perf_counter()
        busy = pool.map(_one_trial, [(float(x), workload.sleep_s) for x in xs], chunksize=1)
        wall = time.perf_counter() - start
    return wall, float(sum(busy))


def _optuna_objective(sleep_s: float) -> Callable[[optuna.Trial], float]:
    cls = load_template(str(TEMPLATE), "Sleeper")

    def objective(trial: optuna.Trial) -> float:
        model = cls(x=trial.suggest_float("x", 0.0, 1.0))
        model.train("", sleep_s=sleep_s)
        score = model.evaluate("")
        params_to_bytes(model.dump_parameters())
        return score

    return objective


def _optuna_storage(journal: Path) -> optuna.storages.JournalStorage:
    return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(journal)))


def _optuna_process(args: tuple[str, str, int, float]) -> None:
    """One of Optuna's worker processes: its share of the trials on the shared study."""
    journal, study_name, trials, sleep_s = args
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name=study_name, storage=_optuna_storage(Path(journal)))
    study.optimize(_optuna_objective(sleep_s), n_trials=trials)


def run_optuna(workload: Workload, folder: Path) -> float:
    """Wall time of Optuna's trials in two processes on one journal, started (imports done) before the clock."""
    journal = folder / f"optuna-{workload.name}.journal"
    name = f"overhead-{workload.name}"
    optuna.create_study(
        study_name=name,
        storage=_optuna_storage(journal),
        sampler=optuna.samplers.RandomSampler(seed=0),
        direction="maximize",
    )
    shares = [workload.trials // WORKERS + (i < workload.trials % WORKERS) for i in range(WORKERS)]
    with multiprocessing.get_context("spawn").Pool(WORKERS) as pool:
        pool.map(_one_trial, [(0.5, 0.0)] * WORKERS)  # import and load before the clock starts
        start = time.perf_counter()
        pool.map(_optuna_process, [(str(journal), name, n, workload.sleep_s) for n in shares], chunksize=1)
        return time.perf_counter() - start


def run_baobab(client: Client, dataset_id: int, model_id: int, workload: Workload) -> float:
    app = f"overhead-{workload.name}"
    budget = {"MODEL_TRIAL_COUNT": workload.trials, "GPU_COUNT": 0}
    client.create_train_job(
        app,
        "TABULAR_REGRESSION",
        train_dataset_id=dataset_id,
        val_dataset_id=dataset_id,
        model_ids=[model_id],
        budget=budget,
        train_args={"sleep_s": workload.sleep_s},
        strategy="random",
    )
    job = client.wait_for_train_job(app, timeout=3600, progress=False)
    if job["trial_counts"]["COMPLETED"] != workload.trials:
        raise SystemExit(f"{app}: not every trial completed: {job['trial_counts']}")
    started = datetime.datetime.fromisoformat(job["started_at"])
    finished = datetime.datetime.fromisoformat(job["finished_at"])
    return (finished - started).total_seconds()


#: Baobab in cluster mode with its outcomes carried by the next claim, in the cluster report.
CARRIED = "Baobab, outcome with the next claim"


def where_the_time_went(client: Client, app: str, sleep_s: float) -> dict[str, float]:
    """Medians, in ms a trial, of where a cluster job's time went besides the template's sleep, from its rows.

    ``in_trial``: a trial's claim to its outcome, less the sleep (the worker process's own work: loading the
    template and data, saving parameters through the API, its requests); ``between``: a trial's outcome to
    the next claim on the same worker (the outcome waiting for that claim, Celery's delivery of the next
    message, the request that stores one and claims the other); ``queued``: a trial's row written to its
    claim (the advisor's insert and Celery message to the worker, often hidden behind the trial before it);
    and the job's phases as its workers measured them (``/time_breakdown``), per trial.
    """
    trials = [t for t in client.get_trials(app, per_page=500)["trials"] if t["status"] == "COMPLETED"]
    when = datetime.datetime.fromisoformat
    in_trial = [1000 * ((when(t["finished_at"]) - when(t["started_at"])).total_seconds() - sleep_s) for t in trials]
    queued = [1000 * (when(t["started_at"]) - when(t["created_at"])).total_seconds() for t in trials]
    between = []
    for worker in {t["worker"] for t in trials}:
        runs = sorted((t for t in trials if t["worker"] == worker), key=lambda t: t["started_at"])
        between += [
            1000 * (when(b["started_at"]) - when(a["finished_at"])).total_seconds() for a, b in itertools.pairwise(runs)
        ]
    phases = client.get_time_breakdown(app)
    breakdown = {
        "in_trial": statistics.median(in_trial),
        "between": statistics.median(between) if between else 0.0,
        "queued": statistics.median(queued),
    }
    for phase, seconds in phases["seconds"].items():
        if phase not in ("wait", "train"):  # waiting is ``queued``; training is the template's sleep
            breakdown[f"phase {phase}"] = 1000 * seconds / max(phases["trials"], 1)
    return {name: round(ms, 2) for name, ms in breakdown.items()}


def run_celery_peer(workload: Workload, broker_url: str, workers: int) -> float:
    """Wall time of the trials as bare Celery tasks on ``workers`` processes, first send to last done."""
    env = {**os.environ, "BENCH_BROKER_URL": broker_url, "PYTHONPATH": str(HERE)}
    command = [sys.executable, "-m", "celery", "-A", "celery_peer", "worker", f"--concurrency={workers}",
               "--pool=prefork", "--loglevel=WARNING", "--without-gossip", "--without-mingle"]  # fmt: skip
    counter = redis.Redis.from_url(broker_url)
    process = subprocess.Popen(command, env=env, cwd=HERE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        sys.path.insert(0, str(HERE))
        os.environ["BENCH_BROKER_URL"] = broker_url
        import celery_peer

        counter.delete(celery_peer.COUNTER)
        for _ in range(workers):  # warm: the template loaded in every process before the clock starts
            celery_peer.trial.delay(0.5, 0.0)
        wait_until(lambda: int(counter.get(celery_peer.COUNTER) or 0) >= workers, timeout=60, what="warm-up")
        counter.delete(celery_peer.COUNTER)
        xs = np.random.default_rng(0).random(workload.trials)
        start = time.perf_counter()
        for x in xs:
            celery_peer.trial.delay(float(x), workload.sleep_s)
        wait_until(
            lambda: int(counter.get(celery_peer.COUNTER) or 0) >= workload.trials,
            timeout=3600,
            what="the peer's tasks",
            interval=0.002,
        )
        return time.perf_counter() - start
    finally:
        process.terminate()
        process.wait()


@contextmanager
def postgres_database(server_url: str) -> Iterator[str]:
    """A fresh database on the PostgreSQL server of ``server_url``, dropped afterwards."""
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    name = f"baobab_bench_{uuid.uuid4().hex[:8]}"
    with admin.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}"))
    try:
        yield admin.url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f"DROP DATABASE {name} WITH (FORCE)"))
        admin.dispose()


def run_cluster(
    workloads: list[Workload], folder: Path, server_url: str, broker_url: str
) -> tuple[list[Measure], dict[str, float], dict[str, dict[str, float]]]:
    """Baobab in cluster mode and a bare Celery worker, per workload; the one-to-two-worker speedup; and where
    Baobab's time went (:func:`where_the_time_went`) per workload."""
    measures: list[Measure] = []
    speedup: dict[str, float] = {}
    breakdowns: dict[str, dict[str, float]] = {}
    settings = {"BAOBAB_ADMIN_EMAIL": EMAIL, "BAOBAB_ADMIN_PASSWORD": PASSWORD, "BAOBAB_CPU_SLOTS": str(WORKERS)}
    bare: dict[str, tuple[float, float]] = {}
    # Baobab and its peers on two workers; Baobab again with each outcome waiting (50 ms at most) for the
    # worker's next claim to carry it, one request for both, where by default it is stored before its
    # message's acknowledgement; and on one worker, for the speedup.
    runs = [("peers", WORKERS, {}), (CARRIED, WORKERS, {"BAOBAB_FINISH_WAIT_S": "0.05"}), ("one", 1, {})]
    for run, machines, extra in runs:
        redis.Redis.from_url(broker_url).flushdb()
        with postgres_database(server_url) as database_url, LocalCluster(
            folder / f"cluster-{len(bare)}-{machines}-{run.split()[0]}", database_url=database_url,
            broker_url=broker_url, workers=machines, slots=1, settings={**settings, **extra},
        ) as cluster:  # fmt: skip
            client = Client(cluster.url)
            client.login(EMAIL, PASSWORD)
            dataset = client.create_dataset("tiny", folder / "data.csv", format="TABULAR")
            model = client.create_model(TEMPLATE, task="TABULAR_REGRESSION", class_name="Sleeper")
            for workload in workloads if machines == WORKERS else [w for w in workloads if w.sleep_s]:
                if run == "one":
                    wall = run_baobab(client, dataset["id"], model["id"], workload)
                    two = next(m.wall_s for m in measures if m.workload == workload.name and m.system == "Baobab")
                    speedup[workload.name] = round(wall / two, 3)
                    print(
                        f"{workload.name:9} Baobab on 1 worker {wall:7.2f} s: speedup 1 -> 2 workers {wall / two:.2f}x"
                    )
                    continue
                if run == CARRIED:
                    wall = run_baobab(client, dataset["id"], model["id"], workload)
                    measures.append(measure(workload, CARRIED, wall, *bare[workload.name]))
                    print(f"{workload.name:9} {CARRIED:31} {measures[-1].overhead_ms:6.1f} ms")
                    continue
                bare_wall, busy = bare[workload.name] = run_bare(workload)
                measures.append(measure(workload, "bare loop", bare_wall, bare_wall, busy))
                wall = run_baobab(client, dataset["id"], model["id"], workload)
                measures.append(measure(workload, "Baobab", wall, bare_wall, busy))
                breakdowns[workload.name] = where_the_time_went(client, f"overhead-{workload.name}", workload.sleep_s)
                print(f"{workload.name:9} where Baobab's time went, ms a trial: {breakdowns[workload.name]}")
                redis.Redis.from_url(broker_url).delete("bench:done")
                wall = run_celery_peer(workload, broker_url, WORKERS)
                measures.append(measure(workload, "bare Celery worker (Redis)", wall, bare_wall, busy))
                for m in measures[-3:]:
                    row = f"{m.wall_s:7.2f} s {m.overhead_ms:6.1f} ms {m.utilisation:6.1%}"
                    print(f"{m.workload:9} {m.system:31} {row}")
    return measures, speedup, breakdowns


def measure(workload: Workload, system: str, wall: float, bare_wall: float, busy: float) -> Measure:
    return Measure(
        workload=workload.name,
        system=system,
        trials=workload.trials,
        wall_s=round(wall, 3),
        overhead_ms=round((wall - bare_wall) * WORKERS / workload.trials * 1000, 2),
        utilisation=round(busy / (WORKERS * wall), 4),
    )


def _table(measures: list[Measure]) -> list[str]:
    lines = [
        "| workload | system | trials | wall s | overhead ms/trial | utilisation |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for m in measures:
        lines.append(
            f"| {m.workload} | {m.system} | {m.trials} | {m.wall_s:.2f} | {m.overhead_ms:.1f} | {m.utilisation:.1%} |"
        )
    return lines


def write_report(measures: list[Measure], quick: bool, setup: dict[str, Any]) -> None:
    RESULTS.mkdir(exist_ok=True)
    data = {"setup": setup, "measures": [asdict(m) for m in measures]}
    (RESULTS / "overhead.json").write_text(json.dumps(data, indent=2) + "\n")
    lines = [
        "# Per-trial overhead and worker utilisation",
        "",
        f"`bench/overhead.py{' --quick' if quick else ''}`, {datetime.date.today()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, {WORKERS} workers, SQLite.",
        "",
        *_table(measures),
        "",
        "Overhead per trial = (wall - bare wall) x workers / trials. Utilisation = the bare loop's busy "
        "time / (workers x wall). Baobab's wall time is the train job's `started_at` → `finished_at` and "
        "covers the job driver, the trial rows, the worker processes, parameters written to the artifact "
        "store and results stored; the trials use the random strategy (a Bayesian proposal adds its own "
        "~30 ms, see strategies.md).",
        "",
        "Optuna runs as two processes on one study in one journal file, as Baobab runs two worker processes; "
        "its sampler is random, as Baobab's strategy here. Ray Tune is not measured by this benchmark.",
        "",
        setup_markdown(setup),
    ]
    (RESULTS / "overhead.md").write_text("\n".join(lines) + "\n")


def write_cluster_report(
    measures: list[Measure],
    speedup: dict[str, float],
    breakdowns: dict[str, dict[str, float]],
    quick: bool,
    setup: dict[str, Any],
) -> None:
    RESULTS.mkdir(exist_ok=True)
    data = {
        "setup": setup,
        "measures": [asdict(m) for m in measures],
        "speedup_1_to_2_workers": speedup,
        "where_the_time_went_ms": breakdowns,
    }
    (RESULTS / "overhead-celery.json").write_text(json.dumps(data, indent=2) + "\n")
    lines = [
        "# Per-trial overhead and worker utilisation, cluster mode (Celery)",
        "",
        f"`bench/overhead.py --executor celery{' --quick' if quick else ''}`, {datetime.date.today()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}: `baobab api` (gunicorn), `baobab advisor`, "
        f"{WORKERS} `baobab worker` machines of one slot, PostgreSQL, Redis, all on this one machine.",
        "",
        *_table(measures),
        "",
        *(f"Speedup from 1 to {WORKERS} worker machines on `{name}`: {ratio:.2f}x." for name, ratio in speedup.items()),
        "",
        "Baobab's wall time is the train job's `started_at` → `finished_at`: per trial, a trial row, a Celery "
        "message, the pool process handing the trial to its worker process, the claim of the trial through "
        "the admin API, the template's calls, parameters stored through the API, the request that stores the "
        "outcome, and an event back to the advisor. The bare Celery worker does the same template calls per "
        "task with the same delivery rules (acks late, one task at a time) and nothing else.",
        "",
        "Baobab stores each outcome, in a request of its own, before the trial's message is acknowledged (the "
        f"default, `BAOBAB_FINISH_WAIT_S=0`). `{CARRIED}` is Baobab with `BAOBAB_FINISH_WAIT_S=0.05`: each "
        "outcome waits up to 50 ms for the worker's next claim to carry it, one request for both, and is lost "
        "with a worker machine that dies in that moment (the trial then runs again).",
        "",
        "Where Baobab's time went, read from the job's own rows (medians, ms a trial; see "
        "`where_the_time_went` in the script): `in_trial` is a trial's claim to its outcome less the "
        "template's sleep, `between` a trial's outcome to the next claim on the same worker, `queued` a "
        "trial's row to its claim (often spent behind the trial before it), and the phases the workers "
        "measured inside a trial.",
        "",
        "| workload | " + " | ".join(next(iter(breakdowns.values()), {})) + " |",
        "|---|" + "---:|" * len(next(iter(breakdowns.values()), {})),
        *(f"| {name} | " + " | ".join(f"{ms:.1f}" for ms in b.values()) + " |" for name, b in breakdowns.items()),
        "",
        setup_markdown(setup),
    ]
    (RESULTS / "overhead-celery.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 no-op and 20 one-second trials")
    parser.add_argument("--executor", choices=("local", "celery"), default="local")
    parser.add_argument(
        "--postgres", default="postgresql+psycopg2://postgres@127.0.0.1:5432/postgres", help="server (celery)"
    )
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/14", help="Redis database (celery); flushed")
    args = parser.parse_args()
    workloads = [Workload("noop", 500, 0.0), Workload("sleep-1s", 100, 1.0)]
    if args.quick:
        workloads = [Workload("noop", 100, 0.0), Workload("sleep-1s", 20, 1.0)]

    measures: list[Measure] = []
    # Every trial is a no-op or a sleep of the same template, so fusion and warm start have nothing to act on.
    setup = RunSetup(
        "the bare Celery worker, which does no bookkeeping"
        if args.executor == "celery"
        else "no one: every way runs the same template calls on the same machine in the same run, two processes each",
        fusion="off",
        warm_start="not applicable (the template has no weights)",
    )
    with tempfile.TemporaryDirectory(prefix="baobab-bench-") as tmp:
        folder = Path(tmp)
        data = folder / "data.csv"
        data.write_text("a,target\n1.0,0.5\n2.0,0.25\n")
        if args.executor == "celery":
            measures, speedup, breakdowns = run_cluster(workloads, folder, args.postgres, args.broker)
            write_cluster_report(measures, speedup, breakdowns, args.quick, setup.finish())
            print(f"wrote {RESULTS / 'overhead-celery.md'}")
            return
        settings = {"BAOBAB_ADMIN_EMAIL": EMAIL, "BAOBAB_ADMIN_PASSWORD": PASSWORD, "BAOBAB_CPU_SLOTS": str(WORKERS)}
        with LocalPlatform(folder / "home", workers=WORKERS, settings=settings) as baobab:
            client = Client(baobab.url)
            client.login(EMAIL, PASSWORD)
            dataset = client.create_dataset("tiny", data, format="TABULAR")
            model = client.create_model(TEMPLATE, task="TABULAR_REGRESSION", class_name="Sleeper")
            for workload in workloads:
                bare_wall, busy = run_bare(workload)
                measures.append(measure(workload, "bare loop", bare_wall, bare_wall, busy))
                wall = run_baobab(client, dataset["id"], model["id"], workload)
                measures.append(measure(workload, "Baobab", wall, bare_wall, busy))
                wall = run_optuna(workload, folder)
                measures.append(measure(workload, "Optuna 5.0 (journal, 2 processes)", wall, bare_wall, busy))
                for m in measures[-3:]:
                    row = f"{m.wall_s:7.2f} s {m.overhead_ms:6.1f} ms {m.utilisation:6.1%}"
                    print(f"{m.workload:9} {m.system:31} {row}")
    write_report(measures, args.quick, setup.finish())
    print(f"wrote {RESULTS / 'overhead.md'}")


if __name__ == "__main__":
    main()
