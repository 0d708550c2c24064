"""Warm starting from the model zoo, against training from scratch, on Fashion-MNIST; and parent selection at scale.

Part 1, warm start, in two cases. Each child is trained twice from the same seed with the
example template ``TorchCnn`` (``examples/models/torch_cnn.py``) on Fashion-MNIST subsets
(Debian's ``dataset-fashion-mnist``, through ``baobab.store.build_fashion_mnist``): once
from scratch and once warm-started from a zoo (``baobab.zoo.DbZoo`` on a SQLite file and
a local artifact store, through the platform's ``TrialContext.warm_starter``: its own code
path without the HTTP hop). The parents are a first job of narrow and shallow CNNs,
trained cold.

- Another task, what a zoo is for: the parents learn classes 0-4 on one half of the
  images; the children learn classes 5-9 (relabelled 0-4) on the other half, and do not
  join the zoo. The parents' training cost is reported beside the ratios. A child of all
  ten classes (a wider head) is offered to the zoo too, which refuses it: parents must
  have the child's input and output shapes.
- The same task: parents and children train on the same split of the same data, and each
  warm child joins the zoo. A parent has already learnt the child's task, so this is the
  case most favourable to the zoo: what a job gains from its own earlier trials.

For each child the report gives the epochs and the training CPU seconds to reach the
target, 98% of the validation accuracy the cold run ends with (CPU time of the process,
paused during the validation passes that measure it: the machines this runs on are
shared, and wall time would carry other jobs' load; epochs are the sturdier figure),
the validation accuracy at equal epochs, and the final test accuracy.

Part 2, selection. A zoo of 1,000 synthetic ResNet graphs (``baobab.zoo._synthetic``:
1 to 3 basic blocks per stage, four stages, base widths 32 to 96, every structure
distinct; ResNet-18 has 11.7 M parameters) in the metadata database; the time
``baobab.zoo.choose_parent`` takes to choose for a ResNet-18, the first time (graphs
read from the database and their features computed) and then with the per-process
feature cache, against scoring every candidate without the bounds, vectorised or pair
by pair.

    .venv/bin/python bench/warm_start.py            # the full run: about 10 minutes on 2 idle cores
    .venv/bin/python bench/warm_start.py --quick    # a smaller one, about 3 minutes
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from setup_record import RunSetup, setup_markdown
from sqlalchemy import insert

from baobab.model import InterimMetric, Task, TrialContext, load_template, trial_context
from baobab.store import (
    ArtifactStore,
    ModelAccess,
    User,
    UserRole,
    ZooModel,
    build_fashion_mnist,
    create_engine_from_url,
    read_image_files,
    session_scope,
    upgrade_database,
    write_image_files,
)
from baobab.zoo import (
    DbZoo,
    FeatureCache,
    SelectionPolicy,
    choose_parent,
    make_warm_starter,
    match_graphs,
    register_module,
    similarities,
    warm_start_module,
)
from baobab.zoo._matching import features
from baobab.zoo._synthetic import resnet_graph, synthetic_zoo

HERE = Path(__file__).parent
TEMPLATE = HERE.parent / "examples" / "models" / "torch_cnn.py"
RESULTS = HERE / "results"
TASK = Task.IMAGE_CLASSIFICATION
TARGET_FRACTION = 0.98
#: A fifth of the images for validation: the target is read on it after every epoch, and a small set is noisy.
VAL_FRACTION = 0.2
#: (channels, depth): the first job, then the later ones (other widths and depths).
FIRST_JOB = [(8, 1), (16, 2)]
LATER_JOBS = [[(24, 2), (12, 1)], [(16, 3), (32, 2)], [(24, 3), (12, 2)]]
#: The children of parents trained on another task: wider, narrower and deeper than the parents.
OTHER_TASK_CHILDREN = [(12, 1), (24, 2), (16, 3), (12, 2)]
KNOBS = {"learning_rate": 2e-3, "kernel_size": 3, "dropout": 0.1, "batch_size": 64}


@dataclass
class Run:
    """One training: accuracy on the validation set against training seconds, and the test accuracy."""

    channels: int
    depth: int
    warm: bool
    curve: list[tuple[float, float]] = field(default_factory=list)  # (seconds, validation accuracy)
    test_accuracy: float = 0.0
    parent: int | None = None
    similarity: float | None = None
    transferred: float | None = None

    def time_to(self, target: float) -> float | None:
        return next((t for t, acc in self.curve if acc >= target), None)

    def epochs_to(self, target: float) -> int | None:
        """Epochs trained when the target was first reached (0: before training)."""
        return next((epoch for epoch, (_, acc) in enumerate(self.curve) if acc >= target), None)


class _Clock:
    """Training CPU seconds: running from the module's build, paused while the probe measures accuracy.

    CPU time of this process (both threads), not wall time: the machines this runs on
    are shared, and another job's load would otherwise land on whichever run it overlaps.
    """

    def __init__(self) -> None:
        self.started = 0.0
        self.paused = 0.0

    def start(self) -> None:
        self.started, self.paused = time.process_time(), 0.0

    def seconds(self) -> float:
        return time.process_time() - self.started - self.paused


class _Probe:
    """A context sink that records validation accuracy after each epoch, off the clock."""

    def __init__(self, run: Run, clock: _Clock, val: tuple[torch.Tensor, torch.Tensor]) -> None:
        self.run, self.clock, self.val = run, clock, val
        self.model: Any = None

    def measure(self) -> None:
        now = self.clock.seconds()
        paused = time.process_time()
        module = self.model.module
        outputs = self.model._forward(module, self.val[0])
        self.run.curve.append((now, float((outputs.argmax(1) == self.val[1]).float().mean())))
        self.clock.paused += time.process_time() - paused

    def on_report(self, metric: InterimMetric) -> bool:
        self.measure()
        return False

    def on_log(self, message: str) -> None:
        pass


def _bench_class(clock: _Clock, probe: _Probe) -> type:
    """TorchCnn, with data decoded once per file and the clock and probe hooked in."""
    base = load_template(str(TEMPLATE), "TorchCnn")
    cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    class BenchCnn(base):  # type: ignore[misc, valid-type]
        def load_data(self, dataset_path: str) -> tuple[np.ndarray, np.ndarray]:
            if dataset_path not in cache:
                cache[dataset_path] = super().load_data(dataset_path)
            return cache[dataset_path]

        def build_module(self, downscale: bool) -> torch.nn.Module:
            module = super().build_module(downscale)
            clock.start()  # the warm start (trace, choice, transfer) counts as training time
            return module

        def fit_module(self, module: torch.nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> None:
            probe.measure()  # the accuracy the training starts from

    return BenchCnn


def train_one(
    data: dict[str, str], val: tuple[torch.Tensor, torch.Tensor], channels: int, depth: int, epochs: int, seed: int,
    zoo: DbZoo | None,
) -> tuple[Run, Any]:  # fmt: skip
    run = Run(channels, depth, warm=zoo is not None)
    clock = _Clock()
    probe = _Probe(run, clock, val)
    model = _bench_class(clock, probe)(channels=channels, depth=depth, epochs=epochs, **KNOBS)
    probe.model = model
    starter = None
    if zoo is not None:
        platform_starter = make_warm_starter(zoo, task=TASK, seed=seed)

        def starter(module: torch.nn.Module, example: torch.Tensor) -> Any:
            result = platform_starter(module, example)
            if result is not None:
                run.parent, run.similarity, run.transferred = (
                    result.zoo_model_id, result.similarity, result.transferred_share,
                )  # fmt: skip
            return result

    context = TrialContext(sink=probe, warm_starter=starter)
    with trial_context(context):
        model.train(data["train"], seed=seed)
    run.test_accuracy = model.evaluate(data["test"])
    return run, model


def _val_tensors(path: str) -> tuple[torch.Tensor, torch.Tensor]:
    images = read_image_files(path)
    template = load_template(str(TEMPLATE), "TorchCnn")(channels=8, depth=1)
    return template.preprocess(images.images), torch.from_numpy(np.array(images.labels, dtype=np.int64))


def _zoo(folder: Path, name: str) -> tuple[Any, DbZoo]:
    url = f"sqlite:///{folder / f'{name}.db'}"
    upgrade_database(url)
    engine = create_engine_from_url(url)
    return engine, DbZoo(engine, ArtifactStore(folder / f"{name}-artifacts"), owner_id=_user(engine))


def train_parents(
    data: dict[str, str], val: tuple[torch.Tensor, torch.Tensor], epochs: int, seed: int, zoo: DbZoo, label: str
) -> list[Run]:
    """The first job: cold trainings that fill the zoo."""
    parents = []
    for channels, depth in FIRST_JOB:
        run, model = train_one(data, val, channels, depth, epochs, seed, None)
        register_module(
            zoo, model.module, val[0][:2], score=run.curve[-1][1], task=TASK, name=f"{label} c{channels} d{depth}"
        )
        parents.append(run)
        print(f"{label}: c{channels} d{depth}: test accuracy {run.test_accuracy:.3f}", flush=True)
    return parents


def compare(cold: Run, warm: Run, **where: Any) -> dict[str, Any]:
    """One child trained cold and warm: time and epochs to the target, and accuracy at equal epochs."""
    target = TARGET_FRACTION * cold.curve[-1][1]
    cold_t, warm_t = cold.time_to(target), warm.time_to(target)
    row = {
        **where, "channels": cold.channels, "depth": cold.depth, "target": target,
        "cold_seconds": cold_t, "warm_seconds": warm_t,
        "cold_epochs": cold.epochs_to(target), "warm_epochs": warm.epochs_to(target),
        "speedup": None if not cold_t or warm_t is None else cold_t / max(warm_t, 1e-9),
        "cold_total_seconds": cold.curve[-1][0], "warm_total_seconds": warm.curve[-1][0],
        "cold_val_by_epoch": [acc for _, acc in cold.curve], "warm_val_by_epoch": [acc for _, acc in warm.curve],
        "cold_test_accuracy": cold.test_accuracy, "warm_test_accuracy": warm.test_accuracy,
        "parent": warm.parent, "similarity": warm.similarity, "transferred": warm.transferred,
    }  # fmt: skip
    print(
        f"{where}: c{cold.channels} d{cold.depth}: to {target:.3f}: cold {_s(cold_t)} s / {_e(row['cold_epochs'])} "
        f"epochs, warm {_s(warm_t)} s / {_e(row['warm_epochs'])} epochs (parent {warm.parent}, similarity "
        f"{warm.similarity}); validation at epoch 0/1: {cold.curve[0][1]:.3f}/{cold.curve[1][1]:.3f} cold, "
        f"{warm.curve[0][1]:.3f}/{warm.curve[1][1]:.3f} warm; test {cold.test_accuracy:.3f} / {warm.test_accuracy:.3f}",
        flush=True,
    )
    return row


def summarise(rows: list[dict[str, Any]], parents: list[Run], images: int) -> dict[str, Any]:
    """Ratios over all children, with the parents' training left out and then counted."""
    both = [r for r in rows if r["cold_seconds"] is not None and r["warm_seconds"] is not None]
    speedups = [r["speedup"] for r in rows if r["speedup"] is not None]
    cold_s, warm_s = sum(r["cold_seconds"] for r in both), sum(r["warm_seconds"] for r in both)
    parents_s = sum(p.curve[-1][0] for p in parents)
    epochs = len(rows[0]["cold_val_by_epoch"]) - 1

    def mean_val(key: str, epoch: int) -> float:
        return statistics.fmean(r[key][epoch] for r in rows)

    saved = (cold_s - warm_s) / max(len(both), 1)
    return {
        "child_count": len(rows),
        "parents": [asdict(p) for p in parents],
        "parent_train_images": images,
        "parents_seconds": parents_s,
        "parents_epochs": sum(len(p.curve) - 1 for p in parents),
        "total_speedup": cold_s / max(warm_s, 1e-9),
        "total_speedup_parents_counted": cold_s / max(warm_s + parents_s, 1e-9),
        "children_to_repay_parents": parents_s / saved if saved > 0 else None,
        "epoch_speedup": sum(r["cold_epochs"] for r in both) / max(sum(r["warm_epochs"] for r in both), 1),
        "geomean_speedup": float(np.exp(np.mean(np.log(speedups)))) if speedups else None,
        "warm_not_reached": sum(1 for r in rows if r["warm_seconds"] is None),
        "warm_at_target_before_training": sum(1 for r in rows if r["warm_epochs"] == 0),
        "mean_val_by_epoch_cold": [mean_val("cold_val_by_epoch", e) for e in range(epochs + 1)],
        "mean_val_by_epoch_warm": [mean_val("warm_val_by_epoch", e) for e in range(epochs + 1)],
        "mean_test_accuracy_cold": statistics.fmean(r["cold_test_accuracy"] for r in rows),
        "mean_test_accuracy_warm": statistics.fmean(r["warm_test_accuracy"] for r in rows),
    }


def part_same_task(folder: Path, limit: int, epochs: int, seed: int) -> dict[str, Any]:
    """A zoo of one task: parents and children train on the same split of the same data; children join the zoo."""
    built = build_fashion_mnist(folder / "data", limit=limit, val_fraction=VAL_FRACTION, seed=seed)
    data = {split.name: str(split.path) for split in built.splits}
    val = _val_tensors(data["val"])
    engine, zoo = _zoo(folder, "same-task")
    parents = train_parents(data, val, epochs, seed, zoo, "same task, job 1")
    rows: list[dict[str, Any]] = []
    for number, job in enumerate(LATER_JOBS, start=2):
        for channels, depth in job:
            cold, _ = train_one(data, val, channels, depth, epochs, seed, None)
            warm, model = train_one(data, val, channels, depth, epochs, seed, zoo)
            register_module(
                zoo,
                model.module,
                val[0][:2],
                score=warm.curve[-1][1],
                task=TASK,
                name=f"job{number} c{channels} d{depth}",
            )
            rows.append(compare(cold, warm, job=number))
    engine.dispose()
    train_images = len(read_image_files(data["train"]).labels)
    return {"limit": limit, "epochs": epochs, "train_images": train_images, "later": rows,
            **summarise(rows, parents, train_images)}  # fmt: skip


def _class_split(
    folder: Path, name: str, splits: dict[str, tuple[np.ndarray, np.ndarray]], classes: range, offset: int
) -> dict[str, str]:
    """The images of ``classes`` in each split, labels shifted down by ``offset``, written as IMAGE_FILES zips."""
    data = {}
    for split, (images, labels) in splits.items():
        keep = np.isin(labels, list(classes))
        data[split] = str(write_image_files(folder / f"{name}-{split}.zip", images[keep], labels[keep] - offset))
    return data


def part_other_task(folder: Path, limit: int, epochs: int, seed: int) -> dict[str, Any]:
    """Parents trained on other images of other classes: the transfer the zoo is for.

    Twice ``limit`` images are drawn and each split is cut in two halves of the same
    class mix. The parents learn classes 0-4 (T-shirt, trouser, pullover, dress, coat)
    on the first half; the children learn, on the second half, either classes 5-9
    (sandal, shirt, sneaker, bag, ankle boot) relabelled 0-4 (a head as wide as the
    parents') or all ten classes (a head twice as wide). No child image was seen by a
    parent, and children do not join the zoo, so every warm start comes from a parent
    of the other task.
    """
    built = build_fashion_mnist(folder / "pool", limit=2 * limit, val_fraction=VAL_FRACTION, seed=seed)
    halves: tuple[dict[str, tuple[np.ndarray, np.ndarray]], ...] = ({}, {})
    for split in built.splits:
        dataset = read_image_files(split.path)
        labels = np.asarray(dataset.labels)
        order = np.argsort(labels, kind="stable")
        for half, picked in zip(halves, (order[0::2], order[1::2]), strict=True):
            half[split.name] = (np.asarray(dataset.images)[picked], labels[picked])
    parent_data = _class_split(folder, "parents", halves[0], range(5), 0)
    parent_val = _val_tensors(parent_data["val"])
    engine, zoo = _zoo(folder, "other-task")
    parents = train_parents(parent_data, parent_val, epochs, seed, zoo, "other task, parents on classes 0-4")
    parent_images = len(read_image_files(parent_data["train"]).labels)
    data = _class_split(folder, "classes-5-9", halves[1], range(5, 10), 5)
    val = _val_tensors(data["val"])
    rows = []
    for channels, depth in OTHER_TASK_CHILDREN:
        cold, _ = train_one(data, val, channels, depth, epochs, seed, None)
        warm, _ = train_one(data, val, channels, depth, epochs, seed, zoo)
        rows.append(compare(cold, warm, child="classes 5-9"))
    ten_classes = _wider_head_refusal(zoo, val[0][:2], seed)
    print(f"all ten classes: {ten_classes}", flush=True)
    engine.dispose()
    train_images = len(read_image_files(data["train"]).labels)
    return {
        "limit": limit, "epochs": epochs, "train_images": train_images, "later": rows,
        **summarise(rows, parents, parent_images), "all_ten_classes": ten_classes,
    }  # fmt: skip


def _wider_head_refusal(zoo: DbZoo, example: torch.Tensor, seed: int) -> dict[str, Any]:
    """What the zoo offers a child of all ten classes (a head twice as wide as the parents'), without training it.

    The zoo only offers parents of the child's input and output shapes, so it has
    nothing for this child: it would train cold, and training it twice would measure
    nothing more.
    """
    channels, depth = OTHER_TASK_CHILDREN[0]
    model = load_template(str(TEMPLATE), "TorchCnn")(channels=channels, depth=depth, **KNOBS)
    model.input_shape, model.output_size = tuple(example.shape[1:]), 10
    reasons: list[str] = []
    result = warm_start_module(zoo, model.build_module(False), example, task=TASK, seed=seed, log=reasons.append)
    return {
        "channels": channels, "depth": depth,
        "parent": None if result is None else result.zoo_model_id, "reason": "; ".join(reasons),
    }  # fmt: skip


def _user(engine: Any) -> int:
    with session_scope(engine) as session:
        user = User(email="bench@example.com", password_hash="-", role=UserRole.MODEL_DEVELOPER)
        session.add(user)
        session.flush()
        return user.id


def part_selection(folder: Path, count: int, repeats: int) -> dict[str, Any]:
    url = f"sqlite:///{folder / 'selection.db'}"
    upgrade_database(url)
    engine = create_engine_from_url(url)
    owner = _user(engine)
    zoo = synthetic_zoo(count, seed=1)
    rows = [
        {
            "owner_id": owner, "access": ModelAccess.PRIVATE, "task": TASK, "name": f"resnet {i}", "score": score,
            "graph": graph.dumps(), "signature": graph.signature, "fingerprint": graph.fingerprint,
            "io_signature": graph.io_signature,
            "traced": True, "node_count": len(graph), "param_count": graph.param_count,
            "params_path": f"zoo/{i}.safetensors", "owns_params": True, "size_bytes": 4 * graph.param_count,
            "times_chosen": 0, "created_at": datetime.datetime.now(datetime.UTC),
        }
        for i, (graph, score) in enumerate(zoo)
    ]  # fmt: skip
    with session_scope(engine) as session:
        session.execute(insert(ZooModel), rows)
    child = resnet_graph()  # ResNet-18
    every = SelectionPolicy(low_accuracy_margin=1.0)  # no accuracy cut: all 1,000 are candidates
    cache = FeatureCache()
    started = time.perf_counter()
    first = choose_parent(engine, child, task=TASK, owner_id=owner, cache=cache, policy=every)
    cold = time.perf_counter() - started
    warm_times = []
    for _ in range(repeats):
        started = time.perf_counter()
        again = choose_parent(engine, child, task=TASK, owner_id=owner, cache=cache, policy=every)
        warm_times.append(time.perf_counter() - started)
    assert again.parent_id == first.parent_id
    started = time.perf_counter()
    default = choose_parent(engine, child, task=TASK, owner_id=owner, cache=FeatureCache())
    default_cold = time.perf_counter() - started
    feats = [features(graph) for graph, _ in zoo]
    child_features = features(child)
    started = time.perf_counter()
    all_similarities = similarities(child_features, feats)
    vectorised = time.perf_counter() - started
    sample = 50
    started = time.perf_counter()
    for graph, _ in zoo[:sample]:
        match_graphs(graph, child)
    pairwise = (time.perf_counter() - started) / sample * count
    best_bucket = max(min(9, int(s * 10)) for s in all_similarities)
    engine.dispose()
    return {
        "models": count,
        "structures": len({g.fingerprint for g, _ in zoo}),
        "mean_nodes": float(np.mean([len(g) for g, _ in zoo])),
        "mean_params_m": float(np.mean([g.param_count for g, _ in zoo]) / 1e6),
        "child": "ResNet-18 (11.7 M parameters, 73 operations)",
        "parent": first.parent_id,
        "similarity": first.similarity,
        "scored": first.scored,
        "best_bucket": best_bucket,
        "candidates": first.candidates,
        "cold_seconds": cold,
        "default_policy_candidates": default.candidates,
        "default_policy_cold_seconds": default_cold,
        "warm_seconds_median": statistics.median(warm_times),
        "every_candidate_vectorised_seconds": vectorised,
        "every_candidate_pairwise_seconds_estimated": pairwise,
    }


def write_report(result: dict[str, Any]) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "warm_start.json").write_text(json.dumps(result, indent=2) + "\n")
    same, other, sel = result["same_task"], result["other_task"], result["selection"]
    lines = [
        "# Warm start from the model zoo",
        "",
        f"`bench/warm_start.py`, {result['date']}, {result['machine']}; the machine was shared with other "
        "engineers' test runs, so the epochs are the figures to trust, and the CPU seconds (training time of this "
        "process: build, warm start, epochs; not the validation passes that measure it) come second. "
        "`TorchCnn` (examples), Adam at 2e-3, batch 64, on Fashion-MNIST subsets "
        f"(Debian's `dataset-fashion-mnist`; {1 - VAL_FRACTION:.0%} train, {VAL_FRACTION:.0%} validation, a test "
        "set in proportion). Every child is trained twice from the same seed, from scratch (cold) and warm-started "
        "from the zoo by the platform's own code (`make_warm_starter`, `DbZoo` on SQLite). Target: 98% of the "
        "validation accuracy the cold run ends with; epochs to target are those trained when it was first reached "
        "(0: before any training). Parents: "
        + ", ".join(f"{c} channels × depth {d}" for c, d in FIRST_JOB)
        + ", trained cold, as a first job would.",
        "",
        "## Parents trained on another task (what the zoo is for)",
        "",
        f"From {other['limit']} × 2 images, {other['epochs']} epochs per training. "
        "The parents learn classes 0-4 (T-shirt, trouser, pullover, dress, coat) from "
        f"{other['parent_train_images']} training images. The children learn classes 5-9 (sandal, shirt, sneaker, "
        f"bag, ankle boot), relabelled 0-4 (a head as wide as the parents'), from {other['train_images']} other "
        "images: no child image was seen by a parent. Children do not join the zoo, so every warm start comes "
        "from a parent of the other task. The parents' training is a cost the warm children depend on; it is "
        "given beside the ratios and counted in one of them (in full, against only these children: the least "
        "favourable count; a real zoo shares it among all the jobs that use it).",
        "",
        *_table(other["later"]),
        "",
        *_summary(other, parents_counted=True),
        _ten_classes(other["all_ten_classes"]),
        "",
    ]
    lines += [
        "## A zoo of the same task (same data for parent and child)",
        "",
        f"From {same['limit']} images, {same['epochs']} epochs per training. "
        f"The parents and every child train on the same {same['train_images']} images of all ten classes (the same "
        "split of the same data), in jobs of other widths and depths; each warm child joins the zoo and may be a "
        "later child's parent. This is the case most favourable to the zoo: a parent has already learnt the "
        f"child's task, and {same['warm_at_target_before_training']} of {same['child_count']} warm children are "
        "at the target before any training. It measures what a job gains from its own earlier trials (or a "
        "rerun on the same data), not transfer.",
        "",
        *_table(same["later"], job=True),
        "",
        *_summary(same, parents_counted=False),
        "## Parent selection with 1,000 zoo models",
        "",
        f"{sel['models']} synthetic ResNet graphs in the zoo's SQLite table ({sel['structures']} distinct "
        f"structures, {sel['mean_nodes']:.0f} operations and {sel['mean_params_m']:.1f} M parameters on average); "
        f"the child is {sel['child']}.",
        "",
        "| how | seconds |",
        "|---|---:|",
        f"| `choose_parent`, first call (query, read the {sel['candidates']} candidates' signatures, features, "
        f"bounds, scoring, read the parent's graph, its mapping) | {sel['cold_seconds']:.3f} |",
        f"| `choose_parent`, features cached (the admin API keeps them per process) "
        f"| {sel['warm_seconds_median']:.3f} |",
        f"| scoring every candidate, vectorised over the zoo (no bounds) | "
        f"{sel['every_candidate_vectorised_seconds']:.3f} |",
        f"| scoring every candidate pair by pair (estimated from 50) | "
        f"{sel['every_candidate_pairwise_seconds_estimated']:.2f} |",
        "",
        f"With the default accuracy cut (10% below the best), {sel['default_policy_candidates']} of the "
        f"{sel['models']} are candidates and the first call takes {sel['default_policy_cold_seconds']:.3f} s. "
        f"Without it, the bounds left {sel['scored']} of {sel['structures']} structures to score "
        f"(the chosen parent, zoo model {sel['parent']}, has similarity {sel['similarity']:.3f}): what wins is "
        "computing each structure once, bounding by node-type counts before scoring, and scoring what is left "
        "in one vectorised programme.",
        "",
        setup_markdown(result["setup"]),
        "",
    ]
    (RESULTS / "warm_start.md").write_text("\n".join(lines))


def _ten_classes(attempt: dict[str, Any]) -> str:
    if attempt["parent"] is not None:
        return f"A child of all ten classes (a head twice as wide as the parents') got zoo model {attempt['parent']}."
    return (
        "A child of all ten classes (a head twice as wide as the parents') gets no parent and trains cold: the zoo "
        f'offers only parents of the child\'s input and output shapes (`io_signature`): "{attempt["reason"]}".'
    )


def _table(rows: list[dict[str, Any]], *, job: bool = False) -> list[str]:
    lines = [
        ("| job " if job else "")
        + "| channels × depth | parent (similarity, share carried) | target | cold epochs | warm epochs | cold s "
        "| warm s | val. acc. at start, cold / warm | after 1 epoch | test acc. cold / warm |",
        "|---" * (10 + job) + "|",
    ]
    for r in rows:
        parent = "-" if r["parent"] is None else f"{r['parent']} ({r['similarity']:.2f}, {r['transferred']:.0%})"
        cold, warm = r["cold_val_by_epoch"], r["warm_val_by_epoch"]
        lines.append(
            (f"| {r['job']} " if job else "")
            + f"| {r['channels']} × {r['depth']} | {parent} | {r['target']:.3f} | {_e(r['cold_epochs'])} "
            f"| {_e(r['warm_epochs'])} | {_s(r['cold_seconds'])} | {_s(r['warm_seconds'])} "
            f"| {cold[0]:.3f} / {warm[0]:.3f} | {cold[1]:.3f} / {warm[1]:.3f} "
            f"| {r['cold_test_accuracy']:.3f} / {r['warm_test_accuracy']:.3f} |"
        )
    return lines


def _summary(case: dict[str, Any], *, parents_counted: bool) -> list[str]:
    """The ratios of one case, each saying whether the parents' training is in it."""
    cold, warm = case["mean_val_by_epoch_cold"], case["mean_val_by_epoch_warm"]
    by_epoch = ", ".join(f"{e}: {c:.3f} / {w:.3f}" for e, (c, w) in enumerate(zip(cold, warm, strict=True)))
    parents = (
        f"The parents' training ({len(case['parents'])} models, {case['parents_epochs']} epochs in all on "
        f"{case['parent_train_images']} images, {case['parents_seconds']:.1f} CPU s) "
    )
    repay = case["children_to_repay_parents"]
    if parents_counted:
        cost = (
            parents
            + f"counted in full against these {case['child_count']} children: "
            + f"CPU time **{_x(case['total_speedup_parents_counted'])}**; "
            + ("the zoo saves nothing here. " if repay is None else f"it is repaid after {repay:.1f} children. ")
        )
    else:
        cost = (
            parents
            + "is not counted in these ratios (the first job paid it, on the same data); counted, the time "
            + f"ratio is {_x(case['total_speedup_parents_counted'])}. "
        )
    return [
        "To the target, over the children whose warm run reached it (summed cold over summed warm): "
        f"**epochs {_x(case['epoch_speedup'])}**, CPU time {_x(case['total_speedup'])}, parents' cost not counted. "
        + cost
        + f"Warm children at the target before any training: {case['warm_at_target_before_training']} of "
        f"{case['child_count']}; never reaching it: {case['warm_not_reached']}. Mean validation accuracy at equal "
        f"epochs, cold / warm: {by_epoch}. Mean test accuracy after {len(cold) - 1} epochs: "
        f"{case['mean_test_accuracy_cold']:.4f} cold, {case['mean_test_accuracy_warm']:.4f} warm.",
        "",
    ]


def _s(value: float | None) -> str:
    return "not reached" if value is None else f"{value:.1f}"


def _e(value: int | None) -> str:
    return "-" if value is None else str(value)


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}×"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer images and epochs (about 2 minutes)")
    parser.add_argument("--limit", type=int, help="Fashion-MNIST images for training and validation")
    parser.add_argument("--epochs", type=int, help="epochs per training")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    limit = args.limit or (2500 if args.quick else 7500)
    epochs = args.epochs or (4 if args.quick else 8)
    torch.set_num_threads(2)
    setup = RunSetup(
        "the zoo, in its same-task case: parents and children train on the same split of the same data, so a "
        "parent has already learnt the child's task (what a job gains from its own earlier trials, not "
        "transfer); the other-task case counts the parents' training in full against its children alone, the "
        "least favourable count",
        placement="not applicable (no job driver: the trainings run in this process)",
        fusion="not applicable (no platform)",
        warm_start="per training: cold (from scratch) and warm from the zoo (DbZoo, the platform's warm starter)",
    )
    with tempfile.TemporaryDirectory(prefix="baobab-bench-") as tmp:
        folder = Path(tmp)
        selection = part_selection(folder, 1000, 5)
        print(f"selection: {selection}", flush=True)
        other_task = part_other_task(folder, limit, epochs, args.seed)
        same_task = part_same_task(folder, limit, epochs, args.seed)
    result = {
        "date": datetime.date.today().isoformat(),
        "machine": f"{torch.get_num_threads()} threads, Python {platform.python_version()}, torch {torch.__version__}",
        "other_task": other_task,
        "same_task": same_task,
        "selection": selection,
        "setup": setup.finish(),
    }
    write_report(result)
    print((RESULTS / "warm_start.md").read_text())


if __name__ == "__main__":
    main()
