"""The zoo in the database (SQLite and PostgreSQL): registering, who may be a parent, recording warm starts."""

from __future__ import annotations

import math

import pytest
import torch
from zoo_world import World, cnn

from baobab.exceptions import ConflictError, NotFoundError, RequestError
from baobab.model import Task
from baobab.store import ModelAccess, Trial, TrialState, UserRole, ZooModel, session_scope
from baobab.zoo import DbZoo, ModelGraph, choose_parent, record_parent, register_trial, register_upload, trace_graph
from baobab.zoo._warm_start import module_params

IMAGE = torch.zeros(2, 1, 28, 28)


def _graph(channels: int, depth: int = 2) -> ModelGraph:
    return trace_graph(cnn(channels, depth), IMAGE)


def _upload(world: World, owner: int, channels: int, score: float, access: ModelAccess, **kwargs: object) -> int:
    module = cnn(channels, 2)
    return register_upload(
        world.engine, world.artifacts, owner_id=owner, graph=trace_graph(module, IMAGE), params=module_params(module),
        score=score, task=kwargs.get("task", Task.IMAGE_CLASSIFICATION), name=f"c{channels}", access=access,
    ).id  # fmt: skip


def test_a_finished_trial_registers_once_with_its_own_score_owner_task_and_dataset(world: World) -> None:
    owner = world.user()
    sub_job = world.job(owner)
    module = cnn(8, 2)
    trial = world.trial(sub_job, module=module)
    world.finish(trial, 0.83, module)
    model = register_trial(world.engine, world.artifacts, trial, trace_graph(module, IMAGE))
    assert (model.owner_id, model.task, model.score, model.trial_id, model.access) == (
        owner, "IMAGE_CLASSIFICATION", 0.83, trial, "PRIVATE",
    )  # fmt: skip
    assert (
        model.dataset_id is not None and model.size_bytes > 0 and model.traced and model.io_signature == "1x28x28->10"
    )
    again = register_trial(world.engine, world.artifacts, trial, trace_graph(module, IMAGE))
    assert again.id == model.id
    with session_scope(world.engine) as session:
        row = session.get(ZooModel, model.id)
        trial_row = session.get(Trial, trial)
        assert row is not None and trial_row is not None and row.params_path == trial_row.params_path


def test_only_trained_trials_join(world: World) -> None:
    owner = world.user()
    sub_job = world.job(owner)
    graph = _graph(4)
    running = world.trial(sub_job)
    with pytest.raises(ConflictError, match="RUNNING without parameters"):
        register_trial(world.engine, world.artifacts, running, graph)
    skipped = world.trial(
        sub_job, status=TrialState.COMPLETED, score=0.1, module=cnn(4, 2), policies={"SKIP_TRAIN": True}
    )
    with pytest.raises(ConflictError, match="SKIP_TRAIN"):
        register_trial(world.engine, world.artifacts, skipped, graph)
    with pytest.raises(NotFoundError):
        register_trial(world.engine, world.artifacts, 10**6, graph)


def test_parents_the_owner_may_not_see_are_never_chosen(world: World) -> None:
    alice, bob, carol = world.user(), world.user(), world.user(UserRole.ADMIN)
    child = _graph(16)
    bobs_twin = _upload(world, bob, 16, 0.99, ModelAccess.PRIVATE)  # identical and the best: but private to bob
    alices = _upload(world, alice, 24, 0.70, ModelAccess.PRIVATE)
    public = _upload(world, carol, 12, 0.80, ModelAccess.PUBLIC)
    for owner, expected in [(alice, public), (carol, public), (bob, bobs_twin)]:
        found = choose_parent(world.engine, child, task=Task.IMAGE_CLASSIFICATION, owner_id=owner)
        assert found.parent_id == expected, (owner, found.reason)
    # the admin's job gets no one's private model either (it sees them in the API only)
    assert choose_parent(world.engine, child, task=Task.IMAGE_CLASSIFICATION, owner_id=carol).parent_id != bobs_twin
    with session_scope(world.engine) as session:
        session.get(ZooModel, public).access = ModelAccess.PRIVATE
    assert choose_parent(world.engine, child, task=Task.IMAGE_CLASSIFICATION, owner_id=alice).parent_id == alices


def test_candidates_share_the_task_the_shapes_and_were_traced(world: World) -> None:
    owner = world.user()
    other_task = _upload(world, owner, 16, 0.9, ModelAccess.PRIVATE, task=Task.TABULAR_CLASSIFICATION)
    child = _graph(16)
    assert choose_parent(world.engine, child, task=Task.IMAGE_CLASSIFICATION, owner_id=owner).parent_id is None
    assert choose_parent(world.engine, child, task=Task.TABULAR_CLASSIFICATION, owner_id=owner).parent_id == other_task
    three_channels = trace_graph(cnn(16, 2, in_channels=3), torch.zeros(2, 3, 28, 28))
    assert (
        choose_parent(world.engine, three_channels, task=Task.TABULAR_CLASSIFICATION, owner_id=owner).parent_id is None
    )
    with session_scope(world.engine) as session:
        session.get(ZooModel, other_task).traced = False
    assert choose_parent(world.engine, child, task=Task.TABULAR_CLASSIFICATION, owner_id=owner).parent_id is None


def test_a_warm_start_is_recorded_on_the_trial_and_in_the_parents_value(world: World) -> None:
    owner = world.user()
    parent = _upload(world, owner, 8, 0.8, ModelAccess.PRIVATE)
    trial = world.trial(world.job(owner))
    zoo = DbZoo(world.engine, world.artifacts)
    offer = zoo.choose_parent(_graph(8), trial_id=trial)  # the task is the trial's job's
    assert offer.zoo_model_id == parent and offer.similarity == 1.0 and offer.parent_graph is not None
    with pytest.raises(ValueError, match="is of a IMAGE_CLASSIFICATION job, not TABULAR_REGRESSION"):
        zoo.choose_parent(_graph(8), task="TABULAR_REGRESSION", trial_id=trial)
    with pytest.raises(ValueError, match="needs owner_id"):
        zoo.choose_parent(_graph(8), task="IMAGE_CLASSIFICATION")
    zoo.record_parent(parent, offer.similarity, trial_id=trial)
    record_parent(world.engine, parent, 0.5)
    with session_scope(world.engine) as session:
        trial_row, parent_row = session.get(Trial, trial), session.get(ZooModel, parent)
        assert trial_row is not None and parent_row is not None
        assert (trial_row.parent_zoo_model_id, trial_row.similarity) == (parent, 1.0)
        assert parent_row.times_chosen == 2 and parent_row.last_chosen_at is not None
    with pytest.raises(RequestError, match="similarity"):
        record_parent(world.engine, parent, 1.5)
    with pytest.raises(NotFoundError, match="zoo model"):
        record_parent(world.engine, 10**6, 0.5)
    with pytest.raises(NotFoundError, match="trial"):
        record_parent(world.engine, parent, 0.5, trial_id=10**6)


def test_parameters_are_checked_against_the_graph_before_anything_is_stored(world: World) -> None:
    owner = world.user()
    module = cnn(8, 2)
    graph = trace_graph(module, IMAGE)
    other = module_params(cnn(9, 2))
    for params, score, message in [
        (b"not safetensors", 0.5, "not a parameters file"),
        (other, 0.5, "has shape"),
        (module_params(torch.nn.Linear(2, 2)), 0.5, "lack the tensor"),
        (module_params(module), math.nan, "finite"),
    ]:
        with pytest.raises(RequestError, match=message):
            register_upload(
                world.engine, world.artifacts, owner_id=owner, graph=graph, params=params, score=score,
                task=Task.IMAGE_CLASSIFICATION, name="x",
            )  # fmt: skip
    assert list(world.artifacts.fs.find(world.artifacts.url)) == []
