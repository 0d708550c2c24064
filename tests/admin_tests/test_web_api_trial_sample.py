"""``GET .../trials/sample``: the trials a job page's charts draw, chosen by the database, on SQLite and PostgreSQL.

The reference below is the page's own downsampling (``web/src/lib/charts.ts``) written
again in Python over every trial: the sample must hold exactly what it would keep.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from train_job_world import T0, add_model, job_body, upload_dataset

from baobab.store import Trial, TrialState, UserRole, session_scope

Headers = dict[str, str]
AddUser = Callable[[UserRole], tuple[dict[str, Any], Headers]]
URL = "/api/v1/train_jobs/fraud/1/trials/sample"


@pytest.fixture
def developer(add_user: AddUser) -> tuple[dict[str, Any], Headers]:
    return add_user(UserRole.APP_DEVELOPER)


def _job(app: Flask, client: FlaskClient, owner: tuple[dict[str, Any], Headers], templates: int) -> dict[str, Any]:
    user, headers = owner
    data = upload_dataset(client, headers)
    engine = app.extensions["baobab"].engine
    models = [add_model(engine, user["id"], name=f"fraud-m{i}") for i in range(templates)]
    response = client.post("/api/v1/train_jobs", json=job_body(data, data, models, app="fraud"), headers=headers)
    assert response.status_code == 201, response.json
    return response.json


def _fill(app: Flask, sub_jobs: list[int], n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` trials over the sub-jobs in turn: scored ones over two policies, a few failed, the last few open.

    Returns each as the reference needs it (times in seconds, as the API sends them).
    """
    rng = random.Random(seed)
    rows = []
    for number in range(n):
        status = TrialState.COMPLETED
        if number >= n - 4:
            status = TrialState.RUNNING if number % 2 else TrialState.PENDING
        elif number % 17 == 5:
            status = TrialState.ERRORED
        elif number % 13 == 3:
            status = TrialState.STOPPED
        scored = status in (TrialState.COMPLETED, TrialState.STOPPED)
        finished = T0 + timedelta(seconds=1.37 * number + rng.random()) if status not in _OPEN else None
        early = rng.random() < 0.3
        rows.append(
            Trial(
                sub_job_id=sub_jobs[number % len(sub_jobs)], number=number, status=status,
                knobs={"lr": rng.random(), "early": early}, policies={"EARLY_STOP": early},
                score=round(rng.random(), 9) if scored else None, finished_at=finished,
                created_at=T0 + timedelta(seconds=number),
            )
        )  # fmt: skip
    with session_scope(app.extensions["baobab"].engine) as session:
        session.add_all(rows)
        session.flush()
        models = {sub: i for i, sub in enumerate(sub_jobs)}
        return [
            {
                "id": t.id, "model": models[t.sub_job_id], "status": t.status.value, "score": t.score,
                "t": t.finished_at.timestamp() if t.finished_at else None, "policy": t.policies["EARLY_STOP"],
            }
            for t in rows
        ]  # fmt: skip


_OPEN = (TrialState.PENDING, TrialState.RUNNING)


def _best_steps(trials: list[dict[str, Any]]) -> set[int]:
    """``bestSoFar``: the trials that raised the best score, by finish time, and the last to finish."""
    done = sorted((t for t in trials if t["score"] is not None and t["t"] is not None), key=lambda t: (t["t"], t["id"]))
    steps, best = set(), -math.inf
    for t in done:
        if t["score"] > best:
            best = t["score"]
            steps.add(t["id"])
    return steps | {done[-1]["id"]}


def _sample_best(trials: list[dict[str, Any]], lines: int) -> set[int]:
    """``sampleBest`` over each template's scored trials, best first."""
    kept = set()
    for model in {t["model"] for t in trials}:
        mine = (t for t in trials if t["model"] == model and t["score"] is not None)
        done = sorted(mine, key=lambda t: (-t["score"], t["id"]))
        if len(done) <= lines:
            kept |= {t["id"] for t in done}
            continue
        top = math.ceil(lines / 4)
        rest, want = done[top:], lines - top
        kept |= {t["id"] for t in done[:top]} | {rest[(i * len(rest)) // want]["id"] for i in range(want)}
    return kept


def _thin_scatter(trials: list[dict[str, Any]], points: int) -> set[int]:
    """``scoreScatterOption``'s ``thinScatter`` per combination of policies: the best of each grid cell."""
    done = sorted((t for t in trials if t["score"] is not None and t["t"] is not None), key=lambda t: (t["t"], t["id"]))
    kept = set()
    for policy in {t["policy"] for t in done}:
        group = [t for t in done if t["policy"] == policy]
        share = max(50, round(points * len(group) / len(done)))
        if len(group) <= share:
            kept |= {t["id"] for t in group}
            continue
        side = max(1, math.isqrt(share))
        x0, x1 = min(t["t"] for t in group), max(t["t"] for t in group)
        y0, y1 = min(t["score"] for t in group), max(t["score"] for t in group)

        def cell(v: float, lo: float, hi: float, side: int = side) -> int:
            return min(side - 1, math.floor((v - lo) / (hi - lo) * side)) if hi > lo else 0

        cells: dict[tuple[int, int], dict[str, Any]] = {}
        for t in group:
            key = (cell(t["t"], x0, x1), cell(t["score"], y0, y1))
            if key not in cells or t["score"] > cells[key]["score"]:
                cells[key] = t
        kept |= {t["id"] for t in cells.values()}
    return kept


def test_the_sample_is_what_the_charts_draw_and_counts_what_it_left_out(
    app: Flask, client: FlaskClient, developer: tuple[dict[str, Any], Headers]
) -> None:
    job = _job(app, client, developer, templates=2)
    trials = _fill(app, [sub["id"] for sub in job["sub_jobs"]], 700, seed=3)
    answer = client.get(f"{URL}?points=200&lines=40", headers=developer[1])
    assert answer.status_code == 200, answer.json
    sample = answer.json
    got = {row[0]: dict(zip(sample["fields"], row, strict=True)) for row in sample["trials"]}

    expected = _best_steps(trials) | _thin_scatter(trials, 200) | _sample_best(trials, 40)
    open_ids = {t["id"] for t in trials if t["status"] in ("PENDING", "RUNNING")}
    assert set(got) == expected | open_ids
    assert len(got) < len(trials) / 2  # a sample indeed
    assert [row[0] for row in sample["trials"]] == sorted(got)  # by id, as the changes
    assert sample["last_id"] == max(t["id"] for t in trials)
    model_ids = [sub["model_id"] for sub in job["sub_jobs"]]
    scored = {i: {t["id"] for t in trials if t["model"] == i and t["score"] is not None} for i in range(2)}
    assert sample["omitted"] == {str(model_ids[i]): len(scored[i] - set(got)) for i in range(2)}
    assert all(n > 0 for n in sample["omitted"].values())
    # Each trial as the changes feed sends it.
    one = next(t for t in trials if t["id"] in got and t["score"] is not None)
    assert got[one["id"]]["score"] == one["score"] and got[one["id"]]["model_id"] == model_ids[one["model"]]
    assert got[one["id"]]["finished_at"] == pytest.approx(one["t"], abs=1e-3)
    assert set(got[one["id"]]["knobs"]) == {"lr", "early"}

    # The changes go on from there: nothing new, the open trials as they are.
    open_list = ",".join(str(i) for i in sorted(open_ids))
    changes = client.get(
        f"/api/v1/train_jobs/fraud/1/trials/changes?after_id={sample['last_id']}&open={open_list}", headers=developer[1]
    ).json
    assert sorted(row[0] for row in changes["trials"]) == sorted(open_ids)


def test_a_small_job_comes_whole(app: Flask, client: FlaskClient, developer: tuple[dict[str, Any], Headers]) -> None:
    job = _job(app, client, developer, templates=1)
    assert client.get(URL, headers=developer[1]).json == {
        "fields": ["id", "number", "model_id", "status", "score", "finished_at", "knobs", "policies"],
        "trials": [],
        "last_id": 0,
        "omitted": {},
    }
    trials = _fill(app, [job["sub_jobs"][0]["id"]], 60, seed=1)
    sample = client.get(URL, headers=developer[1]).json
    # Every scored or open trial; the failed ones have nothing to draw.
    assert [row[0] for row in sample["trials"]] == [t["id"] for t in trials if t["score"] is not None or t["t"] is None]
    assert sample["omitted"] == {str(job["sub_jobs"][0]["model_id"]): 0}


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ("?points=0", "points", "query parameter 'points' must be between 1 and 20000"),
        ("?points=many", "points", "must be a whole number, got 'many'"),
        ("?lines=5001", "lines", "query parameter 'lines' must be between 1 and 5000"),
        ("?limit=3", "limit", "unknown query parameter 'limit'; known parameters: points, lines"),
    ],
)
def test_bad_sample_queries_are_refused(
    app: Flask, client: FlaskClient, developer: tuple[dict[str, Any], Headers], query: str, field: str, message: str
) -> None:
    _job(app, client, developer, templates=1)
    response = client.get(f"{URL}{query}", headers=developer[1])
    assert response.status_code == 400
    assert response.json["error"]["field"] == field
    assert message in response.json["error"]["message"]


def test_someone_elses_sample_is_not_found(
    app: Flask, client: FlaskClient, add_user: AddUser, developer: tuple[dict[str, Any], Headers]
) -> None:
    _job(app, client, developer, templates=1)
    _, stranger = add_user(UserRole.APP_DEVELOPER)
    response = client.get(URL, headers=stranger)
    assert response.status_code == 404
    assert response.json["error"]["message"] == "no train job 'fraud' version 1"


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_sample_is_in_the_api_document(client: FlaskClient) -> None:
    operation = client.get("/api/v1/openapi.json").json["paths"]["/api/v1/train_jobs/{app}/{app_version}/trials/sample"]
    query = {p["name"]: p["schema"] for p in operation["get"]["parameters"] if p["in"] == "query"}
    assert query["points"]["maximum"] == 20000 and query["lines"]["maximum"] == 5000
    body = operation["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert body["required"] == ["fields", "trials", "last_id", "omitted"]
    assert set(operation["get"]["responses"]) >= {"200", "400", "404"}
