"""What every result records of the run that made it, so its figures can be judged later.

A figure is only as good as its setup: which commit ran, with which placement, fusion and
warm start, and how busy the machine was. Each benchmark starts a :class:`RunSetup` before
its first way, writes ``setup.finish()`` into its JSON as ``"setup"`` and ends its Markdown
report with :func:`setup_markdown` of the same record, so every result shows its setup the
same way; the docs' index (docs/_gen/results.py) reads ``commit`` from it to say whether the
code measured has changed since.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

from baobab import Settings

ROOT = Path(__file__).resolve().parents[1]
#: The keys :meth:`RunSetup.finish` always writes; any other key is a setting the benchmark named.
_RECORD_KEYS = (
    "commit",
    "uncommitted_changes",
    "date",
    "machine",
    "cores",
    "load_start",
    "load_end",
    "minutes",
    "favours",
    "placement",
    "fusion",
    "warm_start",
)


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()


class RunSetup:
    """The run's setup, taken at its start; :meth:`finish` adds what only the end knows.

    Args:
        favours: what the setup favours, in words (same data for parent and child, a warm
            cache, a quiet machine, one way's process count...), printed beside the figures.
        fusion: the fusion the ways ran under (``"off"``, per way, or why it does not apply):
            required, so that no result is silent about it.
        warm_start: the same for warm start.
        settings: other platform settings the ways ran under where the benchmark sets them
            itself; ``placement`` defaults to the driver's setting in this environment (name
            it where no job driver runs).
    """

    def __init__(self, favours: str, *, fusion: Any, warm_start: Any, **settings: Any) -> None:
        self.favours = favours
        self.settings = {
            "placement": Settings.from_env().placement.value,
            "fusion": fusion,
            "warm_start": warm_start,
            **settings,
        }
        self.started = time.perf_counter()
        self.load_start = os.getloadavg()[0]
        # A copy without git (a GPU machine's) is told its commit by BAOBAB_COMMIT.
        self.commit = _git("rev-parse", "HEAD") or os.environ.get("BAOBAB_COMMIT", "")
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
            "cores": cores,
            "load_start": round(self.load_start, 2),
            "load_end": round(os.getloadavg()[0], 2),
            "minutes": round((time.perf_counter() - self.started) / 60, 2),
            "favours": self.favours,
            **self.settings,
        }


def _shown(value: Any, *, top: bool = True) -> str:
    """A setting as a report writes it: booleans as on and off, a per-way mapping way by way (a
    mapping within it, such as a fusion option, as its JSON)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (dict, list)) and not top:
        return json.dumps(value)
    if isinstance(value, dict):
        return "(" + "; ".join(f"{key}: {_shown(item, top=False)}" for key, item in value.items()) + ")"
    return str(value)


def setup_markdown(record: dict[str, Any]) -> str:
    """The record as the paragraph that ends a result's Markdown report, the same in every report.

    A load at the start above half the cores is other work's: the figures then read worse
    than on a quiet machine, and the paragraph says so.
    """
    cores = record.get("cores") or os.cpu_count() or 1
    busy = " (other work shared the machine)" if record["load_start"] > 0.5 * cores else ""
    dirty = " with uncommitted changes" if record["uncommitted_changes"] else ""
    # Other settings the benchmark named, where a word or a number says them (a list stays in the JSON).
    others = "".join(
        f", {key.replace('_', ' ')} {_shown(v)}"
        for key, v in record.items()
        if key not in _RECORD_KEYS and isinstance(v, (str, int, float))
    )
    return (
        f"Setup: commit `{record['commit'][:8]}`{dirty}, {record['date']}, {record['machine']}; "
        # Records from before fusion and warm start were required lack them.
        f"placement {_shown(record.get('placement', 'not recorded'))}, "
        f"fusion {_shown(record.get('fusion', 'not recorded'))}, "
        f"warm start {_shown(record.get('warm_start', 'not recorded'))}{others}. "
        f"Load average (1 min) at the start and the end of the run: {record['load_start']:.1f} and "
        f"{record['load_end']:.1f}{busy}; {record['minutes']:.1f} minutes. "
        f"What the setup favours: {record['favours']}."
    )


def oldest(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The record of the earliest run among ``records`` (the parts of a result kept from runs of their
    own): by date, then by the depth of its commit in git's history; a commit git does not know counts
    as the oldest, so that a result is never judged newer than it may be."""

    def age(record: dict[str, Any]) -> tuple[str, int]:
        depth = _git("rev-list", "--count", record["commit"]) if record.get("commit") else ""
        return record.get("date", ""), int(depth) if depth.isdigit() else -1

    return min(records, key=age)
