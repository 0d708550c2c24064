"""What every result records of the run that made it, so its figures can be judged later.

A figure is only as good as its setup: which commit ran, with which placement, fusion and
warm start, and how busy the machine was. Each benchmark starts a :class:`RunSetup` before
its first way and writes ``setup.finish()`` into its JSON as ``"setup"``; the docs' index
(docs/_gen/results.py) reads ``commit`` from it to say whether the code measured has
changed since.
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

from baobab import Settings

ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()


class RunSetup:
    """The run's setup, taken at its start; :meth:`finish` adds what only the end knows.

    Args:
        favours: what the setup favours, in words (same data for parent and child, a warm
            cache, one way's process count...), printed beside the figures.
        settings: the platform settings the ways ran under where the benchmark sets them
            itself (``fusion``, ``warm_start`` per way...); ``placement`` defaults to the
            driver's setting in this environment.
    """

    def __init__(self, favours: str, **settings: Any) -> None:
        self.favours = favours
        self.settings = {"placement": Settings.from_env().placement.value, **settings}
        self.started = time.perf_counter()
        self.load_start = os.getloadavg()[0]
        self.commit = _git("rev-parse", "HEAD")
        self.dirty = bool(_git("status", "--porcelain", "--untracked-files=no", "--", "baobab", "bench"))

    def finish(self) -> dict[str, Any]:
        """The record to store under the result's ``"setup"`` key."""
        cores = len(os.sched_getaffinity(0))
        return {
            "commit": self.commit,
            # A run on uncommitted code is not reproducible from its commit alone.
            "uncommitted_changes": self.dirty,
            "date": datetime.date.today().isoformat(),
            "machine": f"{platform.machine()}, {cores} cores, Python {platform.python_version()}",
            "load_start": round(self.load_start, 2),
            "load_end": round(os.getloadavg()[0], 2),
            "minutes": round((time.perf_counter() - self.started) / 60, 2),
            "favours": self.favours,
            **self.settings,
        }
