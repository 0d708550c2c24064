"""Choosing a parent among the zoo's candidates.

The rule (ModelKeeper's): drop the low-accuracy candidates, put the rest in
``buckets`` by similarity to the child, and take the most accurate model of the
highest non-empty bucket; when that parent leaves too few of the child's layers
matched, there is no warm start. Similarity wins first because the weights must fit;
accuracy decides among parents that fit about as well.

Doing that for a ResNet against a thousand zoo models in well under a second takes
three things, measured in ``bench/warm_start.py``:

1. **one computation per structure**: models with the same fingerprint (trials of one
   template that differ only in learning rate) share their similarity, and their
   features are cached per fingerprint across calls;
2. **cheap bounds first**: :func:`~baobab.zoo._matching.upper_bounds` is an upper
   bound of each structure's similarity, so its bucket is an upper bound of the bucket
   it can reach. Structures are scored in order of that bucket, then of their best
   accuracy, and a structure whose bound cannot beat the parent found so far (a lower
   bucket, or the same bucket and no better accuracy) is never scored;
3. **the table vectorised over parents**: the structures left are scored in chunks by
   :func:`~baobab.zoo._matching.similarities`, all of a chunk in one programme.

The result is the same as scoring every candidate (the bounds are exact bounds).
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from baobab.zoo._graph import ModelGraph
from baobab.zoo._matching import GraphFeatures, Match, features, match_graphs, similarities, upper_bounds

__all__ = ["Candidate", "FeatureCache", "Selection", "SelectionPolicy", "select_parent"]

_FIRST_CHUNK = 16


@dataclass(frozen=True)
class SelectionPolicy:
    """How a parent is chosen.

    Attributes:
        buckets: similarity buckets; the most accurate model of the highest non-empty one wins.
        min_matched_share: below this share of the child's layers matched, no warm start.
        low_accuracy_margin: candidates scoring more than this fraction below the best
            candidate (``best - margin × |best|``) are left out: a model that learnt little
            is a poor start however well it fits. The cut is relative, so a zoo of a few
            models keeps the good ones, and it works for negative scores (``-MSE``) too.
        min_score: candidates scoring below this are left out too (None: no such floor).
    """

    buckets: int = 10
    min_matched_share: float = 0.25
    low_accuracy_margin: float = 0.1
    min_score: float | None = None

    def __post_init__(self) -> None:
        if self.buckets < 1:
            raise ValueError(f"buckets must be at least 1, got {self.buckets}")
        if not 0 <= self.min_matched_share <= 1:
            raise ValueError(f"min_matched_share must lie in [0, 1], got {self.min_matched_share}")
        if self.low_accuracy_margin < 0:
            raise ValueError(f"low_accuracy_margin must be at least 0, got {self.low_accuracy_margin}")

    def bucket(self, similarity: float) -> int:
        return min(self.buckets - 1, int(math.floor(similarity * self.buckets)))


@dataclass(frozen=True)
class Candidate:
    """A zoo model the child may start from: its id, score and graph fingerprint."""

    id: int
    score: float
    fingerprint: str


@dataclass(frozen=True)
class Selection:
    """What :func:`select_parent` found.

    ``parent_id`` is None when there is no warm start, and ``reason`` says why.
    ``candidates`` counts the models left after the accuracy cut, ``scored`` the
    distinct structures whose similarity was computed.
    """

    parent_id: int | None
    similarity: float
    match: Match | None
    parent_graph: ModelGraph | None
    candidates: int
    scored: int
    seconds: float
    reason: str


class FeatureCache:
    """Graph features by fingerprint, least recently used first out.

    Features depend only on the structure, so one entry serves every model of that
    structure and stays valid for ever; the admin API keeps one per process.
    """

    def __init__(self, capacity: int = 20_000) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, GraphFeatures] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, fingerprint: str) -> GraphFeatures | None:
        with self._lock:
            found = self._items.get(fingerprint)
            if found is not None:
                self._items.move_to_end(fingerprint)
            return found

    def put(self, fingerprint: str, value: GraphFeatures) -> None:
        with self._lock:
            self._items[fingerprint] = value
            self._items.move_to_end(fingerprint)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)


def select_parent(
    child: ModelGraph,
    candidates: Sequence[Candidate],
    load_graphs: Callable[[Iterable[int]], dict[int, ModelGraph]],
    *,
    load_features: Callable[[Iterable[int]], dict[int, GraphFeatures]] | None = None,
    policy: SelectionPolicy | None = None,
    cache: FeatureCache | None = None,
) -> Selection:
    """The parent for ``child`` among ``candidates`` (see the module docstring).

    Args:
        child: the new model's graph.
        candidates: the zoo models the child's owner may see, of its task and input
            and output shapes; the accuracy cut is applied here.
        load_graphs: zoo model ids → their graphs; asked for the chosen parent, and for the
            structures not in ``cache`` when there is no ``load_features``.
        load_features: zoo model ids → their features, read from a cheaper source than the
            whole graphs (the zoo table's signatures).
        policy: the rule's settings.
        cache: features by fingerprint, kept across calls.
    """
    started = time.perf_counter()
    policy = policy or SelectionPolicy()
    cache = cache or FeatureCache()

    def done(reason: str, kept: int = 0, scored: int = 0) -> Selection:
        return Selection(None, 0.0, None, None, kept, scored, time.perf_counter() - started, reason)

    if not child.traced:
        return done(f"the model could not be traced, so it trains cold ({child.note or 'no reason given'})")
    kept = _accuracy_cut(candidates, policy)
    if not kept:
        return done("no zoo model of this task and input and output shapes is visible to the owner")

    # One entry per structure, with its most accurate model (ties: the oldest).
    by_structure: dict[str, list[Candidate]] = {}
    for candidate in kept:
        by_structure.setdefault(candidate.fingerprint, []).append(candidate)
    structures = list(by_structure)
    leaders = [max(by_structure[fp], key=lambda c: (c.score, -c.id)) for fp in structures]
    child_features = features(child)
    parent_features = _features(structures, leaders, load_graphs, load_features, cache)
    bounds = upper_bounds(child_features, parent_features)
    bound_buckets = np.array([policy.bucket(b) for b in bounds])
    order = sorted(range(len(structures)), key=lambda k: (-bound_buckets[k], -leaders[k].score, leaders[k].id))

    best: tuple[int, float, float, int] | None = None  # (bucket, score, similarity, index)
    scored = 0
    chunk = _FIRST_CHUNK
    pending = [k for k in order if bounds[k] > 0]
    while pending:
        if best is not None:
            pending = [
                k
                for k in pending
                if bound_buckets[k] > best[0] or (bound_buckets[k] == best[0] and leaders[k].score >= best[1])
            ]
        batch, pending = pending[:chunk], pending[chunk:]
        if not batch:
            break
        found = similarities(child_features, [parent_features[k] for k in batch])
        scored += len(batch)
        for k, similarity in zip(batch, found.tolist(), strict=True):
            if similarity <= 0:
                continue
            entry = (policy.bucket(similarity), leaders[k].score, similarity, k)
            if best is None or entry[:3] > best[:3] or (entry[:3] == best[:3] and leaders[k].id < leaders[best[3]].id):
                best = entry
        chunk *= 4
    if best is None:
        return done("no visible zoo model shares an operation with this one", len(kept), scored)

    parent = leaders[best[3]]
    parent_graph = load_graphs([parent.id])[parent.id]
    match = match_graphs(parent_graph, child)
    seconds = time.perf_counter() - started
    if match.matched_share < policy.min_matched_share:
        reason = (
            f"the best parent, zoo model {parent.id} (similarity {match.similarity:.2f}), matches "
            f"{match.matched_share:.0%} of the layers, below the {policy.min_matched_share:.0%} needed"
        )
        return Selection(None, match.similarity, match, parent_graph, len(kept), scored, seconds, reason)
    reason = (
        f"zoo model {parent.id}: similarity {match.similarity:.2f}, {match.matched_share:.0%} of the layers matched"
    )
    return Selection(parent.id, match.similarity, match, parent_graph, len(kept), scored, seconds, reason)


def _accuracy_cut(candidates: Sequence[Candidate], policy: SelectionPolicy) -> list[Candidate]:
    usable = [c for c in candidates if math.isfinite(c.score)]
    if not usable:
        return []
    best = max(c.score for c in usable)
    cut = best - policy.low_accuracy_margin * abs(best)
    if policy.min_score is not None:
        cut = max(cut, policy.min_score)
    return [c for c in usable if c.score >= cut]


def _features(
    structures: list[str],
    leaders: list[Candidate],
    load_graphs: Callable[[Iterable[int]], dict[int, ModelGraph]],
    load_features: Callable[[Iterable[int]], dict[int, GraphFeatures]] | None,
    cache: FeatureCache,
) -> list[GraphFeatures]:
    found: list[GraphFeatures | None] = [cache.get(fp) for fp in structures]
    missing = [k for k, f in enumerate(found) if f is None]
    if missing:
        ids = [leaders[k].id for k in missing]
        if load_features is not None:
            loaded = load_features(ids)
        else:
            loaded = {zoo_id: features(graph) for zoo_id, graph in load_graphs(ids).items()}
        for k in missing:
            found[k] = loaded[leaders[k].id]
            cache.put(structures[k], loaded[leaders[k].id])
    return [f for f in found if f is not None]
