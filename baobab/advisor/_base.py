"""The strategy interface: what every search strategy implements.

Who calls what, and when: the caller (the dev runner now, the job driver later) asks
:meth:`Strategy.propose` for the knob values of a new trial, runs the trial, and hands
the outcome back through :meth:`Strategy.observe`. Several trials may be proposed
before any is observed (parallel workers); ``pending`` tells the strategy which
proposals are still running so that it does not propose the same point again.
:meth:`Strategy.propose_batch` proposes the trials of a fused group at once.

Strategies are rebuilt, not pickled: a strategy's state is a function of its knob
config, its seed and the records it has observed. Randomness for a proposal is drawn
from a generator seeded by ``(seed, trial_id)``, so :meth:`Strategy.rebuild` (observe
every finished record of the history) followed by ``propose(n)`` gives exactly the
proposal the original strategy would have made for trial ``n``.

A strategy keeps its history compactly and up to date as records arrive, so that a
proposal costs the same at trial 100,000 as at trial 100: per record a flat point, a
status, a score and the metadata if any (about 0.4 KB, not the record's knob values),
trial ids in order, the completed ones ranked by score, and a count of each observed
point. :meth:`Strategy.recent`, :meth:`Strategy.best` and :meth:`Strategy.taken` read
them without a walk over the history; :attr:`Strategy.history` and
:meth:`Strategy.points` rebuild the whole list and are for tests and replays.

Strategies only choose searchable knobs (see :func:`baobab.model.searchable_knobs`);
fixed knobs and policies are the caller's business.

A whole strategy (this is :class:`~baobab.advisor.RandomStrategy`)::

    class RandomStrategy(Strategy):
        name = "random"

        def propose(self, trial_id, pending=()):
            point = self.sample_new(self.rng(trial_id), self.taken(pending))
            return self.search_space.unflatten(point)
"""

from __future__ import annotations

import bisect
import enum
import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from baobab.advisor._space import FlatPoint, SearchSpace
from baobab.exceptions import StrategyError
from baobab.model import KnobConfig, Knobs, validate_knob_config

if TYPE_CHECKING:
    from baobab.advisor._job_options import JobOptions
    from baobab.advisor._plans import Plan

__all__ = ["Strategy", "TakenPoints", "TrialRecord", "TrialStatus"]


class TrialStatus(enum.StrEnum):
    """How a trial ended, as far as a strategy cares.

    INVALID: its knobs describe an architecture that cannot be built or does not fit.
    Like a failure it has no score, and like every observed point it is never proposed
    again (see :meth:`Strategy.taken`).
    """

    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    INVALID = "INVALID"


@dataclass(frozen=True)
class TrialRecord:
    """A frozen snapshot of one finished trial: what a strategy learns from.

    ``knobs`` holds the searchable knob values the strategy proposed; ``score`` is
    None for a failed or an invalid trial.
    """

    trial_id: int
    knobs: Mapping[str, Any]
    status: TrialStatus
    score: float | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status is TrialStatus.COMPLETED and self.score is None:
            raise ValueError(f"trial {self.trial_id}: a completed trial needs a score")
        if self.status is TrialStatus.INVALID and self.score is not None:
            raise ValueError(f"trial {self.trial_id}: an invalid trial has no score, got {self.score!r}")


class _Row(NamedTuple):
    """What a strategy keeps of one record: the knob values as a flat point, not as given."""

    point: FlatPoint
    status: TrialStatus
    score: float | None
    metadata: Mapping[str, Any] | None  # None for none, the common case


class TakenPoints(AbstractSet[FlatPoint]):
    """The flat points observed or pending (see :meth:`Strategy.taken`): a view of the
    strategy's count of observed points plus the pending ones, built without copying
    the history. It sees records observed after it was made."""

    def __init__(self, observed: Mapping[FlatPoint, int], pending: Iterable[FlatPoint]) -> None:
        self._observed = observed
        self._pending = {point for point in pending if point not in observed}

    def __contains__(self, point: object) -> bool:
        return point in self._observed or point in self._pending

    def __iter__(self) -> Iterator[FlatPoint]:
        yield from self._observed
        yield from (point for point in self._pending if point not in self._observed)

    def __len__(self) -> int:
        return len(self._observed) + sum(point not in self._observed for point in self._pending)


class Strategy(ABC):
    """Proposes knob values and learns from results.

    Subclasses implement :meth:`propose`; :meth:`observe` keeps the records (in
    :attr:`history`), and :meth:`rebuild` and the seeding come for free. A subclass
    must compute each proposal from ``history``, ``pending`` and ``rng(trial_id)``
    only, never from the order in which records arrived, so that a rebuilt strategy
    proposes what the original would have.

    Args:
        knob_config: the template's whole knob config; only searchable knobs are searched.
        seed: makes proposals reproducible; None draws fresh entropy once.
    """

    #: The name users give to pick this strategy (``--advisor NAME``).
    name: str = ""

    @classmethod
    def plan_for(
        cls,
        knob_config: KnobConfig,
        options: JobOptions,
        *,
        trial_count: int | None,
        time_hours: float | None,
        workers: int,
    ) -> Plan | None:
        """The plan a sub-job searched by this strategy follows; None: the one the job's options ask for.

        A strategy that runs its trials in phases of its own (ENAS) returns its plan here,
        so the job driver needs to know nothing of it. Raises when the budget cannot hold it.
        """
        return None

    def __init__(self, knob_config: KnobConfig, *, seed: int | None = None) -> None:
        self.knob_config = validate_knob_config(knob_config)
        self.search_space = SearchSpace(self.knob_config)
        self.seed = int(np.random.SeedSequence().entropy % (2**63)) if seed is None else int(seed)
        self._rows: dict[int, _Row] = {}
        self._ids: list[int] = []  # observed trial ids, ascending
        self._ranked: list[tuple[float, int]] = []  # (-score, trial id) of completed records: best first
        self._taken: dict[FlatPoint, int] = {}  # observed point -> how many records have it

    @property
    def history(self) -> list[TrialRecord]:
        """The observed records, by trial id (a new list each time: linear in the history).

        A record's knobs are its searchable knob values, as the strategy keeps them."""
        return [self.record(i) for i in self._ids]

    def points(self) -> list[tuple[TrialRecord, FlatPoint]]:
        """Each observed record with its flat point (see :class:`SearchSpace`), by trial id
        (a new list each time: linear in the history)."""
        return [(self.record(i), self._rows[i].point) for i in self._ids]

    @property
    def n_observed(self) -> int:
        """How many records were observed (a trial id observed again counts once)."""
        return len(self._ids)

    @property
    def n_completed(self) -> int:
        """How many observed records are COMPLETED (have a score)."""
        return len(self._ranked)

    def record(self, trial_id: int) -> TrialRecord:
        """The observed record of ``trial_id``, its knobs the searchable ones."""
        row = self._rows[trial_id]
        knobs = self.search_space.unflatten(row.point)
        return TrialRecord(trial_id, knobs, row.status, row.score, row.metadata or {})

    def point(self, trial_id: int) -> FlatPoint:
        """The flat point of the observed record of ``trial_id``."""
        return self._rows[trial_id].point

    def status(self, trial_id: int) -> TrialStatus:
        return self._rows[trial_id].status

    def score(self, trial_id: int) -> float | None:
        return self._rows[trial_id].score

    def recent(self, n: int, *, completed: bool = False) -> list[int]:
        """The ``n`` highest observed trial ids (the most recent trials), ascending; with
        ``completed``, of COMPLETED records only. Costs ``n`` plus the records skipped."""
        if not completed:
            return self._ids[max(0, len(self._ids) - n) :] if n > 0 else []
        found: list[int] = []
        for trial_id in reversed(self._ids):
            if len(found) >= n:
                break
            if self._rows[trial_id].status is TrialStatus.COMPLETED:
                found.append(trial_id)
        return found[::-1]

    def best(self, n: int) -> list[int]:
        """The trial ids of the ``n`` best-scored COMPLETED records, best first; ties go to the earlier trial."""
        return [trial_id for _, trial_id in self._ranked[: max(0, n)]]

    def worst_score(self) -> float | None:
        """The lowest score observed (NaN ranks below every number); None before any record completed."""
        return self._rows[self._ranked[-1][1]].score if self._ranked else None

    def rng(self, trial_id: int) -> np.random.Generator:
        """The generator for trial ``trial_id``'s proposal: same seed and id, same draws."""
        return np.random.default_rng([self.seed, int(trial_id)])

    @abstractmethod
    def propose(self, trial_id: int, pending: Iterable[Knobs] = ()) -> Knobs:
        """Knob values (searchable knobs only) for trial ``trial_id``.

        Args:
            trial_id: a number unique within the search, increasing with time.
            pending: knob values proposed earlier whose trials are still running.

        Raises:
            StrategyError: the strategy cannot propose (its space is exhausted, say).
        """

    def propose_batch(
        self, trial_ids: Sequence[int], pending: Iterable[Knobs] = (), pin: Mapping[str, Any] | None = None
    ) -> list[Knobs]:
        """Knob values for several trials started at once (a fused group), one per id of ``trial_ids``.

        Each is :meth:`propose`'s answer with ``pending`` and the batch's earlier proposals
        pending, so the batch is what proposing one trial after the other would give.
        Strategies that count pending trials as constant liars (bayes: the worst score
        seen; tpe: Optuna's running trials) thereby spread a batch without an override;
        the others keep a batch's points apart in a discrete space (see :meth:`taken`).

        ``pin`` holds knob values every proposal of the batch takes in place of its own: a
        fused group's members share their first member's structure, and differ in the
        other knobs. The batch's later proposals count the pinned ones as pending.
        """
        pending = list(pending)
        proposals = []
        for trial_id in trial_ids:
            proposal = self.propose(trial_id, pending)
            if pin:
                proposal = {**proposal, **pin}
            proposals.append(proposal)
            pending.append(proposal)
        return proposals

    def parent(self, trial_id: int, pending: Iterable[Knobs] = ()) -> int | None:
        """The earlier trial that :meth:`propose`'s answer for the same arguments derives from, if any.

        Under ``SHARE_PARAMS`` the trial starts from that trial's parameters, so a child that
        mutates one decision of its parent inherits the rest of it (a model space inherits by
        mutation record). None, the default: the job's sharing rule picks the parameters.
        """
        return None

    def propose_for(self, phase: str, trial_id: int, pending: Iterable[Knobs] = ()) -> Knobs:
        """Knob values for a trial of a plan's ``phase``; a strategy whose plan has phases of its own
        (ENAS) proposes differently per phase, the others as :meth:`propose`."""
        return self.propose(trial_id, pending)

    def observe(self, record: TrialRecord) -> None:
        """Learn from a finished trial (a score, or a failure).

        Observing a trial id again replaces its record.

        Raises:
            StrategyError: the record's knobs are not a point of this strategy's space.
        """
        try:
            point = self.search_space.flatten(record.knobs)
        except StrategyError as e:
            raise StrategyError(f"trial {record.trial_id}: {e}") from None
        trial_id = record.trial_id
        old = self._rows.get(trial_id)
        if old is None:
            bisect.insort(self._ids, trial_id)
        else:
            self._forget(trial_id, old)
        score = None if record.score is None else float(record.score)
        self._rows[trial_id] = _Row(point, record.status, score, dict(record.metadata) or None)
        self._taken[point] = self._taken.get(point, 0) + 1
        if record.status is TrialStatus.COMPLETED:
            bisect.insort(self._ranked, _rank(score, trial_id))

    def _forget(self, trial_id: int, row: _Row) -> None:
        """Take a replaced record's point and rank out of the caches."""
        if self._taken[row.point] == 1:
            del self._taken[row.point]
        else:
            self._taken[row.point] -= 1
        if row.status is TrialStatus.COMPLETED:
            del self._ranked[bisect.bisect_left(self._ranked, _rank(row.score, trial_id))]

    def taken(self, pending: Iterable[Knobs]) -> TakenPoints:
        """The flat points observed or pending: a discrete space should not see them again.

        Every observed point counts, whatever its status: at an INVALID one there is no model to find.
        The answer is a view of the strategy's counts (see :class:`TakenPoints`): it costs the pending
        trials, not the history.
        """
        return TakenPoints(self._taken, [self.search_space.flatten(knobs) for knobs in pending])

    def sample_new(self, rng: np.random.Generator, taken: AbstractSet[FlatPoint], *, tries: int = 64) -> FlatPoint:
        """A random point not in ``taken``; a taken one after ``tries`` misses (a nearly exhausted space)."""
        point: FlatPoint = ()
        for _ in range(tries if len(self.search_space) else 0):
            point = self.search_space.from_unit(self.search_space.sample_unit(rng, 1)[0])
            if point not in taken:
                break
        return point

    @classmethod
    def rebuild(cls, knob_config: KnobConfig, history: Iterable[TrialRecord], *, seed: int, **kwargs: Any) -> Strategy:
        """A strategy in the state the original reached after observing ``history``."""
        strategy = cls(knob_config, seed=seed, **kwargs)
        for record in sorted(history, key=lambda r: r.trial_id):
            strategy.observe(record)
        return strategy


def _rank(score: float | None, trial_id: int) -> tuple[float, int]:
    """The sort key of a completed record in :attr:`Strategy._ranked`: best first, NaN last, ties by trial id."""
    assert score is not None
    return (-score if score == score else math.inf, trial_id)
