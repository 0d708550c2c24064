"""Baobab: an AutoML platform that tunes, keeps and serves models."""

from baobab._settings import SETTINGS, Executor, Mode, Placement, Setting, Settings, SettingsError

__version__ = "0.1.0"

__all__ = ["SETTINGS", "Executor", "Mode", "Placement", "Setting", "Settings", "SettingsError", "__version__"]
