"""The client's calls for inference jobs (``/inference_jobs``) and for their predictors (``/predict``)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from baobab.sdk._errors import ClientError, JobFailedError, WaitTimeoutError
from baobab.sdk._transport import BearerAuth, Json, PathLike, Transport, base_url, query_params

__all__ = ["InferenceJobs"]

_INFERENCE_STARTING = "STARTING"


class InferenceJobs(Transport):
    """Serve a train job's best trials, wait for the predictor, send it queries.

    The API key of each job this client created is kept in ``_api_keys`` (set up by
    :class:`~baobab.sdk.Client`), so that :meth:`predict` finds it by the job's id.
    """

    _api_keys: dict[int, str]

    def create_inference_job(
        self,
        app: str,
        version: int | None = None,
        *,
        k: int | None = None,
        trial_ids: Sequence[int] | None = None,
        public: bool = False,
        include_stopped: bool = False,
        request_log_rate: float | None = None,
        wait: bool = False,
        timeout: float | None = None,
    ) -> Json:
        """Serves the best ``k`` trials (default 2) of a train job, or the given ``trial_ids``.

        The answer holds the ``api_key`` that :meth:`predict` needs; it is shown only
        here (this client remembers it for ``predict(inference_job_id=...)``).

        Args:
            version: the train job's version; the latest when None.
            public: predictions need no API key.
            include_stopped: the best ``k`` may include trials STOPPED mid-training (at the
                deadline, or by early stopping); by default only COMPLETED ones serve.
            request_log_rate: the share of answered requests the predictor logs, 0 to 1
                (read them with :meth:`list_request_logs`); the server's default (0, none) when None.
            wait: return only once the predictor answers (``predictor_url`` is set).
            timeout: with ``wait``, seconds to wait at most.

        Raises:
            WaitTimeoutError, JobFailedError: with ``wait``, see :meth:`wait_for_inference_job`.
        """
        if k is not None and trial_ids is not None:
            raise ValueError("give k (the best k trials) or trial_ids, not both")
        body: Json = {"app": app, "public": public, "include_stopped": include_stopped}
        if version is not None:
            body["app_version"] = version
        if k is not None:
            body["k"] = k
        if trial_ids is not None:
            body["trial_ids"] = list(trial_ids)
        if request_log_rate is not None:
            body["request_log_rate"] = request_log_rate
        job = self._call("POST", "/inference_jobs", json=body)
        if job.get("api_key"):
            self._api_keys[job["id"]] = job["api_key"]
        if wait:
            job = {**self.wait_for_inference_job(job["id"], timeout=timeout), "api_key": job.get("api_key")}
        return job

    def get_inference_job(self, inference_job_id: int) -> Json:
        return self._call("GET", f"/inference_jobs/{int(inference_job_id)}")

    def list_inference_jobs(self, app: str | None = None) -> list[Json]:
        """Your inference jobs (all for an admin); ``app`` filters."""
        return self._call("GET", "/inference_jobs", params=query_params(app=app))["inference_jobs"]

    def stop_inference_job(self, inference_job_id: int) -> Json:
        """Stops serving: the predictor process ends and its URL stops answering."""
        return self._call("POST", f"/inference_jobs/{int(inference_job_id)}/stop")

    def delete_inference_job(self, inference_job_id: int) -> None:
        """Deletes a stopped (or errored) inference job and its request logs; refused (409) while it runs."""
        self._call("DELETE", f"/inference_jobs/{int(inference_job_id)}")

    def get_inference_job_stats(self, inference_job_id: int) -> Json:
        """The last hour of a RUNNING job's serving, from its predictor's counters.

        Returns ``{"interval_s", "window_s", "points"}``; each point, oldest first, holds the
        interval's end (``time``), the ``requests`` answered and ``requests_per_s``, ``p50_ms``
        and ``p99_ms`` latency and the mean ``batch_size`` (None when nothing was answered or
        batched).

        Raises:
            ApiError: 409 when the job is not RUNNING, 502 when its predictor does not answer.
        """
        return self._call("GET", f"/inference_jobs/{int(inference_job_id)}/stats")

    def list_request_logs(self, inference_job_id: int) -> list[Json]:
        """The days an inference job logged requests on, newest first: ``[{day, name, size_bytes}]``."""
        return self._call("GET", f"/inference_jobs/{int(inference_job_id)}/request_logs")["request_logs"]

    def download_request_log(self, inference_job_id: int, day: str, dest: PathLike | None = None) -> Path:
        """Downloads one day's request log (JSON lines, one answered request a line) and returns its path.

        Args:
            day: the UTC day, ``YYYY-MM-DD``, as :meth:`list_request_logs` gives it.
            dest: the file to write, or a folder to write it into; by default
                ``inference-<id>-<day>.jsonl`` here.
        """
        job_id = int(inference_job_id)
        path = f"/inference_jobs/{job_id}/request_logs/{quote(day, safe='')}"
        return self._download(path, dest, f"inference-{job_id}-{day}.jsonl")

    def wait_for_inference_job(
        self, inference_job_id: int, *, timeout: float | None = None, poll_interval: float = 0.5
    ) -> Json:
        """Polls an inference job until it is RUNNING (its predictor answers) and returns its JSON.

        Raises:
            JobFailedError: the job ended ERRORED or STOPPED instead (``.job`` holds its JSON).
            WaitTimeoutError: still STARTING after ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self.get_inference_job(inference_job_id)
            if job["status"] != _INFERENCE_STARTING:
                if job["status"] != "RUNNING":
                    reason = f": {job['error']}" if job.get("error") else ""
                    raise JobFailedError(f"inference job {job['id']} is {job['status']}{reason}", job=job)
                return job
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise WaitTimeoutError(f"inference job {job['id']} is still STARTING after {timeout:g} s", last=job)
            time.sleep(poll_interval if remaining is None else min(poll_interval, remaining))

    def predict(
        self,
        queries: Sequence[Any],
        *,
        predictor_url: str | None = None,
        inference_job_id: int | None = None,
        api_key: str | None = None,
    ) -> Json:
        """Sends queries to an inference job's predictor (``POST {predictor_url}/predict``).

        Args:
            queries: a list of queries (or anything with ``tolist()``, like a NumPy array).
            predictor_url: the predictor; looked up from ``inference_job_id`` when None.
            api_key: the job's API key (not needed for a public job); the key this client
                got when it created the job when None.

        Returns:
            ``{"predictions": [...], "members": {"answered", "left_out"}}``, predictions in query order.
        """
        if hasattr(queries, "tolist"):
            queries = queries.tolist()
        if isinstance(queries, (str, bytes)) or not isinstance(queries, Sequence):
            raise TypeError(f"queries must be a list of queries, got {type(queries).__name__}")
        if predictor_url is None:
            if inference_job_id is None:
                raise ValueError("give predictor_url or inference_job_id")
            job = self.get_inference_job(inference_job_id)
            predictor_url = job.get("predictor_url")
            if not predictor_url:
                raise ClientError(
                    f"inference job {inference_job_id} is {job['status']} and has no predictor URL"
                    + ("; wait for it with wait_for_inference_job()" if job["status"] == _INFERENCE_STARTING else "")
                )
        if api_key is None and inference_job_id is not None:
            api_key = self._api_keys.get(int(inference_job_id))
        base = base_url(predictor_url, api=False)
        return self._send(
            "POST",
            base + "/predict",
            base,
            "the predictor",
            json={"queries": list(queries)},
            auth=BearerAuth(api_key) if api_key else None,
        ).json()
