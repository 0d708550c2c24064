"""Inference workers: one process per served trial, answering predict batches over a pipe.

A template is user code: it can crash the interpreter, leak, or loop forever inside
``predict``. So each member of an inference job lives in a process of its own
(``python -m baobab.worker._inference``), and the parent (the predictor) decides what
a crash or a hang means; this module only reports them.

The child loads the model the way a trial worker and the dev runner's reload check do:
the template class through the worker's caches (:mod:`baobab.worker._cache`: the
file is fetched once per checksum into ``settings.home/"cache"``, or read in place on
a local artifact store), an instance built from the trial's knobs, then
``load_parameters(params_from_bytes(...))``, each call into the template through
:func:`baobab.worker._trial_process.call_template`. Then it answers batches.

Protocol, JSON lines:

- parent → child (its stdin): first the :class:`InferenceSpec`, then one
  ``{"queries": [...]}`` per batch. The end of stdin means the parent is done or gone:
  the child exits.
- child → parent (the stdout it was started with; what the template prints goes to
  stderr, the worker's log file): ``{"event": "ready"}`` or ``{"event": "failed",
  "error": ...}`` once loaded, then for each batch ``{"predictions": [...]}`` (one
  JSON value per query) or ``{"error": "predict() raised ..."}``.

A group of members of one structure can share a process instead and answer in one
stacked forward pass: :mod:`baobab.worker._fused_inference`, which speaks the same
protocol with a group for a spec and an answer per member, on the same process handling
(:class:`InferenceProcess`) and the same child helpers.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

from baobab._contained import TemplateProcess, how_it_ended, with_package_path
from baobab._sandbox import THREAD_VARIABLES, Confinement, confine, template_env
from baobab.exceptions import BaobabError

__all__ = ["InferenceProcess", "InferenceSpec", "InferenceWorker", "InferenceWorkerError", "main"]

#: How many lines of a worker's log a crash report quotes.
_LOG_TAIL_LINES = 10
#: The exit status of a worker whose parent went away.
_ORPHANED = 70
T = TypeVar("T")


class InferenceWorkerError(BaobabError):
    """A worker could not answer.

    ``fatal`` says whether the process is gone (it crashed, hung and was killed, or
    broke the protocol) and has to be restarted; a template that merely raised in
    ``predict`` leaves a healthy process behind (``fatal`` False).
    """

    def __init__(self, message: str, *, fatal: bool) -> None:
        self.fatal = fatal
        super().__init__(message)


@dataclass(frozen=True)
class InferenceSpec:
    """What a worker loads: one trial's template, knobs and parameters.

    Attributes:
        trial_id: for messages.
        artifacts_url: the artifact store holding the template file and the parameters.
        template_key: the template file's key (``ModelTemplate.artifact_path``).
        template_checksum: its SHA-256 (``ModelTemplate.checksum``), the cache key.
        class_name: the template class in the file.
        knobs: every knob value the trial trained with (``Trial.knobs``).
        params_key: the key of the trial's parameters (``Trial.params_path``).
        cache_dir: where template files of a remote artifact store are cached by checksum.
        confinement: the :class:`~baobab._sandbox.Confinement` (JSON) the process takes
            on once it has read the template and the parameters, before it runs either.
    """

    trial_id: int
    artifacts_url: str
    template_key: str
    template_checksum: str
    class_name: str
    knobs: dict[str, Any]
    params_key: str
    cache_dir: str
    confinement: str

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> InferenceSpec:
        return cls(**json.loads(text))


# -- the parent -------------------------------------------------------------------------


class InferenceProcess:
    """The parent's handle on one inference process, whatever it serves: the pipe, the
    time limits, the kill.

    Not meant for concurrent requests; :meth:`close` may come from any thread and makes a
    waiting call fail. A fatal :class:`InferenceWorkerError` leaves the process killed:
    start a new handle to restart.

    Args:
        name: who the process serves, for messages (``trial 7``).
        module: the child's module, run as ``python -m <module>``.
        confinement: the :class:`~baobab._sandbox.Confinement` (JSON) of what it serves.
        log_path: receives what the process prints (the template's output, tracebacks).
    """

    def __init__(self, name: str, module: str, confinement: str, *, log_path: str | os.PathLike[str]) -> None:
        self.name = name
        self.log_path = Path(log_path)
        self._module = module
        self._confinement = confinement
        self._process: TemplateProcess | None = None
        self._messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._reader: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def alive(self) -> bool:
        return self._process is not None and not self._closed and self._process.poll() is None

    def _launch(self, spec_line: str, timeout: float | None) -> dict[str, Any]:
        """Start the process, send it ``spec_line`` and return its ready message.

        Raises:
            InferenceWorkerError: (fatal) loading failed (the template's reason), took
                longer than ``timeout`` seconds, or the process died; it is killed.
        """
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        private = Confinement.from_json(self._confinement).private
        # One thread per pool: a predictor runs one process per member (or fused group) on a shared
        # machine; letting each spread over every core makes them fight (measured in bench/serving_fused.py:
        # a fused worker on two threads beside its predictor ran slower than on one).
        env = with_package_path(template_env(private, threads=1, PYTHONUNBUFFERED="1"))
        with self.log_path.open("ab") as log:
            with self._lock:
                if self._closed:
                    raise InferenceWorkerError(f"{self.name}: the worker was closed", fatal=True)
                self._process = TemplateProcess(
                    [sys.executable, "-m", self._module],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    env=env,
                )
        self._reader = threading.Thread(target=self._pump, name=f"inference {self.name}", daemon=True)
        self._reader.start()
        message = self._request(spec_line, timeout, "loading the model")
        if message.get("event") != "ready":
            self.close()
            error = message.get("error") or f"unexpected message {message!r}"
            raise InferenceWorkerError(f"{self.name}: {error}", fatal=True)
        return message

    def _request(self, line: str, timeout: float | None, doing: str) -> dict[str, Any]:
        """Send ``line`` and return the answer.

        Raises:
            InferenceWorkerError: (fatal) the process crashed, closed its pipe or did not
                answer within ``timeout`` seconds; it is killed.
        """
        try:
            self._send(line)
            return self._receive(timeout, doing)
        except InferenceWorkerError:
            self.close()
            raise

    def _unexpected(self, message: dict[str, Any]) -> InferenceWorkerError:
        """The error for an answer that breaks the protocol; the process is killed."""
        self.close()
        return InferenceWorkerError(f"the inference process sent an unexpected message {message!r}", fatal=True)

    def close(self) -> None:
        """Kill the process (and whatever it started) and reap it; safe to call twice, from any thread."""
        with self._lock:
            self._closed = True
            process = self._process
        if process is None:
            return
        process.end()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join()

    def _pump(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        try:
            for line in self._process.stdout:
                try:
                    self._messages.put(json.loads(line))
                except ValueError:
                    continue  # not a message: only the child writes to this pipe
        except (OSError, ValueError):  # closed under us by close()
            pass
        self._messages.put(None)

    def _send(self, line: str) -> None:
        assert self._process is not None and self._process.stdin is not None
        try:
            self._process.stdin.write(line.encode() + b"\n")
            self._process.stdin.flush()
        except (OSError, ValueError):
            raise InferenceWorkerError(self._gone_message("before it took the request"), fatal=True) from None

    def _receive(self, timeout: float | None, doing: str) -> dict[str, Any]:
        try:
            message = self._messages.get(timeout=timeout)
        except queue.Empty:
            self.close()
            raise InferenceWorkerError(
                f"no answer within {timeout:g} s while {doing}; the inference process was killed", fatal=True
            ) from None
        if message is None:
            self._messages.put(None)  # every later call sees the end too
            raise InferenceWorkerError(self._gone_message(f"while {doing}"), fatal=True)
        return message

    def _gone_message(self, when: str) -> str:
        assert self._process is not None
        if self._closed and self._process.returncode is None:
            return f"the inference process was stopped {when}"
        try:
            returncode = self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return f"the inference process closed its pipe {when}"
        return f"the inference process {how_it_ended(returncode)} {when}"

    def log_tail(self) -> str:
        """The last lines the worker printed, for a crash report in the predictor's log."""
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-_LOG_TAIL_LINES:])


class InferenceWorker(InferenceProcess):
    """The parent's handle on one member's worker process.

    Call :meth:`start` once, then :meth:`predict` one batch at a time (see
    :class:`InferenceProcess` for closing and failures).

    Args:
        spec: what to load.
        log_path: receives what the worker prints (the template's output, tracebacks).
    """

    def __init__(self, spec: InferenceSpec, *, log_path: str | os.PathLike[str]) -> None:
        super().__init__(f"trial {spec.trial_id}", "baobab.worker._inference", spec.confinement, log_path=log_path)
        self.spec = spec

    def start(self, *, timeout: float | None = None) -> None:
        """Start the process and wait until the model is loaded.

        Raises:
            InferenceWorkerError: (fatal) loading failed (the template's reason), took
                longer than ``timeout`` seconds, or the process died; it is killed.
        """
        self._launch(self.spec.to_json(), timeout)

    def predict(self, queries: Sequence[Any], *, timeout: float | None = None) -> list[Any]:
        """One prediction per query, as the template returned them (JSON values).

        Raises:
            InferenceWorkerError: ``predict`` raised or returned something unusable
                (not fatal), or the process crashed, broke the protocol or did not
                answer within ``timeout`` seconds (fatal: it is killed).
        """
        message = self._request(json.dumps({"queries": list(queries)}), timeout, "predicting")
        if "predictions" in message:
            return message["predictions"]
        if "error" in message:
            raise InferenceWorkerError(message["error"], fatal=False)
        raise self._unexpected(message)


# -- the child --------------------------------------------------------------------------
# The child imports the model and store packages (and so NumPy) only in main(), after it
# has pinned the thread pools; the parent, which imports this module, never needs them.
# It reads the template file and the parameters, then confines itself (see
# baobab._sandbox) before the template's code runs: that code never sees the database,
# the secret key or other users' artifacts.


def fetch_template(spec: InferenceSpec) -> Path:
    """The template file of ``spec``, read before any template code runs.

    Raises:
        TrialFailed: it cannot be read.
    """
    from baobab.exceptions import ArtifactError
    from baobab.store import ArtifactStore
    from baobab.worker._cache import ArtifactCache
    from baobab.worker._trial_process import TrialFailed

    try:
        cache = ArtifactCache(Path(spec.cache_dir))
        return cache.path(ArtifactStore(spec.artifacts_url), spec.template_key, spec.template_checksum, suffix=".py")
    except ArtifactError as e:
        raise TrialFailed(f"cannot fetch the template: {e}") from None


def fetch_params(spec: InferenceSpec) -> bytes:
    """The stored parameters of ``spec``, read before any template code runs.

    Raises:
        TrialFailed: there are none, or they cannot be read.
    """
    from baobab.exceptions import ArtifactError
    from baobab.store import ArtifactStore
    from baobab.worker._trial_process import TrialFailed

    if not spec.params_key:
        raise TrialFailed(f"trial {spec.trial_id} has no stored parameters")
    try:
        return ArtifactStore(spec.artifacts_url).get_bytes(spec.params_key)
    except (ArtifactError, OSError) as e:
        raise TrialFailed(f"cannot read the parameters of trial {spec.trial_id}: {e}") from None


def confine_to(confinement: str, template_file: Path, parent: int) -> None:
    """Take on the confinement (reading ``template_file`` still allowed), and exit when ``parent`` does.

    Call it before any other thread starts: the confinement then holds for the whole process.
    """
    rules = Confinement.from_json(confinement)
    confine(Confinement(rules.protected, rules.private, (template_file,)))
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()


def load_class(spec: InferenceSpec, template_file: Path) -> type:
    """The template class of ``spec``, imported once per process.

    Raises:
        TrialFailed: the template cannot be imported or breaks the template API.
    """
    from baobab.exceptions import TemplateError
    from baobab.model import check_template, load_template
    from baobab.worker._trial_process import TrialFailed

    try:
        cls = load_template(template_file, spec.class_name)
        check_template(cls)
    except TemplateError as e:
        raise TrialFailed.from_text(f"cannot load the template: {e}") from None
    return cls


def load_model(spec: InferenceSpec, cls: type, template: str, data: bytes) -> Any:
    """An instance of ``cls`` for the knobs of ``spec`` with the parameters ``data`` loaded.

    Loads as a trial worker does (:func:`call_template`).

    Raises:
        TrialFailed: saying which step failed, with the template's traceback.
    """
    from baobab.model import knobs_from_json
    from baobab.store import ParamsFormatError, params_from_bytes
    from baobab.worker._trial_process import TrialFailed, call_template

    try:
        params = params_from_bytes(data)
    except ParamsFormatError as e:
        raise TrialFailed(f"cannot read the parameters of trial {spec.trial_id}: {e}") from None
    knobs = knobs_from_json(spec.knobs) if isinstance(spec.knobs, str) else dict(spec.knobs)
    model = call_template(template, f"{spec.class_name}(**knobs)", cls, **knobs)
    call_template(template, "load_parameters()", model.load_parameters, params)
    if "torch" in sys.modules:  # the environment said one thread; torch's own pool listens to this
        sys.modules["torch"].set_num_threads(1)
    return model


def answer_json(predictions: Any, count: int) -> str:
    """The JSON text of what ``predict`` returned for ``count`` queries, checked as the dev runner checks it.

    Raises:
        TrialFailed: other than one JSON value per query.
    """
    from baobab.worker._trial_process import TrialFailed

    if not isinstance(predictions, list) or len(predictions) != count:
        got = f"a list of {len(predictions)}" if isinstance(predictions, list) else f"a {type(predictions).__name__}"
        raise TrialFailed(
            f"template error: predict() returned {got} for {count} queries; it must return a list with one "
            "prediction per query (call .tolist() on arrays)"
        )
    try:
        return json.dumps(predictions, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise TrialFailed(f"template error: predict() must return JSON values (lists, numbers, strings): {e}") from None


def send(channel: IO[str], text: str) -> None:
    """One message to the parent."""
    channel.write(text + "\n")
    channel.flush()


def _exit_with_parent(parent: int) -> None:
    """End this process once its parent is gone, even while the template is busy (or hung) in predict.

    The end of stdin says the same, but only once the main thread reads it again.
    """
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(_ORPHANED)


def open_channel() -> tuple[int, IO[str], str]:
    """The parent's pid, the channel of messages to it, and the spec line it sent first ("" when none came).

    Messages keep the original stdout; the template's prints, Python's and C's, go to stderr.
    """
    for name in THREAD_VARIABLES:  # when started by hand; the parent sets them already
        os.environ.setdefault(name, "1")
    parent = os.getppid()
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    return parent, channel, sys.stdin.readline()


def load_or_report(channel: IO[str], load: Callable[[], T]) -> T | None:
    """What ``load()`` returns, or None once the parent is told why it failed (the process then exits, status 1)."""
    from baobab.worker._trial_process import TrialFailed

    try:
        return load()
    except TrialFailed as e:  # the whole text: a load failure is rare and its traceback is the point
        print(str(e), file=sys.stderr, flush=True)
        send(channel, json.dumps({"event": "failed", "error": str(e)}))
    except Exception:  # a bug of ours, not the template's: say so, with the traceback in the log
        traceback.print_exc()
        send(channel, json.dumps({"event": "failed", "error": "loading failed: internal error (see the log)"}))
    return None


def main() -> int:
    """The worker process: read the spec, load, answer batches until stdin ends."""
    parent, channel, line = open_channel()
    if not line:
        return 0
    spec = InferenceSpec.from_json(line)

    from baobab.worker._trial_process import TrialFailed, call_template

    def load() -> tuple[str, Any]:
        template_file = fetch_template(spec)
        data = fetch_params(spec)
        confine_to(spec.confinement, template_file, parent)
        return str(template_file), load_model(spec, load_class(spec, template_file), str(template_file), data)

    loaded = load_or_report(channel, load)
    if loaded is None:
        return 1
    template, model = loaded
    send(channel, '{"event": "ready"}')
    try:
        for line in sys.stdin:
            queries = json.loads(line)["queries"]
            try:
                predictions = call_template(template, "predict()", model.predict, list(queries))
                send(channel, '{"predictions": ' + answer_json(predictions, len(queries)) + "}")
            except TrialFailed as e:  # the summary to the parent (it goes to API clients), details to the log
                print(str(e), file=sys.stderr, flush=True)
                send(channel, json.dumps({"error": e.error}))
    finally:
        try:
            call_template(template, "teardown()", model.teardown)
        except TrialFailed as e:
            print(str(e), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
