"""The client's calls for model templates (``/models``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from baobab.sdk._transport import Json, PathLike, Transport, query_params

__all__ = ["Models"]


class Models(Transport):
    """Upload, list, show, download and delete model templates."""

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
        return self._call("GET", "/models", params=query_params(task=task))["models"]

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
