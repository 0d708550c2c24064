"""Matching two architecture graphs: a similarity in [0, 1] and a node-to-node mapping.

The matcher aligns the parent's nodes with the child's, both in data-flow order, by a
dynamic programme that for each pair of nodes chooses between matching them,
skipping a node of the parent and skipping a node of the child (as ModelKeeper,
NSDI 2023, does over operator graphs):

- Two nodes may be matched only when they have the same type and weight rank. A match
  is worth ``importance × (½ + ½ × carried)``, where ``carried`` is the fraction of the
  weights that carry over, ``∏ min(parent, child) / max(parent, child)`` over the
  weight's dimensions (1 for equal shapes; a 16-unit layer for a 24-unit one carries
  ⅔ either way), and ``importance`` is 1 for a layer with weights and
  :data:`PLAIN_IMPORTANCE` for an operation without (the glue between layers should
  not outweigh them).
- Skipping a child node costs what it would have been worth (it keeps its own
  weights); skipping a parent node costs :data:`SKIP_COST` of its importance, because
  the layers after it then read other inputs than they were trained on: a parent with
  a layer the child lacks is a worse start than the same parent without it.
- Long matched prefixes are favoured: a match that extends a run (the previous child
  node matched the previous parent node, or both are the first) counts in full, one
  that starts a new run pays :data:`RESTART_COST`. Among alignments of equal score the
  one whose matches come earliest is returned, so a deeper or shallower child keeps
  the parent's first layers and its last ones, and the difference falls in between.
- The score is normalised by the child's score against itself (every node matched,
  one run): an identical architecture scores exactly 1, and since each node counts
  once, a branching graph (a residual block) is not counted once per path.

Two instances of one model space (:meth:`~baobab.zoo.ModelGraph.same_space`) know more
than their shapes: a node's identity says it is the same module, at the same place, in
both. :func:`match_graphs` then pairs the nodes of equal identity first, as many layers
as an order-preserving alignment allows (the same programme, with identities as the only
scores and nothing charged for skips and restarts), and aligns the nodes between two such
pairs by shapes as above: a layer whose kernel a decision changed is still matched, to be
cropped or padded. Of two equal layers (two 16-unit linears in a row) the one the child
kept is the one paired, as :func:`baobab.space.inherit` would share it; shapes alone pair
the first. The similarity stays that of the shapes, so the choice of a parent does not
depend on identities.

Speed: :func:`similarities` scores one child against many parents at once. The
programme runs row by row over the parents' nodes, vectorised over the child's nodes
(the "skip a child node" choice is a running maximum, ``np.maximum.accumulate``) and
over all parents together; node scores come from a table of the distinct node
descriptors of the zoo, so the cost per parent node is one gather. :func:`upper_bounds`
gives a cheap bound (matching counts of node types) that the selection uses to skip
parents that cannot win (see :mod:`baobab.zoo._selection`).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from baobab.zoo._graph import ModelGraph

__all__ = [
    "PLAIN_IMPORTANCE",
    "RESTART_COST",
    "SKIP_COST",
    "GraphFeatures",
    "Match",
    "features",
    "match_graphs",
    "signature_features",
    "similarities",
    "upper_bounds",
]

#: What starting a new run of matches costs (a run from the first nodes costs nothing).
RESTART_COST = 0.25
#: What skipping a parent node costs, as a share of its importance.
SKIP_COST = 0.5
#: The importance of an operation without weights (a ReLU, an add), against a layer's 1.
PLAIN_IMPORTANCE = 0.25
_DIMS = 5  # weight shapes are padded to this rank (conv3d); higher ranks compare their first dims
_NEG = -np.inf


class _Registry:
    """Integer codes for node keys and node descriptors (key + weight shape), shared by all graphs.

    Codes let the batched programme look scores up in a table instead of comparing
    strings; the registry only grows (a zoo has few distinct descriptors: thousands).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.keys: dict[str, int] = {}
        self.descriptors: dict[tuple[int, tuple[int, ...]], int] = {}
        self.descriptor_key: list[int] = []
        self.descriptor_dims: list[tuple[float, ...]] = []
        self.descriptor_importance: list[float] = []

    def codes(self, keys: list[str], shapes: list[tuple[int, ...]]) -> tuple[list[int], list[int]]:
        """Key codes and descriptor codes of a graph's nodes, under one lock."""
        key_codes, descriptor_codes = [], []
        with self._lock:
            for key, dims in zip(keys, shapes, strict=True):
                key_code = self.keys.setdefault(key, len(self.keys))
                code = self.descriptors.get((key_code, dims))
                if code is None:
                    code = self.descriptors[(key_code, dims)] = len(self.descriptor_key)
                    self.descriptor_key.append(key_code)
                    self.descriptor_dims.append(tuple(float(d) for d in dims) + (1.0,) * (_DIMS - len(dims)))
                    self.descriptor_importance.append(PLAIN_IMPORTANCE if key.endswith("/0") else 1.0)
                key_codes.append(key_code)
                descriptor_codes.append(code)
        return key_codes, descriptor_codes


_registry = _Registry()


@dataclass(frozen=True)
class GraphFeatures:
    """A graph as numbers, for matching: per node its key code, padded weight shape and importance."""

    keys: np.ndarray  # (n,) int64
    dims: np.ndarray  # (n, _DIMS) float64, padded with 1
    importance: np.ndarray  # (n,) float64
    descriptors: np.ndarray  # (n,) int64 codes into the registry
    key_counts: dict[int, int]
    self_score: float

    def __len__(self) -> int:
        return len(self.keys)


def features(graph: ModelGraph) -> GraphFeatures:
    """The numeric view of ``graph`` (cheap; the selection caches it per fingerprint)."""
    return signature_features([(node.key, node.weight or ()) for node in graph.nodes])


def signature_features(signature: Sequence[tuple[str, Sequence[int]] | list]) -> GraphFeatures:  # type: ignore[type-arg]
    """The numeric view of a graph from its :attr:`~baobab.zoo.ModelGraph.signature` (parsed): key, weight shape."""
    shapes = [tuple(max(1, int(d)) for d in shape[:_DIMS]) for _, shape in signature]
    key_codes, descriptor_codes = _registry.codes([key for key, _ in signature], shapes)
    keys = np.array(key_codes, dtype=np.int64)
    with _registry._lock:
        dims = np.array([_registry.descriptor_dims[c] for c in descriptor_codes], dtype=np.float64).reshape(-1, _DIMS)
    importance = np.where([not key.endswith("/0") for key, _ in signature], 1.0, PLAIN_IMPORTANCE).astype(np.float64)
    return GraphFeatures(
        keys=keys,
        dims=dims,
        importance=importance,
        descriptors=np.array(descriptor_codes, dtype=np.int64),
        key_counts=dict(Counter(key_codes)),
        self_score=float(importance.sum()),
    )


def _pair_scores(parent_keys: np.ndarray, parent_dims: np.ndarray, child: GraphFeatures) -> np.ndarray:
    """Match scores (rows: the given parent nodes, columns: the child's), 0 where they may not match."""
    same = parent_keys[:, None] == child.keys[None, :]
    p, c = parent_dims[:, None, :], child.dims[None, :, :]
    carried = np.prod(np.minimum(p, c) / np.maximum(p, c), axis=2)
    return np.where(same, child.importance[None, :] * (0.5 + 0.5 * carried), 0.0)


def upper_bounds(child: GraphFeatures, parents: Sequence[GraphFeatures]) -> np.ndarray:
    """For each parent, a similarity its match with ``child`` cannot exceed.

    At most ``min(count in parent, count in child)`` child nodes of each key can be
    matched, each worth at most its importance; runs and weight shapes are ignored.
    """
    if child.self_score == 0:
        return np.zeros(len(parents))
    weight_of = {}
    for key, importance in zip(child.keys.tolist(), child.importance.tolist(), strict=True):
        weight_of[key] = importance
    bounds = np.empty(len(parents))
    for k, parent in enumerate(parents):
        counts = parent.key_counts
        bounds[k] = sum(w * min(counts.get(key, 0), child.key_counts[key]) for key, w in weight_of.items())
    return np.minimum(bounds / child.self_score, 1.0)


def similarities(child: GraphFeatures, parents: Sequence[GraphFeatures]) -> np.ndarray:
    """The similarity of each parent to ``child``, all parents at once (see the module docstring)."""
    if not parents:
        return np.zeros(0)
    if child.self_score == 0 or len(child) == 0:
        return np.zeros(len(parents))
    lengths = np.array([len(p) for p in parents])
    longest = int(lengths.max())
    # The distinct descriptors of these parents, scored once against the child's nodes.
    codes, local = np.unique(np.concatenate([p.descriptors for p in parents]), return_inverse=True)
    with _registry._lock:
        table_keys = np.array([_registry.descriptor_key[c] for c in codes], dtype=np.int64)
        table_dims = np.array([_registry.descriptor_dims[c] for c in codes], dtype=np.float64).reshape(-1, _DIMS)
        skips = np.array([SKIP_COST * _registry.descriptor_importance[c] for c in codes] + [0.0])
    table = np.vstack([_pair_scores(table_keys, table_dims, child), np.zeros((1, len(child)))])
    padding = len(codes)  # the row of zeros
    rows = np.full((len(parents), longest), padding, dtype=np.int64)
    start = 0
    for k, length in enumerate(lengths):
        rows[k, :length] = local[start : start + length]
        start += length

    m = len(child)
    matched = np.full((len(parents), m + 1), _NEG)  # best score with (parent i, child j) matched
    matched[:, 0] = 0.0  # the virtual start: the first pair extends it
    best = np.zeros((len(parents), m + 1))  # best score over the prefixes, in any state
    scores_row = np.empty((len(parents), m + 1))
    for i in range(longest):
        s = table[rows[:, i]]  # (K, m)
        extend = matched[:, :-1] + s
        restart = best[:, :-1] + (s - RESTART_COST)
        new_matched = np.full_like(matched, _NEG)
        new_matched[:, 1:] = np.where(s > 0, np.maximum(extend, restart), _NEG)
        np.maximum(new_matched, best - skips[rows[:, i]][:, None], out=scores_row)
        best = np.maximum.accumulate(scores_row, axis=1)
        matched = new_matched
    return np.clip(best[:, -1] / child.self_score, 0.0, 1.0)


@dataclass(frozen=True)
class Match:
    """The best alignment of a parent with a child.

    Attributes:
        similarity: in [0, 1]; exactly 1 for an identical architecture.
        mapping: child node index → parent node index, for every matched node.
        matched_share: the share of the child's layers (nodes with weights) matched.
        by_identity: the child nodes paired by identity (instances of one space), a part of ``mapping``.
    """

    similarity: float
    mapping: dict[int, int]
    matched_share: float
    by_identity: frozenset[int] = frozenset()


def match_graphs(parent: ModelGraph, child: ModelGraph) -> Match:
    """Align ``parent`` with ``child`` and return the similarity and the mapping.

    The same programme as :func:`similarities`, for one pair, keeping its tables to
    trace the alignment back; instances of one space pair equal identities first (see
    the module docstring).
    """
    pf, cf = features(parent), features(child)
    n, m = len(pf), len(cf)
    weighted = [j for j, node in enumerate(child.nodes) if node.weight is not None]
    if n == 0 or m == 0 or cf.self_score == 0:
        return Match(0.0, {}, 0.0)
    s = _pair_scores(pf.keys, pf.dims, cf)  # (n, m)
    skips = SKIP_COST * pf.importance
    matched, best = _programme(s, skips, RESTART_COST)
    similarity = float(np.clip(best[n, m] / cf.self_score, 0.0, 1.0))
    if parent.same_space(child):
        anchors = _identity_pairs(parent, child, cf.importance)
        mapping = _between(anchors, s, skips, n, m)
    else:
        anchors = {}
        mapping = _trace_back(s, skips, matched, best, RESTART_COST)
    share = sum(1 for j in weighted if j in mapping) / len(weighted) if weighted else 1.0
    return Match(similarity, mapping, share, frozenset(anchors))


def _programme(s: np.ndarray, skips: np.ndarray, restart_cost: float) -> tuple[np.ndarray, np.ndarray]:
    """The tables of the alignment programme: best score with ``(i, j)`` matched, and over the prefixes."""
    n, m = s.shape
    matched = np.full((n + 1, m + 1), _NEG)
    best = np.zeros((n + 1, m + 1))
    matched[0, 0] = 0.0
    for i in range(1, n + 1):
        row = s[i - 1]
        extend = matched[i - 1, :-1] + row
        restart = best[i - 1, :-1] + (row - restart_cost)
        matched[i, 1:] = np.where(row > 0, np.maximum(extend, restart), _NEG)
        best[i] = np.maximum.accumulate(np.maximum(matched[i], best[i - 1] - skips[i - 1]))
    return matched, best


def _trace_back(
    s: np.ndarray, skips: np.ndarray, matched: np.ndarray, best: np.ndarray, restart_cost: float
) -> dict[int, int]:
    """The alignment behind ``best[n, m]``, its matches as early as ties allow.

    Walking back from the end, a skip is preferred to a match of equal score and a
    restart to an extension, which leaves the earlier nodes free to match.
    """
    mapping: dict[int, int] = {}
    i, j = matched.shape[0] - 1, matched.shape[1] - 1
    must_match = False  # True: (i, j) is the previous pair of a run being extended
    while i > 0 and j > 0:
        if not must_match:
            if best[i, j] == best[i, j - 1]:
                j -= 1
                continue
            if best[i, j] == best[i - 1, j] - skips[i - 1]:
                i -= 1
                continue
        score = s[i - 1, j - 1]
        mapping[j - 1] = i - 1
        must_match = matched[i, j] != best[i - 1, j - 1] + (score - restart_cost)
        i, j = i - 1, j - 1
    return mapping


def _identity_pairs(parent: ModelGraph, child: ModelGraph, importance: np.ndarray) -> dict[int, int]:
    """The order-preserving pairs of equal identities worth most (layers before glue), as early as ties allow."""
    codes: dict[str, int] = {}
    parent_codes = np.array(
        [-1 if p.identity is None else codes.setdefault(p.identity, len(codes)) for p in parent.nodes]
    )
    child_codes = np.array([-2 if c.identity is None else codes.get(c.identity, -2) for c in child.nodes])
    scores = np.where(parent_codes[:, None] == child_codes[None, :], importance[None, :], 0.0)
    skips = np.zeros(len(parent.nodes))
    matched, best = _programme(scores, skips, 0.0)
    return _trace_back(scores, skips, matched, best, 0.0)


def _between(anchors: dict[int, int], s: np.ndarray, skips: np.ndarray, n: int, m: int) -> dict[int, int]:
    """``anchors`` plus the alignment by shapes of each stretch of nodes between two anchors."""
    mapping = dict(anchors)
    last_i, last_j = -1, -1
    for j, i in [*sorted(anchors.items()), (m, n)]:
        if i - last_i > 1 and j - last_j > 1:
            part, part_skips = s[last_i + 1 : i, last_j + 1 : j], skips[last_i + 1 : i]
            matched, best = _programme(part, part_skips, RESTART_COST)
            for cj, ci in _trace_back(part, part_skips, matched, best, RESTART_COST).items():
                mapping[last_j + 1 + cj] = last_i + 1 + ci
        last_i, last_j = i, j
    return mapping
