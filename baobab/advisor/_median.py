"""The median stopping rule.

Golovin, Solnik, Moitra, Kochanski, Karro and Sculley, "Google Vizier: A Service for
Black-Box Optimization", KDD 2017, section 3.2.2: stop a trial at step ``s`` when its
best value so far is strictly worse than the median of the running averages, up to
``s``, of the completed trials. Simpler than ASHA and with no schedule to choose.
"""

from __future__ import annotations

import statistics

from baobab.advisor._stopping import Action, Decision, StoppingRule, whole_number

__all__ = ["MedianRule"]


class MedianRule(StoppingRule):
    """Stops a trial whose best value by step ``s`` is below the median of the completed trials' averages.

    A completed trial is one that finished with a score and that this rule did not stop
    (a stopped trial's short curve would drag the median down); its running average at
    ``s`` is the mean of its values at steps up to ``s`` (the last value when a step was
    reported twice). Completed trials with no value up to ``s`` do not count.

    Args:
        grace_steps: no trial is stopped at a step below this.
        min_trials: no trial is stopped while fewer completed trials have a value up to the step.
        metric, mode: see :class:`~baobab.advisor.StoppingRule`.
    """

    name = "median"

    def __init__(
        self, *, grace_steps: int = 1, min_trials: int = 3, metric: str | None = None, mode: str = "max"
    ) -> None:
        super().__init__(metric=metric, mode=mode)
        self.grace_steps = whole_number(self.name, "grace_steps", grace_steps, 0)
        self.min_trials = whole_number(self.name, "min_trials", min_trials, 1)
        #: Per trial, step to the (signed) value last reported for it.
        self._curves: dict[int, dict[int, float]] = {}
        self._completed: set[int] = set()

    def median_at(self, step: int) -> float | None:
        """The median of the completed trials' running averages at ``step``, as reported; None without any."""
        averages = self._averages(step, exclude=None)
        return self._sign * statistics.median(averages) if averages else None

    def _averages(self, step: int, exclude: int | None) -> list[float]:
        averages = []
        for trial_id in sorted(self._completed):
            values = [v for s, v in self._curves.get(trial_id, {}).items() if s <= step]
            if values and trial_id != exclude:
                averages.append(sum(values) / len(values))
        return averages

    def _observe(self, trial_id: int, step: int, value: float) -> Decision:
        curve = self._curves.setdefault(trial_id, {})
        curve[step] = value
        if step < self.grace_steps:
            return Decision(Action.CONTINUE, f"median: step {step} is in the grace period ({self.grace_steps} steps)")
        averages = self._averages(step, exclude=trial_id)
        if len(averages) < self.min_trials:
            return Decision(
                Action.CONTINUE, f"median: {len(averages)} completed trials reach step {step}; {self.min_trials} needed"
            )
        best = max(v for s, v in curve.items() if s <= step)
        median = statistics.median(averages)
        if best < median:
            return Decision(
                Action.STOP,
                f"median: best value {self._shown(best)} by step {step} is below the median {self._shown(median)} "
                f"of the running averages of {len(averages)} completed trials",
            )
        return Decision(Action.CONTINUE, f"median: best value {self._shown(best)} by step {step} is not below it")

    def _on_finished(self, trial_id: int, completed: bool) -> None:
        if completed:
            self._completed.add(trial_id)
