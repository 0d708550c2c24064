"""``baobab dev test-model`` through the real command group: output, exit status, usage errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from baobab.cli import main
from baobab.store import build_tabular

TEMPLATES = Path(__file__).parents[1] / "model_tests" / "templates"


@pytest.fixture(scope="module")
def iris(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The dataset options for the iris splits."""
    splits = build_tabular("iris", tmp_path_factory.mktemp("iris")).splits
    return ["--train", str(splits[0].path), "--val", str(splits[1].path)]


def invoke(args: list[str], template: str = "tiny_models.py", cls: str = "Centroid") -> tuple[int, str]:
    command = ["dev", "test-model", str(TEMPLATES / template), "--class", cls, "--task", "tabular_classification"]
    result = CliRunner().invoke(main, command + args)
    return result.exit_code, result.output


# The target column as a train job names it, and as a train() argument (the form before --target, still taken).
@pytest.mark.parametrize("target", [["--target", "target"], ["--train-arg", "target=target"]])
def test_happy_path(iris: list[str], tmp_path: Path, target: list[str]) -> None:
    queries = tmp_path / "queries.json"
    queries.write_text(json.dumps([[5.0, 3.4, 1.5, 0.2], [6.7, 3.0, 5.2, 2.3]]))
    args = ["--trials", "2", "--seed", "3", "--advisor", "random", "--knob", "norm=l2", "--queries", str(queries)]
    code, output = invoke([*iris, *args, *target, "--run-dir", str(tmp_path / "run")])
    assert code == 0, output
    assert "searching shrink with random, seed 3" in output
    table = output[output.index("  trial  knobs") :].splitlines()
    assert table[0].split() == ["trial", "knobs", "score", "duration", "(s)", "status", "error"]
    assert [row.split()[0] for row in table[2:4]] == ["1", "2"]
    assert all(row.split()[-1] == "COMPLETED" and "shrink=0." in row for row in table[2:4])
    assert "best: trial " in output and "norm='l2'" in output
    assert output.endswith("query 0: 0\nquery 1: 2\n")
    assert (tmp_path / "run" / "trial-002.params").is_file()


def test_exit_status_1_when_no_trial_succeeded(iris: list[str], tmp_path: Path) -> None:
    code, output = invoke([*iris, "--trials", "1", "--run-dir", str(tmp_path)], cls="NanScore")
    assert code == 1
    assert "evaluate() returned nan" in output and output.endswith("no trial succeeded (1 failed)\n")


def test_an_import_error_shows_the_templates_traceback(iris: list[str]) -> None:
    code, output = invoke(iris, template="import_error.py", cls="Model")
    assert code == 1
    assert output.startswith(f"Error: {TEMPLATES.resolve() / 'import_error.py'}: importing the template failed:\n")
    assert "line 5, in scale\n    return 1 / 0" in output and "ZeroDivisionError: division by zero" in output
    assert "click" not in output and "baobab/dev/" not in output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--trials", "2", "--time-hours", "1"], "--trials and --time-hours exclude each other: give one"),
        (["--knob", "shrink"], "Invalid value for '--knob': 'shrink' is not NAME=VALUE"),
        (["--knob", "shrink=0.1", "--knob", "shrink=0.2"], "Invalid value for '--knob': 'shrink' is given twice"),
        (["--knob", "depth=3"], "Invalid value for '--knob': knob 'depth': is not a knob of the template"),
        (["--knob", "shrink=high"], "Invalid value for '--knob': knob 'shrink': 'high' is not a number"),
        (["--advisor", "grid"], "Invalid value for '--advisor': unknown strategy 'grid'; valid strategies: auto, "),
        (["--trials", "0"], "Invalid value for '--trials': 0 is not in the range x>=1"),
        (["--target", "y", "--train-arg", "target=y"], "the target column is given as target and in train_args"),
        (["--task", "image_classification", "--target", "y"], "target applies to tabular tasks only"),
    ],
)
def test_usage_errors(iris: list[str], args: list[str], message: str) -> None:
    code, output = invoke([*iris, *args])
    assert code == 2
    assert message in output and "Traceback" not in output


def test_a_bad_task_lists_the_valid_tasks(iris: list[str]) -> None:
    command = ["dev", "test-model", str(TEMPLATES / "tiny_models.py"), "--class", "Centroid", "--task", "speech"]
    result = CliRunner().invoke(main, [*command, *iris])
    assert result.exit_code == 2
    valid = "'image_classification', 'tabular_classification', 'tabular_regression'"  # any case is accepted
    assert f"Invalid value for '--task': 'speech' is not one of {valid}" in result.output


def test_a_queries_file_that_is_not_a_list(iris: list[str], tmp_path: Path) -> None:
    queries = tmp_path / "queries.json"
    queries.write_text('{"a": 1}')
    code, output = invoke([*iris, "--queries", str(queries)])
    assert code == 2 and "queries.json: must hold a non-empty JSON list of queries" in output
