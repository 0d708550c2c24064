"""The super-network of a space: every candidate's weights kept once, across trials.

ENAS trains one set of weights per candidate operator and lets every sampled architecture
use its candidates' set. Over a space that needs no hand-written jumbo module: a tensor is
named by the operator key of the module that owns it plus its state-dict name
(``<key>.<path>``), so two candidates at one place never collide, and one candidate at one
place is always the same entry. A trial under ``SHARE_PARAMS`` starts from every entry its
instance has, trains, and hands on its own entries together with those of the candidates
it did not use.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from baobab.space._record import MutationRecord

__all__ = ["inherit", "keyed_state", "transfer"]


def _owner(name: str, targets: Mapping[str, str]) -> str | None:
    """The module path that owns state entry ``name`` (the longest path it lies under)."""
    found = [t for t in targets if name.startswith(f"{t}.")]
    return max(found, key=len) if found else None


def _named(record: MutationRecord, state: Mapping[str, torch.Tensor]) -> list[tuple[str, str]]:
    """(``<operator key>.<name>``, name) of each entry a module owns; a bare attribute owns none."""
    owners = ((name, _owner(name, record.modules)) for name in state)
    return [(f"{record.modules[target]}.{name}", name) for name, target in owners if target is not None]


def keyed_state(record: MutationRecord, state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``state`` with each entry renamed ``<operator key of its module>.<name>``."""
    return {keyed: state[name] for keyed, name in _named(record, state)}


def transfer(module: nn.Module, record: MutationRecord, sources: Mapping[str, torch.Tensor]) -> list[str]:
    """Copy into ``module`` every tensor ``sources`` (a :func:`keyed_state`) holds for its operators.

    Returns the state-dict names copied. A shape can never mismatch: shapes are part of the key.
    """
    state = module.state_dict()
    copied = []
    with torch.no_grad():
        for keyed, name in _named(record, state):
            if keyed in sources:
                state[name].copy_(sources[keyed])
                copied.append(name)
    return sorted(copied)


def inherit(
    module: nn.Module, record: MutationRecord, parent_state: Mapping[str, torch.Tensor], parent_record: MutationRecord
) -> list[str]:
    """Copy into ``module`` the parent's weights of every module the two records say is the same
    (same place, same operator key); the state-dict names copied. The others keep their values."""
    return transfer(module, record, keyed_state(parent_record, parent_state))
