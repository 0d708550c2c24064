"""Tasks: what a model template is for, and which dataset format feeds it."""

from __future__ import annotations

import enum

__all__ = ["DatasetFormat", "Task"]


class DatasetFormat(enum.StrEnum):
    """How a dataset is laid out on disk (see ``baobab.store`` for the readers)."""

    IMAGE_FILES = "IMAGE_FILES"
    TABULAR = "TABULAR"


class Task(enum.StrEnum):
    """A kind of problem; a template is uploaded for one, a train job is created for one."""

    IMAGE_CLASSIFICATION = "IMAGE_CLASSIFICATION"
    TABULAR_CLASSIFICATION = "TABULAR_CLASSIFICATION"
    TABULAR_REGRESSION = "TABULAR_REGRESSION"

    @property
    def dataset_format(self) -> DatasetFormat:
        """The format of the datasets a job of this task trains and validates on."""
        return DatasetFormat.IMAGE_FILES if self is Task.IMAGE_CLASSIFICATION else DatasetFormat.TABULAR
