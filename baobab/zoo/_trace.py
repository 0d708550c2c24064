"""Reading a :class:`~baobab.zoo.ModelGraph` from a PyTorch module.

``torch.fx`` traces the module symbolically and ``ShapeProp`` runs the example input
through the traced graph, so every node knows its output shape. Nodes that produce
no tensor (``x.size()``, tuple unpacking) are left out and their readers connected to
the tensors behind them; placeholders and the output are left out too.

A model ``torch.fx`` cannot trace (data-dependent control flow, unsupported Python)
is not an error: its graph is its leaf modules in registration order, marked
``traced=False`` with the reason, and the zoo neither warm-starts it nor offers it as
a parent (see :class:`~baobab.zoo.ModelGraph`).

The example input runs once, in eval mode and without gradients, so batch-norm
statistics and the random number generators are left as they were.

An instance of a model space is traced with its space's key: each node then carries its
identity in that space (:func:`baobab.space.node_identity`), computed on the node of this
trace. The record's own operators cannot be looked up by node name here: tracing the
instance again renames nodes (a ReLU the space turned into a module takes the module's
name, and the next ReLU takes the freed one).
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch import fx
from torch.fx.passes.shape_prop import ShapeProp, TensorMetadata

from baobab.space import node_identity
from baobab.zoo._graph import GraphNode, ModelGraph

__all__ = ["trace_graph"]

# In-place and reflected spellings of the same operation.
_ALIASES = {"iadd": "add", "radd": "add", "imul": "mul", "rmul": "mul", "isub": "sub", "itruediv": "truediv"}
_NOTE_CHARS = 300


def trace_graph(module: torch.nn.Module, example_input: Any, *, space: str | None = None) -> ModelGraph:
    """The architecture graph of ``module``, traced on ``example_input`` (with a batch dimension).

    ``example_input`` is a tensor, or a tuple or list of tensors passed as positional
    arguments. ``space`` is the :func:`baobab.space.space_key` of the space ``module`` is an
    instance of: its nodes then carry their identities. Never raises for a module that
    cannot be traced: see the module docstring.
    """
    args = tuple(example_input) if isinstance(example_input, (tuple, list)) else (example_input,)
    input_shape = _without_batch(args[0]) if args and isinstance(args[0], torch.Tensor) else None
    try:
        traced = fx.symbolic_trace(module)
    except Exception as e:  # any reason to fail tracing means "fall back", never a failed trial
        return _module_tree(module, input_shape, f"torch.fx cannot trace it: {_reason(e)}")
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            ShapeProp(traced).propagate(*args)
    except Exception as e:  # (as above)
        return _module_tree(
            module, input_shape, f"the example input does not run through the traced graph: {_reason(e)}"
        )
    finally:
        module.train(was_training)
    return _from_fx(traced, input_shape, space)


def _from_fx(traced: fx.GraphModule, input_shape: tuple[int, ...] | None, space: str | None) -> ModelGraph:
    index: dict[fx.Node, int] = {}
    # A node left out stands for the kept nodes it reads from.
    stands_for: dict[fx.Node, tuple[int, ...]] = {}
    nodes: list[GraphNode] = []
    output_shape: tuple[int, ...] | None = None
    for node in traced.graph.nodes:
        meta = node.meta.get("tensor_meta")
        sources = tuple(dict.fromkeys(i for arg in node.all_input_nodes for i in _sources(arg, index, stands_for)))
        if node.op == "output":
            if isinstance(meta, TensorMetadata):
                output_shape = tuple(meta.shape[1:])
            continue
        if node.op == "placeholder" or not isinstance(meta, TensorMetadata):
            stands_for[node] = sources
            continue
        op, owner, owner_path = _operation(traced, node)
        state = _owned_state(owner, owner_path) if owner is not None else {}
        if node.op == "get_attr":
            state = {"weight": node.target}
        weight = state.get("weight")
        bias = state.get("bias")
        index[node] = len(nodes)
        nodes.append(
            GraphNode(
                name=node.name,
                op=op,
                weight=_state_shape(traced, weight),
                bias=_state_shape(traced, bias),
                state=state,
                out_shape=tuple(meta.shape[1:]),
                inputs=sources,
                identity=None if space is None else node_identity(node, traced),
            )
        )
    return ModelGraph(nodes=tuple(nodes), input_shape=input_shape, output_shape=output_shape, traced=True, space=space)


def _sources(arg: fx.Node, index: dict[fx.Node, int], stands_for: dict[fx.Node, tuple[int, ...]]) -> tuple[int, ...]:
    if arg in index:
        return (index[arg],)
    return stands_for.get(arg, ())


def _operation(traced: fx.GraphModule, node: fx.Node) -> tuple[str, torch.nn.Module | None, str]:
    """The node's normalised type, and the module owning its state (with its path) if it has one."""
    if node.op == "call_module":
        module = traced.get_submodule(str(node.target))
        return _normalise(type(module).__name__), module, str(node.target)
    if node.op == "call_function":
        name = getattr(node.target, "__name__", None) or repr(node.target)
        if node.target is operator.getitem:
            name = "getitem"
        return _normalise(name), None, ""
    if node.op == "call_method":
        return _normalise(str(node.target)), None, ""
    return "parameter", None, ""  # get_attr: a parameter or buffer read directly


def _normalise(name: str) -> str:
    name = name.lower().rstrip("_").lstrip("_")
    return _ALIASES.get(name, name)


def _owned_state(module: torch.nn.Module, path: str) -> dict[str, str]:
    prefix = f"{path}." if path else ""
    state = {name: prefix + name for name, _ in module.named_parameters(recurse=False)}
    state.update({name: prefix + name for name, b in module.named_buffers(recurse=False) if b is not None})
    return state


def _state_shape(traced: fx.GraphModule, key: str | None) -> tuple[int, ...] | None:
    if key is None:
        return None
    path, _, name = key.rpartition(".")
    owner = traced.get_submodule(path) if path else traced
    value = getattr(owner, name, None)
    return tuple(value.shape) if isinstance(value, torch.Tensor) else None


def _module_tree(module: torch.nn.Module, input_shape: tuple[int, ...] | None, note: str) -> ModelGraph:
    nodes: list[GraphNode] = []
    for path, sub in module.named_modules():
        if next(sub.children(), None) is not None:
            continue
        state = _owned_state(sub, path)
        weight = getattr(sub, "weight", None)
        bias = getattr(sub, "bias", None)
        nodes.append(
            GraphNode(
                name=path or type(sub).__name__,
                op=_normalise(type(sub).__name__),
                weight=tuple(weight.shape) if isinstance(weight, torch.Tensor) else None,
                bias=tuple(bias.shape) if isinstance(bias, torch.Tensor) else None,
                state=state,
                inputs=(len(nodes) - 1,) if nodes else (),
            )
        )
    return ModelGraph(nodes=tuple(nodes), input_shape=input_shape, output_shape=None, traced=False, note=note)


def _without_batch(tensor: torch.Tensor) -> tuple[int, ...]:
    return tuple(tensor.shape[1:])


def _reason(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}".strip().splitlines()[0]
    return text if len(text) <= _NOTE_CHARS else text[: _NOTE_CHARS - 3] + "..."
