"""The Python client of the admin API and of the predictors: HTTP only, through ``requests``.

Every call is one or a few HTTP requests under ``<url>/api/v1`` (see the platform's
routes); nothing here touches the database or the artifact store, so the client runs
anywhere the server can be reached. Answers are the API's JSON as plain dicts and
lists; list routes are unwrapped (``list_models()`` returns the list, not
``{"models": [...]}``), paged routes are not (``get_trials`` keeps ``total``).

Failures raise :class:`~baobab.sdk.ApiError` (a non-2xx answer, with the API's code,
message and field) or :class:`~baobab.sdk.ServerUnreachableError` (no answer at all).
"""

from __future__ import annotations

import email.message
import io
import json
import os
import secrets
import socket
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from http import HTTPStatus
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote, urlsplit

import requests
from tqdm import tqdm

from baobab.sdk._errors import ApiError, ClientError, JobFailedError, ServerUnreachableError, WaitTimeoutError

__all__ = ["DEFAULT_URL", "Client"]

#: Where ``baobab up`` serves the admin API unless told otherwise.
DEFAULT_URL = "http://127.0.0.1:8100"

_API = "/api/v1"
_JOB_FINISHED = frozenset({"COMPLETED", "ERRORED", "STOPPED"})
_TRIAL_FINISHED = ("COMPLETED", "ERRORED", "STOPPED", "CANCELLED")
_INFERENCE_STARTING = "STARTING"
_CHUNK = 1 << 20
_BAR = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} trials [{elapsed}{postfix}]"
_COUNTER = "{desc}: {n_fmt} trials [{elapsed}{postfix}]"
_ERROR_TEXT_CHARS = 300

Json = dict[str, Any]
PathLike = str | os.PathLike[str]


class _Bearer(requests.auth.AuthBase):
    """``Authorization: Bearer <token>``; set as ``auth`` so that no ``.netrc`` entry replaces it."""

    def __init__(self, token: str) -> None:
        self.token = token

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Bearer {self.token}"
        return request


class _MultipartBody:
    """A ``multipart/form-data`` body of text fields and one file, read from disk in blocks.

    ``requests`` builds a ``files=`` upload in memory; a dataset can be gigabytes, so
    the body is streamed instead, with its length known up front (no chunked encoding).
    """

    def __init__(self, fields: Mapping[str, str], file_field: str, path: Path, file_type: str) -> None:
        self.boundary = secrets.token_hex(16)
        head = io.BytesIO()
        for name, value in fields.items():
            head.write(self._part_header(name, None, None))
            head.write(value.encode("utf-8") + b"\r\n")
        head.write(self._part_header(file_field, path.name, file_type))
        tail = f"\r\n--{self.boundary}--\r\n".encode()
        self._file = open(path, "rb")  # closed by close(), once requests has sent it
        self._length = head.tell() + os.fstat(self._file.fileno()).st_size + len(tail)
        head.seek(0)
        self._parts: list[IO[bytes]] = [head, self._file, io.BytesIO(tail)]

    @property
    def content_type(self) -> str:
        return f"multipart/form-data; boundary={self.boundary}"

    def _part_header(self, name: str, filename: str | None, file_type: str | None) -> bytes:
        disposition = f'form-data; name="{name}"'
        if filename is not None:
            # As browsers do: the characters that would end the header or the quoted string are %-escaped.
            safe = filename.replace("\r", "%0D").replace("\n", "%0A").replace('"', "%22")
            disposition += f'; filename="{safe}"'
        lines = [f"--{self.boundary}", f"Content-Disposition: {disposition}"]
        if file_type is not None:
            lines.append(f"Content-Type: {file_type}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8")

    def __len__(self) -> int:
        return self._length

    def read(self, size: int = -1) -> bytes:
        out = bytearray()
        while self._parts and (size < 0 or len(out) < size):
            block = self._parts[0].read(-1 if size < 0 else size - len(out))
            if block:
                out += block
            else:
                self._parts.pop(0)
        return bytes(out)

    def __iter__(self) -> Iterator[bytes]:
        return iter(lambda: self.read(_CHUNK), b"")

    def close(self) -> None:
        self._file.close()


class Client:
    """A session with one Baobab server.

    Args:
        url: where the admin API is served (``http://HOST:PORT``; a trailing
            ``/api/v1`` is accepted too).
        token: a bearer token from an earlier :meth:`login`, or None to log in.
        timeout: seconds to wait for a connection and, after that, between bytes of
            an answer (an upload the server checks for long may need more); None waits
            forever.

    Example::

        client = Client("http://127.0.0.1:8100")
        client.login("me@example.com", "password")
        train = client.create_dataset("iris-train", "TABULAR", "train.csv")
    """

    def __init__(self, url: str = DEFAULT_URL, token: str | None = None, *, timeout: float | None = 60.0) -> None:
        self.url = _base_url(url)
        self.token = token
        self.timeout = timeout
        self._session = requests.Session()
        self._session.headers["User-Agent"] = f"baobab-sdk requests/{requests.__version__}"
        self._api_keys: dict[int, str] = {}

    def __repr__(self) -> str:
        return f"Client({self.url!r}, token={'...' if self.token else None})"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the pooled connections."""
        self._session.close()

    # ---- auth and users -------------------------------------------------------------------------------------

    def login(self, email: str, password: str) -> Json:
        """Trades an email and password for a token, which this client uses from now on.

        Returns:
            ``{"token", "expires_in", "user"}``.
        """
        answer = self._call("POST", "/tokens", json={"email": email, "password": password}, auth=False)
        self.token = answer["token"]
        return answer

    def create_user(self, email: str, password: str, role: str) -> Json:
        """Creates a user (admins only); ``role`` is SUPERADMIN, ADMIN, MODEL_DEVELOPER or APP_DEVELOPER."""
        return self._call("POST", "/users", json={"email": email, "password": password, "role": role})

    def list_users(self) -> list[Json]:
        """Every user, oldest first (admins only)."""
        return self._call("GET", "/users")["users"]

    def get_user(self, user_id: int) -> Json:
        return self._call("GET", f"/users/{int(user_id)}")

    def update_user(self, user_id: int, *, role: str | None = None, banned: bool | None = None) -> Json:
        """Changes a user's role and/or ban (admins only); answers the user as it is afterwards."""
        body: Json = {}
        if role is not None:
            body["role"] = role
        if banned is not None:
            body["banned"] = banned
        return self._call("PATCH", f"/users/{int(user_id)}", json=body)

    def ban_user(self, user_id: int) -> Json:
        """Bans a user: their tokens stop working at once (users are never deleted)."""
        return self.update_user(user_id, banned=True)

    def unban_user(self, user_id: int) -> Json:
        return self.update_user(user_id, banned=False)

    # ---- datasets ---------------------------------------------------------------------------------------------

    def create_dataset(self, name: str, format: str, path: PathLike, target: str | None = None) -> Json:
        """Uploads a dataset file, streamed from disk; the server decodes it before accepting it.

        Args:
            name: a name to show.
            format: ``IMAGE_FILES`` (a zip of images with images.csv) or ``TABULAR`` (a CSV).
            path: the file.
            target: for TABULAR, the target column, so the server checks every feature is numeric.
        """
        fields = {"name": name, "format": format}
        if target is not None:
            fields["target"] = target
        return self._upload("/datasets", fields, Path(path), "application/octet-stream")

    def list_datasets(self) -> list[Json]:
        """Your datasets (every dataset for an admin), newest first."""
        return self._call("GET", "/datasets")["datasets"]

    def get_dataset(self, dataset_id: int) -> Json:
        return self._call("GET", f"/datasets/{int(dataset_id)}")

    def delete_dataset(self, dataset_id: int) -> None:
        """Deletes a dataset and its file; refused (409) while a train job uses it."""
        self._call("DELETE", f"/datasets/{int(dataset_id)}")

    # ---- model templates -----------------------------------------------------------------------------------

    def create_model(
        self,
        path: PathLike,
        name: str | None = None,
        *,
        task: str,
        class_name: str,
        dependencies: Mapping[str, str] | None = None,
        access: str = "PRIVATE",
    ) -> Json:
        """Uploads a model template (a .py file); the server loads and checks it before accepting it.

        Args:
            path: the template's .py file.
            name: a name to show; the file's stem when None.
            task: the task it is for (IMAGE_CLASSIFICATION, TABULAR_CLASSIFICATION, ...).
            class_name: the template class in the file.
            dependencies: package name to version string, installed where it runs.
            access: PRIVATE (you and admins) or PUBLIC (every user may train it).
        """
        path = Path(path)
        fields = {"name": name if name is not None else path.stem, "task": task, "class_name": class_name}
        fields["dependencies"] = json.dumps(dict(dependencies or {}))
        fields["access"] = access
        return self._upload("/models", fields, path, "text/x-python")

    def list_models(self, task: str | None = None) -> list[Json]:
        """Your templates and the PUBLIC ones (all for an admin), by id; ``task`` filters."""
        return self._call("GET", "/models", params=_params(task=task))["models"]

    def get_model(self, model_id: int) -> Json:
        return self._call("GET", f"/models/{int(model_id)}")

    def download_model(self, model_id: int, dest: PathLike | None = None) -> Path:
        """Saves a template's .py file to ``dest`` (a file, or a folder to keep the server's file name).

        Returns:
            The path written; with no ``dest``, the server's file name in the current folder.
        """
        return self._download(f"/models/{int(model_id)}/file", dest, f"model-{int(model_id)}.py")

    def delete_model(self, model_id: int) -> None:
        """Deletes a template; refused (409) while a train job uses it."""
        self._call("DELETE", f"/models/{int(model_id)}")

    # ---- train jobs ------------------------------------------------------------------------------------------

    def create_train_job(
        self,
        app: str,
        task: str,
        train_dataset_id: int,
        val_dataset_id: int,
        model_ids: Sequence[int],
        budget: Mapping[str, Any],
        train_args: Mapping[str, Any] | None = None,
        strategy: str | None = None,
    ) -> Json:
        """Starts tuning ``model_ids`` on a task; the job is version ``app_version`` of ``app``.

        Args:
            budget: e.g. ``{"MODEL_TRIAL_COUNT": 20, "GPU_COUNT": 0}`` or ``{"TIME_HOURS": 0.5}``;
                MODEL_TRIAL_COUNT is per model template.
            train_args: passed to each template's ``train(**train_args)``.
            strategy: a search strategy name, or None for ``auto``.
        """
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
        if strategy is not None:
            body["strategy"] = strategy
        return self._call("POST", "/train_jobs", json=body)

    def get_train_job(self, app: str, version: int | None = None) -> Json:
        """One version of an app's train job; the latest when ``version`` is None."""
        return self._call("GET", _job_path(app, version))

    def list_train_jobs(self, app: str | None = None) -> list[Json]:
        """Your train jobs (all for an admin), newest first; ``app`` filters."""
        return self._call("GET", "/train_jobs", params=_params(app=app))["train_jobs"]

    def stop_train_job(self, app: str, version: int | None = None) -> Json:
        """Asks a job to stop (it goes STOPPING, then STOPPED); a finished job is answered unchanged."""
        return self._call("POST", _job_path(app, self._version(app, version)) + "/stop")

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
        total = _trial_total(job)
        bar_format = _BAR if total is not None else _COUNTER  # no rate: trials finish in bursts between polls
        with tqdm(
            total=total, initial=_finished_trials(job), desc=label, bar_format=bar_format, disable=not progress
        ) as bar:
            while True:
                _show_job(bar, job)
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

    # ---- trials ----------------------------------------------------------------------------------------------

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
        params = _params(page=page, per_page=per_page, sort=sort, status=status, model_id=model_id)
        return self._call("GET", _job_path(app, self._version(app, version)) + "/trials", params=params)

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

    def get_best_trials(self, app: str, version: int | None = None, k: int = 2) -> list[Json]:
        """The ``k`` best trials that have parameters (COMPLETED or STOPPED), best first."""
        path = _job_path(app, self._version(app, version)) + "/best_trials"
        return self._call("GET", path, params={"k": k})["trials"]

    def get_trial(self, trial_id: int) -> Json:
        """One trial, with the full ``traceback`` of an ERRORED one."""
        return self._call("GET", f"/trials/{int(trial_id)}")

    def get_trial_logs(self, trial_id: int, *, after: int | None = None, limit: int | None = None) -> list[Json]:
        """Log lines ``{id, time, line}`` in order; ``after`` (a line's id) gets only newer ones."""
        params = _params(after=after, limit=limit)
        return self._call("GET", f"/trials/{int(trial_id)}/logs", params=params)["logs"]

    def get_trial_metrics(self, trial_id: int) -> list[Json]:
        """Interim metrics ``{step, time, metrics}`` in the order the trial reported them."""
        return self._call("GET", f"/trials/{int(trial_id)}/metrics")["metrics"]

    def download_trial_params(self, trial_id: int, dest: PathLike | None = None) -> Path:
        """Saves a trial's parameters (safetensors) to ``dest`` (a file or a folder); returns the path."""
        trial_id = int(trial_id)
        return self._download(f"/trials/{trial_id}/params", dest, f"trial-{trial_id}.safetensors")

    # ---- inference jobs and predictions -----------------------------------------------------------------------

    def create_inference_job(
        self,
        app: str,
        version: int | None = None,
        *,
        k: int | None = None,
        trial_ids: Sequence[int] | None = None,
        public: bool = False,
        wait: bool = False,
        timeout: float | None = None,
    ) -> Json:
        """Serves the best ``k`` trials (default 2) of a train job, or the given ``trial_ids``.

        The answer holds the ``api_key`` that :meth:`predict` needs; it is shown only
        here (this client remembers it for ``predict(inference_job_id=...)``).

        Args:
            version: the train job's version; the latest when None.
            public: predictions need no API key.
            wait: return only once the predictor answers (``predictor_url`` is set).
            timeout: with ``wait``, seconds to wait at most.

        Raises:
            WaitTimeoutError, JobFailedError: with ``wait``, see :meth:`wait_for_inference_job`.
        """
        if k is not None and trial_ids is not None:
            raise ValueError("give k (the best k trials) or trial_ids, not both")
        body: Json = {"app": app, "public": public}
        if version is not None:
            body["app_version"] = version
        if k is not None:
            body["k"] = k
        if trial_ids is not None:
            body["trial_ids"] = list(trial_ids)
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
        return self._call("GET", "/inference_jobs", params=_params(app=app))["inference_jobs"]

    def stop_inference_job(self, inference_job_id: int) -> Json:
        """Stops serving: the predictor process ends and its URL stops answering."""
        return self._call("POST", f"/inference_jobs/{int(inference_job_id)}/stop")

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
        base = _base_url(predictor_url, api=False)
        return self._send(
            "POST",
            base + "/predict",
            base,
            "the predictor",
            json={"queries": list(queries)},
            auth=_Bearer(api_key) if api_key else None,
        ).json()

    # ---- model zoo -------------------------------------------------------------------------------------------

    def list_zoo_models(self, task: str | None = None) -> list[Json]:
        """Zoo models you may see (yours and the PUBLIC ones; all for an admin), newest first."""
        return self._call("GET", "/zoo/models", params=_params(task=task))["zoo_models"]

    def get_zoo_model(self, zoo_model_id: int) -> Json:
        """One zoo model, with its architecture ``graph``."""
        return self._call("GET", f"/zoo/models/{int(zoo_model_id)}")

    def download_zoo_params(self, zoo_model_id: int) -> bytes:
        """A zoo model's parameters (safetensors bytes, ``module.<state name>`` tensors)."""
        url = f"{self.url}{_API}/zoo/models/{int(zoo_model_id)}/params"
        auth = _Bearer(self.token) if self.token else None
        with self._send("GET", url, self.url, "the Baobab server", auth=auth) as response:
            return response.content

    def choose_zoo_parent(self, graph: Mapping[str, Any], *, task: str, trial_id: int | None = None) -> Json:
        """The zoo's parent for a model graph (``baobab.zoo.ModelGraph.to_json()``); ``zoo_model_id`` None: none fits.

        Args:
            trial_id: choose for this trial (among the models its job's owner may see).
        """
        body: Json = {"graph": dict(graph), "task": task}
        if trial_id is not None:
            body["trial_id"] = int(trial_id)
        return self._call("POST", "/zoo/parent", json=body)

    def record_zoo_parent(self, zoo_model_id: int, similarity: float, *, trial_id: int | None = None) -> None:
        """Records a warm start from a zoo model (on the trial's row when ``trial_id`` is given)."""
        body: Json = {"similarity": float(similarity)}
        if trial_id is not None:
            body["trial_id"] = int(trial_id)
        self._call("POST", f"/zoo/models/{int(zoo_model_id)}/chosen", json=body)

    def upload_zoo_model(
        self,
        graph: Mapping[str, Any],
        params: bytes,
        *,
        score: float,
        task: str,
        name: str,
        access: str = "PRIVATE",
    ) -> Json:
        """Adds a model to the zoo from its graph and its parameters (safetensors bytes)."""
        fields = {"graph": json.dumps(dict(graph)), "score": repr(float(score)), "task": task, "name": name}
        fields["access"] = access
        with tempfile.TemporaryDirectory(prefix="baobab-zoo-") as folder:
            path = Path(folder) / "params.safetensors"
            path.write_bytes(params)
            return self._upload("/zoo/models", fields, path, "application/octet-stream")

    def warm_start(self, module: Any, example_input: Any, *, task: str, seed: int = 0) -> Json:
        """Loads the weights of the zoo's best parent, transformed to fit, into a PyTorch module.

        The module is traced on ``example_input`` (a batch), the server chooses the
        parent among the zoo models you may see, and its parameters are downloaded and
        transformed here (needs torch). Nothing is loaded when no parent fits.

        Returns:
            ``{"zoo_model_id", "similarity", "matched_share", "transferred_share",
            "lr_scale", "reason"}``; ``zoo_model_id`` is None (and ``reason`` says why)
            when the module keeps its own weights.
        """
        from baobab.zoo import HttpZoo, warm_start_module

        reasons: list[str] = []
        result = warm_start_module(HttpZoo(self), module, example_input, task=task, seed=seed, log=reasons.append)
        if result is None:
            return {"zoo_model_id": None, "similarity": 0.0, "matched_share": 0.0, "transferred_share": 0.0,
                    "lr_scale": 1.0, "reason": "; ".join(reasons)}  # fmt: skip
        module.load_state_dict(result.state)
        return {
            "zoo_model_id": result.zoo_model_id,
            "similarity": result.similarity,
            "matched_share": result.matched_share,
            "transferred_share": result.transferred_share,
            "lr_scale": result.lr_scale,
            "reason": result.report.summary(),
        }

    def register_model(
        self,
        module: Any,
        example_input: Any,
        *,
        score: float,
        task: str,
        name: str | None = None,
        access: str = "PRIVATE",
    ) -> Json:
        """Adds a trained PyTorch module to the zoo (traced on ``example_input``; needs torch); the zoo model.

        Args:
            score: its validation score (higher is better), which ranks it as a parent.
            name: a name to show; the module's class name when None.
            access: PRIVATE (you and admins) or PUBLIC (every user's models may start from it).
        """
        from baobab.zoo import module_params, trace_graph

        graph = trace_graph(module, example_input)
        name = name if name is not None else type(module).__name__
        return self.upload_zoo_model(
            graph.to_json(), module_params(module), score=score, task=task, name=name, access=access
        )

    # ---- plumbing --------------------------------------------------------------------------------------------

    def _version(self, app: str, version: int | None) -> int:
        return int(version) if version is not None else self.get_train_job(app)["app_version"]

    def _call(
        self, method: str, path: str, *, json: Any = None, params: Mapping[str, Any] | None = None, auth: bool = True
    ) -> Any:
        """One request to the admin API; the decoded JSON answer, or None for 204."""
        response = self._send(
            method,
            self.url + _API + path,
            self.url,
            "the Baobab server",
            json=json,
            params=params,
            auth=_Bearer(self.token) if auth and self.token else None,
        )
        if response.status_code == 204:
            return None
        return _decode(response)

    def _upload(self, path: str, fields: Mapping[str, str], file: Path, file_type: str) -> Json:
        try:
            body = _MultipartBody(fields, "file", file, file_type)
        except OSError as e:
            raise ClientError(f"cannot read {file}: {e.strerror or e}") from None
        try:
            response = self._send(
                "POST",
                self.url + _API + path,
                self.url,
                "the Baobab server",
                data=body,
                headers={"Content-Type": body.content_type},
                auth=_Bearer(self.token) if self.token else None,
            )
        finally:
            body.close()
        return _decode(response)

    def _download(self, path: str, dest: PathLike | None, fallback_name: str) -> Path:
        response = self._send(
            "GET",
            self.url + _API + path,
            self.url,
            "the Baobab server",
            stream=True,
            auth=_Bearer(self.token) if self.token else None,
        )
        with response:
            name = _attachment_name(response) or fallback_name
            target = Path(dest) if dest is not None else Path(name)
            if target.is_dir():
                target = target / name
            # Written beside the target, then renamed: a broken download leaves no half file.
            fd, partial = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
            try:
                with os.fdopen(fd, "wb") as out:
                    for chunk in response.iter_content(_CHUNK):
                        out.write(chunk)
                os.replace(partial, target)
            except BaseException:
                os.unlink(partial)
                raise
        return target

    def _send(
        self, method: str, url: str, base: str, what: str, *, json: Any = None, auth: Any = None, **kwargs: Any
    ) -> requests.Response:
        """Sends a request; raises :class:`ApiError` for a non-2xx answer and
        :class:`ServerUnreachableError` when no answer comes."""
        if json is not None:
            kwargs["data"] = _dumps(json)
            kwargs["headers"] = {**kwargs.get("headers", {}), "Content-Type": "application/json"}
        try:
            response = self._session.request(method, url, auth=auth, timeout=self.timeout, **kwargs)
        except requests.Timeout:
            limit = f"within {self.timeout:g} s" if self.timeout is not None else "in time"
            raise ServerUnreachableError(f"{what} at {base} did not answer {limit}", url=base) from None
        except requests.ConnectionError as e:
            raise ServerUnreachableError(_connection_message(e, base, what), url=base) from None
        if not 200 <= response.status_code < 300:
            with response:
                raise _api_error(response, base)
        return response


def _base_url(url: str, *, api: bool = True) -> str:
    """``url`` without a trailing slash (nor a trailing ``/api/v1`` for the admin API)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{url!r} is not an http:// or https:// URL; expected e.g. {DEFAULT_URL}")
    url = url.rstrip("/")
    if api and url.endswith(_API):
        url = url[: -len(_API)]
    return url


def _job_path(app: str, version: int | None) -> str:
    path = f"/train_jobs/{quote(app, safe='')}"
    return path if version is None else f"{path}/{int(version)}"


def _params(**values: Any) -> dict[str, Any]:
    return {name: value for name, value in values.items() if value is not None}


def _dumps(body: Any) -> bytes:
    def default(value: Any) -> Any:  # NumPy arrays and scalars, without importing NumPy
        if hasattr(value, "tolist"):
            return value.tolist()
        raise TypeError(f"{type(value).__name__} cannot be sent as JSON")

    return json.dumps(body, default=default).encode("utf-8")


def _decode(response: requests.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        kind = response.headers.get("Content-Type", "no content type").split(";")[0]
        raise ClientError(
            f"{response.url} answered {response.status_code} with {kind}, not JSON; is this the URL of a Baobab server?"
        ) from None


def _api_error(response: requests.Response, base: str) -> ApiError:
    status = response.status_code
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        field = error.get("field")
        code = error.get("code") if isinstance(error.get("code"), str) else _status_code(status)
        return ApiError(status, code, error["message"], field if isinstance(field, str) else None, body=body)
    # Not Baobab's error body: a proxy, another server on that port, a crash before the app.
    text = " ".join(response.text.split())
    if len(text) > _ERROR_TEXT_CHARS:
        text = text[:_ERROR_TEXT_CHARS] + "..."
    kind = response.headers.get("Content-Type", "no content type").split(";")[0]
    message = f"{response.request.method} {response.url} answered {status} {response.reason or ''}".rstrip()
    message += f" with {kind}" + (f": {text}" if text else "")
    if body is None:
        message += f" (not a Baobab error; is {base} the right URL?)"
    return ApiError(status, _status_code(status), message, None, body=body)


def _status_code(status: int) -> str:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "error"
    return phrase.lower().replace(" ", "_").replace("-", "_")


def _connection_message(error: requests.ConnectionError, base: str, what: str) -> str:
    cause = _root_cause(error)
    if isinstance(cause, ConnectionRefusedError):
        hint = "is `baobab up` running, and is this its URL?" if what == "the Baobab server" else "is it running?"
        return f"cannot connect to {what} at {base}: connection refused; {hint}"
    if isinstance(cause, socket.gaierror):
        return f"cannot connect to {what} at {base}: unknown host ({cause.strerror or cause})"
    reason = getattr(cause, "strerror", None) or str(cause)
    return f"cannot connect to {what} at {base}: {reason}"


def _root_cause(error: BaseException) -> BaseException:
    """The innermost exception behind requests' and urllib3's wrappers (an ``OSError`` mostly)."""
    seen: set[int] = set()
    current: BaseException = error
    while id(current) not in seen:
        seen.add(id(current))
        nested = getattr(current, "reason", None)
        if not isinstance(nested, BaseException):
            nested = next((arg for arg in current.args if isinstance(arg, BaseException)), None)
        if nested is None:
            nested = current.__cause__ or current.__context__
        if nested is None:
            break
        current = nested
    return current


def _attachment_name(response: requests.Response) -> str | None:
    """The file name in ``Content-Disposition``, stripped of any folder."""
    header = response.headers.get("Content-Disposition")
    if not header:
        return None
    message = email.message.Message()
    message["Content-Disposition"] = header
    name = message.get_filename()
    if not name:
        return None
    name = os.path.basename(name.replace("\\", "/"))
    return name if name not in ("", ".", "..") else None


def _trial_total(job: Json) -> int | None:
    count = (job.get("budget") or {}).get("MODEL_TRIAL_COUNT")
    return count * max(len(job.get("sub_jobs") or ()), 1) if isinstance(count, int) else None


def _finished_trials(job: Json) -> int:
    counts = job.get("trial_counts") or {}
    return sum(int(counts.get(state, 0)) for state in _TRIAL_FINISHED)


def _show_job(bar: tqdm, job: Json) -> None:
    finished = _finished_trials(job)
    if bar.total is not None and finished > bar.total:
        bar.total = finished
    bar.n = finished
    postfix = {"status": job["status"]}
    if job.get("best_score") is not None:
        postfix["best"] = f"{job['best_score']:.4g}"
    bar.set_postfix(postfix, refresh=True)
