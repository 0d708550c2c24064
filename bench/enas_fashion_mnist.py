"""ENAS against random architecture search, with and without ASHA, and at equal cost, on a Fashion-MNIST subset.

All methods search ENAS's macro space (six layers, each one of six operations plus skip
connections), with ``--template``: ``space``, the model space ``EnasMacro``
(``examples/spaces/enas_macro.py``: the base plus its choices; ENAS's shared weights are
the super-network a ``SpaceModel`` hands from trial to trial), or ``cnn``, the
hand-written super-network ``EnasCnn`` (``examples/models/enas_cnn.py``), on a
Fashion-MNIST subset (Debian's ``dataset-fashion-mnist``, through
``baobab.store.build_fashion_mnist``), in this process, one trial after the other, no
platform, and each ends with one full-length training of the architecture it picked
(from scratch, full width, ``--final-epochs`` epochs), scored on the test set:

- **enas**: ``EnasStrategy`` (the LSTM controller) and ``EnasPlanner`` choose each trial's
  phase and policies as the platform's driver does: ``train_shared`` (one epoch of the
  half-width super-network from the shared weights), ``evaluate`` (a sampled
  architecture scored on the shared weights, a tenth of the validation set; the
  controller learns from it), ``final_evaluate`` (the controller's most likely
  architectures on the whole validation set), then ``final_train``. ``--budget`` trials.
  The planner's options are the command line's (``--train-trials`` and so on), by
  default the planner's defaults.
- **enas-equal**: ENAS at random search's cost: the same, with no trial count and, as its
  time budget, the wall time random's search took for the same seed (run first). The
  planner's own time-budget rule (as for a job's ``TIME_HOURS``) ends the search, with
  ``final_fraction`` 0 and ``final_train_factor`` 0: the final evaluations start once the
  time left is the planner's estimate of them (``top_k`` times three median evaluations),
  so the search with its final evaluations takes about random's search time, and the
  final training comes on top of it, as random's does. More trials, so more cycles of
  ``train_shared`` and ``evaluate``. Its wall time over random's is recorded per seed.
- **random-ws**: random search with weight sharing (RS-WS of Li and Talwalkar, "Random
  Search and Reproducibility for Neural Architecture Search", UAI 2019): ENAS with the
  controller replaced by uniform sampling (``make_strategy("random")``). As many shared
  trainings as ``enas-equal`` ran for the same seed (``train_shared``'s policies: one epoch
  of a uniformly sampled architecture at half width from the shared weights), then as
  many uniformly sampled architectures as ``enas-equal`` evaluated (at least ``top_k``),
  each scored on the final shared weights with ``evaluate``'s policies (a tenth of the
  validation set), the best ``top_k`` of them on the whole validation set with
  ``final_evaluate``'s policies; the best of those is the final training's. So it does
  ``enas-equal``'s shared-training and evaluation work, less the controller.
- **random**: ``make_strategy("random")`` samples ``--budget`` − 1 architectures; each is
  trained from scratch at full width for one epoch (EARLY_STOP) and scored on the
  validation set; the best is the final training's.
- **asha**: random architectures under successive halving (ASHA run one trial at a time,
  eta 3): ``n`` trained for one epoch, the best third of them two epochs more (from
  where they were); the best of those is the final training's. ``n`` spends the same
  epochs as random's search.

``--peer-enas`` also runs ENAS on the other template, for the same seeds (method
``enas-cnn`` or ``enas-space``): the two ways of writing the space, compared in one run.

Ranking, for each weight-sharing method (enas, enas-equal, random-ws): for the first 20
architectures random trained alone (one epoch, full width), their accuracy on the whole
validation set under the method's shared weights at the end of its search (same seed),
against their accuracy trained alone (measured once per seed, the same architectures for
all three); Kendall's tau of the two.

What the equal-cost setup favours: the budget is random's measured search time, so a
machine busier during random's search than during ``enas-equal``'s gives ENAS more work
(and the other way round); compare the two within a seed, on a quiet machine. Each trial
has a fixed cost (building the network; on ``EnasMacro`` a torch.fx trace) that weighs
more on ENAS's short trials (an evaluation is mostly that cost) than on random's
one-epoch trainings. ``random-ws`` scores its samples on the final shared weights, where
ENAS's evaluations read weights still in training; it matches ``enas-equal``'s counts, not
its time, so without the controller it takes a little less wall time (recorded).

Figures per method, over ``--seeds`` seeds: test accuracy (median and spread), wall time
of the whole search with its final training (the ranking check is outside it), CPU time
of the process; a plot of best accuracy against wall time. Data is decoded once per file
for all.

    .venv/bin/python bench/enas_fashion_mnist.py                 # the report: 5 seeds, about 30 minutes on 2 idle cores
    .venv/bin/python bench/enas_fashion_mnist.py --peer-enas     # and ENAS on EnasCnn beside it
    .venv/bin/python bench/enas_fashion_mnist.py --tune          # the planner grid on held-back seeds 100-102
    .venv/bin/python bench/enas_fashion_mnist.py --quick         # a smaller run, printed, written only with --out
    .venv/bin/python bench/enas_fashion_mnist.py --quick --seeds 1 --limit 400 --budget 9 --final-epochs 1 \\
        --out /dev/shm/enas-smoke                                # a smoke run, its report in a scratch folder
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import itertools
import json
import platform
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy.stats import kendalltau
from setup_record import RunSetup, setup_markdown

from baobab.advisor import (
    EnasPhase,
    EnasPlanner,
    EnasProgress,
    EnasStrategy,
    TrialRecord,
    TrialStatus,
    make_strategy,
    phase_policies,
    trial_knobs,
)
from baobab.model import searchable_knobs, validate_knob_config
from baobab.store import build_fashion_mnist

HERE = Path(__file__).parent
#: The template each --template value searches: its file and class.
TEMPLATES = {
    "space": (HERE.parent / "examples" / "spaces" / "enas_macro.py", "EnasMacro"),
    "cnn": (HERE.parent / "examples" / "models" / "enas_cnn.py", "EnasCnn"),
}
RESULTS = HERE / "results"
METHODS = ("enas", "enas-equal", "random-ws", "random", "asha")
#: The methods that search on shared weights: each gets a Kendall tau.
WEIGHT_SHARING = ("enas", "enas-equal", "random-ws")
#: enas-equal's planner options besides the command line's: the time budget (random's search time) ends the
#: search and its final evaluations; the final training, outside it as random's is, reserves no time.
EQUAL_COST = {"final_fraction": 0.0, "final_train_factor": 0.0}
PEERS = ("enas-space", "enas-cnn")
RANKED = 20  # architectures whose shared-weight and stand-alone accuracies are compared
ETA = 3
#: The planner options --tune tries: (train_trials, evaluate_trials, top_k, warmup_fraction).
GRID = [(1, 4, 3, 0.0), (2, 4, 3, 0.0), (1, 2, 3, 0.0), (1, 4, 3, 0.25), (2, 2, 3, 0.25), (1, 3, 5, 0.25)]
TUNE_SEEDS = (100, 101, 102)


def template_class(kind: str, final_epochs: int) -> type:
    """The ``kind`` template (:data:`TEMPLATES`) with ``final_epochs`` epochs for a full training
    (``model.epochs_override`` for others), and data decoded once per file."""
    path, name = TEMPLATES[kind]
    spec = importlib.util.spec_from_file_location(f"bench_enas_{kind}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    class BenchTemplate(getattr(module, name)):  # type: ignore[misc]
        epochs_override: int | None = None

        def epochs(self) -> int:
            return self.epochs_override or final_epochs

        def load_data(self, dataset_path: str) -> tuple[np.ndarray, np.ndarray]:
            if dataset_path not in cache:
                cache[dataset_path] = super().load_data(dataset_path)
            return cache[dataset_path]

    return BenchTemplate


def architecture(config: dict, knobs: dict[str, Any]) -> dict[str, Any]:
    """The searched knobs of ``knobs``: EnasCnn's ``arch``, or the space's decisions."""
    return {name: knobs[name] for name in searchable_knobs(config)}


class _Timer:
    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def read(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def _final(template: type, config: dict, arch: dict[str, Any], data: dict[str, str], seed: int) -> dict[str, float]:
    model = template(**trial_knobs(config, arch, {}))
    model.train(data["train"], seed=seed)
    return {"test_accuracy": model.evaluate(data["test"]), "final_val_accuracy": model.evaluate(data["val"])}


def _shared_trial(
    template: type,
    config: dict,
    proposal: dict[str, Any],
    phase: EnasPhase,
    data: dict[str, str],
    shared: Any,
    seed: int,
) -> tuple[Any, float]:
    """One trial of ``phase`` as the platform runs it: the phase's policies, from the shared weights under
    SHARE_PARAMS (none before the first shared training), scored on the validation set. The model and its score."""
    policies = phase_policies(phase)
    model = template(**trial_knobs(config, proposal, policies))
    model.train(data["train"], shared_params=shared if policies["SHARE_PARAMS"] else None, seed=seed)
    return model, model.evaluate(data["val"])


def run_enas(
    template: type,
    data: dict[str, str],
    budget: int | None,
    seed: int,
    options: dict[str, Any],
    *,
    time_budget_s: float | None = None,
) -> tuple[dict[str, Any], Any]:
    """The run's figures, and the shared weights at the end of its search. ``budget``: the trials (None: no
    count); ``time_budget_s``: the planner's time budget, against the run's own wall time."""
    config = validate_knob_config(template.get_knob_config())
    strategy = EnasStrategy(config, seed=seed)
    planner = EnasPlanner(config, trial_budget=budget, time_budget_s=time_budget_s, **options)
    started: Counter = Counter()
    durations: dict[Any, list[float]] = defaultdict(list)
    shared = None
    timer = _Timer()
    result: dict[str, Any] = {"curve": []}
    best = 0.0
    for number in itertools.count():
        progress = EnasProgress(started=started, finished=started, durations=durations, elapsed_s=timer.read()[0])
        step = planner.next(progress)
        if step.phase is None:
            break
        trial_started = time.perf_counter()
        proposal = strategy.propose_for(step.phase, number)
        if step.phase == "final_train":
            result["search_seconds"] = timer.read()[0]
            arch = architecture(config, proposal)
            final = _final(template, config, arch, data, seed * 1000 + number)
            result.update(arch=arch, **final)
            durations[step.phase].append(time.perf_counter() - trial_started)
            started[step.phase] += 1
            result["curve"].append((timer.read()[0], result["final_val_accuracy"]))
            break
        model, score = _shared_trial(template, config, proposal, step.phase, data, shared, seed * 1000 + number)
        if step.phase == "train_shared":
            shared = model.dump_parameters()
        if step.phase == "final_evaluate":
            best = max(best, score)
            result["curve"].append((timer.read()[0], best))
        durations[step.phase].append(time.perf_counter() - trial_started)
        started[step.phase] += 1
        strategy.observe(TrialRecord(number, proposal, TrialStatus.COMPLETED, score, {"phase": step.phase.value}))
    wall, cpu = timer.read()
    phases = {phase.value: {"trials": started[phase], "seconds": sum(durations[phase])} for phase in started}
    return {"wall_seconds": wall, "cpu_seconds": cpu, "phases": phases, **result}, shared


def run_random_ws(
    template: type, data: dict[str, str], seed: int, *, trainings: int, evaluations: int, top_k: int
) -> tuple[dict[str, Any], Any]:
    """Random search with weight sharing (Li and Talwalkar's RS-WS): ``trainings`` shared trainings of uniformly
    sampled architectures, then ``evaluations`` (at least ``top_k``) uniform samples scored on the final shared
    weights as ENAS's evaluations are, the best ``top_k`` of them as its final evaluations are, and the best
    of those trained in full. The run's figures, and the shared weights."""
    config = validate_knob_config(template.get_knob_config())
    strategy = make_strategy("random", config, seed=seed + 20_000)
    numbers = itertools.count()
    shared, curve, sampled, finalists = None, [], [], []
    timer = _Timer()
    for number in itertools.islice(numbers, trainings):
        model, _ = _shared_trial(
            template, config, strategy.propose(number), EnasPhase.TRAIN_SHARED, data, shared, seed * 1000 + number
        )
        shared = model.dump_parameters()
    trained = timer.read()[0]
    for number in itertools.islice(numbers, max(evaluations, top_k)):
        proposal = strategy.propose(number)
        _, score = _shared_trial(template, config, proposal, EnasPhase.EVALUATE, data, shared, seed * 1000 + number)
        sampled.append((score, -number, proposal))
    evaluated = timer.read()[0]
    for _, neg, proposal in sorted(sampled, key=lambda item: item[:2], reverse=True)[:top_k]:
        number = next(numbers)
        _, score = _shared_trial(
            template, config, proposal, EnasPhase.FINAL_EVALUATE, data, shared, seed * 1000 + number
        )
        finalists.append((score, neg, proposal))
        curve.append((timer.read()[0], max(f[0] for f in finalists)))
    search_wall = timer.read()[0]
    best_score, _, best = max(finalists, key=lambda item: item[:2])
    arch = architecture(config, best)
    final = _final(template, config, arch, data, seed * 1000 + next(numbers))
    wall, cpu = timer.read()
    curve.append((wall, final["final_val_accuracy"]))
    figures = {
        "wall_seconds": wall,
        "cpu_seconds": cpu,
        "search_seconds": search_wall,
        "phases": {
            "train_shared": {"trials": trainings, "seconds": trained},
            "evaluate": {"trials": len(sampled), "seconds": evaluated - trained},
            "final_evaluate": {"trials": len(finalists), "seconds": search_wall - evaluated},
            "final_train": {"trials": 1, "seconds": wall - search_wall},
        },
        "arch": arch,
        "best_search_val_accuracy": best_score,
        "curve": curve,
        **final,
    }
    return figures, shared


def run_random(template: type, data: dict[str, str], budget: int, seed: int) -> dict[str, Any]:
    config = validate_knob_config(template.get_knob_config())
    strategy = make_strategy("random", config, seed=seed)
    timer = _Timer()
    scored, curve = [], []
    for number in range(budget - 1):
        proposal = strategy.propose(number)
        model = template(**trial_knobs(config, proposal, {"EARLY_STOP": True}))
        model.train(data["train"], seed=seed * 1000 + number)
        score = model.evaluate(data["val"])
        strategy.observe(TrialRecord(number, proposal, TrialStatus.COMPLETED, score))
        scored.append((score, -number, proposal))
        curve.append((timer.read()[0], max(s for s, _, _ in scored)))
    search_wall = timer.read()[0]
    best_score, _, best = max(scored, key=lambda item: item[:2])
    arch = architecture(config, best)
    final = _final(template, config, arch, data, seed * 1000 + budget - 1)
    wall, cpu = timer.read()
    curve.append((wall, final["final_val_accuracy"]))
    return {
        "wall_seconds": wall,
        "cpu_seconds": cpu,
        "search_seconds": search_wall,
        "phases": {
            "search": {"trials": budget - 1, "seconds": search_wall},
            "final_train": {"trials": 1, "seconds": wall - search_wall},
        },
        "arch": arch,
        "best_search_val_accuracy": best_score,
        "curve": curve,
        "alone": [(architecture(config, p), s) for s, _, p in scored[:RANKED]],
        **final,
    }


def run_asha(template: type, data: dict[str, str], budget: int, seed: int) -> dict[str, Any]:
    """Successive halving, one trial at a time: ``n`` one-epoch trainings, then the best ``n // ETA`` two epochs
    more; ``n + 2 * (n // ETA)`` is about the ``budget - 1`` epochs of random's search."""
    config = validate_knob_config(template.get_knob_config())
    strategy = make_strategy("random", config, seed=seed + 10_000)
    n = max(ETA, round((budget - 1) / (1 + 2 / ETA)))
    timer = _Timer()
    rung0, curve, number = [], [], 0
    for number in range(n):
        proposal = strategy.propose(number)
        model = template(**trial_knobs(config, proposal, {"EARLY_STOP": True}))
        model.train(data["train"], seed=seed * 1000 + number)
        rung0.append((model.evaluate(data["val"]), -number, proposal, model.dump_parameters()))
        curve.append((timer.read()[0], max(r[0] for r in rung0)))
    rung1 = []
    for _, neg, proposal, params in sorted(rung0, key=lambda r: r[:2], reverse=True)[: n // ETA]:
        number += 1
        model = template(**trial_knobs(config, proposal, {}))
        model.epochs_override = 2
        model.train(data["train"], shared_params=params, seed=seed * 1000 + number)
        rung1.append((model.evaluate(data["val"]), neg, proposal))
        curve.append((timer.read()[0], max(curve[-1][1], max(r[0] for r in rung1))))
    search_wall = timer.read()[0]
    best_score, _, best = max(rung1, key=lambda item: item[:2])
    arch = architecture(config, best)
    final = _final(template, config, arch, data, seed * 1000 + number + 1)
    wall, cpu = timer.read()
    curve.append((wall, final["final_val_accuracy"]))
    return {
        "wall_seconds": wall,
        "cpu_seconds": cpu,
        "search_seconds": search_wall,
        "phases": {
            "rung 1 epoch": {"trials": n, "seconds": None},
            "rung 3 epochs": {"trials": n // ETA, "seconds": None},
            "final_train": {"trials": 1, "seconds": wall - search_wall},
        },
        "arch": arch,
        "best_search_val_accuracy": best_score,
        "curve": curve,
        **final,
    }


def shared_scores(template: type, data: dict[str, str], shared: Any, archs: list[dict[str, Any]]) -> list[float]:
    """Each architecture's accuracy on the whole validation set under the shared weights (as final_evaluate)."""
    config = validate_knob_config(template.get_knob_config())
    return [
        _shared_trial(template, config, arch, EnasPhase.FINAL_EVALUATE, data, shared, i)[1]
        for i, arch in enumerate(archs)
    ]


def _spread(values: list[float]) -> dict[str, float]:
    q = np.quantile(values, [0.25, 0.5, 0.75])
    return {"median": float(q[1]), "q25": float(q[0]), "q75": float(q[2]), "min": min(values), "max": max(values)}


def _methods(runs: list[dict[str, Any]]) -> list[str]:
    """The methods the runs hold: the three, and the peer ENAS when it ran."""
    return [m for m in (*METHODS, *PEERS) if any(r["method"] == m for r in runs)]


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    by = {m: [r for r in runs if r["method"] == m] for m in _methods(runs)}
    random_test = {r["seed"]: r["test_accuracy"] for r in by["random"]}
    summary: dict[str, Any] = {}
    for m, group in by.items():
        summary[m] = {
            "test_accuracy": _spread([r["test_accuracy"] for r in group]),
            "wall_seconds": _spread([r["wall_seconds"] for r in group]),
            "cpu_seconds": _spread([r["cpu_seconds"] for r in group]),
            # Per seed, the run's wall time over random's of the same seed: equal cost reads near 1.
            "wall_ratio_to_random": _spread([r["wall_ratio_to_random"] for r in group]),
            "seeds_above_random": sum(r["test_accuracy"] > random_test[r["seed"]] for r in group),
        }
        if m in WEIGHT_SHARING:
            summary[m]["kendall_tau"] = _spread([r["kendall_tau"] for r in group])
    for m in by:
        summary[m]["accuracy_gap_to_random"] = (
            summary[m]["test_accuracy"]["median"] - summary["random"]["test_accuracy"]["median"]
        )
    summary["kendall_tau"] = summary["enas"]["kendall_tau"]
    enas, rand = summary["enas"], summary["random"]
    summary["accuracy_gap"] = enas["accuracy_gap_to_random"]
    summary["time_ratio"] = enas["wall_seconds"]["median"] / rand["wall_seconds"]["median"]
    summary["cpu_ratio"] = enas["cpu_seconds"]["median"] / rand["cpu_seconds"]["median"]
    close, fast = summary["accuracy_gap"] >= -0.005, summary["time_ratio"] <= 1 / 3
    summary["aim_met"] = close and fast
    for peer in set(by) & set(PEERS):
        summary[f"{peer}_accuracy_gap"] = summary[peer]["test_accuracy"]["median"] - enas["test_accuracy"]["median"]
        summary[f"{peer}_time_ratio"] = summary[peer]["wall_seconds"]["median"] / enas["wall_seconds"]["median"]
    summary["verdict"] = (
        "yes" if close and fast
        else f"no ({'within' if close else 'more than'} 0.5 points of random's median accuracy, "
        f"{'at most' if fast else 'more than'} a third of its wall time)"
    )  # fmt: skip
    summary["equal_cost"] = _equal_cost_sentence(summary, len(by["random"]))
    return summary


def _equal_cost_sentence(summary: dict[str, Any], seeds: int) -> str:
    """Whether ENAS and RS-WS beat random search at its wall time, and by how much, from the figures; a method
    whose median wall time is more than 10% off random's is said to be so."""
    parts = []
    for m, name in (("enas-equal", "ENAS"), ("random-ws", "random search with weight sharing")):
        s = summary[m]
        gap, ratio = s["accuracy_gap_to_random"], s["wall_ratio_to_random"]["median"]
        verdict = "beats" if gap > 0 else "ties with" if gap == 0 else "does not beat"
        off = "" if abs(ratio - 1) <= 0.1 else ": not equal cost in this run, more than 10% off"
        parts.append(
            f"{name} (`{m}`, {ratio:.2f}× random's wall time, median over seeds{off}) {verdict} random search: its "
            f"median test accuracy is {gap * 100:+.2f} points from random's, and above random's in "
            f"{s['seeds_above_random']} of {seeds} seeds"
        )
    return "At random search's wall time, " + "; ".join(parts) + "."


def plot(runs: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"enas": "tab:green", "enas-equal": "tab:red", "random-ws": "tab:purple", "random": "tab:blue",
               "asha": "tab:orange", "enas-space": "tab:olive", "enas-cnn": "tab:olive"}  # fmt: skip
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for method in _methods(runs):
        group = [r for r in runs if r["method"] == method]
        for run in group:
            t, acc = zip(*run["curve"], strict=True)
            ax.step(t, acc, where="post", color=colours[method], alpha=0.35, label=None)
            ax.plot([run["wall_seconds"]], [run["test_accuracy"]], "x", color=colours[method], alpha=0.6)
        walls, tests = [r["wall_seconds"] for r in group], [r["test_accuracy"] for r in group]
        ax.plot(
            [statistics.median(walls)], [statistics.median(tests)], "o", ms=10, color=colours[method],
            label=method,
        )  # fmt: skip
    ax.set_xlabel("wall time (s), one trial at a time, 2 torch threads")
    ax.set_ylabel("accuracy")
    ax.set_title("Best validation accuracy so far (lines; weight sharing: on shared weights\nuntil the final "
                 "training), final test accuracy (x per seed)", fontsize=9)  # fmt: skip
    ax.legend(
        fontsize=8,
        loc="upper left",
        bbox_to_anchor=(1.01, 1),
        title="dot: median test\naccuracy at median\nwall time",
        title_fontsize=8,
    )
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_report(result: dict[str, Any], out: Path = RESULTS) -> None:
    """The JSON, the plot and the Markdown report, into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "enas_fashion_mnist.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result["runs"], out / "enas_fashion_mnist.png")
    setup, s = result["run"], result["summary"]
    opts = setup["enas_options"]  # "planner defaults" or the options given
    # RANKED, or fewer where random's search trained fewer architectures.
    ranked = len(next(r for r in result["runs"] if "ranking" in r)["ranking"]["alone"])
    lines = [
        "# ENAS against random architecture search (with and without ASHA, and at equal cost) on Fashion-MNIST",
        "",
        f"`bench/enas_fashion_mnist.py`, {result['date']}, {result['machine']}, {setup['seeds']} seeds "
        f"({', '.join(map(str, setup['seed_list']))}). Fashion-MNIST: {setup['limit']} images "
        f"({1 - setup['val_fraction']:.0%} train, {setup['val_fraction']:.0%} validation) and {setup['test_images']} "
        f"test images. `{TEMPLATES[setup['template']][1]}` (examples, `--template {setup['template']}`): 6 layers, "
        "16 channels (8 under DOWNSCALE), Adam 3e-3, batch 64. "
        f"Every method ends with one full-length training ({setup['final_epochs']} epochs, full width, from "
        f"scratch) of the architecture it picked, scored on the test set. ENAS: {setup['budget']} trials, "
        f"{'the planner defaults' if isinstance(opts, str) else f'planner options {opts}'} (cycles of "
        "`train_trials` one-epoch shared trainings at half width and `evaluate_trials` evaluations on a "
        "tenth of the validation set; `top_k` final evaluations on all of it). Random: "
        f"{setup['budget'] - 1} architectures trained alone for one epoch at full width. ASHA: random "
        f"architectures under successive halving (eta {ETA}): {setup['asha_n']} for one epoch, the best "
        f"{setup['asha_n'] // ETA} two epochs more, about random's search epochs. One trial at a time in this "
        "process; wall time of the whole search with its final training, CPU time of the process beside it.",
        "",
        "At equal cost: `enas-equal` is ENAS with no trial count and, as the planner's time budget, the wall time "
        "random's search took for the same seed (final_fraction 0, final_train_factor 0: the final evaluations "
        "start once the time left is the planner's estimate of them), so its search with its final evaluations "
        "takes about random's search time and its final training comes on top, as random's does. `random-ws` is "
        "random search with weight sharing (Li and Talwalkar's RS-WS): as many shared trainings of uniformly "
        "sampled architectures as `enas-equal` ran for the seed, then as many uniform samples as it evaluated "
        "scored on the final shared weights (a tenth of the validation set), its top_k on all of it, the best "
        "trained in full: `enas-equal`'s work less the controller. Kendall τ for each weight-sharing method: "
        f"the first {ranked} architectures random trained alone, under the method's shared weights at the end "
        "of its search against trained alone (the same stand-alone accuracies for all three).",
        "",
        *(
            [
                f"`--peer-enas`: `{peer}` is ENAS on `{TEMPLATES[peer.removeprefix('enas-')][1]}` for the same seeds "
                "and options: the same architectures written the other way.",
                "",
            ]
            if (peer := _peer(result["runs"]))
            else []
        ),  # fmt: skip
        "| seed | method | test acc. | wall s | ÷ random's | CPU s | final training s | Kendall τ | trials per phase |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for run in result["runs"]:
        phases = ", ".join(f"{name} {p['trials']}" for name, p in run["phases"].items())
        tau = f"{run['kendall_tau']:.2f}" if "kendall_tau" in run else ""
        lines.append(
            f"| {run['seed']} | {run['method']} | {run['test_accuracy']:.4f} | {run['wall_seconds']:.1f} "
            f"| {run['wall_ratio_to_random']:.2f} | {run['cpu_seconds']:.1f} "
            f"| {run['phases']['final_train']['seconds']:.1f} | {tau} | {phases} |"
        )
    lines += [
        "",
        "| method | test acc. median | IQR | min–max | wall s median | wall ÷ random's, median | CPU s median "
        "| Kendall τ median (min–max) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for m in _methods(result["runs"]):
        a, tau = s[m]["test_accuracy"], s[m].get("kendall_tau")
        tau_text = f"{tau['median']:.2f} ({tau['min']:.2f}–{tau['max']:.2f})" if tau else ""
        lines.append(
            f"| {m} | {a['median']:.4f} | {a['q25']:.4f}–{a['q75']:.4f} | {a['min']:.4f}–{a['max']:.4f} "
            f"| {s[m]['wall_seconds']['median']:.1f} | {s[m]['wall_ratio_to_random']['median']:.2f} "
            f"| {s[m]['cpu_seconds']['median']:.1f} "
            f"| {tau_text} |"
        )
    tau = s["kendall_tau"]
    lines += [
        "",
        f"Ranking: Kendall's τ between {ranked} architectures' validation accuracy under ENAS's shared weights "
        f"(end of its search) and trained alone for one epoch: median **{tau['median']:.2f}** (from "
        f"{tau['min']:.2f} to {tau['max']:.2f} over seeds); under `enas-equal`'s "
        f"{s['enas-equal']['kendall_tau']['median']:.2f}, under `random-ws`'s "
        f"{s['random-ws']['kendall_tau']['median']:.2f} (medians).",
        "",
        f"**Equal cost.** {s['equal_cost']}",
        "",
        f"ENAS's median test accuracy is **{s['accuracy_gap'] * 100:+.2f} points** from random's, in "
        f"**{s['time_ratio']:.2f}×** its median wall time ({s['cpu_ratio']:.2f}× its CPU time). The aim, within "
        f"0.5 points of random's median in at most a third of its wall time: **{s['verdict']}**.",
        "",
        "![best accuracy against wall time](enas_fashion_mnist.png)",
        "",
    ]
    if peer := _peer(result["runs"]):
        lines += [
            f"ENAS on the other template (`{peer}`): median test accuracy **{s[f'{peer}_accuracy_gap'] * 100:+.2f} "
            f"points** from `enas`'s, in **{s[f'{peer}_time_ratio']:.2f}×** its median wall time.",
            "",
        ]
    if not s["aim_met"]:
        lines += [
            "What was tried: shared trainings that add up when they run at once (on the platform; "
            "`bench/results/enas_shared_updates.md`), a first shared training alone, final evaluations that wait "
            "for every shared training, a warm-up of the shared weights before the controller learns, and the "
            "planner's options on held-back seeds (below: the defaults stayed best)."
            + (
                " With a Kendall τ near 0 the shared weights rank architectures about as well as chance at this "
                "budget, so the final evaluations pick among the controller's favourites nearly blindly; random "
                "search's pick has trained alone."
                if abs(tau["median"]) < 0.2
                else ""
            ),
            "",
        ]
    if result.get("tuning"):
        lines += ["## Tuning (held-back seeds)", "", *result["tuning"], ""]
    lines += [setup_markdown(result["setup"]), ""]
    (out / "enas_fashion_mnist.md").write_text("\n".join(lines))


def _peer(runs: list[dict[str, Any]]) -> str | None:
    return next((m for m in PEERS if any(r["method"] == m for r in runs)), None)


def tune(template: type, data: dict[str, str], budget: int) -> tuple[list[str], list[dict[str, Any]]]:
    """The planner grid on the held-back seeds: median final validation accuracy and wall time per option
    set, as the report's lines and as rows."""
    rows = ["| train_trials | evaluate_trials | top_k | warmup_fraction | final val. acc. median | wall s median |",
            "|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    scored, table = [], []
    for t, e, k, w in GRID:
        options = {"train_trials": t, "evaluate_trials": e, "top_k": k, "warmup_fraction": w}
        runs = [run_enas(template, data, budget, seed, options)[0] for seed in TUNE_SEEDS]
        val = statistics.median(r["final_val_accuracy"] for r in runs)
        wall = statistics.median(r["wall_seconds"] for r in runs)
        scored.append((val, options))
        table.append({**options, "final_val_accuracy_median": val, "wall_seconds_median": wall})
        rows.append(f"| {t} | {e} | {k} | {w} | {val:.4f} | {wall:.1f} |")
        print(rows[-1], flush=True)
    best = max(scored, key=lambda item: item[0])
    lines = [
        f"`--tune`: ENAS alone on seeds {', '.join(map(str, TUNE_SEEDS))} (not among the reported ones), "
        f"{budget} trials, each option set scored by the median validation accuracy of its final model.",
        "",
        *rows,
        "",
        f"Best: {best[1]}.",
    ]
    return lines, table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="fewer images, trials and epochs; nothing written unless --out"
    )
    parser.add_argument("--tune", action="store_true", help="the planner grid on held-back seeds, written to --out")
    parser.add_argument(
        "--out",
        type=Path,
        help=f"the folder the report, its JSON and plot go to (default {RESULTS.relative_to(HERE.parent)})",
    )
    parser.add_argument("--limit", type=int, help="Fashion-MNIST images for training and validation")
    parser.add_argument("--budget", type=int, help="trials per search, final training included")
    parser.add_argument("--final-epochs", type=int, help="epochs of the final training")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument(
        "--template", choices=sorted(TEMPLATES), default="space", help="the template all methods search"
    )
    parser.add_argument("--peer-enas", action="store_true", help="ENAS on the other template too, for comparison")
    parser.add_argument("--train-trials", type=int, help="ENAS: shared trainings per cycle")
    parser.add_argument("--evaluate-trials", type=int, help="ENAS: evaluations per cycle")
    parser.add_argument("--top-k", type=int, help="ENAS: final evaluations")
    parser.add_argument("--warmup-fraction", type=float, help="ENAS: share of the budget warming the shared weights")
    args = parser.parse_args()
    limit = args.limit or (1500 if args.quick else 5000)
    budget = args.budget or (14 if args.quick else 25)
    final_epochs = args.final_epochs or (3 if args.quick else 5)
    val_fraction = 0.2
    out = args.out or (None if args.quick else RESULTS)
    names = ("train_trials", "evaluate_trials", "top_k", "warmup_fraction")
    options = {name: getattr(args, name) for name in names if getattr(args, name) is not None}
    torch.set_num_threads(2)
    template = template_class(args.template, final_epochs)
    other = next(kind for kind in TEMPLATES if kind != args.template)
    peer = template_class(other, final_epochs) if args.peer_enas else None
    seeds = list(range(args.seeds))
    runs = []
    started = time.perf_counter()
    setup = RunSetup(
        "architectures that learn fast (a small subset, one-epoch search trainings); everything runs one trial "
        "at a time, so ENAS's concurrent shared trainings (which add up on the platform) are not exercised, and "
        "the final training, the same for every method, is a large share of ENAS's time. At equal cost "
        "(enas-equal, random-ws) the budget is random's measured search time, so load during random's search "
        "gives ENAS more work, and each trial's fixed cost weighs more on ENAS's short trials than on random's",
        placement="not applicable (no job driver: one trial at a time in this process)",
        fusion="not applicable (no platform)",
        warm_start="off (stand-alone trainings start from scratch; ENAS's shared weights are its method)",
    )
    with tempfile.TemporaryDirectory(prefix="baobab-bench-") as tmp:
        built = build_fashion_mnist(Path(tmp), limit=limit, val_fraction=val_fraction, seed=0)
        data = {split.name: str(split.path) for split in built.splits}
        test_images = next(split.rows for split in built.splits if split.name == "test")
        if args.tune:
            tuning, table = tune(template, data, budget)
            record = setup.finish()
            tuned = {"seeds": list(TUNE_SEEDS), "budget": budget, "options": table, "setup": record}
            tuned_to = out or RESULTS
            tuned_to.mkdir(parents=True, exist_ok=True)
            (tuned_to / "enas_fashion_mnist_tuning.json").write_text(json.dumps(tuned, indent=2) + "\n")
            text = "# ENAS planner tuning\n\n" + "\n".join(tuning) + "\n\n" + setup_markdown(record) + "\n"
            (tuned_to / "enas_fashion_mnist_tuning.md").write_text(text)
            print("\n".join(tuning))
            return
        for seed in seeds:
            rand = {"method": "random", "seed": seed, **run_random(template, data, budget, seed)}
            enas, shared = run_enas(template, data, budget, seed, options)
            target = rand["search_seconds"]
            equal, equal_shared = run_enas(template, data, None, seed, {**options, **EQUAL_COST}, time_budget_s=target)
            counts = {phase: p["trials"] for phase, p in equal["phases"].items()}
            rsws, rsws_shared = run_random_ws(
                template,
                data,
                seed,
                trainings=counts.get("train_shared", 0),
                evaluations=counts.get("evaluate", 0),
                top_k=counts.get("final_evaluate", 0),
            )
            enas = {"method": "enas", "seed": seed, **enas}
            equal = {"method": "enas-equal", "seed": seed, "time_budget_s": target, **equal}
            rsws = {"method": "random-ws", "seed": seed, **rsws}
            # The stand-alone accuracies of the same architectures serve every weight-sharing method.
            archs, alone = zip(*rand.pop("alone"), strict=True)
            for run, weights in ((enas, shared), (equal, equal_shared), (rsws, rsws_shared)):
                on_shared = shared_scores(template, data, weights, list(archs))
                run["kendall_tau"] = float(kendalltau(on_shared, alone).statistic)
                run["ranking"] = {"shared": on_shared, "alone": list(alone)}
            asha = {"method": "asha", "seed": seed, **run_asha(template, data, budget, seed)}
            outcomes = [enas, equal, rsws, rand, asha]
            if peer is not None:
                outcomes.append(
                    {"method": f"enas-{other}", "seed": seed, **run_enas(peer, data, budget, seed, options)[0]}
                )
            for outcome in outcomes:
                outcome["wall_ratio_to_random"] = outcome["wall_seconds"] / rand["wall_seconds"]
                runs.append(outcome)
                print(
                    f"seed {seed} {outcome['method']}: test {outcome['test_accuracy']:.4f}, "
                    f"{outcome['wall_seconds']:.1f} s wall ({outcome['wall_ratio_to_random']:.2f}x random's), "
                    f"{outcome['cpu_seconds']:.1f} s CPU"
                    + (f", tau {outcome['kendall_tau']:.2f}" if "kendall_tau" in outcome else "")
                    + ", trials: "
                    + ", ".join(f"{name} {p['trials']}" for name, p in outcome["phases"].items()),
                    flush=True,
                )
    result = {
        "date": datetime.date.today().isoformat(),
        "machine": f"{torch.get_num_threads()} torch threads, Python {platform.python_version()}, "
        f"torch {torch.__version__}",
        # The run's own parameters; "setup" is the record every result carries (bench/setup_record.py).
        "run": {
            "quick": args.quick,
            "template": args.template,
            "limit": limit,
            "val_fraction": val_fraction,
            "test_images": test_images,
            "budget": budget,
            "final_epochs": final_epochs,
            "seeds": args.seeds,
            "seed_list": seeds,
            "enas_options": options or "planner defaults",
            "asha_n": max(ETA, round((budget - 1) / (1 + 2 / ETA))),
            "total_seconds": time.perf_counter() - started,
        },
        "summary": summarise(runs),
        "setup": setup.finish(),
        "runs": runs,
    }
    tuning_file = next(
        (folder / "enas_fashion_mnist_tuning.md" for folder in (out, RESULTS)
         if folder and (folder / "enas_fashion_mnist_tuning.md").exists()),
        None,
    )  # fmt: skip
    if tuning_file:
        result["tuning"] = tuning_file.read_text().splitlines()[2:]
    if out is None:
        print(json.dumps(result["summary"], indent=2))
        return
    write_report(result, out)
    print((out / "enas_fashion_mnist.md").read_text())


if __name__ == "__main__":
    main()
