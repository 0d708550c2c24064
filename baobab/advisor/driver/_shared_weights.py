"""Shared weights that add up: what the driver writes when trials trained them at the same time.

A plan that trains one set of shared weights across trials (ENAS's ``train_shared``
phase) hands each such trial the latest shared weights. When two of them run at once,
both start from the same weights; handing on the parameters of the last to finish would
throw the other's training away. Instead, when a trial ends after another one's
weights were shared on since it started (:meth:`SubJobState._shared_after
<baobab.advisor._scheduling.SubJobState>` decides, purely), its update is added onto
them: ``latest + (result - start)`` for every numeric array the three hold with one
shape, the trial's own value for anything else (its scalars, a tensor the others lack), and
the latest value of an entry the trial neither started from nor wrote: another trial added
it meanwhile (a super-network entry for a candidate only that trial trained, see
:class:`~baobab.space.SpaceModel`). Concurrent updates therefore sum, as asynchronous SGD's do.
Whether summing is the rule to keep is open: ``bench/enas_shared_updates.py`` (3 noisy seeds,
``bench/results/enas_shared_updates.md``) found it about as good as training one after the
other on the hand-written ``EnasCnn`` super-network (its run of commit 9fbcba5), but the lowest of the four ways it
compares (last, sum, mean, serial) on the macro space's super-network, where averaging the
concurrent updates did better.

Batch-norm statistics are arrays like the others and add up the same way; a template
that scores architectures on shared weights re-estimates them anyway (``SpaceModel`` does, and ``EnasCnn``).

The merged weights are written beside the trial's own parameters
(:func:`~baobab.advisor._scheduling.shared_key`), once, and then recorded in the store as a
merge (which trial's update, onto which trial's weights: a trial's lineage reads it there):
a driver that replays the job after a restart finds them there, writes those it finds
missing (it died before, or replays the trials in another order than they finished in: the
sum is the same), and records again what it finds (recording is idempotent).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from baobab.advisor._scheduling import SharedUpdate, SubJobState
from baobab.store import ArtifactStore, params_from_bytes, params_to_bytes

__all__ = ["add_update", "write_updates"]

logger = logging.getLogger(__name__)


def add_update(latest: dict[str, Any], start: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """``latest + (result - start)`` for the numeric arrays all three hold with one shape, else ``result``'s;
    and ``latest``'s entries that neither ``start`` nor ``result`` holds."""
    merged = {name: value for name, value in latest.items() if name not in start and name not in result}
    merged.update(result)
    for name, value in result.items():
        before, now = start.get(name), latest.get(name)
        if before is None or now is None:
            continue
        if all(_numeric(a) and a.shape == value.shape for a in (value, before, now)):
            # asarray: numpy makes a 0-d sum (batch norm's num_batches_tracked) a scalar, which is stored as a plain
            # number and not read back as the array it was
            merged[name] = np.asarray(now + (value - before), dtype=value.dtype)
    return merged


def write_updates(artifacts: ArtifactStore, sub: SubJobState) -> list[SharedUpdate]:
    """Write the sub-job's pending :class:`SharedUpdate` s (those already written are kept as they are); the
    updates whose weights are there now, which the caller records as merges in the store.

    One that cannot be written (a parameters file gone or unreadable) leaves the sub-job handing
    on the trial's own parameters instead, as before updates added up: that trial's update is then
    the only one kept, the others' lost, and the log says so.
    """
    updates, sub.updates = sub.updates, []
    written: list[SharedUpdate] = []
    for update in updates:
        try:
            if not artifacts.exists(update.key):
                latest, start, result = (
                    params_from_bytes(artifacts.get_bytes(key)) for key in (update.latest, update.start, update.result)
                )
                artifacts.put_bytes(update.key, params_to_bytes(add_update(latest, start, result)))
            written.append(update)
        except Exception as e:
            logger.warning(
                "sub-job %s: trial %s's update could not be added onto the shared weights %s (%s: %s); "
                "its own parameters are shared on",
                sub.id,
                update.trial_id,
                update.latest,
                type(e).__name__,
                e,
            )
            sub.update_failed(update)
    return written


def _numeric(value: object) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.kind in "fiu"
