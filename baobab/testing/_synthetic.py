"""A synthetic objective over numeric knobs: cheap, smooth, with a known optimum.

The Branin function (Dixon and Szegő, 1978) of ``x1`` and ``x2``, with ``x2`` searched
on a log scale, plus a bowl in ``log2(width)`` for an integer knob; negated, because
Baobab maximises scores. The best score is about -0.398 (Branin's minimum 0.397887 at
three points, and ``width == 8``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from baobab.model import FloatKnob, IntegerKnob, KnobConfig

__all__ = ["BRANIN_BEST", "branin_knob_config", "branin_score"]

#: The highest score :func:`branin_score` can give.
BRANIN_BEST = -0.397887


def branin_knob_config() -> KnobConfig:
    """Three numeric knobs: two floats (one on a log scale) and a log-scale integer."""
    return {
        "x1": FloatKnob(-5.0, 10.0),
        "x2": FloatKnob(0.5, 15.0, is_exp=True),
        "width": IntegerKnob(1, 256, is_exp=True),
    }


def branin_score(knobs: Mapping[str, Any]) -> float:
    """Minus Branin at ``(x1, x2)``, minus ``(log2(width) - 3)**2``: higher is better."""
    x1, x2 = knobs["x1"], knobs["x2"]
    b, c, t = 5.1 / (4 * math.pi**2), 5 / math.pi, 1 / (8 * math.pi)
    branin = (x2 - b * x1**2 + c * x1 - 6) ** 2 + 10 * (1 - t) * math.cos(x1) + 10
    return -branin - (math.log2(knobs["width"]) - 3) ** 2
