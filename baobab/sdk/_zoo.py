"""The client's calls for the model zoo (``/zoo``), HTTP only.

Warm starting a PyTorch module and registering one need torch and the zoo's graph
code: they are :func:`baobab.zoo.warm_start` and :func:`baobab.zoo.register_model`,
which take a :class:`~baobab.sdk.Client`.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from baobab.sdk._transport import API, BearerAuth, Json, Transport, query_params

__all__ = ["Zoo"]


class Zoo(Transport):
    """List and show zoo models, download their parameters, choose and record parents, upload models."""

    def list_zoo_models(self, task: str | None = None) -> list[Json]:
        """Zoo models you may see (yours and the PUBLIC ones; all for an admin), newest first."""
        return self._call("GET", "/zoo/models", params=query_params(task=task))["zoo_models"]

    def get_zoo_model(self, zoo_model_id: int) -> Json:
        """One zoo model, with its architecture ``graph``."""
        return self._call("GET", f"/zoo/models/{int(zoo_model_id)}")

    def download_zoo_params(self, zoo_model_id: int) -> bytes:
        """A zoo model's parameters (safetensors bytes, ``module.<state name>`` tensors)."""
        url = f"{self.url}{API}/zoo/models/{int(zoo_model_id)}/params"
        auth = BearerAuth(self.token) if self.token else None
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
