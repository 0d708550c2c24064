"""One lease protocol for train jobs (job drivers) and inference jobs (predictor hosts)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from conftest import add_job
from sqlalchemy import Engine, select, update

from baobab.enums import JobStatus
from baobab.store._db import (
    Advisor,
    InferenceJob,
    Lease,
    TrainJob,
    add_inference_job,
    beat_advisor,
    drop_advisor,
    fair_share,
    job_sharing,
    session_scope,
)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
Table = type[TrainJob] | type[InferenceJob]


def _jobs(engine: Engine, table: Table, count: int) -> list[int]:
    """``count`` train jobs, or as many inference jobs on one train job."""
    if table is TrainJob:
        return [add_job(engine, app_version=v + 1).job_id for v in range(count)]
    train_job_id = add_job(engine).job_id
    with session_scope(engine) as session:
        owner_id = session.scalar(select(TrainJob.owner_id))
        assert owner_id is not None
        jobs = [
            add_inference_job(
                session, owner_id=owner_id, train_job_id=train_job_id, api_key_hash="h", public=False, trial_ids=[]
            )
            for _ in range(count)
        ]
        return [job.id for job in jobs]


def _holders(engine: Engine, table: Table) -> dict[int, tuple[str | None, datetime | None]]:
    with session_scope(engine) as session:
        rows = session.execute(select(table.id, table.driver, table.lease_expires_at))
        return {row.id: (row.driver, row.lease_expires_at) for row in rows}


@pytest.fixture(params=[TrainJob, InferenceJob], ids=["train_jobs", "inference_jobs"])
def table(request: pytest.FixtureRequest) -> Table:
    return request.param  # type: ignore[no-any-return]


def test_a_free_lease_is_taken_and_kept_by_its_holder(engine: Engine, table: Table) -> None:
    (job_id,) = _jobs(engine, table, 1)
    a, b = Lease(table, "a", MINUTE), Lease(table, "b", MINUTE)
    with session_scope(engine) as session:
        assert a.take(session, job_id, NOW)
        assert not b.take(session, job_id, NOW + MINUTE / 2)
        assert a.take(session, job_id, NOW + MINUTE / 2)
    assert _holders(engine, table) == {job_id: ("a", NOW + MINUTE * 3 / 2)}


def test_a_lease_that_ran_out_is_taken_by_another(engine: Engine, table: Table) -> None:
    (job_id,) = _jobs(engine, table, 1)
    a, b = Lease(table, "a", MINUTE), Lease(table, "b", MINUTE)
    with session_scope(engine) as session:
        a.take(session, job_id, NOW)
        assert b.take(session, job_id, NOW + 2 * MINUTE)
    assert _holders(engine, table) == {job_id: ("b", NOW + 3 * MINUTE)}


def test_take_honours_its_conditions(engine: Engine, table: Table) -> None:
    (job_id,) = _jobs(engine, table, 1)
    with session_scope(engine) as session:
        assert not Lease(table, "a", MINUTE).take(session, job_id, NOW, table.id != job_id)
    assert _holders(engine, table) == {job_id: (None, None)}


def test_renewing_extends_the_leases_held_and_drops_those_another_took(engine: Engine, table: Table) -> None:
    kept, taken, foreign = _jobs(engine, table, 3)
    a, b = Lease(table, "a", MINUTE), Lease(table, "b", MINUTE)
    with session_scope(engine) as session:
        a.take(session, kept, NOW)
        a.take(session, taken, NOW)
        b.take(session, taken, NOW + 2 * MINUTE)
        b.take(session, foreign, NOW)
        assert a.renew(session, [kept, taken, foreign], NOW + 2 * MINUTE) == {kept}
        assert a.renew(session, [kept], NOW + 2 * MINUTE, table.id != kept) == set()
        assert a.renew(session, [], NOW) == set()
    assert _holders(engine, table) == {
        kept: ("a", NOW + 3 * MINUTE),
        taken: ("b", NOW + 3 * MINUTE),
        foreign: ("b", NOW + MINUTE),
    }


def test_releasing_hands_back_only_the_holders_own_leases(engine: Engine, table: Table) -> None:
    mine, kept, foreign = _jobs(engine, table, 3)
    a, b = Lease(table, "a", MINUTE), Lease(table, "b", MINUTE)
    with session_scope(engine) as session:
        a.take(session, mine, NOW)
        a.take(session, kept, NOW)
        b.take(session, foreign, NOW)
        assert a.release(session, table.id != kept) == 1
    assert _holders(engine, table) == {mine: (None, None), kept: ("a", NOW + MINUTE), foreign: ("b", NOW + MINUTE)}


def test_free_and_lapsed_elsewhere_tell_apart_the_holders_own_jobs(engine: Engine, table: Table) -> None:
    nobodys, own, others, lapsed = _jobs(engine, table, 4)
    a, b = Lease(table, "a", MINUTE), Lease(table, "b", MINUTE)
    with session_scope(engine) as session:
        a.take(session, own, NOW)
        b.take(session, others, NOW)
        b.take(session, lapsed, NOW - 2 * MINUTE)
        free = set(session.scalars(select(table.id).where(a.free(NOW))))
        lapsed_elsewhere = set(session.scalars(select(table.id).where(a.lapsed_elsewhere(NOW))))
        held = set(session.scalars(select(table.id).where(a.held())))
    assert (free, lapsed_elsewhere, held) == ({nobodys, own, lapsed}, {nobodys, lapsed}, {own})


def test_the_train_job_state_is_left_alone(engine: Engine) -> None:
    (job_id,) = _jobs(engine, TrainJob, 1)
    with session_scope(engine) as session:
        Lease(TrainJob, "a", MINUTE).take(session, job_id, NOW)
        assert session.scalar(select(TrainJob.status)) is JobStatus.PENDING


def test_live_drivers_share_the_unfinished_jobs_and_a_silent_or_departed_one_counts_no_more(engine: Engine) -> None:
    jobs = _jobs(engine, TrainJob, 5)
    with session_scope(engine) as session:
        session.execute(update(TrainJob).where(TrainJob.id == jobs[0]).values(status=JobStatus.COMPLETED))
        beat_advisor(session, "gone", NOW - 2 * 60 * MINUTE)  # its beats stopped two hours ago
        beat_advisor(session, "silent", NOW - MINUTE)  # and this one's a minute ago
        beat_advisor(session, "a", NOW + MINUTE)
        beat_advisor(session, "b", NOW + MINUTE)
    with session_scope(engine) as session:
        assert job_sharing(session, NOW) == (4, 2)  # four jobs unfinished; two drivers alive
        assert set(session.scalars(select(Advisor.name))) == {"a", "b", "silent"}  # the long silent one went
        beat_advisor(session, "b", NOW + 2 * MINUTE)  # a beat renews the row, it adds none
        drop_advisor(session, "a")
    with session_scope(engine) as session:
        assert job_sharing(session, NOW) == (4, 1)
        assert job_sharing(session, NOW + 3 * MINUTE) == (4, 0)


@pytest.mark.parametrize(("unfinished", "live", "share"), [(4, 2, 2), (5, 2, 3), (1, 4, 1), (0, 3, 0), (3, 0, 3)])
def test_a_fair_share_lets_the_live_drivers_hold_every_job_between_them(unfinished: int, live: int, share: int) -> None:
    assert fair_share(unfinished, live) == share
    assert share * max(live, 1) >= unfinished
