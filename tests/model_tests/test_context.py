"""The trial context: interim metrics, logs and stop requests, as a template sees them."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

from baobab.model import InterimMetric, TrialContext, get_trial_context, trial_context


class StopAfter:
    """A sink that asks the trial to stop once ``steps`` reports have arrived."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.reports: list[InterimMetric] = []
        self.logs: list[str] = []

    def on_report(self, metric: InterimMetric) -> bool:
        self.reports.append(metric)
        return len(self.reports) >= self.steps

    def on_log(self, message: str) -> None:
        self.logs.append(message)


def train_loop(epochs: int) -> int:
    """What a template does inside train(): report each epoch, stop when asked."""
    context = get_trial_context()
    done = 0
    for epoch in range(epochs):
        done += 1
        context.log(f"epoch {epoch}")
        if context.report(epoch, loss=1.0 / (epoch + 1), accuracy=np.float32(0.5)):
            break
    return done


def test_sink_stops_the_trial_and_sees_every_report_and_log() -> None:
    sink = StopAfter(3)
    with trial_context(TrialContext(sink=sink)) as context:
        assert train_loop(10) == 3
    assert context.should_stop
    assert context.stop_reason == "stopped early by the platform"
    assert [m.step for m in sink.reports] == [0, 1, 2]
    assert sink.reports[1].metrics == {"loss": 0.5, "accuracy": 0.5}
    assert sink.logs == ["epoch 0", "epoch 1", "epoch 2"]
    assert context.metrics == sink.reports


def test_context_is_removed_after_the_block() -> None:
    inner = TrialContext()
    with trial_context(inner):
        assert get_trial_context() is inner
    assert get_trial_context() is not inner


def test_stop_requested_from_another_thread_is_seen_and_first_reason_wins() -> None:
    context = TrialContext()
    thread = threading.Thread(target=context.request_stop, args=("time budget spent",))
    thread.start()
    thread.join()
    context.request_stop("second reason")
    with trial_context(context):
        assert train_loop(10) == 1
    assert context.stop_reason == "time budget spent"


def test_non_finite_metrics_are_kept_as_nan() -> None:
    context = TrialContext()
    context.report(0, loss=float("inf"))
    assert math.isnan(context.metrics[0].metrics["loss"])


@pytest.mark.parametrize(
    ("step", "metrics", "message"),
    [
        (1.5, {"loss": 1.0}, "step must be an int, got 1.5"),
        (True, {"loss": 1.0}, "step must be an int, got True"),
        (1, {"loss": "low"}, "metric 'loss' must be a number, got 'low'"),
        (1, {"done": True}, "metric 'done' must be a number, got True"),
    ],
)
def test_bad_reports_raise_type_error(step: object, metrics: dict[str, object], message: str) -> None:
    with pytest.raises(TypeError, match=message):
        TrialContext().report(step, **metrics)  # type: ignore[arg-type]
