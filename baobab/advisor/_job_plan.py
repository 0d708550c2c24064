"""The plan of a sub-job, built (and so checked) from what a train job's specification holds.

One home for the admin API, which refuses at creation a job whose plan cannot be built,
and for the job driver, which runs the plan it builds here.
"""

from __future__ import annotations

from baobab.advisor._deterministic import check_deterministic
from baobab.advisor._factory import strategy_class
from baobab.advisor._job_options import JobOptions
from baobab.advisor._plans import Plan, options_plan
from baobab.advisor._trial_knobs import trial_policies
from baobab.exceptions import StrategyError
from baobab.model import KnobConfig

__all__ = ["check_job_plan"]


def check_job_plan(
    strategy: str,
    knob_config: KnobConfig,
    options: JobOptions,
    *,
    trial_count: int | None,
    time_hours: float | None,
    workers: int,
) -> Plan:
    """The plan of a sub-job searched by ``strategy`` over a template's ``knob_config``.

    Args:
        strategy: the sub-job's strategy name, as the job gives it (``"auto"`` included).
        knob_config: the template's knob config.
        options: the job's options (:func:`~baobab.advisor.parse_job_options`).
        trial_count: the budget's MODEL_TRIAL_COUNT, or None.
        time_hours: the budget's TIME_HOURS, or None.
        workers: how many of the job's trials run at once, the job's cap:
            ``budget.workers(settings.cpu_slots)``, that is GPU_COUNT, or the advisor's
            ``cpu_slots`` when GPU_COUNT is 0.

    Raises:
        StrategyError: the strategy's plan does not fit the template or the budget (an
            ENAS search with too few trials for one cycle and its final phases, or a
            template without the policies it needs), or deterministic mode asked with what it
            cannot make repeatable (:func:`~baobab.advisor._deterministic.check_deterministic`).
            The message is the one a sub-job the driver could not plan ends ERRORED with.
    """
    check_deterministic(strategy, options)
    cls = strategy_class(strategy)
    try:
        plan = (
            None
            if cls is None
            else cls.plan_for(knob_config, options, trial_count=trial_count, time_hours=time_hours, workers=workers)
        )
    except Exception as e:
        raise StrategyError(f"strategy {strategy!r}: {type(e).__name__}: {e}") from e
    return options_plan(options, frozenset(trial_policies(knob_config))) if plan is None else plan
