"""The query format: what ``predict(queries)`` receives for each dataset format.

A template decides what one query is, but the platform has to make queries up when
it checks a template (do dumped parameters predict the same after reloading?) and
the predictor receives them as JSON. The convention, per dataset format:

- ``IMAGE_FILES``: one image as nested lists of ints in 0..255, ``H x W`` for
  grayscale or ``H x W x C``, the layout :func:`baobab.store.read_image_files` decodes;
- ``TABULAR``: one row of feature values as a list of floats, in the order of the
  CSV's columns less the target column (as :func:`baobab.store.read_tabular` reads).

Templates turn queries back into arrays with ``np.asarray(queries)``.
"""

from __future__ import annotations

from typing import Any

from baobab.enums import DatasetFormat, Task
from baobab.store import DEFAULT_TARGET, read_image_files, read_tabular

__all__ = ["sample_queries"]


def sample_queries(task: Task, dataset_path: str, *, count: int = 5, target: str | None = None) -> list[Any]:
    """The first ``count`` examples of a dataset of ``task``'s format, as queries.

    Args:
        task: decides the dataset format.
        dataset_path: a dataset in that format.
        count: how many queries at most.
        target: the target column of a tabular dataset (left out of the queries): the job's, and
            :data:`~baobab.store.DEFAULT_TARGET` for a job that names none.

    Raises:
        DatasetError: the dataset cannot be read as its format says.
    """
    if task.dataset_format is DatasetFormat.IMAGE_FILES:
        return read_image_files(dataset_path).images[:count].tolist()
    return read_tabular(dataset_path, target=DEFAULT_TARGET if target is None else target).features[:count].tolist()
