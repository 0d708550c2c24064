"""How long a job would take on a given set of machines, before it is created: the simulator
offered to users ("how long on N workers?").

The job's trials are forecast from the finished trials of its templates: the sub-jobs
take trials in turn, as the driver gives the next slot to the sub-job with the fewest,
and a sub-job's k-th trial is taken to be like its template's k-th measured trial (the
measured trials in turn), so the forecast's mix of knobs is the mix measured. Each
placement method plans them and the simulator plays the plan.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from baobab.advisor._stopping import StoppingRule
from baobab.advisor.placement._cost import CostModel
from baobab.advisor.placement._search import METHODS, choose_plan
from baobab.advisor.placement._work import Job, Machine, Pending
from baobab.model import EPOCHS_KNOB

__all__ = ["MAX_FORECAST_TRIALS", "Forecast", "Measured", "forecast_job", "stopped_share"]

#: Trials a forecast plays at most, over all templates (an open count stops there).
MAX_FORECAST_TRIALS = 2000


def stopped_share(rule: StoppingRule | None, knobs: Mapping[str, Any]) -> float:
    """The share of its training a trial of ``knobs`` is expected to run under ``rule``: by its epoch
    count (the steps a ``TorchModel`` reports); all of it without a rule or an epoch count."""
    epochs = knobs.get(EPOCHS_KNOB)
    if rule is None or isinstance(epochs, bool) or not isinstance(epochs, int):
        return 1.0
    return rule.expected_share(epochs)


@dataclass(frozen=True)
class Measured:
    """A finished trial of a template: its knobs, structure, wall time, and the size of the fused
    group it ran in (1 alone)."""

    kind: str
    structure: str
    knobs: Mapping[str, Any]
    seconds: float
    group: int = 1
    devices: int = 0


@dataclass(frozen=True)
class Forecast:
    """One method's plan played forward: seconds to the last trial's end, trials ending within the
    time budget and not, and the share of the machines' cores kept busy."""

    method: str
    makespan: float
    finished: int
    unfinished: int
    utilisation: float


def forecast_job(
    kinds: Sequence[str],
    measured: Sequence[Measured],
    *,
    trials: int | None,
    machines: Sequence[Machine],
    cap: int,
    gpus: int = 0,
    deadline: float = math.inf,
    max_group: int = 1,
    profiles: Mapping[tuple[str, str], Mapping[int, float]] | None = None,
    share: Callable[[Mapping[str, Any]], float] | None = None,
    budget_s: float = 0.2,
) -> tuple[list[Forecast], str | None]:
    """Each placement method's forecast for a job of ``kinds`` (its templates, in sub-job order);
    or no forecast and why, when a template has no finished trial to learn from.

    Args:
        trials: the trials of each template (MODEL_TRIAL_COUNT; None: as many as ``deadline`` allows).
        cap, gpus, deadline, max_group: the job's limits (see :class:`Job`).
        profiles: packing profiles, rows per second by group size, by (kind, structure).
        share: the share of its training a trial with these knobs is expected to run (early
            stopping; see :meth:`~baobab.advisor.StoppingRule.expected_share`); all of it when None.
    """
    cost = CostModel()
    by_kind: dict[str, list[Measured]] = {kind: [] for kind in kinds}
    for m in measured:
        if m.kind in by_kind:
            by_kind[m.kind].append(m)
    for (kind, structure), rates in (profiles or {}).items():
        cost.observe_profile(kind, structure, rates)
    for m in measured:
        cost.observe(m.kind, m.structure, m.knobs, seconds=m.seconds, group=m.group, devices=m.devices)
    missing = [kind for kind in kinds if not cost.knows(kind)]
    if missing:
        return [], f"no trial of {', '.join(missing)} has finished yet: nothing to forecast from"
    if trials is None:
        if math.isinf(deadline):
            raise ValueError("a job needs a trial count or a deadline")
        fastest = min(m.seconds / m.group for m in measured if m.kind in by_kind)
        cores = sum(machine.cores for machine in machines)
        trials = min(MAX_FORECAST_TRIALS // len(kinds), math.ceil(deadline / fastest) * max(1, cores) + 1)
    pending = []
    for n in range(trials * len(kinds)):
        kind = kinds[n % len(kinds)]
        like = by_kind[kind][(n // len(kinds)) % len(by_kind[kind])]
        fraction = 1.0 if share is None else share(like.knobs)
        pending.append(Pending(n, 1, kind, like.structure, like.knobs, fraction=fraction))
    jobs = {1: Job(1, cap=cap, gpus=gpus, deadline=deadline, max_group=max_group)}
    forecasts = []
    for method in METHODS:
        choice = choose_plan(pending, machines=machines, jobs=jobs, cost=cost, method=method, budget_s=budget_s)
        assert choice.outcome is not None  # every kind is measured
        outcome = choice.outcome
        forecasts.append(Forecast(method, outcome.makespan, outcome.finished, outcome.unfinished, outcome.utilisation))
    return forecasts, None
