"""Warm starting a module from the zoo, and registering a trained one: what workers and the SDK call.

The worker side is two calls (see ``.notes/zoo-report.md`` for the wiring):

- before a trial trains, :func:`make_warm_starter` builds the callable that
  :class:`~baobab.model.TorchModel` finds in ``TrialContext.warm_starter``; it traces
  the freshly built module, asks the zoo for a parent, transforms the parent's weights
  and hands them back (TorchModel loads them and lowers its learning rate for the
  first epochs by :attr:`WarmStartResult.lr_scale`);
- after a trial succeeded, :func:`register_trial_model` adds its model to the zoo with
  the graph :func:`model_graph` read from it.

A :class:`~baobab.space.SpaceModel`'s graph carries its space's key and its nodes'
identities, so a parent of the same space hands over the unchanged modules exactly
(see :func:`~baobab.zoo.match_graphs`).

Neither ever fails the trial: a model that cannot be traced, a zoo without a fitting
parent, or a zoo that cannot be reached means a cold start (or no registration), with
the reason in the trial's log.

A script with a logged-in :class:`baobab.sdk.Client` calls :func:`warm_start` and
:func:`register_model` (here, not on the client: the SDK speaks HTTP only and must
not load torch or the zoo's graph code).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from baobab.model import BaseModel, Task, get_trial_context
from baobab.space import SpaceModel, space_key
from baobab.store import params_to_bytes
from baobab.zoo._client import DbZoo, HttpZoo, TrialRegistry, ZooClient
from baobab.zoo._graph import ModelGraph
from baobab.zoo._registry import STATE_PREFIX
from baobab.zoo._trace import trace_graph
from baobab.zoo._transform import DEFAULT_NOISE, TransferReport, transform_weights

if TYPE_CHECKING:
    from baobab.sdk import Client

__all__ = [
    "DEFAULT_LR_DAMPING",
    "WarmStartResult",
    "make_warm_starter",
    "model_graph",
    "register_model",
    "module_params",
    "register_module",
    "register_trial_model",
    "warm_start",
    "warm_start_module",
]

logger = logging.getLogger("baobab.zoo")

#: The learning rate of the first epochs is multiplied by ``1 - DEFAULT_LR_DAMPING × transferred share``:
#: a model taken whole from its parent starts at a fifth of it, as fine-tuning does, so that Adam's
#: first steps (full-size whatever the gradient) do not throw away what was carried over;
#: ``bench/warm_start.py`` measured 0.8 ahead of 0.5 and 0 on the epochs after a warm start.
DEFAULT_LR_DAMPING = 0.8

WarmStarter = Callable[[torch.nn.Module, Any], "WarmStartResult | None"]


@dataclass(frozen=True)
class WarmStartResult:
    """A parent's weights, transformed for the child, and where they came from.

    Attributes:
        zoo_model_id: the parent.
        similarity: the parent's similarity to the child, in [0, 1].
        matched_share: the share of the child's layers matched to the parent's.
        state: a complete state dict for the child (load it with ``strict=True``).
        report: what was copied, reshaped and started as identity.
        lr_scale: by how much to scale the learning rate for the first epochs: the
            more of the model comes from the parent, the gentler the start, so the
            first steps do not undo what was carried over.
        graph: the child's graph.
    """

    zoo_model_id: int
    similarity: float
    matched_share: float
    state: dict[str, torch.Tensor]
    report: TransferReport
    lr_scale: float
    graph: ModelGraph

    @property
    def transferred_share(self) -> float:
        return self.report.transferred_share

    def summary(self) -> str:
        return (
            f"warm start from zoo model {self.zoo_model_id} (similarity {self.similarity:.2f}, "
            f"{self.matched_share:.0%} of the layers matched): {self.report.summary()}"
        )


def warm_start_module(
    zoo: ZooClient,
    module: torch.nn.Module,
    example_input: Any,
    *,
    task: Task | str | None = None,
    trial_id: int | None = None,
    seed: int = 0,
    noise: float = DEFAULT_NOISE,
    lr_damping: float = DEFAULT_LR_DAMPING,
    log: Callable[[str], None] | None = None,
    space: str | None = None,
) -> WarmStartResult | None:
    """The best parent's weights transformed for ``module``, or None (and why, to ``log``) for a cold start.

    The module itself is not changed: load :attr:`WarmStartResult.state` into it.
    The warm start is recorded (on the trial's row when ``trial_id`` is given, and in
    the parent's retention value) once the weights are ready.

    Args:
        zoo: where to look.
        module: the freshly built child.
        example_input: a batch (a tensor, or a tuple of tensors) the module accepts.
        task: the child's task; parents have the same. For a trial, its job's task is
            used and this may be left out.
        trial_id: the trial being warm-started: parents are those its job's owner may
            see, and its row gets the parent and similarity.
        seed: seeds the replicated units and their noise.
        noise: relative noise on replicated units (see :func:`transform_weights`).
        lr_damping: see :attr:`WarmStartResult.lr_scale`.
        log: where to say why there is no warm start.
        space: the :func:`baobab.space.space_key` of the space ``module`` is an instance of.
    """
    say = log or (lambda message: logger.info("%s", message))
    graph = trace_graph(module, example_input, space=space)
    if not graph.traced:
        say(f"no warm start: {graph.note}")
        return None
    offer = zoo.choose_parent(graph, task=task, trial_id=trial_id)
    if offer.zoo_model_id is None or offer.parent_graph is None:
        say(f"no warm start: {offer.reason}")
        return None
    parent_state = zoo.parent_params(offer)
    state, report = transform_weights(
        parent_state, offer.parent_graph, module, graph, offer.mapping, noise=noise, seed=seed
    )
    zoo.record_parent(offer.zoo_model_id, offer.similarity, trial_id=trial_id)
    return WarmStartResult(
        zoo_model_id=offer.zoo_model_id,
        similarity=offer.similarity,
        matched_share=offer.matched_share,
        state=state,
        report=report,
        lr_scale=max(0.0, 1.0 - lr_damping * report.transferred_share),
        graph=graph,
    )


def make_warm_starter(
    zoo: ZooClient,
    *,
    task: Task | str | None = None,
    trial_id: int | None = None,
    seed: int = 0,
    noise: float = DEFAULT_NOISE,
    lr_damping: float = DEFAULT_LR_DAMPING,
    model: BaseModel | None = None,
) -> WarmStarter:
    """The ``TrialContext.warm_starter`` for one trial: ``starter(module, example_input)``.

    It returns a :class:`WarmStartResult`, or None for a cold start; it never raises
    (a failing zoo is logged to the trial and means a cold start). ``model`` is the
    trial's model: for a :class:`~baobab.space.SpaceModel` the module is an instance of
    its space, matched by identity with parents of that space. See
    :func:`warm_start_module` for the other arguments.
    """

    def starter(module: torch.nn.Module, example_input: Any) -> WarmStartResult | None:
        context = get_trial_context()
        try:
            return warm_start_module(
                zoo,
                module,
                example_input,
                task=task,
                trial_id=trial_id,
                seed=seed,
                noise=noise,
                lr_damping=lr_damping,
                log=context.log,
                space=_space_of(model),  # read now: the model builds its instance when it trains
            )
        except Exception as e:  # the zoo is an optimisation: never fail the trial for it
            logger.warning("trial %s: warm start failed", trial_id, exc_info=True)
            context.log(f"no warm start: the zoo failed: {type(e).__name__}: {e}".splitlines()[0])
            return None

    return starter


def model_graph(model: BaseModel) -> ModelGraph | None:
    """The graph of a trained :class:`~baobab.model.TorchModel` (call it before ``teardown()``); None for others.

    Traces ``model.module`` on ``model.example_input``, the first rows of its training
    inputs; a model that cannot be traced gives an untraced graph (kept in the zoo,
    never used as a parent).
    """
    module = getattr(model, "module", None)
    example = getattr(model, "example_input", None)
    if not isinstance(module, torch.nn.Module) or example is None:
        return None
    device = next((p.device for p in module.parameters()), torch.device("cpu"))
    example = example.to(device) if isinstance(example, torch.Tensor) else example
    return trace_graph(module, example, space=_space_of(model))


def _space_of(model: BaseModel | None) -> str | None:
    """The space key of a SpaceModel that built an instance of its space; None for any other model."""
    if isinstance(model, SpaceModel) and model.record is not None:
        return space_key(model.model_space())
    return None


def register_trial_model(zoo: TrialRegistry, trial_id: int, graph: ModelGraph | None) -> int | None:
    """Add a successful trial's model to the zoo; its zoo id, or None when it was not added (logged).

    Score, parameters, task, dataset and owner are the trial's own (read by the zoo
    from the trial's row, which must be COMPLETED or STOPPED with parameters). Never raises.
    """
    if graph is None:
        return None
    try:
        return zoo.register_trial(trial_id, graph)
    except Exception:  # a zoo that fails must not fail a trial that succeeded
        logger.warning("trial %d: not added to the zoo", trial_id, exc_info=True)
        return None


def register_module(
    zoo: DbZoo | HttpZoo,
    module: torch.nn.Module,
    example_input: Any,
    *,
    score: float,
    task: Task | str,
    name: str,
    access: str = "PRIVATE",
) -> int:
    """Add any PyTorch module to the zoo (its state stored as TorchModel parameters); its zoo id."""
    graph = trace_graph(module, example_input)
    return zoo.register_model(graph, module_params(module), score=score, task=task, name=name, access=access)


def warm_start(
    client: Client, module: torch.nn.Module, example_input: Any, *, task: str, seed: int = 0
) -> dict[str, Any]:
    """Loads the weights of the zoo's best parent, transformed to fit, into a PyTorch module.

    The module is traced on ``example_input`` (a batch), the server chooses the parent
    among the zoo models the client's user may see, and its parameters are downloaded
    and transformed here. Nothing is loaded when no parent fits.

    Returns:
        ``{"zoo_model_id", "similarity", "matched_share", "transferred_share",
        "lr_scale", "reason"}``; ``zoo_model_id`` is None (and ``reason`` says why)
        when the module keeps its own weights.
    """
    reasons: list[str] = []
    result = warm_start_module(HttpZoo(client), module, example_input, task=task, seed=seed, log=reasons.append)
    if result is None:
        return {"zoo_model_id": None, "similarity": 0.0, "matched_share": 0.0, "transferred_share": 0.0,
                "lr_scale": 1.0, "reason": "; ".join(reasons)}  # fmt: skip
    module.load_state_dict(result.state)
    return {
        "zoo_model_id": result.zoo_model_id,
        "similarity": result.similarity,
        "matched_share": result.matched_share,
        "transferred_share": result.transferred_share,
        "lr_scale": result.lr_scale,
        "reason": result.report.summary(),
    }


def register_model(
    client: Client,
    module: torch.nn.Module,
    example_input: Any,
    *,
    score: float,
    task: str,
    name: str | None = None,
    access: str = "PRIVATE",
) -> dict[str, Any]:
    """Adds a trained PyTorch module to the zoo as the client's user (traced on ``example_input``); the zoo model.

    Args:
        score: its validation score (higher is better), which ranks it as a parent.
        name: a name to show; the module's class name when None.
        access: PRIVATE (you and admins) or PUBLIC (every user's models may start from it).
    """
    graph = trace_graph(module, example_input)
    name = name if name is not None else type(module).__name__
    return client.upload_zoo_model(
        graph.to_json(), module_params(module), score=score, task=task, name=name, access=access
    )


def module_params(module: torch.nn.Module) -> bytes:
    """A module's state as TorchModel parameters (``module.<name>`` tensors, safetensors bytes): what the zoo keeps."""
    return params_to_bytes({STATE_PREFIX + key: _numpy(value) for key, value in module.state_dict().items()})


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.float()
    return tensor.numpy().copy()
