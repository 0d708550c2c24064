"""How a trial or a user reaches the zoo: the database, or the admin API.

- :class:`DbZoo`: the metadata database and the artifact store, for a worker on the
  platform's own machine (``baobab up``) and for scripts beside it;
- :class:`TrialHttpZoo`: the admin API's ``/api/v1/zoo/trials/<id>/...`` routes with the
  trial's token, for a cluster worker, which holds no database credentials;
- :class:`HttpZoo`: the admin API's user routes with a logged-in
  :class:`baobab.sdk.Client`, for :func:`baobab.zoo.warm_start` and :func:`baobab.zoo.register_model`.

All three choose the parent where the zoo is (next to the database): only the child's
graph travels, and only the chosen parent's parameters come back. :class:`ZooClient`
is what warm starting needs; :class:`TrialRegistry` what registering a trial needs.
Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import requests
from sqlalchemy import Engine, select

from baobab._http import api_session
from baobab.error_envelope import error_message
from baobab.exceptions import NotFoundError, StoreError
from baobab.model import Task
from baobab.store import ArtifactStore, ModelAccess, ZooModel, params_from_bytes, session_scope
from baobab.zoo._graph import ModelGraph
from baobab.zoo._registry import (
    STATE_PREFIX,
    choose_parent,
    record_parent,
    register_trial,
    register_upload,
    trial_job,
)
from baobab.zoo._selection import FeatureCache, Selection, SelectionPolicy

if TYPE_CHECKING:
    from baobab.sdk import Client

__all__ = ["DbZoo", "HttpZoo", "ParentOffer", "TrialHttpZoo", "TrialRegistry", "ZooClient", "module_state"]

#: Longer than the worker's other calls: a parent's parameters can be large.
_API_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ParentOffer:
    """The zoo's answer to "which parent for this graph?".

    ``zoo_model_id`` is None when there is no warm start (``reason`` says why);
    otherwise ``mapping`` (child node index → parent node index) and ``parent_graph``
    are what :func:`~baobab.zoo.transform_weights` needs besides the parameters, which
    an HTTP client downloads from ``params_url``.
    """

    zoo_model_id: int | None
    similarity: float
    matched_share: float
    mapping: dict[int, int]
    parent_graph: ModelGraph | None
    reason: str
    candidates: int
    seconds: float
    params_url: str | None = None

    @classmethod
    def of(cls, selection: Selection) -> ParentOffer:
        match = selection.match
        chosen = selection.parent_id is not None
        return cls(
            zoo_model_id=selection.parent_id,
            similarity=selection.similarity,
            matched_share=match.matched_share if match else 0.0,
            mapping=dict(match.mapping) if match and chosen else {},
            parent_graph=selection.parent_graph if chosen else None,
            reason=selection.reason,
            candidates=selection.candidates,
            seconds=selection.seconds,
        )

    def to_json(self) -> dict[str, Any]:
        """JSON for the API; the mapping as ``[[child, parent], ...]`` (JSON keys are strings)."""
        return {
            "zoo_model_id": self.zoo_model_id,
            "similarity": self.similarity,
            "matched_share": self.matched_share,
            "mapping": [[child, parent] for child, parent in sorted(self.mapping.items())],
            "parent_graph": None if self.parent_graph is None else self.parent_graph.to_json(),
            "reason": self.reason,
            "candidates": self.candidates,
            "seconds": self.seconds,
            "params_url": self.params_url,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ParentOffer:
        graph = data.get("parent_graph")
        return cls(
            zoo_model_id=data.get("zoo_model_id"),
            similarity=float(data.get("similarity", 0.0)),
            matched_share=float(data.get("matched_share", 0.0)),
            mapping={int(child): int(parent) for child, parent in data.get("mapping") or ()},
            parent_graph=None if graph is None else ModelGraph.from_json(graph, field="parent_graph"),
            reason=str(data.get("reason", "")),
            candidates=int(data.get("candidates", 0)),
            seconds=float(data.get("seconds", 0.0)),
            params_url=data.get("params_url"),
        )


class ZooClient(Protocol):
    """What warm starting needs from the zoo."""

    def choose_parent(
        self, graph: ModelGraph, *, task: Task | str | None = None, trial_id: int | None = None
    ) -> ParentOffer:
        """The parent for ``graph`` among the zoo models of ``task``.

        With ``trial_id``: among those the trial's job owner may see, for the job's task
        (``task`` may then be left out).
        """
        ...

    def parent_params(self, offer: ParentOffer) -> dict[str, np.ndarray]:
        """The offered parent's module state (state-dict names → arrays)."""
        ...

    def record_parent(self, zoo_model_id: int, similarity: float, *, trial_id: int | None = None) -> None:
        """Note the warm start in the parent's retention value, and on the trial's row."""
        ...


class TrialRegistry(Protocol):
    """What adding a finished trial's model needs from the zoo."""

    def register_trial(self, trial_id: int, graph: ModelGraph) -> int:
        """Add the trial's model (its score and parameters are the trial's); its zoo id."""
        ...


def module_state(params: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The module's state from TorchModel parameters: the ``module.`` entries, prefix removed."""
    return {
        key[len(STATE_PREFIX) :]: value
        for key, value in params.items()
        if key.startswith(STATE_PREFIX) and isinstance(value, np.ndarray)
    }


class DbZoo:
    """The zoo through the metadata database and the artifact store (a worker on the platform's machine).

    Args:
        engine: the metadata database.
        artifacts: where parameters are.
        owner_id: whose models a call without ``trial_id`` may start from, and who
            owns models registered with :meth:`register_model`.
        policy: how parents are chosen.
        cache: graph features kept across calls (one per process is best).
        budget_bytes: the zoo's storage budget, enforced after each registration.
    """

    def __init__(
        self,
        engine: Engine,
        artifacts: ArtifactStore,
        *,
        owner_id: int | None = None,
        policy: SelectionPolicy | None = None,
        cache: FeatureCache | None = None,
        budget_bytes: int | None = None,
    ) -> None:
        self.engine = engine
        self.artifacts = artifacts
        self.owner_id = owner_id
        self.policy = policy
        self.cache = cache or FeatureCache()
        self.budget_bytes = budget_bytes

    def _owner(self) -> int:
        if self.owner_id is None:
            raise ValueError("DbZoo needs owner_id for calls without a trial_id")
        return self.owner_id

    def choose_parent(
        self, graph: ModelGraph, *, task: Task | str | None = None, trial_id: int | None = None
    ) -> ParentOffer:
        if trial_id is not None:
            owner_id, job_task = trial_job(self.engine, trial_id)
            if task is not None and Task(task) is not job_task:
                raise ValueError(f"trial {trial_id} is of a {job_task} job, not {task}")
            task = job_task
        elif task is None:
            raise ValueError("choose_parent needs a task, or a trial_id to take its job's")
        else:
            owner_id = self._owner()
        selection = choose_parent(
            self.engine, graph, task=Task(task), owner_id=owner_id, policy=self.policy, cache=self.cache
        )
        return ParentOffer.of(selection)

    def parent_params(self, offer: ParentOffer) -> dict[str, np.ndarray]:
        with session_scope(self.engine) as session:
            key = session.scalar(select(ZooModel.params_path).where(ZooModel.id == offer.zoo_model_id))
        if key is None:
            raise NotFoundError(f"no zoo model with id {offer.zoo_model_id}")
        return module_state(params_from_bytes(self.artifacts.get_bytes(key)))

    def record_parent(self, zoo_model_id: int, similarity: float, *, trial_id: int | None = None) -> None:
        record_parent(self.engine, zoo_model_id, similarity, trial_id=trial_id)

    def register_trial(self, trial_id: int, graph: ModelGraph) -> int:
        return register_trial(self.engine, self.artifacts, trial_id, graph, budget_bytes=self.budget_bytes).id

    def register_model(
        self, graph: ModelGraph, params: bytes, *, score: float, task: Task | str, name: str, access: str = "PRIVATE"
    ) -> int:
        """Add a model trained elsewhere (``params``: TorchModel-style safetensors), owned by ``owner_id``."""
        registered = register_upload(
            self.engine,
            self.artifacts,
            owner_id=self._owner(),
            graph=graph,
            params=params,
            score=score,
            task=Task(task),
            name=name,
            access=ModelAccess(access),
            budget_bytes=self.budget_bytes,
        )
        return registered.id


class TrialHttpZoo:
    """The zoo through the admin API with one trial's token: what a cluster worker uses for that trial.

    Every call must name that trial (``trial_id``); the API chooses among the zoo
    models its job's owner may see. Failures are :class:`~baobab.exceptions.StoreError`
    with the API's message, like the worker's other calls.

    Args:
        api_url: the admin API (``http://host:port``).
        token: the trial's token (``baobab.store.issue_trial_token``).
        session: an HTTP session; by default one that retries through short outages.
    """

    def __init__(self, api_url: str, token: str, *, session: requests.Session | None = None) -> None:
        self.base = api_url.rstrip("/").removesuffix("/api/v1")
        self._headers = {"Authorization": f"Bearer {token}"}
        self._http = session or api_session()

    def _request(self, method: str, path: str, what: str, body: Any = None) -> requests.Response:
        url = self.base + path
        try:
            response = self._http.request(method, url, json=body, headers=self._headers, timeout=_API_TIMEOUT_S)
        except requests.RequestException as e:
            raise StoreError(f"cannot reach the admin API at {url}: {e}") from e
        if not 200 <= response.status_code < 300:
            message = error_message(response.text, response.status_code)
            raise StoreError(f"the admin API refused {what} ({response.status_code}): {message}")
        return response

    @staticmethod
    def _trial(trial_id: int | None) -> int:
        if trial_id is None:
            raise ValueError("TrialHttpZoo works for one trial: pass its trial_id")
        return int(trial_id)

    def choose_parent(
        self, graph: ModelGraph, *, task: Task | str | None = None, trial_id: int | None = None
    ) -> ParentOffer:
        """The parent for the trial's model, for its job's task (which the API knows: ``task`` is not sent)."""
        path = f"/api/v1/zoo/trials/{self._trial(trial_id)}/parent"
        return ParentOffer.from_json(
            self._request("POST", path, "the parent choice", {"graph": graph.to_json()}).json()
        )

    def parent_params(self, offer: ParentOffer) -> dict[str, np.ndarray]:
        if offer.params_url is None:
            raise ValueError("this offer has no params_url: it names no parent")
        return module_state(
            params_from_bytes(self._request("GET", offer.params_url, "the parent's parameters").content)
        )

    def model_params(self, zoo_model_id: int, *, trial_id: int | None = None) -> dict[str, np.ndarray]:
        """The module state of a zoo model the trial's job owner may see (a base the template trains on)."""
        path = f"/api/v1/zoo/trials/{self._trial(trial_id)}/params/{int(zoo_model_id)}"
        response = self._request("GET", path, f"the parameters of zoo model {zoo_model_id}")
        return module_state(params_from_bytes(response.content))

    def record_parent(self, zoo_model_id: int, similarity: float, *, trial_id: int | None = None) -> None:
        path = f"/api/v1/zoo/trials/{self._trial(trial_id)}/warm_start"
        self._request("POST", path, "the warm start", {"zoo_model_id": zoo_model_id, "similarity": similarity})

    def register_trial(self, trial_id: int, graph: ModelGraph) -> int:
        path = f"/api/v1/zoo/trials/{self._trial(trial_id)}/model"
        return int(self._request("POST", path, "the trial's model", {"graph": graph.to_json()}).json()["id"])


class HttpZoo:
    """The zoo through the admin API's user routes, with a logged-in :class:`baobab.sdk.Client`.

    Parents are chosen among the models the client's user may see (or, with
    ``trial_id``, those of the owner of a trial the user may see). Errors are the
    client's (:class:`~baobab.sdk.ApiError` and the like).
    """

    def __init__(self, client: Client) -> None:
        self.client = client

    def choose_parent(
        self, graph: ModelGraph, *, task: Task | str | None = None, trial_id: int | None = None
    ) -> ParentOffer:
        if task is None:
            raise ValueError("HttpZoo.choose_parent needs the task")
        return ParentOffer.from_json(self.client.choose_zoo_parent(graph.to_json(), task=str(task), trial_id=trial_id))

    def parent_params(self, offer: ParentOffer) -> dict[str, np.ndarray]:
        if offer.zoo_model_id is None:
            raise ValueError("this offer names no parent")
        return module_state(params_from_bytes(self.client.download_zoo_params(offer.zoo_model_id)))

    def record_parent(self, zoo_model_id: int, similarity: float, *, trial_id: int | None = None) -> None:
        self.client.record_zoo_parent(zoo_model_id, similarity, trial_id=trial_id)

    def register_model(
        self, graph: ModelGraph, params: bytes, *, score: float, task: Task | str, name: str, access: str = "PRIVATE"
    ) -> int:
        """Add a model trained elsewhere (``params``: TorchModel-style safetensors), owned by the client's user."""
        answer = self.client.upload_zoo_model(
            graph.to_json(), params, score=score, task=str(task), name=name, access=access
        )
        return int(answer["id"])
