"""Asynchronous successive halving (ASHA) as a stopping rule.

Li, Jamieson, Rostamizadeh, Gonina, Ben-tzur, Hardt, Recht and Talwalkar, "A System for
Massively Parallel Hyperparameter Tuning", MLSys 2020. The paper's symbols: ``r`` is
``min_resource``, ``eta`` the reduction factor, ``R`` ``max_resource``, and the
minimum early-stopping rate ``s`` is 0 (the first rung is at ``r``).

Every trial starts at the bottom rung and climbs while it stays in the top ``1/eta`` of
the values recorded at each rung it reaches, compared with the trials that reached that
rung before it: nobody waits for stragglers, which is what makes it asynchronous. A
trial that is not promoted is stopped. Optuna's ``SuccessiveHalvingPruner`` applies the
same rule, so the two can be compared on equal terms (``bench/early_stopping.py``).
"""

from __future__ import annotations

import bisect

from baobab.advisor._stopping import Action, Decision, StoppingRule, whole_number
from baobab.exceptions import StrategyError

__all__ = ["AshaRule"]


class AshaRule(StoppingRule):
    """Stops a trial that reaches a rung outside the top ``1/eta`` of that rung so far.

    Rung ``k`` is at step ``min_resource * eta**k`` (steps as the template reports them:
    ``TorchModel`` reports epochs from 0). A trial reaches a rung with its first report
    at or past the rung's step; that report's value is recorded there (a report that
    jumps several rungs is recorded at each, lowest first). With ``n`` values at the rung,
    its own included, the trial goes on when its value is at least the
    ``max(1, n // eta)``-th best: the first trial at a rung always goes on, and ties go on.

    Args:
        eta: the reduction factor: the share ``1/eta`` of each rung goes on.
        min_resource: the step of the first rung.
        max_resource: the step at which trials end by themselves; no rung at or past it.
            None: rungs all the way up.
        metric, mode: see :class:`~baobab.advisor.StoppingRule`.
    """

    name = "asha"

    def __init__(
        self,
        *,
        eta: int = 3,
        min_resource: int = 1,
        max_resource: int | None = None,
        metric: str | None = None,
        mode: str = "max",
    ) -> None:
        super().__init__(metric=metric, mode=mode)
        self.eta = whole_number(self.name, "eta", eta, 2)
        self.min_resource = whole_number(self.name, "min_resource", min_resource, 1)
        if max_resource is not None:
            whole_number(self.name, "max_resource", max_resource, 1)
            if max_resource <= min_resource:
                raise StrategyError(
                    f"asha option max_resource={max_resource!r} must be greater than min_resource={min_resource!r}"
                )
        self.max_resource = max_resource
        #: Per rung, trial id to the (signed) value it reached the rung with.
        self._rungs: list[dict[int, float]] = []
        #: Per rung, the same values in ascending order, kept sorted as they come (not sorted per report).
        self._sorted: list[list[float]] = []

    def expected_share(self, steps: int) -> float:
        """The share of its ``steps`` steps (reported from 0) a trial is expected to run when each trial is as
        likely as any to be in a rung's top ``1/eta``: all reach the first rung, ``1/eta`` of them
        the next, ``1/eta**2`` the one after, and the survivors of the last rung below the end run
        to the end. Early in a job more go on (the first trials at a rung always do), so this is
        the share of a job with many trials."""
        if steps <= 1:
            return 1.0
        expected, reach, done, rung = 0.0, 1.0, 0, 0
        while True:
            step = self.rung_step(rung)
            if step >= steps - 1 or (self.max_resource is not None and step >= self.max_resource):
                return (expected + reach * (steps - done)) / steps
            expected += reach * (step + 1 - done)  # steps done..step, judged at the rung
            done, reach, rung = step + 1, reach / self.eta, rung + 1

    def rung_step(self, rung: int) -> int:
        """The step of rung ``rung`` (0 is the lowest)."""
        return self.min_resource * self.eta**rung

    def rung_values(self, rung: int) -> dict[int, float]:
        """Trial id to the value it reached rung ``rung`` with, as reported."""
        values = self._rungs[rung] if rung < len(self._rungs) else {}
        return {trial_id: self._sign * value for trial_id, value in values.items()}

    def _reached(self, step: int) -> range:
        """The rungs a report at ``step`` has reached."""
        count = 0
        while self.rung_step(count) <= step and (
            self.max_resource is None or self.rung_step(count) < self.max_resource
        ):
            count += 1
        return range(count)

    def _observe(self, trial_id: int, step: int, value: float) -> Decision:
        decision = Decision(Action.CONTINUE, f"asha: below the first rung (step {self.min_resource})")
        for rung in self._reached(step):
            if rung == len(self._rungs):
                self._rungs.append({})
                self._sorted.append([])
            recorded, ascending = self._rungs[rung], self._sorted[rung]
            if trial_id in recorded:
                continue
            recorded[trial_id] = value
            bisect.insort(ascending, value)
            keep = max(1, len(ascending) // self.eta)
            cutoff = ascending[-keep]
            where = f"rung {rung} (step {self.rung_step(rung)})"
            if value < cutoff:
                return Decision(
                    Action.STOP,
                    f"asha: value {self._shown(value)} at step {step} is not in the top {keep} of the {len(ascending)} "
                    f"trials at {where}; the cut-off is {self._shown(cutoff)}",
                )
            decision = Decision(Action.CONTINUE, f"asha: in the top {keep} of {len(ascending)} at {where}")
        return decision
