"""One dev trial in a child process: ``python -m baobab.model._trial_process SPEC.json``.

A template can crash the interpreter, leak memory or loop forever, so the dev runner
runs every call into it in a fresh process (which is also where a worker will run
it). The child reads a :class:`TrialSpec`, runs it and writes JSON lines to the
stdout it was started with; what the template prints goes to stderr (the parent's
log file), so prints never mix with messages:

- ``{"event": "metric", "step": 3, "metrics": {...}}`` and ``{"event": "log", ...}``
  as the template reports them through its :class:`TrialContext`;
- last, ``{"event": "result", ...}`` or ``{"event": "failed", "error": ...}``.

A child that exits without either crashed. A line ``stop`` on the child's stdin
asks the trial to stop early (``TrialContext.should_stop``), as the time budget ends;
the end of its stdin means the parent is gone, and the child exits at once.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import random
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from baobab.exceptions import TemplateError
from baobab.model._base import BaseModel, check_params
from baobab.model._context import InterimMetric, TrialContext, trial_context
from baobab.model._template import load_template, template_traceback
from baobab.store import params_from_bytes, params_to_bytes

__all__ = ["TrialSpec", "main"]

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


class _TrialFailed(Exception):
    """Ends the trial with a message for the author of the template: a summary line, then details."""


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


def _call(spec: TrialSpec, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except Exception as e:
        summary = f"{what} raised {type(e).__name__}: {e}".splitlines()[0]
        raise _TrialFailed(f"{summary}\n{template_traceback(e, spec.template)}") from None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _check_score(score: Any) -> float:
    if isinstance(score, bool) or not isinstance(score, numbers.Real):
        raise _TrialFailed(
            f"evaluate() returned {_short(score)} (a {type(score).__name__}); "
            "it must return a finite number, higher is better"
        )
    if not math.isfinite(score):
        raise _TrialFailed(f"evaluate() returned {score}; it must return a finite number, higher is better")
    return float(score)


def _predict(spec: TrialSpec, model: BaseModel) -> list[Any]:
    predictions = _call(spec, "predict()", model.predict, list(spec.queries))
    if not isinstance(predictions, list) or len(predictions) != len(spec.queries):
        got = f"a list of {len(predictions)}" if isinstance(predictions, list) else f"a {type(predictions).__name__}"
        raise _TrialFailed(
            f"predict() returned {got} for {len(spec.queries)} queries; it must return a list with one "
            "prediction per query (call .tolist() on arrays)"
        )
    try:
        return json.loads(json.dumps(predictions, allow_nan=False))
    except (TypeError, ValueError) as e:
        raise _TrialFailed(f"predict() must return JSON values (lists, numbers, strings): {e}") from None


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
            raise _TrialFailed(
                f"template error: {who} predicts {_short(b)} for query {i}, where the trained model predicted "
                f"{_short(a)}; dump_parameters() must return everything load_parameters() needs"
            )


def _load(spec: TrialSpec) -> type[BaseModel]:
    try:
        return load_template(spec.template, spec.class_name)
    except TemplateError as e:
        raise _TrialFailed(str(e)) from None


def _seed(seed: int) -> None:
    """Seed the global generators templates tend to use, for reproducible dev runs."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)


def _run_trial(spec: TrialSpec, context: TrialContext) -> dict[str, Any]:
    cls = _load(spec)
    _seed(spec.seed)
    model = _call(spec, f"{spec.class_name}(**knobs)", cls, **spec.knobs)
    try:
        with trial_context(context):
            _call(spec, "train()", model.train, spec.train_path, **spec.train_args)
            score = _check_score(_call(spec, "evaluate()", model.evaluate, spec.val_path))
        params = _call(spec, "dump_parameters()", model.dump_parameters)
        try:
            check_params(params)
            data = params_to_bytes(params)
        except TypeError as e:
            raise _TrialFailed(
                f"template error: dump_parameters() returned parameters that cannot be stored: {e}"
            ) from None
        Path(spec.params_path).write_bytes(data)
        predictions = _predict(spec, model)
    finally:
        _call(spec, "teardown()", model.teardown)
    fresh = _call(spec, f"{spec.class_name}(**knobs)", cls, **spec.knobs)
    try:
        _call(spec, "load_parameters()", fresh.load_parameters, params_from_bytes(data))
        who = "a fresh instance loaded with the dumped parameters"
        _check_same_predictions(predictions, _predict(spec, fresh), who)
    finally:
        _call(spec, "teardown()", fresh.teardown)
    return {"score": score, "predictions": predictions, "stop_reason": context.stop_reason}


def _run_reload(spec: TrialSpec) -> dict[str, Any]:
    cls = _load(spec)
    model = _call(spec, f"{spec.class_name}(**knobs)", cls, **spec.knobs)
    try:
        params = params_from_bytes(Path(spec.params_path).read_bytes())
        _call(spec, "load_parameters()", model.load_parameters, params)
        predictions = _predict(spec, model)
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
    except _TrialFailed as e:
        channel.send(event="failed", error=str(e))
    else:
        channel.send(event="result", **result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
