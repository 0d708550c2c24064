"""Migrations that move data keep it: a database written at the revision before, upgraded, read back."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from alembic import command
from sqlalchemy import Connection, inspect, select, text

from baobab.advisor import parse_job_options
from baobab.enums import RevisionAction
from baobab.store._db import (
    InferenceJob,
    TrainJob,
    TrialClaim,
    claim_trial,
    create_engine_from_url,
    current_revision,
    inference_revision,
    session_scope,
    shared_merge,
    upgrade_database,
)
from baobab.store._db._migrate import alembic_config

CREATED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _migrate(url: str, target: str, *, down: bool = False) -> None:
    engine = create_engine_from_url(url)
    try:
        with engine.begin() as connection:
            (command.downgrade if down else command.upgrade)(alembic_config(connection), target)
    finally:
        engine.dispose()


def _rows_at_0011(connection: Connection) -> tuple[list[int], list[int]]:
    """Two inference jobs as revision 0011 kept them (members by job); their ids and the trial ids."""
    run = connection.execute
    stamp = CREATED.isoformat()
    run(
        text(
            "INSERT INTO users (id, email, password_hash, role, banned, created_at) "
            "VALUES (1, 'a@example.com', 'x', 'APP_DEVELOPER', false, :t)"
        ),
        {"t": stamp},
    )
    run(
        text(
            "INSERT INTO datasets (id, owner_id, name, format, artifact_path, size_bytes, checksum, created_at) "
            "VALUES (1, 1, 'd', 'TABULAR', 'd', 1, '0', :t)"
        ),
        {"t": stamp},
    )
    run(
        text(
            "INSERT INTO model_templates (id, owner_id, name, task, class_name, artifact_path, checksum, "
            "dependencies, access, knob_config, created_at) "
            "VALUES (1, 1, 'm', 'TABULAR_CLASSIFICATION', 'M', 't', '0', '{}', 'PUBLIC', '{}', :t)"
        ),
        {"t": stamp},
    )
    run(
        text(
            "INSERT INTO train_jobs (id, owner_id, app, app_version, task, train_dataset_id, val_dataset_id, "
            "budget, train_args, status, created_at) "
            "VALUES (1, 1, 'shop', 1, 'TABULAR_CLASSIFICATION', 1, 1, '{}', '{}', 'COMPLETED', :t)"
        ),
        {"t": stamp},
    )
    run(
        text(
            "INSERT INTO sub_jobs (id, train_job_id, model_template_id, strategy, seed, status) "
            "VALUES (1, 1, 1, 'random', 1, 'COMPLETED')"
        )
    )
    trials = [11, 12, 13]
    for number, trial_id in enumerate(trials):
        run(
            text(
                "INSERT INTO trials (id, sub_job_id, number, knobs, policies, status, score, created_at, attempts, "
                "servable) VALUES (:id, 1, :n, '{}', '{}', 'COMPLETED', 0.5, :t, 1, true)"
            ),
            {"id": trial_id, "n": number, "t": stamp},
        )
    jobs = [21, 22]
    for job_id, status in zip(jobs, ("RUNNING", "STOPPED"), strict=True):
        run(
            text(
                "INSERT INTO inference_jobs (id, owner_id, train_job_id, status, public, created_at) "
                "VALUES (:id, 1, 1, :s, false, :t)"
            ),
            {"id": job_id, "s": status, "t": stamp},
        )
    members = [(21, 11), (21, 12), (22, 13)]
    for job_id, trial_id in members:
        run(
            text("INSERT INTO inference_members (inference_job_id, trial_id) VALUES (:j, :t)"),
            {"j": job_id, "t": trial_id},
        )
    return jobs, trials  # fmt: skip


def _more_jobs_at_0011(connection: Connection, job_ids: list[int]) -> None:
    """More train jobs of :func:`_rows_at_0011`'s app (versions ``job_ids``), as revision 0011 kept them."""
    for job_id in job_ids:
        connection.execute(
            text(
                "INSERT INTO train_jobs (id, owner_id, app, app_version, task, train_dataset_id, "
                "val_dataset_id, budget, train_args, status, created_at) VALUES (:id, 1, 'shop', :id, "
                "'TABULAR_CLASSIFICATION', 1, 1, '{}', '{}', 'COMPLETED', :t)"
            ),
            {"id": job_id, "t": CREATED.isoformat()},
        )


def test_0013_makes_each_inference_job_one_version_v1_of_its_members_and_back(db_url: str) -> None:
    _migrate(db_url, "0011")
    engine = create_engine_from_url(db_url)
    try:
        with engine.begin() as connection:
            (running, stopped), (t1, t2, t3) = _rows_at_0011(connection)

        assert upgrade_database(db_url) == current_revision(db_url)
        with session_scope(engine) as session:
            for job_id, trials in ((running, [t1, t2]), (stopped, [t3])):
                job = session.get(InferenceJob, job_id)
                assert job is not None
                assert (job.revision, job.served_revision) == (1, None)
                first = inference_revision(session, job_id, 1)
                assert first is not None
                assert (first.action, first.parent, first.created_at, first.error) == (
                    RevisionAction.CREATE, None, CREATED, None
                )  # fmt: skip
                (version,) = first.versions
                assert (version.name, version.weight, version.position) == ("v1", 1.0, 0)
                assert sorted(m.trial_id for m in version.members) == trials

        _migrate(db_url, "0011", down=True)
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT inference_job_id, trial_id FROM inference_members")).all()
        assert sorted(tuple(row) for row in rows) == [(running, t1), (running, t2), (stopped, t3)]
    finally:
        engine.dispose()


def test_0014_adds_the_index_of_a_jobs_trials_by_state_and_score_and_takes_it_away(db_url: str) -> None:
    def trial_indexes() -> dict[str, list[str | None]]:
        engine = create_engine_from_url(db_url)
        try:
            return {index["name"]: index["column_names"] for index in inspect(engine).get_indexes("trials")}
        finally:
            engine.dispose()

    _migrate(db_url, "0013")
    assert "ix_trials_sub_job_id_status_score" not in trial_indexes()
    _migrate(db_url, "0014")
    assert trial_indexes()["ix_trials_sub_job_id_status_score"] == ["sub_job_id", "status", "score"]
    _migrate(db_url, "0013", down=True)
    assert "ix_trials_sub_job_id_status_score" not in trial_indexes()


def test_0015_adds_the_trials_time_breakdown_keeping_their_rows_and_takes_it_away(db_url: str) -> None:
    def trial_columns() -> set[str]:
        engine = create_engine_from_url(db_url)
        try:
            return {column["name"] for column in inspect(engine).get_columns("trials")}
        finally:
            engine.dispose()

    _migrate(db_url, "0011")
    engine = create_engine_from_url(db_url)
    try:
        with engine.begin() as connection:
            _, trials = _rows_at_0011(connection)  # trials that inference members point at
        _migrate(db_url, "0014")
        assert "time_breakdown" not in trial_columns()
        _migrate(db_url, "0015")
        assert "time_breakdown" in trial_columns()
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT id, time_breakdown FROM trials ORDER BY id")).all()
        assert [tuple(row) for row in rows] == [(trial_id, None) for trial_id in trials]
        _migrate(db_url, "0014", down=True)
        assert "time_breakdown" not in trial_columns()
        with engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM trials")).scalar() == len(trials)
    finally:
        engine.dispose()


def test_0017_moves_the_job_options_out_of_train_args_and_back(db_url: str) -> None:
    """Jobs written at 0016 kept their options in train_args: 0017 moves them to options, and the driver reads them."""
    at_0016 = {
        1: {"target": "label"},  # nothing to move
        2: {
            "lr": 0.1,
            "early_stopping": {"rule": "asha", "eta": 3},
            "policies": {"EARLY_STOP": True, "final_trials": 2},
            "fusion": {"max_group": 4},
            "enas": {"train_trials": 2},
            "warm_start": False,
            "base_model": 7,
        },
        3: {"fusion": None, "epochs": 2},  # null meant "not set"
    }
    _migrate(db_url, "0011")
    engine = create_engine_from_url(db_url)
    try:
        with engine.begin() as connection:
            _rows_at_0011(connection)  # train job 1; two more of its app
            _more_jobs_at_0011(connection, [2, 3])
        _migrate(db_url, "0016")
        with engine.begin() as connection:
            for job_id, args in at_0016.items():
                connection.execute(
                    text("UPDATE train_jobs SET train_args = :a WHERE id = :id"), {"a": json.dumps(args), "id": job_id}
                )
        _migrate(db_url, "0017")
        with session_scope(engine) as session:  # the columns 0017 knows (the model has later ones)
            rows = session.execute(select(TrainJob.id, TrainJob.train_args, TrainJob.options)).all()
            jobs = {job_id: (train_args, options) for job_id, train_args, options in rows}
        moved = {key: value for key, value in at_0016[2].items() if key != "lr"}
        assert jobs == {1: ({"target": "label"}, {}), 2: ({"lr": 0.1}, moved), 3: ({"epochs": 2}, {})}
        options = parse_job_options(jobs[2][1], trial_count=5)  # what the driver reads of a migrated job
        assert (options.stopping_rule, options.final_trials, options.max_group) == ("asha", 2, 4)
        assert dict(options.enas) == {"train_trials": 2}
        _migrate(db_url, "0016", down=True)
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT id, train_args FROM train_jobs ORDER BY id")).all()
        assert {job_id: json.loads(args) if isinstance(args, str) else args for job_id, args in rows} == {
            1: {"target": "label"},
            2: at_0016[2],
            3: {"epochs": 2},
        }
    finally:
        engine.dispose()


def test_0020_moves_a_tabular_jobs_target_out_of_train_args_and_back(db_url: str) -> None:
    """Jobs written at 0019 named their target column in train_args: 0020 moves a tabular job's into the column,
    and the worker's claim passes it to train() as before."""
    at_0019 = {
        1: ("TABULAR_CLASSIFICATION", {"target": "label", "epochs": 2}),
        2: ("TABULAR_REGRESSION", {"target": "price"}),
        3: ("TABULAR_CLASSIFICATION", {"epochs": 2}),  # none named: train() keeps its default
        4: ("TABULAR_CLASSIFICATION", {"target": 3}),  # not a column name: train() gets it as before
        5: ("IMAGE_CLASSIFICATION", {"target": "label"}),  # an image job's train() argument, not a column
    }
    _migrate(db_url, "0011")
    engine = create_engine_from_url(db_url)
    try:
        with engine.begin() as connection:
            _rows_at_0011(connection)  # train job 1 and a sub-job of it; more jobs of its app
            _more_jobs_at_0011(connection, [job_id for job_id in at_0019 if job_id != 1])
        _migrate(db_url, "0019")
        with engine.begin() as connection:
            for job_id, (task, args) in at_0019.items():
                connection.execute(
                    text("UPDATE train_jobs SET task = :task, train_args = :a WHERE id = :id"),
                    {"task": task, "a": json.dumps(args), "id": job_id},
                )
        _migrate(db_url, "0020")
        with session_scope(engine) as session:
            jobs = {job.id: (job.train_args, job.target) for job in session.scalars(select(TrainJob))}
        assert jobs == {
            1: ({"epochs": 2}, "label"),
            2: ({}, "price"),
            3: ({"epochs": 2}, None),
            4: ({"target": 3}, None),
            5: ({"target": "label"}, None),
        }
        with session_scope(engine) as session:
            session.execute(text("UPDATE trials SET status = 'PENDING' WHERE id = 11"))
        claim = claim_trial(engine, 11, "w1", now=CREATED)
        assert isinstance(claim, TrialClaim)
        assert (claim.target, claim.train_arguments()) == ("label", {"epochs": 2, "target": "label"})
        _migrate(db_url, "0019", down=True)
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT id, train_args FROM train_jobs ORDER BY id")).all()
        assert {job_id: json.loads(args) if isinstance(args, str) else args for job_id, args in rows} == {
            job_id: args for job_id, (_, args) in at_0019.items()
        }
    finally:
        engine.dispose()


def test_0021_records_the_merges_trials_started_from_reading_the_old_keys_once(db_url: str) -> None:
    """At 0020 a merge of shared trainings was known only by its key's name: 0021 records the ones trials started from
    (the update's trial, the trial merged onto), and a lineage reads them from the table."""
    _migrate(db_url, "0011")
    engine = create_engine_from_url(db_url)
    try:
        with engine.begin() as connection:
            _rows_at_0011(connection)  # trials 11, 12, 13: numbers 0, 1, 2 of sub-job 1
        _migrate(db_url, "0020")
        paths = {
            11: ("params/trial-11.safetensors", None),
            12: ("params/trial-12.safetensors", "params/trial-11.safetensors"),  # no merge: another trial's own
            13: (None, "params/trial-12-shared-onto-0.safetensors"),  # 12's update onto what trial number 0 shared
        }
        with engine.begin() as connection:
            for trial_id, (params, shared) in paths.items():
                connection.execute(
                    text("UPDATE trials SET params_path = :p, shared_params_path = :s WHERE id = :id"),
                    {"p": params, "s": shared, "id": trial_id},
                )
            connection.execute(  # a merge no trial's parameters name: nothing to record
                text("UPDATE trials SET shared_params_path = 'params/gone-shared-onto-1.safetensors' WHERE id = 11")
            )
        _migrate(db_url, "0021")
        with session_scope(engine) as session:
            assert shared_merge(session, "params/trial-12-shared-onto-0.safetensors") == (12, 11, 0)
            assert shared_merge(session, "params/gone-shared-onto-1.safetensors") is None
            assert shared_merge(session, "params/trial-11.safetensors") is None
        _migrate(db_url, "0020", down=True)
        assert "shared_merges" not in inspect(engine).get_table_names()
    finally:
        engine.dispose()
