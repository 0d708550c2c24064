"""The benchmark figures the pages quote, read from ``bench/results`` when the site is built.

A page that quotes a measured figure opts in with ``render_macros: true`` in its front
matter (mkdocs-macros renders only those) and names the figure's source instead of
copying it::

    the search completed {{ ratio("placement.json", "gain/search/trials_per_hour",
    "gain/fcfs/trials_per_hour") }}x the trials per hour of one trial per slot

so a rerun of the benchmark changes the page, and a figure cannot quietly come from another
run. A path is the JSON's keys, list indices and row selectors (``system=Baobab``) joined
by ``/`` (keys may hold spaces and dots); prefer a selector to an index, which a rerun may
shift. ``tests/docs_tests/test_figures.py`` fails on a measured figure written into a page by
hand.

The benchmark index (``{{ benchmark_index() }}``) shows each result's commit and whether the
code it measures changed since, computed from git at build time: a result older than its
code says so on the page.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"


class Benchmark(NamedTuple):
    """What the index says of one result beyond its own text (a NamedTuple: mkdocs-macros
    loads this file without registering it as a module, which dataclasses need).

    Attributes:
        machine: where it ran.
        favours: what its setup favours.
        measures: the code its figures depend on, besides the script that wrote it (paths
            from the repository root); a commit there after the result's makes it stale.
    """

    machine: str
    favours: str
    measures: tuple[str, ...]


_DRIVER = ("baobab/advisor", "baobab/worker", "baobab/store")
_SERVING = ("baobab/predictor", "baobab/worker/_inference.py", "baobab/worker/_fused_inference.py")
_STRATEGIES = (
    "baobab/advisor/_tpe.py",
    "baobab/advisor/_bayes.py",
    "baobab/advisor/_random.py",
    "baobab/advisor/_evolution.py",
    "baobab/advisor/_factory.py",
    "baobab/advisor/_space.py",
)
_FUSION = ("baobab/model/_fused.py", "baobab/model/_stacked.py", "baobab/model/_fusion_profile.py")
_PLACEMENT = ("baobab/advisor/placement", "baobab/advisor/_scheduling.py", "baobab/advisor/_packing.py")

#: Every result in bench/results by its Markdown file. The build fails on a result with no
#: entry here, so a new result cannot go unlisted.
BENCHMARKS: dict[str, Benchmark] = {
    "overhead.md": Benchmark(
        "2 cores, shared",
        "no one: Baobab, Optuna and a bare loop on the same machine, workers and SQLite",
        _DRIVER,
    ),
    "overhead-celery.md": Benchmark(
        "2 cores, shared; every service on it", "the bare Celery worker, which does no bookkeeping", _DRIVER
    ),
    "strategies.md": Benchmark(
        "2 cores, shared", "no one: table lookups on NAS-Bench-201, the same seeds for each", _STRATEGIES
    ),
    "strategies-regret.md": Benchmark(
        "2 cores, shared",
        "`tpe` and `auto` on the six tuning tables, where `tpe`'s settings and `auto`'s rule were chosen; "
        "otherwise no one: table lookups, the same seeds; proposal times from a shared machine",
        _STRATEGIES,
    ),
    "regret_shape.md": Benchmark(
        "2 cores (no timing)",
        "no one: it counts the regret tables' cells against the committed regret result",
        ("bench/strategies.py", "bench/results/strategies-regret.json"),
    ),
    "strategies-scale.md": Benchmark(
        "2 cores, shared", "a before/after of `tpe` and `bayes` on the same seeds", _STRATEGIES
    ),
    "strategies-tpe-fix.md": Benchmark(
        "2 cores, shared", "a one-off before/after record of `tpe`; the 'before' is not reproducible", ()
    ),
    "spaces.md": Benchmark(
        "2 cores, shared",
        "re-evaluating a cell (as Optuna's TPE does) when judged by single noisy runs",
        (*_STRATEGIES, "baobab/space"),
    ),
    "spaces-fashion.md": Benchmark(
        "2 cores, shared",
        "neither: evolution and random under the same 8-minute budget",
        (*_STRATEGIES, "baobab/space"),
    ),
    "early_stopping.md": Benchmark(
        "2 cores",
        "the quick run: small data, so stopping early costs little accuracy",
        ("baobab/advisor/_stopping.py", "baobab/advisor/_asha.py", "baobab/advisor/_median.py"),
    ),
    "enas_fashion_mnist.md": Benchmark(
        "2 cores, quiet",
        "architectures that learn fast; one trial at a time, so concurrent shared trainings are not exercised; at "
        "equal cost, load during random search's run gives ENAS more time",
        ("baobab/advisor/_enas.py", "baobab/advisor/_enas_controller.py", "baobab/advisor/_enas_phases.py"),
    ),
    "enas_fashion_mnist_tuning.md": Benchmark(
        "2 cores", "tuning on held-back seeds, not the reported ones", ("baobab/advisor/_enas_controller.py",)
    ),
    "enas_shared_updates.md": Benchmark(
        "2 cores",
        "concurrency modelled, not run: each pair trains one after the other from the same weights",
        ("baobab/advisor/driver/_shared_weights.py",),
    ),
    "warm_start.md": Benchmark(
        "2 cores, shared", "the zoo, in its same-task case (parents on the same split)", ("baobab/zoo",)
    ),
    "shared_data.md": Benchmark(
        "2 cores",
        "the cache: 8 trials of one job on one machine, all on the same data",
        ("baobab/worker/_data_cache.py", "baobab/worker/_cache.py", "baobab/worker/_data_reads.py"),
    ),
    "fusion.md": Benchmark(
        "2 cores, shared, CPU only",
        "fusion: identical trials, data decoded once; the independent trials pay no platform overhead",
        _FUSION,
    ),
    "gpu.md": Benchmark(
        "NVIDIA H200, 16 cores",
        "fusion: members alike in shape and length, data kept on the GPU, no platform overhead",
        _FUSION,
    ),
    "automl_budget.md": Benchmark(
        "2 cores",
        "Baobab: its trials warm-start from earlier trials of the job and the zoo by default, while Optuna "
        "trains each from scratch (the `baobab-cold` way shows what warm start adds); Optuna calls the "
        "templates directly, while Baobab pays its driver, rows and store",
        ("baobab",),
    ),
    "automl_compare.md": Benchmark(
        "2 cores",
        "Baobab: its trials warm-start from earlier trials of the job by default; Ray Tune: ASHA stops poor trials "
        "early, which neither Optuna nor Baobab's defaults do; Optuna: it calls the template directly, while Baobab "
        "pays its driver, rows and store and Ray its reports and checkpoints",
        ("baobab",),
    ),
    "placement.md": Benchmark(
        "2 cores",
        "the forecast: one job at a time on a quiet machine, every template measured first",
        _PLACEMENT,
    ),
    "gpu_share.md": Benchmark(
        "NVIDIA H200, 16 cores",
        "none of the ways in particular: the same seed, each from a fresh platform, run one after another (a cache "
        "the first warmed helps the later ones); the measuring of the shared and fused ways is inside the budget",
        ("baobab/advisor/_gpu_share.py", "baobab/advisor/driver", "baobab/worker"),
    ),
    "gpu_share_2min.md": Benchmark(
        "NVIDIA H200, 16 cores",
        "as gpu_share.md, with 2-minute jobs: the measuring takes a larger part of them",
        ("baobab/advisor/_gpu_share.py", "baobab/advisor/driver", "baobab/worker"),
    ),
    "placement_gpu.md": Benchmark(
        "NVIDIA H200",
        "one trial at a time on the GPU; trials of seconds, so fusion profiles cost more than they gain",
        _PLACEMENT,
    ),
    "deterministic.md": Benchmark(
        "any: virtual time on a simulated cluster",
        "nothing: both modes run the same trial lengths, in virtual time",
        ("baobab/advisor/_deterministic.py", "baobab/advisor/_scheduling.py", "baobab/advisor/driver"),
    ),
    "scale.md": Benchmark(
        "2 cores, shared; simulated 1,000 slots",
        "the driver: the cluster is simulated, only the driver's time is real",
        _DRIVER,
    ),
    "scale_api.md": Benchmark(
        "2 cores, shared, PostgreSQL",
        "neither: one request at a time on loopback; figures vary by tens of percent",
        ("baobab/admin", "baobab/store"),
    ),
    "scale_proposals.md": Benchmark(
        "2 cores, shared",
        "Baobab: its strategies run in-process with no store; Optuna's PostgreSQL figures include storage",
        _STRATEGIES,
    ),
    "serving.md": Benchmark("2 cores", "the predictor: Ray Serve's five processes share the same 2 cores", _SERVING),
    "serving_fused.md": Benchmark(
        "2 cores, shared",
        "the fan-out's costs are per process; on 2 cores five workers cannot compute in parallel",
        _SERVING,
    ),
    "serving_fused_gpu.md": Benchmark(
        "NVIDIA H200, 16 cores",
        "the stacked pass is cheap on the GPU; the CPU work of five answers is the bound",
        _SERVING,
    ),
    "web_large_job.md": Benchmark(
        "2 cores, shared, SQLite, headless Chromium",
        "a finished job (no live polling); figures vary by tens of percent",
        ("web/src", "baobab/admin"),
    ),
    "web_large_job_100000.md": Benchmark(
        "2 cores, PostgreSQL, headless Chromium", "a finished job (no live polling)", ("web/src", "baobab/admin")
    ),
    "user_job.md": Benchmark(
        "2 cores",
        "no one: the same job, data and budget for each way, in turn on the same machine",
        ("baobab",),
    ),
}


class FigureError(LookupError):
    """A page names a figure its results file does not hold."""


@cache
def _load(file: str) -> Any:
    path = RESULTS / file
    if not path.is_file():
        raise FigureError(f"bench/results/{file} does not exist")
    return json.loads(path.read_text())


def _pick(items: list[Any], part: str) -> Any:
    """The one item of ``items`` whose fields match ``part`` (``system=Baobab&workload=noop``): a
    row named by what it is, so a rerun that reorders the rows cannot shift a figure to another."""
    wanted = [condition.split("=", 1) for condition in part.split("&")]
    found = [item for item in items if isinstance(item, dict) and all(str(item.get(k)) == v for k, v in wanted)]
    if len(found) != 1:
        raise LookupError(part)
    return found[0]


def value(file: str, path: str) -> Any:
    """The field at ``path`` of ``bench/results/<file>``: keys, list indices or row selectors
    (``key=value&key=value``, exactly one row matching) joined by ``/``."""
    node = _load(file)
    for part in path.split("/"):
        try:
            if isinstance(node, list):
                node = _pick(node, part) if "=" in part else node[int(part)]
            else:
                node = node[part]
        except (LookupError, ValueError, TypeError):
            raise FigureError(f"bench/results/{file} has no {path!r} (stopped at {part!r})") from None
    return node


def number(file: str, path: str) -> float:
    found = value(file, path)
    if isinstance(found, bool) or not isinstance(found, (int, float)):
        raise FigureError(f"bench/results/{file}: {path!r} is {found!r}, not a number")
    return float(found)


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def _script(result: str) -> str | None:
    """The script that writes ``result``: ``bench/<stem>.py`` for the longest stem of its name
    (``placement_gpu.md`` and ``overhead-celery.md`` come from placement.py and overhead.py)."""
    parts = re.split(r"(?=[-_])", result.removesuffix(".md"))
    for n in range(len(parts), 0, -1):
        script = f"bench/{''.join(parts[:n])}.py"
        if (ROOT / script).is_file():
            return script
    return None


def result_commit(result: str) -> tuple[str | None, bool]:
    """The commit the result ran on and whether the result recorded it itself (its JSON's
    ``commit``); else the last commit that wrote the result, which the run was at or after."""
    sidecar = RESULTS / result.replace(".md", ".json")
    if sidecar.is_file():
        data = json.loads(sidecar.read_text())
        # bench/setup_record.py's record; a few older results kept the commit at the top.
        setup = data.get("setup", data) if isinstance(data, dict) else {}
        recorded = setup.get("commit") if isinstance(setup, dict) else None
        if isinstance(recorded, str) and recorded and _git("cat-file", "-e", f"{recorded}^{{commit}}") is not None:
            return recorded, True
    return _git("log", "-1", "--format=%H", "--", f"bench/results/{result}") or None, False


def changes_since(commit: str, paths: Sequence[str]) -> int | None:
    """How many commits changed ``paths`` after ``commit`` (None when git cannot tell)."""
    if not paths:
        return 0
    out = _git("rev-list", "--count", f"{commit}..HEAD", "--", *paths)
    return int(out) if out is not None and out.isdigit() else None


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def benchmark_index() -> str:
    """The benchmark page's table: every result, when it ran, on what, favouring what, and
    whether it is older than its code."""
    results = sorted(p.name for p in RESULTS.glob("*.md"))
    unlisted = [name for name in results if name not in BENCHMARKS]
    if unlisted:
        raise FigureError(f"docs/_gen/results.py: add {', '.join(unlisted)} to BENCHMARKS")
    rows = []
    for name in results:
        bench = BENCHMARKS[name]
        title = (RESULTS / name).read_text().splitlines()[0].lstrip("# ").strip()
        commit, recorded = result_commit(name)
        if commit is None:
            when, fresh = "not committed", "not committed"
        else:
            date = _git("log", "-1", "--format=%cs", commit) or "?"
            when = f"{date}, `{commit[:8]}`" + ("" if recorded else " (result's commit)")
            script = _script(name)
            changed = changes_since(commit, [*bench.measures, *([script] if script else [])])
            fresh = "unknown" if changed is None else "current" if changed == 0 else f"**stale**: {changed} since"
        cells = (f"[{_cell(title)}](results/{name})", when, fresh, bench.machine, _cell(bench.favours))
        rows.append(f"| {' | '.join(cells)} |")
    return "\n".join(
        [
            "| Result | Ran on | Code since | Machine | What its setup favours |",
            "| --- | --- | --- | --- | --- |",
            *rows,
        ]
    )


def define_env(env: Any) -> None:
    """mkdocs-macros' entry point: the macros pages may call."""

    @env.macro
    def fig(file: str, path: str, fmt: str = "", scale: float = 1.0) -> str:
        """One figure: ``fmt`` as in :func:`format` (``".1f"``), after multiplying by ``scale``
        (100 for a share quoted as a percentage). Text fields are quoted as they are."""
        found = value(file, path)
        if isinstance(found, str):
            return found
        return format(number(file, path) * scale, fmt)

    @env.macro
    def ratio(file: str, num: str, den: str, fmt: str = ".2f") -> str:
        """``num`` over ``den``, both of ``file``: a speed-up the result's own figures give."""
        return format(number(file, num) / number(file, den), fmt)

    env.macro(benchmark_index)
