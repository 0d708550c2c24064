"""The cost model: how long a unit of work takes and how much memory it holds, from measurements.

Two sources feed it. Every finished trial gives its wall time with its knobs, threads,
devices and group size; the packing profile of a structure gives training rows per
second by group size (:func:`baobab.model.profile_fusion`) and the memory of a stack.
A Bayesian ridge regression per kind (template) over the knobs predicts configurations
not yet seen, with its uncertainty.

What it assumes until measured, each chosen to favour no plan:

- a thread more divides the time of a trial on the CPU, a device more that of a trial
  on GPUs (the regression learns core-seconds or device-seconds, so a plan gains nothing
  by reshaping threads until trials ran at two counts and showed it), but no more
  threads or devices speed a trial up than the most it was measured with;
- a group of K without a profile takes K times one member (fusing gains nothing).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.linear_model import BayesianRidge

from baobab.advisor.placement._work import Estimate

__all__ = ["CostModel"]

#: Finished trials a kind's regression keeps (the latest): a bound on memory and refitting time.
HISTORY = 200
#: A kind's regression is fitted again once the samples since its fit are 1/REFIT_EVERY of those it was fitted on.
REFIT_EVERY = 10


@dataclass
class _Profile:
    rates: dict[int, float]  # training rows per second of a group, by its size
    memory: dict[int, float]  # bytes of a group's stack, by its size


@dataclass
class _Kind:
    samples: deque[tuple[dict[str, float], float]] = field(default_factory=lambda: deque(maxlen=HISTORY))
    member_memory: float = 0.0
    most_threads: int = 1
    most_devices: int = 0
    fitted: tuple[BayesianRidge, list[str]] | None = None
    unfitted: int = 0  # samples observed since the fit


def _features(knobs: Mapping[str, Any], threads: int, devices: int) -> dict[str, float]:
    """Numbers a regression can weigh: positive numbers on a log scale (a learning rate, an epoch
    count), booleans as 0 or 1, other values one-hot, and the log of threads and devices."""
    out: dict[str, float] = {"threads": math.log(max(1, threads)), "devices": math.log(max(1, devices))}
    for name, value in knobs.items():
        if isinstance(value, bool):
            out[name] = float(value)
        elif isinstance(value, int | float) and math.isfinite(value):
            out[name] = math.log(value) if value > 0 else float(value)
        else:
            out[f"{name}={value}"] = 1.0
    return out


class CostModel:
    """Per-kind wall-time and memory predictions from what trials and profiles measured."""

    def __init__(self) -> None:
        self._kinds: dict[str, _Kind] = {}
        self._profiles: dict[tuple[str, str], _Profile] = {}

    def knows(self, kind: str) -> bool:
        """Whether a trial of ``kind`` has finished and been observed."""
        return kind in self._kinds and bool(self._kinds[kind].samples)

    def observe(
        self,
        kind: str,
        structure: str,
        knobs: Mapping[str, Any],
        *,
        seconds: float,
        threads: int = 1,
        devices: int = 0,
        group: int = 1,
        memory: float | None = None,
    ) -> None:
        """A finished unit: ``seconds`` of wall time for a group of ``group`` trials (1: alone)."""
        if not (seconds > 0 and math.isfinite(seconds)):
            return
        entry = self._kinds.setdefault(kind, _Kind())
        alone = seconds / self.group_factor(kind, structure, group)
        # core-seconds (device-seconds): what the regression learns, so that until it sees two
        # thread counts, time is taken to divide by threads
        target = math.log(alone * _width(threads, devices))
        entry.samples.append((_features(knobs, threads, devices), target))
        entry.most_threads, entry.most_devices = max(entry.most_threads, threads), max(entry.most_devices, devices)
        entry.unfitted += 1
        if memory is not None and memory > 0:
            entry.member_memory = max(entry.member_memory, memory / group)

    def observe_profile(
        self, kind: str, structure: str, rates: Mapping[int, float], memory: Mapping[int, float] | None = None
    ) -> None:
        """A packing profile of ``structure``: rows per second of a group by size, and its stack's bytes."""
        usable = {int(k): float(v) for k, v in rates.items() if v > 0 and math.isfinite(v)}
        if 1 in usable:
            self._profiles[(kind, structure)] = _Profile(usable, {int(k): float(v) for k, v in (memory or {}).items()})

    def group_factor(self, kind: str, structure: str, group: int) -> float:
        """How many times one member's time a group of ``group`` takes: ``group`` without a profile,
        ``group * rate(1) / rate(group)`` with one (log-log interpolated between measured sizes)."""
        if group <= 1:
            return 1.0
        profile = self._profiles.get((kind, structure))
        if profile is None:
            return float(group)
        return group * profile.rates[1] / _interpolate(profile.rates, group)

    def best_group(self, kind: str, structure: str, limit: int) -> int:
        """The group size of at most ``limit`` that trains the most rows per second (1 unmeasured)."""
        profile = self._profiles.get((kind, structure))
        if profile is None or limit <= 1:
            return 1
        sizes = [size for size in sorted(profile.rates) if size <= limit]
        return max(sizes, key=lambda size: (profile.rates[size], -size))

    def estimate(
        self,
        kind: str,
        structure: str,
        knobs: Mapping[str, Any],
        *,
        group: int = 1,
        threads: int = 1,
        devices: int = 0,
    ) -> Estimate | None:
        """The unit's expected wall time, memory and spread; None where no trial of ``kind`` finished."""
        entry = self._kinds.get(kind)
        if entry is None or not entry.samples:
            return None
        model, names = self._fit(entry)
        threads = min(threads, entry.most_threads)
        devices = min(devices, max(1, entry.most_devices)) if devices else 0
        row = _features(knobs, threads, devices)
        x = np.array([[row.get(name, 0.0) for name in names]])
        mean, std = model.predict(x, return_std=True)
        # The regression fits log seconds, so exp(mean) is a median; a plan's makespan adds times up,
        # which takes their mean: a log-normal's is exp(mean + noise variance / 2). With the median,
        # 8 of the 10 jobs bench/placement.py's fidelity part replayed came out shorter than they ran.
        core_seconds = math.exp(float(mean[0]) + 0.5 / float(model.alpha_))
        alone = core_seconds / _width(threads, devices)
        return Estimate(
            seconds=alone * self.group_factor(kind, structure, group),
            memory=self._memory(kind, structure, entry, group),
            spread=float(std[0]),
        )

    def _memory(self, kind: str, structure: str, entry: _Kind, group: int) -> float:
        profile = self._profiles.get((kind, structure))
        if profile is not None and profile.memory:
            size = min(profile.memory, key=lambda s: (abs(s - group), -s))
            return profile.memory[size] * group / size
        return entry.member_memory * group

    @staticmethod
    def _fit(entry: _Kind) -> tuple[BayesianRidge, list[str]]:
        # Refitted once the samples since the fit are a tenth of those it was fitted on (each of the first
        # ten at once): the driver asks at every trial's end, and one more of 200 samples moves little.
        if entry.fitted is None or entry.unfitted >= max(1, (len(entry.samples) - entry.unfitted) // REFIT_EVERY):
            names = sorted({name for features, _ in entry.samples for name in features})
            x = np.array([[features.get(name, 0.0) for name in names] for features, _ in entry.samples])
            y = np.array([target for _, target in entry.samples])
            model = BayesianRidge()
            if len(y) == 1:  # one trial: its time, with the spread of a guess
                x, y = np.vstack([x, x]), np.concatenate([y, y])
            model.fit(x, y)
            entry.fitted, entry.unfitted = (model, names), 0
        return entry.fitted


def _width(threads: int, devices: int) -> int:
    """What a trial's time is taken to divide by until measured: its devices on GPUs, else its threads."""
    return max(1, devices) if devices > 0 else max(1, threads)


def _interpolate(rates: Mapping[int, float], size: int) -> float:
    """Rows per second of a group of ``size``, log-log between the measured sizes around it (the
    nearest measured one outside them)."""
    if size in rates:
        return rates[size]
    sizes = sorted(rates)
    below = [s for s in sizes if s < size]
    above = [s for s in sizes if s > size]
    if not below or not above:
        return rates[below[-1] if below else above[0]]
    lo, hi = below[-1], above[0]
    w = (math.log(size) - math.log(lo)) / (math.log(hi) - math.log(lo))
    return math.exp((1 - w) * math.log(rates[lo]) + w * math.log(rates[hi]))
