"""Choosing the worker machine that holds a job's data (the Celery executor's routing)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

from sqlalchemy import update
from worker_world import Platform

from baobab.store import SubJob, Trial, TrialState, session_scope
from baobab.worker._affinity import affinity_view, choose_node, node_of


def test_the_node_is_the_worker_name_without_its_process() -> None:
    assert node_of("w0@cluster:1234") == "w0@cluster"
    assert node_of("baobab-7@host.example:99") == "baobab-7@host.example"


def test_a_holder_with_a_free_slot_is_chosen_the_one_that_ran_most_of_the_job_first() -> None:
    capacity = {"a@h": 2, "b@h": 4, "c@h": 8}
    holders = Counter({"a@h": 5, "b@h": 1})  # c has the most room but holds nothing of the job
    assert choose_node(holders, capacity, Counter({"a@h": 1}), queue_ahead=1) == "a@h"
    # a busy: the other holder with a free slot, not the machine that has nothing of the job
    assert choose_node(holders, capacity, Counter({"a@h": 2}), queue_ahead=1) == "b@h"
    # equal shares of the job: the one with more room
    assert choose_node(Counter({"a@h": 2, "b@h": 2}), capacity, Counter(), queue_ahead=1) == "b@h"


def test_between_equal_holders_the_job_s_home_is_chosen() -> None:
    """A job's first trials go to any machine; the one that took its first trial keeps the job."""
    capacity = {"a@h": 1, "b@h": 1}
    alike = Counter({"a@h": 1, "b@h": 1})
    busy = Counter({"a@h": 1, "b@h": 1})
    assert choose_node(alike, capacity, busy, queue_ahead=1, home="b@h") == "b@h"
    assert choose_node(alike, capacity, busy, queue_ahead=1, home="a@h") == "a@h"
    # the home does not outweigh the job's share, nor keep a trial from a holder with a free slot
    assert choose_node(Counter({"a@h": 2, "b@h": 1}), capacity, busy, queue_ahead=1, home="b@h") == "a@h"
    assert choose_node(alike, capacity, Counter({"a@h": 1}), queue_ahead=1, home="a@h") == "b@h"


def test_a_trial_waits_at_a_busy_holder_only_when_no_machine_is_idle() -> None:
    capacity = {"a@h": 1, "b@h": 1}
    holders = Counter({"a@h": 3})
    # a runs one; b, which holds nothing of the job, is idle: the shared queue, where b takes it at once
    assert choose_node(holders, capacity, Counter({"a@h": 1}), queue_ahead=1) is None
    # both busy: queued ahead at a, which has the job's data
    assert choose_node(holders, capacity, Counter({"a@h": 1, "b@h": 1}), queue_ahead=1) == "a@h"
    # a runs one and has one waiting: no room even ahead
    assert choose_node(holders, capacity, Counter({"a@h": 2, "b@h": 1}), queue_ahead=1) is None


def test_no_node_when_no_holder_is_alive() -> None:
    capacity = {"a@h": 1}
    assert choose_node(Counter({"gone@h": 3}), capacity, Counter(), queue_ahead=1) is None
    assert choose_node(Counter(), capacity, Counter(), queue_ahead=1) is None


def test_the_view_counts_holders_running_and_waiting_trials_per_machine(platform: Platform) -> None:
    """One query on each backend: who ran the job, who runs what now, what waits for whom."""
    now = datetime.now(UTC)
    job_trials = [platform.add_trial() for _ in range(5)]
    other = platform.add_trial(train_args={"other": True})  # another job's trial
    rows = {
        job_trials[0]: (TrialState.COMPLETED, "a@h:1", None),
        job_trials[1]: (TrialState.COMPLETED, "a@h:2", None),
        job_trials[2]: (TrialState.RUNNING, "b@h:1", now),
        other: (TrialState.RUNNING, "a@h:1", now - timedelta(minutes=5)),  # silent: no load
    }
    with session_scope(platform.engine) as session:
        for trial_id, (status, worker, beat) in rows.items():
            session.execute(
                update(Trial).where(Trial.id == trial_id).values(status=status, worker=worker, heartbeat_at=beat)
            )
    routed = {job_trials[3]: "a@h", job_trials[4]: "b@h", job_trials[0]: "b@h"}  # the last was claimed since
    with session_scope(platform.engine) as session:
        job_id = session.get(SubJob, session.get(Trial, job_trials[0]).sub_job_id).train_job_id
        holders, load, home = affinity_view(session, job_id, now - timedelta(seconds=60), routed)
    assert holders == Counter({"a@h": 2, "b@h": 1})
    assert home == "a@h"  # the job's lowest-id trial ran there
    assert load == Counter({"b@h": 2, "a@h": 1})  # b runs one and has one waiting; a has one waiting
