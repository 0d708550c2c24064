"""Knob configs and knob values: every rule, and exact JSON round trips."""

from __future__ import annotations

import json

import pytest

from baobab.exceptions import KnobConfigError
from baobab.model import (
    ArchKnob,
    CategoricalKnob,
    FixedKnob,
    FloatKnob,
    IntegerKnob,
    Policy,
    PolicyKnob,
    knob_config_from_json,
    knob_config_to_json,
    knobs_from_json,
    knobs_to_json,
    searchable_knobs,
    validate_knob_config,
    validate_knobs,
)

FULL_CONFIG = {
    "fixed": FixedKnob(3),
    "optimizer": CategoricalKnob(["adam", "sgd", 1, 1.0, True, None]),
    "layers": IntegerKnob(1, 8),
    "width": IntegerKnob(8, 512, is_exp=True),
    "dropout": FloatKnob(0.0, 0.5),
    "learning_rate": FloatKnob(1e-5, 1e-1, is_exp=True),
    "cells": ArchKnob([["conv3", "conv5", "skip"], [0, 1]]),
    "early_stop": PolicyKnob("EARLY_STOP"),
    "share": PolicyKnob(Policy.SHARE_PARAMS),
}

VALID_KNOBS = {
    "fixed": 3,
    "optimizer": 1.0,
    "layers": 8,
    "width": 8,
    "dropout": 0.25,
    "learning_rate": 1e-3,
    "cells": ["skip", 1],
    "early_stop": True,
    "share": False,
}


def test_full_config_is_valid_and_round_trips_exactly_through_json() -> None:
    assert validate_knob_config(FULL_CONFIG) == FULL_CONFIG
    text = knob_config_to_json(FULL_CONFIG)
    back = knob_config_from_json(text)
    assert back == FULL_CONFIG
    assert list(back) == list(FULL_CONFIG)
    assert knob_config_to_json(back) == text
    # 1, 1.0 and True stay three different choices through JSON.
    assert [type(v) for v in back["optimizer"].values] == [str, str, int, float, bool, type(None)]


def test_knob_values_round_trip_through_json_and_validate() -> None:
    text = knobs_to_json(VALID_KNOBS)
    back = knobs_from_json(text)
    assert back == VALID_KNOBS
    assert validate_knobs(FULL_CONFIG, back) == VALID_KNOBS
    assert type(back["optimizer"]) is float


def test_knobs_equal_by_value_and_hash() -> None:
    assert FloatKnob(0.1, 1.0, is_exp=True) == FloatKnob(0.1, 1.0, is_exp=True)
    assert FloatKnob(0.1, 1.0) != FloatKnob(0.1, 1.0, is_exp=True)
    assert hash(ArchKnob([[1, 2], ["a"]])) == hash(ArchKnob(((1, 2), ("a",))))


def test_searchable_knobs_leave_out_fixed_and_policy_knobs() -> None:
    assert set(searchable_knobs(FULL_CONFIG)) == {"optimizer", "layers", "width", "dropout", "learning_rate", "cells"}


@pytest.mark.parametrize(
    ("knob", "message"),
    [
        (CategoricalKnob([]), "values is empty"),
        (CategoricalKnob(["a", "a"]), "holds 'a' twice"),
        (CategoricalKnob([[1, 2]]), "choices must be str, int, finite float"),
        (CategoricalKnob([float("nan")]), "choices must be str, int, finite float"),
        (CategoricalKnob("abc"), "values must be a list"),
        (IntegerKnob(5, 1), "value_min=5 is greater than value_max=1"),
        (IntegerKnob(1.5, 3), r"value_min=1.5 must be an integer"),
        (IntegerKnob(True, 3), "value_min=True must be an integer"),
        (IntegerKnob(0, 10, is_exp=True), "log scale needs value_min > 0"),
        (FloatKnob(1.0, 0.5), "value_min=1.0 is greater than value_max=0.5"),
        (FloatKnob(-1.0, 1.0, is_exp=True), "log scale needs value_min > 0"),
        (FloatKnob(0.0, float("inf")), "value_max=inf must be finite"),
        (FloatKnob("0", 1.0), "value_min='0' must be a number"),
        (FloatKnob(0.1, 1.0, is_exp="yes"), "is_exp='yes' must be true or false"),
        (ArchKnob([]), "items must be a non-empty list"),
        (ArchKnob([["a"], []]), "position 1 is empty"),
        (ArchKnob([["a"], "b"]), "position 1 must be a list of choices"),
        (PolicyKnob("FAST"), "unknown policy 'FAST'; known policies: EARLY_STOP"),
        (FixedKnob([1]), "must be str, int, finite float, bool or None"),
    ],
)
def test_invalid_knob_is_named_with_the_rule(knob: object, message: str) -> None:
    with pytest.raises(KnobConfigError, match=f"knob 'bad': .*{message}") as info:
        validate_knob_config({"ok": FixedKnob(1), "bad": knob})
    assert info.value.knob == "bad"


def test_config_that_is_not_a_dict_or_holds_non_knobs_is_refused() -> None:
    with pytest.raises(KnobConfigError, match="must be a dict of name to knob, got list"):
        validate_knob_config([FixedKnob(1)])
    with pytest.raises(KnobConfigError, match="knob 'lr': must be a knob"):
        validate_knob_config({"lr": 0.1})
    with pytest.raises(KnobConfigError, match="knob 'not valid': a knob name must be a Python identifier"):
        validate_knob_config({"not valid": FixedKnob(1)})


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("fixed", 4, "is fixed to 3, got 4"),
        ("optimizer", "rmsprop", "'rmsprop' is not one of"),
        ("layers", 9, r"9 is outside \[1, 8\]"),
        ("layers", 2.0, "2.0 is not an integer"),
        ("layers", True, "True is not an integer"),
        ("dropout", float("nan"), "nan is not finite"),
        ("dropout", "0.1", "'0.1' is not a number"),
        ("cells", ["skip"], r"\[.skip.\] must be a list of 2 choices"),
        ("cells", ["skip", True], r"position 1: True is not one of \[0, 1\]"),
        ("early_stop", 1, "a policy knob takes true or false, got 1"),
    ],
)
def test_invalid_knob_value_is_named(name: str, value: object, message: str) -> None:
    with pytest.raises(KnobConfigError, match=f"knob '{name}': {message}"):
        validate_knobs(FULL_CONFIG, {**VALID_KNOBS, name: value})


def test_missing_and_unknown_knob_values_are_named() -> None:
    missing = {k: v for k, v in VALID_KNOBS.items() if k != "layers"}
    with pytest.raises(KnobConfigError, match="knob 'layers': has no value"):
        validate_knobs(FULL_CONFIG, missing)
    with pytest.raises(KnobConfigError, match="knob 'momentum': is not in the knob config; known knobs: fixed"):
        validate_knobs(FULL_CONFIG, {**VALID_KNOBS, "momentum": 0.9})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"lr": {"type": "MagicKnob"}}', "knob 'lr': unknown knob type 'MagicKnob'; known types: ArchKnob"),
        ('{"lr": {"value_min": 1}}', "knob 'lr': a knob must be an object with a 'type'"),
        ('{"lr": {"type": "FloatKnob", "value_min": 1}}', "knob 'lr': FloatKnob fields do not fit"),
        ('{"lr": {"type": "FloatKnob", "value_min": 2.0, "value_max": 1.0}}', "knob 'lr': FloatKnob: value_min=2.0"),
        ("[1, 2]", "a knob config must be a JSON object"),
    ],
)
def test_bad_knob_config_json_is_named(text: str, message: str) -> None:
    with pytest.raises(KnobConfigError, match=message):
        knob_config_from_json(text)


def test_knob_values_json_must_be_an_object_and_finite() -> None:
    with pytest.raises(KnobConfigError, match="knob values must be a JSON object"):
        knobs_from_json("[]")
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        knobs_to_json({"lr": float("inf")})
    assert json.loads(knobs_to_json({"cells": ("a", 1)})) == {"cells": ["a", 1]}
