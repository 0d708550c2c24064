"""A trial asked to measure where fusing its structure pays does so before it trains.

Under the job option ``fusion: "auto"`` the job driver asks the first trial of each
structure of a sub-job (its claim's ``fusion_profile``, ``{"max_group": K, "budget_s": B}``,
the budget being the driver's share of the sub-job's remaining work, within
:data:`PROFILE_BUDGET_S`) how many stacked copies of its model one slot trains fastest. The worker answers with
:func:`baobab.model.profile_fusion` on a second instance of the trial's template, built
with the trial's knobs and train args and fed the trial's own data (from the machine's
data cache when there is one), before the trial itself trains as it would unasked. The
measurement goes back with the trial's final state, whatever that is; the driver sizes
the sub-job's later groups of that structure by its ``best``.

The stack's memory is bounded by what the slot may use: on a GPU, most of the device's
free memory; on a CPU, half of the worker's memory limit (``BAOBAB_TRIAL_MEMORY_MB``,
the trial itself needs the rest).
"""

from __future__ import annotations

import resource
from collections.abc import Callable, Mapping
from typing import Any

from baobab.model import BaseModel, TrialContext
from baobab.store import TrialClaim
from baobab.worker._cache import LoadedTemplate
from baobab.worker._data_cache import DataCache
from baobab.worker._trial_process import call_template, train_kwargs, trial_seed

__all__ = ["measure_fusion", "profile_line"]

#: Seconds a profile may take: a few sizes, each timed for a fraction of a second.
PROFILE_BUDGET_S = 10.0
#: Share of a GPU's free memory, or of a CPU slot's memory limit, a profiled stack may fill.
_GPU_SHARE, _CPU_SHARE = 0.8, 0.5


def measure_fusion(
    claim: TrialClaim,
    template: LoadedTemplate,
    knobs: Mapping[str, Any],
    train_path: str,
    val_path: str,
    data: DataCache | None,
    is_torch_model: bool,
    zoo_params: Callable[[int], Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The claim's fusion profile request with the measurement (``FusionProfile.to_json()``).

    A template that is not a TorchModel, or whose measurement fails, answers group size 1
    with the reason: its trials then train alone, as they would have. ``zoo_params`` is the
    trial's own (``TrialContext.zoo_params``): the second instance reads the zoo models it does.
    """
    request = claim.fusion_profile
    assert request is not None, "measure_fusion() of a claim that asks for no profile"
    from baobab.model import FusionProfile

    if not is_torch_model:
        return {**request, **FusionProfile({}, 1, 0.0, "not a TorchModel: its trials train alone").to_json()}
    from baobab.model import profile_fusion

    seed = trial_seed(claim.seed, claim.number)
    context = TrialContext(zoo_params=zoo_params)  # the measurement's reports and logs are no trial's
    try:
        model: BaseModel = call_template(template.path, f"{claim.class_name}(**knobs)", template.cls, **knobs)
        if data is not None:
            context.data_loader = data.loader(
                model,
                template=f"{claim.template_checksum}:{claim.class_name}",
                datasets={train_path: claim.train_checksum, val_path: claim.val_checksum},
                log=context.log,
            )
        profile = profile_fusion(
            model,  # type: ignore[arg-type]  # a TorchModel: checked by the caller
            train_path,
            max_group=int(request["max_group"]),
            context=context,
            train_args=train_kwargs(template.cls, claim.train_arguments(), seed),
            budget_s=min(PROFILE_BUDGET_S, float(request.get("budget_s", PROFILE_BUDGET_S))),
            memory_bytes=_memory_bytes(model),
        )
    except Exception as e:  # the template's own errors: its trial meets them again, alone
        reason = f"measuring failed: {type(e).__name__}: {e}".splitlines()[0]
        profile = FusionProfile({}, 1, 0.0, reason)
    return {**request, **profile.to_json()}


def _memory_bytes(model: Any) -> int | None:
    """What a profiled stack may take: a share of the GPU's free memory, or of this process's limit."""
    import torch

    if model.device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(model.device)
        return int(free * _GPU_SHARE)
    soft, _ = resource.getrlimit(resource.RLIMIT_DATA)
    return None if soft == resource.RLIM_INFINITY else int(soft * _CPU_SHARE)


def profile_line(profile: Mapping[str, Any]) -> str:
    """The trial's log line about its measurement."""
    rates = ", ".join(f"{size}: {rate:g}" for size, rate in profile["samples_per_s"].items())
    best = profile["best"]
    verdict = "alone" if best == 1 else f"in groups of {best}"
    line = f"fusion profile ({profile['seconds']:g} s): training rows/s by group size {{{rates}}}; "
    line += f"later trials of this structure train {verdict}"
    return line + (f" ({profile['reason']})" if profile["reason"] else "")
