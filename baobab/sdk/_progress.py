"""The progress bar of a train job being waited for (tqdm, on stderr).

Kept apart from the HTTP calls: the bar only reads the job's JSON, and the polling
loop that feeds it (:meth:`~baobab.sdk.Client.wait_for_train_job`) knows nothing of tqdm.
"""

from __future__ import annotations

from typing import Any

from tqdm import tqdm

__all__ = ["JobProgress"]

_TRIAL_FINISHED = ("COMPLETED", "ERRORED", "STOPPED", "CANCELLED", "INVALID")
_BAR = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} trials [{elapsed}{postfix}]"
_COUNTER = "{desc}: {n_fmt} trials [{elapsed}{postfix}]"


class JobProgress:
    """Finished trials over the trial budget (MODEL_TRIAL_COUNT times the templates), or a counter without one.

    Use it as a context manager (the bar is closed on exit); ``enabled=False`` shows nothing.
    """

    def __init__(self, job: dict[str, Any], *, enabled: bool) -> None:
        total = _trial_total(job)
        bar_format = _BAR if total is not None else _COUNTER  # no rate: trials finish in bursts between polls
        self._bar = tqdm(
            total=total,
            initial=_finished_trials(job),
            desc=f"{job['app']} v{job['app_version']}",
            bar_format=bar_format,
            disable=not enabled,
        )

    def __enter__(self) -> JobProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.close()

    def show(self, job: dict[str, Any]) -> None:
        """Moves the bar to the job's finished trials and shows its status and best score."""
        bar = self._bar
        finished = _finished_trials(job)
        if bar.total is not None and finished > bar.total:
            bar.total = finished
        bar.n = finished
        postfix = {"status": job["status"]}
        if job.get("best_score") is not None:
            postfix["best"] = f"{job['best_score']:.4g}"
        bar.set_postfix(postfix, refresh=True)


def _trial_total(job: dict[str, Any]) -> int | None:
    count = (job.get("budget") or {}).get("MODEL_TRIAL_COUNT")
    return count * max(len(job.get("sub_jobs") or ()), 1) if isinstance(count, int) else None


def _finished_trials(job: dict[str, Any]) -> int:
    counts = job.get("trial_counts") or {}
    return sum(int(counts.get(state, 0)) for state in _TRIAL_FINISHED)
