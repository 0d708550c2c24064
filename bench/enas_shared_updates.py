"""Shared-weight trainings that run at the same time: which way of combining them ENAS should keep.

With two slots, two ``train_shared`` trials of an ENAS job start from the same shared
weights ``W`` and end at ``r1`` and ``r2``. The ways to go on from there:

- **last** (Baobab before): the shared weights become ``r2``, the last to finish; ``r1`` is lost.
- **sum** (Baobab now, ``baobab.advisor.driver._shared_weights.add_update``): ``W + (r1 - W) + (r2 - W)``.
- **mean**: ``W + ((r1 - W) + (r2 - W)) / 2``.
- **serial**: no two at once: ``r2`` trained from ``r1``; the other slot idles, so the same
  number of trainings takes twice the wall time.

Setup: the ``--template`` of ``bench/enas_fashion_mnist.py`` (``space``: ``EnasMacro``, whose
shared weights are the super-network; ``cnn``: ``EnasCnn``) at half width (DOWNSCALE), one epoch per training
(EARLY_STOP) of an architecture drawn at random, on the Fashion-MNIST subset of
``bench/enas_fashion_mnist.py``, in this process. One training from scratch gives the
first shared weights; then ``--rounds`` rounds of two trainings each. After every round
the shared weights are scored: the mean validation accuracy (whole validation set,
batch norm re-estimated as ENAS's evaluations do) of ``--archs`` fixed random
architectures. The same architectures are trained in the same order under every method.
Wall time is counted in rounds of one training per slot: a round of two concurrent
trainings is one, two serial trainings are two.

    .venv/bin/python bench/enas_shared_updates.py            # about 3 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from enas_fashion_mnist import RESULTS, TEMPLATES, architecture, shared_scores, template_class
from setup_record import RunSetup, setup_markdown

from baobab.advisor import make_strategy, trial_knobs
from baobab.advisor.driver._shared_weights import add_update
from baobab.model import validate_knob_config
from baobab.store import build_fashion_mnist

METHODS = ("last", "sum", "mean", "serial")


def train(
    template: type, config: dict, arch: dict[str, Any], data: dict[str, str], shared: Any, seed: int
) -> dict[str, Any]:
    knobs = trial_knobs(config, arch, {"SHARE_PARAMS": True, "DOWNSCALE": True, "EARLY_STOP": True})
    model = template(**knobs)
    model.train(data["train"], shared_params=shared, seed=seed)
    return model.dump_parameters()


def score(template: type, archs: list, data: dict[str, str], shared: Any) -> float:
    """The mean accuracy of ``archs`` under the shared weights ``shared``."""
    return statistics.fmean(shared_scores(template, data, shared, archs))


def run(template: type, data: dict[str, str], seed: int, rounds: int, n_archs: int) -> dict[str, Any]:
    config = validate_knob_config(template.get_knob_config())
    strategy = make_strategy("random", config, seed=seed)
    archs = [architecture(config, strategy.propose(i)) for i in range(2 * rounds + n_archs + 1)]
    first, pairs, scored = archs[0], archs[1 : 1 + 2 * rounds], archs[1 + 2 * rounds :]
    start = train(template, config, first, data, None, seed * 1000)
    out: dict[str, Any] = {"seed": seed, "start": score(template, scored, data, start)}
    for method in METHODS:
        shared, curve = start, []
        for r in range(rounds):
            a1, a2 = pairs[2 * r], pairs[2 * r + 1]
            s1, s2 = seed * 1000 + 2 * r + 1, seed * 1000 + 2 * r + 2
            if method == "serial":
                shared = train(template, config, a2, data, train(template, config, a1, data, shared, s1), s2)
            else:
                r1 = train(template, config, a1, data, shared, s1)
                r2 = train(template, config, a2, data, shared, s2)
                if method == "last":
                    shared = r2
                elif method == "sum":
                    shared = add_update(add_update(shared, shared, r1), shared, r2)
                else:
                    # an entry only one of them holds with that shape (a candidate only it trained): its own
                    half = {k: (v + r2[k]) / 2 if isinstance(v, np.ndarray) and v.dtype.kind == "f"
                            and getattr(r2.get(k), "shape", None) == v.shape else v for k, v in r1.items()}  # fmt: skip
                    shared = {**r2, **half}
            curve.append(score(template, scored, data, shared))
        out[method] = curve
        print(f"seed {seed} {method}: {[round(c, 3) for c in curve]}", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--archs", type=int, default=8, help="architectures the shared weights are scored on")
    parser.add_argument("--limit", type=int, default=5000)
    parser.add_argument("--template", choices=sorted(TEMPLATES), default="space")
    args = parser.parse_args()
    torch.set_num_threads(2)
    template = template_class(args.template, final_epochs=5)
    started = time.perf_counter()
    setup = RunSetup(
        "concurrency modelled, not run: each pair trains one after the other from the same weights, as two "
        "slots would; evaluations in between, which on the platform may read weights one training old, are not "
        "modelled",
        placement="not applicable (no job driver: the trainings run in this process)",
        fusion="not applicable (no platform)",
        warm_start="not applicable (the shared weights are what is measured)",
    )
    with tempfile.TemporaryDirectory(prefix="baobab-bench-") as tmp:
        built = build_fashion_mnist(Path(tmp), limit=args.limit, val_fraction=0.2, seed=0)
        data = {split.name: str(split.path) for split in built.splits}
        runs = [run(template, data, seed, args.rounds, args.archs) for seed in range(args.seeds)]
    result = {
        "date": datetime.date.today().isoformat(),
        "machine": f"{torch.get_num_threads()} torch threads, Python {platform.python_version()}, "
        f"torch {torch.__version__}",
        # The command line; "setup" is the record every result carries (bench/setup_record.py).
        "args": vars(args),
        "seconds": time.perf_counter() - started,
        "runs": runs,
        "setup": setup.finish(),
    }
    (RESULTS / "enas_shared_updates.json").write_text(json.dumps(result, indent=2) + "\n")
    rounds = args.rounds

    def mean_at(method: str, r: int) -> float:
        return statistics.fmean(run[method][r] for run in runs)

    lines = [
        "# Concurrent shared-weight trainings: last wins, sum, mean, serial",
        "",
        f"`bench/enas_shared_updates.py`, {result['date']}, {result['machine']}. {args.seeds} seeds; Fashion-MNIST "
        f"subset of {args.limit} images (80% train). `{TEMPLATES[args.template][1]}` half width, one epoch per "
        "training of a random "
        f"architecture; shared weights scored by the mean whole-validation accuracy of {args.archs} fixed random "
        "architectures on them (batch norm re-estimated). One training from scratch first (its score: "
        f"{statistics.fmean(r['start'] for r in runs):.3f}), then rounds of two trainings. A *round* is one training "
        "per slot of wall time: two concurrent trainings take one, two serial ones two.",
        "",
        "| method | after 1 round | after 2 | after " + str(rounds) + " | trainings folded in | slot-rounds |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for method in METHODS:
        folded = 2 * rounds if method != "last" else rounds
        lines.append(
            f"| {method} | {mean_at(method, 0):.3f} | {mean_at(method, 1):.3f} | {mean_at(method, rounds - 1):.3f} "
            f"| {folded} | {2 * rounds if method == 'serial' else rounds} |"
        )
    lines += [
        "",
        f"At equal wall time ({rounds} slot-rounds), serial has done {rounds} trainings: "
        f"{mean_at('serial', rounds // 2 - 1):.3f}; sum {mean_at('sum', rounds - 1):.3f}, "
        f"last {mean_at('last', rounds - 1):.3f}, mean {mean_at('mean', rounds - 1):.3f}. "
        "Per seed, after the last round: "
        + "; ".join(f"seed {r['seed']}: " + ", ".join(f"{m} {r[m][-1]:.3f}" for m in METHODS) for r in runs),
        "",
        setup_markdown(result["setup"]),
        "",
    ]
    (RESULTS / "enas_shared_updates.md").write_text("\n".join(lines))
    print((RESULTS / "enas_shared_updates.md").read_text())


if __name__ == "__main__":
    main()
