"""Ensembling functions: averaged probabilities, majority vote with its tie-break, regression mean."""

from __future__ import annotations

import pytest

from baobab.model import Task
from baobab.predictor import check_answer, ensemble, majority_vote, mean_value, mean_vector


def test_mean_vector_averages_element_by_element() -> None:
    assert mean_vector([[0.2, 0.8], [0.6, 0.4]]) == pytest.approx([0.4, 0.6])
    assert mean_vector([[0.1, 0.7, 0.2]]) == [0.1, 0.7, 0.2]  # one member: its own answer, exactly
    with pytest.raises(ValueError, match="different lengths"):
        mean_vector([[0.5, 0.5], [1.0]])
    with pytest.raises(ValueError, match="at least one"):
        mean_vector([])


def test_majority_vote_counts_and_breaks_ties_by_the_best_member() -> None:
    assert majority_vote(["cat", "dog", "dog"]) == "dog"
    assert majority_vote(["cat", "dog"]) == "cat"  # a tie: the best member (first) wins
    assert majority_vote(["dog", "cat", "cat", "dog", "bird"]) == "dog"
    assert majority_vote(["bird", "cat", "cat", "dog", "dog"]) == "cat"  # tie between cat and dog: cat ranks higher
    # Labels compare as JSON values: 1, "1" and true are three labels.
    assert majority_vote([1, "1", True, "1"]) == "1"
    with pytest.raises(ValueError, match="at least one"):
        majority_vote([])


def test_mean_value_of_numbers_and_vectors() -> None:
    assert mean_value([1.0, 2.0, 6]) == pytest.approx(3.0)
    assert mean_value([[1.0, 2.0], [3.0, 4.0]]) == pytest.approx([2.0, 3.0])
    with pytest.raises(ValueError, match="not a mix"):
        mean_value([1.0, [1.0]])


def test_ensemble_by_task() -> None:
    # answers[m][q], members best first.
    probabilities = [[[0.9, 0.1], [0.2, 0.8]], [[0.5, 0.5], [0.4, 0.6]]]
    for task in (Task.IMAGE_CLASSIFICATION, Task.TABULAR_CLASSIFICATION):
        assert ensemble(task, probabilities) == [pytest.approx([0.7, 0.3]), pytest.approx([0.3, 0.7])]
    labels = [["a", "b", "c"], ["b", "b", "a"], ["b", "c", "b"]]
    assert ensemble(Task.TABULAR_CLASSIFICATION, labels) == ["b", "b", "c"]  # the last: a 3-way tie
    assert ensemble(Task.TABULAR_CLASSIFICATION, [["a", "x"], ["b", "y"]]) == ["a", "x"]
    assert ensemble(Task.TABULAR_REGRESSION, [[1.0, 10.0], [3.0, 20.0], [5.0, 0.0]]) == pytest.approx([3.0, 10.0])


def test_vectors_that_cannot_be_averaged_vote_for_their_most_probable_class() -> None:
    # Mixed labels and vectors, or vectors of different lengths: each vector votes for its argmax.
    assert ensemble(Task.IMAGE_CLASSIFICATION, [[[0.1, 0.9]], [0], [0]]) == [0]
    assert ensemble(Task.IMAGE_CLASSIFICATION, [[[0.1, 0.9]], [[0.2, 0.1, 0.7]], [[0.0, 1.0]]]) == [1]


def test_ensemble_refuses_members_answering_different_counts() -> None:
    with pytest.raises(ValueError, match="different numbers of queries"):
        ensemble(Task.TABULAR_REGRESSION, [[1.0, 2.0], [1.0]])
    with pytest.raises(ValueError, match="at least one member"):
        ensemble(Task.TABULAR_REGRESSION, [])


@pytest.mark.parametrize(
    ("task", "answer", "fits"),
    [
        (Task.TABULAR_REGRESSION, 1.5, True),
        (Task.TABULAR_REGRESSION, [1.0, 2.0], True),
        (Task.TABULAR_REGRESSION, "1.5", False),
        (Task.TABULAR_REGRESSION, None, False),
        (Task.TABULAR_REGRESSION, True, False),
        (Task.TABULAR_CLASSIFICATION, "malignant", True),
        (Task.TABULAR_CLASSIFICATION, 3, True),
        (Task.IMAGE_CLASSIFICATION, [0.25, 0.75], True),
        (Task.IMAGE_CLASSIFICATION, [], False),
        (Task.IMAGE_CLASSIFICATION, {"p": 1}, False),
        (Task.IMAGE_CLASSIFICATION, [0.5, "x"], False),
    ],
)
def test_check_answer(task: Task, answer: object, fits: bool) -> None:
    assert (check_answer(task, answer) is None) is fits
