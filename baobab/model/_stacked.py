"""Stacked inference: TorchModels of one structure answering a batch in one forward pass.

An ensemble of the top trials of one template is K networks of one graph that differ
only in their weights. Served one process each, every batch pays K times the Python
overhead and the pipe, and K processes contend for the cores. Stacked, the K members
answer in one forward pass: their parameters and buffers are stacked once (one row each,
the machinery of fused training in :mod:`baobab.model._fused`:
``functional_call`` under ``vmap``), the queries go in once, unbatched (the first layer
becomes one product with every member's weights), and each member's rows of the output
go through its own ``postprocess``.

What a member answers stacked is what its own :meth:`~TorchModel.predict` answers, up to
rounding (``vmap``'s batched products): each member preprocesses the queries itself (the
stack takes them once when every member's tensor is equal, else one per member), and
postprocesses its own outputs. Members stack when their signatures are equal (the device,
the names, shapes and dtypes of parameters and buffers, the traced graph and the layers'
settings, as fused training compares them, less the training batch size) and their
template keeps TorchModel's ``predict`` (an override may do anything a stacked pass would
skip).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from baobab.model._fused import _first_difference, _signature, _stack_state, _stacked_forward
from baobab.model._torch import TorchModel

__all__ = ["StackedPredictor", "largest_stack", "stack_refusal"]

#: What fused training compares and a stack of trained members need not share.
_TRAINING_ONLY = ("batch size",)


def stack_refusal(template: type) -> str | None:
    """Why instances of ``template`` cannot answer stacked, or None when they can."""
    if not issubclass(template, TorchModel):
        return f"{template.__name__} is not a TorchModel; only TorchModel templates answer stacked"
    if template.predict is not TorchModel.predict:
        return f"{template.__name__} overrides predict(), which a stacked forward pass would skip"
    return None


def largest_stack(models: Sequence[Any]) -> tuple[list[int], dict[int, str]]:
    """The indices of the largest set of ``models`` that can answer stacked, and why each other one cannot.

    Loaded models are compared by signature (see the module docstring). Of several sets of
    equal size, the one holding the earliest model is taken (models come best first).
    """
    refused = {i: reason for i, m in enumerate(models) if (reason := _refusal(m)) is not None}
    signatures = {i: _inference_signature(m) for i, m in enumerate(models) if i not in refused}
    groups: dict[str, list[int]] = {}
    for i, signature in signatures.items():
        groups.setdefault(json.dumps(signature, sort_keys=True), []).append(i)
    if not groups:
        return [], refused
    kept = max(groups.values(), key=lambda group: (len(group), -group[0]))
    expected = signatures[kept[0]]
    apart = dict(refused)
    for i, signature in signatures.items():
        if i not in kept:
            what = next(what for what in expected if signature[what] != expected[what])
            difference = _first_difference(signature[what], expected[what])
            apart[i] = f"its {what} differ from the stacked members': {difference}"
    return kept, apart


class StackedPredictor:
    """Loaded TorchModels of one structure answering together (see :func:`largest_stack`).

    Each member's module is put in eval mode, its BatchNorm layers folded into the layers
    before them where torch.fx can trace it (:func:`_folded`), and its parameters and buffers
    become views of its rows of the stack: each member still answers on its own (as it
    did, up to rounding), and the stack costs no second copy.

    Raises:
        ValueError: no models, or models that :func:`largest_stack` would not stack together.
    """

    def __init__(self, models: Sequence[TorchModel]) -> None:
        if not models:
            raise ValueError("a stack needs at least one model")
        kept, apart = largest_stack(models)
        if apart:
            raise ValueError(f"these models cannot answer stacked: {apart}")
        assert len(kept) == len(models)
        self.models = list(models)
        first = self.models[0]
        modules = [_folded(m._require_module().eval()) for m in self.models]
        for model, module in zip(self.models, modules, strict=True):
            model.module = module
        self.device = first.device
        self.params, self.shared, self.buffers = _stack_state(modules, self.device)
        for row, module in enumerate(modules):
            for name, tensor in [*module.named_parameters(), *module.named_buffers()]:
                if name in self.params:
                    tensor.data = self.params[name][row].detach()
                elif name in self.buffers:
                    tensor.data = self.buffers[name][row]
                elif name in self.shared:
                    tensor.data = self.shared[name]
        self._one_input = _stacked_forward(modules[0], training=False, batched_input=False)
        self._inputs = _stacked_forward(modules[0], training=False, batched_input=True)
        self.chunk = first.inference_batch_size

    def predict(self, queries: list[Any]) -> list[list[Any]]:
        """Each member's answers to ``queries``, in the order of the members."""
        if len(queries) == 0:
            return [[] for _ in self.models]
        array = np.asarray(queries)
        # Each its own copy: a template's preprocess may write into what it is given.
        arrays = [array, *(array.copy() for _ in self.models[1:])]
        inputs = [m.preprocess(a) for m, a in zip(self.models, arrays, strict=True)]
        same = all(_equal(inputs[0], x) for x in inputs[1:])
        chunks = []
        with torch.no_grad():
            for start in range(0, len(inputs[0]), self.chunk):
                if same:
                    x = inputs[0][start : start + self.chunk].to(self.device)
                    chunks.append(self._one_input(self.params, self.shared, self.buffers, x).cpu())
                else:
                    x = torch.stack([i[start : start + self.chunk] for i in inputs]).to(self.device)
                    chunks.append(self._inputs(self.params, self.shared, self.buffers, x).cpu())
        outputs = torch.cat(chunks, dim=1)
        return [m.postprocess(outputs[row]) for row, m in enumerate(self.models)]


def _refusal(model: Any) -> str | None:
    reason = stack_refusal(type(model))
    if reason is None and model.module is None:
        return "it has no module: load its parameters first"
    return reason


def _inference_signature(model: TorchModel) -> dict[str, list[str]]:
    return {what: lines for what, lines in _signature(model).items() if what not in _TRAINING_ONLY}


def _folded(module: torch.nn.Module) -> torch.nn.Module:
    """``module`` (in eval mode) with each BatchNorm that follows a convolution or a linear layer folded
    into that layer's weights, where torch.fx can trace it; else ``module`` itself.

    Stacked, a BatchNorm costs extra passes over the activations (vmap applies each member's
    scale and shift apart); folded, it costs nothing, and answers change by rounding only.
    """
    from torch.fx.experimental.optimization import fuse

    try:
        folded = fuse(module)
    except Exception:  # untraceable forward (data-dependent control flow and the like): torch.fx raises many kinds
        return module
    return folded if _norms(folded) < _norms(module) else module


def _norms(module: torch.nn.Module) -> int:
    return sum(isinstance(layer, torch.nn.modules.batchnorm._BatchNorm) for layer in module.modules())


def _equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b))
