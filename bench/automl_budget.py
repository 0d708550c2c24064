"""A time-budgeted AutoML job on the full Fashion-MNIST: Baobab with fusion, without, without warm start, and Optuna.

Four ways, one after another in the same run, each with the same wall-clock budget
(``--minutes``, 15 by default), the same CPU slots (``--slots``, the usable cores by
default; each trial process gets ``cores // slots`` torch threads, one when slots =
cores, as Baobab's local workers give theirs) and the same two templates,
``examples/models/torch_mlp.py`` (TorchMlp, on the pixels as a TABULAR CSV) and
``examples/models/torch_cnn.py`` (TorchCnn, on the images), each searched over its own
knob config. The data is Debian's ``dataset-fashion-mnist`` through
``baobab.store.build_fashion_mnist`` and ``bench/shared_data.py``'s CSV builder: the
60,000 training images split 54,000 to train and 6,000 to validate, and the 10,000 test
images kept for the served model.

1. **Baobab with fusion**: ``baobab up --workers SLOTS`` (SQLite, local worker processes)
   in a fresh home; the datasets and templates uploaded with the SDK; two train jobs
   created at once (a job has one task: the MLP's is TABULAR_CLASSIFICATION, the CNN's
   IMAGE_CLASSIFICATION), each with ``TIME_HOURS`` = the budget, ``GPU_COUNT`` 0 and
   the job option ``fusion`` = ``--fusion``; the platform shares its slots between them. No
   policies, no early stopping: the driver's defaults (strategy ``auto``).
2. **Baobab without fusion**: the same, ``fusion: "off"``, in another fresh home (so no
   zoo model of the first way warm-starts the second). Both ways warm-start (the
   default): a trial may start from the weights of an earlier trial of the same job.
3. **Baobab cold**: fusion off and ``warm_start: false``, so every trial trains from
   scratch as Optuna's do: the difference to way 2 is what warm start adds, the
   difference to Optuna what the platform adds.
4. **Optuna**: one study per template (Optuna's default TPE sampler) on a journal file,
   optimised by SLOTS processes (half the slots for each template, as the platform's
   driver splits them between the two jobs); each trial builds the template from knobs
   suggested over its knob config (policies off, as the jobs have them), calls
   ``train()`` and ``evaluate()`` itself and saves the parameters. Each process loads a
   dataset once and keeps it for its next trials, as an Optuna user loads data outside
   the objective. ``study.optimize(timeout=...)`` starts no trial after the deadline,
   and a trial running at the deadline is asked to stop through its trial context, as
   Baobab's driver asks its trials: it stops at the next batch, is scored and counts as
   stopped, not completed.

Reported per way: trials completed (fully trained) and stopped at the deadline, the best
validation accuracy over time (a chart and a table), and the test accuracy of the served
model, which is the best COMPLETED trial by validation accuracy over both templates (a
stopped one only where no trial completed): for Baobab, an inference job of that trial
(``trial_ids``) and the 10,000 test images sent through its predictor as ``make demo``
does; for Optuna, that trial's saved parameters loaded into a fresh model and its
``predict()`` called on the same queries.

    .venv/bin/python bench/automl_budget.py                  # 15 minutes a way: about 65 minutes in all
    .venv/bin/python bench/automl_budget.py --minutes 1 --out /tmp/automl   # a smoke run
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import json
import os
import platform
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import torch
from setup_record import RunSetup, setup_markdown
from shared_data import build_datasets
from strategies import optuna_knobs, plt

from baobab.advisor import trial_knobs
from baobab.model import TorchModel, TrialContext, load_template, searchable_knobs, trial_context
from baobab.sdk import ApiError, Client
from baobab.store import params_from_bytes, params_to_bytes, read_image_files
from baobab.testing import LocalPlatform

HERE = Path(__file__).parent
RESULTS = HERE / "results"
EXAMPLES = HERE.parent / "examples" / "models"
EMAIL, PASSWORD = "bench@example.com", "bench-password"
WAYS = ("baobab-fusion", "baobab-off", "baobab-cold", "optuna")
BATCH = 100  # test queries per predict request
SCORED = ("COMPLETED", "STOPPED")


@dataclasses.dataclass(frozen=True)
class Template:
    key: str
    file: str
    class_name: str
    task: str
    split: str  # "csv" (the pixels as TABULAR) or "images" (IMAGE_FILES)


TEMPLATES = (
    Template("mlp", "torch_mlp.py", "TorchMlp", "TABULAR_CLASSIFICATION", "csv"),
    Template("cnn", "torch_cnn.py", "TorchCnn", "IMAGE_CLASSIFICATION", "images"),
)


@dataclasses.dataclass(frozen=True)
class Data:
    """The datasets' paths by split kind ("csv", "images") and name ("train", "val", "test")."""

    paths: dict[str, dict[str, str]]
    train_rows: int
    val_rows: int

    def queries(self, template: Template, images: np.ndarray) -> np.ndarray:
        """Test images as the template's predict takes them: pixel rows for the MLP, images for the CNN."""
        return images.reshape(len(images), -1) if template.split == "csv" else images


@dataclasses.dataclass
class Trial:
    template: str
    status: str  # COMPLETED, STOPPED (at the deadline), ERRORED, ...
    score: float | None
    end_s: float | None  # from the way's start
    fused: int = 1  # the size of the fused group it trained in


@dataclasses.dataclass
class Way:
    name: str
    setting: str
    trials: list[Trial]
    served: str
    test_accuracy: float
    last_end_s: float  # the last trial's end, from the way's start
    wall_s: float  # the whole way: platform or processes, uploads, search, serving, test set
    # The test set through the inference job a user gets by default (the best DEFAULT_K trials as an ensemble),
    # where run_baobab was asked for it: (what it served, its test accuracy).
    default_served: tuple[str, float] | None = None

    def count(self, *statuses: str, template: str | None = None) -> int:
        return sum(t.status in statuses and template in (None, t.template) for t in self.trials)

    def best_by(self, times_s: np.ndarray) -> np.ndarray:
        """The best validation accuracy of the trials scored by each of ``times_s`` (nan before the first)."""
        best = np.full(len(times_s), np.nan)
        for t in self.trials:
            if t.status in SCORED and t.score is not None and t.end_s is not None:
                best[times_s >= t.end_s] = np.fmax(best[times_s >= t.end_s], t.score)
        return best

    @property
    def best(self) -> tuple[float, str]:
        scored = [t for t in self.trials if t.status in SCORED and t.score is not None]
        top = max(scored, key=lambda t: t.score or 0.0)
        return float(top.score or 0.0), top.template


def accuracy(predictions: list[Any], labels: np.ndarray) -> int:
    """Correct answers among ``predictions``: class probabilities (the CNN) or labels (the MLP)."""
    answers = np.asarray(predictions)
    predicted = answers.argmax(axis=1) if answers.ndim == 2 else answers.astype(np.int64)
    return int((predicted == labels).sum())


# -- Baobab --------------------------------------------------------------------------------------


def run_baobab(
    name: str,
    options: dict[str, Any],
    data: Data,
    args: argparse.Namespace,
    folder: Path,
    templates: tuple[Template, ...] = TEMPLATES,
    dataset: str = "fashion-mnist",
    seed: int | None = None,
    default_serving: bool = False,
) -> Way:
    """One way through the platform: upload, a train job per template at once, serve the best trial, predict the
    test set. ``args`` gives ``minutes`` (each job's TIME_HOURS) and ``slots`` (the platform's workers); ``seed``
    is the jobs' (None: each job draws one). With ``default_serving`` (one template), the test set also goes
    through the inference job a user gets by default (no ``k``, no ``trial_ids``), served after the best trial."""
    started = time.perf_counter()
    settings = {"BAOBAB_ADMIN_EMAIL": EMAIL, "BAOBAB_ADMIN_PASSWORD": PASSWORD, "BAOBAB_CPU_SLOTS": str(args.slots)}
    with LocalPlatform(folder / f"{name}-home", workers=args.slots, settings=settings) as baobab:
        client = Client(baobab.url)
        client.login(EMAIL, PASSWORD)
        formats = {"csv": "TABULAR", "images": "IMAGE_FILES"}
        datasets = {
            (split, part): client.create_dataset(f"{dataset} {split} {part}", path, format=formats[split])["id"]
            for split, parts in data.paths.items()
            for part, path in parts.items()
            if part != "test"
        }
        budget = {"TIME_HOURS": args.minutes / 60, "GPU_COUNT": 0}
        jobs = {}
        for t in templates:
            model = client.create_model(EXAMPLES / t.file, task=t.task, class_name=t.class_name)
            jobs[t.key] = client.create_train_job(
                f"{name}-{t.key}",
                t.task,
                train_dataset_id=datasets[t.split, "train"],
                val_dataset_id=datasets[t.split, "val"],
                model_ids=[model["id"]],
                budget=budget,
                options=options,
                seed=seed,
            )
        names = ", ".join(f"{job['app']} v{job['app_version']}" for job in jobs.values())
        print(f"{name}: train jobs {names}", flush=True)
        finished = {
            key: client.wait_for_train_job(
                job["app"], job["app_version"], timeout=60 * args.minutes + 900, progress=False
            )
            for key, job in jobs.items()
        }
        start = min(_time(job["started_at"]) for job in finished.values())
        trials, rows = [], {}
        for key, job in finished.items():
            for row in client.iter_trials(job["app"], job["app_version"]):
                rows[row["id"]] = (key, job, row)
                end = None if row["finished_at"] is None else (_time(row["finished_at"]) - start).total_seconds()
                group = row["fused_group"]
                trials.append(Trial(key, row["status"], row["score"], end, 1 if group is None else group["size"]))
        key, job, best = _served(rows.values())
        template = next(t for t in templates if t.key == key)
        inference = client.create_inference_job(
            job["app"], job["app_version"], trial_ids=[best["id"]], include_stopped=best["status"] != "COMPLETED"
        )
        test_accuracy, _ = _test_accuracy(client, inference, template, data)
        default_served = None
        if default_serving:
            (job,) = finished.values()
            try:
                default, asked = client.create_inference_job(job["app"], job["app_version"]), ""
            except ApiError as e:  # no trial COMPLETED: the answer says to serve STOPPED ones, as a user then would
                if e.field != "include_stopped":
                    raise
                default = client.create_inference_job(job["app"], job["app_version"], include_stopped=True)
                asked = " with include_stopped (no trial COMPLETED)"
            default_accuracy, members = _test_accuracy(client, default, template, data)
            shown = ", ".join(f"trial {rows[m['trial_id']][2]['number']} ({m['score']:.4f})" for m in members)
            default_served = (f"the default inference job{asked}: {shown}", default_accuracy)
    what = (
        f"trial {best['number']} of {job['app']} ({best['status']}, validation {best['score']:.4f}) served by an "
        f"inference job and its predictor"
    )
    last = max((t.end_s for t in trials if t.end_s is not None), default=0.0)
    wall = time.perf_counter() - started
    return Way(name, json.dumps(options), trials, what, test_accuracy, last, wall, default_served)


def _test_accuracy(
    client: Client, inference: dict[str, Any], template: Template, data: Data
) -> tuple[float, list[dict[str, Any]]]:
    """The test set's accuracy through ``inference``'s predictor (stopped after), and the members it served."""
    served = client.wait_for_inference_job(inference["id"], timeout=600)
    correct, labels = 0, read_image_files(data.paths["images"]["test"])
    queries = data.queries(template, labels.images)
    for first in range(0, len(queries), BATCH):
        answer = client.predict(
            queries[first : first + BATCH], predictor_url=served["predictor_url"], api_key=inference["api_key"]
        )
        correct += accuracy(answer["predictions"], labels.labels[first : first + BATCH])
    client.stop_inference_job(inference["id"])
    return correct / len(queries), served["members"]


def _time(value: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(value)


def _served(rows: Any) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The trial to serve: the best COMPLETED one with parameters; the best STOPPED one where none completed."""
    for statuses in (("COMPLETED",), SCORED):
        candidates = [
            r for r in rows if r[2]["status"] in statuses and r[2]["has_params"] and r[2]["score"] is not None
        ]
        if candidates:
            return max(candidates, key=lambda r: r[2]["score"])
    raise SystemExit("no trial was scored with parameters: nothing to serve")


# -- Optuna --------------------------------------------------------------------------------------


def _setup(threads: int) -> None:
    """A trial process: its torch threads, and torch loaded before the clock starts."""
    torch.set_num_threads(threads)
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def _ready() -> None:
    """Nothing: the pool's processes are started and set up once this has run in each."""


@functools.cache
def _template(key: str) -> type[TorchModel]:
    t = next(t for t in TEMPLATES if t.key == key)
    return load_template(str(EXAMPLES / t.file), t.class_name)


def _optuna_process(key: str, storage: str, seed: int, deadline: float, data: Data, folder: str) -> None:
    """One of the study's processes: trials until the deadline, each saving its parameters for the test."""
    template = next(t for t in TEMPLATES if t.key == key)
    cls = _template(key)
    config = cls.get_knob_config()
    loaded: dict[str, Any] = {}

    def load_once(path: str, load: Callable[[], Any]) -> Any:
        if path not in loaded:
            loaded[path] = load()
        return loaded[path]

    def objective(trial: optuna.Trial) -> float:
        knobs = trial_knobs(config, optuna_knobs(trial, searchable_knobs(config)))
        model = cls(**knobs)
        context = TrialContext(data_loader=load_once)
        timer = threading.Timer(max(0.0, deadline - time.time()), context.request_stop, ("the time budget ended",))
        timer.start()
        try:
            with trial_context(context):
                model.train(data.paths[template.split]["train"], seed=trial.number)
                trial.set_user_attr("stopped", context.should_stop)
                score = model.evaluate(data.paths[template.split]["val"])
                params = params_to_bytes(model.dump_parameters())
        finally:
            timer.cancel()
        (Path(folder) / f"{key}-{trial.number}.params").write_bytes(params)
        trial.set_user_attr("knobs", knobs)
        return score

    study = optuna.load_study(study_name=key, storage=_storage(storage), sampler=optuna.samplers.TPESampler(seed=seed))
    study.optimize(objective, timeout=max(0.0, deadline - time.time()), catch=(Exception,))


def _storage(path: str) -> optuna.storages.JournalStorage:
    return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(path))


def run_optuna(
    data: Data, args: argparse.Namespace, folder: Path, templates: tuple[Template, ...] = TEMPLATES, seed: int = 0
) -> Way:
    """The Optuna way: one study per template, SLOTS processes (shared round-robin between the templates), the
    deadline honoured as Baobab's driver does. Process i's sampler is seeded ``seed * SLOTS + i``."""
    started = time.perf_counter()
    storage = str(folder / "optuna.journal")
    for t in templates:
        optuna.create_study(study_name=t.key, storage=_storage(storage), direction="maximize")
    threads = max(1, len(os.sched_getaffinity(0)) // args.slots)
    with ProcessPoolExecutor(
        args.slots, mp_context=get_context("spawn"), initializer=_setup, initargs=(threads,)
    ) as pool:
        for _ in range(args.slots):
            pool.submit(_ready).result()
        start = time.time()
        deadline = start + 60 * args.minutes
        futures = [
            pool.submit(
                _optuna_process,
                templates[i % len(templates)].key,
                storage,
                seed * args.slots + i,
                deadline,
                data,
                str(folder),
            )
            for i in range(args.slots)
        ]
        for future in futures:
            future.result()
    trials, best = [], None
    for t in templates:
        for trial in optuna.load_study(study_name=t.key, storage=_storage(storage)).trials:
            done = trial.state == optuna.trial.TrialState.COMPLETE
            status = ("STOPPED" if trial.user_attrs.get("stopped") else "COMPLETED") if done else trial.state.name
            end = None if trial.datetime_complete is None else trial.datetime_complete.timestamp() - start
            trials.append(Trial(t.key, status, trial.value if done else None, end))
            if done and (
                best is None or (status == "COMPLETED", trial.value) > (best[1] == "COMPLETED", best[2].value)
            ):
                best = (t, status, trial)
    if best is None:
        raise SystemExit("optuna: no trial was scored: nothing to test")
    template, status, trial = best
    model = _template(template.key)(**trial.user_attrs["knobs"])
    model.load_parameters(params_from_bytes((folder / f"{template.key}-{trial.number}.params").read_bytes()))
    test = read_image_files(data.paths["images"]["test"])
    correct = accuracy(model.predict(data.queries(template, test.images)), test.labels)
    what = (
        f"trial {trial.number} of the {template.key} study ({status}, validation {trial.value:.4f}): its saved "
        "parameters loaded into a fresh model, whose predict() answered the test queries"
    )
    last = max((t.end_s for t in trials if t.end_s is not None), default=0.0)
    wall = time.perf_counter() - started
    return Way("optuna", f"TPESampler, {args.slots} processes", trials, what, correct / len(test.labels), last, wall)


# -- the report ----------------------------------------------------------------------------------


def aims(ways: list[Way]) -> list[str]:
    """The issue's aims for Baobab with fusion, each with the figures it was judged on."""
    by_name = {w.name: w for w in ways}
    fused = by_name.get("baobab-fusion")
    if fused is None:
        return ["The aims concern Baobab with fusion, which this run left out."]
    others = [w for w in ways if w is not fused]
    lines = []
    if others:
        counts = ", ".join(f"{w.name} {w.count('COMPLETED')}" for w in others)
        held = all(fused.count("COMPLETED") > w.count("COMPLETED") for w in others)
        lines.append(
            f"More trials completed than the others: {'held' if held else 'not held'} "
            f"(baobab-fusion {fused.count('COMPLETED')}; {counts})."
        )
        tests = ", ".join(f"{w.name} {w.test_accuracy:.4f}" for w in others)
        held = all(fused.test_accuracy > w.test_accuracy for w in others)
        lines.append(
            f"Higher test accuracy than the others: {'held' if held else 'not held'} "
            f"(baobab-fusion {fused.test_accuracy:.4f}; {tests})."
        )
    held = fused.test_accuracy >= 0.90
    lines.append(f"Test accuracy at least 0.90: {'held' if held else 'not held'} ({fused.test_accuracy:.4f}).")
    return lines


def results_table(ways: list[Way]) -> str:
    lines = [
        "| way | setting | completed (mlp, cnn) | stopped at the deadline | errored or other | fused trials "
        "| best validation (template) | test accuracy | last trial ended | way's wall time |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for w in ways:
        per = ", ".join(str(w.count("COMPLETED", template=t.key)) for t in TEMPLATES)
        other = len(w.trials) - w.count(*SCORED)
        fused = sum(t.fused > 1 for t in w.trials) if w.name != "optuna" else "-"
        score, template = w.best
        lines.append(
            f"| {w.name} | `{w.setting}` | {w.count('COMPLETED')} ({per}) | {w.count('STOPPED')} | {other} | {fused} "
            f"| {score:.4f} ({template}) | **{w.test_accuracy:.4f}** | {w.last_end_s / 60:.1f} min "
            f"| {w.wall_s / 60:.1f} min |"
        )
    return "\n".join(lines)


def marks(minutes: float) -> np.ndarray:
    """Seconds at which the best-so-far table reads each way: five even marks up to the budget."""
    return np.linspace(60 * minutes / 5, 60 * minutes, 5)


def curve_table(ways: list[Way], minutes: float) -> str:
    times = marks(minutes)
    head = ["way", *(f"{s / 60:.1f} min" for s in times)]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * len(times)]
    for w in ways:
        cells = ["-" if np.isnan(v) else f"{v:.4f}" for v in w.best_by(times)]
        lines.append(f"| {w.name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(ways: list[Way], minutes: float, path: Path) -> None:
    grid = np.linspace(0, 60 * minutes + 60, 600)
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    floor = []
    for w in ways:
        best = w.best_by(grid)
        ax.step(grid / 60, best, where="post", label=f"{w.name} ({w.count('COMPLETED')} completed)")
        floor += [v for v in best if not np.isnan(v)][:1]
    ax.axvline(minutes, color="grey", linestyle=":", linewidth=1)
    if floor:
        ax.set_ylim(max(0.0, min(floor) - 0.02), None)
    ax.set_xlabel("minutes from the start of the search")
    ax.set_ylabel("best validation accuracy so far")
    ax.set_title(f"Fashion-MNIST, MLP and CNN templates, {minutes:g} minutes a way")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_report(ways: list[Way], args: argparse.Namespace, data: Data, meta: dict[str, Any]) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    payload = {**meta, "ways": [dataclasses.asdict(w) for w in ways], "aims": aims(ways)}
    (args.out / "automl_budget.json").write_text(json.dumps(payload, indent=2) + "\n")
    plot(ways, args.minutes, args.out / "automl_budget.png")
    served = "\n".join(f"- **{w.name}**: {w.served}." for w in ways)
    report = f"""# A time-budgeted AutoML job on Fashion-MNIST: Baobab with and without fusion, and Optuna

Written by `bench/automl_budget.py` (`make bench-automl-budget`) on {meta["date"]}, {meta["cores"]} cores
({platform.machine()}, Python {platform.python_version()}, PyTorch {torch.__version__}, Optuna {optuna.__version__}),
CPU only, at niceness {meta["niceness"]}, other work running beside it (load average {meta["setup"]["load_start"]:.1f}
at the start, {meta["setup"]["load_end"]:.1f} at the end); {meta["setup"]["minutes"]:.1f} minutes in all.

Budget: **{args.minutes:g} minutes of search a way**, the ways one after another; {args.slots} trial slots
(processes) in each, {meta["threads"]} torch thread(s) per trial. Data: Fashion-MNIST from Debian's
`dataset-fashion-mnist`, {data.train_rows:,} images to train and {data.val_rows:,} to validate (the
training set's {data.train_rows + data.val_rows:,}), the test set's {meta["test_rows"]:,} for the served model.
Templates: `examples/models/torch_mlp.py` (on the pixels as a TABULAR CSV) and
`examples/models/torch_cnn.py` (on the images), each searched over its knob config with policies off.

- **baobab-fusion** and **baobab-off**: `baobab up --workers {args.slots}` in a fresh home, two train jobs created
  at once (one per template, as a job has one task) with `TIME_HOURS` = the budget, `GPU_COUNT` 0, the
  driver's default strategy (`auto`) and the job's `options` as in the setting column; the platform
  shares its slots between the two jobs and asks trials still running at the deadline to stop.
- **optuna**: a study per template (default `TPESampler`) on a journal file, {args.slots} processes (half
  the slots for each template, as the driver splits them), each calling the template's `train()` and
  `evaluate()` and saving its parameters; a process loads a dataset once for all its trials; no trial
  starts after the deadline, and one running then is asked to stop through its trial context, as the
  platform does.

Completed trials trained all their epochs; stopped ones were stopped at the deadline and scored
as they were. Times are from the first train job's start (Baobab) or from the moment the Optuna
processes were ready (after importing torch; Baobab's workers also start before the jobs).

## Results

{results_table(ways)}

Best validation accuracy so far, read at five marks of the budget:

{curve_table(ways, args.minutes)}

![best validation accuracy against minutes](automl_budget.png)

The served model, in each way the best completed trial over both templates by validation accuracy
(a stopped one only where none completed), tested on the {meta["test_rows"]:,} test images:

{served}

## The aims

{chr(10).join(f"- {line}" for line in aims(ways))}

## What the setup favours

- The Baobab ways other than `baobab-cold` warm-start by default: a trial may start from the weights of
  an earlier trial of the same job (or the zoo), while every Optuna trial and every `baobab-cold` trial
  trains from scratch. `baobab-off` against `baobab-cold` is what warm start adds.
- The Baobab ways pay the platform: the job driver, a trial row and a worker process per trial,
  parameters written to the artifact store, and data uploaded and decoded by the platform; the Optuna
  processes call the templates directly. Data loading is shared in both: Baobab's workers map each
  decoded dataset from one shared cache, each Optuna process keeps its own copy in memory.
- Baobab does not start a trial that would not end before the deadline (at the median duration of the
  job's finished trials); Optuna starts trials until the deadline, which then stop early and are
  counted as stopped, not completed.
- A fused group's members share their first member's structure (the driver pins its knobs other
  than float ones and the epochs on the others' proposals), so the search tries several learning
  rates, decays and dropouts of one network at once; under `"auto"` the first trial of each structure
  also spends up to 10 s measuring where fusing pays before it trains.
- The validation set is the same for all ways, so the servable trial is picked on the same data; the
  test set is read only once, by the served model.

{setup_markdown(meta["setup"])}
"""
    (args.out / "automl_budget.md").write_text(report)
    print(report)


def _fusion(value: str) -> Any:
    """``auto``, ``off``, a group size K (``{"max_group": K}``) or the JSON object itself."""
    if value in ("auto", "off"):
        return value
    if value.isdigit():
        return {"max_group": int(value)}
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        raise argparse.ArgumentTypeError(f'expected auto, off, a number or {{"max_group": K}}, got {value!r}') from None


def choices(known: tuple[str, ...], what: str) -> Callable[[str], list[str]]:
    """An argument type: a comma-separated list of some of ``known`` (``what`` names them in the error)."""

    def parse(value: str) -> list[str]:
        chosen = [v for v in value.split(",") if v]
        unknown = sorted(set(chosen) - set(known))
        if unknown or not chosen:
            raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(unknown)}; known: {', '.join(known)}")
        return chosen

    return parse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=15.0, help="the search budget of each way (default 15)")
    parser.add_argument(
        "--ways", type=choices(WAYS, "ways"), default=list(WAYS), help=f"comma-separated, of {', '.join(WAYS)}"
    )
    parser.add_argument(
        "--fusion",
        type=_fusion,
        default="auto",
        help='the job option fusion of baobab-fusion: auto, off, K or {"max_group": K}',
    )
    parser.add_argument(
        "--slots",
        type=int,
        default=len(os.sched_getaffinity(0)),
        help="trials at once in each way (default: usable cores)",
    )
    parser.add_argument("--images", type=int, default=None, help="train + validation images (default: all 60,000)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"where the report goes (default {RESULTS})")
    args = parser.parse_args()
    if args.slots < 1 or args.minutes <= 0:
        parser.error("--slots must be at least 1 and --minutes above 0")
    setup = run_setup(args)
    ways: list[Way] = []
    with tempfile.TemporaryDirectory(prefix="baobab-bench-automl-") as tmp:
        folder = Path(tmp)
        print("building Fashion-MNIST (images and the pixels as CSV)", flush=True)
        csv = build_datasets(folder, args.images)
        images = {name: str(folder / "images" / f"{name}.zip") for name in ("train", "val", "test")}
        rows = {name: len(read_image_files(path).labels) for name, path in images.items()}
        data = Data({"csv": {k: str(v) for k, v in csv.items()}, "images": images}, rows["train"], rows["val"])
        for name in args.ways:
            print(f"{name}: {args.minutes:g} minutes", flush=True)
            if name == "optuna":
                (folder / name).mkdir()
                way = run_optuna(data, args, folder / name)
            else:
                options = {"fusion": args.fusion if name == "baobab-fusion" else "off"}
                if name == "baobab-cold":
                    options["warm_start"] = False
                way = run_baobab(name, options, data, args, folder)
            ways.append(way)
            print(f"{name}: {progress(way)}", flush=True)
    meta = {
        **run_meta(args),
        "fusion": args.fusion,
        "train_rows": data.train_rows,
        "val_rows": data.val_rows,
        "test_rows": rows["test"],
        "setup": setup.finish(),
    }
    write_report(ways, args, data, meta)


def progress(way: Way) -> str:
    """A way's outcome in a line, for the log."""
    score, template = way.best
    return (
        f"{way.count('COMPLETED')} completed, {way.count('STOPPED')} stopped, best validation {score:.4f} "
        f"({template}), test accuracy {way.test_accuracy:.4f}"
    )


def run_meta(args: argparse.Namespace) -> dict[str, Any]:
    """What the JSON records of the run besides its ways: the date, the machine, the budget and versions."""
    return {
        "date": datetime.date.today().isoformat(),
        "cores": len(os.sched_getaffinity(0)),
        "slots": args.slots,
        "threads": max(1, len(os.sched_getaffinity(0)) // args.slots),
        "budget_minutes": args.minutes,
        "torch": torch.__version__,
        "optuna": optuna.__version__,
        "niceness": os.nice(0),
    }


def run_setup(args: argparse.Namespace) -> RunSetup:
    """The record of the ways run: fusion and warm start way by way, and what the setup favours."""
    fusion = {"baobab-fusion": args.fusion, "baobab-off": "off", "baobab-cold": "off", "optuna": "not applicable"}
    warm = {"baobab-fusion": "on", "baobab-off": "on", "baobab-cold": "off", "optuna": "off (from scratch)"}
    favours = []
    if {"baobab-fusion", "baobab-off"} & set(args.ways) and "optuna" in args.ways:
        favours.append(
            "Baobab: its trials warm-start from earlier trials of the job and the zoo by default, while Optuna "
            "trains each from scratch"
            + (" (the baobab-cold way shows what warm start adds)" if "baobab-cold" in args.ways else "")
        )
    if "optuna" in args.ways:
        favours.append("Optuna: it calls the templates directly, while Baobab pays its driver, trial rows and store")
    return RunSetup(
        "; ".join(favours) or "nothing beyond the ways' own settings: Baobab ways alone, same budget, slots, data",
        fusion={way: fusion[way] for way in args.ways},
        warm_start={way: warm[way] for way in args.ways},
    )


if __name__ == "__main__":
    main()
