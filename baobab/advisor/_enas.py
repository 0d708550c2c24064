"""ENAS: architectures sampled by an LSTM controller trained with REINFORCE, on shared weights.

Pham, Guan, Zoph, Le and Dean, "Efficient Neural Architecture Search via Parameter
Sharing", ICML 2018. The controller (:mod:`baobab.advisor._enas_controller`) samples
one choice per position; the cycle of shared-weight training and evaluation that
feeds it is planned by :class:`~baobab.advisor.EnasPlanner`; this module is the
strategy between the two.

What the controller learns from (the metadata contract): COMPLETED records whose
``metadata["phase"]`` is ``"evaluate"``, or which carry no phase at all (a plain trial,
as the dev runner runs them: a fully trained model's score is a fine reward too). The
other phases (``train_shared``, ``final_evaluate``, ``final_train``) and failed trials
teach it nothing. An INVALID record (an architecture that cannot be built) teaches it
nothing either, but that architecture is never proposed again: a sample that hits one
is drawn again (a controller that has converged on it: the most likely other one).
Records with the same trial id replace each other, as for every strategy.

Order: the controller's state is the result of its updates replayed in trial-id order,
whatever order the records arrived in (parallel workers finish out of order). A record
that arrives after a later-numbered one rolls the controller back to a snapshot before
it and replays from there, so the original and a strategy rebuilt from the history
always agree, to the bit: torch runs the small controller on the CPU, deterministically.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from baobab.advisor._base import Strategy, TrialStatus
from baobab.advisor._enas_phases import EnasPhase, EnasPlanner
from baobab.advisor._job_options import JobOptions
from baobab.advisor._plans import EnasPlan
from baobab.advisor._space import FlatPoint
from baobab.exceptions import StrategyError
from baobab.model import KnobConfig, Knobs

if TYPE_CHECKING:
    from baobab.advisor._enas_controller import ControllerState, Reinforce

__all__ = ["EnasStrategy"]

#: The phases whose scores are rewards (None: a record without a phase).
_LEARNING_PHASES = (EnasPhase.EVALUATE.value, None)
#: A snapshot of the controller every this many updates, and how many are kept besides
#: the initial one: a late record replays the updates from the snapshot before it (all
#: of them only when it is more than 128 updates late).
_SNAPSHOT_EVERY = 16
_SNAPSHOTS_KEPT = 8

#: One controller update: the trial, the architecture (one index per position) and the reward.
_Update = tuple[int, tuple[int, ...], float]
#: Samples one proposal draws while they hit INVALID architectures, before it takes the most likely other one.
_RESAMPLES = 64


class EnasStrategy(Strategy):
    """Samples architectures from an LSTM controller that REINFORCE trains on their scores.

    Every categorical dimension is a position of the controller, in the knob config's
    order: each position of each :class:`~baobab.model.ArchKnob`, and each
    :class:`~baobab.model.CategoricalKnob`. Integer and float knobs are not searched:
    they are proposed at the centre of their range (on the log scale where ``is_exp``),
    the same for every trial, so that the shared weights are trained under one setting;
    fix them in the template, or tune them in another job.

    Proposals are samples of the policy: ``pending`` is ignored and an architecture may
    come again (a policy that has converged should sample its best architecture often),
    unless it was INVALID: the policy is sampled as restricted to the other architectures.

    Args:
        knob_config: the template's knob config.
        seed: seeds the controller's initial weights and, with the trial id, each sample.
        lstm_size: the controller's width.
        learning_rate: Adam's step size for the controller. ENAS's controller takes
            thousands of steps; a Baobab job gives it one per evaluation trial, tens to
            hundreds, hence a larger step. On a synthetic task (8 positions of 6 choices,
            scores in [0, 1] with noise of 0.1), 2e-3 made the best architecture the most
            likely (probability 0.65 to 0.69) within 200 updates for each of 4 seeds;
            3e-3 and 5e-3 settled on a wrong one for some seeds.
        baseline_decay: how slowly the reward baseline moves (ENAS's ``bl_dec``).
        entropy_weight: the weight of the entropy bonus, which keeps the policy exploring;
            it acts against the advantages, so it goes with the scale of the scores
            (ENAS's 1e-4 is for accuracies in [0, 1]).
        tanh_constant: bounds the logits to ``[-tanh_constant, tanh_constant]``.

    Raises:
        StrategyError: an option is out of range, or torch is not installed.
    """

    name = "enas"

    @classmethod
    def plan_for(
        cls,
        knob_config: KnobConfig,
        options: JobOptions,
        *,
        trial_count: int | None,
        time_hours: float | None,
        workers: int,
    ) -> EnasPlan:
        """The ENAS cycle within the job's budget; StrategyError when the budget leaves no room for it."""
        planner = EnasPlanner(
            knob_config,
            trial_budget=trial_count,
            time_budget_s=None if time_hours is None else time_hours * 3600,
            workers=workers,
            **options.enas,
        )
        return EnasPlan(planner)

    def __init__(
        self,
        knob_config: KnobConfig,
        *,
        seed: int | None = None,
        lstm_size: int = 64,
        learning_rate: float = 2e-3,
        baseline_decay: float = 0.9,
        entropy_weight: float = 1e-4,
        tanh_constant: float = 2.5,
    ) -> None:
        super().__init__(knob_config, seed=seed)
        whole = isinstance(lstm_size, int) and not isinstance(lstm_size, bool)
        _check("lstm_size", lstm_size, whole and lstm_size > 0, "a whole number >= 1")
        _check("learning_rate", learning_rate, _number(learning_rate) and learning_rate > 0, "a number > 0")
        _check("baseline_decay", baseline_decay, _number(baseline_decay) and 0 <= baseline_decay < 1, "in [0, 1)")
        _check("entropy_weight", entropy_weight, _number(entropy_weight) and entropy_weight >= 0, "a number >= 0")
        _check("tanh_constant", tanh_constant, _number(tanh_constant) and tanh_constant > 0, "a number > 0")
        self.lstm_size = lstm_size
        self.learning_rate = float(learning_rate)
        self.baseline_decay = float(baseline_decay)
        self.entropy_weight = float(entropy_weight)
        self.tanh_constant = float(tanh_constant)
        dims = self.search_space.dimensions
        #: Indices of the dimensions the controller chooses, and the fixed values of the others.
        self._positions = [j for j, dim in enumerate(dims) if dim.is_categorical]
        self._centre: FlatPoint = tuple(None if dim.is_categorical else dim.from_unit(0.5) for dim in dims)
        self._trainer: Reinforce | None = None
        self._applied: list[_Update] = []
        self._snapshots: dict[int, ControllerState] = {}
        if self._positions:
            self._trainer = self._new_trainer()
            self._snapshots[0] = self._trainer.save()

    def _new_trainer(self) -> Reinforce:
        try:
            from baobab.advisor._enas_controller import Controller, Reinforce
        except ImportError as e:
            raise StrategyError(f"the enas strategy needs PyTorch ({e}); install baobab[torch]") from None
        sizes = [len(self.search_space.dimensions[j].choices) for j in self._positions]
        controller = Controller(sizes, hidden=self.lstm_size, tanh_constant=self.tanh_constant, seed=self.seed)
        return Reinforce(
            controller,
            learning_rate=self.learning_rate,
            baseline_decay=self.baseline_decay,
            entropy_weight=self.entropy_weight,
        )

    # -- proposals ----------------------------------------------------------------------

    def propose(self, trial_id: int, pending: Iterable[Knobs] = ()) -> Knobs:
        if self._trainer is None:
            return self._knobs(())
        self._sync()
        rng = self.rng(trial_id)
        invalid = self._invalid()
        for _ in range(_RESAMPLES):
            actions = self._trainer.controller.sample(rng)
            if tuple(actions) not in invalid:
                return self._knobs(actions)
        return self._likeliest()

    def top_architectures(self, n: int, *, exclude: Iterable[Mapping[str, Any]] = ()) -> list[Knobs]:
        """The ``n`` architectures the controller finds most likely (a beam search), best first.

        Args:
            n: how many (fewer when the space holds fewer).
            exclude: knob values to leave out (architectures already scored, or pending),
                besides the INVALID ones, which are always left out.
        """
        if n < 1:
            return []
        if self._trainer is None:
            return [self._knobs(())]
        self._sync()
        skip = {self._actions(self.search_space.flatten(knobs)) for knobs in exclude} | self._invalid()
        beams = self._trainer.controller.beam_search(n + len(skip))
        return [self._knobs(actions) for _, actions in beams if tuple(actions) not in skip][:n]

    def best_architecture(self) -> Knobs:
        """The architecture to train from scratch: the best-scored ``final_evaluate`` record's.

        Falls back on the controller's most likely architecture when no final evaluation
        completed. Ties go to the earlier trial.
        """
        finals = [
            r
            for r in self.history
            if r.status is TrialStatus.COMPLETED and r.metadata.get("phase") == EnasPhase.FINAL_EVALUATE.value
        ]
        if finals:
            best = max(finals, key=lambda r: (r.score, -r.trial_id))
            return self.search_space.unflatten(self.search_space.flatten(best.knobs))
        return self._likeliest()

    def propose_for(self, phase: EnasPhase | str, trial_id: int, pending: Iterable[Knobs] = ()) -> Knobs:
        """The proposal for a trial of ``phase`` (see :class:`~baobab.advisor.EnasPlanner`).

        ``train_shared`` and ``evaluate``: a sample (:meth:`propose`). ``final_evaluate``:
        the most likely architecture neither scored in that phase yet nor pending.
        ``final_train``: :meth:`best_architecture`.
        """
        phase = EnasPhase(phase)
        if phase is EnasPhase.FINAL_TRAIN:
            return self.best_architecture()
        if phase is EnasPhase.FINAL_EVALUATE:
            scored = [r.knobs for r in self.history if r.metadata.get("phase") == phase.value]
            top = self.top_architectures(1, exclude=[*scored, *pending])
            return top[0] if top else self._likeliest()
        return self.propose(trial_id, pending)

    def _likeliest(self) -> Knobs:
        """The most likely architecture not INVALID; the most likely of all when every one is."""
        top = self.top_architectures(1)
        if top:
            return top[0]
        assert self._trainer is not None  # with no position to choose, the one architecture is always left
        return self._knobs(self._trainer.controller.beam_search(1)[0][1])

    # -- what the controller thinks -----------------------------------------------------

    def log_probability(self, knobs: Mapping[str, Any]) -> float:
        """The natural log of the probability that the controller samples ``knobs``'s architecture."""
        return self._evaluate(knobs)[0]

    def entropy(self, knobs: Mapping[str, Any]) -> float:
        """The entropy (nats) of the controller's choices along ``knobs``'s architecture, summed over positions."""
        return self._evaluate(knobs)[1]

    def _evaluate(self, knobs: Mapping[str, Any]) -> tuple[float, float]:
        if self._trainer is None:
            return 0.0, 0.0
        self._sync()
        import torch

        with torch.no_grad():
            log_prob, entropy = self._trainer.controller.log_prob_and_entropy(
                self._actions(self.search_space.flatten(knobs))
            )
        return float(log_prob), float(entropy)

    # -- learning -----------------------------------------------------------------------

    def _updates(self) -> list[_Update]:
        """Every update the controller should have made, in trial-id order."""
        return [
            (record.trial_id, self._actions(point), float(record.score))
            for record, point in self.points()
            if record.status is TrialStatus.COMPLETED
            and record.score is not None  # always, for a completed trial; said so for the types
            and record.metadata.get("phase") in _LEARNING_PHASES
            and math.isfinite(record.score)
        ]

    def _sync(self) -> None:
        """Bring the controller to the state its updates in trial-id order lead to."""
        if self._trainer is None:
            return
        target = self._updates()
        common = 0
        for done, wanted in zip(self._applied, target, strict=False):
            if done != wanted:
                break
            common += 1
        if common < len(self._applied):
            start = max(k for k in self._snapshots if k <= common)
            self._trainer.load(self._snapshots[start])
            del self._applied[start:]
            for k in [k for k in self._snapshots if k > start]:
                del self._snapshots[k]
        for update in target[len(self._applied) :]:
            _, actions, reward = update
            self._trainer.update(actions, reward)
            self._applied.append(update)
            if len(self._applied) % _SNAPSHOT_EVERY == 0:
                self._snapshots[len(self._applied)] = self._trainer.save()
                kept = sorted(k for k in self._snapshots if k)[-_SNAPSHOTS_KEPT:]
                self._snapshots = {k: v for k, v in self._snapshots.items() if k == 0 or k in kept}

    # -- points ---------------------------------------------------------------------------

    def _invalid(self) -> set[tuple[int, ...]]:
        """The architectures of INVALID records: they cannot be built, so they are proposed no more."""
        return {self._actions(point) for record, point in self.points() if record.status is TrialStatus.INVALID}

    def _actions(self, point: FlatPoint) -> tuple[int, ...]:
        return tuple(int(point[j]) for j in self._positions)

    def _knobs(self, actions: Iterable[int]) -> Knobs:
        point = list(self._centre)
        for j, action in zip(self._positions, actions, strict=True):
            point[j] = action
        return self.search_space.unflatten(point)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check(option: str, value: object, ok: bool, rule: str) -> None:
    if not ok:
        raise StrategyError(f"enas option {option}={value!r} must be {rule}")
