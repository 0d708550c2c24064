"""How hard each regret table is to finish on: how many of its cells are as good as a method's median.

``bench/strategies.py --part regret`` reports each method's median regret after 200
evaluations on 14 tables. Whether a small gap between two methods means anything depends
on the table: where hundreds of cells lie within a regret, a search that does worse has
missed an easy target; where only a handful do, finishing under that regret means hitting
one of those few cells, and ten seeds decide it by luck as much as by method. This reads the
committed ``results/strategies-regret.json`` and, for each table, counts the cells whose
regret is at most ``auto``'s and Optuna's TPE's median regret, and the gap between the best
cell and the next one. No search runs here: the tables are looked up whole.

    .venv/bin/python bench/regret_shape.py     # seconds; writes results/regret_shape.md and .json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
from setup_record import RunSetup, setup_markdown
from strategies import RESULTS, TABLES, table

#: The methods compared cell by cell: Baobab's default and the peer the regret result measures it against.
METHODS = ("auto", "optuna-tpe")


def shape(name: str, regret: dict[str, Any]) -> dict[str, Any]:
    """One table's cells against the median regrets of :data:`METHODS` in ``regret`` (its entry of the result)."""
    _, scores, best = table(name)
    cells = best - np.fromiter(scores.values(), dtype=float)
    ordered = np.sort(cells)
    methods = {}
    for method in METHODS:
        median = regret["methods"][method]["median_regret"]
        within = int(np.sum(cells <= median + 1e-12))
        methods[method] = {"median_regret": median, "cells_within": within, "share_within": within / len(cells)}
    return {
        "role": regret["role"],
        "cells": len(cells),
        "gap_to_second": float(ordered[1]),
        "methods": methods,
    }


def report(shapes: dict[str, dict[str, Any]], record: dict[str, Any]) -> str:
    rows = [
        "| table | role | cells | best minus the next cell | auto: median regret, cells at or under it "
        "| Optuna TPE: median regret, cells at or under it |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name, s in shapes.items():
        cells = [
            f"{m['median_regret']:.4f}, {m['cells_within']:,} ({100 * m['share_within']:.2f}%)"
            for m in (s["methods"][method] for method in METHODS)
        ]
        rows.append(f"| {name} | {s['role']} | {s['cells']:,} | {s['gap_to_second']:.4f} | {cells[0]} | {cells[1]} |")
    behind = [
        name
        for name, s in shapes.items()
        if s["methods"]["auto"]["median_regret"] > s["methods"]["optuna-tpe"]["median_regret"]
    ]
    lines = "\n".join(rows)
    said = [
        f"on {name} {s['methods']['auto']['cells_within']:,} of its {s['cells']:,} cells are at or under `auto`'s "
        f"median regret and {s['methods']['optuna-tpe']['cells_within']:,} under Optuna's TPE's, and its best cell "
        f"lies {s['gap_to_second']:.4f} above the next one"
        for name, s in shapes.items()
        if name in behind
    ]
    verdict = (
        f"`auto` is behind Optuna's TPE on {', '.join(behind)}: " + "; ".join(said) + "."
        if behind
        else "`auto` is at or under Optuna's TPE's median regret on every table."
    )
    return f"""# How many cells each regret table offers at a method's median regret

Written by `bench/regret_shape.py` from `bench/results/strategies-regret.json` (its run of
{record["regret_date"]}, commit `{record["regret_commit"][:8]}`): for each table, the cells whose regret
(the table's best mean score minus the cell's) is at most `auto`'s and Optuna's TPE's median regret
after 200 evaluations over 10 seeds. A method finishes at or under a regret only by evaluating one of
those cells; the fewer they are, the more a difference between two medians is down to which seeds
found one. Scores are the tables' own (validation accuracy as a fraction, or minus the validation
loss for HPOLib), so regrets compare within a table only.

{lines}

{verdict}

{setup_markdown(record)}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"where the report goes (default {RESULTS})")
    args = parser.parse_args()
    setup = RunSetup(
        "nothing runs: the tables are read whole and set against the committed regret result",
        fusion="does not apply",
        warm_start="does not apply",
        placement="does not apply",
    )
    regret = json.loads((RESULTS / "strategies-regret.json").read_text())
    shapes = {name: shape(name, regret["tables"][name]) for name in TABLES}
    record = {
        **setup.finish(),
        "regret_commit": regret["setup"]["commit"],
        "regret_date": regret["setup"]["date"],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "regret_shape.json").write_text(json.dumps({"tables": shapes, "setup": record}, indent=2) + "\n")
    (args.out / "regret_shape.md").write_text(report(shapes, record))
    print(report(shapes, record))


if __name__ == "__main__":
    main()
