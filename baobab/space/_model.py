"""SpaceModel: a TorchModel whose network is an instance of the template's model space.

It lives with the spaces rather than in ``baobab.model``: the space package builds on the
template API (its decisions are knobs), so the template API cannot build on it.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np
import torch

from baobab.model import KnobConfig, Params, Policy, TorchModel, module_state
from baobab.space._errors import SpaceError
from baobab.space._record import MutationRecord
from baobab.space._space import ModelSpace
from baobab.space._supernet import keyed_state, transfer

__all__ = ["SpaceModel"]

#: The parameter entry holding the instance's choices: what a child trial rebuilds its parent's record from.
CHOICES_PARAM = "space.choices"
#: Parameter entries of the super-network: the weights of every candidate trained so far, by operator key.
SUPERNET_PREFIX = "supernet."


class SpaceModel(TorchModel):
    """A template that declares a model space and its training knobs; the platform searches the space.

    Implement :meth:`space` (a :class:`ModelSpace`, built once per class), :meth:`load_data`,
    and, when the base takes arguments that depend on the data (input channels, classes),
    :meth:`base_args`. Its knobs are the space's decisions plus :meth:`training_knobs`.

    Before any training the instance runs once on two training inputs; an architecture
    that does not fit ends the trial as INVALID (``InvalidArchitectureError``), not as a
    crash. Under ``SHARE_PARAMS`` the trial inherits its parent trial's weights for every
    module the two mutation records say is the same (:func:`baobab.space.inherit`), and the
    weights of every candidate some earlier trial trained: the parameters carry a
    super-network, one set of weights per candidate (what ENAS shares), kept across trials.
    The super-network holds the trial's own candidates too, under the same names as the
    others (``supernet.<operator key>.<name>``): one candidate has one name in every trial's
    parameters, whatever architecture wrote them, so the driver can add up the updates of
    trainings that ran at once entry by entry (ENAS's concurrent shared trainings). The
    module's own entries (``module.<name>``) stay as every TorchModel writes them, for
    :meth:`load_parameters`.

    A trial scored on shared weights without training (``SHARE_PARAMS`` and ``SKIP_TRAIN``,
    ENAS's evaluations) first re-estimates its batch-norm statistics on
    :attr:`recalibration_batches` training batches: those that came with the shared weights
    were gathered under other architectures.

    Example::

        class Cells(SpaceModel):
            @classmethod
            def space(cls):
                return ModelSpace(CellNet, [OperatorMutator("op", Edge, OPS)], args={"classes": 10})

            @staticmethod
            def training_knobs():
                return {"learning_rate": FloatKnob(1e-3, 1e-1, is_exp=True)}

            def base_args(self):
                return {"classes": self.output_size}
    """

    _spaces: ClassVar[dict[type, ModelSpace]] = {}
    #: Training batches that re-estimate the batch-norm statistics of an instance scored on shared
    #: weights untrained; 0 keeps the statistics that came with them.
    recalibration_batches: int = 8

    def __init__(self, **knobs: Any) -> None:
        super().__init__(**knobs)
        #: The mutation record of the instance this model built (None before it built one).
        self.record: MutationRecord | None = None
        #: The super-network this trial started from (every candidate's weights by operator key), handed
        #: on with this instance's own trained entries replacing theirs.
        self._supernet: dict[str, torch.Tensor] = {}

    @classmethod
    @abstractmethod
    def space(cls) -> ModelSpace:
        """The model space this template searches."""

    @staticmethod
    def training_knobs() -> KnobConfig:
        """Knobs beside the space's decisions (learning rate, epochs, policies, ...)."""
        return {}

    def base_args(self) -> dict[str, Any]:
        """Keyword arguments of the space's base for this trial; by default those the space was defined with."""
        return {}

    @classmethod
    def model_space(cls) -> ModelSpace:
        """The template's space, defined once per class (defining it builds and checks the base)."""
        if cls not in SpaceModel._spaces:
            space = cls.space()
            if not isinstance(space, ModelSpace):
                raise SpaceError(f"{cls.__name__}.space() must return a ModelSpace, got {type(space).__name__}")
            space.instantiate(space.sample(seed=0), device="meta")  # one random instance, as the upload check promises
            SpaceModel._spaces[cls] = space
        return SpaceModel._spaces[cls]

    @classmethod
    def get_knob_config(cls) -> KnobConfig:
        decisions = cls.model_space().decisions()
        training = cls.training_knobs()
        clash = sorted(set(decisions) & set(training))
        if clash:
            raise SpaceError(f"{cls.__name__}: training knob {clash[0]!r} has the name of a decision of the space")
        return {**decisions, **training}

    def choices(self) -> dict[str, Any]:
        """This trial's value of every decision of the space."""
        return {name: self.knobs[name] for name in self.model_space().decisions() if name in self.knobs}

    def build_module(self, downscale: bool) -> torch.nn.Module:
        space = self.model_space()
        instance = space.instantiate(self.choices(), args=self.base_args())
        self.record = instance.record
        if self.example_input is not None:
            space.check(instance, self.example_input)
        return instance.module

    def load_shared(self, module: torch.nn.Module, shared_params: Params) -> str:
        parent_choices = shared_params.get(CHOICES_PARAM)
        if not isinstance(parent_choices, str) or self.record is None:
            return super().load_shared(module, shared_params)
        sources = {
            key[len(SUPERNET_PREFIX) :]: torch.from_numpy(np.array(value))
            for key, value in shared_params.items()
            if key.startswith(SUPERNET_PREFIX) and isinstance(value, np.ndarray)
        }
        own = keyed_state(self.record, module.state_dict())
        if sources:  # every candidate by operator key: the parent's record need not be rebuilt (a trace)
            how = "from the super-network"
        else:  # written by a trial that held no super-network: its module's weights, by its mutation record
            parent = self.model_space().instantiate(json.loads(parent_choices), args=self.base_args(), device="meta")
            sources = keyed_state(parent.record, module_state(shared_params))
            same = len(self.record.shared_modules(parent.record))
            how = f"by mutation record ({same} modules the same as the parent trial's)"
        copied = transfer(module, self.record, sources)
        self._supernet = sources
        others = sum(key not in own for key in sources)
        return (
            f"inherited {len(copied)} of {len(own)} tensors {how}; the super-network keeps {others} tensors of "
            "other candidates"
        )

    def fit_module(self, module: torch.nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        if not (self.policy(Policy.SHARE_PARAMS) and self.policy(Policy.SKIP_TRAIN)) or not self.recalibration_batches:
            return
        norms = [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
        if not norms:
            return
        momenta = [norm.momentum for norm in norms]
        for norm in norms:
            norm.reset_running_stats()
            norm.momentum = None  # a plain average over the batches below
        rows = torch.randperm(len(inputs), generator=torch.Generator().manual_seed(self.seed))
        module.train()
        with torch.no_grad():
            for batch in torch.split(rows[: self.recalibration_batches * self.batch_size()], self.batch_size()):
                module(inputs[batch].to(self.device))
        for norm, momentum in zip(norms, momenta, strict=True):
            norm.momentum = momentum

    def dump_parameters(self) -> Params:
        """The TorchModel's parameters and the choices; under ``SHARE_PARAMS``, or after starting from shared
        parameters, the whole super-network too, this instance's trained candidates included."""
        params = super().dump_parameters()
        params[CHOICES_PARAM] = json.dumps(self.choices(), sort_keys=True)
        if self.record is not None and (self._supernet or self.policy(Policy.SHARE_PARAMS)):
            supernet = {**self._supernet, **keyed_state(self.record, self._require_module().state_dict())}
            for key, tensor in supernet.items():
                params[SUPERNET_PREFIX + key] = tensor.detach().cpu().numpy().copy()
        return params
