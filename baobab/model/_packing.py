"""Packing by measured cost: how many same-shaped trials one slot should train as one stack.

Whether fusing pays depends on the model, the batch size and the device, and not in
a way a rule can guess: on one CPU thread a 784-32-10 MLP trains 1.5x faster stacked
16 deep, a two-layer BatchNorm CNN slower (see ``bench/results/fusion.md``). So a
worker measures. :func:`profile_fusion` steps one trial's model alone (TorchModel's
own loop step, as an unfused trial runs) and then stacked in copies of 2, 4, 8, ...
(the step of :func:`~baobab.model.train_fused`, with its per-member accounting), each
for a fraction of a second on the trial's real data, and keeps the size that trains
the most rows per second (the smallest within 5% of the fastest). The job driver
stores the profile per sub-job and structure and forms later groups of that size (job
option ``fusion: "auto"``).

The sizes grow until two in a row train slower than the best so far (past the peak; not
before 16, since vmap's fixed cost makes 2 and 4 slower than alone where 16 is faster),
the stack's optimizer state would not fit ``memory_bytes`` (a GPU's memory, a slot's
share of the machine), an allocation fails, or the time budget is spent. A size is
kept only when it beats a slot training the trials one after another by a margin
(:data:`PAYS`): a profile measured on a busy machine should not turn a tie into a
group.
"""

from __future__ import annotations

import copy
import gc
import time
from collections.abc import Mapping
from typing import Any

import torch

from baobab.model._base import Params
from baobab.model._context import TrialContext, trial_context
from baobab.model._fused import _account, _Data, _Member, _plan, _prepare, _Stack
from baobab.model._fusion_profile import FusionProfile
from baobab.model._torch import TorchModel, _batches

__all__ = ["PAYS", "FusionProfile", "choose_size", "profile_fusion", "stack_bytes"]

#: A stack of K is chosen over training alone only when it trains at least this many times the rows per second.
PAYS = 1.1
#: Two sizes in a row train slower than this fraction of the best so far: the sizes stop growing. Not one,
#: and not below :data:`_PEAK_FROM`: a stack of 2 or 4 often trains slower than one model alone where 16
#: trains twice as fast (vmap's fixed cost; the 784-32-10 MLP of bench/results/fusion.md).
_PAST_PEAK = 0.9
_PEAK_FROM = 16
#: The smallest size within this fraction of the fastest is kept: a smaller group holds less memory and
#: fewer trials to one slot, and two sizes this close are a tie within the timing's noise.
_NEAR_TOP = 0.95
#: Untimed steps before each size is timed (first-call allocations, lazy initialisation).
_WARMUP_STEPS = 2
#: Each size is timed over at least this many steps and this many seconds.
_MIN_STEPS, _MIN_SECONDS = 3, 0.25
#: Bytes a trainable parameter costs in a stack besides itself: its gradient and two Adam moments.
_STATE_COPIES = 4


def profile_fusion(
    model: TorchModel,
    dataset_path: str,
    *,
    max_group: int,
    context: TrialContext | None = None,
    shared_params: Params | None = None,
    train_args: Mapping[str, Any] | None = None,
    budget_s: float = 10.0,
    memory_bytes: int | None = None,
) -> FusionProfile:
    """Measure ``model`` (a fresh instance, used up here) trained alone and stacked in copies of 2, 4, ...
    up to ``max_group``; see the module docstring.

    ``model`` is prepared by its own ``train(dataset_path, shared_params, **train_args)`` up to
    its loop, inside ``context`` (give it the trial's data loader, so the data is the
    trial's and is decoded once; a fresh one by default): reports and logs of the
    measurement go there, not to any trial.
    """
    started = time.perf_counter()
    context = TrialContext() if context is None else context
    first = _Member(0, model, context)
    _prepare(first, dataset_path, shared_params, dict(train_args or {}))
    if first.outcome is not None:
        failed = f"preparing the model failed: {first.outcome.reason}"
        return FusionProfile({}, 1, time.perf_counter() - started, failed)
    assert first.inputs is not None and first.targets is not None
    data = _Data(first.inputs.contiguous(), first.targets.contiguous(), model.device)
    first.inputs = first.targets = None
    deadline = started + budget_s
    rates = {1: _time_alone(model, data, context)}
    reason = None
    slower, previous = 0, 1
    for size in _sizes(max_group):
        if time.perf_counter() > deadline:
            reason = f"the profile's {budget_s:g} s were spent before size {size}"
            break
        need = stack_bytes(model, size)
        if memory_bytes is not None and need > memory_bytes:
            reason = f"size {size} needs about {need / 2**20:.0f} MiB of stack, over the {memory_bytes / 2**20:.0f} MiB"
            break
        measured = _time_stack(first, size, data)
        if isinstance(measured, str):
            reason = measured
            break
        rates[size] = measured
        slower = slower + 1 if measured < _PAST_PEAK * max(rates.values()) else 0
        if slower >= 2 and _PEAK_FROM <= size < max_group:
            reason = f"sizes {previous} and {size} trained slower than size {max(rates, key=rates.__getitem__)}"
            break
        previous = size
    if len(rates) > 1:  # alone again, at the end: a machine that got busier meanwhile does not favour stacks
        rates[1] = max(rates[1], _time_alone(model, data, context))
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return FusionProfile(rates, choose_size(rates), time.perf_counter() - started, reason)


def choose_size(rates: Mapping[int, float]) -> int:
    """The group size to train in, from rows per second by size (1: alone): the smallest within
    5% of the fastest among those that beat alone by :data:`PAYS`; 1 when none does."""
    paying = {k: v for k, v in rates.items() if k == 1 or v >= PAYS * rates[1]}
    top = max(paying.values())
    return min(k for k, v in paying.items() if v >= _NEAR_TOP * top)


def _sizes(max_group: int) -> list[int]:
    """2, 4, 8, ... below ``max_group``, then ``max_group`` itself."""
    sizes = []
    size = 2
    while size < max_group:
        sizes.append(size)
        size *= 2
    return [*sizes, max_group] if max_group > 1 else []


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(step: Any, device: torch.device) -> tuple[int, float]:
    """Steps taken and their seconds: ``step(i)`` after the warm-up, for at least the minimum steps and seconds."""
    for i in range(_WARMUP_STEPS):
        step(i)
    _synchronize(device)
    start = time.perf_counter()
    steps = 0
    while steps < _MIN_STEPS or time.perf_counter() - start < _MIN_SECONDS:
        step(_WARMUP_STEPS + steps)
        steps += 1
        if steps % _MIN_STEPS == 0:
            _synchronize(device)
    _synchronize(device)
    return steps, time.perf_counter() - start


def _time_alone(model: TorchModel, data: _Data, context: TrialContext) -> float:
    """Rows per second of the model's own unfused step (TorchModel's loop, with its loss and score)."""
    module = model._require_module()
    module.train()
    batch_size = model.batch_size()
    batches = _batches(len(data.inputs), batch_size, torch.Generator().manual_seed(0))
    with trial_context(context):
        loss_fn = model.make_loss()
        optimizer = model.make_optimizer(module.parameters())

        def step(i: int) -> None:
            x, y = data.rows([batches[i % len(batches)]])
            model._step(module, loss_fn, optimizer, x[0], y[0])

        steps, seconds = _timed(step, model.device)
    return steps * batch_size / seconds


def _time_stack(first: _Member, size: int, data: _Data) -> float | str:
    """Rows per second of ``size`` copies of ``first`` stacked (train_fused's step), or why it could not run."""
    members = [first] + [_Member(i, copy.deepcopy(first.model), TrialContext()) for i in range(1, size)]
    plan = _plan([(m.index, m.model, m.context) for m in members])
    if isinstance(plan, str):
        return f"the model cannot be stacked: {plan}"
    batch_size = first.model.batch_size()
    generator = torch.Generator().manual_seed(0)
    batches = [_batches(len(data.inputs), batch_size, generator) for _ in members]
    try:
        stack = _Stack(members, plan)

        def step(i: int) -> None:
            x, y = data.rows([b[i % len(b)] for b in batches])
            losses, outputs = stack.step(x, y, [1.0] * size)
            if _account(stack.members, losses, outputs, y, "profiling"):
                raise RuntimeError("a copy's loss is not finite")

        steps, seconds = _timed(step, first.model.device)
    except (MemoryError, torch.OutOfMemoryError) as e:
        return f"size {size} ran out of memory: {e}".splitlines()[0]
    except RuntimeError as e:
        if "allocate" in str(e):  # torch's CPU allocator under a memory limit
            return f"size {size} ran out of memory: {e}".splitlines()[0]
        return f"size {size}'s stacked step raised {type(e).__name__}: {e}".splitlines()[0]
    finally:
        first.outcome = None  # the copies' accounting may have ended it; the member is only measured
    return steps * batch_size * size / seconds


def stack_bytes(model: TorchModel, size: int) -> int:
    """What ``size`` stacked copies of the model's parameters and buffers take with their optimizer state.

    Frozen parameters count once: equal in every copy, the stack shares them."""
    module = model._require_module()
    trainable = sum(p.numel() * p.element_size() for p in module.parameters() if p.requires_grad)
    frozen = sum(p.numel() * p.element_size() for p in module.parameters() if not p.requires_grad)
    buffers = sum(b.numel() * b.element_size() for b in module.buffers())
    return size * (_STATE_COPIES * trainable + buffers) + frozen
