"""Every measured figure the docs and the README quote comes from a results file.

A page quotes a benchmark's figure through a macro (``{{ fig(...) }}``, ``{{ ratio(...) }}``,
docs/_gen/results.py) that reads ``bench/results/*.json`` when the site is built; the strict
build fails on a macro whose source is missing. This test fails on the other way a figure
gets in: typed into the prose. It looks, outside code and macros, for what measured figures
look like (a ratio ``1.05x``, a latency ``19.8 ms``, a share ``98.0%``, a score ``0.788``, a
memory figure ``3.3 GiB``, a time ``31 s`` or ``40.0 CPU seconds``) and fails on each one that is
neither a setting's default written beside its name nor a rule of the platform listed in
:data:`RULES`.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
PAGES = sorted((ROOT / "docs").glob("*.md")) + sorted((ROOT / "docs").glob("*/*.md")) + [ROOT / "README.md"]

#: The units a measured figure comes in: a ratio, milliseconds, a percentage, a memory size (KiB to TiB,
#: or KB to TB), seconds (``s``, ``seconds``, ``CPU seconds``).
UNITS = r"x|×|ms|%|[KMGT]i?B|s|seconds?|CPU[ -]seconds?"
#: What a measured figure looks like: a number in one of :data:`UNITS`, or a score below 1.
FIGURE = re.compile(rf"(?<![\w.])(\d[\d,]*(?:\.\d+)?\s?(?:{UNITS})(?![\w])|0\.\d{{2,}})")
#: Parts of a page that are not prose: a setting's default beside its name, as `` `BAOBAB_HEARTBEAT_S` (5 s)``
#: or `` (`BAOBAB_LEASE_S`, 30 s)`` (what the settings registry declares, not what a run measured), fenced
#: code, inline code, macros, link targets, HTML comments.
NOT_PROSE = re.compile(
    r"`BAOBAB_[A-Z0-9_]+`(?: \(|, )\d[\d,.]*\s?[A-Za-z]*\)"
    r"|```.*?```|`[^`\n]*`|\{\{.*?\}\}|\]\([^)]*\)|<!--.*?-->",
    re.DOTALL,
)

#: Numbers that look like figures but are rules of the platform (a threshold, a limit, an aim),
#: by page and the phrase that holds them. Each states what the code does, not what a run measured.
RULES: dict[str, tuple[str, ...]] = {
    # The aim bench/scale.py's short part is held to (slots busy while work waits, one advisor).
    # and cluster mode's (the cost of a trial beyond a bare Celery worker's).
    "docs/cluster.md": ("aim is 95%", "the aim is at most 10 ms beyond"),
    # baobab/advisor/_scheduling.py's PROFILE_SHARE, baobab/model/_packing.py's PAYS and profile_fusion's
    # budget_s; placement/_search.py's FAIR_SLACK; placement/_driving.py's budget (50 ms, WORK_SHARE,
    # DRIVER_SHARE) and its docstring's examples.
    "docs/experimental.md": (
        "within the slot's memory and 10 s",
        "under 3% of the slot-seconds",
        "training alone by 10%",
        "more than 5% later than",
        "of the slot-seconds it places",
        "a decision on 2 slots of one-second trials",
    ),
    # baobab/predictor/_history.py's INTERVAL_S: how often the predictor keeps a /stats point.
    "docs/operations.md": ("every 10 s it also keeps a point",),
    # baobab/store/_datasets.py's _RATIO_FLOOR: members below it are not held to the compression ratio.
    "docs/security.md": ("for a member of 1 MiB or more",),
    # baobab/predictor/_main.py's scale_up_after_s, scale_down_after_s and request_log_flush_s.
    "docs/serving.md": ("once the mean over 2 s is above", "removes the newest after 30 s", "writes them, within 10 s"),
    # baobab/worker/_memory.py's _FLOOR_MB: the least memory a local trial slot is given by default.
    "docs/templates.md": ("least 2 GiB",),
    # _FLOOR_MB again; baobab/advisor/_gpu_share.py's DEVICE_SHARE and GAIN; issue 30's aim for sharing a GPU.
    "docs/train-jobs.md": ("2 GiB at least", "fits in 90% of the device", "at least 1.15x as fast", "aim of 3x"),
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
