"""PostgreSQL's plans for the reads of a job's trials, on a table big enough for the planner to care.

Latencies are measured by ``bench/scale_api.py``; this checks what does not depend on the
machine: that the best trials come from walking the index on ``(sub_job_id, status, score)``
and a poll of the changes from an index, never from reading the whole table. (The list's
plans depend on how much of the table one job holds; the benchmark shows them.)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import Engine, event, insert
from train_job_world import T0, add_model, job_body, upload_dataset

from baobab.store import Trial, TrialState, UserRole, session_scope

Headers = dict[str, str]
_JOBS, _TRIALS = 8, 1500  # trials per sub-job; two sub-jobs a job: 24,000 trials


@contextmanager
def _statements(engine: Engine) -> Iterator[list[tuple[str, Any]]]:
    """The SQL statements (and their parameters) run on ``engine`` in the block."""
    seen: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def _plans(engine: Engine, statements: list[tuple[str, Any]]) -> list[str]:
    """``EXPLAIN`` of each statement that reads trials, one text each."""
    plans = []
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        for statement, parameters in statements:
            if "FROM trials" in statement or "JOIN trials" in statement:
                cursor.execute("EXPLAIN " + statement, parameters)
                plans.append("\n".join(row[0] for row in cursor.fetchall()))
        raw.rollback()
    finally:
        raw.close()
    return plans


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_best_trials_and_changes_use_indexes_on_a_large_table(
    app: Flask, client: FlaskClient, add_user: Any, db_url: str
) -> None:
    user, headers = add_user(UserRole.APP_DEVELOPER)
    engine = app.extensions["baobab"].engine
    data = upload_dataset(client, headers)
    models = [add_model(engine, user["id"], name=f"m{i}") for i in range(2)]
    sub_ids = []
    for n in range(_JOBS):
        response = client.post("/api/v1/train_jobs", json=job_body(data, data, models, app=f"a{n}"), headers=headers)
        assert response.status_code == 201, response.json
        sub_ids += [sub["id"] for sub in response.json["sub_jobs"]]
    states = [TrialState.COMPLETED] * 8 + [TrialState.STOPPED, TrialState.ERRORED]
    rows = [
        {
            "sub_job_id": sub_id, "number": number, "knobs": {"lr": number / _TRIALS}, "policies": {},
            "status": states[number % len(states)], "score": (number * 7919 % _TRIALS) / _TRIALS,
            "created_at": T0, "params_path": f"p/{sub_id}/{number}",
        }
        for sub_id in sub_ids
        for number in range(_TRIALS)
    ]  # fmt: skip
    with session_scope(engine) as session:
        session.execute(insert(Trial), rows)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.exec_driver_sql("VACUUM ANALYZE trials")

    with _statements(engine) as best:
        answer = client.get("/api/v1/train_jobs/a3/1/best_trials?k=5&include_stopped=true", headers=headers)
    assert answer.status_code == 200, answer.json
    scores = [t["score"] for t in answer.json["trials"]]
    assert len(scores) == 5 and scores == sorted(scores, reverse=True)
    plans = _plans(engine, best)
    walks = [plan for plan in plans if "Index Scan Backward using ix_trials_sub_job_id_status_score" in plan]
    assert len(walks) >= 1, plans  # one statement: a walk per sub-job and state, merged
    assert not any("Seq Scan on trials" in plan for plan in plans), plans

    last = max(t["id"] for t in answer.json["trials"])
    with _statements(engine) as changes:
        answer = client.get(f"/api/v1/train_jobs/a3/1/trials/changes?after_id={last}&open={last}", headers=headers)
    assert answer.status_code == 200, answer.json
    plans = _plans(engine, changes)
    assert len(plans) == 2 and not any("Seq Scan on trials" in plan for plan in plans), plans
