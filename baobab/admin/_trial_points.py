"""A job's trials as the job page's charts read them, each row made into JSON by the database.

``trials/changes`` sends every trial above an id; ``trials/sample`` sends only the trials
the charts would draw of a large job (see :func:`chart_sample`). A 100,000-trial job's
points are 100,000 rows: built as Python objects (JSON columns parsed, times converted,
dicts encoded again) they took 75 ms a thousand; the database writes each row's JSON
array in C, and Python only joins the texts (``bench/scale_api.py`` measures both). The
knobs and policies go through as the JSON they are stored as.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Float,
    Integer,
    Numeric,
    Text,
    and_,
    case,
    cast,
    extract,
    func,
    literal,
    or_,
    select,
    text,
    tuple_,
)
from sqlalchemy.orm import Session

from baobab.store import SubJob, Trial, TrialState

__all__ = ["POINT_FIELDS", "ChartSample", "chart_sample", "point_rows"]

#: What each point's array holds, in order; ``finished_at`` in seconds since the epoch (ms precision).
POINT_FIELDS = ("id", "number", "model_id", "status", "score", "finished_at", "knobs", "policies")
#: The fewest points the scatter keeps of one combination of policies (as ``scoreScatterOption`` in web/).
_MIN_SHARE = 50


def point_rows(
    session: Session, train_job_id: int, where: Sequence[ColumnElement[bool]], *, limit: int | None = None
) -> list[tuple[int, str]]:
    """``(id, JSON array text)`` of the job's trials that match ``where``, by id, at most ``limit``."""
    if session.get_bind().dialect.name == "postgresql":
        finished: Any = func.round(cast(extract("epoch", Trial.finished_at), Numeric), 3)
        point: Any = func.json_build_array(
            Trial.id, Trial.number, SubJob.model_template_id, Trial.status, Trial.score, finished, Trial.knobs,
            Trial.policies,
        )  # fmt: skip
    else:  # SQLite keeps times as UTC text and JSON as text
        finished = func.round((func.julianday(Trial.finished_at) - 2440587.5) * 86400.0, 3)
        point = func.json_array(
            Trial.id, Trial.number, SubJob.model_template_id, Trial.status, Trial.score, finished,
            func.json(Trial.knobs), func.json(Trial.policies),
        )  # fmt: skip
    query = (
        select(Trial.id, cast(point, Text))
        .join(Trial.sub_job)
        .where(SubJob.train_job_id == train_job_id, *where)
        .order_by(Trial.id)
    )
    if limit is not None:
        query = query.limit(limit)
    return [(trial_id, text) for trial_id, text in session.execute(query)]


@dataclass(frozen=True)
class ChartSample:
    """The trials :func:`chart_sample` chose, as points, and what they stand for."""

    #: ``(id, JSON array text)`` by id, as :func:`point_rows` gives them.
    points: list[tuple[int, str]]
    #: The job's highest trial id when it was read: the changes feed goes on from there.
    last_id: int
    #: Per template id: its trials with a score that were left out.
    omitted: dict[int, int]


def chart_sample(session: Session, train_job_id: int, *, points: int, lines: int) -> ChartSample:
    """The trials the job page's charts draw of the job's trials, chosen in the database.

    The page downsamples each chart (``web/src/lib/charts.ts``); this picks the same trials
    without sending the others, so that a 100,000-trial job's page reads a few thousand:

    - the best-score line: every trial that raised the best score so far (by finish time),
      and the last one to finish, so that the line is exact;
    - the scatter: per combination of policies, a grid over its range of about its share
      of ``points`` cells (at least 50), and the best trial of each cell;
    - parallel coordinates: per template, the best quarter of ``lines`` and an even
      sample of the rest, best first (the indices ``sampleBest`` takes);
    - every PENDING or RUNNING trial, so that the changes feed can ask for them again.

    ``omitted`` counts, per template, the trials with a score not sent, read by the same
    statement as the choice, so that the charts can say of how many they show a part.
    """
    job_trials = [SubJob.train_job_id == train_job_id]
    last_id = session.scalar(select(func.max(Trial.id)).join(Trial.sub_job).where(*job_trials))
    if last_id is None:
        return ChartSample([], 0, {})
    dialect = session.get_bind().dialect.name
    upto = [*job_trials, Trial.id <= last_id]
    finished = _epoch(dialect)
    policy = cast(Trial.policies, Text)
    grids = _grids(session, upto, finished, policy, points)

    top = math.ceil(lines / 4)
    want = lines - top
    keys = list(grids)
    base = (
        select(
            Trial.id.label("id"),
            SubJob.model_template_id.label("model"),
            Trial.score.label("score"),
            finished.label("t"),
            # The index of its combination's grid; -1 for none (drawn whole).
            (case({key: i for i, key in enumerate(keys)}, value=policy, else_=-1) if keys else literal(-1)).label("g"),
        )
        .join(Trial.sub_job)
        .where(*upto, Trial.score.is_not(None))
        .cte("base")
    )
    materialized = dialect == "postgresql"  # each row's policies made text once, its cell found once
    if materialized:
        base = base.prefix_with("MATERIALIZED")
    b = base.c
    grid_list = [grids[key] for key in keys]
    done = select(
        b.id, b.model, b.score, b.t, b.g,
        _cell(dialect, b.t, b.g, b.id, [(g.side, g.x0, g.x1) for g in grid_list]).label("cx"),
        _cell(dialect, b.score, b.g, b.id, [(g.side, g.y0, g.y1) for g in grid_list]).label("cy"),
    ).cte("done")  # fmt: skip
    if materialized:
        done = done.prefix_with("MATERIALIZED")
        # The windows below sort the job's trials twice: in memory, not in files.
        session.execute(text("SET LOCAL work_mem = '64MB'"))
    cell = (done.c.g, done.c.cx, done.c.cy)
    # The best of each cell by a hash aggregate, not a third sort (a tie keeps every trial of that score).
    cells = select(*cell, func.max(done.c.score)).where(done.c.t.is_not(None)).group_by(*cell)
    untimed = done.c.t.is_(None)
    ranked = select(
        *cell,
        done.c.id,
        done.c.model,
        done.c.t,
        done.c.score,
        func.row_number().over(partition_by=done.c.model, order_by=(done.c.score.desc(), done.c.id)).label("rank"),
        func.count().over(partition_by=done.c.model).label("scored"),
        func.max(done.c.score)
        .over(partition_by=untimed, order_by=(done.c.t, done.c.id), rows=(None, -1))
        .label("best_before"),
        # The last to finish: its place in finish order is the count (the same sort as best_before).
        func.row_number().over(partition_by=untimed, order_by=(done.c.t, done.c.id)).label("by_time"),
        func.count().over(partition_by=untimed).label("timed"),
    ).subquery()
    r = ranked.c
    # sampleBest: rest[floor(i * R / want)] for i < want, R = scored - top; j = rank - top - 1 is among them
    # when a multiple of R lies in [j * want, j * want + want).
    rest, j = r.scored - top, r.rank - top - 1
    sampled = case((rest > 0, (rest - (j * want) % rest) % rest), else_=want) < want
    timed = r.t.is_not(None)
    # IN, not a join: PostgreSQL hashes the cells, SQLite indexes them (a join was a nested loop there).
    best_of_cell = tuple_(r.g, r.cx, r.cy, r.score).in_(cells)
    chosen = session.execute(
        select(r.id, r.model, r.scored).where(
            or_(
                r.scored <= lines,
                r.rank <= top,
                and_(r.rank > top, sampled),
                and_(timed, or_(r.best_before.is_(None), r.score > r.best_before, r.by_time == r.timed)),
                and_(timed, best_of_cell),
            )
        )
    ).all()
    omitted: dict[int, int] = {}
    for _, model, scored in chosen:
        omitted[model] = omitted.get(model, scored) - 1
    open_ids = select(Trial.id).join(Trial.sub_job).where(*upto, Trial.status.in_(_OPEN))
    ids = {trial_id for trial_id, _, _ in chosen} | set(session.scalars(open_ids))
    rows = point_rows(session, train_job_id, [Trial.id.in_(sorted(ids))]) if ids else []
    return ChartSample(rows, last_id, omitted)


_OPEN = (TrialState.PENDING, TrialState.RUNNING)


@dataclass(frozen=True)
class _Grid:
    """One combination of policies' scatter grid: ``side`` cells a side over its range of time and score."""

    side: int
    x0: float
    x1: float
    y0: float
    y1: float


def _epoch(dialect: str) -> Any:
    """``finished_at`` in seconds since the epoch, as a float."""
    if dialect == "postgresql":
        return cast(extract("epoch", Trial.finished_at), Float)
    return (func.julianday(Trial.finished_at) - 2440587.5) * 86400.0


def _grids(
    session: Session, where: Sequence[ColumnElement[bool]], finished: Any, policy: Any, points: int
) -> dict[str, _Grid]:
    """Per combination of policies (its JSON text), the scatter's grid, as ``thinScatter`` would lay it.

    A combination with no more trials than its share gets no grid: all of it is drawn.
    """
    stats = session.execute(
        select(
            policy,
            func.count(),
            func.min(finished),
            func.max(finished),
            func.min(Trial.score),
            func.max(Trial.score),
        )
        .join(Trial.sub_job)
        .where(*where, Trial.score.is_not(None), Trial.finished_at.is_not(None))
        .group_by(policy)
    ).all()
    total = sum(count for _, count, *_ in stats)
    grids = {}
    for key, count, x0, x1, y0, y1 in stats:
        share = max(_MIN_SHARE, round(points * count / total))
        if count > share:
            grids[key] = _Grid(max(1, math.isqrt(share)), float(x0), float(x1), float(y0), float(y1))
    return grids


def _cell(dialect: str, value: Any, group: Any, trial_id: Any, grids: list[tuple[int, float, float]]) -> Any:
    """The grid column (of ``value`` = the finish time) or row (the score) of a trial in its group's grid.

    ``grids`` holds, per group index, ``(side, low, high)``. A trial whose combination has
    no grid (``group`` is -1) gets its own id, so that it is alone in its cell; one
    outside its grid's range (it finished after the range was read) goes to the edge.
    """
    if not grids:
        return trial_id
    cells = []
    for i, (side, low, high) in enumerate(grids):
        raw = (value - literal(low, Float)) / literal(high - low, Float) * side if high > low else literal(0.0, Float)
        # raw >= 0 here, where SQLite's cast to an integer (it may lack floor()) is the floor.
        floor = func.floor(raw) if dialect == "postgresql" else cast(raw, Integer)
        cells.append((group == i, case((raw < 0, 0), (raw >= side, side - 1), else_=floor)))
    return case(*cells, else_=trial_id)
