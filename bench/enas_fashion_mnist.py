"""ENAS against random architecture search, same trial budget, on a Fashion-MNIST subset.

Both search ENAS's macro space with the example template ``EnasCnn``
(``examples/models/enas_cnn.py``: six layers, each one of six operations plus skip
connections) on a Fashion-MNIST subset (Debian's ``dataset-fashion-mnist``, through
``baobab.store.build_fashion_mnist``), in this process, one trial after the other, no
platform:

- **ENAS**: ``EnasStrategy`` (the LSTM controller) and ``EnasPlanner`` choose each trial's
  phase and policies as the platform's driver does: ``train_shared`` (SHARE_PARAMS,
  DOWNSCALE, EARLY_STOP: one epoch of the half-width super-network from the last shared
  weights), ``evaluate`` (SHARE_PARAMS, DOWNSCALE, SKIP_TRAIN, QUICK_EVAL: a sampled
  architecture scored on the shared weights, a tenth of the validation set; the
  controller learns from it), ``final_evaluate`` (the controller's 3 most likely
  architectures on the whole validation set), then ``final_train``: the best of those
  trained from scratch at full width for all epochs.
- **random**: ``make_strategy("random")`` samples architectures; each is trained from
  scratch at full width under EARLY_STOP (one epoch) and scored on the validation set;
  the best is retrained from scratch for all epochs. Same number of trials in all
  (the budget minus one searches, plus the final training).

The figures: the final model's test accuracy and the wall time of the whole search
(and the CPU time of the process), per seed, and the ratio. Data is decoded once per
file for both.

    .venv/bin/python bench/enas_fashion_mnist.py            # the full run: about 2 minutes on 2 cores
    .venv/bin/python bench/enas_fashion_mnist.py --quick    # a smaller one, under 1.5 minutes
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
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

from baobab.advisor import (
    EnasPlanner,
    EnasProgress,
    EnasStrategy,
    TrialRecord,
    TrialStatus,
    make_strategy,
    trial_knobs,
)
from baobab.model import validate_knob_config
from baobab.store import build_fashion_mnist

HERE = Path(__file__).parent
EXAMPLE = HERE.parent / "examples" / "models" / "enas_cnn.py"
RESULTS = HERE / "results"


def template_class(final_epochs: int) -> type:
    """EnasCnn with ``final_epochs`` epochs for a full training, and data decoded once per file."""
    spec = importlib.util.spec_from_file_location("bench_enas_cnn", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    class BenchEnasCnn(module.EnasCnn):  # type: ignore[misc, name-defined]
        def epochs(self) -> int:
            return final_epochs

        def load_data(self, dataset_path: str) -> tuple[np.ndarray, np.ndarray]:
            if dataset_path not in cache:
                cache[dataset_path] = super().load_data(dataset_path)
            return cache[dataset_path]

    return BenchEnasCnn


class _Timer:
    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def read(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def run_enas(template: type, data: dict[str, str], budget: int, seed: int) -> dict[str, Any]:
    config = validate_knob_config(template.get_knob_config())
    strategy = EnasStrategy(config, seed=seed)
    planner = EnasPlanner(config, trial_budget=budget, train_trials=1, evaluate_trials=4, top_k=3)
    started: Counter = Counter()
    durations: dict[Any, list[float]] = defaultdict(list)
    shared = None
    timer = _Timer()
    final: dict[str, Any] = {}
    for number in range(budget):
        step = planner.next(EnasProgress(started=started, finished=started, durations=durations))
        if step.phase is None:
            break
        trial_started = time.perf_counter()
        proposal = strategy.propose_for(step.phase, number)
        model = template(**trial_knobs(config, proposal, step.policies))
        model.train(
            data["train"], shared_params=shared if step.policies["SHARE_PARAMS"] else None, seed=seed * 1000 + number
        )
        if step.phase == "final_train":
            final = {"arch": proposal["arch"], "test_accuracy": model.evaluate(data["test"])}
            durations[step.phase].append(time.perf_counter() - trial_started)
            started[step.phase] += 1
            break
        score = model.evaluate(data["val"])
        if step.phase == "train_shared":
            shared = model.dump_parameters()
        durations[step.phase].append(time.perf_counter() - trial_started)
        started[step.phase] += 1
        strategy.observe(TrialRecord(number, proposal, TrialStatus.COMPLETED, score, {"phase": step.phase.value}))
    wall, cpu = timer.read()
    return {
        "wall_seconds": wall,
        "cpu_seconds": cpu,
        "trials": sum(started.values()),
        "phases": {phase.value: {"trials": started[phase], "seconds": sum(durations[phase])} for phase in started},
        **final,
    }


def run_random(template: type, data: dict[str, str], budget: int, seed: int) -> dict[str, Any]:
    config = validate_knob_config(template.get_knob_config())
    strategy = make_strategy("random", config, seed=seed)
    timer = _Timer()
    scored = []
    for number in range(budget - 1):
        proposal = strategy.propose(number)
        model = template(**trial_knobs(config, proposal, {"EARLY_STOP": True}))
        model.train(data["train"], seed=seed * 1000 + number)
        score = model.evaluate(data["val"])
        strategy.observe(TrialRecord(number, proposal, TrialStatus.COMPLETED, score))
        scored.append((score, -number, proposal))
    search_wall = timer.read()[0]
    best_score, _, best = max(scored, key=lambda item: item[:2])
    model = template(**trial_knobs(config, best, {}))
    model.train(data["train"], seed=seed * 1000 + budget - 1)
    test_accuracy = model.evaluate(data["test"])
    wall, cpu = timer.read()
    return {
        "wall_seconds": wall,
        "cpu_seconds": cpu,
        "trials": budget,
        "phases": {
            "search": {"trials": budget - 1, "seconds": search_wall},
            "final_train": {"trials": 1, "seconds": wall - search_wall},
        },
        "arch": best["arch"],
        "best_search_val_accuracy": best_score,
        "test_accuracy": test_accuracy,
    }


def write_report(result: dict[str, Any]) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "enas_fashion_mnist.json").write_text(json.dumps(result, indent=2) + "\n")
    setup, summary = result["setup"], result["summary"]
    lines = [
        "# ENAS against random architecture search on Fashion-MNIST",
        "",
        f"`bench/enas_fashion_mnist.py{' --quick' if setup['quick'] else ''}`, {result['date']}, "
        f"{result['machine']}. Fashion-MNIST: {setup['limit']} images ({1 - setup['val_fraction']:.0%} train, "
        f"{setup['val_fraction']:.0%} validation) and {setup['test_images']} test images. `EnasCnn` (examples): "
        f"6 layers, 16 channels (8 under DOWNSCALE), Adam 3e-3, batch 64; a full training is "
        f"{setup['final_epochs']} epochs, an EARLY_STOP one 1 epoch. {setup['budget']} trials per search, "
        "one at a time in this process. ENAS: planner defaults (cycles of 1 shared training + 4 evaluations, "
        "3 final evaluations, 1 final training). Random: budget − 1 architectures trained from scratch for one "
        "epoch at full width, the best retrained for all epochs. Wall time of the whole search, final training "
        "included; CPU time of the process beside it (the machine is shared).",
        "",
        "| seed | method | test acc. | wall s | CPU s | final training s | trials per phase |",
        "|---:|---|---:|---:|---:|---:|---|",
    ]
    for run in result["runs"]:
        phases = ", ".join(f"{name} {p['trials']}" for name, p in run["phases"].items())
        lines.append(
            f"| {run['seed']} | {run['method']} | {run['test_accuracy']:.4f} | {run['wall_seconds']:.1f} "
            f"| {run['cpu_seconds']:.1f} | {run['phases']['final_train']['seconds']:.1f} | {phases} |"
        )
    lines += [
        "",
        f"Means: ENAS test accuracy **{summary['enas_test_accuracy']:.4f}** in "
        f"**{summary['enas_wall_seconds']:.1f} s**; "
        f"random **{summary['random_test_accuracy']:.4f}** in **{summary['random_wall_seconds']:.1f} s**. "
        f"ENAS took **{summary['time_ratio']:.2f}×** random's wall time ({summary['cpu_ratio']:.2f}× its CPU "
        f"time) for {summary['accuracy_delta']:+.4f} test accuracy; the search alone (without the final "
        f"training, the same cost for both) took {summary['search_time_ratio']:.2f}×. "
        f"The issue's aim, the same accuracy in a third of the time or less: **{summary['verdict']}**.",
        "",
    ]
    (RESULTS / "enas_fashion_mnist.md").write_text("\n".join(lines))


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    enas = [r for r in runs if r["method"] == "enas"]
    rand = [r for r in runs if r["method"] == "random"]

    def mean(group: list[dict[str, Any]], key: str) -> float:
        return statistics.fmean(r[key] for r in group)

    def search(group: list[dict[str, Any]]) -> float:
        return statistics.fmean(r["wall_seconds"] - r["phases"]["final_train"]["seconds"] for r in group)

    summary = {
        "enas_test_accuracy": mean(enas, "test_accuracy"),
        "random_test_accuracy": mean(rand, "test_accuracy"),
        "enas_wall_seconds": mean(enas, "wall_seconds"),
        "random_wall_seconds": mean(rand, "wall_seconds"),
        "time_ratio": mean(enas, "wall_seconds") / mean(rand, "wall_seconds"),
        "cpu_ratio": mean(enas, "cpu_seconds") / mean(rand, "cpu_seconds"),
        "search_time_ratio": search(enas) / search(rand),
        "accuracy_delta": mean(enas, "test_accuracy") - mean(rand, "test_accuracy"),
    }
    # "The same accuracy": within one point of test accuracy (a single trial moves by about that much).
    same = summary["accuracy_delta"] >= -0.01
    fast = summary["time_ratio"] <= 1 / 3
    summary["verdict"] = (
        "yes" if same and fast
        else f"no ({'accuracy within a point' if same else 'accuracy more than a point lower'}, "
        f"{'a third of the time or less' if fast else 'more than a third of the time'})"
    )  # fmt: skip
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer images, trials and epochs (about 1.5 minutes)")
    parser.add_argument("--limit", type=int, help="Fashion-MNIST images for training and validation")
    parser.add_argument("--budget", type=int, help="trials per search, final training included")
    parser.add_argument("--final-epochs", type=int, help="epochs of the final training")
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()
    limit = args.limit or (1500 if args.quick else 5000)
    budget = args.budget or (14 if args.quick else 25)
    final_epochs = args.final_epochs or (3 if args.quick else 5)
    val_fraction = 0.2
    torch.set_num_threads(2)
    template = template_class(final_epochs)
    runs = []
    with tempfile.TemporaryDirectory(prefix="baobab-bench-") as tmp:
        built = build_fashion_mnist(Path(tmp), limit=limit, val_fraction=val_fraction, seed=0)
        data = {split.name: str(split.path) for split in built.splits}
        test_images = next(split.rows for split in built.splits if split.name == "test")
        for seed in range(args.seeds):
            for method, run in (("enas", run_enas), ("random", run_random)):
                outcome = {"method": method, "seed": seed, **run(template, data, budget, seed)}
                runs.append(outcome)
                print(
                    f"seed {seed} {method}: test {outcome['test_accuracy']:.4f}, {outcome['wall_seconds']:.1f} s "
                    f"wall, {outcome['cpu_seconds']:.1f} s CPU, {outcome['phases']}",
                    flush=True,
                )
    result = {
        "date": datetime.date.today().isoformat(),
        "machine": f"{torch.get_num_threads()} torch threads, Python {platform.python_version()}, "
        f"torch {torch.__version__}",
        "setup": {
            "quick": args.quick,
            "limit": limit,
            "val_fraction": val_fraction,
            "test_images": test_images,
            "budget": budget,
            "final_epochs": final_epochs,
            "seeds": args.seeds,
        },  # fmt: skip
        "summary": summarise(runs),
        "runs": runs,
    }
    write_report(result)
    print((RESULTS / "enas_fashion_mnist.md").read_text())


if __name__ == "__main__":
    main()
