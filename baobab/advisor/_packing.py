"""How many same-shaped trials the job driver puts in the next fused group, by their measured profile.

Under the job option ``fusion: "auto"`` a trial of each structure measured, on one slot,
training rows per second by group size (:func:`baobab.model.profile_fusion`) and chose the
fastest. A group of that size is right while trials are plenty; near the end of a job's
trial count it is not always: a large group of the last trials holds one slot while
others idle. Pure: the numbers come in, a size goes out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = ["packed_size"]


def packed_size(rates: Mapping[int, float], best: int, left: int | None, slots: int) -> int:
    """The size of the next fused group of a structure whose profile measured ``rates`` (training
    rows per second on one slot, by group size) and chose ``best``, with ``left`` trials of it to
    run, those running included (None: as many as time allows), on a job of ``slots`` slots.

    ``best``, unless the trials left are too few to fill the slots in groups of it: then the
    size whose groups, spread over the slots they fill, train the most rows per second (4 trials
    left on 2 slots, best 16: one group of 4 would leave a slot idle, two of 2 or four alone may
    do better; ties go to the smaller). Counting the trials that run, on all the job's slots,
    makes the last groups alike: 16 trials left, best 16, 2 slots, groups of 8 paying more than
    trials alone: the first 8 form a group, and so do the next, as 8 run and 8 are left.
    """
    if left is None or best not in rates or math.ceil(left / best) >= slots:
        return best
    sizes = sorted(size for size in rates if size <= min(best, left))  # a rate holds for a full group only
    return max(sizes, key=lambda size: min(slots, math.ceil(left / size)) * rates[size])
