"""Request logs end to end: the admin API on loopback, inference supervisors, real predictors, the SDK.

Three inference jobs of one user serve a TinyRegressor trial: A logs every request
(written within 0.1 s), B logs none (the default rate), and C logs every request but
holds them for a minute, so that when C is deleted its predictor still has records to
write as it stops. Another user and an admin try to read A's logs. SQLite only: the
database holds only the rate; the store tests run both backends.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from predictor_world import World, supervise, tabular_frame, two_users_and_a_trial

from baobab.sdk import ApiError, Client
from baobab.store import (
    LocalEventChannel,
    delete_finished_inference_job,
    mark_inference_job_stopped,
    session_scope,
)
from baobab.testing import wait_until

sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def _records(client: Client, job_id: int, folder: Path) -> tuple[list[dict[str, Any]], bytes] | None:
    """Every record of the job's logs, oldest day first, and the raw bytes, downloaded through the SDK; None when
    a day's download is not the size the listing said (a part was written in between: ask again)."""
    raw = b""
    for day in reversed(client.list_request_logs(job_id)):
        path = client.download_request_log(job_id, day["day"], folder)
        assert path.name == day["name"] == f"inference-{job_id}-{day['day']}.jsonl"
        data = path.read_bytes()
        if len(data) != day["size_bytes"]:
            return None
        raw += data
    return [json.loads(line) for line in raw.decode().splitlines()], raw


@sqlite_only
def test_logs_are_written_at_the_rate_read_by_the_owner_only_and_deleted_with_their_job(
    platform: tuple[World, LocalEventChannel, str], tmp_path: Path
) -> None:
    world, events, url = platform
    users = two_users_and_a_trial(world, url)
    root, ann, bob, app_name, trial = users.root, users.ann, users.bob, users.app, users.trial

    every = ann.create_inference_job(app_name, k=1, request_log_rate=1.0)
    none = ann.create_inference_job(app_name, k=1)
    late = ann.create_inference_job(app_name, k=1, request_log_rate=1)
    assert (every["request_log_rate"], none["request_log_rate"], late["request_log_rate"]) == (1.0, 0.0, 1.0)
    quick, quick_halt = supervise(world, events, {every["id"], none["id"]}, request_log_flush_s=0.1)
    slow, slow_halt = supervise(world, events, {late["id"]}, request_log_flush_s=60)
    try:
        for job in (every, none, late):
            ann.wait_for_inference_job(job["id"], timeout=120)
        rows = tabular_frame("diabetes").drop(columns="target").to_numpy()
        started = datetime.now(UTC)

        # A logs each answered request: 12 of one query, one of two; a refused one is not an answer.
        sent = [[rows[i].tolist()] for i in range(12)] + [rows[20:22].tolist()]
        answers = [ann.predict(queries, inference_job_id=every["id"]) for queries in sent]
        with pytest.raises(ApiError) as bad:
            ann.predict([[1.0, 2.0]], inference_job_id=every["id"])
        assert bad.value.status == 400
        folder = tmp_path / "downloads"
        folder.mkdir()
        records, raw = wait_until(
            lambda: (found := _records(ann, every["id"], folder)) and len(found[0]) == len(sent) and found,
            what="every answered request of A in its log",
        )
        assert sorted(map(json.dumps, (r["queries"] for r in records))) == sorted(map(json.dumps, sent))
        by_query = {json.dumps(r["queries"]): r for r in records}
        for queries, answer in zip(sent, answers, strict=True):
            record = by_query[json.dumps(queries)]
            assert record["predictions"] == answer["predictions"]
            assert record["members"] == answer["members"] == {"answered": [trial.trial_id], "left_out": []}
            assert record["latency_ms"] > 0
            assert started <= datetime.fromisoformat(record["time"]) <= datetime.now(UTC)
        assert every["api_key"].encode() not in raw and b"Bearer" not in raw  # the key is never logged

        # Only the owner and the admins read them: to anyone else the job is not there.
        assert root.list_request_logs(every["id"]) == ann.list_request_logs(every["id"])
        day = ann.list_request_logs(every["id"])[0]["day"]
        for call in (lambda: bob.list_request_logs(every["id"]), lambda: bob.download_request_log(every["id"], day)):
            with pytest.raises(ApiError) as refused:
                call()
            assert (refused.value.status, refused.value.message) == (404, f"no inference job with id {every['id']}")
        with pytest.raises(ApiError) as bad_day:
            ann.download_request_log(every["id"], "yesterday")
        assert (bad_day.value.status, bad_day.value.field) == (400, "day")
        with pytest.raises(ApiError) as no_day:
            ann.download_request_log(every["id"], "2001-02-03")
        assert (no_day.value.status, no_day.value.message) == (
            404, f"inference job {every['id']} logged no requests on 2001-02-03 (UTC)"
        )  # fmt: skip

        # B, at the default rate, logs nothing, not even as its predictor stops.
        for i in range(10):
            ann.predict([rows[i].tolist()], inference_job_id=none["id"])
        ann.stop_inference_job(none["id"])
        wait_until(lambda: quick.predictor_pid(none["id"]) is None, what="B's predictor gone")
        assert ann.list_request_logs(none["id"]) == []
        assert world.store.files(f"request_logs/inference-{none['id']}") == {}

        # A running job is not deleted; a stopped one is, with its logs.
        with pytest.raises(ApiError) as running:
            ann.delete_inference_job(every["id"])
        assert running.value.status == 409 and "stop it first" in running.value.message
        ann.stop_inference_job(every["id"])
        ann.delete_inference_job(every["id"])
        with pytest.raises(ApiError) as gone:
            ann.list_request_logs(every["id"])
        assert gone.value.status == 404
        assert every["id"] not in [j["id"] for j in ann.list_inference_jobs()]
        wait_until(lambda: quick.predictor_pid(every["id"]) is None, what="A's predictor gone")
        assert world.store.files(f"request_logs/inference-{every['id']}") == {}

        # C holds its records when it is stopped and deleted at once, behind its supervisor's back (no event):
        # its predictor writes them as it stops, after the job and its logs were deleted, and the supervisor,
        # which finds the job gone, deletes them again.
        for i in range(3):
            ann.predict([rows[i].tolist()], inference_job_id=late["id"])
        assert ann.list_request_logs(late["id"]) == []  # gathered, not written yet
        with session_scope(world.engine) as session:
            assert mark_inference_job_stopped(session, late["id"], now=datetime.now(UTC))
            assert delete_finished_inference_job(session, late["id"])
        wait_until(lambda: slow.predictor_pid(late["id"]) is None, what="C's predictor gone")
        log = (world.settings.home / "logs" / f"predictor-{late['id']}.log").read_text()
        assert f"inference job {late['id']}: the request log wrote 3 records (1 parts)" in log
        wait_until(lambda: world.store.files(f"request_logs/inference-{late['id']}") == {}, what="C's late part gone")
    finally:
        quick_halt()
        slow_halt()
