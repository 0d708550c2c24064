"""Random search: the baseline every other strategy must beat."""

from __future__ import annotations

from collections.abc import Iterable

from baobab.advisor._base import Strategy
from baobab.model import Knobs

__all__ = ["RandomStrategy"]


class RandomStrategy(Strategy):
    """Draws every searchable knob independently: uniformly, or log-uniformly where ``is_exp``.

    In a discrete space it avoids points already observed or pending, while it can
    find new ones by a few redraws.
    """

    name = "random"

    def propose(self, trial_id: int, pending: Iterable[Knobs] = ()) -> Knobs:
        point = self.sample_new(self.rng(trial_id), self.taken(pending))
        return self.search_space.unflatten(point)
