"""The dev runner, with real child processes: failures stay in their trial, template errors are named."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from baobab.advisor import TrialStatus
from baobab.dev import DevRunResult, run_dev
from baobab.exceptions import DatasetError, KnobConfigError, StrategyError, TemplateError
from baobab.model import Task
from baobab.store import build_tabular, params_from_bytes, read_tabular

TEMPLATES = Path(__file__).parents[1] / "model_tests" / "templates"
TINY = TEMPLATES / "tiny_models.py"


@pytest.fixture(scope="module")
def iris(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    splits = build_tabular("iris", tmp_path_factory.mktemp("iris")).splits
    return splits[0].path, splits[1].path


def dev(iris: tuple[Path, Path], tmp_path: Path, class_name: str = "Centroid", **kwargs: Any) -> DevRunResult:
    kwargs.setdefault("trials", 1)
    kwargs.setdefault("seed", 7)
    lines = kwargs.pop("lines", [])
    return run_dev(
        TINY,
        class_name,
        task=Task.TABULAR_CLASSIFICATION,
        train_path=iris[0],
        val_path=iris[1],
        run_dir=tmp_path / "run",
        echo=lines.append,
        **kwargs,
    )


def test_happy_path(iris: tuple[Path, Path], tmp_path: Path) -> None:
    lines: list[str] = []
    result = dev(iris, tmp_path, trials=3, advisor="random", lines=lines)
    assert [t.status for t in result.trials] == [TrialStatus.COMPLETED] * 3
    assert result.ok and result.reload_error is None
    best = max(result.trials, key=lambda t: t.score or 0.0)
    assert result.best is not None and result.best.score == best.score > 0.8
    for trial in result.trials:
        assert trial.knobs["kind"] == "centroid" and trial.knobs["quick"] is False
        assert set(trial.proposal) == {"shrink", "norm"}
        assert trial.metrics[0].step == 1 and 0.5 < trial.metrics[0].metrics["train_accuracy"] <= 1.0
        assert trial.logs == ("fitted 3 classes",)
        assert set(params_from_bytes(trial.params_path.read_bytes())) == {"centroids", "classes"}
    # The default queries are the first validation rows, as feature lists; predictions are class labels.
    assert result.queries == read_tabular(iris[1], target="target").features[:5].tolist()
    assert result.predictions == result.best.predictions and len(result.predictions) == 5
    text = "\n".join(lines)
    assert "trial 2 step 1: train_accuracy=" in text and "trial 2: fitted 3 classes" in text
    assert "trial  knobs" in text and text.count("COMPLETED") == 6  # three progress lines, three table rows
    assert f"best: trial {result.best.trial_id}, score {result.best.score:.6g}" in text
    assert "reload with the same predictions" in text


def test_the_same_seed_proposes_the_same_knobs(iris: tuple[Path, Path], tmp_path: Path) -> None:
    first = dev(iris, tmp_path / "a", seed=11)
    again = dev(iris, tmp_path / "b", seed=11)
    assert first.trials[0].knobs == again.trials[0].knobs and first.seed == 11


@pytest.mark.parametrize(
    ("how", "error"),
    [
        ("raise", r"^train\(\) raised RuntimeError: boom in train\nTraceback.*tiny_models.py\", line \d+, in _fail"),
        ("exit", r"^the trial process exited with status 3 before reporting a result$"),
        ("segfault", r"^the trial process was killed by signal SIGSEGV before reporting a result"),
    ],
)
def test_a_crashing_trial_fails_and_the_run_goes_on(
    iris: tuple[Path, Path], tmp_path: Path, how: str, error: str
) -> None:
    train_args = {"fail_marker": str(tmp_path / "failed-once"), "fail_how": how}
    result = dev(iris, tmp_path, trials=2, train_args=train_args)
    failed, completed = result.trials
    assert failed.status is TrialStatus.FAILED and failed.score is None
    assert failed.error is not None and failed.params_path is None
    assert completed.status is TrialStatus.COMPLETED
    assert re.search(error, failed.error, re.S), failed.error
    assert result.best is completed and result.ok


def test_an_invalid_architecture_ends_its_trial_invalid_and_the_run_goes_on(
    iris: tuple[Path, Path], tmp_path: Path
) -> None:
    lines: list[str] = []
    train_args = {"fail_marker": str(tmp_path / "failed-once"), "fail_how": "invalid"}
    result = dev(iris, tmp_path, trials=2, train_args=train_args, lines=lines)
    invalid, completed = result.trials
    assert invalid.status is TrialStatus.INVALID and invalid.score is None and invalid.params_path is None
    expected = r"^train\(\) raised InvalidArchitectureError: a 4-feature input cannot feed a 5-wide grouped layer\n"
    assert re.match(expected, invalid.error or ""), invalid.error
    assert completed.status is TrialStatus.COMPLETED and result.best is completed and result.ok
    assert any(line.startswith("trial 1 INVALID (") for line in lines), lines


def test_an_endless_trial_is_killed_at_the_trial_timeout(iris: tuple[Path, Path], tmp_path: Path) -> None:
    train_args = {"fail_marker": str(tmp_path / "failed-once"), "fail_how": "hang"}
    result = dev(iris, tmp_path, trials=2, train_args=train_args, trial_timeout=2.0)
    hung, completed = result.trials
    # Killed by the timeout (its reason), not before it; had nothing killed it, it would hang the test.
    assert hung.status is TrialStatus.FAILED and hung.error == "timed out after 2 s; killed"
    assert hung.duration_s >= 2.0
    assert completed.status is TrialStatus.COMPLETED and result.ok


@pytest.mark.parametrize(
    ("class_name", "error"),
    [
        ("StrScore", r"evaluate\(\) returned '0\.\d+' \(a str\); it must return a finite number, higher is better$"),
        ("NanScore", r"evaluate\(\) returned nan; it must return a finite number"),
        (
            "Unstorable",
            r"template error: dump_parameters\(\) returned parameters that cannot be stored: parameter "
            r"'centroids' is a list; use NumPy arrays",
        ),
        (
            "Forgetful",
            r"template error: a fresh instance loaded with the dumped parameters predicts 0 for query 0, where the "
            r"trained model predicted 1; dump_parameters\(\) must return everything load_parameters\(\) needs$",
        ),
    ],
)
def test_template_errors_found_by_a_trial_are_named(
    iris: tuple[Path, Path], tmp_path: Path, class_name: str, error: str
) -> None:
    lines: list[str] = []
    result = dev(iris, tmp_path, class_name, lines=lines)
    (trial,) = result.trials
    assert trial.status is TrialStatus.FAILED and trial.error is not None
    assert re.match(error, trial.error), trial.error
    assert result.best is None and not result.ok
    assert lines[-1] == "no trial succeeded (1 failed)"


def test_parameters_that_reload_only_in_the_training_process(iris: tuple[Path, Path], tmp_path: Path) -> None:
    result = dev(iris, tmp_path, "ProcessBound")
    assert result.trials[0].status is TrialStatus.COMPLETED  # the in-process round trip passes
    assert result.best is result.trials[0] and not result.ok
    assert result.reload_error is not None
    assert result.reload_error.startswith("load_parameters() raised KeyError: 'centroids'")


def test_knob_overrides_leave_the_search(iris: tuple[Path, Path], tmp_path: Path) -> None:
    lines: list[str] = []
    result = dev(iris, tmp_path, trials=2, knobs={"norm": "l1", "quick": True}, lines=lines)
    for trial in result.trials:
        assert trial.knobs["norm"] == "l1" and trial.knobs["quick"] is True
        assert set(trial.proposal) == {"shrink"}
    assert "searching shrink with" in lines[0]


@pytest.mark.parametrize(
    ("knobs", "error"),
    [
        ({"depth": 3}, "knob 'depth': is not a knob of the template; its knobs: shrink, norm, kind, quick"),
        ({"shrink": 2.0}, r"knob 'shrink': 2.0 is outside \[0.0, 0.9\]"),
        ({"kind": "other"}, "knob 'kind': is fixed to 'centroid', got 'other'"),
    ],
)
def test_bad_overrides_are_refused_before_any_trial(
    iris: tuple[Path, Path], tmp_path: Path, knobs: dict[str, Any], error: str
) -> None:
    with pytest.raises(KnobConfigError, match=error):
        dev(iris, tmp_path, knobs=knobs)
    assert not (tmp_path / "run").exists()


def test_given_queries_are_predicted_by_the_reloaded_best(iris: tuple[Path, Path], tmp_path: Path) -> None:
    queries = [[5.0, 3.4, 1.5, 0.2], [6.7, 3.0, 5.2, 2.3]]
    lines: list[str] = []
    result = dev(iris, tmp_path, queries=queries, knobs={"shrink": 0.0, "norm": "l2"}, lines=lines)
    assert result.queries == queries and result.predictions == [0, 2]
    assert lines[-2:] == ["query 0: 0", "query 1: 2"]


def test_the_time_budget_asks_the_running_trial_to_stop(iris: tuple[Path, Path], tmp_path: Path) -> None:
    train_args = {"fail_marker": str(tmp_path / "once"), "fail_how": "wait_for_stop"}
    result = dev(iris, tmp_path, trials=None, time_hours=1 / 3600, train_args=train_args)
    (trial,) = result.trials  # no trial starts once the budget is spent
    # It waits for the request to stop: had none come, it would have been killed 30 s (the grace) later.
    assert trial.status is TrialStatus.COMPLETED and trial.duration_s >= 1.0
    assert result.ok


def test_a_trial_running_past_the_grace_period_is_killed(iris: tuple[Path, Path], tmp_path: Path) -> None:
    train_args = {"fail_marker": str(tmp_path / "once"), "fail_how": "hang"}
    result = dev(iris, tmp_path, trials=None, time_hours=1 / 3600, grace_s=0.5, train_args=train_args)
    (trial,) = result.trials
    assert trial.error == "still running 0.5 s after the time budget ended; killed"
    assert result.best is None


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"class_name": "Missing"}, TemplateError, "no class 'Missing'; classes defined in the file: Centroid, "),
        ({"advisor": "grid"}, StrategyError, "unknown strategy 'grid'; valid strategies: auto, random"),
        ({"time_hours": 1.0}, ValueError, "give a trial count or a time budget, not both"),
        ({"queries": []}, ValueError, "queries must be a non-empty list"),
    ],
)
def test_run_errors(
    iris: tuple[Path, Path], tmp_path: Path, kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        dev(iris, tmp_path, **kwargs)


def test_unknown_task(iris: tuple[Path, Path]) -> None:
    with pytest.raises(ValueError, match="unknown task 'SPEECH'; valid tasks: IMAGE_CLASSIFICATION, "):
        run_dev(TINY, "Centroid", task="SPEECH", train_path=iris[0], val_path=iris[1])


def test_a_missing_dataset(iris: tuple[Path, Path], tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"nothing\.csv: no such file"):
        run_dev(TINY, "Centroid", task="TABULAR_CLASSIFICATION", train_path=iris[0], val_path=tmp_path / "nothing.csv")


def test_trial_files_in_the_run_folder(iris: tuple[Path, Path], tmp_path: Path) -> None:
    result = dev(iris, tmp_path)
    spec = json.loads((result.run_dir / "trial-001.json").read_text())
    assert spec["mode"] == "trial" and spec["knobs"] == result.trials[0].knobs
    assert (result.run_dir / "trial-001.params").is_file() and (result.run_dir / "reload.log").is_file()


def test_a_model_space_is_searched_and_its_best_instance_reloads(iris: tuple[Path, Path], tmp_path: Path) -> None:
    """`baobab dev test-model` takes a SpaceModel as it is: the decisions are searched, and the best
    instance rebuilt from its knobs loads its parameters with the same predictions."""
    result = run_dev(
        Path(__file__).parents[1] / "worker_tests" / "templates" / "tiny_space.py",
        "TinySpace",
        task=Task.TABULAR_CLASSIFICATION,
        train_path=iris[0],
        val_path=iris[1],
        run_dir=tmp_path / "run",
        trials=4,
        seed=3,
        advisor="evolution",
        target="target",  # TinySpace's own default is "y": train() gets the column as target=
        echo=lambda line: None,
    )
    assert [t.status for t in result.trials] == [TrialStatus.COMPLETED] * 4
    assert {frozenset(t.proposal) for t in result.trials} == {frozenset({"act_relu", "act_relu_1", "deep_fc2"})}
    assert len({tuple(sorted(t.proposal.items())) for t in result.trials}) == 4  # four distinct instances
    assert result.ok and result.reload_error is None and result.predictions == result.best.predictions
