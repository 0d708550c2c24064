"""A SpaceModel trial keeps the architecture it trained, and the admin API answers it, end to end.

A real job driver runs a real train job on a LocalExecutor (a worker process reporting
through the admin API, as on a cluster) over two templates: ``templates/tiny_space.py``,
a SpaceModel whose decisions each change one node of its base, and ``templates/noop.py``,
an ordinary template. Through the SDK, as the web UI does over HTTP: each SpaceModel
trial's record marks changed exactly the nodes its choices changed; a trial of the
ordinary template, and one not run yet, answer 404 saying why; another user gets for
the architecture the answer they get for the trial itself.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from sqlalchemy import select, update
from worker_world import TEMPLATES, Platform, driving

from baobab.admin import hash_password
from baobab.model import Task, load_template
from baobab.sdk import ApiError, Client
from baobab.store import (
    Event,
    EventKind,
    LocalEventChannel,
    SubJob,
    TrainJob,
    Trial,
    TrialState,
    User,
    UserRole,
    add_train_job,
    session_scope,
)
from baobab.testing import wait_until

TRIALS = 4
PASSWORD = "a-password"


def _run_job(platform: Platform) -> dict[str, list[tuple[int, TrialState, dict[str, object]]]]:
    """A job over tiny_space.py and noop.py, driven until it ends: each template's trials (id, status, knobs)."""
    files = ("tiny_space.py", "noop.py")
    events = LocalEventChannel()
    with driving(platform, events):
        with session_scope(platform.engine) as session:
            job = add_train_job(
                session,
                owner_id=platform.owner_id,
                app=f"space-{uuid.uuid4().hex[:8]}",
                app_version=1,
                task=Task.TABULAR_CLASSIFICATION,
                train_dataset_id=platform.datasets[0],
                val_dataset_id=platform.datasets[1],
                budget={"MODEL_TRIAL_COUNT": TRIALS, "GPU_COUNT": 0},
                train_args={},
                target="y",
                seed=7,
                sub_jobs=[(platform.template(file), "random") for file in files],
            )
            job_id = job.id
        events.publish(Event(EventKind.JOB_CREATED, job_id))

        def finished() -> bool:
            with session_scope(platform.engine) as session:
                return session.get_one(TrainJob, job_id).status.is_finished()

        wait_until(finished, timeout=180, what="the job to finish")
    trials: dict[str, list[tuple[int, TrialState, dict[str, object]]]] = {}
    with session_scope(platform.engine) as session:
        for file in files:
            rows = session.execute(
                select(Trial.id, Trial.status, Trial.knobs)
                .join(SubJob, SubJob.id == Trial.sub_job_id)
                .where(SubJob.train_job_id == job_id, SubJob.model_template_id == platform.template(file))
                .order_by(Trial.number)
            )
            trials[file] = [(trial_id, status, knobs) for trial_id, status, knobs in rows]
    return trials


def _client(platform: Platform, user_id: int | None = None) -> Client:
    """The SDK signed in as the platform's owner, or as a new MODEL_DEVELOPER when ``user_id`` is None."""
    with session_scope(platform.engine) as session:
        if user_id is None:
            user = User(email=f"{uuid.uuid4().hex[:8]}@example.com", password_hash="-", role=UserRole.MODEL_DEVELOPER)
            session.add(user)
            session.flush()
            user_id = user.id
        session.execute(update(User).where(User.id == user_id).values(password_hash=hash_password(PASSWORD)))
        email = session.get_one(User, user_id).email
    client = Client(platform.api_url)
    client.login(email, PASSWORD)
    return client


def _refusal(call: Callable[[int], object], trial_id: int) -> tuple[int, str]:
    """The status and message of the API's refusal of ``call(trial_id)``."""
    with pytest.raises(ApiError) as refused:
        call(trial_id)
    return refused.value.status, refused.value.message


def test_a_space_trial_keeps_its_architecture_and_the_api_answers_it_to_whoever_sees_the_trial(
    platform: Platform,
) -> None:
    trials = _run_job(platform)
    owner, stranger = _client(platform, platform.owner_id), _client(platform)
    space = load_template(TEMPLATES / "tiny_space.py", "TinySpace").model_space()
    defaults = space.defaults()

    changed_somewhere = False
    assert [status for _, status, _ in trials["tiny_space.py"]] == [TrialState.COMPLETED] * TRIALS
    for trial_id, _, knobs in trials["tiny_space.py"]:
        record = owner.get_trial_architecture(trial_id)
        assert record["choices"] == {name: knobs[name] for name in defaults}
        # A decision is named after its mutator and the node it changes; choosing other than the
        # base's value changes that node, and only that one.
        expected = {}
        for name, base_value in defaults.items():
            mutator, node = name.split("_", 1)
            if knobs[name] != base_value:
                expected[node] = mutator
        changed = {node["name"]: node["mutator"] for node in record["nodes"] if node["changed"]}
        assert changed == expected, (knobs, record)
        names = [node["name"] for node in record["nodes"]]
        assert names[0] == "x" and names[-1] == "output"
        assert all(node["mutator"] is None for node in record["nodes"] if not node["changed"])
        changed_somewhere |= bool(changed)
        assert owner.get_trial(trial_id)["has_architecture"] is True
        # Another user: the same 404 for the architecture as for the trial itself.
        assert _refusal(stranger.get_trial_architecture, trial_id) == _refusal(stranger.get_trial, trial_id)
    assert changed_somewhere, "the job's seed proposed only the base: pick one that explores"

    plain = trials["noop.py"][0][0]
    assert owner.get_trial(plain)["has_architecture"] is False
    assert _refusal(owner.get_trial_architecture, plain) == (
        404,
        f"trial {plain} has no architecture record: its template is not a SpaceModel",
    )
    pending = platform.add_trial(file="tiny_space.py")
    status, message = _refusal(owner.get_trial_architecture, pending)
    assert status == 404 and message.startswith(f"trial {pending} has no architecture record yet: it is PENDING")
