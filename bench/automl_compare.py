"""An AutoML comparison users would run: Baobab's defaults, Optuna and Ray Tune with ASHA, time to accuracy.

The same template, ``examples/models/torch_cnn.py`` (TorchCnn, searched over its own knob
config with the policies off), the same wall-clock budget (``--minutes``, 5 by default) and
the same CPU slots (``--slots``, 2; each trial gets ``cores // slots`` torch threads) for
three ways, one after another in the same run, on two image datasets that lie on the
machine:

- **fashion-mnist**: Debian's ``dataset-fashion-mnist`` through
  ``baobab.store.build_fashion_mnist``: 54,000 images to train, 6,000 to validate, the 10,000
  test images for the served model (``--train-images N`` cuts train + validation to N and
  the test set in proportion, for a smoke run);
- **digits**: scikit-learn's bundled 8x8 digits through ``baobab.store.build_digits``:
  1,077 images to train, 360 to validate, 360 to test.

The ways:

1. **baobab**: Baobab's defaults. ``baobab up --workers SLOTS`` (SQLite, local worker
   processes) in a fresh home; the datasets and the template uploaded with the SDK; one
   train job with ``TIME_HOURS`` = the budget, ``GPU_COUNT`` 0 and no options (the
   driver's default strategy, warm start on, fusion off, no early stopping), seeded with the run's
   seed; then the served models (``bench/automl_budget.py``'s ``run_baobab``): the test set sent
   through the inference job a user gets by default (no ``k``: an ensemble of the best completed
   trials), which the aim reads, and through one of the job's best trial alone, like for like with
   the peers.
2. **optuna**: Optuna's default ``TPESampler``, SLOTS processes on one journal file, each
   trial building the template from suggested knobs, ``train()`` + ``evaluate()``, a trial
   running at the deadline asked to stop through its trial context; the best trial's saved
   parameters loaded into a fresh model for the test set (``automl_budget``'s ``run_optuna``).
3. **ray-tune-asha**: Ray Tune (``ray.init(num_cpus=SLOTS, include_dashboard=False)``, local
   mode off) with ``ASHAScheduler`` (its defaults, ``max_t`` = the template's most epochs)
   over Ray's default search (random sampling of a space built from the knob config,
   ``BasicVariantGenerator`` seeded, at most SLOTS trials at once, as ``TuneConfig``'s
   ``max_concurrent_trials`` would make it), each trial 1 CPU, ``time_budget_s`` = the budget,
   actors reused from trial to trial (``reuse_actors=True``, as Ray's docs advise for many
   short trials; ``--ray-actors fresh`` starts one a trial, ``TuneConfig``'s own default,
   which on this machine costs each trial several seconds: on digits, 6 trials in a minute
   instead of about 200). The
   trainable builds the template from its config and trains it through the platform's own
   hook: the template reports each epoch to its trial context, whose sink scores the model on
   the validation set and passes that to ``tune.report`` with the parameters as a
   checkpoint, so ASHA reads validation accuracy per epoch and stops trials there. The
   training images are decoded once and handed to the trials through Ray's object store
   (``tune.with_parameters``). The best result (Ray's ``get_best_result``, last score) ->
   its checkpoint -> a fresh model -> test accuracy.

Reported per dataset and way, over the seeds (``--seeds``, 3): the served model's test
accuracy (median and spread), the best validation accuracy against minutes (a table at five
marks and a chart), trials completed; and a sentence, computed from those figures, on the
issue's aim: Baobab ahead of both peers at the budget's end on both datasets and never
behind either by more than the seeds' spread at any mark.

    make bench-automl-compare        # 5 minutes a way: 2 datasets x 3 ways x 3 seeds, about 2 hours in all
    .venv/bin/python bench/automl_compare.py --seeds 1 --minutes 1 --train-images 3000 --out /tmp/compare  # smoke

On an idle 2-core machine the default run takes 18 searches of 5 minutes plus about a
minute each for starting a platform or Ray, uploading, serving and the test set: about
2 hours.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import torch
from automl_budget import (
    SCORED,
    TEMPLATES,
    Data,
    Trial,
    Way,
    _template,
    accuracy,
    choices,
    marks,
    progress,
    run_baobab,
    run_meta,
    run_optuna,
)
from setup_record import RunSetup, setup_markdown
from strategies import plt

from baobab.advisor import trial_knobs
from baobab.model import (
    ArchKnob,
    CategoricalKnob,
    InterimMetric,
    KnobConfig,
    TorchModel,
    TrialContext,
    searchable_knobs,
    trial_context,
)
from baobab.store import build_digits, build_fashion_mnist, params_from_bytes, params_to_bytes, read_image_files

HERE = Path(__file__).parent
RESULTS = HERE / "results"
WAYS = ("baobab", "optuna", "ray-tune-asha")
DATASETS = ("fashion-mnist", "digits")
CNN = next(t for t in TEMPLATES if t.key == "cnn")
METRIC = "val_accuracy"
# Ray reads it when it starts: it sends no usage statistics (nothing here reaches outside the machine).
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


@dataclasses.dataclass
class Run:
    """One way on one dataset with one seed."""

    dataset: str
    seed: int
    way: Way
    asha_stopped: int = 0  # ray-tune-asha: trials ASHA stopped before their last epoch


# -- data ----------------------------------------------------------------------------------------


def build_data(name: str, folder: Path, train_images: int | None) -> Data:
    """One dataset as Baobab's IMAGE_FILES zips (train, val, test), split with seed 0 for every seed."""
    if name == "fashion-mnist":
        built = build_fashion_mnist(folder, limit=train_images, seed=0)
    else:
        built = build_digits(folder, seed=0)
    rows = {s.name: s.rows for s in built.splits}
    return Data({"images": {s.name: str(s.path) for s in built.splits}}, rows["train"], rows["val"])


# -- Ray Tune with ASHA --------------------------------------------------------------------------


def tune_space(config: KnobConfig) -> dict[str, Any]:
    """Ray Tune's search space for the searchable knobs of ``config``, as its users write one."""
    from ray import tune

    space: dict[str, Any] = {}
    for name, knob in searchable_knobs(config).items():
        if isinstance(knob, ArchKnob):
            space[name] = [tune.choice(list(choices)) for choices in knob.items]
        elif isinstance(knob, CategoricalKnob):
            space[name] = tune.choice(list(knob.values))
        elif isinstance(knob.value_min, int) and isinstance(knob.value_max, int):
            sample = tune.lograndint if knob.is_exp else tune.randint
            space[name] = sample(knob.value_min, knob.value_max + 1)  # Ray's upper bound is exclusive
        else:
            space[name] = (tune.loguniform if knob.is_exp else tune.uniform)(knob.value_min, knob.value_max)
    return space


class _TuneSink:
    """The trial context's sink in a Ray trial: each epoch the template reports is scored on the
    validation set and passed to ``tune.report`` with the parameters as a checkpoint; ASHA, reading
    it, stops the trial (Ray ends its actor), so the sink itself never asks to stop."""

    def __init__(self, model: TorchModel, val_path: str, planned: int) -> None:
        self.model, self.val_path, self.planned = model, val_path, planned

    def on_report(self, metric: InterimMetric) -> bool:
        from ray import tune

        score = self.model.evaluate(self.val_path)
        with tempfile.TemporaryDirectory() as folder:
            (Path(folder) / "params").write_bytes(params_to_bytes(self.model.dump_parameters()))
            metrics = {METRIC: score, "epochs": metric.step + 1, "planned": self.planned, "at": time.time()}
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(folder))
        return False

    def on_log(self, message: str) -> None:
        """Nothing: Ray keeps each trial's own output."""


def _ray_trial(
    config: dict[str, Any], data: dict[str, tuple[np.ndarray, np.ndarray]], train: str, val: str, threads: int
) -> None:
    """Ray's function trainable: the template built from ``config``, trained on ``train`` and scored on ``val``
    epoch by epoch (see _TuneSink), their images decoded once by the driver (``data``: path -> images, labels)."""
    from ray import tune

    torch.set_num_threads(threads)
    cls = _template(CNN.key)
    model = cls(**trial_knobs(cls.get_knob_config(), config))
    prepared: dict[str, tuple[torch.Tensor, np.ndarray]] = {}

    def load(path: str, _load: Callable[[], Any]) -> tuple[torch.Tensor, np.ndarray]:
        if path not in prepared:
            images, labels = data[path]
            prepared[path] = (model.preprocess(images), labels)
        return prepared[path]

    sink = _TuneSink(model, val, model.epochs())
    seed = int(tune.get_context().get_trial_id().rsplit("_", 1)[-1])  # the trial's number
    with trial_context(TrialContext(sink=sink, data_loader=load)):
        model.train(train, seed=seed)


def _recording_asha(max_t: int) -> Any:
    """Ray's ASHAScheduler with its defaults but ``max_t``, noting the trials it stops (for the report only)."""
    from ray.tune.schedulers import ASHAScheduler, TrialScheduler

    class RecordingAsha(ASHAScheduler):
        stopped: set[str]

        def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> str:
            decision = super().on_trial_result(tune_controller, trial, result)
            if decision == TrialScheduler.STOP and result.get("epochs", 0) < result.get("planned", 0):
                self.stopped.add(trial.trial_id)
            return str(decision)

    scheduler = RecordingAsha(max_t=max_t)
    scheduler.stopped = set()
    return scheduler


def run_ray(dataset: str, data: Data, args: argparse.Namespace, folder: Path, seed: int) -> Run:
    """The Ray Tune way: ASHA over random sampling, SLOTS trials at once, the budget as time_budget_s."""
    import ray
    from ray import tune
    from ray.tune.search import BasicVariantGenerator

    started = time.perf_counter()
    ray.init(num_cpus=args.slots, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    try:
        config = _template(CNN.key).get_knob_config()
        images = data.paths["images"]
        decoded = {images[part]: read_image_files(images[part]) for part in ("train", "val")}
        arrays = {path: (ds.images, ds.labels) for path, ds in decoded.items()}
        threads = max(1, len(os.sched_getaffinity(0)) // args.slots)
        scheduler = _recording_asha(int(getattr(config.get("epochs"), "value_max", 10)))
        tuner = tune.Tuner(
            tune.with_resources(
                tune.with_parameters(
                    _ray_trial, data=arrays, train=images["train"], val=images["val"], threads=threads
                ),
                {"cpu": 1},
            ),
            param_space=tune_space(config),
            tune_config=tune.TuneConfig(
                metric=METRIC,
                mode="max",
                scheduler=scheduler,
                # What TuneConfig makes of max_concurrent_trials=SLOTS, seeded (it takes no seed itself).
                search_alg=BasicVariantGenerator(max_concurrent=args.slots, random_state=seed),
                num_samples=-1,  # sample until the time budget ends
                reuse_actors=args.ray_actors == "reuse",
                time_budget_s=60 * args.minutes,
            ),
            run_config=tune.RunConfig(storage_path=str(folder / "ray"), verbose=0),
        )
        start = time.time()
        grid = tuner.fit()
        trials = []
        for result in grid:
            metrics = result.metrics or {}
            if METRIC not in metrics:
                trials.append(Trial(CNN.key, "ERRORED" if result.error else "UNSCORED", None, None))
                continue
            done = metrics["epochs"] >= metrics["planned"]
            trials.append(Trial(CNN.key, "COMPLETED" if done else "STOPPED", metrics[METRIC], metrics["at"] - start))
        best = grid.get_best_result(metric=METRIC, mode="max", scope="last")
        if best.checkpoint is None:
            raise SystemExit("ray-tune-asha: no trial was scored: nothing to test")
        model = _template(CNN.key)(**trial_knobs(config, best.config))
        with best.checkpoint.as_directory() as checkpoint:
            model.load_parameters(params_from_bytes((Path(checkpoint) / "params").read_bytes()))
    finally:
        ray.shutdown()
    test = read_image_files(images["test"])
    correct = accuracy(model.predict(test.images), test.labels)
    status = "COMPLETED" if best.metrics["epochs"] >= best.metrics["planned"] else "STOPPED"
    what = (
        f"the best result by its last validation accuracy ({status} after {best.metrics['epochs']} of "
        f"{best.metrics['planned']} epochs, validation {best.metrics[METRIC]:.4f}): its checkpoint loaded into a "
        "fresh model, whose predict() answered the test queries"
    )
    last = max((t.end_s for t in trials if t.end_s is not None), default=0.0)
    setting = f"ASHAScheduler, random search, {args.slots} trials at once, actors {args.ray_actors}"
    way = Way("ray-tune-asha", setting, trials, what, correct / len(test.labels), last, time.perf_counter() - started)
    return Run(dataset, seed, way, len(scheduler.stopped))


# -- the figures ---------------------------------------------------------------------------------


def _spread(values: list[float]) -> float:
    """The seeds' spread: the largest value less the smallest (0 for one seed)."""
    return max(values) - min(values) if values else float("nan")


def _median_range(values: list[float], fmt: str = ".4f") -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return format(values[0], fmt)
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}–{max(values):{fmt}})"


def _curves(runs: list[Run], times_s: np.ndarray) -> np.ndarray:
    """Best validation accuracy so far, one row a seed, read at ``times_s`` (nan before a first score)."""
    return np.array([r.way.best_by(times_s) for r in runs])


def _nan_median(rows: np.ndarray) -> np.ndarray:
    """The median over seeds at each time; nan where no seed has a score yet."""
    out = np.full(rows.shape[1], np.nan)
    for i, column in enumerate(rows.T):
        seen = column[~np.isnan(column)]
        if len(seen):
            out[i] = float(np.median(seen))
    return out


def summarise(runs: list[Run], minutes: float) -> list[dict[str, Any]]:
    """One row per dataset and way: the figures the report and the verdict read."""
    rows = []
    for dataset in dict.fromkeys(r.dataset for r in runs):
        for name in dict.fromkeys(r.way.name for r in runs):
            these = [r for r in runs if r.dataset == dataset and r.way.name == name]
            if not these:
                continue
            tests = [r.way.test_accuracy for r in these]
            # What a user gets by default (Baobab's default inference job); the best trial where a way has no such
            # thing (the peers, or a run without it). The aim is judged on this.
            defaults = [r.way.default_served[1] if r.way.default_served else r.way.test_accuracy for r in these]
            curves = _curves(these, marks(minutes))
            rows.append(
                {
                    "dataset": dataset,
                    "way": name,
                    "seeds": [r.seed for r in these],
                    "test_accuracy": tests,
                    "test_accuracy_median": statistics.median(tests),
                    "test_accuracy_spread": _spread(tests),
                    "default_test_accuracy": defaults,
                    "default_test_accuracy_median": statistics.median(defaults),
                    "completed": [r.way.count("COMPLETED") for r in these],
                    "stopped": [r.way.count("STOPPED") for r in these],
                    "asha_stopped": [r.asha_stopped for r in these],
                    "other": [len(r.way.trials) - r.way.count(*SCORED) for r in these],
                    "marks_minutes": [float(s / 60) for s in marks(minutes)],
                    "best_validation_median": [None if np.isnan(v) else float(v) for v in _nan_median(curves)],
                    "best_validation_spread": [
                        None if np.isnan(c).all() else float(np.nanmax(c) - np.nanmin(c)) for c in curves.T
                    ],
                    "wall_minutes": [r.way.wall_s / 60 for r in these],
                }
            )
    return rows


def verdict(summary: list[dict[str, Any]]) -> str:
    """The issue's aim, judged on the figures: Baobab's median test accuracy above both peers' on every
    dataset, and its median best validation accuracy at no mark below a peer's by more than the seeds'
    spread there (the larger of the two ways' spreads). The test accuracy is what each way gives a user by
    default: Baobab's default inference job, a peer's best trial."""
    by = {(row["dataset"], row["way"]): row for row in summary}
    datasets = list(dict.fromkeys(row["dataset"] for row in summary))
    peers = [w for w in WAYS[1:] if any(row["way"] == w for row in summary)]
    if not any(row["way"] == "baobab" for row in summary) or len(peers) < 2 or len(datasets) < len(DATASETS):
        return (
            "The aim (Baobab ahead of both Optuna and Ray Tune at the budget's end on both datasets) cannot be "
            "judged: this run left out a way or a dataset."
        )
    behind_end, behind_marks = [], []
    for dataset in datasets:
        ours = by[dataset, "baobab"]
        for peer in peers:
            theirs = by[dataset, peer]
            if ours["default_test_accuracy_median"] <= theirs["default_test_accuracy_median"]:
                behind_end.append(
                    f"{dataset}: {ours['default_test_accuracy_median']:.4f} against {peer}'s "
                    f"{theirs['default_test_accuracy_median']:.4f}"
                )
            for minute, a, b, sa, sb in zip(
                ours["marks_minutes"],
                ours["best_validation_median"],
                theirs["best_validation_median"],
                ours["best_validation_spread"],
                theirs["best_validation_spread"],
                strict=True,
            ):
                if b is None:
                    continue
                spread = max(sa or 0.0, sb or 0.0)
                if a is None or b - a > spread:
                    shown = "no score yet" if a is None else f"{a:.4f}"
                    behind_marks.append(
                        f"{dataset} at {minute:.1f} min: {shown} against {peer}'s {b:.4f} (spread {spread:.4f})"
                    )
    ahead = not behind_end
    close = not behind_marks
    head = (
        f"Baobab is {'ahead of' if ahead else 'not ahead of'} both Optuna and Ray Tune with ASHA at the budget's "
        f"end on both datasets (median test accuracy of what each serves by default: Baobab's default inference "
        f"job, a peer's best trial)"
    )
    head += (
        " and never behind either by more than the seeds' spread at any mark (median best validation accuracy)"
        if close
        else ", and is behind by more than the seeds' spread at some marks"
    )
    detail = "; ".join(
        [*(f"not ahead on {item}" for item in behind_end), *(f"behind on {item}" for item in behind_marks)]
    )
    return f"{head}: the aim is {'met' if ahead and close else 'not met'}" + (f" ({detail})." if detail else ".")


# -- the report ----------------------------------------------------------------------------------


def results_table(summary: list[dict[str, Any]]) -> str:
    lines = [
        "| dataset | way | test accuracy by default, median (range) | best trial's test accuracy "
        "| trials completed, per seed | stopped (by ASHA) | errored or unscored | best validation at the end "
        "| wall time a run |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in summary:
        stopped = ", ".join(
            f"{s} ({a})" if row["way"] == "ray-tune-asha" else str(s)
            for s, a in zip(row["stopped"], row["asha_stopped"], strict=True)
        )
        end = row["best_validation_median"][-1]
        lines.append(
            f"| {row['dataset']} | {row['way']} | **{_median_range(row['default_test_accuracy'])}** "
            f"| {_median_range(row['test_accuracy'])} | {', '.join(map(str, row['completed']))} | {stopped} "
            f"| {', '.join(map(str, row['other']))} "
            f"| {'-' if end is None else f'{end:.4f}'} | {_median_range(row['wall_minutes'], '.1f')} min |"
        )
    return "\n".join(lines)


def curve_table(summary: list[dict[str, Any]]) -> str:
    """Median best validation accuracy (and the seeds' spread) at each mark, a row per dataset and way."""
    minutes = summary[0]["marks_minutes"]
    lines = [
        "| dataset | way | " + " | ".join(f"{m:.1f} min" for m in minutes) + " |",
        "|---|---|" + "---:|" * len(minutes),
    ]
    for row in summary:
        cells = [
            "-" if median is None else f"{median:.4f}" + ("" if not spread else f" ±{spread / 2:.4f}")
            for median, spread in zip(row["best_validation_median"], row["best_validation_spread"], strict=True)
        ]
        lines.append(f"| {row['dataset']} | {row['way']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(runs: list[Run], minutes: float, path: Path) -> None:
    """A panel per dataset: each way's median best validation accuracy over the seeds, the range shaded."""
    datasets = list(dict.fromkeys(r.dataset for r in runs))
    grid = np.linspace(0, 60 * minutes + 30, 400)
    fig, axes = plt.subplots(1, len(datasets), figsize=(6.5 * len(datasets), 4.4), squeeze=False)
    for ax, dataset in zip(axes[0], datasets, strict=True):
        floor = []
        for name in dict.fromkeys(r.way.name for r in runs):
            these = [r for r in runs if r.dataset == dataset and r.way.name == name]
            curves = _curves(these, grid)
            median = _nan_median(curves)
            line = ax.step(grid / 60, median, where="post", label=f"{name} ({len(these)} seed(s))")
            if len(these) > 1:
                low, high = np.nanmin(curves, axis=0), np.nanmax(curves, axis=0)
                ax.fill_between(grid / 60, low, high, step="post", alpha=0.2, color=line[0].get_color())
            floor += [v for v in median if not np.isnan(v)][:1]
        ax.axvline(minutes, color="grey", linestyle=":", linewidth=1)
        ax.set_xlim(0, grid[-1] / 60)
        if floor:
            ax.set_ylim(max(0.0, min(floor) - 0.02), None)
        ax.set_title(f"{dataset}, TorchCnn, {minutes:g} minutes a way")
        ax.set_xlabel("minutes from the start of the search")
        ax.set_ylabel("best validation accuracy so far")
        ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_report(runs: list[Run], args: argparse.Namespace, data: dict[str, Data], meta: dict[str, Any]) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    summary = summarise(runs, args.minutes)
    aim = verdict(summary)
    payload = {**meta, "summary": summary, "aim": aim, "runs": [dataclasses.asdict(r) for r in runs]}
    (args.out / "automl_compare.json").write_text(json.dumps(payload, indent=2) + "\n")
    plot(runs, args.minutes, args.out / "automl_compare.png")
    sizes = ", ".join(
        f"{name} {d.train_rows:,} images to train, {d.val_rows:,} to validate, {meta['test_rows'][name]:,} to test"
        for name, d in data.items()
    )
    served = "\n".join(
        f"- **{r.dataset}, {r.way.name}, seed {r.seed}**: {r.way.served}; test accuracy {r.way.test_accuracy:.4f}"
        + (f"; {r.way.default_served[0]}: {r.way.default_served[1]:.4f}" if r.way.default_served else "")
        + "."
        for r in runs
    )
    reuse = args.ray_actors == "reuse"
    actors = (
        "reused from trial to trial (`reuse_actors=True`)"
        if reuse
        else "started afresh for each trial (`reuse_actors=False`, TuneConfig's default)"
    )
    actor_cost = "an actor process reused from trial to trial" if reuse else "a new actor process a trial"
    report = f"""# An AutoML comparison: Baobab's defaults, Optuna and Ray Tune with ASHA, time to accuracy

Written by `bench/automl_compare.py` (`make bench-automl-compare`) on {meta["date"]}, {meta["cores"]} cores
({platform.machine()}, Python {platform.python_version()}, PyTorch {torch.__version__}, Optuna {optuna.__version__},
Ray {meta["ray"]}), CPU only, at niceness {meta["niceness"]}; {meta["setup"]["minutes"]:.1f} minutes in all.

Budget: **{args.minutes:g} minutes of search a way**, each way run once per seed ({", ".join(map(str, args.seeds))})
and dataset, one after another; {args.slots} trial slots in each, {meta["threads"]} torch thread(s) a trial.
Template: `examples/models/torch_cnn.py` (TorchCnn), searched over its own knob config, policies off.
Data: {sizes}.

- **baobab**: `baobab up --workers {args.slots}` in a fresh home, one train job with `TIME_HOURS` = the budget,
  `GPU_COUNT` 0 and no options (the defaults: strategy `auto`, warm start on, fusion off, no early stopping);
  the job seeded with the run's seed. The test set goes through the inference job a user gets by default
  (no `k`: an ensemble of the best completed trials, listed under "The served models"), and, like for like
  with the peers, through one serving only the best trial.
- **optuna**: the default `TPESampler` (seeded), {args.slots} processes on one journal file; each trial
  trains and evaluates the template; a trial running at the deadline is asked to stop through its trial
  context and scored; the best trial's parameters loaded into a fresh model for the test set.
- **ray-tune-asha**: Ray Tune's default random search (seeded) under `ASHAScheduler` (defaults, `max_t` = the
  template's most epochs), {args.slots} trials at once of 1 CPU each, `time_budget_s` = the budget, actors
  {actors}; each
  epoch the template reports is scored on the validation set and passed to `tune.report` with a checkpoint;
  the best result's checkpoint loaded into a fresh model for the test set.

Times are from the train job's start (Baobab), from the moment the Optuna processes were ready, or from
`Tuner.fit()` (Ray); a trial counts at the time it was scored (for Ray, its last reported epoch).

## Results

{results_table(summary)}

Best validation accuracy so far, the median over seeds (± half the seeds' range) at five marks of the budget:

{curve_table(summary)}

![best validation accuracy against minutes](automl_compare.png)

## The aim

{aim}

## The served models

{served}

## What the setup favours

- Baobab's default inference job serves an ensemble of its best trials, the peers' figure is their best
  trial alone: the column "best trial's test accuracy" is the like-for-like comparison of the
  searches, "test accuracy by default" what a user of each gets (the aim reads the latter).
- Baobab warm-starts a trial from the weights of an earlier trial of the same job by default; every Optuna
  and Ray trial trains from scratch.
- Ray's ASHA stops poor trials after an epoch or a few and spends the time on new ones; Optuna has no early
  stopping (its default pruner acts only on reported values, which its objective does not report), and
  neither has Baobab by default. ASHA pays for its reads: every epoch of a Ray trial is scored on the
  validation set and checkpointed.
- Baobab does not start a trial that would not end before the deadline; Optuna starts trials until the
  deadline, and they are stopped and scored there; Ray's trials are cut at the deadline and keep their
  last epoch's score.
- Baobab pays the platform (its driver, a trial row and a worker process per trial, parameters written to
  the artifact store, data uploaded and decoded by its workers) and Ray its trial bookkeeping, a report and a
  checkpoint an epoch, and {actor_cost}; the Optuna processes call the template directly and keep the data in
  memory between trials. Ray's trials get the images decoded once by the driver through its object store.
- The searches differ: Baobab's `auto` strategy, Optuna's TPE, Ray's random sampling (its default); each way
  as its users get it without options.

{setup_markdown(meta["setup"])}
"""
    (args.out / "automl_compare.md").write_text(report)
    print(report)


def _seeds(value: str) -> list[int]:
    """``3`` (seeds 0, 1, 2) or a comma-separated list (``4,7``)."""
    if value.isdigit():
        return list(range(int(value)))
    try:
        return [int(v) for v in value.split(",") if v]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a count or a comma-separated list of seeds, got {value!r}"
        ) from None


def run_setup(args: argparse.Namespace) -> RunSetup:
    favours = [
        "Baobab: its trials warm-start from earlier trials of the job by default, while Optuna's and Ray's train "
        "from scratch",
        "Ray: ASHA stops poor trials early, while Optuna and Baobab (by default) train every trial to its epochs",
        "Optuna: it calls the template directly, while Baobab pays its driver, rows and store and Ray its "
        "reports and checkpoints",
    ]
    ways = set(args.ways)
    kept = [line for line, way in zip(favours, ("baobab", "ray-tune-asha", "optuna"), strict=True) if way in ways]
    return RunSetup(
        "; ".join(kept),
        fusion={way: "off" if way == "baobab" else "not applicable" for way in args.ways},
        warm_start={way: "on" if way == "baobab" else "off (from scratch)" for way in args.ways},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="the search budget of each way (default 5)")
    parser.add_argument("--seeds", type=_seeds, default=[0, 1, 2], help="a count or a list (default 3: 0, 1, 2)")
    parser.add_argument(
        "--datasets", type=choices(DATASETS, "datasets"), default=list(DATASETS), help=f"of {', '.join(DATASETS)}"
    )
    parser.add_argument("--ways", type=choices(WAYS, "ways"), default=list(WAYS), help=f"of {', '.join(WAYS)}")
    parser.add_argument("--slots", type=int, default=2, help="trials at once in each way (default 2)")
    parser.add_argument(
        "--ray-actors",
        choices=("reuse", "fresh"),
        default="reuse",
        help="ray-tune-asha: reuse a trial's actor for the next trial (the default here, as Ray's docs advise for "
        "short trials) or start one a trial (TuneConfig's own default)",
    )
    parser.add_argument(
        "--train-images",
        type=int,
        default=None,
        help="Fashion-MNIST's train + validation images (default: all 60,000; the test set in proportion)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"where the report goes (default {RESULTS})")
    args = parser.parse_args()
    if args.slots < 1 or args.minutes <= 0 or not args.seeds:
        parser.error("--slots must be at least 1, --minutes above 0 and --seeds not empty")
    if "baobab" in args.ways and args.minutes < 1:
        parser.error("--minutes must be at least 1 for baobab: a train job's TIME_HOURS is one minute at least")
    setup = run_setup(args)
    runs: list[Run] = []
    data: dict[str, Data] = {}
    test_rows: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="baobab-bench-compare-") as tmp:
        folder = Path(tmp)
        for dataset in args.datasets:
            print(f"building {dataset}", flush=True)
            data[dataset] = build_data(dataset, folder / dataset, args.train_images)
            test_rows[dataset] = len(read_image_files(data[dataset].paths["images"]["test"]).labels)
        for dataset in args.datasets:
            for seed in args.seeds:
                for name in args.ways:
                    print(f"{dataset}, seed {seed}, {name}: {args.minutes:g} minutes", flush=True)
                    work = folder / f"{dataset}-{seed}-{name}"
                    work.mkdir()
                    if name == "baobab":
                        way = run_baobab(
                            name, {}, data[dataset], args, work, (CNN,), dataset, seed, default_serving=True
                        )
                        run = Run(dataset, seed, way)
                    elif name == "optuna":
                        run = Run(dataset, seed, run_optuna(data[dataset], args, work, (CNN,), seed))
                    else:
                        run = run_ray(dataset, data[dataset], args, work, seed)
                    runs.append(run)
                    print(
                        f"{dataset}, seed {seed}, {name}: {progress(run.way)}, {run.way.wall_s / 60:.1f} min",
                        flush=True,
                    )
    meta = {
        **run_meta(args),
        "seeds": args.seeds,
        "datasets": args.datasets,
        "ray": _ray_version(),
        "ray_actors": args.ray_actors,
        "train_rows": {name: d.train_rows for name, d in data.items()},
        "val_rows": {name: d.val_rows for name, d in data.items()},
        "test_rows": test_rows,
        "setup": setup.finish(),
    }
    write_report(runs, args, data, meta)


def _ray_version() -> str:
    try:
        import ray
    except ImportError:
        return "not installed"
    return str(ray.__version__)


if __name__ == "__main__":
    main()
