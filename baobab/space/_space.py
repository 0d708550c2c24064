"""ModelSpace: a base model and the mutators that say how it may change.

The strategy never sees the space: :meth:`ModelSpace.decisions` gives its decisions as
knobs, so every strategy searches it unchanged, and :meth:`ModelSpace.instantiate` turns
a strategy's choices into a runnable ``GraphModule`` with its :class:`MutationRecord`.

Defining a space builds and traces the base on the meta device (no memory, no compute),
binds every mutator and checks every candidate against its node, so a space that is
wrong fails at definition, at upload for a template, with the mutator and node named.
Decisions that exist only on some branch (a block that exists when ``depth >= 3``) are
found by building the base once per other candidate of each decision that may reveal one:
a value choice, a decision a condition names, or one whose mutator a later explicit mutator
follows (it may match what the candidate builds). Input decisions only rewire, and inline
layer choices are followed by no mutator that could match inside them, so neither is varied.
"""

from __future__ import annotations

import contextlib
import inspect
import linecache
import os
import random
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import fx, nn

from baobab.exceptions import InvalidArchitectureError
from baobab.model import CategoricalKnob
from baobab.space._errors import SpaceError
from baobab.space._inline import InputChoice, LayerChoice
from baobab.space._mutators import InputMutator, Mutator, inline_mutators
from baobab.space._record import MutationRecord, node_keys
from baobab.space._values import Scalar, building

__all__ = ["Instance", "ModelSpace"]

#: Builds of the base while a space is defined, at most (each on the meta device).
DEFAULT_MAX_BUILDS = 512


class _Tracer(fx.Tracer):
    """Keeps inline choices as leaves, so the space can compile them to mutators."""

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        return isinstance(m, (LayerChoice, InputChoice)) or super().is_leaf_module(m, module_qualified_name)


@dataclass(frozen=True)
class Instance:
    """A runnable point of a space and the record of how it differs from the base."""

    module: fx.GraphModule
    record: MutationRecord


def _source_line(error: BaseException, base: nn.Module) -> str:
    """Where in the base's own source tracing failed: ``file:line: code`` (empty when not found)."""
    try:
        source = inspect.getsourcefile(type(base))
    except TypeError:
        return ""
    frames = (
        [f for f in traceback.extract_tb(error.__traceback__) if source and os.path.samefile(f.filename, source)]
        if source
        else []
    )
    if not frames:
        return ""
    frame = frames[-1]
    code = (frame.line or linecache.getline(frame.filename, frame.lineno or 0)).strip()
    return f" (at {frame.filename}:{frame.lineno}: {code})"


class ModelSpace:
    """A base model (a factory of ``nn.Module``: the class itself, usually) plus mutators applied in order.

    Layer and input choices written inside the base compile to mutators applied before
    ``mutators``; value choices (:func:`value_choice`) are read while the base is built.
    ``args`` are the base's keyword arguments when the space is defined; an instance may be
    built with others (the input channels and classes of the data at hand), but they must
    not change which decisions exist.

    Raises:
        SpaceError: a mutator matches no node, a candidate cannot replace its node, two
            decisions share a name with different candidates, a condition names an unknown
            decision, or torch.fx cannot trace the base (its message and the base's line).
    """

    def __init__(
        self,
        base: Callable[..., nn.Module],
        mutators: Sequence[Mutator] = (),
        *,
        args: Mapping[str, Any] | None = None,
        max_builds: int = DEFAULT_MAX_BUILDS,
    ) -> None:
        if not callable(base) or isinstance(base, nn.Module):
            raise SpaceError(
                f"the base must be a factory of torch.nn.Module (its class, say; each instance is built anew), "
                f"got {type(base).__name__}"
            )
        labels: set[str] = set()
        for mutator in mutators:
            if not isinstance(mutator, Mutator):
                raise SpaceError(f"mutators must be OperatorMutator, InputMutator or InsertMutator, got {mutator!r}")
            if mutator.label in labels:
                raise SpaceError(
                    f"two mutators are labelled {mutator.label!r}; labels name decisions, so they must differ"
                )
            labels.add(mutator.label)
        self.base = base
        self.mutators = tuple(mutators)
        self.args = dict(args or {})
        self._decisions: dict[str, tuple[Scalar, ...]] = {}
        self._owners: dict[str, str] = {}
        self._matched: set[int] = set()
        #: Decisions whose other values may reveal decisions not met yet: value choices, the decisions of a
        #: mutator that a later explicit mutator follows, and those a condition names.
        self._revealing: set[str] = {name for m in self.mutators for name in m.when}
        self._discover(max_builds)

    # -- the space as knobs ----------------------------------------------------------

    def decisions(self) -> dict[str, CategoricalKnob]:
        """Every decision as a categorical knob; a strategy searches these like any knobs."""
        return {name: CategoricalKnob(values) for name, values in self._decisions.items()}

    def defaults(self) -> dict[str, Scalar]:
        """The first candidate of every decision: the base as written."""
        return {name: values[0] for name, values in self._decisions.items()}

    def sample(self, seed: int | None = None) -> dict[str, Scalar]:
        """Uniformly random choices (what the upload check instantiates)."""
        rng = random.Random(seed)
        return {name: rng.choice(values) for name, values in self._decisions.items()}

    def owner(self, decision: str) -> str:
        """Who declared a decision (a mutator, or a value choice), for messages."""
        return self._owners[decision]

    # -- instances -------------------------------------------------------------------

    def instantiate(
        self,
        choices: Mapping[str, Any],
        *,
        args: Mapping[str, Any] | None = None,
        device: str | torch.device | None = None,
    ) -> Instance:
        """The instance for ``choices`` (knob values; decisions left out take their default).

        ``device="meta"`` builds the graph and record without allocating weights: a cheap
        way to know what an instance is (the record of a parent trial, say).

        Raises:
            SpaceError: a choice names no decision, or is not one of its candidates.
        """
        for name, value in choices.items():
            if name not in self._decisions:
                raise SpaceError(f"{name!r} is not a decision of this space; decisions: {', '.join(self._decisions)}")
            if not any(type(value) is type(v) and value == v for v in self._decisions[name]):
                raise SpaceError(
                    f"decision {name!r} ({self._owners[name]}): {value!r} is not one of {list(self._decisions[name])}"
                )
        module, record = self._build(choices, {**self.args, **(args or {})}, device=device, discover=False)
        return Instance(module, record)

    def check(self, instance: Instance, example_input: torch.Tensor) -> None:
        """Run ``instance`` once on ``example_input``, without gradients, before any training.

        Raises:
            InvalidArchitectureError: a node's inputs do not fit it (a shape mismatch, say);
                the message names the node and the mutator whose change it meets.
        """
        _CheckingInterpreter(instance).run_checked(example_input)

    # -- building --------------------------------------------------------------------

    def _trace(
        self, choices: Mapping[str, Any], args: Mapping[str, Any], device: str | torch.device | None, discover: bool
    ) -> tuple[fx.GraphModule, dict[str, Scalar]]:
        with building(choices) as build, _on(device):
            try:
                base = self.base(**args)
            except SpaceError:
                raise
            except Exception as e:
                raise SpaceError(f"building the base failed: {type(e).__name__}: {e}") from e
            if not isinstance(base, nn.Module):
                raise SpaceError(f"the base factory must return a torch.nn.Module, got {type(base).__name__}")
            try:
                graph = _Tracer().trace(base)
            except Exception as e:
                raise SpaceError(
                    f"torch.fx cannot trace the base {type(base).__name__}: "
                    f"{type(e).__name__}: {e}{_source_line(e, base)}"
                ) from None
        for label, values in build.met.items():
            if discover:
                self._register(label, values, f"value_choice {label!r}")
                self._revealing.add(label)  # the base is ordinary Python: any value may take another branch
            elif self._decisions.get(label) != values:
                raise SpaceError(f"value_choice {label!r} was not met when the space was defined; raise max_builds")
        used = {label: choices.get(label, values[0]) for label, values in build.met.items()}
        return fx.GraphModule(base, graph, type(base).__name__), used

    def _build(
        self, choices: Mapping[str, Any], args: Mapping[str, Any], *, device: str | torch.device | None, discover: bool
    ) -> tuple[fx.GraphModule, MutationRecord]:
        graph_module, used = self._trace(choices, args, device, discover)
        base = node_keys(graph_module)
        touched: dict[str, str] = {}
        with _on(device):
            inline = inline_mutators(graph_module)
            for position, mutator in enumerate((*inline, *self.mutators)):
                # A decision can reveal others only if a later explicit mutator may match what it builds.
                reveals = not isinstance(mutator, InputMutator) and position < len(inline) + len(self.mutators) - 1
                reveals = reveals and bool(self.mutators)
                for node in [n for n in graph_module.graph.nodes if mutator.matches(n, graph_module)]:
                    self._matched.add(id(mutator))
                    decisions = mutator.decisions(node, graph_module)
                    for name, values in decisions.items():
                        if discover:
                            if self._register(name, values, mutator.describe()):
                                mutator.check(node, graph_module)
                                if reveals:
                                    self._revealing.add(name)
                        elif self._decisions.get(name) != values:
                            raise SpaceError(
                                f"{mutator.describe()} meets node {node.name!r}, which no build met when the space was "
                                "defined; raise max_builds"
                            )
                    if not self._holds(mutator, used):
                        continue
                    values_now = {name: choices.get(name, values[0]) for name, values in decisions.items()}
                    used.update(values_now)
                    for changed in mutator.apply(node, graph_module, values_now):
                        touched[changed.name] = mutator.label
        graph_module.graph.eliminate_dead_code()
        graph_module.delete_all_unused_submodules()
        graph_module.graph.lint()
        graph_module.recompile()
        return graph_module, MutationRecord.of(graph_module, base, used, touched)

    def _holds(self, mutator: Mutator, used: Mapping[str, Any]) -> bool:
        """Whether a mutator's condition holds, given the decisions made so far."""
        for name, allowed in mutator.when.items():
            if name not in self._decisions:
                raise SpaceError(
                    f"{mutator.describe()}: its condition names {name!r}, which is not a decision met before it"
                )
            if name not in used or not any(type(used[name]) is type(v) and used[name] == v for v in allowed):
                return False
        return True

    def _register(self, name: str, values: tuple[Scalar, ...], owner: str) -> bool:
        """Record a decision met while building; True the first time it is met."""
        known = self._decisions.get(name)
        if known is None:
            self._decisions[name] = values
            self._owners[name] = owner
            return True
        if known != values or self._owners[name] != owner:
            raise SpaceError(
                f"decision {name!r} is declared twice: by {self._owners[name]} with {list(known)} "
                f"and by {owner} with {list(values)}"
            )
        return False

    def _discover(self, max_builds: int) -> None:
        """Build the base with each other candidate of each revealing decision met, until none is new."""
        queue: list[dict[str, Any]] = [{}]
        varied: set[str] = set()
        builds = 0
        while queue and builds < max_builds:
            assignment = queue.pop(0)
            builds += 1
            _, record = self._build(assignment, self.args, device="meta", discover=True)
            for name in record.choices:
                if name not in varied and name in self._revealing:
                    varied.add(name)
                    queue.extend({**assignment, name: value} for value in self._decisions[name][1:])
        unmatched = [m for m in self.mutators if id(m) not in self._matched]
        if unmatched:
            graph_module, _ = self._trace({}, self.args, "meta", discover=False)
            nodes = ", ".join(n.name for n in graph_module.graph.nodes if n.op not in ("placeholder", "output"))
            raise SpaceError(f"{unmatched[0].describe()} matches no node of the base; its nodes: {nodes}")


def _on(device: str | torch.device | None) -> contextlib.AbstractContextManager[Any]:
    """Modules built inside are built on ``device`` (None: where torch builds by default)."""
    return torch.device(device) if device is not None else contextlib.nullcontext()


class _CheckingInterpreter(fx.Interpreter):
    """Runs an instance node by node, so a failure names its node and the nearest mutation upstream."""

    def __init__(self, instance: Instance) -> None:
        super().__init__(instance.module)
        self.extra_traceback = False  # the message names the node already; fx would append its graph dump
        self.instance = instance

    def run_node(self, n: fx.Node) -> Any:
        try:
            return super().run_node(n)
        except Exception as e:
            raise InvalidArchitectureError(
                f"node {n.name!r} does not fit its inputs{self._blame(n)}: {type(e).__name__}: {e}"
            ) from None

    def _blame(self, node: fx.Node) -> str:
        info = {n.name: n for n in self.instance.record.nodes}
        seen, frontier = set(), [node.name]
        while frontier:
            name = frontier.pop(0)
            if name in seen or name not in info:
                continue
            seen.add(name)
            if info[name].mutator is not None:
                return f" (after {info[name].mutator!r} changed node {name!r})"
            frontier.extend(info[name].inputs)
        return ""

    def run_checked(self, example_input: torch.Tensor) -> None:
        with torch.no_grad():
            self.run(example_input)
