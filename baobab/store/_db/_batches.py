"""Id lists cut into batches, for ``IN (...)`` clauses that stay well below SQLite's and PostgreSQL's limits."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

__all__ = ["ID_BATCH", "id_batches"]

#: Ids per ``IN (...)`` list.
ID_BATCH = 500


def id_batches(ids: Sequence[int], size: int = ID_BATCH) -> Iterator[Sequence[int]]:
    """``ids`` in slices of at most ``size``."""
    for start in range(0, len(ids), size):
        yield ids[start : start + size]
