"""Fused training against independent trial processes: training throughput of K same-shaped trials.

K trials of one example template that differ only in learning rate and seed train on the
same Fashion-MNIST subset (Debian's ``dataset-fashion-mnist``, through
``baobab.store.build_fashion_mnist``), three ways in the same run, for K = 1, 4, 16, 64,
each with the machine's cores as torch threads in all:

1. **fused**: ``baobab.model.train_fused`` over the K models in one process with as many
   torch threads as the machine has cores;
2. **independent**: the K trials as plain ``TorchModel.train`` calls spread over a pool of
   one process per core, one torch thread each, which is how a worker machine runs them today;
3. **fused per process** (K >= 2 x cores): the same pool, each process fusing its share of
   the K trials (K / cores members) on its one thread.

4. **auto** (K >= 2, where the profile chose a group size above 1): the groups the job driver
   forms under ``train_args.fusion = "auto"`` from the template's profile (measured first, on one
   thread, by ``baobab.model.profile_fusion`` as a worker slot measures it), one unit per pool
   process at a time.

The templates are ``examples/models/torch_mlp.py`` at 784-32-10 (one hidden layer of 32,
no dropout, AdamW; the Fashion-MNIST pixels as a TABULAR CSV),
``examples/models/torch_cnn.py`` (two conv-BatchNorm-ReLU-pool blocks of 8 and 16
channels, no dropout, Adam) and ``examples/models/torch_adapter.py`` (a head of 32 on the
frozen blocks of a TorchCnn of 32, 64 and 128 channels, pre-trained here first and given to
the trials as their zoo model). Every process reads the datasets through one
``baobab.worker.DataCache`` (as the trials of a worker machine do), filled before the
clocks start; each way is timed from its first trial's ``train()`` to its last one's
parameters back here (setup, training and ``dump_parameters``, not evaluation), and
throughput = the training rows of every epoch of every trial / that wall time. The
machine is shared, so CPU seconds (summed over the processes' trials) are reported too, and
each MLP measurement is repeated (the ways back to back) and its median reported.

The trial processes run with ``OMP_WAIT_POLICY=PASSIVE`` unless it is set: with
OpenMP's default spin-waiting, a two-thread torch process on two busy cores spends most
of its time spinning (measured 10 to 100 times slower on this machine's shared cores).

Each fused member must end as its independent run with the same seed does, up to
rounding (``tests/model_tests/test_fused.py`` documents the tolerances): the report gives,
per K, the largest difference of validation accuracy and of any parameter or buffer,
apart from the state no gradient reaches (a convolution's bias right before a BatchNorm,
and that BatchNorm's running mean), which Adam walks on rounding noise and which is
reported on its own.

    .venv/bin/python bench/fusion.py            # the full run: about 12 minutes on 2 shared cores
    .venv/bin/python bench/fusion.py --quick    # K = 1 and 4, a smaller subset, under a minute
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import hashlib
import json
import math
import multiprocessing
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from setup_record import RunSetup, setup_markdown
from shared_data import build_datasets

from baobab.advisor import AUTO_MAX_GROUP, packed_size
from baobab.model import (
    TorchModel,
    TrialContext,
    load_template,
    profile_fusion,
    stack_bytes,
    train_fused,
    trial_context,
)
from baobab.store import read_image_files
from baobab.worker import DataCache

HERE = Path(__file__).parent
RESULTS = HERE / "results"
EXAMPLES = HERE.parent / "examples" / "models"
CORES = os.cpu_count() or 1
RATES = (3e-4, 1e-2)
POLICIES = {"early_stop": False, "quick_eval": False, "downscale": False, "share_params": False}


@dataclasses.dataclass(frozen=True)
class Case:
    """One template at one setting: K trials of it differ only in learning rate and seed."""

    name: str
    file: str
    class_name: str
    split: str  # "csv" (the TABULAR copy) or "images"
    knobs: dict[str, Any]
    learning_rates: tuple[float, float]  # the K members' rates are spread log-evenly over this range
    epochs: int
    ks: tuple[int, ...]
    repeats: int  # each K's ways, back to back; the medians are reported
    train_args: dict[str, Any] = dataclasses.field(default_factory=dict)  # beside each trial's seed


def cases(args: argparse.Namespace) -> list[Case]:
    mlp = {"hidden_size": 32, "hidden_layers": 1, "dropout": 0.0, "weight_decay": 1e-4, "batch_size": 64}
    cnn = {"channels": 8, "depth": 2, "kernel_size": 3, "dropout": 0.0, "batch_size": 64}
    adapter = {**ADAPTER_BASE, "adapter_width": 32, "dropout": 0.0, "weight_decay": 1e-4, "batch_size": 64}
    return [
        Case("mlp 784-32-10", "torch_mlp.py", "TorchMlp", "csv", mlp, RATES, args.mlp_epochs, args.ks, args.repeats),
        Case("cnn 8-16", "torch_cnn.py", "TorchCnn", "images", cnn, RATES, args.cnn_epochs, args.cnn_ks, 1),
        Case(
            "adapter 32-64-128 base",
            "torch_adapter.py",
            "TorchAdapter",
            "images",
            adapter,
            RATES,
            args.cnn_epochs,
            args.cnn_ks,
            1,
            {"base_model": ZOO_BASE_ID},
        ),  # fmt: skip
    ]


#: The adapter's frozen base: a TorchCnn of three blocks (32, 64, 128 channels), trained here first
#: and given to the adapter trials as the zoo model ZOO_BASE_ID.
ADAPTER_BASE = {"base_channels": 32, "base_depth": 3, "base_kernel_size": 3}
ZOO_BASE_ID = 1


Job = tuple[dict[str, Any], int]  # a trial's knobs and seed


def members(case: Case, k: int) -> list[Job]:
    """The knobs and seed of each of K trials."""
    rates = np.geomspace(*case.learning_rates, k) if k > 1 else [case.learning_rates[0]]
    knobs = {**case.knobs, **POLICIES, "epochs": case.epochs}
    return [({**knobs, "learning_rate": float(lr)}, seed) for seed, lr in enumerate(rates)]


# -- what every process shares: the data and its cache --------------------------------------


@dataclasses.dataclass(frozen=True)
class Data:
    """The datasets' paths by split kind ("csv", "images") and name ("train", "val"), and the cache's folder."""

    paths: dict[str, dict[str, str]]
    cache: str
    train_rows: int
    base: str  # the adapter's zoo base: an .npz of a TorchCnn's module state

    def checksums(self) -> dict[str, str]:
        return {
            path: hashlib.sha256(Path(path).read_bytes()).hexdigest()
            for split in self.paths.values()
            for path in split.values()
        }


_DATA: Data | None = None
_CHECKSUMS: dict[str, str] = {}
_BASE: dict[str, np.ndarray] = {}


def _setup(data: Data, threads: int) -> None:
    """A process's data and torch threads (the pools' initializer, and this process's own for evaluating)."""
    global _DATA, _CHECKSUMS, _BASE
    _DATA, _CHECKSUMS = data, data.checksums()
    with np.load(data.base) as base:
        _BASE = dict(base)
    torch.set_num_threads(threads)


def _zoo(zoo_model_id: int) -> dict[str, np.ndarray]:
    """The zoo as a worker gives it to a trial: here one model, the adapter's base."""
    if zoo_model_id != ZOO_BASE_ID:
        raise ValueError(f"no zoo model {zoo_model_id} here")
    return _BASE


def _template(case: Case) -> type[TorchModel]:
    """The case's class, loaded once per process: fused members must be instances of one class."""
    return _load(case.file, case.class_name)


@functools.cache
def _load(file: str, class_name: str) -> type[TorchModel]:
    return load_template(str(EXAMPLES / file), class_name)


@functools.cache
def _nudged(cls: type[TorchModel]) -> type[TorchModel]:
    class Nudged(cls):  # type: ignore[valid-type,misc]
        def fit_module(self, module: torch.nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> None:
            super().fit_module(module, inputs, targets)
            with torch.no_grad():
                for param in module.parameters():
                    param.copy_(torch.nextafter(param, torch.full_like(param, math.inf)))

    return Nudged


def _context(model: TorchModel, case: Case) -> TrialContext:
    """A trial's context whose datasets come from the shared cache, as on a worker machine."""
    assert _DATA is not None
    context = TrialContext()
    cache = DataCache(Path(_DATA.cache), budget_mb=4096)
    context.data_loader = cache.loader(
        model, template=f"bench:{case.file}:{case.class_name}", datasets=_CHECKSUMS, log=context.log
    )
    context.zoo_params = _zoo
    return context


def _train_path(case: Case) -> str:
    assert _DATA is not None
    return _DATA.paths[case.split]["train"]


Params = dict[str, Any]


def _independent(job: tuple[Case, dict[str, Any], int, bool]) -> tuple[Params, float]:
    """One trial as a worker runs it: train, dump; its parameters and CPU seconds. Nudged (the
    last item): its initial weights one float up, to see how far rounding alone carries a trial."""
    case, knobs, seed, nudged = job
    started = time.process_time()
    model = (_nudged(_template(case)) if nudged else _template(case))(**knobs)
    with trial_context(context := _context(model, case)):
        model.train(_train_path(case), seed=seed, **case.train_args)
    _check_complete(context, case)
    return model.dump_parameters(), time.process_time() - started


def _fused(job: tuple[Case, list[Job]]) -> tuple[list[Params], float]:
    """Trials as one stack in this process; their parameters and the CPU seconds."""
    case, jobs = job
    started = time.process_time()
    models = [_template(case)(**knobs) for knobs, _ in jobs]
    contexts = [_context(model, case) for model in models]
    train_args = [{"seed": seed, **case.train_args} for _, seed in jobs]
    outcomes = train_fused(models, _train_path(case), contexts, train_args=train_args)
    for outcome, context in zip(outcomes, contexts, strict=True):
        if outcome.status.value != "COMPLETED":
            raise SystemExit(f"{case.name}: a fused member ended {outcome.status.value}: {outcome.reason}")
        _check_complete(context, case)
        if any(line.startswith("not fused") for line in context.logs):
            raise SystemExit(f"{case.name}: the members were not stacked: {context.logs}")
    return [m.dump_parameters() for m in models], time.process_time() - started


def _profile(case: Case) -> dict[str, Any]:
    """What fusion "auto" measures for the case on a worker slot (one torch thread): its profile."""
    knobs, seed = members(case, 1)[0]
    model = _template(case)(**knobs)
    return profile_fusion(model, _train_path(case), max_group=AUTO_MAX_GROUP, context=_context(model, case),
                          train_args={"seed": seed, **case.train_args}).to_json()  # fmt: skip


def _unit(job: tuple[Case, list[Job]]) -> tuple[list[Params], float]:
    """A unit of work as a worker runs it: a trial alone (TorchModel's own loop), or a fused group."""
    case, jobs = job
    if len(jobs) > 1:
        return _fused(job)
    params, cpu = _independent((case, *jobs[0], False))
    return [params], cpu


def auto_groups(k: int, profile: dict[str, Any]) -> list[int]:
    """The group sizes the job driver forms for K trials of one structure under fusion "auto" on a job
    of CORES slots: units started one by one as slots free, each sized by baobab.advisor.packed_size
    from the trials left and those running on the other slots."""
    rates = {int(size): rate for size, rate in profile["samples_per_s"].items()}
    sizes: list[int] = []
    left = k
    while left:
        running = sum(sizes[len(sizes) - (CORES - 1) :]) if CORES > 1 else 0
        sizes.append(min(left, packed_size(rates, profile["best"], left + running, CORES)))
        left -= sizes[-1]
    return sizes


def _check_complete(context: TrialContext, case: Case) -> None:
    if len(context.metrics) != case.epochs:
        raise SystemExit(f"{case.name}: a trial reported {len(context.metrics)} of {case.epochs} epochs")


def _warm(case: Case) -> None:
    """One short trial, so that the first timed one does not pay for imports and first calls."""
    short = dataclasses.replace(case, epochs=1)
    _independent((short, *members(short, 1)[0], False))


def pretrain_base(train_path: str, path: Path, epochs: int) -> str:
    """The adapter's zoo model: a TorchCnn of the adapter's base architecture trained here, its module
    state saved as the zoo gives it to a trial (state-dict names, arrays)."""
    knobs = {
        "channels": ADAPTER_BASE["base_channels"],
        "depth": ADAPTER_BASE["base_depth"],
        "kernel_size": ADAPTER_BASE["base_kernel_size"],
        **{"learning_rate": 3e-3, "dropout": 0.0, "epochs": epochs, "batch_size": 64, **POLICIES},
    }
    model = _load("torch_cnn.py", "TorchCnn")(**knobs)
    with trial_context(TrialContext()):
        model.train(train_path, seed=0)
    state = {name: t.detach().numpy() for name, t in model._require_module().state_dict().items()}
    np.savez(path, **state)
    return str(path)


def memory(case: Case, ks: tuple[int, ...]) -> str:
    """The stacked state of K adapters (parameters, gradients, Adam's moments, buffers) with the frozen
    base kept once, against K separate trials (each holding its base) and against the same network
    with its base trained (stacked K times), from its tensors."""
    model = _template(case)(**members(case, 1)[0][0])
    model.input_shape, model.output_size = (1, 28, 28), 10
    model.module = model.build_module(False)
    module = model._require_module()
    base = sum(p.numel() * p.element_size() for p in module.get_submodule("base").parameters())
    shared = [stack_bytes(model, k) for k in ks]
    separate = [k * stack_bytes(model, 1) for k in ks]
    module.requires_grad_(True)
    trained = [stack_bytes(model, k) for k in ks]
    mib = 2**20
    lines = ["| K | fused, base kept once | K separate trials | fused, base trained too |", "|---:|---:|---:|---:|"]
    lines += [
        f"| {k} | {a / mib:.2f} MiB | {b / mib:.2f} MiB | {c / mib:.2f} MiB |"
        for k, a, b, c in zip(ks, shared, separate, trained, strict=True)
    ]
    return f"The frozen base holds {base / mib:.2f} MiB of parameters.\n\n" + "\n".join(lines)


# -- measuring -----------------------------------------------------------------------------


@dataclasses.dataclass
class Way:
    """One way of running K trials: the wall and CPU seconds of each repeat."""

    rows: int  # training rows of every epoch of every trial
    wall_s: list[float] = dataclasses.field(default_factory=list)
    cpu_s: list[float] = dataclasses.field(default_factory=list)

    def add(self, wall: float, cpu: float) -> None:
        self.wall_s.append(round(wall, 3))
        self.cpu_s.append(round(cpu, 3))

    @property
    def rows_per_s(self) -> float:
        return self.rows / statistics.median(self.wall_s)

    @property
    def rows_per_cpu_s(self) -> float:
        return self.rows / statistics.median(self.cpu_s)


@dataclasses.dataclass
class Diff:
    """A fused way's largest differences from the independent runs, and the learning rate of the member."""

    score: float = 0.0  # validation accuracy
    score_lr: float = 0.0
    param: float = 0.0  # any parameter or buffer with a gradient, absolute
    param_key: str = ""
    param_lr: float = 0.0
    param_member: int = 0
    param_relative: float = 0.0  # the difference over the largest magnitude in that tensor
    zero_gradient: float | None = None  # the state no gradient reaches; None where the module has none


@dataclasses.dataclass
class Row:
    model: str
    k: int
    epochs: int
    train_rows: int
    ways: dict[str, Way] = dataclasses.field(default_factory=dict)
    diffs: dict[str, Diff] = dataclasses.field(default_factory=dict)
    scores: list[float] = dataclasses.field(default_factory=list)  # validation accuracy of the independent runs
    #: The fused way's most different member, unfused with its initial weights one float up, against
    #: its independent run: largest difference of a parameter with a gradient, and of validation accuracy.
    nudged: tuple[float, float] = (0.0, 0.0)
    #: That member fused alone (K=1) against itself in the stack: largest difference of a parameter with a gradient.
    alone_in_stack: float = 0.0

    def ratios(self, way: str) -> list[float]:
        """Independent wall time over ``way``'s, per repeat (each repeat runs the ways back to back)."""
        pairs = zip(self.ways["independent"].wall_s, self.ways[way].wall_s, strict=True)
        return [independent / mine for independent, mine in pairs]

    def ratio(self, way: str) -> float:
        return statistics.median(self.ratios(way))

    def summary(self) -> dict[str, Any]:
        rates = {
            name: {"rows_per_s": round(w.rows_per_s, 1), "rows_per_cpu_s": round(w.rows_per_cpu_s, 1)}
            for name, w in self.ways.items()
        }
        ratios = {name: [round(r, 3) for r in self.ratios(name)] for name in self.ways if name != "independent"}
        return {**dataclasses.asdict(self), "rates": rates, "ratios": ratios}


def zero_gradient_state(module: torch.nn.Module) -> set[str]:
    """A convolution's bias right before a BatchNorm, and that BatchNorm's running mean (dumped names)."""
    layers = list(module.named_children())
    names = set()
    for (conv_name, conv), (norm_name, norm) in zip(layers, layers[1:], strict=False):
        if isinstance(conv, torch.nn.Conv2d) and isinstance(norm, torch.nn.BatchNorm2d) and conv.bias is not None:
            names |= {f"module.{conv_name}.bias", f"module.{norm_name}.running_mean"}
    return names


def _loaded(case: Case, knobs: dict[str, Any], params: Params) -> TorchModel:
    model = _template(case)(**knobs)
    model.load_parameters(params)
    return model


def evaluate(case: Case, knobs: dict[str, Any], params: Params) -> float:
    """Validation accuracy of a trial's parameters, evaluated in this process."""
    assert _DATA is not None
    model = _loaded(case, knobs, params)
    with trial_context(_context(model, case)):
        return model.evaluate(_DATA.paths[case.split]["val"])


def _differences(case: Case, knobs: dict[str, Any], mine: Params, theirs: Params) -> tuple[dict[str, float], set[str]]:
    """The largest absolute difference of each float tensor of two trials' parameters, and the names of
    those that no gradient reaches."""
    noisy = zero_gradient_state(_loaded(case, knobs, mine)._require_module())
    floats = [k for k, v in theirs.items() if isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.size]
    return {key: float(np.max(np.abs(mine[key] - theirs[key]))) for key in floats}, noisy


def compare(case: Case, jobs: list[Job], fused: list[Params], alone: list[Params], scores: list[float]) -> Diff:
    """The largest differences of fused members from their independent runs."""
    diff = Diff()
    for member, ((knobs, _), mine, theirs, their_score) in enumerate(zip(jobs, fused, alone, scores, strict=True)):
        lr = knobs["learning_rate"]
        score = abs(evaluate(case, knobs, mine) - their_score)
        if score > diff.score:
            diff.score, diff.score_lr = score, lr
        largest, noisy = _differences(case, knobs, mine, theirs)
        for key, value in largest.items():
            if key in noisy:
                diff.zero_gradient = max(diff.zero_gradient or 0.0, value)
                continue
            if value >= diff.param:
                diff.param, diff.param_key, diff.param_lr, diff.param_member = value, key, lr, member
            scale = float(np.max(np.abs(theirs[key])))
            diff.param_relative = max(diff.param_relative, value / scale if scale else 0.0)
    return diff


def controls(row: Row, case: Case, one: Any, pool: Any, job: Job, stacked: Params, alone: Params, score: float) -> None:
    """For the trial ``job`` (fused in ``one``, alone in ``pool``): how far it drifts unfused when only its
    initial weights move by one float (rounding alone), and whether its stack's other members changed it."""
    knobs, seed = job
    nudged, _ = pool.apply(_independent, ((case, knobs, seed, True),))
    largest, noisy = _differences(case, knobs, nudged, alone)
    drift = max(v for k, v in largest.items() if k not in noisy)
    row.nudged = (drift, abs(evaluate(case, knobs, nudged) - score))
    single, _ = one.apply(_fused, ((case, [job]),))
    largest, noisy = _differences(case, knobs, single[0], stacked)
    row.alone_in_stack = max(v for k, v in largest.items() if k not in noisy)


def run_case(case: Case, one: Any, pool: Any, data: Data) -> tuple[list[Row], dict[str, Any]]:
    """Every K of ``case``, the ways back to back, ``case.repeats`` times: ``one`` is a pool of one
    process of every core's thread, ``pool`` one of a process per core. Also the case's fusion
    profile, as a worker slot measures it under fusion "auto"."""
    profile = pool.apply(_profile, (case,))
    print(
        f"{case.name:14} profile: best {profile['best']} of {profile['samples_per_s']} in {profile['seconds']} s",
        flush=True,
    )
    rows = []
    for k in case.ks:
        jobs = members(case, k)
        row = Row(case.name, k, case.epochs, data.train_rows)
        names = ["fused", "independent"] + (["fused per process"] if k >= 2 * CORES else [])
        groups = auto_groups(k, profile)
        names += ["auto"] if max(groups) > 1 else []  # all alone: auto runs them as independent
        row.ways = {name: Way(data.train_rows * case.epochs * k) for name in names}
        params: dict[str, list[Params]] = {}
        for _ in range(case.repeats):
            for name in names:
                start = time.perf_counter()
                if name == "fused":
                    results = [one.apply(_fused, ((case, jobs),))]
                elif name == "independent":
                    results = pool.map(_independent, [(case, knobs, seed, False) for knobs, seed in jobs], chunksize=1)
                elif name == "auto":  # the units the driver forms, one per slot at a time
                    starts = np.cumsum([0, *groups])
                    units = [(case, jobs[a:b]) for a, b in zip(starts, starts[1:], strict=False)]
                    results = pool.map(_unit, units, chunksize=1)
                else:
                    results = pool.map(_fused, [(case, jobs[i::CORES]) for i in range(CORES)], chunksize=1)
                row.ways[name].add(time.perf_counter() - start, sum(cpu for _, cpu in results))
                params[name] = _in_order(name, [p for p, _ in results], k)  # the same on every repeat
        row.scores = [evaluate(case, knobs, p) for (knobs, _), p in zip(jobs, params["independent"], strict=True)]
        for name in names:
            if name != "independent":
                row.diffs[name] = compare(case, jobs, params[name], params["independent"], row.scores)
        worst = row.diffs["fused"].param_member
        stacked, alone = params["fused"][worst], params["independent"][worst]
        controls(row, case, one, pool, jobs[worst], stacked, alone, row.scores[worst])
        rows.append(row)
        cells = "  ".join(f"{n} {w.rows_per_s:9,.0f} rows/s" for n, w in row.ways.items())
        ratios = ", ".join(f"{r:.2f}" for r in row.ratios("fused"))
        print(f"{case.name:14} K={k:3}  {cells}  fused/independent {ratios}", flush=True)
    return rows, profile


def _in_order(name: str, results: list[Any], k: int) -> list[Params]:
    """The trials' parameters in the order of their jobs, from what a way's processes returned."""
    if name == "independent":
        return results
    if name == "fused":
        return results[0]
    if name == "auto":  # groups of consecutive jobs
        return [params for group in results for params in group]
    ordered: list[Params] = [{}] * k
    for i, share in enumerate(results):  # process i fused jobs i, i + CORES, ...
        ordered[i::CORES] = share
    return ordered


# -- the report ------------------------------------------------------------------------------


def _ratio(row: Row, name: str) -> str:
    if name not in row.ways:
        return "-"
    ratios = row.ratios(name)
    spread = f" ({min(ratios):.2f}-{max(ratios):.2f})" if len(ratios) > 1 else ""
    return f"{row.ratio(name):.2f}x{spread}"


def _rate(row: Row, name: str, per_cpu: bool = False) -> str:
    if name not in row.ways:
        return "-"
    way = row.ways[name]
    return f"{way.rows_per_cpu_s if per_cpu else way.rows_per_s:,.0f}"


def throughput_table(rows: list[Row]) -> str:
    head = (
        "| model | K | fused rows/s | independent rows/s | fused / independent | fused per process rows/s "
        "| per process / independent | auto / independent | rows per CPU-s: fused, independent, per process |"
    )
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        cpu = ", ".join(_rate(r, n, per_cpu=True) for n in ("fused", "independent", "fused per process"))
        lines.append(
            f"| {r.model} | {r.k} | {_rate(r, 'fused')} | {_rate(r, 'independent')} | **{_ratio(r, 'fused')}** "
            f"| {_rate(r, 'fused per process')} | {_ratio(r, 'fused per process')} | {_ratio(r, 'auto')} | {cpu} |"
        )
    return "\n".join(lines)


def auto_section(rows: list[Row], profiles: dict[str, dict[str, Any]]) -> str:
    """What fusion "auto" measured per model, and how its groups did against independent trials."""
    lines = [
        "| model | rows/s by group size on one thread (1: alone) | chosen | measuring took | stopped because |",
        "|---|---|---:|---:|---|",
    ]
    for model, p in profiles.items():
        rates = ", ".join(f"{size}: {rate:,.0f}" for size, rate in p["samples_per_s"].items())
        lines.append(f"| {model} | {rates} | {p['best']} | {p['seconds']:.1f} s | {p['reason'] or '-'} |")
    auto = [(r, r.ratio("auto")) for r in rows if "auto" in r.ways]
    alone = [m for m, p in profiles.items() if p["best"] == 1]
    slowest = min(auto, key=lambda item: item[1]) if auto else None
    parts = []
    if alone:
        parts.append(f"{', '.join(alone)}: no size paid, so auto runs these trials alone, as independent (ratio 1)")
    if slowest is not None:
        parts.append(f"the slowest auto run was {slowest[1]:.2f}x independent ({slowest[0].model}, K={slowest[0].k})")
    held = slowest is None or slowest[1] >= 0.95
    verdict = "holds" if held else "does not hold"
    return "\n".join(lines) + (
        f'\n\nThe aim, fusion "auto" never slower than unfused, {verdict} here (within 5% timing noise): '
        + "; ".join(parts)
        + "."
    )


def equality_table(rows: list[Row]) -> str:
    lines = [
        "| model | K | way | val accuracy (lr of the member) | parameter or buffer (where, lr) "
        "| relative to the tensor's largest | zero-gradient state | that member nudged: parameter, val accuracy "
        "| that member fused alone | val accuracy of the K |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        for name, d in r.diffs.items():
            zero = "none" if d.zero_gradient is None else f"{d.zero_gradient:.2g}"
            nudged = f"{r.nudged[0]:.2g}, {r.nudged[1]:.4f}"
            lines.append(
                f"| {r.model} | {r.k} | {name} | {d.score:.4f}{f' ({d.score_lr:.1e})' if d.score else ''} "
                f"| {d.param:.2g} (`{d.param_key}`, {d.param_lr:.1e}) | {d.param_relative:.2g} | {zero} "
                f"| {nudged if name == 'fused' else ''} | {f'{r.alone_in_stack:.2g}' if name == 'fused' else ''} "
                f"| {min(r.scores):.3f}-{max(r.scores):.3f} |"
            )
    return "\n".join(lines)


def verdict(rows: list[Row]) -> str:
    mlp = next((r for r in rows if r.model.startswith("mlp") and r.k == 16), None)
    if mlp is None:
        return "The aim (at least 1.5x at K=16 for the small MLP) was not measured in this run."
    ways = [name for name in ("fused", "fused per process", "auto") if name in mlp.ways]
    held = [name for name in ways if mlp.ratio(name) >= 1.5]
    figures = ", ".join(f"{_ratio(mlp, name)} {name}" for name in ways)
    outcome = f"holds for {' and '.join(held)}" if held else "does not hold"
    return (
        f"The aim, at least 1.5x the independent throughput at K=16 for the small MLP on CPU, {outcome} here: "
        f'{figures} (median of {len(mlp.ratios("fused"))} repeats, their range in brackets). "Fused per '
        'process" and "auto" run as the platform runs groups, one per slot on the slot\'s thread; "fused" is '
        f"one process on all {CORES} threads."
    )


def packing(rows: list[Row]) -> str:
    """Per model and fused way, at which K fusing paid in this run."""
    lines = []
    for model in dict.fromkeys(r.model for r in rows):
        for name in ("fused", "fused per process"):
            measured = [r for r in rows if r.model == model and name in r.ways]
            paying = [r.k for r in measured if r.ratio(name) > 1.0]
            best = max(measured, key=lambda r: r.ratio(name))
            when = f"at K = {', '.join(map(str, paying))}" if paying else "at no K measured"
            top = f"best {best.ratio(name):.2f}x at K={best.k}"
            lines.append(f"- {model}, {name}: faster than independent {when}; {top}")
    return "\n".join(lines)


def write_report(
    rows: list[Row], profiles: dict[str, dict[str, Any]], args: argparse.Namespace, meta: dict[str, Any]
) -> None:
    RESULTS.mkdir(exist_ok=True)
    payload = {**meta, "profiles": profiles, "rows": [r.summary() for r in rows]}
    (RESULTS / "fusion.json").write_text(json.dumps(payload, indent=2) + "\n")
    train_rows = rows[0].train_rows
    steps = math.ceil(train_rows / 64)
    per_process = [(r.diffs["fused"], r.diffs["fused per process"]) for r in rows if "fused per process" in r.diffs]
    threads = (
        f"The fused members came out the same on {CORES} threads (fused) as on one (fused per process)."
        if all(a == b for a, b in per_process)
        else f"The fused members differ between {CORES} threads (fused) and one (fused per process)."
    )
    mlp_steps, cnn_steps = steps * args.mlp_epochs, steps * args.cnn_epochs
    adapter = next(c for c in cases(args) if c.file == "torch_adapter.py")
    adapter_row = next(r for r in rows if r.model == adapter.name and r.k == 16)
    ran = meta.get("setup") or meta  # a run from before bench/setup_record.py kept its load at the top
    report = f"""# Fused training: throughput of K same-shaped trials

Written by `bench/fusion.py{" --quick" if args.quick else ""}` (`make bench-fusion`) on {meta["date"]},
{CORES} cores ({platform.machine()}, Python {platform.python_version()}, PyTorch {torch.__version__}), CPU only,
at niceness {meta["niceness"]}, other work running beside it (load average {ran["load_start"]:.1f} at the start,
{ran["load_end"]:.1f} at the end: times are those of a shared machine); {ran["minutes"]:.1f} minutes.

K trials of one template, differing only in learning rate (log-spread over 3e-4..1e-2) and
seed (0..K-1), on {train_rows:,} Fashion-MNIST training rows ({meta["val_rows"]:,} validation rows),
batch size 64, run three ways in the same run:

- **fused**: `baobab.model.train_fused` over the K models in one process with {CORES} torch threads;
- **independent**: the K trials as plain `train()` calls over a pool of {CORES} processes of one torch
  thread each (the same threads in all), as a worker machine runs them today;
- **fused per process** (K >= {2 * CORES}): the same pool, each process fusing its K/{CORES} of the trials on its
  one thread.

Models: `examples/models/torch_mlp.py` at 784-32-10 (one hidden layer of 32, no dropout, AdamW,
weight decay 1e-4; the pixels as a TABULAR CSV; {meta["epochs"]["mlp"]} epochs),
`examples/models/torch_cnn.py` with two conv-BatchNorm-ReLU-pool blocks of 8 and 16 channels
(3x3, no dropout, Adam; {meta["epochs"]["cnn"]} epochs), and `examples/models/torch_adapter.py`: a head of 32
units (AdamW, weight decay 1e-4, no dropout; {meta["epochs"]["cnn"]} epochs) on a frozen base, the three
conv-BatchNorm-ReLU-pool blocks (32, 64, 128 channels) of a TorchCnn pre-trained here first for
{meta["epochs"]["base"]} epochs on the same training rows and given to the trials as their zoo model
(`TrialContext.zoo_params`, as a worker gives it). Rows/s = training rows x epochs x K / wall seconds
from the first trial's `train()` to the last one's end (setup from a warm data cache, training and
`dump_parameters`; not evaluation). Each MLP measurement ran {args.repeats} times, the ways back to back:
rows/s are medians, a ratio is the median of the repeats' ratios (their range in brackets); the
CNN's ran once. Every process reads the datasets through one
`baobab.worker.DataCache`, filled before the clocks start. The trial processes ran with
`OMP_WAIT_POLICY={meta["omp_wait_policy"]}`: with OpenMP's default spin-waiting a two-thread torch
process on these shared cores spins most of the time (10 to 100 times slower when tried).

## Throughput

{throughput_table(rows)}

{verdict(rows)}

{packing(rows)}

## Packing: what fusion "auto" chooses

Under `train_args.fusion = "auto"` (the default) the first trial of each structure measures, on its
worker slot (one torch thread here), how many stacked copies train fastest
(`baobab.model.profile_fusion`), and later trials of that structure run in groups of that size, one
group per slot. The "auto" way above runs the K trials so: groups of the chosen size spread over the
pool's {CORES} one-thread processes. The measurement itself is not in those times (it is paid once per
structure of a sub-job, not per group).

{auto_section(rows, profiles)}

At K=1, and for any K below the core count, the independent way leaves cores idle while the fused
process uses them all. The per-CPU-second figures count the fused process's threads, waiting included.

## Each fused member against its independent run with the same seed

{equality_table(rows)}

Largest absolute differences over the K members, with the learning rate of the member where each
occurs; "relative" divides a tensor's largest difference by its largest magnitude. "That member
nudged" is a control: the member with the largest parameter difference trained once more unfused,
its initial weights moved one float up (`torch.nextafter`), against its plain independent run; it
says how far rounding alone carries that trial over its steps (one perturbation at the start,
where fusing rounds otherwise at every step, so it can only show that a trial is that sensitive,
not that it is not). "That member fused alone" is the largest difference of a parameter with a
gradient between a stack of that member only (K=1) and the K-member stack, in the same process:
0 says the other members did not change it; more, that the bigger stack rounds it otherwise
(vmap runs the CNN's convolutions as one grouped convolution over the members). Each member
trained {mlp_steps} steps (MLP) or {cnn_steps} (CNN). `tests/model_tests/test_fused.py` holds parameters
with a real gradient to 3e-6 and scores to two examples after 10 to 28 steps; the zero-gradient
state (a convolution's bias right before a BatchNorm, and that BatchNorm's running mean, which Adam
walks on rounding noise by up to about the learning rate a step) to twice the learning rate times the
steps. {threads}

## Adapters on one frozen base: memory

{memory(adapter, args.cnn_ks)}

The stacked state is what `baobab.model.stack_bytes` counts (it equals the bytes of the stack's
tensors after a step: `tests/model_tests/test_fused.py`); the members' own modules point at the
stack's one copy of the base as well. Here the head (a 1152-32 linear layer, then 32-10) is small
beside the base; on a real pre-trained network the base dominates further.

On this CPU fusing adapters saves memory, not time: the frozen base's forward pass is most of
the work, and each member runs it on its own batches (its own data order), so the stack does
what the separate trials do, with vmap's overhead on top ({_ratio(adapter_row, "fused per process")}
fused per process at K=16). Their profile measured as much, so under `"auto"` they train alone.
"""
    if "setup" in meta:
        report += f"\n{setup_markdown(meta['setup'])}\n"
    (RESULTS / "fusion.md").write_text(report)
    print(report)


def load_run(path: Path) -> tuple[list[Row], dict[str, dict[str, Any]], dict[str, Any]]:
    """The rows, profiles and facts of a run, from the fusion.json it wrote (to write its report again)."""
    payload = json.loads(path.read_text())
    rows = []
    for saved in payload.pop("rows"):
        ways = {name: Way(**way) for name, way in saved["ways"].items()}
        diffs = {name: Diff(**diff) for name, diff in saved["diffs"].items()}
        fields = {f.name for f in dataclasses.fields(Row)} - {"ways", "diffs"}
        rows.append(Row(**{k: v for k, v in saved.items() if k in fields}, ways=ways, diffs=diffs))
    profiles = payload.pop("profiles")
    payload.setdefault("quick", False)
    payload["epochs"].setdefault("base", 2)
    return rows, profiles, payload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="K = 1 and 4 on a small subset")
    parser.add_argument("--limit", type=int, default=4000, help="training plus validation images")
    parser.add_argument("--mlp-epochs", type=int, default=5)
    parser.add_argument("--cnn-epochs", type=int, default=1, help="of the CNN and the adapter trials")
    parser.add_argument("--base-epochs", type=int, default=2, help="of the adapter's pre-trained base")
    parser.add_argument("--repeats", type=int, default=3, help="of each MLP measurement (the CNN's: one)")
    parser.add_argument("--ks", type=lambda s: tuple(map(int, s.split(","))), default=(1, 4, 16, 64))
    parser.add_argument("--cnn-ks", type=lambda s: tuple(map(int, s.split(","))), default=(1, 4, 16, 64))
    parser.add_argument("--from-json", type=Path, help="write the report again from a run's fusion.json")
    args = parser.parse_args()
    if args.from_json is not None:
        rows, profiles, meta = load_run(args.from_json)
        args.quick, args.repeats = meta["quick"], max(len(r.ways["fused"].wall_s) for r in rows)
        args.mlp_epochs, args.cnn_epochs = meta["epochs"]["mlp"], meta["epochs"]["cnn"]
        args.cnn_ks = tuple(r.k for r in rows if r.model.startswith("cnn"))
        write_report(rows, profiles, args, meta)
        return
    if args.quick:
        args.limit, args.ks, args.cnn_ks, args.repeats = 1000, (1, 4), (1, 4), 1
    setup = RunSetup(
        "fusion: the trials are identical in shape and length (no member leaves the stack early, which "
        "restacks the rest), the data is decoded once and shared, and the independent trials pay no platform "
        "overhead (no job driver, no trial rows; see overhead.md for that)",
        placement="not applicable (no job driver: the ways run in pools of this script)",
        fusion="per way: fused, independent (off), fused per process, auto",
        warm_start="off: trials train from scratch, the adapter's on a pre-trained frozen base given as its zoo model",
    )
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="baobab-bench-fusion-") as tmp:
        folder = Path(tmp)
        csv = build_datasets(folder, args.limit)
        images = {name: str(folder / "images" / f"{name}.zip") for name in ("train", "val")}
        (folder / "cache").mkdir()
        train_rows = len(read_image_files(images["train"]).labels)
        base = pretrain_base(images["train"], folder / "base.npz", args.base_epochs)
        data = Data(
            {"csv": {k: str(v) for k, v in csv.items()}, "images": images}, str(folder / "cache"), train_rows, base
        )
        _setup(data, CORES)
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read by the spawned processes' OpenMP
        spawn = multiprocessing.get_context("spawn")
        with (
            spawn.Pool(1, initializer=_setup, initargs=(data, CORES)) as one,
            spawn.Pool(CORES, initializer=_setup, initargs=(data, 1)) as pool,
        ):
            profiles: dict[str, dict[str, Any]] = {}
            for case in cases(args):
                _warm(case)  # fills the cache
                one.apply(_warm, (case,))
                pool.map(_warm, [case] * CORES, chunksize=1)
                case_rows, profiles[case.name] = run_case(case, one, pool, data)
                rows += case_rows
        meta = {
            "date": datetime.date.today().isoformat(),
            "cores": CORES,
            "torch": torch.__version__,
            "niceness": os.nice(0),
            "omp_wait_policy": os.environ["OMP_WAIT_POLICY"],
            "val_rows": len(read_image_files(images["val"]).labels),
            "epochs": {"mlp": args.mlp_epochs, "cnn": args.cnn_epochs, "base": args.base_epochs},
            "quick": args.quick,
            "setup": setup.finish(),
        }
    write_report(rows, profiles, args, meta)


if __name__ == "__main__":
    main()
