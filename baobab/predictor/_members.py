"""The members of a served job: their worker processes, fan-out of a batch, restarts.

Members of one template and one structure (the usual ensemble: the top trials of one
template) share a :class:`~baobab.worker.FusedInferenceWorker`, which answers for all
of them in one stacked forward pass; any other member, and any member that worker
cannot stack (it says which, and why), has an
:class:`~baobab.worker.InferenceWorker` of its own. With ``fuse`` off every member has
its own. A batch goes to every worker that is up, at once (one thread each), and each
has ``member_timeout_s`` to answer. What happens to a member that does not answer:

- its template raised in ``predict``, or answered something that does not fit the
  task: it is left out of this answer and keeps serving (the process is healthy, and
  restarting it would take it away from every other client for seconds);
- its process crashed, broke the protocol or ran past the timeout: it is killed, left
  out (with every member that process served), and restarted in the background (with
  a growing pause between failed restarts); until it is back, batches leave it out
  with the reason.

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
from baobab.worker import FusedInferenceWorker, InferenceWorker, InferenceWorkerError

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


class _Unit:
    """One worker process and the members it serves: one, or a fused group (best first)."""

    def __init__(self, members: list[MemberSpec], log_dir: Path) -> None:
        self.members = members
        self.fused = len(members) > 1
        ids = "-".join(str(m.trial_id) for m in members)
        self.log_path = Path(log_dir, f"fused-{ids}.log" if self.fused else f"trial-{ids}.log")
        self.state = _State.LOADING
        self.reason = "still loading"
        self.worker: InferenceWorker | FusedInferenceWorker | None = None
        self.restarts = 0


class MemberPool:
    """The workers of a job's members.

    Args:
        members: best first.
        task: decides how answers are checked and ensembled.
        log_dir: one log file per worker (``trial-<id>.log``, ``fused-<id>-<id>....log``).
        member_timeout_s: how long a worker has to answer one batch.
        load_timeout_s: how long a worker has to load.
        fuse: serve the members of one template and one structure (:attr:`MemberSpec.structure`)
            in one fused worker; False gives every member a worker of its own.
    """

    def __init__(
        self,
        members: Sequence[MemberSpec],
        task: Task,
        *,
        log_dir: str | Path,
        member_timeout_s: float,
        load_timeout_s: float,
        fuse: bool = True,
    ) -> None:
        if not members:
            raise ValueError("a member pool needs at least one member")
        self.task = task
        self.member_timeout_s = member_timeout_s
        self.load_timeout_s = load_timeout_s
        self._log_dir = Path(log_dir)
        self._order = [m.trial_id for m in members]
        self._units = [_Unit(group, self._log_dir) for group in _groups(members, fuse)]
        # Reentrant: the predictor's SIGTERM handler may close the pool in a thread that holds it.
        self._lock = threading.RLock()
        self._closed = threading.Event()
        self._fan_out = ThreadPoolExecutor(max_workers=len(members), thread_name_prefix="member")

    def __len__(self) -> int:
        return len(self._order)

    def ready_count(self) -> int:
        """How many members are up now."""
        with self._lock:
            return sum(len(unit.members) for unit in self._units if unit.state is _State.UP)

    def start(self) -> None:
        """Load every worker at once; the ones that fail are retried in the background.

        Raises:
            NoMemberLoadedError: not one member loaded (each one's reason in the message).
        """
        units = list(self._units)
        self._load_all(units)
        if self.ready_count() == 0:
            with self._lock:
                reasons = "; ".join(f"trial {m.trial_id}: {u.reason}" for u in self._units for m in u.members)
            raise NoMemberLoadedError(f"no member could be loaded: {reasons}")
        with self._lock:  # a fused worker that served every member apart is gone from the pool
            failed = [unit for unit in units if unit.state is _State.DOWN and unit in self._units]
        for unit in failed:
            self._restart_later(unit, unit.reason)

    def predict(self, queries: list[Any]) -> BatchOutcome:
        """Send ``queries`` to every worker that is up and ensemble the members' answers."""
        with self._lock:
            up = [(u, u.worker, list(u.members)) for u in self._units if u.state is _State.UP and u.worker is not None]
            down = {m.trial_id: self._why_down(u) for u in self._units if u.state is not _State.UP for m in u.members}
        futures = [
            (unit, worker, members, self._fan_out.submit(self._ask, worker, queries)) for unit, worker, members in up
        ]
        answers: dict[int, list[Any]] = {}
        left_out: dict[int, str] = dict(down)
        for unit, worker, members, future in futures:
            try:
                replies = future.result()
            except InferenceWorkerError as e:  # fatal: the process is gone, with every member it served
                left_out.update(dict.fromkeys((m.trial_id for m in members), str(e)))
                logger.warning("%s: %s; its last output:\n%s", worker.name, e, worker.log_tail())
                self._restart_later(unit, str(e), worker)
                continue
            except Exception as e:  # a bug of ours; the worker's state is unknown, so start afresh
                logger.exception("%s: predicting failed", worker.name)
                worker.close()
                internal = f"internal error: {type(e).__name__}"
                left_out.update(dict.fromkeys((m.trial_id for m in members), internal))
                self._restart_later(unit, internal, worker)
                continue
            for member in members:
                reply = replies.get(member.trial_id, InferenceWorkerError("no answer from its worker", fatal=False))
                reason = str(reply) if isinstance(reply, InferenceWorkerError) else self._unfit(reply, len(queries))
                if reason is not None:
                    logger.warning("trial %d left out of a batch: %s", member.trial_id, reason)
                    left_out[member.trial_id] = reason
                    continue
                assert not isinstance(reply, InferenceWorkerError)  # its reason is never None
                answers[member.trial_id] = reply
        # Best first, in the order of the members (which the tie-break of a vote needs).
        answered = tuple(t for t in self._order if t in answers)
        missing = tuple(LeftOut(t, left_out[t]) for t in self._order if t in left_out)
        if not answered:
            return BatchOutcome(None, (), missing)
        return BatchOutcome(ensemble(self.task, [answers[t] for t in answered]), answered, missing)

    def close(self) -> None:
        """Kill every worker (also one being restarted); safe to call twice."""
        self._closed.set()
        with self._lock:
            workers = [u.worker for u in self._units if u.worker is not None]
        for worker in workers:
            worker.close()
        self._fan_out.shutdown(wait=False, cancel_futures=True)

    def _ask(
        self, worker: InferenceWorker | FusedInferenceWorker, queries: list[Any]
    ) -> dict[int, list[Any] | InferenceWorkerError]:
        """Each member's answer from ``worker``, or its error; a fatal error is raised."""
        if isinstance(worker, FusedInferenceWorker):
            return worker.predict(queries, timeout=self.member_timeout_s)
        try:
            return {worker.spec.trial_id: worker.predict(queries, timeout=self.member_timeout_s)}
        except InferenceWorkerError as e:
            if e.fatal:
                raise
            return {worker.spec.trial_id: e}

    # -- loading and restarting -----------------------------------------------------------

    def _load_all(self, units: list[_Unit]) -> None:
        threads = [threading.Thread(target=self._load, args=(unit,), daemon=True) for unit in units]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _load(self, unit: _Unit) -> bool:
        specs = [m.worker for m in unit.members]
        worker: InferenceWorker | FusedInferenceWorker = (
            FusedInferenceWorker(specs, log_path=unit.log_path)
            if unit.fused
            else InferenceWorker(specs[0], log_path=unit.log_path)
        )
        with self._lock:
            unit.state, unit.worker = _State.LOADING, worker
        if self._closed.is_set():
            worker.close()
            return False
        try:
            if isinstance(worker, FusedInferenceWorker):
                apart = worker.start(timeout=self.load_timeout_s)
            else:
                worker.start(timeout=self.load_timeout_s)
                apart = {}
        except InferenceWorkerError as e:
            with self._lock:
                unit.state, unit.reason = _State.DOWN, str(e)
            if not self._closed.is_set():
                logger.warning("%s could not be loaded: %s", worker.name, e)
            return False
        if apart:
            self._serve_apart(unit, apart)
            if not unit.members:
                return False
        with self._lock:
            unit.state, unit.reason = _State.UP, ""
        if self._closed.is_set():  # closed while loading: close() may have missed it
            worker.close()
            return False
        logger.info("%s loaded (pid %s)", worker.name, worker.pid)
        return True

    def _serve_apart(self, unit: _Unit, apart: dict[int, str]) -> None:
        """Give the members a fused worker does not serve a worker each, and load them."""
        with self._lock:
            leaving = [m for m in unit.members if m.trial_id in apart]
            unit.members = [m for m in unit.members if m.trial_id not in apart]
            units = [_Unit([member], self._log_dir) for member in leaving]
            self._units.extend(units)
            if not unit.members:
                self._units.remove(unit)
        for member in leaving:
            logger.info("trial %d is served apart: %s", member.trial_id, apart[member.trial_id])
        self._load_all(units)
        for single in units:
            if single.state is _State.DOWN and not self._closed.is_set():
                self._restart_later(single, single.reason)

    def _restart_later(
        self, unit: _Unit, reason: str, failed: InferenceWorker | FusedInferenceWorker | None = None
    ) -> None:
        with self._lock:
            if failed is not None and unit.worker is not failed:
                return  # already being restarted
            unit.state, unit.reason = _State.DOWN, reason
            unit.restarts += 1
        threading.Thread(target=self._restart, args=(unit,), name="restart", daemon=True).start()

    def _restart(self, unit: _Unit) -> None:
        for attempt in range(10**9):
            pause = _RESTART_PAUSES[min(attempt, len(_RESTART_PAUSES) - 1)]
            if self._closed.wait(pause):
                return
            if self._load(unit):
                logger.info("%s back after a restart", ", ".join(f"trial {m.trial_id}" for m in unit.members))
                return
            if unit not in self._units:  # every member went to a worker of its own
                return

    @staticmethod
    def _why_down(unit: _Unit) -> str:
        if unit.state is _State.LOADING:
            return f"restarting (after: {unit.reason})" if unit.restarts else "still loading"
        return f"restarting (after: {unit.reason})"

    def _unfit(self, predictions: Any, count: int) -> str | None:
        if not isinstance(predictions, list) or len(predictions) != count:
            return f"answered {type(predictions).__name__} for {count} queries"
        for i, answer in enumerate(predictions):
            reason = check_answer(self.task, answer)
            if reason is not None:
                return f"answer to query {i}: {reason}"
        return None


def _groups(members: Sequence[MemberSpec], fuse: bool) -> list[list[MemberSpec]]:
    """The members each worker serves, best first: with ``fuse``, those of one template file, class and
    structure together; a group of one is a member served alone."""
    if not fuse:
        return [[member] for member in members]
    groups: dict[tuple[str, str, str], list[MemberSpec]] = {}
    for member in members:
        groups.setdefault((member.worker.template_checksum, member.worker.class_name, member.structure), []).append(
            member
        )
    return list(groups.values())
