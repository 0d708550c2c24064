"""The model template API: what a model developer writes against.

``TorchModel``, the fused training of several (``train_fused``) and their stacked
inference (``StackedPredictor``) are imported on first use: torch is an optional
dependency (the API image has none) and importing it takes about a second.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from baobab.enums import DatasetFormat, Task
from baobab.model._base import BaseModel, Params, check_params
from baobab.model._context import InterimMetric, TrialContext, get_trial_context, trial_context
from baobab.model._fusion_profile import FusionProfile
from baobab.model._knobs import (
    EPOCHS_KNOB,
    ArchKnob,
    BaseKnob,
    CategoricalKnob,
    FixedKnob,
    FloatKnob,
    IntegerKnob,
    KnobConfig,
    Knobs,
    Policy,
    PolicyKnob,
    is_structural,
    knob_config_from_json,
    knob_config_to_json,
    knobs_from_json,
    knobs_to_json,
    searchable_knobs,
    structural_knobs,
    structure_key,
    validate_knob_config,
    validate_knobs,
)
from baobab.model._template import check_template, load_template, template_traceback

if TYPE_CHECKING:
    from baobab.model._fused import FusedOutcome, FusedStatus, fuse_check, train_fused
    from baobab.model._packing import profile_fusion, stack_bytes
    from baobab.model._stacked import StackedPredictor, largest_stack, stack_refusal
    from baobab.model._torch import TorchModel, module_state

__all__ = [
    "EPOCHS_KNOB",
    "ArchKnob",
    "BaseKnob",
    "BaseModel",
    "CategoricalKnob",
    "DatasetFormat",
    "FixedKnob",
    "FloatKnob",
    "FusedOutcome",
    "FusedStatus",
    "FusionProfile",
    "IntegerKnob",
    "InterimMetric",
    "KnobConfig",
    "Knobs",
    "Params",
    "Policy",
    "PolicyKnob",
    "StackedPredictor",
    "Task",
    "TorchModel",
    "TrialContext",
    "check_params",
    "check_template",
    "fuse_check",
    "get_trial_context",
    "knob_config_from_json",
    "knob_config_to_json",
    "knobs_from_json",
    "knobs_to_json",
    "largest_stack",
    "load_template",
    "profile_fusion",
    "is_structural",
    "searchable_knobs",
    "stack_refusal",
    "structural_knobs",
    "structure_key",
    "stack_bytes",
    "template_traceback",
    "train_fused",
    "trial_context",
    "validate_knob_config",
    "validate_knobs",
    "module_state",
]


def __getattr__(name: str) -> Any:
    if name in ("TorchModel", "module_state"):
        from baobab.model import _torch

        return getattr(_torch, name)
    if name in ("FusedOutcome", "FusedStatus", "fuse_check", "train_fused"):
        from baobab.model import _fused

        return getattr(_fused, name)
    if name in ("profile_fusion", "stack_bytes"):
        from baobab.model import _packing

        return getattr(_packing, name)
    if name in ("StackedPredictor", "largest_stack", "stack_refusal"):
        from baobab.model import _stacked

        return getattr(_stacked, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
