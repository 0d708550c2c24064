"""Inline choices: a layer choice or an input choice written inside the base model.

Both are ordinary modules, so the base runs as it is (with the first candidate, or the
first inputs); torch.fx keeps them as leaves, and the space compiles each into the
mutator that does the same from outside (:class:`OperatorMutator`,
:class:`InputMutator`), so the two styles mix in one space.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from baobab.space._errors import SpaceError
from baobab.space._values import check_label

__all__ = ["MERGES", "InputChoice", "LayerChoice", "merge_tensors"]

#: How chosen inputs are merged: summed, or concatenated along the channel dimension.
MERGES = ("sum", "cat")


def merge_tensors(inputs: Sequence[torch.Tensor], merge: str) -> torch.Tensor:
    """The chosen inputs merged; one input passes through as it is."""
    if len(inputs) == 1:
        return inputs[0]
    if merge == "cat":
        return torch.cat(list(inputs), dim=1)
    total = inputs[0]
    for tensor in inputs[1:]:
        total = total + tensor
    return total


def check_merges(merge: str | Sequence[str], what: str) -> tuple[str, ...]:
    modes = (merge,) if isinstance(merge, str) else tuple(merge)
    if not modes or any(m not in MERGES for m in modes) or len(set(modes)) != len(modes):
        raise SpaceError(f"{what}: merge must be one or more of {list(MERGES)}, got {merge!r}")
    return modes


class LayerChoice(nn.Module):
    """One of several operators at this place of the base; the first by default.

    Example::

        self.op = LayerChoice({"conv3": nn.Conv2d(16, 16, 3, padding=1), "pool": nn.MaxPool2d(3, 1, 1)}, label="op")
    """

    def __init__(self, candidates: Mapping[str, nn.Module], *, label: str) -> None:
        super().__init__()
        self.label = check_label(label, "LayerChoice")
        if not isinstance(candidates, Mapping) or not candidates:
            raise SpaceError(f"LayerChoice {label!r}: candidates must be a non-empty dict of name to module")
        for name, module in candidates.items():
            if not isinstance(module, nn.Module):
                raise SpaceError(f"LayerChoice {label!r}: candidate {name!r} is {type(module).__name__}, not a module")
        self.candidates = nn.ModuleDict(candidates)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return next(iter(self.candidates.values()))(*args, **kwargs)


class InputChoice(nn.Module):
    """``n_chosen`` of the inputs it is called with, merged; the first ones by default.

    Example (in ``forward``)::

        out = self.skip([x0, x1, x2])  # self.skip = InputChoice(3, n_chosen=2, merge="sum", label="skip")
    """

    def __init__(self, n_candidates: int, *, n_chosen: int = 1, merge: str | Sequence[str] = "sum", label: str) -> None:
        super().__init__()
        self.label = check_label(label, "InputChoice")
        if not isinstance(n_candidates, int) or not isinstance(n_chosen, int) or not 1 <= n_chosen <= n_candidates:
            raise SpaceError(
                f"InputChoice {label!r}: need 1 <= n_chosen <= n_candidates, got {n_chosen} of {n_candidates}"
            )
        self.n_candidates = n_candidates
        self.n_chosen = n_chosen
        self.merges = check_merges(merge, f"InputChoice {label!r}")

    def forward(self, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
        return merge_tensors(list(inputs)[: self.n_chosen], self.merges[0])
