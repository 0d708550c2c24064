"""BaseModel: the contract between a model template and the platform.

The platform calls, for each trial, in this order::

    model = Template(**knobs)                      # knob values chosen by the advisor
    model.train(train_path, shared_params, **train_args)
    score = model.evaluate(val_path)               # higher is better
    params = model.dump_parameters()               # stored as safetensors / npz + JSON

and, to serve, ``Template(**knobs)``, ``load_parameters(params)``, ``predict(queries)``.
Policy knobs arrive among the knobs as True or False; :meth:`BaseModel.policy` reads
them by policy name, whatever the template called the knob.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

import numpy as np

from baobab.model._context import TrialContext, get_trial_context
from baobab.model._knobs import KnobConfig, Policy, PolicyKnob

__all__ = ["BaseModel", "Params"]

#: What ``dump_parameters`` returns: arrays, or JSON scalars for small settings.
Params = dict[str, "np.ndarray | int | float | str | bool"]


class BaseModel(ABC):
    """A model template. Subclass it, declare knobs, implement the six methods."""

    def __init__(self, **knobs: Any) -> None:
        self.knobs: dict[str, Any] = dict(knobs)

    @staticmethod
    @abstractmethod
    def get_knob_config() -> KnobConfig:
        """Name → knob: the search space of this template."""

    @abstractmethod
    def train(self, dataset_path: str, shared_params: Params | None = None, **train_args: Any) -> None:
        """Fit on the dataset at ``dataset_path``, starting from ``shared_params`` when given."""

    @abstractmethod
    def evaluate(self, dataset_path: str) -> float:
        """Score on the dataset at ``dataset_path``; higher is better."""

    @abstractmethod
    def predict(self, queries: list[Any]) -> list[Any]:
        """One JSON-serialisable prediction per query, in order."""

    @abstractmethod
    def dump_parameters(self) -> Params:
        """The trained state, such that :meth:`load_parameters` rebuilds the model."""

    @abstractmethod
    def load_parameters(self, params: Params) -> None:
        """Restore the state returned by :meth:`dump_parameters`."""

    def teardown(self) -> None:  # noqa: B027 - an optional hook, a no-op unless overridden
        """Release resources (GPU memory, files); called once the platform is done."""

    @property
    def context(self) -> TrialContext:
        """The running trial's context: report interim metrics, log, check for stop."""
        return get_trial_context()

    def policy(self, policy: Policy | str) -> bool:
        """Whether the platform switched ``policy`` on for this trial."""
        name = Policy(policy).value
        config = type(self).get_knob_config()
        return any(
            isinstance(knob, PolicyKnob) and knob.policy == name and bool(self.knobs.get(key))
            for key, knob in config.items()
        )

    @classmethod
    def policies(cls) -> set[str]:
        """The policies this template supports."""
        return {k.policy for k in cls.get_knob_config().values() if isinstance(k, PolicyKnob)}


def check_params(params: Mapping[str, Any]) -> None:
    """Raise TypeError unless ``params`` is a dict of str to array or JSON scalar."""
    if not isinstance(params, Mapping):
        raise TypeError(f"dump_parameters() must return a dict, got {type(params).__name__}")
    for key, value in params.items():
        if not isinstance(key, str):
            raise TypeError(f"parameter names must be str, got {key!r}")
        if not isinstance(value, (np.ndarray, int, float, str, bool)):
            raise TypeError(f"parameter {key!r} is a {type(value).__name__}; use NumPy arrays or str, int, float, bool")
