"""Mutators: what may change in a base graph, and the decisions that say how.

A mutator matches nodes of the traced base (by module type, by a name pattern, or by a
predicate), declares for each matched node the decisions it needs and their candidates,
and applies the chosen values as a rewrite of the ``torch.fx`` graph. The three kinds are
Retiarii's: :class:`OperatorMutator` swaps an operator, :class:`InputMutator` rewires
what feeds a node, :class:`InsertMutator` adds an operator after one. A decision is per
matched node (named ``<label>_<node>``) unless ``per_node=False``, where every matched
node follows one decision named ``<label>``. ``when`` makes the decisions dependent:
``when={"depth": [3, 4]}`` applies the mutator only when decision ``depth`` takes 3 or 4.
"""

from __future__ import annotations

import fnmatch
import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from torch import fx, nn

from baobab.space._errors import SpaceError
from baobab.space._inline import InputChoice, LayerChoice, check_merges, merge_tensors
from baobab.space._values import Scalar, candidates_of, check_label

__all__ = ["InputMutator", "InsertMutator", "Match", "Mutator", "OperatorMutator", "keep"]

#: What a mutator matches: module types (call_module nodes), a glob on the node's name or
#: target, or a predicate given the node and its module (None for a function call).
Match = type | tuple[type, ...] | str | Callable[[fx.Node, nn.Module | None], bool]
#: A candidate operator: built from the module it replaces or follows (None for a function call).
Candidate = Callable[[nn.Module | None], nn.Module]


def keep(module: nn.Module | None) -> nn.Module:
    """The candidate that keeps the matched operator as the base has it."""
    if module is None:
        raise SpaceError("keep: the matched node is a function call, not a module")
    return module


def module_of(node: fx.Node, graph_module: fx.GraphModule) -> nn.Module | None:
    return graph_module.get_submodule(str(node.target)) if node.op == "call_module" else None


def _check_match(match: object, what: str) -> Match:
    kinds = match if isinstance(match, tuple) else (match,)
    if isinstance(match, str) or all(isinstance(k, type) for k in kinds) or callable(match):
        return match  # type: ignore[return-value]
    raise SpaceError(f"{what}: match must be a module type, a name pattern or a predicate, got {match!r}")


def _check_candidates(candidates: object, what: str) -> dict[str, Candidate]:
    if not isinstance(candidates, Mapping) or not candidates:
        raise SpaceError(f"{what}: candidates must be a non-empty dict of name to a factory of modules")
    for name, factory in candidates.items():
        if not isinstance(name, str):
            raise SpaceError(f"{what}: candidate names must be strings, got {name!r}")
        if factory is not None and not callable(factory):
            raise SpaceError(f"{what}: candidate {name!r} must be a callable that builds a module, or None")
    return dict(candidates)


def fits(module: nn.Module, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    """Why ``module`` cannot be called as the node is (None: it can)."""
    try:
        inspect.signature(module.forward).bind(*args, **kwargs)
    except TypeError as e:
        return f"forward{inspect.signature(module.forward)}: {e}"
    return None


class Mutator(ABC):
    """Matches nodes, declares their decisions, and rewrites the graph for the values chosen."""

    def __init__(
        self, label: str, match: Match, *, per_node: bool = True, when: Mapping[str, Sequence[Scalar]] | None = None
    ) -> None:
        self.label = check_label(label, type(self).__name__)
        self.match = _check_match(match, self.describe())
        self.per_node = bool(per_node)
        self.when = {
            check_label(k, self.describe()): candidates_of(v, f"{self.describe()} when {k!r}")
            for k, v in (when or {}).items()
        }

    def describe(self) -> str:
        return f"{type(self).__name__} {self.label!r}"

    def matches(self, node: fx.Node, graph_module: fx.GraphModule) -> bool:
        if node.op in ("placeholder", "output", "get_attr"):
            return False
        if isinstance(self.match, str):
            return fnmatch.fnmatchcase(node.name, self.match) or fnmatch.fnmatchcase(str(node.target), self.match)
        module = module_of(node, graph_module)
        if isinstance(self.match, type) or isinstance(self.match, tuple):
            return module is not None and isinstance(module, self.match)
        return bool(self.match(node, module))

    def name(self, node: fx.Node, suffix: str = "") -> str:
        """The decision's knob name for ``node``."""
        return (f"{self.label}_{node.name}" if self.per_node else self.label) + suffix

    @abstractmethod
    def decisions(self, node: fx.Node, graph_module: fx.GraphModule) -> dict[str, tuple[Scalar, ...]]:
        """The decisions ``node`` needs, by knob name, each with its candidates (the first is the default)."""

    def check(self, node: fx.Node, graph_module: fx.GraphModule) -> None:  # noqa: B027 - optional, a no-op by default
        """Raise :class:`SpaceError` when a candidate cannot take the node's place (run when the space is defined)."""

    @abstractmethod
    def apply(self, node: fx.Node, graph_module: fx.GraphModule, values: Mapping[str, Any]) -> list[fx.Node]:
        """Rewrite the graph for ``values``; the nodes it made or changed."""


class _CandidateMutator(Mutator):
    """A mutator whose one decision per node picks a module among ``candidates`` (None: no module)."""

    #: How a candidate stands to its node, for messages: "for" (it replaces it) or "after".
    place = "for"

    def __init__(
        self,
        label: str,
        match: Match,
        candidates: Mapping[str, Candidate | None],
        *,
        per_node: bool = True,
        when: Mapping[str, Sequence[Scalar]] | None = None,
    ) -> None:
        super().__init__(label, match, per_node=per_node, when=when)
        self.candidates = _check_candidates(candidates, self.describe())

    def decisions(self, node: fx.Node, graph_module: fx.GraphModule) -> dict[str, tuple[Scalar, ...]]:
        return {self.name(node): tuple(self.candidates)}

    def build(self, choice: str, node: fx.Node, graph_module: fx.GraphModule) -> nn.Module | None:
        """The candidate's module for ``node``; None when it adds no module (None, or :func:`keep`)."""
        factory = self.candidates[choice]
        if factory is None or factory is keep:
            return None
        original = module_of(node, graph_module)
        try:
            module = factory(original)
        except Exception as e:
            raise SpaceError(
                f"{self.describe()}: candidate {choice!r} failed to build {self.place} node {node.name!r}: "
                f"{type(e).__name__}: {e}"
            ) from None
        if not isinstance(module, nn.Module):
            raise SpaceError(
                f"{self.describe()}: candidate {choice!r} built {type(module).__name__} {self.place} node "
                f"{node.name!r}, not a module"
            )
        return None if module is original else module


class OperatorMutator(_CandidateMutator):
    """Replaces each matched operator by one of ``candidates`` (a name to a factory; :func:`keep` or
    None keeps the base's operator).

    Example: every 3x3 convolution becomes a 3x3 or a 5x5 one, or a pooling::

        OperatorMutator("op", nn.Conv2d, {
            "conv3": keep,
            "conv5": lambda m: nn.Conv2d(m.in_channels, m.out_channels, 5, padding=2),
            "pool": lambda m: nn.MaxPool2d(3, 1, 1),
        })
    """

    def check(self, node: fx.Node, graph_module: fx.GraphModule) -> None:
        for choice in self.candidates:
            module = self.build(choice, node, graph_module)
            if module is not None and (why := fits(module, node.args, node.kwargs)) is not None:
                raise SpaceError(
                    f"{self.describe()}: candidate {choice!r} ({type(module).__name__}) cannot replace node "
                    f"{node.name!r}, which passes {len(node.args)} positional argument(s): {why}"
                )

    def apply(self, node: fx.Node, graph_module: fx.GraphModule, values: Mapping[str, Any]) -> list[fx.Node]:
        module = self.build(values[self.name(node)], node, graph_module)
        if module is None:
            return []
        if node.op == "call_module":
            graph_module.add_submodule(str(node.target), module)
            return [node]
        # The node becomes a module call in place: it keeps its name, so later mutators still find it.
        target = _free_target(graph_module, f"{node.name}_{self.label}")
        graph_module.add_submodule(target, module)
        node.op, node.target = "call_module", target
        return [node]


class InsertMutator(_CandidateMutator):
    """Inserts one of ``candidates`` after each matched node (None: insert nothing); everything the
    node fed is then fed by the insertion. A candidate module may be a whole sub-graph."""

    place = "after"

    def check(self, node: fx.Node, graph_module: fx.GraphModule) -> None:
        for choice in self.candidates:
            module = self.build(choice, node, graph_module)
            if module is not None and (why := fits(module, (node,), {})) is not None:
                raise SpaceError(
                    f"{self.describe()}: candidate {choice!r} ({type(module).__name__}) cannot take the output of "
                    f"node {node.name!r} as its one input: {why}"
                )

    def apply(self, node: fx.Node, graph_module: fx.GraphModule, values: Mapping[str, Any]) -> list[fx.Node]:
        module = self.build(values[self.name(node)], node, graph_module)
        if module is None:
            return []
        target = _free_target(graph_module, f"{node.name}_{self.label}")
        graph_module.add_submodule(target, module)
        with graph_module.graph.inserting_after(node):
            new = graph_module.graph.call_module(target, (node,))
        node.replace_all_uses_with(new, delete_user_cb=lambda user: user is not new)
        return [new]


class InputMutator(Mutator):
    """Chooses which earlier nodes feed argument ``arg`` of each matched node, and how they merge.

    ``sources`` are node names, or a match (type, pattern, predicate) over the nodes before
    the matched one. ``n_chosen`` decisions each pick a source (a source picked twice counts
    once); with more than one ``merge`` mode, a ``<name>_merge`` decision picks the mode.
    """

    def __init__(
        self,
        label: str,
        match: Match,
        sources: Sequence[str] | Match,
        *,
        n_chosen: int = 1,
        merge: str | Sequence[str] = "sum",
        arg: int = 0,
        per_node: bool = True,
        when: Mapping[str, Sequence[Scalar]] | None = None,
    ) -> None:
        super().__init__(label, match, per_node=per_node, when=when)
        if isinstance(sources, (list, tuple)) and all(isinstance(s, str) for s in sources):
            self.sources: Sequence[str] | Match = tuple(sources)
        else:
            self.sources = _check_match(sources, f"{self.describe()} sources")
        if not isinstance(n_chosen, int) or n_chosen < 1:
            raise SpaceError(f"{self.describe()}: n_chosen must be a positive integer, got {n_chosen!r}")
        self.n_chosen = n_chosen
        self.merges = check_merges(merge, self.describe())
        self.arg = arg

    def candidates(self, node: fx.Node, graph_module: fx.GraphModule) -> list[fx.Node]:
        """The nodes that may feed ``node``: the sources before it in the graph."""
        before: list[fx.Node] = []
        for other in graph_module.graph.nodes:
            if other is node:
                break
            before.append(other)
        if isinstance(self.sources, tuple) and all(isinstance(s, str) for s in self.sources):
            by_name = {n.name: n for n in before}
            missing = [s for s in self.sources if s not in by_name]
            if missing:
                raise SpaceError(
                    f"{self.describe()}: source {missing[0]!r} is not a node before {node.name!r}; "
                    f"nodes before it: {', '.join(by_name)}"
                )
            return [by_name[str(s)] for s in self.sources]
        probe = _SourceProbe(self.sources)  # type: ignore[arg-type]
        found = [n for n in before if probe.matches(n, graph_module)]
        if not found:
            raise SpaceError(f"{self.describe()}: no source matches before node {node.name!r}")
        return found

    def _names(self, node: fx.Node) -> list[str]:
        return [self.name(node) if self.n_chosen == 1 else self.name(node, f"_{i}") for i in range(self.n_chosen)]

    def decisions(self, node: fx.Node, graph_module: fx.GraphModule) -> dict[str, tuple[Scalar, ...]]:
        names = tuple(n.name for n in self.candidates(node, graph_module))
        found: dict[str, tuple[Scalar, ...]] = {}
        for i, name in enumerate(self._names(node)):
            found[name] = names[i % len(names) :] + names[: i % len(names)]  # default: the i-th source
        if len(self.merges) > 1:
            found[self.name(node, "_merge")] = self.merges
        return found

    def check(self, node: fx.Node, graph_module: fx.GraphModule) -> None:
        if len(node.args) <= self.arg:
            raise SpaceError(f"{self.describe()}: node {node.name!r} has no positional argument {self.arg}")

    def apply(self, node: fx.Node, graph_module: fx.GraphModule, values: Mapping[str, Any]) -> list[fx.Node]:
        by_name = {n.name: n for n in self.candidates(node, graph_module)}
        chosen = list(dict.fromkeys(by_name[values[name]] for name in self._names(node)))
        merge = values.get(self.name(node, "_merge"), self.merges[0])
        if len(chosen) == 1:
            return self._rewire(node, chosen[0], graph_module)
        with graph_module.graph.inserting_before(node):
            merged = graph_module.graph.call_function(merge_tensors, (chosen, merge))
        return [merged, *self._rewire(node, merged, graph_module)]

    def _rewire(self, node: fx.Node, merged: fx.Node, graph_module: fx.GraphModule) -> list[fx.Node]:
        """Feed ``node`` from ``merged``; the nodes that changed."""
        if node.args[self.arg] is merged:
            return []  # fed as in the base
        node.update_arg(self.arg, merged)
        return [node]


class _SourceProbe(Mutator):
    """Matches sources with a mutator's rules; it declares and applies nothing."""

    def __init__(self, match: Match) -> None:
        self.label, self.match, self.per_node, self.when = "sources", match, True, {}

    def decisions(self, node: fx.Node, graph_module: fx.GraphModule) -> dict[str, tuple[Scalar, ...]]:
        return {}

    def apply(self, node: fx.Node, graph_module: fx.GraphModule, values: Mapping[str, Any]) -> list[fx.Node]:
        return []


class _LayerChoiceMutator(OperatorMutator):
    """What a :class:`LayerChoice` in the base compiles to: its node becomes the chosen candidate."""

    def __init__(self, target: str, choice: LayerChoice) -> None:
        candidates = {name: (lambda _, m=module: m) for name, module in choice.candidates.items()}
        super().__init__(
            choice.label, lambda node, _: node.op == "call_module" and node.target == target, candidates, per_node=False
        )

    def describe(self) -> str:
        return f"LayerChoice {self.label!r}"


class _InputChoiceMutator(InputMutator):
    """What an :class:`InputChoice` in the base compiles to: its node becomes the merge of the chosen inputs."""

    def __init__(self, target: str, choice: InputChoice) -> None:
        super().__init__(
            choice.label,
            lambda node, _: node.op == "call_module" and node.target == target,
            (),
            n_chosen=choice.n_chosen,
            merge=choice.merges,
            per_node=False,
        )

    def describe(self) -> str:
        return f"InputChoice {self.label!r}"

    def candidates(self, node: fx.Node, graph_module: fx.GraphModule) -> list[fx.Node]:
        inputs = node.args[0] if node.args else None
        if not isinstance(inputs, (list, tuple)) or not all(isinstance(n, fx.Node) for n in inputs):
            raise SpaceError(f"InputChoice {self.label!r}: node {node.name!r} must be called with a list of tensors")
        return list(inputs)

    def check(self, node: fx.Node, graph_module: fx.GraphModule) -> None:
        self.candidates(node, graph_module)  # called with a list of tensors

    def _rewire(self, node: fx.Node, merged: fx.Node, graph_module: fx.GraphModule) -> list[fx.Node]:
        node.replace_all_uses_with(merged)
        graph_module.graph.erase_node(node)
        return []


def inline_mutators(graph_module: fx.GraphModule) -> list[Mutator]:
    """The mutators the inline choices of a traced base compile to, in graph order."""
    found: list[Mutator] = []
    for node in graph_module.graph.nodes:
        module = module_of(node, graph_module)
        if isinstance(module, LayerChoice):
            found.append(_LayerChoiceMutator(str(node.target), module))
        elif isinstance(module, InputChoice):
            found.append(_InputChoiceMutator(str(node.target), module))
    return found


def _free_target(graph_module: fx.GraphModule, wanted: str) -> str:
    """A submodule name not taken yet."""
    name, i = wanted, 1
    while hasattr(graph_module, name):
        i += 1
        name = f"{wanted}_{i}"
    return name
