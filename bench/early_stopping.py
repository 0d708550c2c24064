"""Early stopping: ASHA and median stopping against no stopping and Optuna's SuccessiveHalvingPruner.

A random search over a small torch MLP (learning rate, width, dropout, weight decay,
batch size) on a Fashion-MNIST subset (Debian's ``dataset-fashion-mnist``, through
``baobab.store.build_fashion_mnist``), in this process, no platform. For every seed the
same trials (the same configurations, each trained from its own fixed seed) run four
times, once per method:

- ``none``: every trial trains all its epochs;
- ``asha`` and ``median``: ``baobab.advisor.make_stopping_rule`` (``eta=3``, ``min_resource=1``;
  ``grace_steps=1``, ``min_trials=3``), told the validation accuracy after every epoch, and
  the trial stops when the rule says STOP;
- ``optuna-sha``: Optuna's ``SuccessiveHalvingPruner(min_resource=1, reduction_factor=3)``
  through ``trial.report`` and ``trial.should_prune`` (ask and tell; the configurations are
  the same, Optuna samples nothing).

Step = epochs trained so far (1, 2, ...), for both libraries. Each method gets the same
fixed number of trials. The figures: the best validation accuracy of the search (the
last accuracy of its best trial) and that trial's test accuracy; the epochs trained and
the CPU seconds of this process spent training and validating (one torch thread; the
machine is shared, so CPU time, not wall time). Epochs are the exact measure of the
work; the seconds follow them up to the per-epoch cost of the configurations.
Training is deterministic, so a stopped trial's curve must be the start of the same
trial's curve without stopping: the script checks it.

    .venv/bin/python bench/early_stopping.py            # the full run: about 7 minutes on 2 cores (estimated)
    .venv/bin/python bench/early_stopping.py --quick    # a smaller one, 2.5 minutes
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import torch
from setup_record import RunSetup, setup_markdown
from torch import nn

from baobab.advisor import make_stopping_rule
from baobab.store import build_fashion_mnist, read_image_files

HERE = Path(__file__).parent
RESULTS = HERE / "results"
METHODS = ("none", "asha", "median", "optuna-sha")
ETA = 3
VAL_FRACTION = 0.2


@dataclass(frozen=True)
class Config:
    learning_rate: float
    hidden: int
    dropout: float
    weight_decay: float
    batch_size: int


@dataclass
class TrialRun:
    config: Config
    curve: list[float] = field(default_factory=list)  # validation accuracy after each epoch
    seconds: float = 0.0
    stopped: bool = False
    test_accuracy: float = 0.0


@dataclass
class SearchRun:
    method: str
    seed: int
    trials: list[TrialRun]

    @property
    def epochs(self) -> int:
        return sum(len(t.curve) for t in self.trials)

    @property
    def seconds(self) -> float:
        return sum(t.seconds for t in self.trials)

    @property
    def best(self) -> TrialRun:
        return max(self.trials, key=lambda t: t.curve[-1])

    def best_after(self, epochs: int) -> float:
        """The best finished-trial accuracy once ``epochs`` epochs had been trained (0 before any)."""
        best, spent = 0.0, 0
        for trial in self.trials:
            spent += len(trial.curve)
            if spent > epochs:
                break
            best = max(best, trial.curve[-1])
        return best


Data = dict[str, tuple[torch.Tensor, torch.Tensor]]


def load(folder: Path, limit: int, seed: int) -> Data:
    built = build_fashion_mnist(folder, limit=limit, val_fraction=VAL_FRACTION, seed=seed)
    data = {}
    for split in built.splits:
        images = read_image_files(split.path)
        x = torch.from_numpy(np.asarray(images.images, dtype=np.float32).reshape(len(images.labels), -1) / 255.0)
        data[split.name] = (x, torch.from_numpy(np.asarray(images.labels, dtype=np.int64)))
    return data


def sample_configs(seed: int, count: int) -> list[Config]:
    """The random search's trials: the same for every method of a seed."""
    rng = np.random.default_rng(seed)
    return [
        Config(
            learning_rate=float(np.exp(rng.uniform(math.log(1e-4), math.log(3e-2)))),
            hidden=int(rng.choice([32, 64, 128, 256])),
            dropout=float(rng.uniform(0.0, 0.5)),
            weight_decay=float(np.exp(rng.uniform(math.log(1e-6), math.log(1e-2)))),
            batch_size=int(rng.choice([32, 64, 128])),
        )
        for _ in range(count)
    ]


def _accuracy(module: nn.Module, split: tuple[torch.Tensor, torch.Tensor]) -> float:
    module.eval()
    with torch.no_grad():
        return float((module(split[0]).argmax(1) == split[1]).float().mean())


def train_trial(data: Data, config: Config, seed: int, epochs: int, stop: Callable[[int, float], bool]) -> TrialRun:
    """Train epoch by epoch; ``stop(step, validation accuracy)`` after each epoch ends the trial when true."""
    run = TrialRun(config)
    started = time.process_time()
    torch.manual_seed(seed)
    x, y = data["train"]
    module = nn.Sequential(
        nn.Linear(x.shape[1], config.hidden), nn.ReLU(), nn.Dropout(config.dropout), nn.Linear(config.hidden, 10)
    )
    optimizer = torch.optim.AdamW(module.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)
    loss_fn = nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(seed)
    for epoch in range(epochs):
        module.train()
        for batch in torch.randperm(len(x), generator=generator).split(config.batch_size):
            optimizer.zero_grad()
            loss_fn(module(x[batch]), y[batch]).backward()
            optimizer.step()
        run.curve.append(_accuracy(module, data["val"]))
        if epoch + 1 < epochs and stop(epoch + 1, run.curve[-1]):
            run.stopped = True
            break
    run.seconds = time.process_time() - started
    run.test_accuracy = _accuracy(module, data["test"])  # off the clock: only the chosen trial's counts
    return run


def search(data: Data, method: str, seed: int, configs: list[Config], epochs: int) -> SearchRun:
    trials: list[TrialRun] = []
    if method == "optuna-sha":
        study = optuna.create_study(
            direction="maximize",
            pruner=optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=ETA),
        )
        for number, config in enumerate(configs):
            trial = study.ask()

            def prune(step: int, value: float, trial: optuna.Trial = trial) -> bool:
                trial.report(value, step)
                return trial.should_prune()

            run = train_trial(data, config, seed * 1000 + number, epochs, prune)
            state = optuna.trial.TrialState.PRUNED if run.stopped else optuna.trial.TrialState.COMPLETE
            study.tell(trial, None if run.stopped else run.curve[-1], state=state)
            trials.append(run)
        return SearchRun(method, seed, trials)
    options: dict[str, Any] = {
        "none": {},
        "asha": {"eta": ETA, "min_resource": 1, "max_resource": epochs},
        "median": {"grace_steps": 1, "min_trials": 3},
    }[method]
    rule = make_stopping_rule(method, **options)
    for number, config in enumerate(configs):
        run = train_trial(
            data, config, seed * 1000 + number, epochs,
            lambda step, value, number=number: rule.report(number, step, value).stop,
        )  # fmt: skip
        rule.finished(number, run.curve[-1])
        trials.append(run)
    return SearchRun(method, seed, trials)


def summarise(runs: list[SearchRun], epochs: int) -> dict[str, Any]:
    by_method = {m: [r for r in runs if r.method == m] for m in METHODS}
    base = by_method["none"]
    base_epochs = statistics.fmean(r.epochs for r in base)
    base_seconds = statistics.fmean(r.seconds for r in base)
    base_best = statistics.fmean(r.best.curve[-1] for r in base)
    rows = {}
    for method, group in by_method.items():
        mean_epochs = statistics.fmean(r.epochs for r in group)
        rows[method] = {
            "best_val_accuracy": statistics.fmean(r.best.curve[-1] for r in group),
            "best_val_accuracy_sd": statistics.stdev(r.best.curve[-1] for r in group) if len(group) > 1 else 0.0,
            "test_accuracy_of_best": statistics.fmean(r.best.test_accuracy for r in group),
            "epochs": mean_epochs,
            "cpu_seconds": statistics.fmean(r.seconds for r in group),
            "stopped_trials": statistics.fmean(sum(t.stopped for t in r.trials) for r in group),
            "epoch_ratio": mean_epochs / base_epochs,
            "time_ratio": statistics.fmean(r.seconds for r in group) / base_seconds,
            "accuracy_delta": statistics.fmean(r.best.curve[-1] for r in group) - base_best,
            "same_best_as_none": sum(r.best.config == b.best.config for r, b in zip(group, base, strict=True)),
            # What no stopping had found by the time this method had trained all its epochs.
            "none_best_at_same_epochs": statistics.fmean(
                b.best_after(r.epochs) for r, b in zip(group, base, strict=True)
            ),
        }
    # Deterministic training: every stopped curve is the start of the same trial's full curve.
    mismatches = sum(
        t.curve != b.curve[: len(t.curve)]
        for r in runs if r.method != "none"
        for t, b in zip(r.trials, next(x for x in base if x.seed == r.seed).trials, strict=True)
    )  # fmt: skip
    return {"methods": rows, "curve_mismatches": mismatches, "max_epochs": epochs}


def write_report(result: dict[str, Any]) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "early_stopping.json").write_text(json.dumps(result, indent=2) + "\n")
    summary = result["summary"]
    setup = result["run"]
    lines = [
        "# Early stopping: ASHA and median against no stopping and Optuna",
        "",
        f"`bench/early_stopping.py{' --quick' if setup['quick'] else ''}`, {result['date']}, {result['machine']}. "
        f"Fashion-MNIST: {setup['limit']} images ({1 - VAL_FRACTION:.0%} train, {VAL_FRACTION:.0%} validation) and "
        f"a test set in proportion. Random search over a one-hidden-layer MLP (learning rate, width, dropout, "
        f"weight decay, batch size), {setup['trials']} trials of up to {setup['epochs']} epochs per search, "
        f"seeds {setup['seeds']}; the same configurations and trial seeds for every method. Step = epochs "
        "trained; ASHA eta=3, min_resource=1; median grace_steps=1, min_trials=3; Optuna "
        "SuccessiveHalvingPruner(min_resource=1, reduction_factor=3). Best = the best trial's last validation "
        "accuracy; test = that trial's test accuracy. Cost: epochs trained (exact) and CPU seconds of training "
        "and validation (one torch thread). Means over the seeds.",
        "",
        "| method | best val. acc. (sd) | Δ vs none | test acc. of best | epochs | epochs / none | CPU s "
        "| CPU s / none | stopped trials | same best trial as none | none's best at these epochs |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for method, r in summary["methods"].items():
        lines.append(
            f"| {method} | {r['best_val_accuracy']:.4f} ({r['best_val_accuracy_sd']:.4f}) "
            f"| {r['accuracy_delta']:+.4f} | {r['test_accuracy_of_best']:.4f} | {r['epochs']:.1f} "
            f"| {r['epoch_ratio']:.2f} | {r['cpu_seconds']:.1f} | {r['time_ratio']:.2f} "
            f"| {r['stopped_trials']:.1f} of {setup['trials']} | {r['same_best_as_none']} of {len(setup['seeds'])} "
            f"| {r['none_best_at_same_epochs']:.4f} |"
        )
    lines += [
        "",
        "The last column: the best accuracy the search without stopping had reached after the same number of "
        "epochs (its finished trials only) — what the saved work buys against simply running fewer trials "
        f"to completion. Stopped curves that differ from the unstopped run of the same trial: "
        f"{summary['curve_mismatches']} (0: the methods saw identical trials).",
        "",
        setup_markdown(result["setup"]),
        "",
    ]
    (RESULTS / "early_stopping.md").write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer images and trials (about 2.5 minutes)")
    parser.add_argument("--limit", type=int, help="Fashion-MNIST images for training and validation")
    parser.add_argument("--trials", type=int, help="trials per search")
    parser.add_argument("--epochs", type=int, default=9, help="epochs of a trial that is never stopped")
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    limit = args.limit or (4000 if args.quick else 8000)
    trials = args.trials or (18 if args.quick else 27)
    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    started = time.perf_counter()
    setup = RunSetup(
        f"stopping early, on a small subset ({limit} images) where it costs little accuracy; otherwise no one: "
        "every method trains the same configurations from the same trial seeds, in turn, in one process",
        placement="not applicable (no job driver: the trials train in this process)",
        fusion="not applicable (no platform)",
        warm_start="off (every trial trains from scratch)",
    )
    with tempfile.TemporaryDirectory(prefix="baobab-bench-") as tmp:
        data = load(Path(tmp), limit, seed=0)
    train_trial(data, sample_configs(0, 1)[0], 0, 1, lambda step, value: False)  # warm-up, not counted
    runs = []
    for seed in range(args.seeds):
        configs = sample_configs(seed, trials)
        for method in METHODS:
            run = search(data, method, seed, configs, args.epochs)
            runs.append(run)
            print(
                f"seed {seed} {method:>10}: best val {run.best.curve[-1]:.4f}, {run.epochs} epochs, "
                f"{run.seconds:.1f} CPU s, {sum(t.stopped for t in run.trials)} stopped",
                flush=True,
            )
    result = {
        "date": datetime.date.today().isoformat(),
        "machine": f"1 torch thread, Python {platform.python_version()}, torch {torch.__version__}, "
        f"optuna {optuna.__version__}",
        # The run's own parameters; "setup" is the record every result carries (bench/setup_record.py).
        "run": {
            "quick": args.quick,
            "limit": limit,
            "trials": trials,
            "epochs": args.epochs,
            "seeds": list(range(args.seeds)),
            "wall_seconds": time.perf_counter() - started,
        },  # fmt: skip
        "summary": summarise(runs, args.epochs),
        "setup": setup.finish(),
        "runs": [{"method": r.method, "seed": r.seed, "trials": [asdict(t) for t in r.trials]} for r in runs],
    }
    write_report(result)
    print((RESULTS / "early_stopping.md").read_text())


if __name__ == "__main__":
    main()
