"""Query checks: what fits a task's query format, and the 400 field that names what does not."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from predictor_world import TINY, World

from baobab.exceptions import RequestError
from baobab.model import DatasetFormat, Task
from baobab.predictor import QueryFormat, check_queries
from baobab.predictor._job import load_job
from baobab.store import write_tabular

TABULAR = QueryFormat(Task.TABULAR_CLASSIFICATION, feature_names=("a", "b", "c"))
GRAY = QueryFormat(Task.IMAGE_CLASSIFICATION, image_shape=(2, 3))
RGB = QueryFormat(Task.IMAGE_CLASSIFICATION, image_shape=(2, 2, 3))


def test_tabular_rows_and_objects_become_rows_in_column_order() -> None:
    queries = [[1, 2.5, -3], {"c": 3, "a": 1, "b": True}]
    assert check_queries(queries, TABULAR) == [[1, 2.5, -3], [1, 1, 3]]
    # Without the training columns, any non-empty row of numbers goes.
    assert check_queries([[1.0], [1, 2]], QueryFormat(Task.TABULAR_REGRESSION)) == [[1.0], [1, 2]]


@pytest.mark.parametrize(
    ("queries", "field", "words"),
    [
        ({"a": 1}, "queries", "must be a list of queries, got an object"),
        ([[1, 2, 3], [1, 2]], "queries[1]", "has 2 value(s); expected a list of 3 numbers (the columns 'a', 'b', 'c'"),
        ([[1, 2, 3], [1, 2, 3], [1, None, 3]], "queries[2]", "value 1 is null, not a number"),
        ([{"a": 1, "b": 2}], "queries[0]", "lacks column(s) 'c'"),
        ([{"a": 1, "b": 2, "c": 3, "d": 4}], "queries[0]", "unknown column(s) 'd'"),
        ([{"a": 1, "b": "2", "c": 3}], "queries[0]", "column 'b' is a string, not a number"),
        (["1,2,3"], "queries[0]", "got a string"),
        ([[1, 2, 1e39]], "queries[0]", "value 2 is 1e+39; features must be finite and fit a float32"),
    ],
)
def test_bad_tabular_queries_name_the_query(queries: Any, field: str, words: str) -> None:
    with pytest.raises(RequestError) as caught:
        check_queries(queries, TABULAR)
    assert caught.value.field == field
    assert words in str(caught.value)


def test_objects_need_known_columns() -> None:
    with pytest.raises(RequestError, match=r"queries\[0\]: the feature columns of this job are not known"):
        check_queries([{"a": 1}], QueryFormat(Task.TABULAR_REGRESSION))


def test_images_of_the_training_size_pass_unchanged() -> None:
    gray = [[0, 1, 2], [3, 4, 255]]
    rgb = [[[0, 0, 0], [1, 2, 3]], [[255, 255, 255], [9, 8, 7.5]]]
    assert check_queries([gray, gray], GRAY) == [gray, gray]
    assert check_queries([rgb], RGB) == [rgb]
    # Unknown training size: any 2-D or 3-D image.
    assert check_queries([gray, rgb], QueryFormat(Task.IMAGE_CLASSIFICATION)) == [gray, rgb]


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ([[0, 1, 2], [3, 4]], "not a rectangular array"),
        ([[0, 1, 2], [3, 4, "x"]], "values that are not numbers"),
        ([[0, 1, 2], [3, 4, None]], "values that are not numbers"),
        ([0, 1, 2], "shape [3]; expected 2 x 3 (H x W, grayscale)"),
        ([[0, 1], [2, 3]], "is 2 x 2 (H x W, grayscale); expected 2 x 3 (H x W, grayscale)"),
        ([[0, 1, 2], [3, 4, 256]], "outside 0..255"),
        ([[0, 1, 2], [3, 4, -1]], "outside 0..255"),
        ("pixels", "nested lists of numbers in 0..255"),
    ],
)
def test_bad_images_name_the_query(query: Any, words: str) -> None:
    with pytest.raises(RequestError) as caught:
        check_queries([[[0, 0, 0], [0, 0, 0]], query], GRAY)
    assert caught.value.field == "queries[1]"
    assert str(caught.value).startswith("queries[1]: ")
    assert words in str(caught.value)


def test_a_predictor_reads_its_columns_less_the_jobs_target_from_the_training_set(world: World) -> None:
    """A job's ``target`` names the column its queries leave out; a job that names none leaves out ``target``."""
    frame = pd.DataFrame({"a": [0.0, 1.0, 2.0, 3.0], "price": [1.0, 3.0, 5.0, 7.5], "b": [1.0, 0.0, 1.0, 0.5]})
    dataset_id, path = world.dataset(write_tabular(world.work / "prices.csv", frame), DatasetFormat.TABULAR)
    formats = []
    for target in ("price", None):
        sub_job = world.train_job(Task.TABULAR_REGRESSION, dataset_id, TINY, "TinyRegressor", target=target)
        trained = world.trial(sub_job, TINY, "TinyRegressor", {"offset": 0.0}, path, score=0.9,
                              train_args={"target": "price"})  # fmt: skip
        job_id, _ = world.inference_job([trained.trial_id])
        formats.append(load_job(world.settings, job_id).query_format)
    named, unnamed = formats
    assert named == QueryFormat(Task.TABULAR_REGRESSION, feature_names=("a", "b"))
    # No column "target": the queries are checked without column names (what the predictor did before).
    assert unnamed == QueryFormat(Task.TABULAR_REGRESSION)
