"""Every measured figure the docs and the README quote comes from a results file.

A page quotes a benchmark's figure through a macro (``{{ fig(...) }}``, ``{{ ratio(...) }}``,
docs/_gen/results.py) that reads ``bench/results/*.json`` when the site is built; the strict
build fails on a macro whose source is missing. This test fails on the other way a figure
gets in: typed into the prose. It looks, outside code and macros, for what measured figures
look like (a ratio ``1.05x``, a latency ``19.8 ms``, a share ``98.0%``, a score ``0.788``)
and fails on each one that is not a rule of the platform listed in :data:`RULES`.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
PAGES = sorted((ROOT / "docs").glob("*.md")) + sorted((ROOT / "docs").glob("*/*.md")) + [ROOT / "README.md"]

#: What a measured figure looks like: a ratio, milliseconds, a percentage, or a score below 1.
FIGURE = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?\s?(?:x|×|ms|%)(?![\w])|0\.\d{2,})")
#: Parts of a page that are not prose: fenced code, inline code, macros, link targets, HTML comments.
NOT_PROSE = re.compile(r"```.*?```|`[^`\n]*`|\{\{.*?\}\}|\]\([^)]*\)|<!--.*?-->", re.DOTALL)

#: Numbers that look like figures but are rules of the platform (a threshold, a limit, an aim),
#: by page and the phrase that holds them. Each states what the code does, not what a run measured.
RULES: dict[str, tuple[str, ...]] = {
    # The aim bench/scale.py's short part is held to (slots busy while work waits, one advisor).
    # and cluster mode's (the cost of a trial beyond a bare Celery worker's).
    "docs/cluster.md": ("aim is 95%", "the aim is at most 10 ms beyond"),
    # baobab/advisor/_scheduling.py's PROFILE_SHARE, baobab/model/_packing.py's PAYS; placement/_search.py's
    # FAIR_SLACK; placement/_driving.py's budget (50 ms, WORK_SHARE, DRIVER_SHARE) and its docstring's examples.
    "docs/experimental.md": (
        "under 3% of the slot-seconds",
        "training alone by 10%",
        "more than 5% later than",
        "of the slot-seconds it places",
        "a decision on 2 slots of one-second trials",
    ),
    # bench/warm_start.py's TARGET_FRACTION: the target the epochs are counted to.
    "docs/zoo.md": ("98% of the cold final accuracy",),
}


def _figures(page: Path) -> list[str]:
    text = NOT_PROSE.sub(lambda m: "\n" * m.group(0).count("\n") or " ", page.read_text())
    if text.startswith("---"):  # front matter
        text = text.split("---", 2)[-1]
    allowed = RULES.get(page.relative_to(ROOT).as_posix(), ())
    out = []
    for match in FIGURE.finditer(text):
        start = text.rfind("\n", 0, match.start()) + 1
        end = text.find("\n", match.end())
        sentence = text[start : end if end >= 0 else len(text)]
        if any(phrase in sentence for phrase in allowed):
            continue
        out.append(f"{page.relative_to(ROOT)}:{text[: match.start()].count(chr(10)) + 1}: {match.group(0)!r}")
    return out


def test_no_page_types_a_measured_figure_by_hand() -> None:
    unsourced = [found for page in PAGES for found in _figures(page)]
    assert not unsourced, (
        "figures typed into the docs instead of read from bench/results with {{ fig(...) }} or "
        "{{ ratio(...) }} (docs/_gen/results.py), or rules missing from RULES:\n" + "\n".join(unsourced)
    )
