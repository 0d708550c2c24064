"""Storage: parameters, dataset formats (and, with the platform, metadata and artifacts)."""

from baobab.store._params import ParamsFormatError, params_from_bytes, params_to_bytes

__all__ = ["ParamsFormatError", "params_from_bytes", "params_to_bytes"]
