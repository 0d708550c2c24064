"""A fused inference worker: one process answering for several members in one stacked forward pass.

The members of an ensemble are usually the top trials of one template and one
structure: K networks that differ only in their weights. Served one process each, a
batch goes down K pipes and K processes contend for the cores. Here they share a
process and answer together (:class:`baobab.model.StackedPredictor`: their parameters
stacked, one forward pass under ``vmap``), and each still answers for itself: the
parent gets one answer or one error per member and ensembles them as it would the
answers of K processes.

The child loads as :mod:`baobab.worker._inference` does, member by member, and then
keeps the largest set that stacks (:func:`baobab.model.largest_stack`). The others are
*apart*: a member whose parameters cannot be read or loaded, one whose module differs
from the stacked ones, every member of a template that is no TorchModel or overrides
``predict``, and a lone member that nothing stacks with. The ready message names them
with the reason, and the parent serves them in processes of their own. When a stacked
pass raises, each member answers the batch on its own (so an error is its member's);
if they all do, ``vmap`` cannot batch the module and the members answer one by one from
then on.

Protocol, JSON lines, as :mod:`baobab.worker._inference` but for:

- the spec: ``{"members": [<InferenceSpec>, ...]}``, one template (file, class and
  confinement), best member first;
- ready: ``{"event": "ready", "apart": {"<trial id>": "<why>", ...}}``; a process that
  serves no member exits after it;
- each batch's answer: ``{"members": {"<trial id>": {"predictions": [...]} or {"error":
  "predict() raised ..."}, ...}}``, one entry per member served.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from baobab.worker._inference import (
    InferenceProcess,
    InferenceSpec,
    InferenceWorkerError,
    answer_json,
    confine_to,
    fetch_params,
    fetch_template,
    load_class,
    load_model,
    load_or_report,
    open_channel,
    send,
)

if TYPE_CHECKING:
    from baobab.model import StackedPredictor

__all__ = ["FusedInferenceWorker", "main"]


class FusedInferenceWorker(InferenceProcess):
    """The parent's handle on a process serving several members of one template stacked.

    Call :meth:`start` once (it says which members the process does not serve), then
    :meth:`predict` one batch at a time (see :class:`InferenceProcess` for closing and
    failures).

    Args:
        specs: the members, best first, of one template file, class and confinement.
        log_path: receives what the process prints.

    Raises:
        ValueError: fewer than two members, or members of different templates.
    """

    def __init__(self, specs: Sequence[InferenceSpec], *, log_path: str | os.PathLike[str]) -> None:
        if len(specs) < 2:
            raise ValueError(f"a fused worker serves two members or more, got {len(specs)}")
        template = {(s.template_key, s.template_checksum, s.class_name, s.confinement) for s in specs}
        if len(template) > 1:
            raise ValueError("the members of a fused worker must share one template, class and confinement")
        name = "trials " + ", ".join(str(s.trial_id) for s in specs)
        module = "baobab.worker._fused_inference"
        super().__init__(name, module, specs[0].confinement, log_path=log_path)
        self.specs = tuple(specs)

    def start(self, *, timeout: float | None = None) -> dict[int, str]:
        """Start the process and wait until it has loaded and stacked what it can.

        Returns:
            The members it does not serve (trial id → why); when that is every member, the
            process is gone.

        Raises:
            InferenceWorkerError: (fatal) the template cannot be loaded, loading took longer
                than ``timeout`` seconds, or the process died; it is killed.
        """
        message = self._launch(json.dumps({"members": [asdict(s) for s in self.specs]}), timeout)
        apart = message.get("apart")
        if not isinstance(apart, dict):
            raise self._unexpected(message)
        if len(apart) == len(self.specs):
            self.close()
        return {int(trial_id): str(reason) for trial_id, reason in apart.items()}

    def predict(
        self, queries: Sequence[Any], *, timeout: float | None = None
    ) -> dict[int, list[Any] | InferenceWorkerError]:
        """Each served member's predictions (one JSON value per query), or its error (not fatal).

        Raises:
            InferenceWorkerError: (fatal) the process crashed, broke the protocol or did not
                answer within ``timeout`` seconds; it is killed.
        """
        message = self._request(json.dumps({"queries": list(queries)}), timeout, "predicting")
        members = message.get("members")
        if not isinstance(members, dict):
            raise self._unexpected(message)
        answers: dict[int, list[Any] | InferenceWorkerError] = {}
        for trial_id, answer in members.items():
            if isinstance(answer, dict) and "predictions" in answer:
                answers[int(trial_id)] = answer["predictions"]
            elif isinstance(answer, dict) and "error" in answer:
                answers[int(trial_id)] = InferenceWorkerError(answer["error"], fatal=False)
            else:
                raise self._unexpected(message)
        return answers


# -- the child --------------------------------------------------------------------------


class _Members:
    """What the child serves: the loaded members (best first) and, while it works, their stack."""

    def __init__(self, template: str, models: dict[int, Any]) -> None:
        from baobab.model import StackedPredictor

        self.template = template
        self.models = models
        self.stack: StackedPredictor | None = StackedPredictor(list(models.values()))

    def answer(self, queries: list[Any]) -> str:
        """The answer message to a batch."""
        stacked = self._stacked(queries)
        if stacked is not None:
            entries = {t: _checked(p, len(queries)) for t, p in zip(self.models, stacked, strict=True)}
        else:
            entries = {t: _own(self.template, model, queries) for t, model in self.models.items()}
            if self.stack is not None and all(ok for ok, _ in entries.values()):
                print("every member answered on its own: they answer one by one from now on", file=sys.stderr)
                self.stack = None
        return '{"members": {' + ", ".join(f'"{t}": {text}' for t, (_, text) in entries.items()) + "}}"

    def _stacked(self, queries: list[Any]) -> list[Any] | None:
        """Each member's predictions from one stacked pass; None when there is no stack or the pass failed."""
        from baobab.worker._trial_process import TrialFailed, call_template

        if self.stack is None:
            return None
        try:
            return call_template(self.template, "predict()", self.stack.predict, queries)
        except TrialFailed as e:
            print(f"the stacked pass failed; each member answers this batch on its own: {e}", file=sys.stderr)
            return None

    def teardown(self) -> None:
        _teardown(self.template, list(self.models.values()))


def _teardown(template: str, models: list[Any]) -> None:
    """Let each of ``models`` release what it holds; an error is logged, not raised."""
    from baobab.worker._trial_process import TrialFailed, call_template

    for model in models:
        try:
            call_template(template, "teardown()", model.teardown)
        except TrialFailed as e:
            print(str(e), file=sys.stderr, flush=True)


def _own(template: str, model: Any, queries: list[Any]) -> tuple[bool, str]:
    """One member's entry of an answer from its own ``predict``: whether it answered, and the entry."""
    from baobab.worker._trial_process import TrialFailed, call_template

    try:
        predictions = call_template(template, "predict()", model.predict, queries)
    except TrialFailed as e:
        print(str(e), file=sys.stderr, flush=True)
        return False, json.dumps({"error": e.error})
    return _checked(predictions, len(queries))


def _checked(predictions: Any, count: int) -> tuple[bool, str]:
    """One member's entry of an answer: its checked predictions, or its error (details to the log)."""
    from baobab.worker._trial_process import TrialFailed

    try:
        return True, '{"predictions": ' + answer_json(predictions, count) + "}"
    except TrialFailed as e:
        print(str(e), file=sys.stderr, flush=True)
        return False, json.dumps({"error": e.error})


def _load(specs: list[InferenceSpec], parent: int) -> tuple[_Members | None, dict[int, str]]:
    """The members that stack, and why each other one is apart.

    Raises:
        TrialFailed: the template cannot be fetched or imported (every member would fail alike).
    """
    from baobab.worker._trial_process import TrialFailed

    first = specs[0]
    template_file = fetch_template(first)
    apart: dict[int, str] = {}
    data: dict[int, bytes] = {}
    for spec in specs:
        try:
            data[spec.trial_id] = fetch_params(spec)
        except TrialFailed as e:
            apart[spec.trial_id] = e.error
    confine_to(first.confinement, template_file, parent)
    template = str(template_file)
    cls = load_class(first, template_file)
    try:
        from baobab.model import stack_refusal

        refusal = stack_refusal(cls)
    except ImportError as e:  # no torch here: nothing can stack
        refusal = f"cannot stack without torch ({e})"
    if refusal is not None:
        return None, {spec.trial_id: refusal for spec in specs}
    models: dict[int, Any] = {}
    for spec in specs:
        if spec.trial_id in data:
            try:
                models[spec.trial_id] = load_model(spec, cls, template, data[spec.trial_id])
            except TrialFailed as e:
                print(str(e), file=sys.stderr, flush=True)
                apart[spec.trial_id] = e.error
    from baobab.model import largest_stack

    ids = list(models)
    kept, unstacked = largest_stack([models[t] for t in ids])
    apart.update({ids[i]: reason for i, reason in unstacked.items()})
    if len(kept) < 2:
        apart.update({ids[i]: "no other member of the job stacks with it" for i in kept})
    served = _Members(template, {ids[i]: models[ids[i]] for i in kept}) if len(kept) >= 2 else None
    _teardown(template, [models[t] for t in ids if t in apart])
    return served, apart


def main() -> int:
    """The fused worker process: read the group, load and stack, answer batches until stdin ends."""
    parent, channel, line = open_channel()
    if not line:
        return 0
    specs = [InferenceSpec(**fields) for fields in json.loads(line)["members"]]

    loaded = load_or_report(channel, lambda: _load(specs, parent))
    if loaded is None:
        return 1
    members, apart = loaded
    for trial_id, reason in apart.items():
        print(f"trial {trial_id} is served apart: {reason}", file=sys.stderr, flush=True)
    send(channel, json.dumps({"event": "ready", "apart": {str(t): reason for t, reason in apart.items()}}))
    if members is None:
        return 0
    try:
        for line in sys.stdin:
            send(channel, members.answer(json.loads(line)["queries"]))
    finally:
        members.teardown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
