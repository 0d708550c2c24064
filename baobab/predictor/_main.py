"""The predictor process: ``python -m baobab.predictor <inference_job_id> [options]``.

Settings (database, artifacts, home) come from the ``BAOBAB_*`` environment. The
process loads every member of the job's versions into inference workers, serves HTTP
with waitress on ``--host`` and a port of its own, and once it answers prints exactly
one line on stdout, ``{"url": "http://HOST:PORT"}``; everything else it says goes to
stderr. Then it follows the job's versions (:mod:`baobab.predictor._rollout`). It
exits with status 1 and a one-line reason on stderr when the job cannot be served (no
such job, a finished job, a version with no member loadable), and with 0 on SIGTERM or
SIGINT, or, with ``--exit-with-parent``, when its stdin ends (the supervisor is gone).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

__all__ = ["PredictorOptions", "main"]

logger = logging.getLogger("baobab.predictor")


@dataclass(frozen=True)
class PredictorOptions:
    """How a predictor batches and how long it waits; each is a command-line option.

    Attributes:
        batch_window_s: how long an idle predictor waits for more queries to batch. None by default:
            a busy predictor's next batch fills while it works, so waiting only adds latency when
            it is idle (5 ms cost 5 ms of p50 at one client in ``bench/serving.py``, and nothing
            under load).
        max_batch_size: the most queries sent to a member in one call.
        member_timeout_s: how long a member has to answer one batch before it is left
            out and restarted.
        load_timeout_s: how long a member has to load.
        threads: HTTP worker threads (each waits for its request's batch, so this
            bounds how many requests are batched together).
        request_log_flush_s: the longest a sampled request waits in memory before it is
            written to the job's request log (when the job logs requests).
        fuse: serve members of one template and one structure stacked, in one worker
            (:class:`~baobab.worker.FusedInferenceWorker`); off, each member has its own.
        versions_poll_s: how often the store is asked whether the job's versions changed.
        stats_interval_s: how often ``GET /stats`` gets a point (:mod:`._history`).
        scale_target, scale_up_after_s, scale_down_after_s: when a member set gets one
            worker replica more or one fewer, between the settings ``predictor_min_replicas`` and
            ``predictor_max_replicas`` (:class:`~baobab.predictor._scaling.ScalingPolicy`).
    """

    batch_window_s: float = 0.0
    max_batch_size: int = 64
    member_timeout_s: float = 30.0
    load_timeout_s: float = 180.0
    threads: int = 32
    request_log_flush_s: float = 10.0
    fuse: bool = True
    versions_poll_s: float = 1.0
    stats_interval_s: float = 10.0
    scale_target: float = 4.0
    scale_up_after_s: float = 2.0
    scale_down_after_s: float = 30.0

    def to_args(self) -> list[str]:
        """The command-line options that give these values."""
        return [
            f"--batch-window-ms={self.batch_window_s * 1000:g}",
            f"--max-batch-size={self.max_batch_size}",
            f"--member-timeout-s={self.member_timeout_s:g}",
            f"--load-timeout-s={self.load_timeout_s:g}",
            f"--threads={self.threads}",
            f"--request-log-flush-s={self.request_log_flush_s:g}",
            *([] if self.fuse else ["--no-fuse"]),
            f"--versions-poll-s={self.versions_poll_s:g}",
            f"--stats-interval-s={self.stats_interval_s:g}",
            f"--scale-target={self.scale_target:g}",
            f"--scale-up-after-s={self.scale_up_after_s:g}",
            f"--scale-down-after-s={self.scale_down_after_s:g}",
        ]


def _parser() -> argparse.ArgumentParser:
    defaults = PredictorOptions()
    parser = argparse.ArgumentParser(prog="python -m baobab.predictor", description=__doc__.splitlines()[0])
    parser.add_argument("job_id", type=int, help="the inference job to serve")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: a free one)")
    parser.add_argument(
        "--advertise", help="host name put in the job's URL (default: the machine's name on every interface)"
    )
    parser.add_argument("--batch-window-ms", type=float, default=defaults.batch_window_s * 1000)
    parser.add_argument("--max-batch-size", type=int, default=defaults.max_batch_size)
    parser.add_argument("--member-timeout-s", type=float, default=defaults.member_timeout_s)
    parser.add_argument("--load-timeout-s", type=float, default=defaults.load_timeout_s)
    parser.add_argument("--threads", type=int, default=defaults.threads)
    parser.add_argument("--request-log-flush-s", type=float, default=defaults.request_log_flush_s)
    parser.add_argument(
        "--no-fuse",
        dest="fuse",
        action="store_false",
        help="give every member a worker of its own, also those that could answer stacked in one",
    )
    parser.add_argument("--versions-poll-s", type=float, default=defaults.versions_poll_s)
    parser.add_argument("--stats-interval-s", type=float, default=defaults.stats_interval_s)
    parser.add_argument(
        "--scale-target",
        type=float,
        default=defaults.scale_target,
        help="requests waiting or being answered per worker replica that autoscaling aims at",
    )
    parser.add_argument("--scale-up-after-s", type=float, default=defaults.scale_up_after_s)
    parser.add_argument("--scale-down-after-s", type=float, default=defaults.scale_down_after_s)
    parser.add_argument("--exit-with-parent", action="store_true", help="exit when stdin ends")
    return parser


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _wait_until_answering(url: str, deadline_s: float = 30.0) -> None:
    deadline = time.monotonic() + deadline_s
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy for our own socket
    while True:
        try:
            with opener.open(f"{url}/health", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.01)


def _watch_stdin(stop: threading.Event) -> None:
    for _ in sys.stdin:
        pass
    stop.set()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    options = PredictorOptions(
        batch_window_s=args.batch_window_ms / 1000,
        max_batch_size=args.max_batch_size,
        member_timeout_s=args.member_timeout_s,
        load_timeout_s=args.load_timeout_s,
        threads=args.threads,
        request_log_flush_s=args.request_log_flush_s,
        fuse=args.fuse,
        versions_poll_s=args.versions_poll_s,
        stats_interval_s=args.stats_interval_s,
        scale_target=args.scale_target,
        scale_up_after_s=args.scale_up_after_s,
        scale_down_after_s=args.scale_down_after_s,
    )
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format=f"%(asctime)s predictor-{args.job_id} %(levelname)s %(message)s"
    )
    # The URL line keeps the original stdout; anything else printed (by a library) goes to stderr.
    url_out: IO[str] = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    stop = threading.Event()
    serving = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()
        if not serving.is_set():  # still loading: give up at once, whatever the main thread waits for
            raise _Interrupted(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if args.exit_with_parent:
        threading.Thread(target=_watch_stdin, args=(stop,), name="stdin", daemon=True).start()
    # Closed in order: the request log first (its last part is written before the supervisor's
    # SIGTERM grace runs out), then what holds worker processes.
    closing: list[Any] = []
    try:
        _serve(args, options, url_out, closing, stop)
        serving.set()  # from now on a signal ends the loop below
    except _Interrupted:
        logger.info("interrupted while starting")
        for part in closing:
            part.close()
        return 0
    except _StartFailed as e:
        for part in closing:
            part.close()
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 1
    while not stop.wait(0.5):
        pass
    logger.info("stopping")
    for part in closing:
        part.close()
    # The HTTP and fan-out threads may be waiting on members that are gone: do not wait for them.
    sys.stderr.flush()
    os._exit(0)


class _Interrupted(BaseException):
    """SIGTERM or SIGINT before the predictor serves."""


class _StartFailed(Exception):
    """The job cannot be served; the message says why."""


def _serve(
    args: argparse.Namespace, options: PredictorOptions, url_out: IO[str], closing: list[Any], stop: threading.Event
) -> None:
    """Load the versions, start the HTTP server, print the URL line, follow the versions until ``stop``.

    ``closing`` gets what to close on the way out, in order: the request log, then what holds
    worker processes.

    Raises:
        _StartFailed: the job cannot be served (no such job, a version with no member loadable, no HTTP).
    """
    # Imported here: the settings, the store and Flask take a moment, and --help should not.
    from baobab import Settings
    from baobab.exceptions import BaobabError
    from baobab.predictor._history import History
    from baobab.predictor._job import RevisionStore, load_job
    from baobab.predictor._request_log import RequestLog
    from baobab.predictor._rollout import BackendStarter, Rollout
    from baobab.predictor._router import VersionRouter
    from baobab.predictor._scaling import Autoscaler, ScalingPolicy
    from baobab.predictor._server import create_app, create_server
    from baobab.predictor._telemetry import BATCH_SIZE, REQUEST_SECONDS, REQUESTS
    from baobab.store import ArtifactStore

    try:
        history = History(REQUESTS, REQUEST_SECONDS, BATCH_SIZE, interval_s=options.stats_interval_s)
    except ValueError as e:
        raise _StartFailed(f"--stats-interval-s: {e}") from None
    try:
        settings = Settings.from_env()
        policy = ScalingPolicy(
            settings.predictor_min_replicas,
            settings.predictor_max_replicas,
            target=options.scale_target,
            up_after_s=options.scale_up_after_s,
            down_after_s=options.scale_down_after_s,
        )
    except (BaobabError, ValueError) as e:
        raise _StartFailed(str(e)) from None
    try:
        job = load_job(settings, args.job_id)
        backends = BackendStarter(
            job.task,
            log_dir=settings.home / "logs" / f"inference-{job.id}",
            member_timeout_s=options.member_timeout_s,
            load_timeout_s=options.load_timeout_s,
            window_s=options.batch_window_s,
            max_batch_size=options.max_batch_size,
            fuse=options.fuse,
            replicas=policy.min_replicas,
        )
        closing.append(backends)
        store = RevisionStore(settings, job)
        closing.append(store)
        router = VersionRouter()
        rollout = Rollout(job, router, store, backends, poll_s=options.versions_poll_s)
        rollout.start()
    except BaobabError as e:
        raise _StartFailed(str(e)) from None
    request_log = None
    if job.request_log_rate > 0:
        request_log = RequestLog(
            ArtifactStore(settings.artifacts_url), job.id, job.request_log_rate, flush_s=options.request_log_flush_s
        )
        closing.insert(0, request_log)
    history.start()
    closing.append(history)
    app = create_app(job, router, request_log, history, max_body_mb=settings.max_predict_mb)
    try:
        server = create_server(
            app,
            max_body_mb=settings.max_predict_mb,
            host=args.host,
            port=args.port,
            threads=options.threads,
            ident="baobab-predictor",
            clear_untrusted_proxy_headers=True,
        )
    except OSError as e:
        raise _StartFailed(f"cannot listen on {args.host!r}: {e}") from None
    port = server.effective_port
    # Listening on every interface: clients are told the machine's name, the self-check uses loopback.
    wildcard = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}
    url = _url(args.advertise or (socket.gethostname() if args.host in wildcard else args.host), port)
    threading.Thread(target=server.run, name="http", daemon=True).start()
    try:
        _wait_until_answering(_url(wildcard.get(args.host, args.host), port))
    except OSError as e:
        raise _StartFailed(f"the HTTP server at {url} does not answer: {e}") from None
    shown = ", ".join(f"{v.name} ({len(v.backend.members)} members)" for v in router.versions)
    logger.info("serving inference job %d (revision %d: %s) at %s", job.id, router.revision, shown, url)
    url_out.write(json.dumps({"url": url}) + "\n")
    url_out.flush()
    threading.Thread(target=rollout.run, args=(stop,), name="rollout", daemon=True).start()
    if policy.scales:
        autoscaler = Autoscaler(router, backends, policy)
        threading.Thread(target=autoscaler.run, args=(stop,), name="autoscaler", daemon=True).start()
