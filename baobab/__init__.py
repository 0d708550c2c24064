"""Baobab: an AutoML platform that tunes, keeps and serves models."""

__version__ = "0.1.0"
