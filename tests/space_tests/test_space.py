"""Model spaces: mutators, inline choices, dependent decisions, records, inheritance, errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from torch import nn

from baobab.exceptions import InvalidArchitectureError
from baobab.model import CategoricalKnob
from baobab.space import (
    InputChoice,
    InputMutator,
    InsertMutator,
    LayerChoice,
    ModelSpace,
    OperatorMutator,
    SpaceError,
    inherit,
    keep,
    value_choice,
)

X = torch.randn(2, 3, 8, 8)


def conv5(m: nn.Module | None) -> nn.Module:
    assert isinstance(m, nn.Conv2d)
    return nn.Conv2d(m.in_channels, m.out_channels, 5, padding=2)


class Chain(nn.Module):
    """Three convolutions and a head; the plain base of most tests."""

    def __init__(self, classes: int = 4) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.conv3 = nn.Conv2d(8, 8, 3, padding=1)
        self.head = nn.Linear(8, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.relu(self.conv1(x))
        b = torch.relu(self.conv2(a))
        c = self.conv3(b)
        return self.head(c.mean((2, 3)))


class Inline(nn.Module):
    """The same kinds of choices written inside the base."""

    def __init__(self) -> None:
        super().__init__()
        width = value_choice("width", [8, 16])
        self.stem = nn.Conv2d(3, width, 3, padding=1)
        self.op = LayerChoice(
            {"conv": nn.Conv2d(width, width, 3, padding=1), "pool": nn.MaxPool2d(3, 1, 1)}, label="op"
        )
        self.skip = InputChoice(2, n_chosen=1, label="skip")
        self.head = nn.Linear(width, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.stem(x)
        b = self.op(a)
        return self.head(self.skip([b, a]).mean((2, 3)))


def chain_space(*extra: object) -> ModelSpace:
    return ModelSpace(Chain, [OperatorMutator("k", nn.Conv2d, {"k3": keep, "k5": conv5}), *extra])  # type: ignore[list-item]


def test_decisions_are_knobs_named_after_mutator_and_node() -> None:
    space = chain_space()
    assert space.decisions() == {f"k_conv{i}": CategoricalKnob(["k3", "k5"]) for i in (1, 2, 3)}
    assert space.defaults() == {f"k_conv{i}": "k3" for i in (1, 2, 3)}


def test_operator_mutator_replaces_only_the_chosen_nodes() -> None:
    space = chain_space()
    instance = space.instantiate({"k_conv2": "k5"})
    assert instance.module.conv2.kernel_size == (5, 5)
    assert instance.module.conv1.kernel_size == (3, 3)
    assert instance.record.changed == {"conv2"}
    assert instance.module(X).shape == (2, 4)


def test_one_decision_for_every_node_when_not_per_node() -> None:
    space = ModelSpace(Chain, [OperatorMutator("k", nn.Conv2d, {"k3": keep, "k5": conv5}, per_node=False)])
    assert list(space.decisions()) == ["k"]
    assert space.instantiate({"k": "k5"}).record.changed == {"conv1", "conv2", "conv3"}


def test_match_by_name_pattern_and_predicate() -> None:
    by_name = ModelSpace(Chain, [OperatorMutator("k", "conv[23]", {"k3": keep, "k5": conv5})])
    assert set(by_name.decisions()) == {"k_conv2", "k_conv3"}
    by_predicate = ModelSpace(
        Chain, [OperatorMutator("k", lambda node, m: isinstance(m, nn.Conv2d) and m.in_channels == 3, {"k3": keep})]
    )
    assert set(by_predicate.decisions()) == {"k_conv1"}


def test_function_nodes_are_replaced_by_modules() -> None:
    space = ModelSpace(Chain, [OperatorMutator("act", "relu*", {"relu": None, "tanh": lambda _: nn.Tanh()})])
    instance = space.instantiate({"act_relu": "tanh"})
    assert any(isinstance(m, nn.Tanh) for m in instance.module.modules())
    assert torch.isfinite(instance.module(X)).all()


def test_insert_mutator_adds_after_the_node_and_none_inserts_nothing() -> None:
    space = chain_space(InsertMutator("norm", "conv3", {"none": None, "bn": lambda m: nn.BatchNorm2d(8)}))
    assert not any(isinstance(m, nn.BatchNorm2d) for m in space.instantiate({}).module.modules())
    instance = space.instantiate({"norm_conv3": "bn"})
    inserted = [n for n in instance.module.graph.nodes if n.op == "call_module" and n.target == "conv3_norm"]
    assert len(inserted) == 1 and inserted[0].args[0].name == "conv3"
    assert instance.record.changed >= {"conv3_norm"}
    assert instance.module(X).shape == (2, 4)


def test_an_input_mutator_at_its_default_changes_nothing() -> None:
    space = ModelSpace(Chain, [InputMutator("src", "conv3", ["relu_1", "relu"])])
    assert space.instantiate({}).record.changed == frozenset()
    assert space.instantiate({"src_conv3": "relu"}).record.changed == {"conv3"}


def test_input_mutator_rewires_and_merges() -> None:
    space = ModelSpace(Chain, [InputMutator("src", "conv3", ["relu", "relu_1"], n_chosen=2, merge=["sum", "cat"])])
    assert space.decisions()["src_conv3_merge"] == CategoricalKnob(["sum", "cat"])
    summed = space.instantiate({"src_conv3_0": "relu", "src_conv3_1": "relu_1"})
    code = summed.module.code
    assert "merge_tensors" in code and summed.module(X).shape == (2, 4)
    single = space.instantiate({"src_conv3_0": "relu", "src_conv3_1": "relu"})  # the same source twice counts once
    assert "merge_tensors" not in single.module.code
    assert [n.name for n in single.module.graph.nodes if n.op == "call_module"][:2] == ["conv1", "conv3"]  # conv2 dead


def test_inline_choices_compile_to_mutators_and_mix_with_explicit_ones() -> None:
    space = ModelSpace(Inline, [InsertMutator("act", "stem", {"none": None, "relu": lambda _: nn.ReLU()})])
    assert set(space.decisions()) == {"width", "op", "skip", "act_stem"}
    instance = space.instantiate({"width": 16, "op": "pool", "act_stem": "relu"})
    assert isinstance(instance.module.op, nn.MaxPool2d)
    assert not any(isinstance(m, (LayerChoice, InputChoice)) for m in instance.module.modules())
    assert instance.module.stem.out_channels == 16
    assert instance.module(X).shape == (2, 4)
    # The inline LayerChoice's node became the chosen candidate, the same as an OperatorMutator would do.
    assert instance.record.choices == {"width": 16, "op": "pool", "skip": "op", "act_stem": "relu"}


def test_the_base_alone_runs_with_its_first_candidates() -> None:
    module = Inline()
    assert module.stem.out_channels == 8 and module(X).shape == (2, 4)


class Stages(nn.Module):
    """A depth decision; each block's kernel exists only when the depth reaches the block."""

    def __init__(self) -> None:
        super().__init__()
        depth = value_choice("depth", [1, 2, 3])
        blocks = []
        for i in range(depth):
            k = value_choice(f"kernel_{i}", [3, 5])
            blocks.append(nn.Conv2d(3, 3, k, padding=k // 2))
        self.blocks = nn.Sequential(*blocks)
        width = value_choice("width", [4, 8])
        self.expand = nn.Conv2d(3, width, 1)
        self.head = nn.Linear(2 * width, 2)  # a width that follows an earlier one

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.expand(self.blocks(x))
        return self.head(torch.cat([y, y], dim=1).mean((2, 3)))


def test_dependent_decisions_exist_only_when_their_branch_runs() -> None:
    space = ModelSpace(Stages)
    assert set(space.decisions()) == {"depth", "kernel_0", "kernel_1", "kernel_2", "width"}
    shallow = space.instantiate({"depth": 1, "kernel_1": 5, "kernel_2": 5})
    assert set(shallow.record.choices) == {"depth", "kernel_0", "width"}
    assert shallow.record.same_graph(space.instantiate({"depth": 1}).record)
    deep = space.instantiate({"depth": 3, "kernel_2": 5, "width": 8})
    assert deep.module(X).shape == (2, 2) and deep.module.head.in_features == 16
    assert not deep.record.same_graph(shallow.record)


def test_a_decision_met_only_after_an_earlier_candidate_is_found() -> None:
    """The tanh exists only when the first mutator picks it; the second mutator's decision for it is found anyway."""
    space = ModelSpace(
        Chain,
        [
            OperatorMutator("act", "relu", {"relu": None, "tanh": lambda _: nn.Tanh()}),
            InsertMutator("scale", nn.Tanh, {"none": None, "half": lambda _: nn.Dropout(0.5)}),
        ],
    )
    assert "scale_relu" in space.decisions()
    assert "scale_relu" not in space.instantiate({}).record.choices
    assert space.instantiate({"act_relu": "tanh", "scale_relu": "half"}).record.choices["scale_relu"] == "half"


def test_a_mutator_applies_only_when_its_condition_holds() -> None:
    space = chain_space(
        InsertMutator("bn", "conv1", {"none": None, "bn": lambda _: nn.BatchNorm2d(8)}, when={"k_conv1": ["k5"]})
    )
    assert "bn_conv1" not in space.instantiate({"bn_conv1": "bn"}).record.choices
    assert space.instantiate({"k_conv1": "k5", "bn_conv1": "bn"}).record.choices["bn_conv1"] == "bn"


def test_records_tell_identical_graphs_and_shared_modules() -> None:
    space = chain_space()
    a = space.instantiate({"k_conv2": "k5"})
    b = space.instantiate({"k_conv2": "k5"})
    c = space.instantiate({"k_conv3": "k5"})
    assert a.record.same_graph(b.record) and not a.record.same_graph(c.record)
    assert a.record.shared_modules(c.record) == {"conv1", "head"}
    assert a.record.to_json()["nodes"][1]["name"] == "conv1"


def test_inheritance_copies_exactly_the_unchanged_modules() -> None:
    space = chain_space()
    torch.manual_seed(0)
    parent = space.instantiate({"k_conv2": "k5"})
    torch.manual_seed(1)
    child = space.instantiate({"k_conv3": "k5"})
    before = {k: v.clone() for k, v in child.module.state_dict().items()}
    copied = inherit(child.module, child.record, parent.module.state_dict(), parent.record)
    assert copied == ["conv1.bias", "conv1.weight", "head.bias", "head.weight"]
    after, source = child.module.state_dict(), parent.module.state_dict()
    for key in after:
        # conv2 (3x3 here, 5x5 in the parent) and conv3 (5x5 here, 3x3 there) keep their own weights.
        assert torch.equal(after[key], source[key] if key in copied else before[key]), key
    assert not torch.equal(after["conv2.bias"], source["conv2.bias"])  # same shape, different operator: not copied


def test_meta_instances_cost_no_memory_and_give_the_same_record() -> None:
    space = chain_space()
    meta = space.instantiate({"k_conv1": "k5"}, device="meta")
    assert all(p.is_meta for p in meta.module.parameters())
    assert meta.record.graph_key == space.instantiate({"k_conv1": "k5"}).record.graph_key


def test_base_arguments_may_change_per_instance() -> None:
    space = ModelSpace(Chain, [OperatorMutator("k", nn.Conv2d, {"k3": keep, "k5": conv5})], args={"classes": 4})
    assert space.instantiate({}, args={"classes": 7}).module(X).shape == (2, 7)


# -- errors at definition: they name the mutator and the node ---------------------------------


def test_a_mutator_that_matches_nothing_is_named() -> None:
    with pytest.raises(
        SpaceError, match=r"OperatorMutator 'lstm' matches no node of the base; its nodes: conv1, relu, "
    ):
        ModelSpace(Chain, [OperatorMutator("lstm", nn.LSTM, {"a": keep})])


def test_a_candidate_that_cannot_replace_its_node_is_named() -> None:
    with pytest.raises(
        SpaceError, match=r"OperatorMutator 'k': candidate 'bi' \(Bilinear\) cannot replace node 'conv1'.*input2"
    ):
        ModelSpace(Chain, [OperatorMutator("k", nn.Conv2d, {"k3": keep, "bi": lambda _: nn.Bilinear(2, 2, 2)})])
    with pytest.raises(
        SpaceError, match=r"InsertMutator 'bi': candidate 'b' \(Bilinear\) cannot take the output of node 'conv3'"
    ):
        chain_space(InsertMutator("bi", "conv3", {"b": lambda _: nn.Bilinear(2, 2, 2)}))
    with pytest.raises(SpaceError, match=r"candidate 'bad' failed to build for node 'conv1': ZeroDivisionError"):
        ModelSpace(Chain, [OperatorMutator("k", nn.Conv2d, {"bad": lambda _: 1 // 0})])  # type: ignore[dict-item]


class Branchy(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:  # data-dependent control flow: torch.fx cannot trace it
            return x
        return -x


def test_an_untraceable_base_gets_fx_message_and_its_own_source_line() -> None:
    with pytest.raises(
        SpaceError,
        match=r"cannot trace the base Branchy: TraceError: .*control flow \(at \S*test_space.py:\d+: if x.sum\(\) > 0:",
    ):
        ModelSpace(Branchy)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: ModelSpace(Chain(), []),
            r"the base must be a factory of torch.nn.Module",
        ),  # an instance, not a factory
        (lambda: ModelSpace(lambda: 3), r"the base factory must return a torch.nn.Module, got int"),
        (lambda: ModelSpace(Chain, ["conv"]), r"mutators must be OperatorMutator, InputMutator or InsertMutator"),  # type: ignore[list-item]
        (
            lambda: OperatorMutator("bad label", nn.Conv2d, {"a": keep}),
            r"label 'bad label' must be a Python identifier",
        ),
        (lambda: OperatorMutator("k", 3, {"a": keep}), r"match must be a module type, a name pattern or a predicate"),  # type: ignore[arg-type]
        (lambda: OperatorMutator("k", nn.Conv2d, {}), r"candidates must be a non-empty dict"),
        (
            lambda: (
                InputMutator("s", "conv3", ["nowhere"]).label
                and ModelSpace(Chain, [InputMutator("s", "conv3", ["nowhere"])])
            ),
            r"source 'nowhere' is not a node before 'conv3'",
        ),
        (
            lambda: ModelSpace(Chain, [InputMutator("s", "conv1", ["conv3"])]),
            r"source 'conv3' is not a node before 'conv1'",
        ),
        (lambda: InputChoice(2, n_chosen=3, label="s"), r"need 1 <= n_chosen <= n_candidates"),
        (lambda: LayerChoice({}, label="op"), r"LayerChoice 'op': candidates must be a non-empty dict"),
        (
            lambda: ModelSpace(Chain, [InputMutator("s", "conv3", ["relu"], merge="max")]),
            r"merge must be one or more of \['sum', 'cat'\]",
        ),
        (lambda: chain_space(OperatorMutator("k", "head", {"a": keep})), r"two mutators are labelled 'k'"),
        (
            lambda: chain_space(InsertMutator("x", "conv1", {"a": None}, when={"nope": [1]})),
            r"its condition names 'nope'",
        ),
        (
            lambda: ModelSpace(Inline, [InsertMutator("op", "stem", {"a": None}, per_node=False)]),
            r"decision 'op' is declared twice: by LayerChoice 'op'",
        ),
    ],
)
def test_definition_errors_say_what_is_wrong(make: object, message: str) -> None:
    with pytest.raises(SpaceError, match=message):
        make()  # type: ignore[operator]


def test_choices_outside_the_space_are_refused_with_the_decision_named() -> None:
    space = chain_space()
    with pytest.raises(
        SpaceError, match=r"'k_conv9' is not a decision of this space; decisions: k_conv1, k_conv2, k_conv3"
    ):
        space.instantiate({"k_conv9": "k5"})
    with pytest.raises(
        SpaceError, match=r"decision 'k_conv1' \(OperatorMutator 'k'\): 'k7' is not one of \['k3', 'k5'\]"
    ):
        space.instantiate({"k_conv1": "k7"})


# -- errors at sampling: an instance that does not fit is invalid, not a crash ------------------


def test_a_shape_mismatch_is_an_invalid_architecture_naming_node_and_mutator() -> None:
    space = ModelSpace(Chain, [InputMutator("src", "conv3", ["relu", "relu_1"], n_chosen=2, merge=["sum", "cat"])])
    concatenated = space.instantiate({"src_conv3_0": "relu", "src_conv3_1": "relu_1", "src_conv3_merge": "cat"})
    with pytest.raises(
        InvalidArchitectureError,
        match=r"node 'conv3' does not fit its inputs \(after 'src' changed node 'conv3'\): RuntimeError: .*channels",
    ):
        space.check(concatenated, X)
    space.check(space.instantiate({"src_conv3_merge": "sum"}), X)  # the sum fits


def test_the_guide_space_example_runs_as_written() -> None:
    """The model-space guide's snippet (docs/model-spaces.md) asserts what it shows; run it."""
    guide = (Path(__file__).parents[2] / "docs" / "model-spaces.md").read_text()
    [snippet] = [s for s in re.findall(r"^```python\n(.*?)^```", guide, flags=re.M | re.S) if "ModelSpace(Net" in s]
    exec(compile(snippet, "docs/model-spaces.md", "exec"), {})
