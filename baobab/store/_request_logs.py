"""Where an inference job's request logs lie in the artifact store: the one home of their layout.

A predictor whose job samples requests (``inference_jobs.request_log_rate``) writes what
it answered as JSON lines, in parts: ``request_logs/inference-<id>/<YYYY-MM-DD>/<part>.jsonl``,
one folder per UTC day. A part is written once, whole, and never changed: object stores
cannot append, a crashed predictor loses only the part it was gathering, and two
predictors of one job (a takeover) never overwrite each other's records. Part names
begin with the time of their first record, so in name order a day's parts are in time
order; joined in that order they are the day's log, which is what the API lists and
sends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

from baobab.store._artifacts import ArtifactStore

__all__ = ["RequestLogDay", "delete_request_logs", "parse_log_day", "request_log_days", "request_log_part_key"]

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class RequestLogDay:
    """One UTC day of an inference job's request log: its parts, in time order, and their total size."""

    day: date
    size_bytes: int
    keys: tuple[str, ...]


def _folder(job_id: int) -> str:
    return f"request_logs/inference-{job_id}"


def request_log_part_key(job_id: int, day: date, name: str) -> str:
    """The key of a part named ``name`` (letters, digits, ``-``, ``_``; it sorts by the time it starts)."""
    return f"{_folder(job_id)}/{day.isoformat()}/{name}.jsonl"


def request_log_days(store: ArtifactStore, job_id: int, *, day: date | None = None) -> list[RequestLogDay]:
    """The days inference job ``job_id`` logged requests on, newest first (``day`` alone, when given: only its
    folder is listed)."""
    parts: dict[date, dict[str, int]] = {}
    listed = _folder(job_id) if day is None else f"{_folder(job_id)}/{day.isoformat()}"
    for key, size in store.files(listed).items():
        folder, _, name = key.removeprefix(_folder(job_id) + "/").partition("/")
        day = parse_log_day(folder)
        if day is not None and name.endswith(".jsonl") and "/" not in name:
            parts.setdefault(day, {})[key] = size
    return [
        RequestLogDay(day, sum(found.values()), tuple(sorted(found)))
        for day, found in sorted(parts.items(), reverse=True)
    ]


def parse_log_day(folder: str) -> date | None:
    """The day a folder of parts is named after (``YYYY-MM-DD``); None for anything else."""
    if not _DAY.fullmatch(folder):
        return None
    try:
        return date.fromisoformat(folder)
    except ValueError:
        return None


def delete_request_logs(store: ArtifactStore, job_id: int) -> bool:
    """Delete every request log of inference job ``job_id``; False when it had none."""
    return store.delete_folder(_folder(job_id))
