"""The members of a served job: their worker processes, fan-out of a batch, restarts.

Each member has one :class:`~baobab.worker._inference.InferenceWorker`. A batch goes
to every member that is up, at once (one thread each), and each has
``member_timeout_s`` to answer. What happens to a member that does not answer:

- its template raised in ``predict``, or answered something that does not fit the
  task: it is left out of this answer and keeps serving (the process is healthy, and
  restarting it would take it away from every other client for seconds);
- its process crashed, broke the protocol or ran past the timeout: it is killed, left
  out, and restarted in the background (with a growing pause between failed
  restarts); until it is back, batches leave it out with the reason.

The answers of the members that did answer are ensembled, best member first.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baobab.exceptions import BaobabError
from baobab.model import Task
from baobab.predictor._ensemble import check_answer, ensemble
from baobab.predictor._job import MemberSpec
from baobab.worker import InferenceWorker, InferenceWorkerError

__all__ = ["BatchOutcome", "LeftOut", "MemberPool", "NoMemberLoadedError"]

logger = logging.getLogger("baobab.predictor")

#: Pauses between restarts of a member that keeps failing to load, in seconds.
_RESTART_PAUSES = (0.0, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)


class NoMemberLoadedError(BaobabError):
    """Not one member of the job could be loaded; the message gives each one's reason."""


class _State(enum.Enum):
    LOADING = "loading"
    UP = "up"
    DOWN = "down"


@dataclass(frozen=True)
class LeftOut:
    """A member missing from an answer, and why."""

    trial_id: int
    reason: str


@dataclass(frozen=True)
class BatchOutcome:
    """The ensembled answer to a batch; ``predictions`` is None when no member answered."""

    predictions: list[Any] | None
    answered: tuple[int, ...]
    left_out: tuple[LeftOut, ...]


class _Member:
    def __init__(self, spec: MemberSpec, log_path: Path) -> None:
        self.spec = spec
        self.log_path = log_path
        self.state = _State.LOADING
        self.reason = "still loading"
        self.worker: InferenceWorker | None = None
        self.restarts = 0


class MemberPool:
    """The workers of a job's members.

    Args:
        members: best first.
        task: decides how answers are checked and ensembled.
        log_dir: one log file per member's worker (``trial-<id>.log``).
        member_timeout_s: how long a member has to answer one batch.
        load_timeout_s: how long a member has to load.
    """

    def __init__(
        self,
        members: Sequence[MemberSpec],
        task: Task,
        *,
        log_dir: str | Path,
        member_timeout_s: float,
        load_timeout_s: float,
    ) -> None:
        if not members:
            raise ValueError("a member pool needs at least one member")
        self.task = task
        self.member_timeout_s = member_timeout_s
        self.load_timeout_s = load_timeout_s
        self._members = [_Member(spec, Path(log_dir, f"trial-{spec.trial_id}.log")) for spec in members]
        # Reentrant: the predictor's SIGTERM handler may close the pool in a thread that holds it.
        self._lock = threading.RLock()
        self._closed = threading.Event()
        self._fan_out = ThreadPoolExecutor(max_workers=len(members), thread_name_prefix="member")

    def __len__(self) -> int:
        return len(self._members)

    def ready_count(self) -> int:
        """How many members are up now."""
        with self._lock:
            return sum(member.state is _State.UP for member in self._members)

    def start(self) -> None:
        """Load every member at once; the ones that fail are retried in the background.

        Raises:
            NoMemberLoadedError: not one member loaded (each one's reason in the message).
        """
        threads = [threading.Thread(target=self._load, args=(m,), daemon=True) for m in self._members]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if self.ready_count() == 0:
            reasons = "; ".join(f"trial {m.spec.trial_id}: {m.reason}" for m in self._members)
            raise NoMemberLoadedError(f"no member could be loaded: {reasons}")
        for member in self._members:
            if member.state is _State.DOWN:
                self._restart_later(member, member.reason)

    def predict(self, queries: list[Any]) -> BatchOutcome:
        """Fan ``queries`` out to every member that is up and ensemble their answers."""
        with self._lock:
            up = [(m, m.worker) for m in self._members if m.state is _State.UP and m.worker is not None]
            down = [LeftOut(m.spec.trial_id, self._why_down(m)) for m in self._members if m.state is not _State.UP]
        futures = [
            (member, worker, self._fan_out.submit(worker.predict, queries, timeout=self.member_timeout_s))
            for member, worker in up
        ]
        answers: dict[int, list[Any]] = {}
        left_out: dict[int, str] = {lo.trial_id: lo.reason for lo in down}
        for member, worker, future in futures:
            trial_id = member.spec.trial_id
            try:
                predictions = future.result()
            except InferenceWorkerError as e:
                left_out[trial_id] = str(e)
                if e.fatal:
                    logger.warning("trial %d: %s; its last output:\n%s", trial_id, e, worker.log_tail())
                    self._restart_later(member, str(e), worker)
                else:
                    logger.warning("trial %d left out of a batch: %s", trial_id, e)
                continue
            except Exception as e:  # a bug of ours; the worker's state is unknown, so start afresh
                logger.exception("trial %d: predicting failed", trial_id)
                worker.close()
                left_out[trial_id] = f"internal error: {type(e).__name__}"
                self._restart_later(member, left_out[trial_id], worker)
                continue
            reason = self._unfit(predictions, len(queries))
            if reason is not None:
                logger.warning("trial %d left out of a batch: %s", trial_id, reason)
                left_out[trial_id] = reason
                continue
            answers[trial_id] = predictions
        # Best first, in the order of the members (which the tie-break of a vote needs).
        order = [m.spec.trial_id for m in self._members]
        answered = tuple(t for t in order if t in answers)
        missing = tuple(LeftOut(t, left_out[t]) for t in order if t in left_out)
        if not answered:
            return BatchOutcome(None, (), missing)
        return BatchOutcome(ensemble(self.task, [answers[t] for t in answered]), answered, missing)

    def close(self) -> None:
        """Kill every worker (also one being restarted); safe to call twice."""
        self._closed.set()
        with self._lock:
            workers = [m.worker for m in self._members if m.worker is not None]
        for worker in workers:
            worker.close()
        self._fan_out.shutdown(wait=False, cancel_futures=True)

    # -- loading and restarting -----------------------------------------------------------

    def _load(self, member: _Member) -> bool:
        worker = InferenceWorker(member.spec.worker, log_path=member.log_path)
        with self._lock:
            member.state, member.worker = _State.LOADING, worker
        if self._closed.is_set():
            worker.close()
            return False
        try:
            worker.start(timeout=self.load_timeout_s)
        except InferenceWorkerError as e:
            with self._lock:
                member.state, member.reason = _State.DOWN, str(e)
            if not self._closed.is_set():
                logger.warning("trial %d could not be loaded: %s", member.spec.trial_id, e)
            return False
        with self._lock:
            member.state, member.reason = _State.UP, ""
        if self._closed.is_set():  # closed while loading: close() may have missed it
            worker.close()
            return False
        logger.info("trial %d loaded (pid %s)", member.spec.trial_id, worker.pid)
        return True

    def _restart_later(self, member: _Member, reason: str, failed: InferenceWorker | None = None) -> None:
        with self._lock:
            if failed is not None and member.worker is not failed:
                return  # already being restarted
            member.state, member.reason = _State.DOWN, reason
            member.restarts += 1
        threading.Thread(target=self._restart, args=(member,), name="restart", daemon=True).start()

    def _restart(self, member: _Member) -> None:
        for attempt in range(10**9):
            pause = _RESTART_PAUSES[min(attempt, len(_RESTART_PAUSES) - 1)]
            if self._closed.wait(pause):
                return
            if self._load(member):
                logger.info("trial %d is back after a restart", member.spec.trial_id)
                return

    @staticmethod
    def _why_down(member: _Member) -> str:
        if member.state is _State.LOADING:
            return f"restarting (after: {member.reason})" if member.restarts else "still loading"
        return f"restarting (after: {member.reason})"

    def _unfit(self, predictions: Any, count: int) -> str | None:
        if not isinstance(predictions, list) or len(predictions) != count:
            return f"answered {type(predictions).__name__} for {count} queries"
        for i, answer in enumerate(predictions):
            reason = check_answer(self.task, answer)
            if reason is not None:
                return f"answer to query {i}: {reason}"
        return None
