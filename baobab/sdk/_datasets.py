"""The client's calls for datasets (``/datasets``): streamed uploads, listing, deleting."""

from __future__ import annotations

from pathlib import Path

from baobab.sdk._transport import Json, PathLike, Transport

__all__ = ["Datasets"]


class Datasets(Transport):
    """Upload, list, show and delete datasets."""

    def create_dataset(self, name: str, path: PathLike, *, format: str, target: str | None = None) -> Json:
        """Uploads a dataset file, streamed from disk; the server decodes it before accepting it.

        Args:
            name: a name to show.
            path: the file.
            format: ``IMAGE_FILES`` (a zip of images with images.csv) or ``TABULAR`` (a CSV).
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
