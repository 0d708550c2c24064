"""Interim metrics and log lines, stored as they come while a trial runs.

The template must not wait for the database at each ``report()``, ``log()`` or
``print()``: a loop that logs every batch would spend its time in commits. The
:class:`RowWriter` thread takes the rows as they come and commits whatever has piled
up in one transaction, so one row costs one commit when rows are rare (visible in the
API within milliseconds) and a burst of rows costs a few commits. When the trial ends,
the runner takes the rows not sent yet (:meth:`RowWriter.take_rest`, which waits for
those on their way) and sends them with the trial's final state, in one request, so
every row of a finished trial is there when ``TRIAL_FINISHED`` is published.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from baobab.exceptions import StoreError
from baobab.model import InterimMetric
from baobab.worker._capture import MAX_LINE, ignore_thread

__all__ = ["RowWriter", "TrialSink", "WriteRows"]

logger = logging.getLogger("baobab.worker")

#: Stores one trial's interim metrics and log lines (a gateway's ``records``).
WriteRows = Callable[[int, Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]], None]
_METRIC, _LOG = "metric", "log"


class RowWriter:
    """Stores rows from a thread of its own, in batches; started on the first row."""

    def __init__(self, write: WriteRows) -> None:
        self._write_rows = write
        self._pending: list[tuple[int, str, dict[str, Any]]] = []
        self._added = 0
        self._done = 0
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def add(self, trial_id: int, kind: str, row: dict[str, Any]) -> None:
        with self._cond:
            self._pending.append((trial_id, kind, row))
            self._added += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="baobab-trial-rows", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def flush(self) -> None:
        """Wait until every row added so far is committed (or given up on)."""
        with self._cond:
            target = self._added
            while self._done < target:
                self._cond.wait()

    def take_rest(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """End the thread and hand back the metrics and log lines it had not started to store (the trial's
        final state carries them), after the ones on their way are stored. One trial's writer only."""
        with self._cond:
            rest, self._pending = self._pending, []
            self._done += len(rest)
            self._cond.notify_all()
        self.close()
        metrics = [row for _, kind, row in rest if kind == _METRIC]
        logs = [row for _, kind, row in rest if kind == _LOG]
        return metrics, logs

    def close(self) -> None:
        """Flush, then end the thread (rows added later start a new one)."""
        self.flush()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        self._closed = False

    def _run(self) -> None:
        ignore_thread(threading.get_ident())
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending:
                    return
                batch, self._pending = self._pending, []
            try:
                self._write(batch)
            except Exception as e:
                # A lost log line is not worth failing or stopping the trial for; say so
                # in the worker's log (a trial deleted meanwhile breaks its foreign key).
                level = logging.WARNING if isinstance(e, StoreError) else logging.ERROR
                logger.log(
                    level, "dropped %d trial log/metric rows: %s", len(batch), e, exc_info=level == logging.ERROR
                )
            with self._cond:
                self._done += len(batch)
                self._cond.notify_all()

    def _write(self, batch: list[tuple[int, str, dict[str, Any]]]) -> None:
        by_trial: dict[int, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
        for trial_id, kind, row in batch:
            metrics, logs = by_trial.setdefault(trial_id, ([], []))
            (metrics if kind == _METRIC else logs).append(row)
        for trial_id, (metrics, logs) in by_trial.items():
            self._write_rows(trial_id, metrics, logs)


class TrialSink:
    """A :class:`~baobab.model.TrialContext` sink that stores reports and logs of one trial."""

    def __init__(self, writer: RowWriter, trial_id: int) -> None:
        self._writer = writer
        self._trial_id = trial_id

    def on_report(self, metric: InterimMetric) -> bool:
        # JSON has no NaN (PostgreSQL refuses it): a non-finite metric is stored as null.
        values = {k: v if math.isfinite(v) else None for k, v in metric.metrics.items()}
        row = {"step": metric.step, "metrics": values, "time": datetime.now(UTC)}
        self._writer.add(self._trial_id, _METRIC, row)
        return False  # stop requests come from the executor, through TrialContext.request_stop

    def on_log(self, message: str) -> None:
        if len(message) > MAX_LINE:
            message = message[:MAX_LINE] + f"... ({len(message) - MAX_LINE} more characters)"
        self._writer.add(self._trial_id, _LOG, {"line": message, "time": datetime.now(UTC)})
