"""The client's calls for the versions of inference jobs (``/inference_jobs/<id>/versions``): canaries,
promotion, rollback."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from baobab.sdk._errors import JobFailedError, WaitTimeoutError
from baobab.sdk._transport import Json, Transport, query_params

__all__ = ["InferenceVersions"]


class InferenceVersions(Transport):
    """Say what an inference job serves: versions (named sets of trials) and their share of the traffic.

    Each change is a new revision of the job; its predictor loads the new versions, then
    switches to them without dropping a request. The calls that change the versions
    answer at once, with ``converged`` false until then; ``wait=True`` (or
    :meth:`wait_for_versions`) returns once the predictor serves them.

    Example::

        client.set_versions(job_id, [
            {"name": "v1", "trial_ids": [12, 13], "weight": 0.9},
            {"name": "v2", "trial_ids": [20], "weight": 0.1},   # a canary: a tenth of the requests
        ], wait=True)
        client.promote_version(job_id, "v2")   # all the requests to v2
        client.rollback_versions(job_id)       # back to the canary
    """

    def get_versions(self, inference_job_id: int) -> Json:
        """The versions wanted (``revision``, ``versions``) and served (``served_revision``, ``served_versions``)."""
        return self._call("GET", self._versions_path(inference_job_id))

    def set_versions(
        self,
        inference_job_id: int,
        versions: Sequence[Mapping[str, Any]],
        *,
        wait: bool = False,
        timeout: float | None = None,
    ) -> Json:
        """Serve ``versions``: each ``{"name", "trial_ids", "weight"}`` (weight 1 when left out).

        A request goes to a version with probability weight / sum of the weights. The
        trials may come from any train job of the inference job's app and task. Setting
        what is wanted already changes nothing.

        Args:
            wait: return once the predictor serves them (see :meth:`wait_for_versions`).
            timeout: with ``wait``, seconds to wait at most.

        Raises:
            ApiError: a bad version (``field`` names it, e.g. ``versions[1].weight``); nothing changed.
            JobFailedError, WaitTimeoutError: with ``wait``, see :meth:`wait_for_versions`.
        """
        body = {"versions": [dict(version) for version in versions]}
        answer = self._call("PUT", self._versions_path(inference_job_id), json=body)
        return self._maybe_wait(inference_job_id, answer, wait, timeout)

    def promote_version(
        self, inference_job_id: int, name: str, *, wait: bool = False, timeout: float | None = None
    ) -> Json:
        """Serve version ``name`` alone, with all the requests (it stays loaded: the switch is at once)."""
        path = f"{self._versions_path(inference_job_id)}/{quote(name, safe='')}/promote"
        return self._maybe_wait(inference_job_id, self._call("POST", path), wait, timeout)

    def rollback_versions(self, inference_job_id: int, *, wait: bool = False, timeout: float | None = None) -> Json:
        """Go back to the versions the current ones replaced; calling it again goes one step further back.

        Raises:
            ApiError: 409 when there is nothing earlier to go back to.
        """
        answer = self._call("POST", f"/inference_jobs/{int(inference_job_id)}/rollback")
        return self._maybe_wait(inference_job_id, answer, wait, timeout)

    def get_revisions(self, inference_job_id: int, *, limit: int | None = None) -> list[Json]:
        """The history of the job's versions, newest first: each revision, what made it, its versions."""
        path = f"/inference_jobs/{int(inference_job_id)}/revisions"
        return self._call("GET", path, params=query_params(limit=limit))["revisions"]

    def wait_for_versions(
        self, inference_job_id: int, *, timeout: float | None = None, poll_interval: float = 0.5
    ) -> Json:
        """Polls until the predictor serves the wanted versions; returns :meth:`get_versions`'s answer.

        Raises:
            JobFailedError: the predictor could not load them (``.job["error"]`` says why; it
                serves the versions before), or the inference job ended.
            WaitTimeoutError: still not served after ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            versions = self.get_versions(inference_job_id)
            if versions["converged"]:
                return versions
            if versions["error"]:
                raise JobFailedError(
                    f"inference job {inference_job_id} cannot serve revision {versions['revision']}: "
                    f"{versions['error']}; it serves revision {versions['served_revision']}",
                    job=versions,
                )
            if versions["status"] in ("STOPPED", "ERRORED"):
                raise JobFailedError(f"inference job {inference_job_id} is {versions['status']}", job=versions)
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise WaitTimeoutError(
                    f"inference job {inference_job_id} does not serve revision {versions['revision']} "
                    f"after {timeout:g} s",
                    last=versions,
                )
            time.sleep(poll_interval if remaining is None else min(poll_interval, remaining))

    def _maybe_wait(self, inference_job_id: int, answer: Json, wait: bool, timeout: float | None) -> Json:
        return self.wait_for_versions(inference_job_id, timeout=timeout) if wait else answer

    @staticmethod
    def _versions_path(inference_job_id: int) -> str:
        return f"/inference_jobs/{int(inference_job_id)}/versions"
