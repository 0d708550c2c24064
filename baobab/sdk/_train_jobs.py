"""The client's calls for train jobs (``/train_jobs``): create, look up, stop, wait for one."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from baobab.sdk._errors import WaitTimeoutError
from baobab.sdk._progress import JobProgress
from baobab.sdk._transport import Json, Transport, query_params

__all__ = ["TrainJobs"]

_JOB_FINISHED = frozenset({"COMPLETED", "ERRORED", "STOPPED"})
_MOVE_OPTIONS = (
    "pass the job options (early_stopping, policies, fusion, enas, warm_start, base_model) as options=..., "
    "and a tabular job's target column as target=..."
)


class TrainJobs(Transport):
    """Create, list, show, stop and wait for train jobs."""

    def create_train_job(
        self,
        app: str,
        task: str,
        *,
        train_dataset_id: int,
        val_dataset_id: int,
        model_ids: Sequence[int],
        budget: Mapping[str, Any],
        train_args: Mapping[str, Any] | None = None,
        strategy: str | None = None,
        seed: int | None = None,
        options: Mapping[str, Any] | None = None,
        target: str | None = None,
    ) -> Json:
        """Starts tuning ``model_ids`` on a task; the job is version ``app_version`` of ``app``.

        Args:
            budget: e.g. ``{"MODEL_TRIAL_COUNT": 20, "GPU_COUNT": 0}`` or ``{"TIME_HOURS": 0.5}``;
                MODEL_TRIAL_COUNT is per model template.
            train_args: passed to each template's ``train(**train_args)``, and nothing else.
            strategy: a search strategy name, or None for ``auto``.
            seed: seeds every proposal and trial, so that the same seed, data and templates
                search the same way; None for a random one (the job shows it).
            options: what the job asks the platform for, e.g. ``{"early_stopping": "asha",
                "policies": {"EARLY_STOP": True}, "fusion": {"max_group": 4}, "warm_start": False}``
                (the train-jobs page of the docs lists them; each one left out is its default).
            target: a tabular job's target column, which each template's ``train()`` receives as
                its ``target`` argument; None leaves it to the template (and the platform's
                queries leave out the column ``target``). An image job takes none.

        Warns:
            DeprecationWarning: job options were sent in ``train_args``, the form before ``options``,
                or a tabular job's ``target`` was (the form before ``target``); the server still takes
                both, for one release.
        """
        body = _job_body(
            app, task, train_dataset_id, val_dataset_id, model_ids, budget, train_args, strategy, seed, options, target
        )
        return self._call("POST", "/train_jobs", json=body, deprecated=_MOVE_OPTIONS)

    def forecast_train_job(
        self,
        app: str,
        task: str,
        *,
        train_dataset_id: int,
        val_dataset_id: int,
        model_ids: Sequence[int],
        budget: Mapping[str, Any],
        train_args: Mapping[str, Any] | None = None,
        strategy: str | None = None,
        workers: int = 1,
        slots: int | None = None,
        options: Mapping[str, Any] | None = None,
        target: str | None = None,
    ) -> Json:
        """How long the job :meth:`create_train_job` would create takes on ``workers`` machines of
        ``slots`` trial slots each (None: the platform's own), without creating it.

        Learned from the finished trials of the templates in your jobs: one answer per placement
        method (``search``, and the baselines, ``fcfs`` being one trial per slot in turn) with
        its ``seconds``, ``trials_finished`` within TIME_HOURS and ``utilisation``; or none, and
        ``fallback`` says why (a template with no finished trial yet).
        """
        body = _job_body(
            app, task, train_dataset_id, val_dataset_id, model_ids, budget, train_args, strategy, None, options, target
        )
        params = query_params(workers=workers, slots=slots)
        return self._call("POST", "/train_jobs/forecast", json=body, params=params, deprecated=_MOVE_OPTIONS)

    def get_train_job(self, app: str, version: int | None = None, *, owner_id: int | None = None) -> Json:
        """One version of your app's train job; the latest when ``version`` is None.

        Apps belong to their owner: an admin names another user's app with ``owner_id``
        (needed only when several users have an app of that name).
        """
        return self._call("GET", job_path(app, version), params=query_params(owner_id=owner_id))

    def list_train_jobs(self, app: str | None = None) -> list[Json]:
        """Your train jobs (all for an admin), newest first; ``app`` filters."""
        return self._call("GET", "/train_jobs", params=query_params(app=app))["train_jobs"]

    def get_time_breakdown(self, app: str, version: int | None = None, *, owner_id: int | None = None) -> Json:
        """Where a job's time went: the seconds its trials spent per phase, in all and per sub-job.

        The answer's ``seconds`` maps each phase to seconds, in the order of ``phases``: ``wait``
        (for a slot), ``fetch`` (loading the template and the data), ``warm_start`` (zoo lookup and weight transform),
        ``profile`` (fusion profiling), ``build``, ``train``, ``evaluate`` and ``store`` (saving
        parameters); ``total_s`` is their sum, ``trials`` the trials counted, and ``sub_jobs`` the
        same per template. A large share in one phase says where a job's budget went: with 27% in
        ``profile``, say, measuring fusion cost more than it could save. The latest version when
        ``version`` is None; ``owner_id`` as for :meth:`get_train_job`.
        """
        path = job_path(app, self._version(app, version, owner_id)) + "/time_breakdown"
        return self._call("GET", path, params=query_params(owner_id=owner_id))

    def stop_train_job(self, app: str, version: int | None = None, *, owner_id: int | None = None) -> Json:
        """Asks a job to stop (it goes STOPPING, then STOPPED); a finished job is answered unchanged.

        ``owner_id``: whose app, as for :meth:`get_train_job`.
        """
        path = job_path(app, self._version(app, version, owner_id)) + "/stop"
        return self._call("POST", path, params=query_params(owner_id=owner_id))

    def wait_for_train_job(
        self,
        app: str,
        version: int | None = None,
        *,
        timeout: float | None = None,
        progress: bool = True,
        poll_interval: float = 1.0,
    ) -> Json:
        """Polls a job until it is COMPLETED, ERRORED or STOPPED, and returns its final JSON.

        Args:
            version: the version to wait for; the latest (when the call starts) if None.
            timeout: seconds to wait at most; None waits as long as it takes.
            progress: show a progress bar (on stderr) of finished trials over the trial
                budget (MODEL_TRIAL_COUNT times the number of templates, when set).
            poll_interval: seconds between polls.

        Raises:
            WaitTimeoutError: still running after ``timeout`` seconds (the job goes on).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        job = self.get_train_job(app, version)
        label = f"{job['app']} v{job['app_version']}"
        with JobProgress(job, enabled=progress) as bar:
            while True:
                bar.show(job)
                if job["status"] in _JOB_FINISHED:
                    return job
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise WaitTimeoutError(
                        f"train job {label} is still {job['status']} after {timeout:g} s; it goes on running",
                        last=job,
                    )
                time.sleep(poll_interval if remaining is None else min(poll_interval, remaining))
                job = self.get_train_job(job["app"], job["app_version"])

    def _version(self, app: str, version: int | None, owner_id: int | None = None) -> int:
        """``version``, or the latest version of ``app``'s train job when None (one more request)."""
        return int(version) if version is not None else self.get_train_job(app, owner_id=owner_id)["app_version"]


def job_path(app: str, version: int | None) -> str:
    """The route of an app's train job: its latest version when ``version`` is None."""
    path = f"/train_jobs/{quote(app, safe='')}"
    return path if version is None else f"{path}/{int(version)}"


def _job_body(
    app: str,
    task: str,
    train_dataset_id: int,
    val_dataset_id: int,
    model_ids: Sequence[int],
    budget: Mapping[str, Any],
    train_args: Mapping[str, Any] | None,
    strategy: str | None,
    seed: int | None,
    options: Mapping[str, Any] | None,
    target: str | None,
) -> Json:
    """A train job's body: the fields given, and the optional ones only when set (the API's defaults)."""
    body: Json = {
        "app": app,
        "task": task,
        "train_dataset_id": train_dataset_id,
        "val_dataset_id": val_dataset_id,
        "model_ids": list(model_ids),
        "budget": dict(budget),
    }
    if train_args is not None:
        body["train_args"] = dict(train_args)
    if options is not None:
        body["options"] = dict(options)
    if target is not None:
        body["target"] = target
    if strategy is not None:
        body["strategy"] = strategy
    if seed is not None:
        body["seed"] = seed
    return body
