"""A trial's whole set of knob values: the strategy's proposal, fixed knobs and policy knobs.

Strategies only choose searchable knobs; the template gets every knob. The job driver
and the dev runner build the rest the same way, here: each ``FixedKnob`` takes its
declared value and each ``PolicyKnob`` takes the value chosen for its policy (False
when none is chosen).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from baobab.model import (
    FixedKnob,
    KnobConfig,
    Knobs,
    Policy,
    PolicyKnob,
    validate_knobs,
)

__all__ = ["base_knobs", "trial_knobs", "trial_policies"]


def trial_policies(config: KnobConfig, chosen: Mapping[Policy, bool] | None = None) -> dict[Policy, bool]:
    """Every policy the template declares (by a ``PolicyKnob``), to whether it is on for a trial.

    Policies the template does not declare are left out, whatever ``chosen`` says: a
    template is never asked for a mode it cannot do.
    """
    chosen = chosen or {}
    return {
        Policy(knob.policy): bool(chosen.get(Policy(knob.policy), False))
        for knob in config.values()
        if isinstance(knob, PolicyKnob)
    }


def base_knobs(config: KnobConfig, policies: Mapping[Policy, bool] | None = None) -> Knobs:
    """The values of the knobs no strategy chooses: fixed values, and each policy knob's policy (default off)."""
    policies = policies or {}
    values: Knobs = {}
    for name, knob in config.items():
        if isinstance(knob, FixedKnob):
            values[name] = knob.value
        elif isinstance(knob, PolicyKnob):
            values[name] = bool(policies.get(Policy(knob.policy), False))
    return values


def trial_knobs(
    config: KnobConfig, proposal: Mapping[str, Any], policies: Mapping[Policy, bool] | None = None
) -> Knobs:
    """Every knob value the template gets for a trial: ``proposal`` plus :func:`base_knobs`, checked.

    Raises:
        KnobConfigError: the proposal misses a searchable knob, names an unknown one or
            holds a value the knob cannot take.
    """
    return validate_knobs(config, {**proposal, **base_knobs(config, policies)})
