"""The API on large jobs: every read the job page and the SDK make, at 1,000, 10,000 and 100,000 trials.

One database (PostgreSQL: the store a large job runs on) gets a job of each size, filled
straight into its tables (``COPY``), then the real admin app answers every read the job
page and the SDK make of each job: the job, a page of its trials under each sort and
filter (first, middle and last page), the changes feed (first answer, polls), the best
trials and one trial's metrics. Each read's median and 99th percentile go to
``bench/results/scale_api.json`` and ``.md``, with ``EXPLAIN (ANALYZE)`` of the SQL the
main reads ran at the largest size.

``bench/scale.py`` calls :func:`measure` and embeds :func:`markdown`'s table; ``fill_job``
also fills ``bench/web_large_job.py``'s job.

    .venv/bin/python bench/scale_api.py            # 1k, 10k, 100k trials, 20 requests a read: about 6 minutes
    .venv/bin/python bench/scale_api.py --quick    # 1k and 10k, 5 requests a read: under a minute
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import math
import random
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import requests
from sqlalchemy import Engine, event, insert, select, text

from baobab import Settings
from baobab.admin import create_app
from baobab.enums import DatasetFormat
from baobab.model import CategoricalKnob, FloatKnob, IntegerKnob, PolicyKnob, Task, knob_config_to_json
from baobab.store import (
    Dataset,
    InterimMetric,
    JobStatus,
    ModelAccess,
    ModelTemplate,
    SubJob,
    TrainJob,
    Trial,
    TrialState,
    create_engine_from_url,
    session_scope,
    upgrade_database,
)
from baobab.testing import serve_in_thread

KNOBS = {
    "alpha": FloatKnob(1e-5, 1e-1, is_exp=True),
    "epochs": IntegerKnob(3, 30),
    "loss": CategoricalKnob(["hinge", "log_loss", "modified_huber"]),
    "width": IntegerKnob(16, 512, is_exp=True),
    "early_stop": PolicyKnob("EARLY_STOP"),
}


def fill_job(
    engine: Engine,
    *,
    owner_id: int,
    dataset_id: int,
    app: str,
    trials: int,
    metrics: int,
    seed: int,
    templates: int = 1,
    open_trials: int = 0,
) -> int:
    """Writes a train job of ``trials`` trials (``metrics`` interim metrics each) straight into the store; its id.

    The trials are spread over ``templates`` sub-jobs in turn and over ten hours: scores
    from the knobs plus noise (a few ERRORED, STOPPED and CANCELLED trials), each kept
    parameters so that ``best_trials`` has candidates. With ``open_trials`` the job is
    RUNNING and its last ``open_trials`` trials are RUNNING (the very last fifth PENDING);
    else it is COMPLETED. PostgreSQL gets the rows through ``COPY`` (a 100,000-trial job
    with 30 metrics each in well under a minute), SQLite through multi-row inserts.
    """
    rng = random.Random(seed)
    now = datetime.datetime.now(datetime.UTC)
    start = now - datetime.timedelta(hours=10)
    running = open_trials > 0
    with session_scope(engine) as session:
        models = [
            ModelTemplate(
                owner_id=owner_id, name=f"sgd_wide_{i}" if i else "sgd_wide", task=Task.TABULAR_CLASSIFICATION,
                class_name="SgdWide", artifact_path=f"models/bench/template{i}.py", checksum="0" * 64,
                access=ModelAccess.PRIVATE, knob_config=knob_config_to_json(KNOBS),
            )
            for i in range(templates)
        ]  # fmt: skip
        job = TrainJob(
            owner_id=owner_id, app=app, app_version=1, task=Task.TABULAR_CLASSIFICATION,
            train_dataset_id=dataset_id, val_dataset_id=dataset_id,
            budget={"GPU_COUNT": 0, "TIME_HOURS": 12.0, "MODEL_TRIAL_COUNT": math.ceil(trials / templates)},
            train_args={}, status=JobStatus.RUNNING if running else JobStatus.COMPLETED,
            created_at=start, started_at=start, finished_at=None if running else now,
        )  # fmt: skip
        session.add_all([*models, job])
        session.flush()
        subs = [
            SubJob(
                train_job_id=job.id, model_template_id=model.id, strategy="tpe", seed=seed + i,
                status=JobStatus.RUNNING if running else JobStatus.COMPLETED,
            )
            for i, model in enumerate(models)
        ]  # fmt: skip
        session.add_all(subs)
        session.flush()
        job_id, sub_ids = job.id, [sub.id for sub in subs]
    step_s = 10 * 3600 / trials
    rows = []
    for index in range(trials):
        alpha = 10 ** rng.uniform(-5, -1)
        epochs = rng.randint(3, 30)
        loss = rng.choice(["hinge", "log_loss", "modified_huber"])
        width = int(2 ** rng.uniform(4, 9))
        early = rng.random() < 0.4
        quality = 0.86 - 0.02 * (math.log10(alpha) + 3) ** 2 + 0.0015 * epochs - (0.03 if early else 0)
        score = max(0.0, min(1.0, quality + rng.gauss(0, 0.015) + 0.03 * index / trials))  # the search learns
        began = start + datetime.timedelta(seconds=index * step_s)
        duration = rng.uniform(0.3, 2.0) * step_s * (0.4 if early else 1.0)
        roll = rng.random()
        state = (
            TrialState.ERRORED if roll < 0.02 else TrialState.CANCELLED if roll < 0.03
            else TrialState.STOPPED if roll < 0.08 else TrialState.COMPLETED
        )  # fmt: skip
        left = trials - index
        if left <= open_trials:
            state = TrialState.PENDING if left <= open_trials // 5 else TrialState.RUNNING
        finished = state not in (TrialState.PENDING, TrialState.RUNNING)
        scored = finished and state not in (TrialState.ERRORED, TrialState.CANCELLED)
        sub = index % templates
        rows.append(
            {
                "sub_job_id": sub_ids[sub], "number": index // templates,
                "knobs": {"alpha": alpha, "epochs": epochs, "loss": loss, "width": width, "early_stop": early},
                "policies": {"EARLY_STOP": early}, "status": state, "score": score if scored else None,
                "created_at": began, "started_at": None if state is TrialState.PENDING else began,
                "finished_at": began + datetime.timedelta(seconds=duration) if finished else None,
                "worker": None if state is TrialState.PENDING else f"local-{index % 8}", "attempts": 1,
                "error": "RuntimeError: out of patience" if state is TrialState.ERRORED else None,
                "params_path": f"params/{job_id}/{index}.safetensors" if scored else None,
            }
        )  # fmt: skip
    _bulk_insert(engine, Trial, rows)
    with session_scope(engine) as session:
        ids = list(session.scalars(select(Trial.id).where(Trial.sub_job_id.in_(sub_ids)).order_by(Trial.id)))
    if metrics:
        _bulk_insert(engine, InterimMetric, _metric_rows(rng, ids, metrics, now))
    return job_id


def _metric_rows(
    rng: random.Random, ids: Sequence[int], metrics: int, now: datetime.datetime
) -> Iterator[dict[str, Any]]:
    for trial_id in ids:
        level = rng.uniform(0.5, 0.8)
        for step in range(metrics):
            level += (0.95 - level) * 0.15 + rng.gauss(0, 0.005)
            yield {"trial_id": trial_id, "step": step, "metrics": {"accuracy": level, "loss": 1 - level}, "time": now}


_Table = type[Trial] | type[InterimMetric]


def _bulk_insert(engine: Engine, table: _Table, rows: Iterable[dict[str, Any]], chunk: int = 100_000) -> None:
    """Inserts ``rows`` in chunks: ``COPY ... FROM STDIN`` on PostgreSQL, multi-row INSERTs elsewhere."""
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= chunk:
            _insert_chunk(engine, table, batch)
            batch = []
    if batch:
        _insert_chunk(engine, table, batch)


def _insert_chunk(engine: Engine, table: _Table, rows: list[dict[str, Any]]) -> None:
    if engine.dialect.name != "postgresql":
        with session_scope(engine) as session:
            session.execute(insert(table), rows)
        return
    columns = list(rows[0])
    text = io.StringIO()
    writer = csv.writer(text)
    for row in rows:
        writer.writerow([_csv_value(row[name]) for name in columns])
    text.seek(0)
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.copy_expert(f"COPY {table.__tablename__} ({', '.join(columns)}) FROM STDIN WITH (FORMAT csv)", text)
        raw.commit()
    finally:
        raw.close()


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""  # CSV's NULL: an unquoted empty field
    if isinstance(value, dict):
        return json.dumps(value)
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if isinstance(value, TrialState):
        return value.value
    return value


EMAIL, PASSWORD = "bench@example.com", "bench-password"


def _reads(
    app: str, job: dict[str, Any], trials: int, open_ids: list[int], last_id: int, best_id: int
) -> dict[str, str]:
    """Every read the job page and the SDK make of one job, by name: path and query under ``/api/v1``."""
    base = f"/train_jobs/{app}/1"
    last_25 = max(1, math.ceil(trials / 25))
    last_500 = max(1, math.ceil(trials / 500))
    model_id = job["sub_jobs"][-1]["model_id"]
    reads = {"job": base}
    for sort in ("-score", "score", "number", "-number", "created_at", "-created_at", "duration", "-duration",
                 "status", "-status", "worker", "-worker"):  # fmt: skip
        reads[f"page 1, sort={sort}"] = f"{base}/trials?per_page=25&sort={sort}"
    reads |= {
        "middle page, sort=-score": f"{base}/trials?per_page=25&sort=-score&page={last_25 // 2 + 1}",
        "last page, sort=-score": f"{base}/trials?per_page=25&sort=-score&page={last_25}",
        "last page, sort=-duration": f"{base}/trials?per_page=25&sort=-duration&page={last_25}",
        "last page, sort=worker": f"{base}/trials?per_page=25&sort=worker&page={last_25}",
        "SDK page 1 of 500, sort=-score": f"{base}/trials?per_page=500",
        "SDK last page of 500, sort=-score": f"{base}/trials?per_page=500&page={last_500}",
        "status=COMPLETED": f"{base}/trials?per_page=25&status=COMPLETED",
        "status=RUNNING,PENDING": f"{base}/trials?per_page=25&status=RUNNING,PENDING",
        "status=ERRORED, sort=-created_at": f"{base}/trials?per_page=25&status=ERRORED&sort=-created_at",
        "status=COMPLETED, last page": (
            f"{base}/trials?per_page=25&status=COMPLETED&page={max(1, math.ceil(trials * 0.9 / 25))}"
        ),
        "model_id=<second template>": f"{base}/trials?per_page=25&model_id={model_id}",
        "changes, first answer": f"{base}/trials/changes",
        "changes, every trial at once (the job page)": f"{base}/trials/changes?limit=100000",
        "changes, poll: nothing new": f"{base}/trials/changes?after_id={last_id}",
        "changes, poll: open trials": (
            f"{base}/trials/changes?after_id={last_id}&open={','.join(map(str, open_ids[:_OPEN_POLLED]))}"
        ),
        "best_trials, k=2": f"{base}/best_trials",
        "best_trials, k=100, include_stopped": f"{base}/best_trials?k=100&include_stopped=true",
        "metrics of the best trial": f"/trials/{best_id}/metrics",
    }
    return reads


#: How many of a job's open trials a poll of ``trials/changes`` names (the API takes at most 1,000).
_OPEN_POLLED = 1_000
#: Reads whose SQL is EXPLAINed in the report (the others are in the JSON).
MAIN_READS = (
    "page 1, sort=-score", "last page, sort=-score", "status=COMPLETED", "changes, first answer",
    "changes, poll: open trials", "best_trials, k=2", "best_trials, k=100, include_stopped", "job",
)  # fmt: skip


def metrics_per_trial(trials: int, per_trial: int = 30, max_rows: int = 3_000_000) -> int:
    """Interim metrics per trial in a job of ``trials``: ``per_trial``, fewer where there would be over ``max_rows``."""
    return max(1, min(per_trial, max_rows // trials))


def measure(
    engine_url: str,
    counts: Sequence[int] = (1_000, 10_000, 100_000),
    *,
    repeats: int = 20,
    metrics: int = 30,
    max_metric_rows: int = 3_000_000,
    explain: bool = True,
    home: str | None = None,
) -> dict[str, Any]:
    """Builds one job per count in the empty database ``engine_url`` and times every read through real HTTP.

    The real admin app (``baobab.admin.create_app``) is served by werkzeug's threaded
    server on loopback in this process; each read is asked ``repeats`` times after one
    warm-up, one at a time, over a kept-alive connection. Each job is RUNNING, with two
    templates and its last 1% of trials (10 to 1,000) open, as on a cluster of that many
    slots; all jobs stay in the one database, so every query has to pick its job's rows
    out of the others'.

    Returns:
        Plain JSON-able data::

            {"database": "PostgreSQL 15.2 ...", "repeats": 20,
             "jobs": {"100000": {"trials": 100000, "metrics_per_trial": 30, "fill_s": 41.2,
                                 "open_trials": 1000, "reads": {READ: {"p50_ms", "p99_ms", "bytes",
                                                                       "path"}},
                                 "changes_full_first_read": {"p50_ms", "p99_ms", "answers", "bytes"},
                                 "sdk_iter_all": {"s", "pages"}}},
             "plans": {READ: [{"sql": ..., "plan": [line, ...]}]}}   # the largest job's, if explain

        ``READ`` names a request (``"page 1, sort=-score"``, ``"changes, poll: open trials"``,
        ``"best_trials, k=2"`` ...; see :func:`_reads`); ``p99_ms`` of 20 repeats is the
        worst but one. ``plans`` holds, for each read, ``EXPLAIN (ANALYZE)`` (PostgreSQL)
        or ``EXPLAIN QUERY PLAN`` (SQLite) of every statement it ran that reads trials.
    """
    import logging
    import tempfile

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    engine = create_engine_from_url(engine_url)
    upgrade_database(engine_url)
    result: dict[str, Any] = {"repeats": repeats, "jobs": {}, "plans": {}}
    with engine.connect() as connection:
        if engine.dialect.name == "postgresql":
            result["database"] = connection.execute(text("SELECT version()")).scalar_one().split(" on ")[0]
        else:
            result["database"] = f"SQLite {connection.exec_driver_sql('SELECT sqlite_version()').scalar_one()}"
    with tempfile.TemporaryDirectory(prefix="baobab-scale-api-") as folder:
        settings = Settings.from_env(
            environ={}, home=home or folder, database_url=engine_url, admin_email=EMAIL, admin_password=PASSWORD
        )
        app = create_app(settings)
        statements: list[tuple[str, Any]] = []
        recording = [False]

        @event.listens_for(app.extensions["baobab"].engine, "before_cursor_execute")
        def _record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
            if recording[0]:
                statements.append((statement, parameters))

        try:
            with serve_in_thread(app) as url, requests.Session() as http:
                answer = http.post(f"{url}/api/v1/tokens", json={"email": EMAIL, "password": PASSWORD}, timeout=30)
                answer.raise_for_status()
                http.headers["Authorization"] = f"Bearer {answer.json()['token']}"
                owner_id = answer.json()["user"]["id"]
                with session_scope(engine) as session:
                    dataset = Dataset(
                        owner_id=owner_id, name="bench", format=DatasetFormat.TABULAR,
                        artifact_path="datasets/bench", size_bytes=1, checksum="0" * 64,
                    )  # fmt: skip
                    session.add(dataset)
                    session.flush()
                    dataset_id = dataset.id
                for n, count in enumerate(counts):
                    per_trial = metrics_per_trial(count, metrics, max_metric_rows)
                    open_trials = min(_OPEN_POLLED, max(10, count // 100))
                    app_name = f"scale-{count}"
                    started = time.perf_counter()
                    fill_job(
                        engine, owner_id=owner_id, dataset_id=dataset_id, app=app_name, trials=count,
                        metrics=per_trial, seed=n + 1, templates=2, open_trials=open_trials,
                    )  # fmt: skip
                    _analyze(engine)
                    fill_s = time.perf_counter() - started
                    job = _get(http, f"{url}/api/v1/train_jobs/{app_name}/1").json()
                    largest = count == max(counts)
                    entry = _measure_job(http, f"{url}/api/v1", app_name, job, count, repeats)
                    entry |= {"metrics_per_trial": per_trial, "fill_s": round(fill_s, 1), "open_trials": open_trials}
                    result["jobs"][str(count)] = entry
                    if explain and largest:
                        for name, path in entry.pop("_paths").items():
                            statements.clear()
                            recording[0] = True
                            try:
                                _get(http, f"{url}/api/v1{path}")
                            finally:
                                recording[0] = False
                            result["plans"][name] = _explain(engine, [s for s in statements if _reads_trials(s[0])])
                    entry.pop("_paths", None)
        finally:
            app.extensions["baobab"].engine.dispose()
            engine.dispose()
    return result


def _measure_job(
    http: requests.Session, api: str, app: str, job: dict[str, Any], trials: int, repeats: int
) -> dict[str, Any]:
    first = _get(http, f"{api}/train_jobs/{app}/1/trials/changes?limit=10000")
    points: list[list[Any]] = []
    answer = first.json()
    after = 0
    while True:
        points.extend(answer["trials"])
        after = answer["last_id"]
        if not answer["more"]:
            break
        answer = _get(http, f"{api}/train_jobs/{app}/1/trials/changes?after_id={after}").json()
    id_at, status_at = first.json()["fields"].index("id"), first.json()["fields"].index("status")
    open_ids = sorted(p[id_at] for p in points if p[status_at] in ("PENDING", "RUNNING"))
    best = _get(http, f"{api}/train_jobs/{app}/1/best_trials").json()["trials"][0]["id"]
    paths = _reads(app, job, trials, open_ids, after, best)
    reads: dict[str, Any] = {}
    for name, path in paths.items():
        times, size = _time(http, f"{api}{path}", repeats)
        reads[name] = {"p50_ms": _ms(_percentile(times, 50)), "p99_ms": _ms(_percentile(times, 99)), "bytes": size,
                       "path": path}  # fmt: skip
    full_times = []
    answers = size = 0
    for _ in range(max(1, min(3, repeats))):
        started = time.perf_counter()
        answers, size, after_id, more = 0, 0, 0, True
        while more:
            response = _get(http, f"{api}/train_jobs/{app}/1/trials/changes?after_id={after_id}")
            body = response.json()
            answers, size, after_id, more = answers + 1, size + len(response.content), body["last_id"], body["more"]
        full_times.append(time.perf_counter() - started)
    started = time.perf_counter()
    pages = 0
    page_url = f"{api}/train_jobs/{app}/1/trials?per_page=500&page="
    while True:
        pages += 1
        body = _get(http, f"{page_url}{pages}").json()
        if pages * 500 >= body["total"]:
            break
    iter_s = time.perf_counter() - started
    return {
        "trials": trials,
        "reads": reads,
        "changes_full_first_read": {
            "p50_ms": _ms(_percentile(full_times, 50)), "p99_ms": _ms(_percentile(full_times, 99)),
            "answers": answers, "bytes": size,
        },
        "sdk_iter_all": {"s": round(iter_s, 2), "pages": pages},
        "_paths": paths,
    }  # fmt: skip


def _get(http: requests.Session, url: str) -> requests.Response:
    response = http.get(url, timeout=300)
    if response.status_code != 200:
        raise RuntimeError(f"GET {url}: {response.status_code} {response.text[:300]}")
    return response


def _time(http: requests.Session, url: str, repeats: int) -> tuple[list[float], int]:
    size = len(_get(http, url).content)  # the warm-up
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        _get(http, url)
        times.append(time.perf_counter() - started)
    return times, size


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[rank]


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def _analyze(engine: Engine) -> None:
    """``VACUUM ANALYZE`` (PostgreSQL) or ``ANALYZE`` (SQLite): what autovacuum does soon after a bulk load.

    The planner then knows the tables' sizes, and PostgreSQL's visibility map lets it
    answer counts from an index alone.
    """
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.exec_driver_sql("VACUUM ANALYZE" if engine.dialect.name == "postgresql" else "ANALYZE")


def _reads_trials(statement: str) -> bool:
    return " trials" in statement and "FROM users" not in statement.split("FROM", 1)[-1][:20]


def _explain(engine: Engine, statements: Sequence[tuple[str, Any]]) -> list[dict[str, Any]]:
    """The plan of each statement, run again under EXPLAIN with the parameters it ran with."""
    prefix = "EXPLAIN (ANALYZE, COSTS OFF) " if engine.dialect.name == "postgresql" else "EXPLAIN QUERY PLAN "
    plans = []
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        for statement, parameters in statements:
            cursor.execute(prefix + statement, parameters)
            rows = cursor.fetchall()
            lines = [row[0] for row in rows] if engine.dialect.name == "postgresql" else [str(row[-1]) for row in rows]
            plans.append({"sql": " ".join(statement.split()), "plan": lines})
        raw.rollback()
    finally:
        raw.close()
    return plans


#: The issue's bounds at 100,000 trials, in ms: a page of the list, a poll of the changes, the best trials.
TARGETS_MS = {"list": 200.0, "changes": 50.0, "best_trials": 100.0}


def target_of(read: str) -> float | None:
    """The bound a read is held to (:data:`TARGETS_MS`); None for the job, metrics and first reads of the feed."""
    if read.startswith("best_trials"):
        return TARGETS_MS["best_trials"]
    if read.startswith("changes, poll"):
        return TARGETS_MS["changes"]
    if read.startswith(("page ", "middle ", "last ", "SDK ", "status=", "model_id=")):
        return TARGETS_MS["list"]
    return None


def markdown(result: dict[str, Any]) -> str:
    """The report: p50 / p99 per read and job size, the feed's first read, and the plans of the main reads."""
    counts = list(result["jobs"])
    head = " | ".join(f"{int(c):,} trials p50 / p99" for c in counts)
    lines = [
        "# The API on large jobs",
        "",
        f"`bench/scale_api.py`, {result['date']}, {result['machine']}, {result['database']}. "
        f"{result['repeats']} requests per read after one warm-up, one at a time, through the real admin app "
        "(werkzeug's threaded server on loopback, in the process that times it). The machine was shared with "
        "other work: figures vary by tens of percent between runs.",
        "",
        "Each job is RUNNING, over two templates, with its last 1% of trials open (PENDING or RUNNING, at most "
        "1,000), and every job lives in the one database. Interim metrics per trial: "
        + ", ".join(f"{int(c):,} trials {j['metrics_per_trial']}" for c, j in result["jobs"].items())
        + ". A table page is 25 trials, an SDK page 500.",
        "",
        f"| read (ms) | {head} | bound at 100,000 |",
        "|---|" + "---:|" * (len(counts) + 1),
    ]
    for read in result["jobs"][counts[0]]["reads"]:
        cells = []
        for count in counts:
            timing = result["jobs"][count]["reads"][read]
            bound = target_of(read)
            over = bound is not None and int(count) >= 100_000 and timing["p50_ms"] > bound
            cells.append(f"{'**' if over else ''}{timing['p50_ms']:.1f} / {timing['p99_ms']:.1f}{'**' if over else ''}")
        bound = target_of(read)
        lines.append(f"| {read} | {' | '.join(cells)} | {'' if bound is None else f'{bound:.0f}'} |")
    lines += [
        "",
        "Bold: a median over the issue's bound. `changes, poll` names the open trials (up to 1,000) and asks "
        "for trials above the last id, as the job page does every 2 s.",
        "",
        "| whole reads | " + " | ".join(f"{int(c):,} trials" for c in counts) + " |",
        "|---|" + "---:|" * len(counts),
        "| `trials/changes` first read, default limit (10,000 an answer), all answers: p50 ms | "
        + " | ".join(f"{result['jobs'][c]['changes_full_first_read']['p50_ms']:.0f}" for c in counts)
        + " |",
        "| ... answers, MB | "
        + " | ".join(
            f"{result['jobs'][c]['changes_full_first_read']['answers']}, "
            f"{result['jobs'][c]['changes_full_first_read']['bytes'] / 1e6:.1f}"
            for c in counts
        )
        + " |",
        "| every trial through the SDK's `iter_trials` (pages of 500), s | "
        + " | ".join(f"{result['jobs'][c]['sdk_iter_all']['s']:.2f}" for c in counts)
        + " |",
        "| filling the job (COPY on PostgreSQL) and VACUUM ANALYZE, s | "
        + " | ".join(f"{result['jobs'][c]['fill_s']:.0f}" for c in counts)
        + " |",
        "",
    ]
    if result["plans"]:
        lines += [
            f"## Plans at {int(counts[-1]):,} trials",
            "",
            "`EXPLAIN (ANALYZE, COSTS OFF)` of the statements each read ran on trials, with the parameters it ran "
            "with (the JSON has every read's).",
            "",
        ]
        for read in MAIN_READS:
            for plan in result["plans"].get(read, []):
                lines += [f"**{read}**: `{plan['sql'][:160]}...`", "", "```", *plan["plan"], "```", ""]
    if "setup" in result:  # a result from before bench/setup_record.py has none
        from setup_record import setup_markdown  # a sibling, on the path as main() and bench's scripts put it

        lines += [setup_markdown(result["setup"]), ""]
    return "\n".join(lines)


def main() -> None:
    import argparse
    import os
    import platform
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))  # the sibling benchmark, whichever way this one is loaded
    from overhead import postgres_database
    from setup_record import RunSetup

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--server-url",
        default=os.environ.get("TEST_POSTGRES_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test"),
        help="a PostgreSQL database to create the benchmark's own database from (it is dropped afterwards)",
    )
    parser.add_argument("--quick", action="store_true", help="1,000 and 10,000 trials, 5 requests a read")
    parser.add_argument("--no-save", action="store_true", help="print the results only")
    args = parser.parse_args()
    counts = (1_000, 10_000) if args.quick else (1_000, 10_000, 100_000)
    setup = RunSetup(
        "the API: one request at a time on loopback, each read after a warm-up, with no other reader or writer "
        "on the database",
        placement="not applicable (no job driver: the jobs are filled straight into their tables)",
        fusion="not applicable (no trial runs)",
        warm_start="not applicable (no trial runs)",
    )
    with postgres_database(args.server_url) as url:
        result = measure(url, counts, repeats=5 if args.quick else 20)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    result = {
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {cores} cores, Python {platform.python_version()}",
        **result,
        "setup": setup.finish(),
    }
    report = markdown(result)
    print(report)
    if not args.no_save:
        results = Path(__file__).parent / "results"
        suffix = "_quick" if args.quick else ""
        (results / f"scale_api{suffix}.json").write_text(json.dumps(result, indent=1) + "\n")
        (results / f"scale_api{suffix}.md").write_text(report + "\n")


if __name__ == "__main__":
    main()
