"""Parameters on the wire: safetensors plus JSON scalars, exact, never unpickled."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from baobab.store import ParamsFormatError, params_from_bytes, params_to_bytes


def test_arrays_and_scalars_round_trip_exactly() -> None:
    params = {
        "conv.weight": np.arange(24, dtype=np.float32).reshape(2, 3, 4),
        "bn.num_batches": np.array(7, dtype=np.int64),
        "mask": np.array([True, False]),
        "half": np.ones(3, dtype=np.float16),
        "classes": '["cat", "dog"]',
        "epochs": 3,
        "lr": 0.01,
        "downscaled": False,
        "note": None,
        "numpy_scalar": np.float64(2.5),
    }
    back = params_from_bytes(params_to_bytes(params))
    assert set(back) == set(params)
    for key, value in params.items():
        if isinstance(value, np.ndarray):
            assert back[key].dtype == value.dtype and back[key].shape == value.shape
            np.testing.assert_array_equal(back[key], value)
        else:
            assert back[key] == value and type(back[key]) is type(value.item() if key == "numpy_scalar" else value)


@pytest.mark.parametrize(
    ("params", "error", "message"),
    [
        ({1: np.zeros(1)}, TypeError, "parameter names must be str, got 1"),
        ({"w": [1.0, 2.0]}, TypeError, "parameter 'w' is a list; use NumPy arrays"),
        ({"w": np.array(["a"])}, TypeError, "parameter 'w': arrays of dtype <U1 cannot be stored"),
        ({"w": np.array([object()])}, TypeError, "parameter 'w': arrays of dtype object cannot be stored"),
    ],
)
def test_unstorable_params_are_named(params: dict, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        params_to_bytes(params)


def test_bytes_that_are_not_params_are_refused_without_unpickling() -> None:
    with pytest.raises(ParamsFormatError, match="not a parameters file"):
        params_from_bytes(pickle.dumps({"w": np.zeros(2)}))
    with pytest.raises(ParamsFormatError, match="not a parameters file"):
        params_from_bytes(b"")
