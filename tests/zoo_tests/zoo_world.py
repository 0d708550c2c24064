"""Helpers of the zoo tests: small PyTorch networks, and the rows a platform would hold (users, jobs, trials).

Everything is real: networks are plain ``torch.nn`` modules, rows go to the database at
``db_url`` (SQLite and PostgreSQL) and parameters to an artifact store, as the job
driver and the workers write them.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from sqlalchemy import Engine
from torch import nn

from baobab.model import Task
from baobab.store import (
    ArtifactStore,
    Dataset,
    JobStatus,
    ModelAccess,
    ModelTemplate,
    SubJob,
    TrainJob,
    Trial,
    TrialState,
    User,
    UserRole,
    params_to_bytes,
    session_scope,
)

__all__ = ["ResNet", "World", "cnn", "mlp", "torch_params"]


def cnn(
    channels: int, depth: int, *, kernel: int = 3, in_channels: int = 1, size: int = 28, classes: int = 10
) -> nn.Sequential:
    """TorchCnn's network: blocks of conv, batch norm, ReLU, 2×2 max pooling (channels double); dropout, linear."""
    layers: list[nn.Module] = []
    current, side = in_channels, size
    for i in range(depth):
        out = channels * 2**i
        layers += [
            nn.Conv2d(current, out, kernel, padding=kernel // 2),
            nn.BatchNorm2d(out),
            nn.ReLU(),
            nn.MaxPool2d(2),
        ]
        current, side = out, side // 2
    layers += [nn.Flatten(), nn.Dropout(0.1), nn.Linear(current * side * side, classes)]
    return nn.Sequential(*layers)


def mlp(widths: Sequence[int], *, inputs: int = 10, outputs: int = 3) -> nn.Sequential:
    layers: list[nn.Module] = []
    current = inputs
    for width in widths:
        layers += [nn.Linear(current, width), nn.ReLU()]
        current = width
    layers.append(nn.Linear(current, outputs))
    return nn.Sequential(*layers)


class _Block(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.short: nn.Module = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.b1(self.c1(x)))
        return torch.relu(self.b2(self.c2(y)) + self.short(x))


class ResNet(nn.Module):
    """The basic-block ResNet that :func:`baobab.zoo._synthetic.resnet_graph` describes."""

    def __init__(self, blocks: Sequence[int] = (2, 2, 2, 2), widths: Sequence[int] = (64, 128, 256, 512)) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 3, 1, 1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU())
        layers, current = [], widths[0]
        for stage, (count, width) in enumerate(zip(blocks, widths, strict=True)):
            for block in range(count):
                layers.append(_Block(current, width, 2 if block == 0 and stage > 0 else 1))
                current = width
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(current, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


def torch_params(module: nn.Module) -> dict[str, Any]:
    """A module's parameters as TorchModel dumps them (the worker stores these)."""
    params: dict[str, Any] = {f"module.{k}": v.detach().cpu().numpy().copy() for k, v in module.state_dict().items()}
    params.update(downscaled=False, input_shape=np.asarray([1], dtype=np.int64), output_size=1, seed=0)
    return params


@dataclass
class World:
    """Users, jobs and trials in a real database and artifact store."""

    engine: Engine
    artifacts: ArtifactStore
    _numbers: itertools.count = field(default_factory=itertools.count)

    def user(self, role: UserRole = UserRole.MODEL_DEVELOPER) -> int:
        with session_scope(self.engine) as session:
            user = User(email=f"user{next(self._numbers)}@example.com", password_hash="x", role=role)
            session.add(user)
            session.flush()
            return user.id

    def job(self, owner_id: int, *, task: Task = Task.IMAGE_CLASSIFICATION) -> int:
        """A RUNNING train job of ``owner_id`` with one sub-job; the sub-job's id."""
        n = next(self._numbers)
        with session_scope(self.engine) as session:
            data = Dataset(
                owner_id=owner_id, name=f"data{n}", format=task.dataset_format, artifact_path=f"datasets/{n}.zip",
                size_bytes=1, checksum="0" * 64,
            )  # fmt: skip
            template = ModelTemplate(
                owner_id=owner_id, name=f"t{n}", task=task, class_name="T", artifact_path=f"models/{n}.py",
                checksum="0" * 64, access=ModelAccess.PRIVATE, knob_config="{}",
            )  # fmt: skip
            session.add_all([data, template])
            session.flush()
            job = TrainJob(
                owner_id=owner_id, app=f"app{n}", app_version=1, task=task, train_dataset_id=data.id,
                val_dataset_id=data.id, budget={"MODEL_TRIAL_COUNT": 5}, status=JobStatus.RUNNING,
            )  # fmt: skip
            job.sub_jobs = [SubJob(model_template_id=template.id, strategy="random", seed=1, status=JobStatus.RUNNING)]
            session.add(job)
            session.flush()
            return job.sub_jobs[0].id

    def trial(
        self,
        sub_job_id: int,
        *,
        status: TrialState = TrialState.RUNNING,
        score: float | None = None,
        module: nn.Module | None = None,
        policies: dict[str, bool] | None = None,
    ) -> int:
        """A trial row; with ``module``, its parameters stored where a worker stores them."""
        with session_scope(self.engine) as session:
            trial = Trial(
                sub_job_id=sub_job_id, number=next(self._numbers), knobs={}, policies=policies or {}, status=status,
                score=score,
            )  # fmt: skip
            session.add(trial)
            session.flush()
            if module is not None:
                trial.params_path = f"params/trial-{trial.id}.safetensors"
                self.artifacts.put_bytes(trial.params_path, params_to_bytes(torch_params(module)))
            return trial.id

    def finish(self, trial_id: int, score: float, module: nn.Module | dict[str, Any]) -> None:
        """What the worker does after training: parameters stored (a module's, or a TorchModel's dump), COMPLETED."""
        key = f"params/trial-{trial_id}.safetensors"
        params = module if isinstance(module, dict) else torch_params(module)
        self.artifacts.put_bytes(key, params_to_bytes(params))
        with session_scope(self.engine) as session:
            trial = session.get(Trial, trial_id)
            assert trial is not None
            trial.status, trial.score, trial.params_path = TrialState.COMPLETED, score, key
