"""Fused training: structurally identical TorchModel trials stepped as one stacked computation.

A small network leaves most of a core (or a GPU) idle: each batch is a handful of
small matrix products plus Python overhead. Trials of one sub-job that share the
graph and the batch size can instead run as one computation over K stacked members
(``torch.func.stack_module_state`` + ``functional_call`` under ``vmap``): one batched
kernel per layer for all of them, one optimizer update per tensor. It pays where the
per-batch overhead dominates (a small MLP on a CPU thread); on one CPU thread a
BatchNorm CNN gains nothing, since vmap applies BatchNorm's per-member scale and shift
as extra passes over the activations that cost what the grouped convolutions save.

Each member stays its own trial. It is prepared by its own ``train()`` (seed, data,
``build_module``, shared parameters or warm start, ``fit_module``: the hook order of
:meth:`TorchModel.train`, which runs up to its loop and hands the data over), draws its
own shuffling from its own seed, takes its own batch each step (``vmap`` over members
for the parameters, the buffers and the batch), keeps its own optimizer settings and
epochs, reports to its own context, and may be stopped or fail alone. Whatever only
changes values may differ between members: the optimizer's settings, the epochs, the
seed (initial weights, data order) and the rate of each dropout layer (``nn.Dropout``,
``Dropout1d``, ``2d`` and ``3d``: the stacked forward drops each member's activations
at its own rate; a rate passed to ``F.dropout`` in ``forward`` is a constant of the
code, compared as such).

A frozen base is kept once. Trials that train adapters on one pre-trained network
hold the same frozen weights K times over; stacked, the stack's memory would grow
with the base. A parameter that no member trains (``requires_grad`` False) and that is
equal in all of them (``torch.equal``, compared once when the stack is built) is passed
to the stacked forward unbatched: one copy for the stack (the first member's own tensor,
which nothing writes, and which the other members' modules are pointed at as well,
freeing their copies), so the group grows only with what trains, its optimizer state and
the buffers. So is a buffer of a layer that stays in eval mode while the stack trains (a
frozen base's BatchNorm statistics, which nothing updates), which also lets ``vmap`` run
that layer as one batch. A frozen parameter that differs between members is stacked.

What a member gets is what an unfused trial gets, up to rounding: the optimizer
update below follows torch.optim's single-tensor Adam/AdamW/SGD step operation by
operation (a setting the members share is passed as the very scalar torch passes; one
that differs becomes a column, and ``a + alpha * b`` is rounded once as torch's fused
multiply-add is), so what differs is the batched matrix products of ``vmap``, a few
units in the last place per step (measured in tests/model_tests/test_fused.py).
Differences that are not rounding: dropout masks come from one generator for the
stack (``randomness="different"``), not from each trial's own seeded stream; a member
whose loss becomes NaN or infinite ends FAILED here, where an unfused trial trains on.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeGuard

import torch
from torch.func import functional_call, vmap
from torch.nn.modules.dropout import _DropoutNd

from baobab.model._base import Params
from baobab.model._context import TrialContext, trial_context
from baobab.model._knobs import Policy
from baobab.model._torch import TorchModel, _batches, _EpochMeter, _log_stop

__all__ = ["FusedOutcome", "FusedStatus", "fuse_check", "train_fused"]

#: Losses whose module computes a mean over the batch with ops vmap batches; the loss of the
#: stack is the first member's (every member's must be equal).
_LOSSES = (
    torch.nn.CrossEntropyLoss,
    torch.nn.NLLLoss,
    torch.nn.MSELoss,
    torch.nn.L1Loss,
    torch.nn.SmoothL1Loss,
    torch.nn.HuberLoss,
    torch.nn.BCEWithLogitsLoss,
)
#: Dropout layers whose rate may differ per member, by exact class (a subclass may drop otherwise): the
#: spatial dimensions one draw covers (None: one draw per element; else one per channel).
_DROPOUTS: dict[type[_DropoutNd], int | None] = {
    torch.nn.Dropout: None,
    torch.nn.Dropout1d: 1,
    torch.nn.Dropout2d: 2,
    torch.nn.Dropout3d: 3,
}
#: Optimizers whose update _StackedOptimizer reproduces, by exact class (a subclass may step otherwise).
_OPTIMIZERS: dict[type[torch.optim.Optimizer], str] = {
    torch.optim.Adam: "adam",
    torch.optim.AdamW: "adam",
    torch.optim.SGD: "sgd",
}
#: Settings of a param group that change the update in ways the stacked step does not reproduce.
_UNSUPPORTED_FLAGS = ("amsgrad", "maximize", "differentiable")

_Settings = dict[str, float]  # one member's optimizer settings for one parameter
_Tensors = dict[str, torch.Tensor]  # by parameter or buffer name


class FusedStatus(Enum):
    """How a member of a fused run ended."""

    COMPLETED = "COMPLETED"  # trained all its epochs
    STOPPED = "STOPPED"  # its context asked it to stop; trained until then
    FAILED = "FAILED"  # an error of its own (or of the stack); no usable result


@dataclass(frozen=True)
class FusedOutcome:
    """One member's end: a status, and for STOPPED or FAILED the reason."""

    status: FusedStatus
    reason: str | None = None
    #: For FAILED by an exception: the exception, for a traceback in the trial's log.
    error: BaseException | None = field(default=None, compare=False)


@dataclass(eq=False)  # members are told apart by identity
class _Member:
    index: int
    model: TorchModel
    context: TrialContext
    inputs: torch.Tensor | None = None
    targets: torch.Tensor | None = None
    lr_scales: list[float] = field(default_factory=list)  # one per epoch to train
    generator: torch.Generator | None = None
    batches: list[torch.Tensor] = field(default_factory=list)  # this epoch's, in its own order
    meter: _EpochMeter = field(default_factory=_EpochMeter)
    outcome: FusedOutcome | None = None

    @property
    def module(self) -> torch.nn.Module:
        return self.model._require_module()

    def end(self, status: FusedStatus, reason: str | None = None, error: BaseException | None = None) -> None:
        self.outcome = FusedOutcome(status, reason, error)

    def fail(self, what: str, error: BaseException) -> None:
        reason = f"{what} raised {type(error).__name__}: {error}"
        self.context.log(reason)
        self.end(FusedStatus.FAILED, reason, error)


@dataclass
class _Plan:
    """What a stack of members needs beyond their modules: the shared loss, each one's optimizer settings."""

    loss_fn: torch.nn.Module
    kind: str  # "adam" or "sgd"
    decoupled: bool  # AdamW's weight decay
    settings: list[dict[str, _Settings]]  # per member: parameter name → settings (only the optimised ones)


def fuse_check(models: Sequence[TorchModel]) -> str | None:
    """Why these trained-or-built models cannot train as one stack, or None when they can.

    Call it once ``train()`` has built each module (the fused run checks itself after its
    members' setup). It compares every member with the first: the template class, the
    device, :meth:`~TorchModel.batch_size`, the names, shapes, dtypes and
    ``requires_grad`` of parameters and buffers, the module's traced graph (torch.fx
    code, which holds the constants of ``forward``) and its repr (which holds the
    settings of its layers, a stride or a dropout layer's ``inplace``, but not its rate:
    that may differ per member), the loss and the optimizer
    (:meth:`~TorchModel.make_loss` and :meth:`~TorchModel.make_optimizer` are called).
    Then one stacked forward pass on the first rows of the training data checks that
    ``vmap`` can batch the module. Members under ``SKIP_TRAIN`` need no loss or optimizer.
    """
    result = _plan([(i, model, None) for i, model in enumerate(models)])
    return result if isinstance(result, str) else None


def train_fused(
    models: Sequence[TorchModel],
    dataset_path: str,
    contexts: Sequence[TrialContext],
    *,
    shared_params: Sequence[Params | None] | None = None,
    train_args: Sequence[Mapping[str, Any]] | None = None,
) -> list[FusedOutcome]:
    """Train ``models`` (instances of one template) on ``dataset_path`` as one stacked computation.

    Member ``i`` is prepared by its own ``models[i].train(dataset_path, shared_params[i],
    **train_args[i])`` (its ``seed`` among the train args, else its ``seed`` knob, else
    torch's seed), inside ``contexts[i]``, which also receives its reports and logs and
    carries its stop requests. A member whose ``train()`` setup fails ends FAILED; every
    other member's data must equal the first's (one template, one dataset: the file is
    decoded once by the store's cache, and the first member's tensors are the ones kept).

    Members under ``SKIP_TRAIN`` end COMPLETED untrained, as unfused. When the rest
    cannot be stacked (:func:`fuse_check`'s reason, or different data), each logs why
    and trains alone with TorchModel's own loop. Otherwise they train as one stack until
    each has run its epochs (``EARLY_STOP`` counts), asked to stop (checked between
    batches and answered by each report: STOPPED), or failed: its loss not finite, an
    exception in one of its own hooks (``score``, ...) or in the stack's step (then
    every member in the stack fails, since the stacked computation cannot say whose it
    was). A member that leaves gets its rows of the stack as its module's weights and
    buffers and the rest go on, restacked without it (cheaper than carrying a masked
    member to the end, and no update can reach it by mistake).

    Afterwards each ``models[i].module`` holds its own weights: ``evaluate``,
    ``dump_parameters`` and ``predict`` work per member as for an unfused trial.

    Returns:
        One outcome per model, in order.
    """
    count = len(models)
    shared = [None] * count if shared_params is None else list(shared_params)
    args = [{}] * count if train_args is None else [dict(a) for a in train_args]
    for name, values in (("contexts", contexts), ("shared_params", shared), ("train_args", args)):
        if len(values) != count:
            raise ValueError(f"train_fused() got {count} models but {len(values)} {name}; give one per model")
    members = [_Member(i, model, context) for i, (model, context) in enumerate(zip(models, contexts, strict=True))]
    for member in members:
        _prepare(member, dataset_path, shared[member.index], args[member.index])
    ready = [m for m in members if m.outcome is None]
    for member in ready:
        member.lr_scales = [] if member.model.policy(Policy.SKIP_TRAIN) else member.model._lr_scales()
        if not member.lr_scales:
            member.end(FusedStatus.COMPLETED)  # nothing to train, as unfused
    ready = [m for m in ready if m.outcome is None]
    if ready:
        plan = _same_data(ready) or _plan([(m.index, m.model, m.context) for m in ready])
        if isinstance(plan, str):
            for member in ready:
                _train_alone(member, plan)
        else:
            _train_stack(ready, plan)
    outcomes = [m.outcome for m in members]
    assert all(o is not None for o in outcomes)  # every path above ends every member
    return [o for o in outcomes if o is not None]


# -- preparing members ------------------------------------------------------------


def _prepare(member: _Member, dataset_path: str, shared: Params | None, args: dict[str, Any]) -> None:
    """Run the member's own ``train()`` up to its loop, keeping the data it would train on."""

    def keep(inputs: torch.Tensor, targets: torch.Tensor) -> None:
        member.inputs, member.targets = inputs, targets

    member.model._loop_hook = keep
    try:
        with trial_context(member.context):
            member.model.train(dataset_path, shared, **args)
    except Exception as e:
        member.fail("train() before its loop", e)
        return
    finally:
        del member.model._loop_hook  # back to the class default: an unfused loop
    if member.inputs is None:
        member.fail("train()", RuntimeError("it returned without reaching TorchModel.train's loop"))


def _same_data(members: list[_Member]) -> str | None:
    """Why the members' training data differ, or None; equal data is kept once (the first member's)."""
    first = members[0]
    assert first.inputs is not None and first.targets is not None
    for member in members[1:]:
        assert member.inputs is not None and member.targets is not None
        for what, mine, theirs in (("inputs", member.inputs, first.inputs), ("targets", member.targets, first.targets)):
            if mine.shape != theirs.shape or mine.dtype != theirs.dtype or not torch.equal(mine, theirs):
                return f"member {member.index}'s preprocessed {what} differ from member {first.index}'s"
        member.inputs, member.targets = first.inputs, first.targets
    return None


def _train_alone(member: _Member, reason: str) -> None:
    """The unfused loop, for a member of a group that cannot be stacked."""
    model, context = member.model, member.context
    context.log(f"not fused: {reason}; training alone")
    assert member.inputs is not None and member.targets is not None
    try:
        with trial_context(context):
            model._fit(member.module, member.inputs, member.targets)
    except Exception as e:
        member.fail("training", e)
        return
    if context.should_stop:
        member.end(FusedStatus.STOPPED, context.stop_reason)
    else:
        member.end(FusedStatus.COMPLETED)


# -- checking -------------------------------------------------------------------------


def _plan(members: list[tuple[int, TorchModel, TrialContext | None]]) -> _Plan | str:
    """The stack's plan for ``(index, model, context)`` members, or why there is none (naming
    the member by its index and the difference)."""
    if not members:
        return "no models to fuse"
    for i, model, _ in members:
        if not isinstance(model, TorchModel):
            return f"member {i} is a {type(model).__name__}, not a TorchModel"
        if model.module is None:
            return f"member {i} has no module yet; fuse models once train() has built them"
    first_index, first, _ = members[0]
    expected = _signature(first)
    for i, model, _ in members[1:]:
        if type(model) is not type(first):  # the same name may be another class: an upload of another version
            return f"member {i} is a {type(model).__qualname__} of another template than member {first_index}'s"
        for what, lines in _signature(model).items():
            if lines != expected[what]:
                difference = _first_difference(lines, expected[what])
                return f"member {i} differs from member {first_index} in {what}: {difference}"
    training = [(i, m, c) for i, m, c in members if not m.policy(Policy.SKIP_TRAIN)]
    if not training:
        return "no member trains (all under SKIP_TRAIN)"
    losses, settings = [], []
    kinds: set[tuple[str, bool]] = set()
    for i, model, context in training:
        try:
            with trial_context(context) if context is not None else contextlib.nullcontext():
                loss_fn = model.make_loss()
                optimizer = model.make_optimizer(model._require_module().parameters())
        except Exception as e:  # trained alone, the member fails on its own
            return f"member {i}: make_loss() or make_optimizer() raised {type(e).__name__}: {e}"
        read = _optimizer_settings(model._require_module(), optimizer)
        if isinstance(read, str):
            return f"member {i}: {read}"
        kinds.add(read[:2])
        losses.append((i, loss_fn))
        settings.append(read[2])
    reason = _loss_difference(losses) or _settings_difference(training, kinds, settings)
    if reason is not None:
        return reason
    reason = _vmap_probe([m for _, m, _ in members])
    if reason is not None:
        return reason
    (kind, decoupled), loss_fn = kinds.pop(), losses[0][1]
    return _Plan(loss_fn, kind, decoupled, settings)


def _signature(model: TorchModel) -> dict[str, list[str]]:
    """What the members of one stack must share, as lines to compare."""
    module = model._require_module()
    return {
        "device": [str(model.device)],
        "batch size": [str(model.batch_size())],
        "parameters": _tensor_layout(module.named_parameters()),
        "buffers": _tensor_layout(module.named_buffers()),
        "traced graph": _traced(module).splitlines(),
        "module": repr(_structure(module)).splitlines(),  # dropout rates left out
    }


def _tensor_layout(named: Iterator[tuple[str, torch.Tensor]]) -> list[str]:
    return [f"{name} {tuple(t.shape)} {t.dtype}{' requires grad' if t.requires_grad else ''}" for name, t in named]


def _traced(module: torch.nn.Module) -> str:
    """The torch.fx code of ``module``; empty for an untraceable one, which its repr then stands for."""
    try:
        return str(torch.fx.symbolic_trace(module).code)
    except Exception:  # data-dependent control flow and the like: torch.fx raises many kinds
        return ""


def _first_difference(mine: list[str], theirs: list[str]) -> str:
    for line, (a, b) in enumerate(zip(mine, theirs, strict=False)):
        if a != b:
            where = f" (line {line + 1})" if len(theirs) > 1 else ""
            return f"{a.strip()!r} instead of {b.strip()!r}{where}"
    if len(mine) > len(theirs):
        return f"{mine[len(theirs)].strip()!r} more"
    return f"{theirs[len(mine)].strip()!r} missing"


def _optimizer_settings(
    module: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> tuple[str, bool, dict[str, _Settings]] | str:
    kind = _OPTIMIZERS.get(type(optimizer))
    if kind is None:
        supported = ", ".join(sorted(c.__name__ for c in _OPTIMIZERS))
        return f"make_optimizer() gave {type(optimizer).__name__}; fused training supports {supported}"
    group_of = {id(p): group for group in optimizer.param_groups for p in group["params"]}
    names = {id(p): name for name, p in module.named_parameters()}
    strangers = [i for i in group_of if i not in names]
    if strangers:
        return f"make_optimizer() was given {len(strangers)} parameters that are not the module's"
    settings: dict[str, _Settings] = {}
    decoupled = False
    for name, param in module.named_parameters():
        group = group_of.get(id(param))
        if group is None:
            continue  # not optimised: it keeps its value, as in an unfused trial
        flags = [flag for flag in _UNSUPPORTED_FLAGS if group.get(flag)]
        if flags:
            return f"{type(optimizer).__name__} with {flags[0]}=True is not supported fused"
        if isinstance(group["lr"], torch.Tensor):
            return f"{type(optimizer).__name__} with a tensor learning rate is not supported fused"
        if kind == "adam":
            beta1, beta2 = (float(b) for b in group["betas"])
            decoupled = bool(group.get("decoupled_weight_decay", False))
            settings[name] = {
                "lr": float(group["lr"]),
                "beta1": beta1,
                "beta2": beta2,
                "eps": float(group["eps"]),
                "weight_decay": float(group["weight_decay"]),
            }
        else:
            settings[name] = {
                "lr": float(group["lr"]),
                "momentum": float(group["momentum"]),
                "dampening": float(group["dampening"]),
                "weight_decay": float(group["weight_decay"]),
                "nesterov": float(bool(group["nesterov"])),
            }
    return kind, decoupled, settings


def _loss_difference(losses: list[tuple[int, torch.nn.Module]]) -> str | None:
    first_index, first = losses[0]
    for i, loss_fn in losses:
        if not isinstance(loss_fn, _LOSSES):
            supported = ", ".join(c.__name__ for c in _LOSSES)
            return f"member {i}: make_loss() gave {type(loss_fn).__name__}; fused training supports {supported}"
        if _loss_key(loss_fn) != _loss_key(first) or not all(
            torch.equal(a, b) for (_, a), (_, b) in zip(loss_fn.named_buffers(), first.named_buffers(), strict=True)
        ):
            return f"member {i}'s loss {_loss_key(loss_fn)} differs from member {first_index}'s {_loss_key(first)}"
    return None


def _loss_key(loss_fn: torch.nn.Module) -> str:
    settings = {k: v for k, v in vars(loss_fn).items() if not k.startswith("_") and k != "training"}
    buffers = [(name, tuple(b.shape)) for name, b in loss_fn.named_buffers()]
    return f"{type(loss_fn).__name__}({settings}, buffers={buffers})"


def _settings_difference(
    training: list[tuple[int, TorchModel, TrialContext | None]],
    kinds: set[tuple[str, bool]],
    settings: list[dict[str, _Settings]],
) -> str | None:
    if len(kinds) > 1:
        return "the members' optimizers differ in kind (Adam, AdamW or SGD): " + ", ".join(sorted(map(str, kinds)))
    for (i, _, _), mine in zip(training[1:], settings[1:], strict=True):
        if sorted(mine) != sorted(settings[0]):
            return f"member {i}'s optimizer updates other parameters than member {training[0][0]}'s"
    return None


def _vmap_probe(models: list[TorchModel]) -> str | None:
    """Whether vmap batches one forward pass of the stack (on copies: the members stay as they are)."""
    example = models[0].example_input
    if example is None:
        return None
    modules = [m._require_module() for m in models]
    device = models[0].device
    params, shared, buffers = _stack_state(modules, device)
    run = _stacked_forward(modules[0])
    devices = [torch.cuda.current_device()] if device.type == "cuda" else []
    x = example.to(device).expand(len(models), *example.shape)
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=devices):
            run(params, shared, buffers, x)
    except Exception as e:  # vmap and the module's own ops raise many kinds
        return f"one stacked forward pass fails: {type(e).__name__}: {e}"
    return None


def _stack_state(modules: list[torch.nn.Module], device: torch.device) -> tuple[_Tensors, _Tensors, _Tensors]:
    """The members' state as the stacked forward takes it: the parameters stacked (one row
    per member), what is shared (frozen parameters, and buffers of layers that stay in eval
    mode while the stack trains, equal in every member: kept once), and the other buffers
    stacked, with each dropout layer's rates."""
    first = modules[0]
    stacked, shared = {}, {}
    for name, param in first.named_parameters():
        tensors: list[torch.Tensor] = [m.get_parameter(name) for m in modules]  # requires_grad alike (signatures)
        if not param.requires_grad and all(torch.equal(param, t) for t in tensors[1:]):
            shared[name] = param.detach()
        else:
            stacked[name] = torch.stack(tensors).detach().requires_grad_(param.requires_grad)
    constant = _eval_buffers(first)
    buffers = {}
    for name, buffer in first.named_buffers():
        tensors = [m.get_buffer(name) for m in modules]
        if name in constant and all(torch.equal(buffer, t) for t in tensors[1:]):
            shared[name] = buffer  # a frozen base's BatchNorm statistics: unbatched, they also keep vmap fast
        else:
            buffers[name] = torch.stack(tensors)
    for name, layer in first.named_modules():
        if name and _is_dropout(layer):  # as _structure replaces them
            rates = [_rate(m, name) for m in modules]
            buffers[f"{name}.rate"] = torch.tensor(rates, dtype=torch.float64, device=device)
    return stacked, shared, buffers


def _eval_buffers(module: torch.nn.Module) -> set[str]:
    """Names of the buffers of layers that stay in eval mode when ``module`` is put in train mode (a
    frozen base that keeps its BatchNorm in eval): nothing updates them while the stack trains."""
    structure = _structure(module).train()
    return {
        f"{prefix}.{name}" if prefix else name
        for prefix, layer in structure.named_modules()
        if not layer.training
        for name, _ in layer.named_buffers(recurse=False)
    }


def _stacked_forward(
    module: torch.nn.Module, *, training: bool = True, batched_input: bool = True
) -> Callable[..., torch.Tensor]:
    """``module``'s forward over the stack, called with :func:`_stack_state`'s three dicts and
    the input: batched over the members, but for the shared parameters.

    ``training`` False runs every layer in eval mode (a stacked ensemble answering queries);
    ``batched_input`` False takes one input for every member (the same queries), which
    also lets ``vmap`` run the first layer as one product with every member's weights.
    """
    structure = _structure(module).train(training)

    def forward(params: _Tensors, shared: _Tensors, buffers: _Tensors, x: torch.Tensor) -> torch.Tensor:
        return functional_call(structure, (params, shared, buffers), (x,))

    return vmap(forward, in_dims=(0, None, 0, 0 if batched_input else None), randomness="different")


def _structure(module: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``module`` on the meta device (no data: the tensors come from the stack), each
    dropout layer in it replaced by a :class:`_MemberDropout`, whose rate comes from the stack too."""
    memo: dict[int, Any] = {id(t): _on_meta(t) for t in (*module.parameters(), *module.buffers())}
    copied = copy.deepcopy(module, memo)
    replacements: dict[int, _MemberDropout] = {}  # one per layer, should a layer sit in two places
    for parent in list(copied.modules()):
        for name, child in list(parent.named_children()):
            if _is_dropout(child):
                parent._modules[name] = replacements.setdefault(id(child), _MemberDropout(child))
    return copied


def _is_dropout(module: torch.nn.Module) -> TypeGuard[_DropoutNd]:
    return type(module) in _DROPOUTS


def _rate(module: torch.nn.Module, name: str) -> float:
    layer = module.get_submodule(name)
    assert _is_dropout(layer)  # the members' structures are alike
    return layer.p


def _on_meta(tensor: torch.Tensor) -> torch.Tensor:
    empty = torch.empty_like(tensor, device="meta")
    return torch.nn.Parameter(empty, tensor.requires_grad) if isinstance(tensor, torch.nn.Parameter) else empty


class _MemberDropout(torch.nn.Module):
    """A dropout layer of the stacked forward: its rate is a buffer, one value per member under vmap.

    It draws as torch's layer of the class it stands for (one draw per element, or per
    channel for Dropout1d, 2d and 3d), keeps with probability ``1 - p`` and scales what it
    keeps by ``1 / (1 - p)``: all zero at ``p == 1``; at ``p == 0`` and in eval mode the
    input itself. Out of place whatever ``inplace`` says (the values are the same). Its
    repr is the layer's but for the rate, which the members' signatures leave out.
    """

    rate: torch.Tensor

    def __init__(self, layer: _DropoutNd) -> None:
        super().__init__()
        self.kind, self.inplace = type(layer), layer.inplace
        self.register_buffer("rate", torch.empty((), device="meta"))

    def _get_name(self) -> str:
        return self.kind.__name__

    def extra_repr(self) -> str:
        return f"p=per member, inplace={self.inplace}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return x
        p = self.rate.to(x.dtype)
        keep = torch.rand(self._draws(x), dtype=x.dtype, device=x.device) >= p
        return x * (keep.to(x.dtype) * torch.where(p < 1, 1 / (1 - p), 0))

    def _draws(self, x: torch.Tensor) -> tuple[int, ...]:
        """The shape of one member's draws, as torch's layer draws them."""
        spatial = _DROPOUTS[self.kind]
        if spatial is None:
            return tuple(x.shape)
        # One per channel of (N, C, ...); Dropout1d and 3d also take (C, ...), Dropout2d reads 3 dims as (N, C, L).
        channel = 1 if self.kind is not torch.nn.Dropout2d and x.dim() == spatial + 1 else 2
        return (*x.shape[:channel], *[1] * (x.dim() - channel))


# -- training -------------------------------------------------------------------------


def _train_stack(members: list[_Member], plan: _Plan) -> None:
    first = members[0]
    assert first.inputs is not None and first.targets is not None
    # Row-major once: a step gathers K batches of rows (a tabular dataset decodes column-major).
    data = _Data(first.inputs.contiguous(), first.targets.contiguous(), first.model.device)
    for member in members:
        member.inputs = member.targets = None
        member.generator = torch.Generator().manual_seed(member.model.seed)
    stack = _Stack(members, plan)
    epoch = 0
    while stack.members:
        _train_epoch(stack, epoch, data, first.model.batch_size())
        _end_epoch(stack, epoch)
        epoch += 1


@dataclass
class _Data:
    inputs: torch.Tensor
    targets: torch.Tensor
    device: torch.device

    def rows(self, batches: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """The inputs and targets of one batch per member, stacked."""
        index = torch.cat(batches)
        shape = (len(batches), len(batches[0]))
        x = self.inputs.index_select(0, index).view(*shape, *self.inputs.shape[1:])
        y = self.targets.index_select(0, index).view(*shape, *self.targets.shape[1:])
        return x.to(self.device), y.to(self.device)


def _train_epoch(stack: _Stack, epoch: int, data: _Data, batch_size: int) -> None:
    """One epoch of every member in the stack: its own batches, stop checks between them."""
    for member in stack.members:
        assert member.generator is not None
        member.module.train()
        member.batches = _batches(len(data.inputs), batch_size, member.generator)
        member.meter = _EpochMeter()
    for step in range(len(stack.members[0].batches)):  # as many for every member: same rows, same batch size
        stopping = [m for m in stack.members if m.context.should_stop]
        for member in stopping:
            _log_stop(member.context, "in", epoch)
            member.end(FusedStatus.STOPPED, member.context.stop_reason)
        stack.release(stopping)
        if not stack.members:
            return
        x, y = data.rows([m.batches[step] for m in stack.members])
        try:
            losses, outputs = stack.step(x, y, [m.lr_scales[epoch] for m in stack.members])
        except Exception as e:  # the stack's own computation: no member can be singled out
            for member in stack.members:
                member.fail(f"the stacked step of epoch {epoch}", e)
            stack.release(list(stack.members))
            return
        stack.release(_account(stack.members, losses, outputs, y, f"epoch {epoch}, batch {step + 1}"))


def _end_epoch(stack: _Stack, epoch: int) -> None:
    """Each member reports its epoch; those asked to stop and those at their last epoch leave."""
    ending = []
    for member in stack.members:
        try:
            stop = member.meter.report(member.context, epoch)
        except Exception as e:
            member.fail(f"the report of epoch {epoch}", e)
        else:
            if stop:
                _log_stop(member.context, "after", epoch)
                member.end(FusedStatus.STOPPED, member.context.stop_reason)
            elif epoch + 1 == len(member.lr_scales):
                member.end(FusedStatus.COMPLETED)
        if member.outcome is not None:
            ending.append(member)
    stack.release(ending)


def _account(
    members: list[_Member], losses: torch.Tensor, outputs: torch.Tensor, y: torch.Tensor, where: str
) -> list[_Member]:
    """Add each member's batch to its epoch; the members whose loss is not finite or whose score() raised."""
    failed = []
    for member, loss, out, target in zip(members, losses.tolist(), outputs, y, strict=True):
        if not math.isfinite(loss):
            reason = f"the training loss is {loss} in {where}: training diverged (is the learning rate too high?)"
            member.context.log(reason)
            member.end(FusedStatus.FAILED, reason)
        else:
            try:
                with trial_context(member.context):
                    score = member.model.score(out, target)
                member.meter.add(loss, score, len(target))
            except Exception as e:
                member.fail("score()", e)
        if member.outcome is not None:
            failed.append(member)
    return failed


class _Stack:
    """The members still training: their parameters, buffers and optimizer state stacked, one row each."""

    def __init__(self, members: list[_Member], plan: _Plan) -> None:
        self.members = list(members)
        modules = [m.module for m in members]
        self.params, self.shared, self.buffers = _stack_state(modules, members[0].model.device)
        parameters = dict(modules[0].named_parameters())
        for name, tensor in self.shared.items():  # the members' own copies go too: the group holds one
            for module in modules[1:] if name in parameters else ():
                module.get_parameter(name).data = tensor
        self.optimizer = _StackedOptimizer(plan, self.params)
        self.forward = _stacked_forward(modules[0])
        self.loss_fn = plan.loss_fn
        self.losses = vmap(self._loss)

    def _loss(self, outputs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.loss_fn(outputs, y)

    def step(self, x: torch.Tensor, y: torch.Tensor, lr_scales: list[float]) -> tuple[torch.Tensor, torch.Tensor]:
        """One batch per member (``x`` and ``y`` stacked): the losses and the outputs, detached."""
        for param in self.params.values():
            param.grad = None
        outputs = self.forward(self.params, self.shared, self.buffers, x)
        losses = self.losses(outputs, y)
        torch.autograd.backward(losses.sum())  # members are independent: each row's gradient is its own loss's
        self.optimizer.step(self.params, lr_scales)
        return losses.detach(), outputs.detach()

    def release(self, leaving: list[_Member]) -> None:
        """Hand the leaving members their rows (into their modules) and restack the others.

        Shared parameters are not handed: each member's module holds those values already."""
        if not leaving:
            return
        rows = {id(m): i for i, m in enumerate(self.members)}
        with torch.no_grad():
            for member in leaving:
                row = rows[id(member)]
                for name, stacked in self.params.items():
                    member.module.get_parameter(name).copy_(stacked[row])
                for name, buffer in member.module.named_buffers():
                    if name in self.buffers:  # a shared one is the member's own value already
                        buffer.copy_(self.buffers[name][row])
        keep = [i for i, m in enumerate(self.members) if m not in leaving]
        self.members = [self.members[i] for i in keep]
        index = torch.tensor(keep, dtype=torch.long)
        self.params = {name: _take(p, index).requires_grad_(p.requires_grad) for name, p in self.params.items()}
        self.buffers = {name: _take(b, index) for name, b in self.buffers.items()}
        self.optimizer.keep(index)


def _take(stacked: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return stacked.detach().index_select(0, index.to(stacked.device))


# -- the optimizer ----------------------------------------------------------------------


class _StackedOptimizer:
    """torch.optim's Adam, AdamW or SGD step on stacked parameters, each member with its own settings.

    Follows ``_single_tensor_adam`` and ``_single_tensor_sgd`` of torch.optim operation by
    operation, so that each member's rows change as its own optimizer would change them.
    The members of a stack step together, so a step count is per parameter, as in torch.
    """

    def __init__(self, plan: _Plan, stacked: Mapping[str, torch.Tensor]) -> None:
        self.kind, self.decoupled = plan.kind, plan.decoupled
        # parameter name → one settings dict per member; the stack's shared parameters are frozen, never stepped
        self.settings = {name: [s[name] for s in plan.settings] for name in plan.settings[0] if name in stacked}
        self.steps = dict.fromkeys(self.settings, 0)
        self.state: dict[str, dict[str, torch.Tensor]] = {name: {} for name in self.settings}

    def keep(self, index: torch.Tensor) -> None:
        rows = index.tolist()
        self.settings = {name: [per_member[i] for i in rows] for name, per_member in self.settings.items()}
        self.state = {name: {k: _take(t, index) for k, t in state.items()} for name, state in self.state.items()}

    @torch.no_grad()
    def step(self, params: dict[str, torch.Tensor], lr_scales: list[float]) -> None:
        for name, settings in self.settings.items():
            param = params[name]
            if param.grad is None:
                continue  # as torch.optim: a parameter without a gradient is not stepped
            self.steps[name] += 1
            lrs = [s["lr"] * scale for s, scale in zip(settings, lr_scales, strict=True)]
            if self.kind == "adam":
                self._adam(name, param, param.grad, settings, lrs)
            else:
                self._sgd(name, param, param.grad, settings, lrs)

    def _adam(
        self, name: str, param: torch.Tensor, grad: torch.Tensor, settings: list[_Settings], lrs: list[float]
    ) -> None:
        state = self.state[name]
        if not state:
            state["exp_avg"] = torch.zeros_like(param)
            state["exp_avg_sq"] = torch.zeros_like(param)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        step = float(self.steps[name])  # torch keeps it in a float tensor and reads it with .item()
        decays = [s["weight_decay"] for s in settings]
        if any(decays):
            if self.decoupled:
                param.mul_(_column([1 - lr * wd for lr, wd in zip(lrs, decays, strict=True)], param))
            else:
                grad = _add_scaled(grad, param, _column(decays, param))
        exp_avg.lerp_(grad, _column([1 - s["beta1"] for s in settings], param))
        beta2 = _column([s["beta2"] for s in settings], param)
        rest2 = _column([1 - s["beta2"] for s in settings], param)
        if isinstance(rest2, float):
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=rest2)
        else:  # (1 - beta2) * g * g, multiplied in the order addcmul's kernel multiplies
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad * rest2)
        corrections2 = [(1 - s["beta2"] ** step) ** 0.5 for s in settings]
        step_sizes = [-lr / (1 - s["beta1"] ** step) for lr, s in zip(lrs, settings, strict=True)]
        denom = (exp_avg_sq.sqrt() / _column(corrections2, param)).add_(_column([s["eps"] for s in settings], param))
        step_size = _column(step_sizes, param)
        if isinstance(step_size, float):
            param.addcdiv_(exp_avg, denom, value=step_size)
        else:  # addcdiv's kernel computes value * exp_avg / denom: the same products
            param.addcdiv_(exp_avg * step_size, denom)

    def _sgd(
        self, name: str, param: torch.Tensor, grad: torch.Tensor, settings: list[_Settings], lrs: list[float]
    ) -> None:
        decays = [s["weight_decay"] for s in settings]
        if any(decays):
            grad = _add_scaled(grad, param, _column(decays, param))
        momenta = [s["momentum"] for s in settings]
        if any(momenta):
            state = self.state[name]
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = grad.detach().clone()
            else:
                # A member without momentum keeps no buffer in torch; here its buffer is just its gradient.
                rests = [1 - s["dampening"] if m else 1.0 for s, m in zip(settings, momenta, strict=True)]
                state["momentum_buffer"] = _add_scaled(
                    state["momentum_buffer"].mul_(_column(momenta, param)), grad, _column(rests, param)
                )
            buf = state["momentum_buffer"]
            nesterov = [bool(s["nesterov"]) for s in settings]
            if all(nesterov):
                grad = _add_scaled(grad, buf, _column(momenta, param))
            elif any(nesterov):
                mask = torch.tensor(nesterov, device=param.device).view(-1, *[1] * (param.dim() - 1))
                grad = torch.where(mask, _add_scaled(grad, buf, _column(momenta, param)), buf)
            else:
                grad = buf
        param.copy_(_add_scaled(param, grad, _column([-lr for lr in lrs], param)))


def _column(values: list[float], like: torch.Tensor) -> float | torch.Tensor:
    """One value per member, to scale rows of ``like``: the plain number when all are equal
    (then the op is the very one torch.optim runs), else a ``(K, 1, ...)`` tensor."""
    if all(v == values[0] for v in values):
        return values[0]
    return torch.tensor(values, dtype=like.dtype, device=like.device).view(-1, *[1] * (like.dim() - 1))


def _add_scaled(a: torch.Tensor, b: torch.Tensor, alpha: float | torch.Tensor) -> torch.Tensor:
    """``a + alpha * b`` rounded once, as ``torch.add(a, b, alpha=)`` rounds it (a fused multiply-add)."""
    if isinstance(alpha, float):
        return a.add(b, alpha=alpha)
    if a.dtype == torch.float64:  # no wider type to round once in: the product is rounded too
        return torch.addcmul(a, b, alpha)
    # The product of two float32 values is exact in float64; the sum then rounds once or, rarely, twice.
    return torch.addcmul(a.double(), b.double(), alpha.double()).to(a.dtype)
