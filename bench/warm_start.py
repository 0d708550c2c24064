"""Warm starting from the model zoo, against training from scratch, on Fashion-MNIST; and parent selection at scale.

Part 1, warm start. A sequence of jobs trains the example template ``TorchCnn``
(``examples/models/torch_cnn.py``) on a Fashion-MNIST subset (Debian's
``dataset-fashion-mnist``, through ``baobab.store.build_fashion_mnist``). The first job
trains a few narrow and shallow CNNs and puts them in a zoo (``baobab.zoo.DbZoo`` on a
SQLite file and a local artifact store: the platform's own code path without the HTTP
hop). The later jobs search other widths and depths; each of their trials is trained
twice from the same seed, once from scratch and once warm-started from the zoo (the
platform's ``TrialContext.warm_starter``), and the warm-started model joins the zoo as
a platform trial would. For each later trial the report gives:

- the time to reach the target accuracy on the validation set, with and without the
  zoo: the target is 98% of the accuracy the cold run ends with. Time is the training
  CPU time of the process (build, warm start, epochs), not the validation passes that
  measure it, and not wall time, which other jobs on a shared machine would distort;
  the epochs trained by then are given too;
- the final accuracy of both on the held-out test set.

Part 2, selection. A zoo of 1,000 synthetic ResNet graphs (``baobab.zoo._synthetic``:
1 to 3 basic blocks per stage, four stages, base widths 32 to 96, every structure
distinct; ResNet-18 has 11.7 M parameters) in the metadata database; the time
``baobab.zoo.choose_parent`` takes to choose for a ResNet-18, the first time (graphs
read from the database and their features computed) and then with the per-process
feature cache, against scoring every candidate without the bounds, vectorised or pair
by pair.

    .venv/bin/python bench/warm_start.py            # the full run: about 6 minutes on 2 cores
    .venv/bin/python bench/warm_start.py --quick    # a smaller one, about 2 minutes
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


def part_warm_start(folder: Path, limit: int, epochs: int, seed: int) -> dict[str, Any]:
    built = build_fashion_mnist(folder / "data", limit=limit, val_fraction=VAL_FRACTION, seed=seed)
    data = {split.name: str(split.path) for split in built.splits}
    images = read_image_files(data["val"])
    template = load_template(str(TEMPLATE), "TorchCnn")(channels=8, depth=1)
    val = (template.preprocess(images.images), torch.from_numpy(np.array(images.labels, dtype=np.int64)))

    url = f"sqlite:///{folder / 'zoo.db'}"
    upgrade_database(url)
    engine = create_engine_from_url(url)
    owner = _user(engine)
    zoo = DbZoo(engine, ArtifactStore(folder / "artifacts"), owner_id=owner)
    example = val[0][:2]

    first = []
    for channels, depth in FIRST_JOB:
        run, model = train_one(data, val, channels, depth, epochs, seed, None)
        register_module(
            zoo, model.module, example, score=run.curve[-1][1], task=TASK, name=f"job1 c{channels} d{depth}"
        )
        first.append(run)
        print(f"job 1: c{channels} d{depth}: test accuracy {run.test_accuracy:.3f}", flush=True)

    later: list[dict[str, Any]] = []
    for number, job in enumerate(LATER_JOBS, start=2):
        for channels, depth in job:
            cold, _ = train_one(data, val, channels, depth, epochs, seed, None)
            warm, model = train_one(data, val, channels, depth, epochs, seed, zoo)
            name = f"job{number} c{channels} d{depth}"
            register_module(zoo, model.module, example, score=warm.curve[-1][1], task=TASK, name=name)
            target = TARGET_FRACTION * cold.curve[-1][1]
            cold_t, warm_t = cold.time_to(target), warm.time_to(target)
            later.append({
                "job": number, "channels": channels, "depth": depth, "target": target,
                "cold_seconds": cold_t, "warm_seconds": warm_t,
                "cold_epochs": cold.epochs_to(target), "warm_epochs": warm.epochs_to(target),
                "speedup": None if not cold_t or warm_t is None else cold_t / max(warm_t, 1e-9),
                "cold_test_accuracy": cold.test_accuracy, "warm_test_accuracy": warm.test_accuracy,
                "parent": warm.parent, "similarity": warm.similarity, "transferred": warm.transferred,
                "cold": asdict(cold), "warm": asdict(warm),
            })  # fmt: skip
            print(
                f"job {number}: c{channels} d{depth}: to {target:.3f}: cold {cold_t}s, warm {warm_t}s "
                f"(parent {warm.parent}, similarity {warm.similarity}); test {cold.test_accuracy:.3f} / "
                f"{warm.test_accuracy:.3f}",
                flush=True,
            )
    engine.dispose()
    speedups = [r["speedup"] for r in later if r["speedup"] is not None]
    both = [r for r in later if r["cold_seconds"] is not None and r["warm_seconds"] is not None]
    return {
        "limit": limit,
        "epochs": epochs,
        "first_job": [asdict(r) for r in first],
        "later": later,
        "mean_speedup": statistics.fmean(speedups) if speedups else None,
        "total_speedup": sum(r["cold_seconds"] for r in both) / max(sum(r["warm_seconds"] for r in both), 1e-9),
        "epoch_speedup": sum(r["cold_epochs"] for r in both) / max(sum(r["warm_epochs"] for r in both), 1),
        "warm_not_reached": sum(1 for r in later if r["warm_seconds"] is None),
        "geomean_speedup": float(np.exp(np.mean(np.log(speedups)))) if speedups else None,
        "mean_test_accuracy_cold": statistics.fmean(r["cold_test_accuracy"] for r in later),
        "mean_test_accuracy_warm": statistics.fmean(r["warm_test_accuracy"] for r in later),
    }


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
    ws, sel = result["warm_start"], result["selection"]
    lines = [
        "# Warm start from the model zoo",
        "",
        f"`bench/warm_start.py`, {result['date']}, {result['machine']}. Fashion-MNIST: {ws['limit']} images "
        f"({1 - VAL_FRACTION:.0%} train, {VAL_FRACTION:.0%} validation) and a test set in proportion; "
        f"`TorchCnn` (examples), {ws['epochs']} epochs, "
        f"Adam at 2e-3, batch 64. First job (the zoo's first models): "
        + ", ".join(f"{r['channels']} channels × depth {r['depth']}" for r in ws["first_job"])
        + ". Every later trial is trained from scratch and warm-started from the same seed; the warm one joins "
        "the zoo. Target: 98% of the validation accuracy the cold run ends with. Times are training CPU "
        "seconds of the process (build, warm start, epochs; both threads), without the validation passes that "
        "measure them; epochs are those trained when the target was first reached (0: already at the start).",
        "",
        "| job | channels × depth | parent (similarity, share carried) | target | cold s | warm s | speedup "
        "| cold epochs | warm epochs | test acc. cold | test acc. warm |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in ws["later"]:
        parent = "-" if r["parent"] is None else f"{r['parent']} ({r['similarity']:.2f}, {r['transferred']:.0%})"
        lines.append(
            f"| {r['job']} | {r['channels']} × {r['depth']} | {parent} | {r['target']:.3f} | {_s(r['cold_seconds'])} "
            f"| {_s(r['warm_seconds'])} | {_x(r['speedup'])} | {_e(r['cold_epochs'])} | {_e(r['warm_epochs'])} "
            f"| {r['cold_test_accuracy']:.3f} | {r['warm_test_accuracy']:.3f} |"
        )
    lines += [
        "",
        f"Time to target, all later trials together: **{_x(ws['total_speedup'])} less with the zoo** "
        f"(the summed cold times over the summed warm times; in epochs, {_x(ws['epoch_speedup'])}); "
        f"per trial, geometric mean {_x(ws['geomean_speedup'])}, "
        f"arithmetic mean {_x(ws['mean_speedup'])} (a warm start that begins above the target counts its few "
        f"milliseconds of warm-start work, hence the large ratios). Warm runs that never reached the target: "
        f"{ws['warm_not_reached']}. Mean test accuracy {ws['mean_test_accuracy_cold']:.4f} cold, "
        f"{ws['mean_test_accuracy_warm']:.4f} warm (one trial's test accuracy moves by a point or two from "
        "one epoch to the next: Adam at a constant rate on a small set; compare the means).",
        "",
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
    ]
    (RESULTS / "warm_start.md").write_text("\n".join(lines))


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
    with tempfile.TemporaryDirectory(prefix="baobab-bench-") as tmp:
        folder = Path(tmp)
        selection = part_selection(folder, 1000, 5)
        print(f"selection: {selection}", flush=True)
        warm_start = part_warm_start(folder, limit, epochs, args.seed)
    result = {
        "date": datetime.date.today().isoformat(),
        "machine": f"{torch.get_num_threads()} threads, Python {platform.python_version()}, torch {torch.__version__}",
        "warm_start": warm_start,
        "selection": selection,
    }
    write_report(result)
    print((RESULTS / "warm_start.md").read_text())


if __name__ == "__main__":
    main()
