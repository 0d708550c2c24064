"""The driver and the store: rescans, taking up jobs (and replaying them), lost trials, leases.

Several drivers may share a store: with ``lease_s`` set, a driver takes up only jobs no
other driver holds (``train_jobs.driver``, ``lease_expires_at``), renews its leases every
third of ``lease_s``, and drops a job whose lease another driver took after it lapsed.
Each takes up jobs only to its fair share of the unfinished ones among the live drivers
(:func:`baobab.store.fair_share`), and hands the newest of any excess over (another driver
joined, or jobs ended), so that several drivers turn over more trials than one could
(``bench/scale.py``'s advisors part measures how many more).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Row

from baobab.advisor._budget import parse_budget
from baobab.advisor._job_options import FusionMode
from baobab.advisor._scheduling import JobState, StopCause, SubJobState
from baobab.advisor.driver import _rows
from baobab.advisor.driver._core import DriverCore
from baobab.advisor.driver._reads import earlier_profiles, job_rows, job_statuses, jobs_to_adopt, trial_rows
from baobab.advisor.driver._replay import job_state, lost_outcome, replay_trials, sub_job_state
from baobab.exceptions import StoreError
from baobab.store import JobStatus, TrainJob, TrialState

__all__ = ["StoreSync"]

logger = logging.getLogger(__name__)


class StoreSync(DriverCore):
    """What the driver learns from reading the store, and the jobs it takes up from it."""

    def rescan(self) -> None:
        """Read the store again: jobs to take up or stop, trials whose event was lost, trials lost outright."""
        now = self.clock()
        statuses = job_statuses(self.engine, list(self._jobs))
        to_adopt = []
        for job_id, status in statuses.items():
            job = self._jobs.get(job_id)
            if job is None:
                if status in JobStatus.UNFINISHED:
                    to_adopt.append(job_id)
            elif status.is_finished():
                self._forget(job)  # someone else ended it
            elif status is JobStatus.STOPPING and job.stop_cause is None:
                with self._guard(job):
                    self._begin_stop(job, StopCause.USER, now)
        if self._owners:
            self._check_held(now)
        if to_adopt:
            self.adopt(to_adopt)

    def _check_held(self, now: float) -> None:
        held = self.executor.active()
        waiting = {trial for job in self._jobs.values() if job.share is not None for trial in job.share.waiting_alone}
        missing = [trial_id for trial_id in self._owners if trial_id not in held and trial_id not in waiting]
        suspects = set()
        for row in trial_rows(self.engine, missing):
            owner = self._owners.get(row.id)
            if owner is None:
                continue
            job, sub = owner
            with self._guard(job):
                if row.status.is_finished():
                    self._apply_row(row, now)  # its event was lost
                elif row.id in self._suspects:
                    self._recover_lost(job, sub, row, now)
                else:
                    suspects.add(row.id)
        self._suspects = suspects

    def _recover_lost(self, job: JobState, sub: SubJobState, row: Row[Any], now: float) -> None:
        """A trial the executor no longer holds while the store says it runs: run it again, or end it."""
        state, error = lost_outcome(job, row.attempts, self.max_attempts)
        if _rows.end_lost_trials(self.engine, [(row.id, state, error)], now) is not None:
            return  # it finished meanwhile; its event follows
        if state is TrialState.PENDING:
            logger.warning("trial %s was lost; submitting it again", row.id)
            sub.active[row.id].run_alone()  # requeued alone (the store took it out of its group)
            self.executor.submit(row.id)
        else:
            self._finish_trial(row.id, state, None, None, error, now)

    def adopt(self, job_ids: Iterable[int] | None = None) -> None:
        """Take up the unfinished jobs of the store (only ``job_ids`` when given) that the driver does not run."""
        if job_ids is not None:
            job_ids = [i for i in job_ids if i not in self._jobs]
            if not job_ids:
                return
        now = self.clock()
        rows = jobs_to_adopt(self.engine, job_ids, self.name if self.lease_s is not None else None, now)
        rows = [row for row in rows if row.id not in self._jobs]
        if rows and self.lease_s is not None:  # the oldest, up to this driver's share
            rows = rows[: max(0, _rows.share(self.engine, self.name, self.lease_s, now) - len(self._jobs))]
        if not rows:
            return
        held = self.executor.active()  # failing here defers every job to the next rescan, and ends none
        for row in rows:
            try:
                self._adopt_job(row, held, self.clock())
            except Exception as e:
                self._fail_job(row.id, e, self._jobs.get(row.id))

    def _adopt_job(self, row: TrainJob, held: set[int], now: float) -> None:
        """Start a PENDING job, or rebuild a running one from its rows; resubmit its lost trials."""
        if self.lease_s is not None:
            if not _rows.take_lease(self.engine, row.id, self.name, self.lease_s, now):
                return  # another driver took it meanwhile
            logger.info("job %s: leased by %s", row.id, self.name)
        status, started_at = row.status, row.started_at
        if status is JobStatus.PENDING:
            if not _rows.start_job(self.engine, row.id, now):
                return  # it changed meanwhile (stopped?): the event that says so, or the next rescan, takes it
            started_at = _rows.utc(now)
            status = JobStatus.RUNNING
            logger.info("job %s (%s v%s): taken up", row.id, row.app, row.app_version)
        job, options = job_state(
            row,
            status,
            started_at,
            now,
            cpu_slots=self.settings.cpu_slots,
            grace_s=self.grace_s,
            slot_threads=getattr(self.executor, "slot_threads", None),
        )
        if job.window_wait is not None and "deterministic" not in (row.placement or {}):
            _rows.record_window(self.engine, job.id, job.window_wait.record())  # its window, stored before it is used
        subs, trials = job_rows(self.engine, row.id)
        gpu = parse_budget(row.budget, stored=True).gpu_count > 0
        for sub_row, model_name, knob_config_text in subs:
            sub = job.sub_jobs[sub_row.id] = sub_job_state(
                sub_row, model_name, knob_config_text, job, options, self.max_errors
            )
            if options.fusion == FusionMode.AUTO:  # what profiles of its template chose before, on this device kind
                sub.device_kind = "gpu" if gpu else "cpu"
                sub.earlier_profiles = earlier_profiles(self.engine, sub_row.model_template_id, row.id, gpu=gpu)
        lost = replay_trials(job, trials, held, self.max_attempts)
        for sub in job.sub_jobs.values():
            self._write_updates(sub)
        if lost:
            changed = _rows.end_lost_trials(self.engine, [(t.row.id, t.state, t.error) for t in lost], now)
            if changed is not None:  # it finished meanwhile: its own state counts, not ours
                raise StoreError(f"trial {changed} changed while job {row.id} was taken up; trying again")
        self._metrics.rebuild(self.engine, job, trials)
        self._jobs[job.id] = job
        for sub in job.sub_jobs.values():
            for trial_id in sub.active:
                self._owners[trial_id] = (job, sub)
        for t in lost:
            if t.state is TrialState.PENDING:
                logger.warning("job %s: trial %s was lost; submitting it again", job.id, t.row.id)
                self.executor.submit(t.row.id)
        if job.stop_cause is not None:
            self._begin_stop(job, job.stop_cause, now)
        else:
            self._check_end(job, now)

    # -- leases --------------------------------------------------------------------------------

    def renew_leases(self, now: float | None = None) -> None:
        """Extend the leases of the jobs this driver runs; forget those another driver took; say that it is
        alive, and hand over what it holds beyond its share (another driver joined)."""
        if self.lease_s is None:
            return
        now = self.clock() if now is None else now
        ids = list(self._jobs)
        mine = _rows.renew_leases(self.engine, ids, self.name, self.lease_s, now) if ids else set()
        for job_id in ids:
            job = self._jobs.get(job_id)
            if job is not None and job_id not in mine:
                logger.warning("job %s: another advisor holds it now; letting it go", job_id)
                self._forget(job)
        excess = len(self._jobs) - _rows.share(self.engine, self.name, self.lease_s, now)
        if excess > 0:  # another driver joined: it takes the newest jobs up from their rows
            handed = list(self._jobs.values())[-excess:]
            _rows.release_leases(self.engine, self.name, [job.id for job in handed])
            for job in handed:
                logger.info("job %s: handed over to share the jobs among more advisors", job.id)
                self._forget(job)

    def release_leases(self) -> None:
        """Hand this driver's jobs back at once (a clean stop), so another driver takes them up."""
        if self.lease_s is None:
            return
        _rows.release_leases(self.engine, self.name)
