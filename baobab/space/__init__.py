"""Model spaces: a base model plus mutators, searched by any strategy (Retiarii, OSDI 2020).

A space is defined apart from the strategy that explores it: :class:`ModelSpace` takes an
ordinary ``nn.Module`` factory and mutators (:class:`OperatorMutator`,
:class:`InputMutator`, :class:`InsertMutator`), or inline choices written in the base
(:class:`LayerChoice`, :class:`InputChoice`, :func:`value_choice`), and gives its decisions
as knobs. An instance carries a :class:`MutationRecord`: which nodes differ from the base,
and which are identical to those of another instance. Pure logic on ``torch.fx``, no IO.

Example::

    space = ModelSpace(Net, [OperatorMutator("op", nn.Conv2d, {"conv3": keep, "conv5": conv5})])
    knobs = space.decisions()               # {"op_conv1": CategoricalKnob(["conv3", "conv5"]), ...}
    instance = space.instantiate({"op_conv1": "conv5"})
    instance.module(x); instance.record.changed  # frozenset({"conv1"})
"""

from baobab.space._errors import SpaceError
from baobab.space._inline import InputChoice, LayerChoice
from baobab.space._model import SpaceModel
from baobab.space._mutators import InputMutator, InsertMutator, Match, Mutator, OperatorMutator, keep
from baobab.space._record import MutationRecord, NodeInfo, node_identity, space_key
from baobab.space._space import Instance, ModelSpace
from baobab.space._supernet import inherit
from baobab.space._values import value_choice

__all__ = [
    "InputChoice",
    "InputMutator",
    "InsertMutator",
    "Instance",
    "LayerChoice",
    "Match",
    "ModelSpace",
    "MutationRecord",
    "Mutator",
    "NodeInfo",
    "OperatorMutator",
    "SpaceError",
    "SpaceModel",
    "inherit",
    "keep",
    "node_identity",
    "space_key",
    "value_choice",
]
