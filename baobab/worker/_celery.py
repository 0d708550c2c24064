"""Cluster mode's executor: trials carried by Celery to ``baobab worker`` processes on any machine.

Delivery, acknowledgement, redelivery and routing are Celery's (a trial goes to the
worker that holds its job's data when it can: :mod:`baobab.worker._affinity`). What Baobab adds is the
trial row's rules (:mod:`baobab.store._db._trial_rows`), which make every delivery of a
trial safe, however many there are:

- A trial is one task message, ``baobab.run_trial(trial_id, token, launch)``, acknowledged
  only when the trial is over (``acks_late``), one at a time per pool process
  (``prefetch_multiplier=1``). A fused group is one message too,
  ``baobab.run_trials(trial_ids, tokens, launch)``, run by one pool process
  (:func:`~baobab.worker.run_trials`: each member claimed with its own token). ``launch``
  (:class:`baobab.store.Launch` as JSON) is the user whose job it is, and the threads and
  memory the job asks each launch to get. A pool process that dies mid-trial (``kill -9``) has its
  message put back at once (``reject_on_worker_lost``); a whole worker machine that
  dies has its messages delivered again after ``BAOBAB_REDELIVERY_S`` (the Redis
  visibility timeout).
- A pool process runs no template code. It hands each unit of work to a worker process
  of its own (:mod:`baobab.worker._process`), the one the local executor runs: a
  template process (:mod:`baobab._contained`: its own PID namespace, its tree ended with
  each trial and with itself), confined to its user's folder under the worker's
  ``BAOBAB_HOME/workers`` (:mod:`baobab._sandbox`), with none of the pool process's
  environment. It serves one user: a unit of another user's job replaces it. It beats
  for its trials, and exits when a trial does not stop past its time limit; a worker
  process that dies mid-trial (a segfault in a template) leaves its trial to the
  heartbeat rules (the job driver hands it out again, up to its attempts).
- A delivery claims the trial through the API. A trial still RUNNING on a worker that
  beats is refused, and the task retries (Celery's ``retry``) after the time by which
  that worker's silence would make it stale; then it takes the trial over. A finished
  trial's delivery is dropped. A group's delivery runs the members it can claim, takes
  over none and never retries for the others: a group delivered again after its worker
  died finds them still RUNNING and leaves them, and once their heartbeat is stale the
  job driver requeues each member alone.
- Workers hold no database credentials: they report through the admin API with the
  trial's token (:class:`~baobab.worker.ApiGateway`), and read the trial's inputs and
  store its parameters through it too: no process of a worker reaches the artifact
  store. A worker process stores a trial's outcome before its task returns, so before
  Celery acknowledges the trial's message: a worker machine that dies at any moment leaves
  no ended trial to run again. With ``BAOBAB_FINISH_WAIT_S`` above 0 the outcome instead
  waits up to that long after the task returns for the claim of the process's next trial,
  which carries it (one request for both, :class:`~baobab.worker.FinishRelay`; what that
  saves, ``bench/results/overhead-celery.md`` measures), and an outcome still waiting when
  its machine dies is lost (the trial runs again).

:class:`CeleryExecutor` is the advisor's side. It knows what runs from the store, not
from its memory, so a new advisor sees the same as the one it replaces: a trial is held
while it is RUNNING with a fresh heartbeat, or PENDING and handed to Celery less than
``BAOBAB_REDELIVERY_S`` ago (it may wait in the queue behind long trials; a message a
dead worker held comes back within that time). Anything else is lost to the job driver,
which hands it out again (a worker gone silent). A broker that comes back after an
outage (a restarted Redis keeps no messages) has every PENDING trial sent again at once.
Sending a trial twice is harmless: the second delivery finds it claimed or finished.
Stop requests and cancellations are written to the trial row, where the worker's next
heartbeat finds them.
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from multiprocessing.connection import wait
from typing import TYPE_CHECKING, Any

from celery import Celery, signals
from celery.utils import worker_direct
from celery.worker.control import inspect_command
from kombu.entity import Queue
from sqlalchemy import Engine, Row, and_, or_, select

from baobab._sandbox import THREAD_VARIABLES, Confinement, protected_paths, template_env
from baobab._settings import ENV_PREFIX
from baobab.exceptions import StoreError
from baobab.store import (
    Event,
    EventChannel,
    EventKind,
    Inventory,
    Launch,
    SubJob,
    TrainJob,
    Trial,
    TrialState,
    end_trial,
    issue_trial_token,
    report_workers,
    request_trial_stop,
    session_scope,
    trial_launch,
)
from baobab.worker._affinity import affinity_view, choose_node
from baobab.worker._inventory import measure_inventory
from baobab.worker._memory import default_memory_mb, machine_memory_mb
from baobab.worker._process import OVERRUN_EXIT
from baobab.worker._runner import TrialOutcome
from baobab.worker._spawn import WorkerProcess
from baobab.worker._telemetry import record_trial

if TYPE_CHECKING:
    from baobab import Settings

__all__ = ["CPU_QUEUE", "GPU_QUEUE", "CeleryExecutor", "job_queue", "make_celery", "run_worker"]

logger = logging.getLogger("baobab.worker")

#: Trials of jobs with GPU_COUNT = 0, and of jobs that ask for GPUs.
CPU_QUEUE, GPU_QUEUE = "baobab.cpu", "baobab.gpu"
_TASK, _GROUP_TASK = "baobab.run_trial", "baobab.run_trials"
#: The remote control command by which the executor asks each worker what it has (slots, cores, memory, GPUs).
INVENTORY_COMMAND = "baobab_inventory"
#: How often the executor asks the workers how many trials they can run at once (and sees the broker live).
_WATCH_S = 5.0
#: How long a worker process let go (another user's trial comes, the pool process ends) may take to send
#: the outcome it holds and exit.
_LET_GO_S = 10.0
#: How long past a trial's time limit a pool process waits for its worker process's own verdict (it beats,
#: asks the trial to stop and gives it a grace period) before it kills it.
_DEADLINE_SLACK_S = 60.0


def job_queue(job_id: int) -> str:
    """The queue of one train job's trials, when each job has workers of its own (the container executors)."""
    return f"baobab.job.{job_id}"


def make_celery(settings: Settings) -> Celery:
    """The Celery app on ``settings.broker_url`` with the delivery rules above."""
    if settings.broker_url is None:
        raise StoreError("the celery executor needs BAOBAB_BROKER_URL")
    app = Celery("baobab", broker=settings.broker_url, set_as_current=False)
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        task_default_queue=CPU_QUEUE,
        worker_prefetch_multiplier=1,
        # each worker also reads a queue of its own: trials of jobs whose data it holds (_affinity)
        worker_direct=True,
        worker_hijack_root_logger=False,
        worker_cancel_long_running_tasks_on_connection_loss=False,
        broker_connection_retry_on_startup=True,
        # Redis: a message unacknowledged this long is delivered again. (On RabbitMQ, raise the server's
        # consumer_timeout above the longest trial instead: a worker holds each message until its trial ends.)
        broker_transport_options={"visibility_timeout": settings.redelivery_s},
    )
    _register_task(app, settings)
    return app


# -- the worker's side -----------------------------------------------------------------------


@dataclass
class _Pool:
    """What :func:`run_worker` tells its pool processes, which are forks of it, and the executor (its inventory)."""

    slots: int = 1
    threads: int = 1
    inventory: Inventory | None = None


@inspect_command(name=INVENTORY_COMMAND)  # type: ignore[untyped-decorator]
def _inventory_command(state: Any, **_: Any) -> dict[str, Any] | None:
    """What this worker has, for the executor's look at the workers (a Celery remote control command)."""
    return None if _POOL.inventory is None else _POOL.inventory.to_json()


_POOL = _Pool()


class _PoolProcess:
    """What one Celery pool process keeps across trials: the worker process that runs them (see the module docstring).

    Args:
        settings: the worker's settings (its home, the API's URL, heartbeat and time limit).
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.worker: WorkerProcess | None = None
        protected = protected_paths(settings.home, settings.database_url, settings.artifacts_url)
        limit = settings.trial_timeout_s
        self._time_limit = float(limit) if limit else None
        memory_mb = settings.trial_memory_mb or default_memory_mb(_POOL.slots)
        self._args = [
            *("--api-url", str(settings.api_url)),
            *("--confinement", Confinement(protected, private=settings.home / "workers").to_json()),
            *("--memory-mb", str(memory_mb)),
            *("--most-memory-mb", str(max(memory_mb, machine_memory_mb()))),
            *("--data-cache-mb", str(settings.data_cache_mb)),
            *("--heartbeat-s", str(settings.heartbeat_s)),
            *("--finish-wait-s", str(settings.finish_wait_s)),
            *(("--time-limit-s", str(self._time_limit)) if self._time_limit is not None else ()),
        ]
        signals.worker_process_shutdown.connect(self._let_go, weak=False)

    def run(self, name: str, trial_ids: list[int], tokens: list[str], launch: Launch) -> list[TrialOutcome]:
        """Run a unit of work in the worker process of ``launch``; one outcome per trial.

        A trial its worker process said nothing of (it died, or was killed past the trial's time
        limit) has an outcome that did not run, and no retry: it is the heartbeat rules'.

        Raises:
            StoreError: the admin API could not be reached, or no worker process could start.
        """
        worker = self._worker_for(launch, name)
        worker.trials, worker.launch, worker.log_offset = list(trial_ids), launch, worker.log_size()
        replies: dict[int, dict[str, Any]] = {}
        deadline = None if self._time_limit is None else time.monotonic() + self._time_limit + _DEADLINE_SLACK_S
        if worker.send(op="run", trials=trial_ids, tokens=tokens, launch=launch.to_json()):
            while len(replies) < len(trial_ids):
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                wait(worker.waitables(), timeout)
                for message in worker.receive():
                    if message.get("op") == "ready":
                        worker.ready = True
                    elif message.get("trial") in trial_ids:
                        replies[int(message["trial"])] = message
                if len(replies) < len(trial_ids) and (worker.gone() or _past(deadline)):
                    break
        worker.trials = []
        if len(replies) < len(trial_ids):
            self._lost(worker, [i for i in trial_ids if i not in replies])
        unreachable = [r["error"] for r in replies.values() if r.get("op") == "failed" and r.get("unreachable")]
        if unreachable:
            raise StoreError(unreachable[0])
        return [_outcome(trial_id, replies.get(trial_id)) for trial_id in trial_ids]

    def _worker_for(self, launch: Launch, name: str) -> WorkerProcess:
        """The worker process of ``launch``: this process's, or a new one (the last served another, or is gone)."""
        worker = self.worker
        if worker is not None and (worker.gone() or worker.launch not in (None, launch)):
            self._let_go()
        if self.worker is None:
            from billiard.process import current_process

            index = getattr(current_process(), "index", 0) or 0
            try:
                self.worker = WorkerProcess(
                    index,
                    env=template_env(threads=_POOL.threads),
                    log_path=self.settings.home / "logs" / f"celery-{index}.log",
                    args=[*self._args, "--name", name],
                )
            except OSError as e:
                raise StoreError(f"cannot start a worker process: {e}") from e
        return self.worker

    def _lost(self, worker: WorkerProcess, trial_ids: list[int]) -> None:
        """The worker process ended, or outlived the trials' time limit, before it said how they went."""
        worker.kill(grace=1.0)
        self.worker = None
        how, tail = worker.how_it_ended(), worker.log_tail()
        if worker.process.returncode == OVERRUN_EXIT:
            logger.warning("trials %s did not stop (past their time limit, or no longer ours): given up", trial_ids)
        elif not worker.ready:
            raise StoreError(f"the worker process {how} while starting; the last lines of its log:\n{tail}")
        else:
            logger.error("the worker process %s while running trials %s; its log ends:\n%s", how, trial_ids, tail)

    def _let_go(self, **_: Any) -> None:
        """Let the worker process go: it sends the outcome it holds and exits (or is killed)."""
        worker, self.worker = self.worker, None
        if worker is not None:
            worker.let_go(_LET_GO_S)


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def _outcome(trial_id: int, reply: dict[str, Any] | None) -> TrialOutcome:
    """A worker process's reply on a trial as :func:`~baobab.worker.run_trials` gives it."""
    if reply is None or reply.get("op") != "done":
        if reply is not None:
            logger.error("trial %d: the worker process could not run it: %s", trial_id, reply.get("error"))
        return TrialOutcome(trial_id, None, ran=False)
    status = None if reply.get("status") is None else TrialState(reply["status"])
    retry = reply.get("retry_after_s")
    return TrialOutcome(
        trial_id,
        status,
        ran=bool(reply.get("ran")),
        retry_after_s=None if retry is None else float(retry),
        phases=dict(reply.get("phases") or {}),
    )


def _register_task(app: Celery, settings: Settings) -> None:
    pool: list[_PoolProcess] = []  # made on the pool process's first trial

    def run(task: Any, trial_ids: list[int], tokens: list[str], launch: dict[str, Any] | int) -> list[TrialOutcome]:
        if settings.api_url is None:
            raise StoreError("baobab worker needs BAOBAB_API_URL: the admin API that trials report to")
        if not pool:
            pool.append(_PoolProcess(settings))
        name = f"{task.request.hostname}:{os.getpid()}"
        try:
            # A bare owner is a message sent before launches had resources: the slot's share.
            given = Launch.from_json(launch) if isinstance(launch, dict) else Launch(int(launch))
            outcomes = pool[0].run(name, trial_ids, tokens, given)
        except StoreError as e:
            # The API stayed unreachable through the gateway's retries: deliver the trials again later
            # (a member this process claimed is its own again: the claim of the same worker is given back).
            logger.warning("trials %s: %s; retrying", trial_ids, e)
            raise task.retry(countdown=settings.heartbeat_s, exc=e) from None
        for outcome in outcomes:
            if outcome.ran:
                record_trial(outcome.status, outcome.phases)
        return outcomes

    def run_trial_task(self: Any, trial_id: int, token: str, launch: dict[str, Any] | int) -> None:
        (outcome,) = run(self, [trial_id], [token], launch)
        if not outcome.ran and outcome.retry_after_s is not None:
            raise self.retry(countdown=outcome.retry_after_s + settings.heartbeat_s)

    def run_trials_task(self: Any, trial_ids: list[int], tokens: list[str], launch: dict[str, Any] | int) -> None:
        run(self, trial_ids, tokens, launch)  # members held elsewhere are left to the job driver (module docstring)

    # Registered by calls, not as decorators: Celery is untyped, and a decorator would untype the functions.
    app.task(name=_TASK, bind=True, max_retries=None)(run_trial_task)
    app.task(name=_GROUP_TASK, bind=True, max_retries=None)(run_trials_task)


def run_worker(
    settings: Settings,
    *,
    slots: int | None = None,
    gpus: Sequence[str] = (),
    queues: Sequence[str] = (),
    name: str | None = None,
) -> None:
    """Run a Celery worker in this process until it is told to stop (``baobab worker``).

    Args:
        slots: trials at once on CPUs (pool processes); ``settings.cpu_slots`` by default.
        gpus: GPU ids; one pool process per GPU, each seeing only its own
            (``CUDA_VISIBLE_DEVICES``), taking trials from the GPU queue.
        queues: the queues to consume; by default the GPU queue with ``gpus``, else the CPU queue.
        name: the worker's node name; ``baobab-<pid>@<host>`` by default.
    """
    if gpus and slots is not None:
        raise ValueError("give --gpus or --slots, not both: a GPU worker runs one trial per GPU")
    concurrency = len(gpus) if gpus else (slots or settings.cpu_slots)
    consumed = list(queues) or [GPU_QUEUE if gpus else CPU_QUEUE]
    if gpus:
        _pin_gpus(list(gpus))
    threads = max(1, (os.cpu_count() or 1) // concurrency)
    for variable in THREAD_VARIABLES:
        os.environ.setdefault(variable, str(threads))
    _POOL.slots, _POOL.threads = concurrency, threads
    _POOL.inventory = measure_inventory(concurrency, [int(g) if g.isdigit() else i for i, g in enumerate(gpus)])
    # The pool processes are forks of this one: none of the platform's variables go with them (the
    # settings are read already; the app holds the broker). Their worker processes get none of theirs.
    for variable in [name for name in os.environ if name.startswith(ENV_PREFIX)]:
        del os.environ[variable]
    app = make_celery(settings)
    hostname = name or f"baobab-{os.getpid()}@{socket.gethostname()}"
    app.worker_main(
        [
            "worker",
            f"--concurrency={concurrency}",
            "--pool=prefork",
            f"--queues={','.join(consumed)}",
            f"--hostname={hostname}",
            "--loglevel=INFO",
            "--without-gossip",
            "--without-mingle",
        ]
    )


def _pin_gpus(gpus: list[str]) -> None:
    """Each pool process sees one GPU: the one of its pool index (stable when a process is replaced)."""

    def _pin(**_: Any) -> None:
        from billiard.process import current_process

        index = getattr(current_process(), "index", 0) or 0
        os.environ["CUDA_VISIBLE_DEVICES"] = gpus[index % len(gpus)]
        logger.info("pool process %d pinned to GPU %s", os.getpid(), os.environ["CUDA_VISIBLE_DEVICES"])

    signals.worker_process_init.connect(_pin, weak=False)


# -- the advisor's side ----------------------------------------------------------------------


def _inventories(replies: list[dict[str, Any]]) -> dict[str, Inventory]:
    """The workers' answers to :data:`INVENTORY_COMMAND` (``[{node: inventory}, ...]``) by node; one that answers
    nothing readable is left out, as a worker that did not answer is."""
    found: dict[str, Inventory] = {}
    for reply in replies:
        for node, answer in reply.items():
            try:
                found[node] = Inventory.from_json(answer)
            except (ValueError, AttributeError) as e:
                logger.warning("worker %s: %s", node, e)
    return found


def _now() -> datetime:
    return datetime.now(UTC)


class CeleryExecutor:
    """Sends trials to Celery workers; a :class:`baobab.advisor.Executor` (see the module docstring).

    Args:
        settings: the broker, the secret key (trial tokens), heartbeat and redelivery times.
        events: where ``TRIAL_FINISHED`` is published for a trial cancelled here.
        engine: the metadata store, read for what runs and written for stops and cancels.
        slots: trials at once over every job; by default what the workers report
            (their pool sizes, asked every few seconds).
        job_queues: send each job's trials to :func:`job_queue` instead of the shared
            CPU and GPU queues: the docker executor starts workers per job, and a
            container removed with its job must hold no other job's trial.
    """

    #: One trial queued per slot besides the running one: a worker takes its next trial as it acks the last.
    queue_ahead = 1

    def __init__(
        self,
        settings: Settings,
        events: EventChannel,
        *,
        engine: Engine,
        slots: int | None = None,
        job_queues: bool = False,
    ) -> None:
        self.settings = settings
        self.job_queues = job_queues
        self.events = events
        self.engine = engine
        self.app = make_celery(settings)
        self._fixed_slots = slots
        self._slots = 0
        #: live worker machines and their slots, as the last ``inspect`` saw them
        self._nodes: dict[str, int] = {}
        #: the cores of a slot on the live machine with the fewest (None: no worker seen yet)
        self.slot_threads: int | None = None
        #: trials sent to a worker's direct queue and not yet seen claimed -> that worker
        self._routed: dict[int, str] = {}
        #: trials to send to the shared queue whatever holds their data (their worker went)
        self._shared_only: set[int] = set()
        self._outbox: queue.SimpleQueue[list[int] | None] = queue.SimpleQueue()  # units of work
        self._unsent: set[int] = set()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._sender = threading.Thread(target=self._send_loop, name="baobab-celery-send", daemon=True)
        self._sender.start()
        self._watcher = threading.Thread(target=self._watch_loop, name="baobab-celery-watch", daemon=True)
        self._watcher.start()

    @property
    def slots(self) -> int:
        return self._fixed_slots if self._fixed_slots is not None else self._slots

    def submit(self, trials: int | Sequence[int]) -> None:
        # The driver wrote ``submitted_at`` with the rows; publishing happens in the sender thread.
        unit = [trials] if isinstance(trials, int) else list(trials)
        with self._lock:
            self._unsent.update(unit)
        self._outbox.put(unit)

    def request_stop(self, trial_id: int, reason: str) -> None:
        with session_scope(self.engine) as session:
            request_trial_stop(session, trial_id, reason)

    def cancel(self, trial_id: int, reason: str) -> None:
        with session_scope(self.engine) as session:
            changed = end_trial(session, trial_id, TrialState.CANCELLED, now=_now(), error=reason)
        if changed:
            self.events.publish(Event(EventKind.TRIAL_FINISHED, trial_id))

    def active(self) -> set[int]:
        now = _now()
        beating = now - timedelta(seconds=self.settings.heartbeat_timeout_s)
        queued = now - timedelta(seconds=self.settings.redelivery_s)
        with session_scope(self.engine) as session:
            held = set(
                session.scalars(
                    select(Trial.id).where(
                        or_(
                            and_(Trial.status == TrialState.PENDING, Trial.submitted_at >= queued),
                            and_(Trial.status == TrialState.RUNNING, Trial.heartbeat_at >= beating),
                        )
                    )
                )
            )
        with self._lock:
            return held | self._unsent

    def destination(self, trial_id: int) -> tuple[str | Queue, str | None]:
        """Where to send a trial, and the worker machine when it is one's direct queue.

        With ``job_queues``, the job's own queue. Otherwise the direct queue of a live worker
        that holds the job's data and has room (:mod:`baobab.worker._affinity`), else the
        shared queue: GPU for jobs that ask for GPUs, CPU for the others.
        """
        beating = _now() - timedelta(seconds=self.settings.heartbeat_timeout_s)
        with session_scope(self.engine) as session:
            row = session.execute(
                select(TrainJob.id, TrainJob.budget)
                .join(SubJob, SubJob.train_job_id == TrainJob.id)
                .join(Trial)
                .where(Trial.id == trial_id)
            ).first()
            if row is None:  # gone with its job: any queue, its delivery finds nothing to claim
                return CPU_QUEUE, None
            job_id, budget = row
            if self.job_queues:
                return job_queue(job_id), None
            shared = GPU_QUEUE if budget and budget.get("GPU_COUNT", 0) else CPU_QUEUE
            with self._lock:
                if trial_id in self._shared_only or not self._nodes:
                    return shared, None
                nodes, routed = dict(self._nodes), dict(self._routed)
            holders, load, home = affinity_view(session, job_id, beating, routed)
        node = choose_node(holders, nodes, load, queue_ahead=self.queue_ahead, home=home)
        return (worker_direct(node), node) if node is not None else (shared, None)

    def close(self) -> None:
        self._closed.set()
        self._outbox.put(None)
        self._sender.join(timeout=5)
        self._watcher.join(timeout=5)

    def _send_loop(self) -> None:
        """Publishes submitted units of work; while the broker is down, keeps them and tries again."""
        while not self._closed.is_set():
            unit = self._outbox.get()
            if unit is None:
                return
            tokens = [issue_trial_token(self.settings.signing_key(), trial_id) for trial_id in unit]
            delay = 0.1
            while not self._closed.is_set():
                try:
                    launch = trial_launch(self.engine, unit[0]).to_json()  # the members are trials of one job
                    task, args = (
                        (_TASK, [unit[0], tokens[0], launch])
                        if len(unit) == 1
                        else (_GROUP_TASK, [unit, tokens, launch])
                    )
                    queue_, node = self.destination(unit[0])
                    self.app.send_task(task, args=args, queue=queue_, retry=False)
                    with self._lock:
                        self._shared_only.difference_update(unit)
                        if node is not None:
                            self._routed.update(dict.fromkeys(unit, node))
                    break
                except Exception as e:
                    logger.warning("%s: cannot reach the broker (%s); trying again in %.1f s", _named(unit), e, delay)
                    self._closed.wait(delay)
                    delay = min(5.0, delay * 2)
            with self._lock:
                self._unsent.difference_update(unit)

    def _watch_loop(self) -> None:
        """Counts the workers' slots and keeps what each has in the store; after a broker outage, sends every
        PENDING trial again."""
        lost = False
        while not self._closed.is_set():
            try:
                replies = self.app.control.broadcast(INVENTORY_COMMAND, reply=True, timeout=1.0) or []
            except Exception as e:
                if not lost:
                    logger.warning("the broker is unreachable (%s); PENDING trials are sent again once it is back", e)
                lost = True
            else:
                inventories = _inventories(replies)
                self._report(inventories)
                nodes = {name: inventory.slots for name, inventory in inventories.items()}
                shares = [max(1, i.cores // max(1, i.slots)) for i in inventories.values()]
                self.slot_threads = min(shares) if shares else self.slot_threads
                if self._fixed_slots is None:
                    self._slots = sum(nodes.values())
                with self._lock:
                    self._nodes = nodes
                self._follow_routed()
                if lost:
                    lost = False
                    self._resend_pending()
            self._closed.wait(_WATCH_S if self._slots and not lost else _WATCH_S / 5)  # look sooner while in doubt

    def _report(self, inventories: dict[str, Inventory]) -> None:
        """Keep what the live workers have where the admin API reads it (a failed write waits for the next look)."""
        try:
            with session_scope(self.engine) as session:
                report_workers(session, inventories, _now())
        except StoreError as e:
            logger.warning("cannot keep the workers' inventories: %s", e)

    def _follow_routed(self) -> None:
        """Forgets routed trials that were claimed; sends those of a worker that is gone to the shared queue."""
        with self._lock:
            routed = dict(self._routed)
        if not routed:
            return
        try:
            with session_scope(self.engine) as session:
                rows = session.execute(
                    select(Trial.id, Trial.fused_group).where(Trial.id.in_(routed), Trial.status == TrialState.PENDING)
                ).all()
        except StoreError as e:
            logger.warning("cannot read the routed trials: %s", e)
            return
        pending = {row.id for row in rows}
        with self._lock:
            orphans = [row for row in rows if routed[row.id] not in self._nodes]
            for trial_id in routed.keys() - pending:
                self._routed.pop(trial_id, None)
            for row in orphans:
                del self._routed[row.id]
                self._shared_only.add(row.id)
                self._unsent.add(row.id)
        for unit in _units(orphans):
            logger.warning(
                "%s waited for worker %s, which is gone: sending it to any worker", _named(unit), routed[unit[0]]
            )
            self._outbox.put(unit)

    def _resend_pending(self) -> None:
        try:
            with session_scope(self.engine) as session:
                pending = session.execute(
                    select(Trial.id, Trial.fused_group).where(Trial.status == TrialState.PENDING)
                ).all()
        except StoreError as e:
            logger.warning("cannot read the PENDING trials to send them again: %s", e)
            return
        logger.warning("the broker is back: sending %d PENDING trials again", len(pending))
        for unit in _units(pending):
            with self._lock:
                self._unsent.update(unit)
            self._outbox.put(unit)


def _named(unit: Sequence[int]) -> str:
    return f"trial {unit[0]}" if len(unit) == 1 else f"fused group {list(unit)}"


def _units(rows: Sequence[Row[int, int | None]]) -> list[list[int]]:
    """Trial rows (``id``, ``fused_group``) as units of work: the members of a group together, in id order."""
    units: dict[tuple[str, int], list[int]] = {}
    for row in sorted(rows, key=lambda r: r.id):
        key = ("trial", row.id) if row.fused_group is None else ("group", row.fused_group)
        units.setdefault(key, []).append(row.id)
    return list(units.values())
