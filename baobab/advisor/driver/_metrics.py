"""The early-stopping feed: interim metrics of watched trials go to their sub-job's stopping rule.

Local workers write interim metrics to the store without an event, so the driver reads
them every ``metrics_s`` (and at once on a cluster worker's ``TRIAL_METRICS`` event),
from a cursor per watched trial. After a restart, each sub-job's rule is replayed from
the stored metrics and ends of its trials, in time order, so it decides as before.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, Row

from baobab.advisor._job_options import StoppingRuleName
from baobab.advisor._scheduling import ActiveTrial, JobState, SubJobState
from baobab.advisor._stopping import Finish, Report, StoppingEvent
from baobab.advisor.driver._reads import interim_metrics

__all__ = ["MetricFeed"]

logger = logging.getLogger(__name__)

#: Sorts a trial's end after every interim metric stored at the same instant.
_AFTER_METRICS = 1 << 62


class MetricFeed:
    """The watched trials: the last interim-metric row read of each, and those already asked to stop."""

    def __init__(self) -> None:
        self.cursors: dict[int, int] = {}
        self._stop_asked: set[int] = set()
        #: The highest metric row id read so far.
        self._seen = 0

    @staticmethod
    def ruled(sub: SubJobState, phase: str | None) -> bool:
        """Whether the sub-job's stopping rule watches trials of ``phase``."""
        return (
            sub.options.stopping_rule != StoppingRuleName.NONE
            and sub.plan is not None
            and phase in sub.plan.ruled_phases
        )

    def watch(self, sub: SubJobState, trial: ActiveTrial, cursor: int | None = None) -> None:
        """Read the interim metrics of ``trial`` from after ``cursor`` on, when its sub-job's rule watches it.

        None, for a trial submitted now: after the highest row read so far. Its worker writes its first row
        once it runs, so that row's id comes later; and each read, which starts from the lowest cursor,
        then returns only rows written since the oldest watched trial's last one, not every row of every
        running trial (1,000 slots times their reports, twice a second)."""
        if self.ruled(sub, trial.phase):
            if sub.rule is None:
                sub.rule = sub.options.stopping_rule_for()
            self.cursors[trial.id] = self._seen if cursor is None else cursor

    def finished(self, trial_id: int) -> bool:
        """Stop watching a trial that ended; True when it was watched (its rule is to hear of the end)."""
        self._stop_asked.discard(trial_id)
        return self.cursors.pop(trial_id, None) is not None

    def forget(self, trial_id: int) -> None:
        self.cursors.pop(trial_id, None)
        self._stop_asked.discard(trial_id)

    def rebuild(self, engine: Engine, job: JobState, trials: Sequence[Row[Any]]) -> None:
        """Each sub-job's stopping rule, replayed from its trials' stored metrics and ends, in time order."""
        ruled = {t.id: t for t in trials if self.ruled(job.sub_jobs[t.sub_job_id], t.phase)}
        if not ruled:
            return
        events: dict[int, list[tuple[datetime, int, StoppingEvent]]] = {}
        last: dict[int, int] = {}
        probe = {sub_id: sub.options.stopping_rule_for() for sub_id, sub in job.sub_jobs.items()}
        for metric in interim_metrics(engine, list(ruled)):
            trial = ruled[metric.trial_id]
            value = probe[trial.sub_job_id].value_of(metric.metrics or {})
            events.setdefault(trial.sub_job_id, []).append(
                (metric.time, metric.id, Report(trial.number, metric.step, value))
            )
            last[metric.trial_id] = max(last.get(metric.trial_id, 0), metric.id)
            self._seen = max(self._seen, metric.id)
        for trial in ruled.values():
            if trial.status.is_finished() and trial.finished_at is not None:
                finish = Finish(trial.number, trial.score if trial.status.is_scored() else None)
                events.setdefault(trial.sub_job_id, []).append((trial.finished_at, _AFTER_METRICS, finish))
        for sub_id, sub in job.sub_jobs.items():
            ordered = sorted(events.get(sub_id, []), key=lambda item: (item[0], item[1]))
            sub.rule = sub.options.stopping_rule_for(event for _, _, event in ordered)
            for trial_id, active in sub.active.items():
                if trial_id in ruled:
                    self.watch(sub, active, last.get(trial_id, 0))

    def read(self, engine: Engine, owners: Mapping[int, tuple[JobState, SubJobState]]) -> list[tuple[int, str]]:
        """Feed the new interim metrics of watched trials to their rules; returns (trial id, reason) of those
        a rule says to stop, each once."""
        if not self.cursors:
            return []
        to_stop = []
        for metric in interim_metrics(engine, list(self.cursors), after=min(self.cursors.values())):
            self._seen = max(self._seen, metric.id)
            cursor = self.cursors.get(metric.trial_id)
            owner = owners.get(metric.trial_id)
            if cursor is None or metric.id <= cursor or owner is None:
                continue
            self.cursors[metric.trial_id] = metric.id
            job, sub = owner
            trial = sub.active.get(metric.trial_id)
            if sub.rule is None or trial is None:
                continue
            decision = sub.rule.report(trial.number, metric.step, sub.rule.value_of(metric.metrics or {}))
            if decision.stop and trial.id not in self._stop_asked:
                logger.info("job %s: trial %s stopped early: %s", job.id, trial.id, decision.reason)
                to_stop.append((trial.id, f"early stopping: {decision.reason}"))
                self._stop_asked.add(trial.id)
        return to_stop
