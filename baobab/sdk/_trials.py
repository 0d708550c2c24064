"""The client's calls for a train job's trials and for one trial (``/train_jobs/.../trials``, ``/trials``).

Trials are found through their job, so this group builds on :class:`~baobab.sdk._train_jobs.TrainJobs`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from baobab.sdk._train_jobs import TrainJobs, job_path
from baobab.sdk._transport import Json, PathLike, query_params

__all__ = ["Trials"]


class Trials(TrainJobs):
    """A job's trials, page by page or best first, and one trial's logs, metrics, parameters and architecture."""

    def get_trials(
        self,
        app: str,
        version: int | None = None,
        *,
        page: int = 1,
        per_page: int = 50,
        sort: str | None = None,
        status: str | Iterable[str] | None = None,
        model_id: int | None = None,
    ) -> Json:
        """One page of a job's trials: ``{"trials", "total", "page", "per_page"}``.

        Args:
            sort: ``-score`` (best first), ``score``, ``number``, ``-number``, ``created_at``, ``-created_at``.
            status: one trial state or several (COMPLETED, ERRORED, ...).
            model_id: only the trials of this template.
        """
        if status is not None and not isinstance(status, str):
            status = ",".join(status)
        params = query_params(page=page, per_page=per_page, sort=sort, status=status, model_id=model_id)
        return self._call("GET", job_path(app, self._version(app, version)) + "/trials", params=params)

    def iter_trials(
        self, app: str, version: int | None = None, *, per_page: int = 500, **filters: Any
    ) -> Iterator[Json]:
        """Every trial of a job, page after page (``filters``: sort, status, model_id as in :meth:`get_trials`)."""
        version = self._version(app, version)
        page = 1
        while True:
            answer = self.get_trials(app, version, page=page, per_page=per_page, **filters)
            yield from answer["trials"]
            if not answer["trials"] or page * answer["per_page"] >= answer["total"]:
                return
            page += 1

    def get_best_trials(
        self, app: str, version: int | None = None, *, k: int = 2, include_stopped: bool = False
    ) -> list[Json]:
        """The ``k`` best COMPLETED trials that have parameters, best first.

        ``include_stopped`` counts trials STOPPED mid-training (at the deadline, or by
        early stopping) too: their scores count, but they are not fully trained.
        """
        path = job_path(app, self._version(app, version)) + "/best_trials"
        params = {"k": k, "include_stopped": "true" if include_stopped else "false"}
        return self._call("GET", path, params=params)["trials"]

    def get_trial(self, trial_id: int) -> Json:
        """One trial, with the full ``traceback`` of an ERRORED one, its ``phase`` and its ``lineage``."""
        return self._call("GET", f"/trials/{int(trial_id)}")

    def get_trial_logs(self, trial_id: int, *, after: int | None = None, limit: int | None = None) -> list[Json]:
        """Log lines ``{id, time, line}`` in order; ``after`` (a line's id) gets only newer ones."""
        params = query_params(after=after, limit=limit)
        return self._call("GET", f"/trials/{int(trial_id)}/logs", params=params)["logs"]

    def get_trial_metrics(self, trial_id: int) -> list[Json]:
        """Interim metrics ``{step, time, metrics}`` in the order the trial reported them."""
        return self._call("GET", f"/trials/{int(trial_id)}/metrics")["metrics"]

    def get_trial_architecture(self, trial_id: int) -> Json:
        """The architecture a SpaceModel trial trained: ``{"choices", "graph_key", "nodes"}``.

        Each node is ``{name, op, what, inputs, changed, mutator}``, in the order the graph runs
        them; ``changed`` marks those that differ from the space's base. A trial of an ordinary
        template, or one that did not finish training, raises the API's 404 saying which.
        """
        return self._call("GET", f"/trials/{int(trial_id)}/architecture")

    def download_trial_params(self, trial_id: int, dest: PathLike | None = None) -> Path:
        """Saves a trial's parameters (safetensors) to ``dest`` (a file or a folder); returns the path."""
        trial_id = int(trial_id)
        return self._download(f"/trials/{trial_id}/params", dest, f"trial-{trial_id}.safetensors")
