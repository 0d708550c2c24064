"""The import-linter contract that keeps strategies free of IO names its modules one by one: it must name them all
(and every sub-package but the driver, the one part that reaches the store)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import baobab.advisor

PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"


def test_every_advisor_module_but_the_driver_is_held_to_the_no_io_contract() -> None:
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    (pure,) = [c for c in contracts if c["id"] == "strategies"]
    folder = Path(baobab.advisor.__file__).parent
    modules = {f"baobab.advisor.{p.stem}" for p in folder.glob("_*.py") if p.stem != "__init__"}
    packages = {f"baobab.advisor.{p.parent.name}" for p in folder.glob("*/__init__.py") if p.parent.name != "driver"}
    assert set(pure["source_modules"]) == modules | packages
