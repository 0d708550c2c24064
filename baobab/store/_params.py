"""Model parameters on the wire and on disk: safetensors with JSON metadata.

Arrays go into the safetensors body; str, int, float and bool values go into its
metadata as one JSON document. Reading never unpickles, so parameters from a user or
from the network cannot run code.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load as _st_load
from safetensors.numpy import save as _st_save

from baobab.exceptions import BaobabError

__all__ = ["ParamsFormatError", "params_from_bytes", "params_to_bytes"]

_SCALARS_KEY = "baobab.scalars"


class ParamsFormatError(BaobabError, ValueError):
    """Bytes that are not parameters written by :func:`params_to_bytes`."""


def params_to_bytes(params: dict[str, Any]) -> bytes:
    arrays: dict[str, np.ndarray] = {}
    scalars: dict[str, Any] = {}
    for key, value in params.items():
        if not isinstance(key, str):
            raise TypeError(f"parameter names must be str, got {key!r}")
        if isinstance(value, np.ndarray):
            if value.dtype == object or value.dtype.kind in "USV":
                raise TypeError(f"parameter {key!r}: arrays of dtype {value.dtype} cannot be stored; use numbers")
            arrays[key] = np.require(value, requirements="C")  # keeps 0-d arrays 0-d
        elif isinstance(value, (str, int, float, bool)) or value is None:
            scalars[key] = value
        elif isinstance(value, np.generic):
            scalars[key] = value.item()
        else:
            raise TypeError(f"parameter {key!r} is a {type(value).__name__}; use NumPy arrays or str, int, float, bool")
    return _st_save(arrays, metadata={_SCALARS_KEY: json.dumps(scalars)})


def params_from_bytes(data: bytes) -> dict[str, Any]:
    try:
        arrays = _st_load(data)
    except (SafetensorError, ValueError, OSError) as e:
        raise ParamsFormatError(f"not a parameters file: {e}") from None
    header_len = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + header_len])
    metadata = header.get("__metadata__") or {}
    scalars = json.loads(metadata.get(_SCALARS_KEY, "{}"))
    params: dict[str, Any] = dict(arrays)
    params.update(scalars)
    return params
