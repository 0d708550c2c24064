from __future__ import annotations

import numpy as np
import pytest

from baobab.advisor import DimensionKind, SearchSpace
from baobab.exceptions import StrategyError
from baobab.testing import every_knob_type


def test_dimensions_leave_out_fixed_and_policy_knobs_and_split_arch_knobs() -> None:
    space = SearchSpace(every_knob_type())
    names = [d.name for d in space.dimensions]
    assert names == ["lr", "momentum", "dropout", "units", "depth", "seven", "flag", "arch[0]", "arch[1]", "arch[2]"]
    assert [d.kind for d in space.dimensions][:4] == [DimensionKind.FLOAT] * 3 + [DimensionKind.INTEGER]
    assert not space.is_discrete


def test_flatten_tells_look_alike_choices_apart_and_round_trips() -> None:
    space = SearchSpace(every_knob_type())
    knobs = {
        "lr": 1e-3,
        "momentum": 0.5,
        "dropout": 0.25,
        "units": 64,
        "depth": 2,
        "seven": 7,
        "flag": 1.0,
        "arch": ["pool", 0, True],
        "epochs": 3,
    }
    point = space.flatten(knobs)
    assert point[6] == 2 and point[7:] == (1, 0, 1)
    searchable = {k: v for k, v in knobs.items() if k != "epochs"}
    assert repr(space.unflatten(point)) == repr(searchable)
    again = space.unflatten(space.from_unit(space.to_unit([point])[0]))
    assert again.pop("lr") == pytest.approx(1e-3, rel=1e-12)  # through the log and back
    assert repr(again) == repr({k: v for k, v in searchable.items() if k != "lr"})
    with pytest.raises(StrategyError, match=r"dimension 'arch\[2\]': 1 is not one of \[False, True\]"):
        space.flatten({**knobs, "arch": ["pool", 0, 1]})


def test_snap_lands_on_existing_points() -> None:
    space = SearchSpace(every_knob_type())
    units = space.snap(
        space.perturb_unit(space.sample_unit(np.random.default_rng(0), 20), np.random.default_rng(1), 5, 0.3)
    )
    assert units.shape == (100, len(space))
    for u in units:
        assert np.allclose(space.to_unit([space.from_unit(u)])[0], u)
