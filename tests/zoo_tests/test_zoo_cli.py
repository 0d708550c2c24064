"""``baobab zoo``: list, show and download zoo models, and show where a trial started from, over real HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from zoo_world import World, cnn

from baobab.cli import main
from baobab.cli._common import save_credentials
from baobab.sdk import Client
from baobab.store import params_from_bytes
from baobab.zoo import DbZoo, register_model, trace_graph

IMAGE = torch.zeros(2, 1, 28, 28)


@pytest.fixture
def ann(served: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Client:
    """A developer, logged in for the CLI (the saved login under a temporary config folder)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    root = Client(served)
    root.login("root@example.com", "root-password")
    root.create_user("ann@example.com", "password-123", role="MODEL_DEVELOPER")
    client = Client(served)
    client.login("ann@example.com", "password-123")
    assert client.token is not None
    save_credentials(served, client.token)
    return client


def _cli(*args: str) -> str:
    result = CliRunner().invoke(main, ["zoo", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_list_show_and_download(ann: Client, tmp_path: Path) -> None:
    assert "the zoo is empty" in _cli("list")
    model = register_model(ann, cnn(8, 2), IMAGE, score=0.875, task="IMAGE_CLASSIFICATION", name="small-cnn")
    table = _cli("list").splitlines()
    assert table[0].split()[:4] == ["id", "name", "task", "score"]
    assert table[2].split()[:4] == [str(model["id"]), "small-cnn", "IMAGE_CLASSIFICATION", "0.875"]
    assert json.loads(_cli("list", "--json"))[0]["id"] == model["id"]
    shown = _cli("show", str(model["id"]))
    assert "layers:" in shown and "1x28x28->10" in shown and "operations:" in shown
    assert [line.split()[-1] for line in shown.splitlines() if line.startswith("layers:")] == ["5"]
    out = tmp_path / "parent.safetensors"
    assert _cli("download", str(model["id"]), "-o", str(out)) == f"wrote {out}\n"
    assert params_from_bytes(out.read_bytes())["module.0.weight"].shape == (8, 1, 3, 3)
    missing = CliRunner().invoke(main, ["zoo", "show", "999"])
    assert missing.exit_code == 1 and "no zoo model with id 999" in missing.output


def test_parent_of_a_trial(ann: Client, world: World) -> None:
    owner = ann.login("ann@example.com", "password-123")["user"]["id"]
    zoo = DbZoo(world.engine, world.artifacts, owner_id=owner)
    parent = cnn(8, 2)
    first = world.trial(world.job(owner))
    world.finish(first, 0.8, parent)
    zoo_id = zoo.register_trial(first, trace_graph(parent, IMAGE))
    second = world.trial(world.job(owner))
    zoo.record_parent(zoo_id, 0.8125, trial_id=second)
    assert _cli("parent", str(second)) == f"trial {second} started from zoo model {zoo_id}, similarity 0.812\n"
    assert _cli("parent", str(first)) == f"trial {first} was not warm-started (it trained from scratch)\n"
    assert json.loads(_cli("parent", str(second), "--json")) == {
        "trial_id": second, "parent_zoo_model_id": zoo_id, "similarity": 0.8125,
    }  # fmt: skip
