"""Train-job budgets: every key, every rule, named in the error."""

from __future__ import annotations

import pytest

from baobab.advisor import Budget, parse_budget
from baobab.exceptions import BudgetError


def test_a_full_budget_is_parsed_and_round_trips() -> None:
    budget = parse_budget({"GPU_COUNT": 2, "TIME_HOURS": 1, "MODEL_TRIAL_COUNT": 20})
    assert budget == Budget(gpu_count=2, time_hours=1.0, model_trial_count=20)
    assert type(budget.time_hours) is float
    assert parse_budget(budget.to_json()) == budget


def test_gpu_count_defaults_to_cpu_slots_and_one_bound_is_enough() -> None:
    assert parse_budget({"TIME_HOURS": 0.25}) == Budget(gpu_count=0, time_hours=0.25)
    assert parse_budget({"MODEL_TRIAL_COUNT": 5}) == Budget(model_trial_count=5)
    assert parse_budget({"MODEL_TRIAL_COUNT": 5}).to_json() == {"GPU_COUNT": 0, "MODEL_TRIAL_COUNT": 5}


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ([1, 2], "budget", "a budget must be an object of key to number, got list"),
        ({}, "budget", "the budget is empty; give TIME_HOURS or MODEL_TRIAL_COUNT"),
        ({"GPU_COUNT": 1}, "budget", "give TIME_HOURS or MODEL_TRIAL_COUNT"),
        ({"TIME_HOUR": 1}, "TIME_HOUR", "unknown budget key 'TIME_HOUR'; known keys: GPU_COUNT, TIME_HOURS"),
        ({"TIME_HOURS": 0}, "TIME_HOURS", "must be above 0 and at most 8760, got 0"),
        ({"TIME_HOURS": -1.5}, "TIME_HOURS", "must be above 0"),
        ({"TIME_HOURS": 1e-300}, "TIME_HOURS", r"must be at least one minute \(0.0166667 hours\) .*, got 1e-300"),
        ({"TIME_HOURS": 0.0166}, "TIME_HOURS", "must be at least one minute"),
        ({"TIME_HOURS": "2"}, "TIME_HOURS", "must be a number of hours, got '2'"),
        ({"TIME_HOURS": float("nan")}, "TIME_HOURS", "must be a number of hours, got nan"),
        ({"TIME_HOURS": True}, "TIME_HOURS", "must be a number of hours, got True"),
        ({"MODEL_TRIAL_COUNT": 0}, "MODEL_TRIAL_COUNT", "must be between 1 and 100000, got 0"),
        ({"MODEL_TRIAL_COUNT": 2.5}, "MODEL_TRIAL_COUNT", "must be an integer, got 2.5"),
        ({"MODEL_TRIAL_COUNT": 3, "GPU_COUNT": -1}, "GPU_COUNT", "must be between 0 and 1024, got -1"),
        ({"MODEL_TRIAL_COUNT": 3, "GPU_COUNT": None}, "GPU_COUNT", "must be an integer, got None"),
    ],
)
def test_bad_budgets_name_the_key_and_the_rule(data: object, field: str, message: str) -> None:
    with pytest.raises(BudgetError, match=f"^{field}: {message}") as info:
        parse_budget(data)
    assert info.value.field == field


def test_one_minute_is_the_shortest_time_budget_but_a_stored_shorter_one_still_reads() -> None:
    assert parse_budget({"TIME_HOURS": 1 / 60}).time_hours == 1 / 60
    # A job stored before the floor (or a driver test's short job) is read back as it was written.
    assert parse_budget({"TIME_HOURS": 0.001}, stored=True) == Budget(time_hours=0.001)
    with pytest.raises(BudgetError, match="must be above 0"):
        parse_budget({"TIME_HOURS": 0}, stored=True)
