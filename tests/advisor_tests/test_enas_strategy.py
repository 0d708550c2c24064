"""The ENAS strategy: the controller learns, rebuilds to the bit, and proposes for each phase."""

from __future__ import annotations

import math
import random
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from baobab.advisor import EnasPhase, EnasStrategy, Strategy, TrialRecord, TrialStatus, make_strategy
from baobab.exceptions import StrategyError
from baobab.model import ArchKnob, CategoricalKnob, FixedKnob, FloatKnob, IntegerKnob, PolicyKnob
from baobab.testing import StrategyContract, run_search, typed

torch = pytest.importorskip("torch")

ARCH = {"arch": ArchKnob([["a", "b", "c", "d"]] * 4)}
BEST = {"arch": ["c"] * 4}


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread() -> Iterator[None]:
    """The controller is tiny: one thread is faster, and the machine is shared."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def matches(knobs: Mapping[str, Any]) -> float:
    """The share of positions holding the best choice."""
    return sum(v == "c" for v in knobs["arch"]) / len(knobs["arch"])


def train(strategy: EnasStrategy, n: int) -> None:
    """``n`` evaluations scored by :func:`matches`, one at a time."""
    for trial_id in range(n):
        knobs = strategy.propose(trial_id)
        strategy.observe(TrialRecord(trial_id, knobs, TrialStatus.COMPLETED, matches(knobs), {"phase": "evaluate"}))


class TestEnasContract(StrategyContract):
    @pytest.fixture
    def strategy_class(self) -> type[Strategy]:
        return EnasStrategy

    def test_parallel_proposals_are_distinct_in_a_discrete_space(self, make: Callable[..., Strategy]) -> None:
        """Replaces the contract's test on purpose: ENAS proposals are samples of its policy.

        REINFORCE needs unbiased samples, and a policy that has converged should propose
        its best architecture again and again; so ``pending`` is ignored and repeats come.
        """
        strategy = make({"arch": ArchKnob([["x", "y"]])}, seed=1)
        proposals = [typed(strategy.propose(i, pending=[{"arch": ["x"]}])) for i in range(12)]
        assert len(set(proposals)) == 2 and len(proposals) == 12


def test_the_controller_learns_the_best_architecture() -> None:
    strategy = EnasStrategy(ARCH, seed=0)
    before = math.exp(strategy.log_probability(BEST))
    assert before < 0.01  # near uniform at first: 1 / 256
    train(strategy, 150)
    after = math.exp(strategy.log_probability(BEST))
    # Measured: 0.90 to 0.91 over seeds 0-3 after 150 updates.
    assert after > 0.6, after
    assert strategy.top_architectures(1) == [BEST]


def test_the_entropy_bonus_keeps_the_policy_exploring() -> None:
    entropies = {}
    for weight in (0.0, 0.3):
        strategy = EnasStrategy(ARCH, seed=0, entropy_weight=weight)
        train(strategy, 100)
        entropies[weight] = strategy.entropy(BEST)
    # At most 4 ln 4 = 5.5 nats; measured over seeds 0-2: 0.64 to 0.70 without the bonus, 4.8 to 5.4 with it.
    assert entropies[0.0] < 1.5 and entropies[0.3] > 4.0, entropies


def test_only_evaluations_and_plain_trials_teach_the_controller() -> None:
    taught = EnasStrategy(ARCH, seed=0)
    untaught = EnasStrategy(ARCH, seed=0)
    for trial_id, phase in enumerate(["train_shared", "final_evaluate", "final_train", "evaluate", None]):
        metadata = {} if phase is None else {"phase": phase}
        record = TrialRecord(trial_id, BEST, TrialStatus.COMPLETED, 1.0, metadata)
        taught.observe(record)
        if phase not in ("evaluate", None):
            untaught.observe(record)
            assert untaught.log_probability(BEST) == EnasStrategy(ARCH, seed=0).log_probability(BEST)
    untaught.observe(TrialRecord(9, BEST, TrialStatus.FAILED, metadata={"phase": "evaluate"}))
    assert untaught.log_probability(BEST) == EnasStrategy(ARCH, seed=0).log_probability(BEST)
    # The first reward only starts the baseline; the second moves the policy.
    assert taught.log_probability(BEST) != untaught.log_probability(BEST)


def test_same_seed_same_controller_and_samples() -> None:
    first, second, other = EnasStrategy(ARCH, seed=5), EnasStrategy(ARCH, seed=5), EnasStrategy(ARCH, seed=6)
    state = torch.random.get_rng_state()
    train(first, 20)
    train(second, 20)
    train(other, 20)
    assert torch.equal(torch.random.get_rng_state(), state), "the controller must not touch torch's global generator"
    assert [first.propose(i) for i in range(20, 30)] == [second.propose(i) for i in range(20, 30)]
    assert first.log_probability(BEST) == second.log_probability(BEST)
    assert other.log_probability(BEST) != first.log_probability(BEST)


def test_out_of_order_records_and_rebuild_give_the_same_controller() -> None:
    # 40 parallel trials finishing in a shuffled order: late records roll the controller
    # back to a snapshot (one every 16 updates) and replay; a rebuild replays in id order.
    config = {"arch": ArchKnob([["a", "b", "c"]] * 3), "act": CategoricalKnob(["relu", "tanh"])}
    original = EnasStrategy(config, seed=2)
    proposals = {i: original.propose(i) for i in range(40)}
    order = list(proposals)
    random.Random(0).shuffle(order)
    for count, trial_id in enumerate(order):
        phase = ["evaluate", "train_shared", "evaluate", None][trial_id % 4]
        knobs = proposals[trial_id]
        score = sum(v == "b" for v in knobs["arch"]) + (knobs["act"] == "tanh")
        original.observe(TrialRecord(trial_id, knobs, TrialStatus.COMPLETED, score / 4, {"phase": phase}))
        if count % 7 == 0:
            original.propose(100 + count)  # syncs the controller in between
    history = original.history
    random.Random(1).shuffle(history)
    rebuilt = EnasStrategy.rebuild(config, history, seed=2)
    in_order = EnasStrategy(config, seed=2)
    for record in sorted(history, key=lambda r: r.trial_id):
        in_order.observe(record)
    for strategy in (rebuilt, in_order):
        assert typed(strategy.propose(41)) == typed(original.propose(41))
        assert strategy.top_architectures(5) == original.top_architectures(5)
        for knobs in proposals.values():
            assert strategy.log_probability(knobs) == original.log_probability(knobs)
    # A record replaced by a new observation of its trial id is replayed with its new score.
    replaced = history[0]
    for strategy in (original, rebuilt):
        strategy.observe(TrialRecord(replaced.trial_id, replaced.knobs, TrialStatus.COMPLETED, 5.0, {}))
    probe = {"arch": ["b"] * 3, "act": "tanh"}
    assert rebuilt.log_probability(probe) == original.log_probability(probe)
    assert rebuilt.log_probability(probe) != in_order.log_probability(probe)


def test_a_snapshot_survives_several_roll_backs() -> None:
    strategy = EnasStrategy(ARCH, seed=3)
    proposals = {i: strategy.propose(i) for i in range(40)}

    def record(trial_id: int, bonus: float = 0.0) -> TrialRecord:
        return TrialRecord(trial_id, proposals[trial_id], TrialStatus.COMPLETED, matches(proposals[trial_id]) + bonus)

    for trial_id in [i for i in range(40) if i != 30]:
        strategy.observe(record(trial_id))
        strategy.propose(100)  # one update at a time, snapshots after 16 and 32
    strategy.observe(record(30))  # rolls back to the snapshot after 16 updates
    strategy.propose(100)
    strategy.observe(record(20, bonus=1.0))  # and again, after replaying from it
    expected = EnasStrategy.rebuild(ARCH, [*(record(i) for i in range(40) if i != 20), record(20, 1.0)], seed=3)
    for knobs in proposals.values():
        assert strategy.log_probability(knobs) == expected.log_probability(knobs)


def test_numeric_knobs_are_proposed_at_their_centre() -> None:
    config = {
        "arch": ArchKnob([[1, 2], [True, False]]),
        "lr": FloatKnob(1e-4, 1e-2, is_exp=True),
        "width": IntegerKnob(2, 10),
        "epochs": FixedKnob(3),
        "share": PolicyKnob("SHARE_PARAMS"),
    }
    for knobs in run_search(EnasStrategy(config, seed=0), 6):
        assert set(knobs) == {"arch", "lr", "width"}
        assert knobs["lr"] == pytest.approx(1e-3) and type(knobs["lr"]) is float
        assert knobs["width"] == 6 and type(knobs["width"]) is int


def test_top_architectures_are_distinct_most_likely_first_and_can_exclude() -> None:
    strategy = EnasStrategy(ARCH, seed=0)
    train(strategy, 150)
    top = strategy.top_architectures(4)
    assert len({typed(k) for k in top}) == 4 and top[0] == BEST
    probabilities = [strategy.log_probability(k) for k in top]
    assert probabilities == sorted(probabilities, reverse=True)
    assert strategy.top_architectures(2, exclude=[BEST]) == top[1:3]
    tiny = EnasStrategy({"arch": ArchKnob([["x", "y"]])}, seed=0)
    assert len(tiny.top_architectures(5)) == 2


def test_proposals_for_each_phase() -> None:
    strategy = EnasStrategy(ARCH, seed=0)
    train(strategy, 150)
    top = strategy.top_architectures(3)
    assert strategy.propose_for("train_shared", 200) == strategy.propose(200)
    assert strategy.propose_for(EnasPhase.EVALUATE, 201) == strategy.propose(201)
    # Final evaluations: the most likely architectures not yet scored in that phase nor pending.
    assert strategy.propose_for("final_evaluate", 202) == top[0]
    assert strategy.propose_for("final_evaluate", 203, pending=[top[0]]) == top[1]
    final = {"phase": "final_evaluate"}
    strategy.observe(TrialRecord(202, top[0], TrialStatus.COMPLETED, 0.80, final))
    strategy.observe(TrialRecord(203, top[1], TrialStatus.COMPLETED, 0.85, final))
    assert strategy.propose_for("final_evaluate", 204) == top[2]
    strategy.observe(TrialRecord(204, top[2], TrialStatus.FAILED, metadata=final))
    # The final training: the best final evaluation, whatever the controller prefers.
    assert strategy.propose_for("final_train", 205) == top[1] == strategy.best_architecture()
    fresh = EnasStrategy(ARCH, seed=0)
    assert fresh.best_architecture() == fresh.top_architectures(1)[0]  # no final evaluation yet


def test_an_invalid_architecture_is_left_out_of_every_proposal() -> None:
    strategy = EnasStrategy(ARCH, seed=0)
    train(strategy, 150)
    top = strategy.top_architectures(3)
    strategy.observe(TrialRecord(150, BEST, TrialStatus.INVALID, metadata={"phase": "evaluate"}))
    # The controller prefers BEST by far (its probability is above 0.6): samples would hit it often.
    assert all(strategy.propose(n) != BEST for n in range(151, 191))
    assert strategy.top_architectures(2) == top[1:3]
    assert strategy.propose_for("final_evaluate", 191) == top[1] == strategy.best_architecture()
    # Where every architecture is invalid, the most likely one is still proposed (nothing else is left).
    tiny = EnasStrategy({"arch": ArchKnob([["x", "y"]])}, seed=0)
    for n, arch in enumerate((["x"], ["y"])):
        tiny.observe(TrialRecord(n, {"arch": arch}, TrialStatus.INVALID))
    assert tiny.top_architectures(1) == [] and tiny.best_architecture()["arch"] in (["x"], ["y"])
    assert tiny.propose(2)["arch"] in (["x"], ["y"])


def test_an_empty_space_needs_no_controller() -> None:
    strategy = EnasStrategy({"epochs": FixedKnob(3)}, seed=0)
    assert strategy.propose(0) == {} and strategy.top_architectures(2) == [{}]
    assert strategy.log_probability({}) == 0.0


def test_options_are_checked_and_reach_the_strategy() -> None:
    strategy = make_strategy("enas", ARCH, seed=1, lstm_size=16, entropy_weight=0.0, baseline_decay=0.5)
    assert isinstance(strategy, EnasStrategy) and strategy.lstm_size == 16 and strategy.baseline_decay == 0.5
    for options, message in [
        ({"lstm_size": 0}, "enas option lstm_size=0 must be a whole number >= 1"),
        ({"learning_rate": -1.0}, "enas option learning_rate=-1.0 must be a number > 0"),
        ({"baseline_decay": 1.0}, r"enas option baseline_decay=1.0 must be in \[0, 1\)"),
        ({"entropy_weight": math.nan}, "enas option entropy_weight=nan must be a number >= 0"),
        ({"tanh_constant": 0}, "enas option tanh_constant=0 must be a number > 0"),
    ]:
        with pytest.raises(StrategyError, match=message):
            EnasStrategy(ARCH, **options)
    with pytest.raises(StrategyError, match=r"strategy 'enas' does not take option\(s\) temperature"):
        make_strategy("enas", ARCH, temperature=5.0)


def test_the_advisor_package_does_not_need_torch() -> None:
    """The API image has no torch: the names import, and only building an ENAS strategy asks for it."""
    code = """
import sys
from baobab.advisor import make_strategy
from baobab.exceptions import StrategyError
from baobab.model import ArchKnob
assert "torch" not in sys.modules, "importing baobab.advisor imported torch"
sys.modules["torch"] = None  # what a machine without torch does on "import torch"
try:
    make_strategy("enas", {"arch": ArchKnob([["a", "b"]])})
except StrategyError as e:
    assert "the enas strategy needs PyTorch" in str(e) and "install baobab[torch]" in str(e), e
else:
    raise AssertionError("no StrategyError without torch")
"""
    subprocess.run([sys.executable, "-c", code], check=True)
