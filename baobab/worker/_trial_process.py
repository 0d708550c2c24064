"""One dev trial in a child process: ``python -m baobab.worker._trial_process SPEC.json``.

A template can crash the interpreter, leak memory or loop forever, so the dev runner
runs every call into it in a fresh process (which is also where a worker will run
it). The child reads a :class:`TrialSpec`, runs it and writes JSON lines to the
stdout it was started with; what the template prints goes to stderr (the parent's
log file), so prints never mix with messages:

- ``{"event": "metric", "step": 3, "metrics": {...}}`` and ``{"event": "log", ...}``
  as the template reports them through its :class:`TrialContext`;
- last, ``{"event": "result", ...}`` or ``{"event": "failed", "error": ..., "invalid": false}``
  (``invalid`` true when the template raised :class:`InvalidArchitectureError`).

A child that exits without either crashed. A line ``stop`` on the child's stdin
asks the trial to stop early (``TrialContext.should_stop``), as the time budget ends;
the end of its stdin means the parent is gone, and the child exits at once.

The steps of a trial that every runner shares (seeding, calling into the template with
the template's own traceback, checking the score, serialising the parameters) are
public here: the platform's workers (:mod:`baobab.worker._runner`) run trials the same way.
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import numbers
import os
import random
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from baobab.exceptions import InvalidArchitectureError, TemplateError
from baobab.model import (
    BaseModel,
    InterimMetric,
    TrialContext,
    check_params,
    load_template,
    template_traceback,
    trial_context,
)
from baobab.store import params_from_bytes, params_to_bytes
from baobab.worker._memory import out_of_memory

__all__ = [
    "TrialFailed",
    "TrialSpec",
    "call_template",
    "check_score",
    "main",
    "params_bytes",
    "seed_globals",
    "train_kwargs",
    "trial_seed",
]

#: The exit status of a child whose parent went away.
_ORPHANED = 70


@dataclass(frozen=True)
class TrialSpec:
    """What a child runs. ``mode`` "trial" trains, evaluates and writes ``params_path``;
    "reload" loads ``params_path`` into a fresh instance and checks it predicts ``expected``.
    """

    mode: str
    template: str
    class_name: str
    knobs: dict[str, Any]
    queries: list[Any]
    params_path: str
    seed: int = 0
    train_path: str = ""
    val_path: str = ""
    train_args: dict[str, Any] = field(default_factory=dict)
    expected: list[Any] | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> TrialSpec:
        return cls(**json.loads(text))


class TrialFailed(Exception):
    """Ends a trial with a message for the author of the template.

    ``error`` is one line (what failed); ``details`` the rest, usually the template's
    traceback. ``str()`` gives both, the summary first. ``invalid`` is True when the
    template said its architecture cannot be built (:class:`InvalidArchitectureError`):
    the trial ends INVALID instead of ERRORED.
    """

    def __init__(self, error: str, details: str = "", *, invalid: bool = False) -> None:
        self.error = error
        self.details = details
        self.invalid = invalid
        super().__init__(f"{error}\n{details}" if details else error)

    @classmethod
    def from_text(cls, text: str) -> TrialFailed:
        """Its first line as the summary, the rest as details (a :class:`TemplateError`'s message)."""
        error, _, details = text.partition("\n")
        return cls(error, details)


class _Channel:
    """The context's sink: forwards reports and logs to the parent as JSON lines."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, **message: Any) -> None:
        line = json.dumps(message)
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()

    def on_report(self, metric: InterimMetric) -> bool:
        self.send(event="metric", step=metric.step, metrics=metric.metrics)
        return False

    def on_log(self, message: str) -> None:
        self.send(event="log", message=message)


def call_template(template: str | Path, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``fn`` (a method of the template at path ``template``); an error it raises fails the trial.

    A ``SystemExit`` counts as an error too: a template's ``sys.exit()`` must not end the
    process that runs it (a worker runs many trials).

    Raises:
        TrialFailed: "``what`` raised ValueError: ..." with the template's traceback;
            ``invalid`` when it was an :class:`InvalidArchitectureError`.
    """
    try:
        return fn(*args, **kwargs)
    except (Exception, SystemExit) as e:
        exceeded = out_of_memory(e)
        cause = f"{type(e).__name__}: {e}"
        summary = f"{what} {exceeded} ({cause})" if exceeded else f"{what} raised {cause}"
        invalid = isinstance(e, InvalidArchitectureError)
        raise TrialFailed(summary.splitlines()[0], template_traceback(e, template), invalid=invalid) from None


def _call(spec: TrialSpec, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return call_template(spec.template, what, fn, *args, **kwargs)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def check_score(score: Any) -> float:
    """``score`` as a float, if ``evaluate()`` returned a finite number.

    Raises:
        TrialFailed: saying what it returned instead.
    """
    if isinstance(score, bool) or not isinstance(score, numbers.Real):
        raise TrialFailed(
            f"evaluate() returned {_short(score)} (a {type(score).__name__}); "
            "it must return a finite number, higher is better"
        )
    if not math.isfinite(score):
        raise TrialFailed(f"evaluate() returned {score}; it must return a finite number, higher is better")
    return float(score)


def _predict(template: str | Path, model: BaseModel, queries: Sequence[Any]) -> list[Any]:
    predictions = call_template(template, "predict()", model.predict, list(queries))
    if not isinstance(predictions, list) or len(predictions) != len(queries):
        got = f"a list of {len(predictions)}" if isinstance(predictions, list) else f"a {type(predictions).__name__}"
        raise TrialFailed(
            f"predict() returned {got} for {len(queries)} queries; it must return a list with one "
            "prediction per query (call .tolist() on arrays)"
        )
    try:
        return json.loads(json.dumps(predictions, allow_nan=False))
    except (TypeError, ValueError) as e:
        raise TrialFailed(f"predict() must return JSON values (lists, numbers, strings): {e}") from None


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    numbers_only = not isinstance(a, bool) and not isinstance(b, bool)
    if numbers_only and isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6)
    return type(a) is type(b) and a == b


def _check_same_predictions(expected: Sequence[Any], got: Sequence[Any], who: str) -> None:
    """Raise unless ``got`` matches ``expected`` query by query (floats up to rounding)."""
    for i, (a, b) in enumerate(zip(expected, got, strict=True)):
        if not _same(a, b):
            raise TrialFailed(
                f"template error: {who} predicts {_short(b)} for query {i}, where the trained model predicted "
                f"{_short(a)}; dump_parameters() must return everything load_parameters() needs"
            )


def check_reload(
    template: str | Path,
    cls: type[BaseModel],
    knobs: Mapping[str, Any],
    model: BaseModel,
    data: bytes,
    queries: Sequence[Any],
) -> list[Any]:
    """The trained ``model``'s predictions on ``queries``, checked against a fresh instance loaded with ``data``.

    A template whose dumped parameters miss part of its state trains and scores well but
    serves something else; this is where the platform finds out, before it serves it.

    Raises:
        TrialFailed: a prediction differs (beyond rounding), or a call raised.
    """
    predictions = _predict(template, model, queries)
    fresh = call_template(template, f"{cls.__name__}(**knobs)", cls, **knobs)
    try:
        call_template(template, "load_parameters()", fresh.load_parameters, params_from_bytes(data))
        who = "a fresh instance loaded with the dumped parameters"
        _check_same_predictions(predictions, _predict(template, fresh, queries), who)
    finally:
        call_template(template, "teardown()", fresh.teardown)
    return predictions


def _load(spec: TrialSpec) -> type[BaseModel]:
    try:
        return load_template(spec.template, spec.class_name)
    except TemplateError as e:
        raise TrialFailed.from_text(str(e)) from None


def trial_seed(seed: int, number: int) -> int:
    """The seed of trial ``number`` of a search seeded with ``seed`` (a job's sub-job, a dev run)."""
    return int(np.random.SeedSequence([seed, number]).generate_state(1)[0])


def seed_globals(seed: int) -> None:
    """Seed the global generators templates tend to use (random, NumPy, torch if imported).

    Called before the template is instantiated, so trials are reproducible.
    """
    random.seed(seed)
    np.random.seed(seed % 2**32)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)


@functools.cache
def _takes_seed(cls: type[BaseModel]) -> bool:
    try:
        parameters = inspect.signature(cls.train).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "seed" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def train_kwargs(cls: type[BaseModel], train_args: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """The keyword arguments of ``train()``: ``train_args``, plus ``seed`` when train() takes it.

    ``train()`` takes it when it declares a ``seed`` parameter or ``**kwargs``
    (:class:`~baobab.model.TorchModel` pops it from there); a ``seed`` given in
    ``train_args`` is passed as given.
    """
    if "seed" in train_args or not _takes_seed(cls):
        return dict(train_args)
    return {**train_args, "seed": seed}


def params_bytes(template: str | Path, model: BaseModel) -> bytes:
    """Call ``model.dump_parameters()`` and serialise what it returns (safetensors bytes).

    Raises:
        TrialFailed: the call raised, or returned parameters that cannot be stored.
    """
    params = call_template(template, "dump_parameters()", model.dump_parameters)
    try:
        check_params(params)
        return params_to_bytes(params)
    except TypeError as e:
        raise TrialFailed(f"template error: dump_parameters() returned parameters that cannot be stored: {e}") from None


def _run_trial(spec: TrialSpec, context: TrialContext) -> dict[str, Any]:
    cls = _load(spec)
    seed_globals(spec.seed)
    model = _call(spec, f"{spec.class_name}(**knobs)", cls, **spec.knobs)
    try:
        with trial_context(context):
            _call(spec, "train()", model.train, spec.train_path, **train_kwargs(cls, spec.train_args, spec.seed))
            score = check_score(_call(spec, "evaluate()", model.evaluate, spec.val_path))
        data = params_bytes(spec.template, model)
        Path(spec.params_path).write_bytes(data)
        predictions = check_reload(spec.template, cls, spec.knobs, model, data, spec.queries)
    finally:
        _call(spec, "teardown()", model.teardown)
    return {"score": score, "predictions": predictions, "stop_reason": context.stop_reason}


def _run_reload(spec: TrialSpec) -> dict[str, Any]:
    cls = _load(spec)
    model = _call(spec, f"{spec.class_name}(**knobs)", cls, **spec.knobs)
    try:
        params = params_from_bytes(Path(spec.params_path).read_bytes())
        _call(spec, "load_parameters()", model.load_parameters, params)
        predictions = _predict(spec.template, model, spec.queries)
    finally:
        _call(spec, "teardown()", model.teardown)
    _check_same_predictions(spec.expected or [], predictions, "the stored parameters, reloaded in a new process,")
    return {"predictions": predictions}


def _listen_for_stop(context: TrialContext) -> None:
    for line in sys.stdin:
        if line.strip() == "stop":
            context.request_stop("the time budget of the dev run is spent")
    # The parent keeps our stdin open until it has reaped us: end of file means it is
    # gone (killed, say), and nobody is left to read a result or to kill us.
    os._exit(_ORPHANED)


def main(argv: Sequence[str] | None = None) -> int:
    (spec_path,) = sys.argv[1:] if argv is None else argv
    spec = TrialSpec.from_json(Path(spec_path).read_text())
    # Messages keep the original stdout; the template's prints, Python's and C's, go to stderr.
    channel = _Channel(os.fdopen(os.dup(1), "w"))
    os.dup2(2, 1)
    context = TrialContext(sink=channel)
    threading.Thread(target=_listen_for_stop, args=(context,), daemon=True).start()
    try:
        result = _run_trial(spec, context) if spec.mode == "trial" else _run_reload(spec)
    except TrialFailed as e:
        channel.send(event="failed", error=str(e), invalid=e.invalid)
    else:
        channel.send(event="result", **result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
