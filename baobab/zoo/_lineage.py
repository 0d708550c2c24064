"""Where a trial's starting weights came from: its chain of parents, walked in one query.

A trial's knobs no longer describe how to get its model once it was warm-started: its
weights carry the training of every trial up the chain. A link is either a zoo model
(``trials.parent_zoo_model_id``; the model names the trial it was trained in, which may
have a parent of its own) or shared parameters (``trials.shared_params_path``, another
trial's parameters under ``SHARE_PARAMS``). The recorded zoo parent wins over shared
parameters: the runner warm-starts from the zoo only when no shared parameters were loaded.

Shared parameters may be no trial's own: when shared trainings that ran at once add up
(ENAS's, :mod:`baobab.advisor.driver._shared_weights`), a trial starts from one trial's
update added onto the shared weights another trial left. The driver records each such merge
in the store (:func:`baobab.store.shared_merge` reads it); the chain then
lists a "merged" ancestor, the trial whose update the weights hold, naming in
``merged_onto`` the trial whose shared weights it was added onto, and goes on up the
merged trial's own start. The trial merged onto is named, not walked: its own lineage
says where its weights came from, and its epochs are not in ``inherited_epochs``, which
is then a lower bound.

The chain is read with one recursive query, however long it is, plus one for each merge
on it, and cut at ``max_depth`` ancestors (:data:`MAX_DEPTH` unless told), saying so in
``truncated``.
Epochs are counted as the distinct steps a trial reported (TorchModel reports one step
per epoch); a zoo model uploaded outside a job, or one evicted from the zoo, ends the
chain with its epochs unknown. Who may see which ancestor is the caller's business:
each :class:`Ancestor` carries its owner and access for that.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Integer, and_, func, literal, or_, select
from sqlalchemy.orm import Session, aliased

from baobab.store import InterimMetric, ModelAccess, SubJob, TrainJob, Trial, ZooModel, shared_merge

__all__ = ["MAX_DEPTH", "Ancestor", "Lineage", "trial_lineage"]

#: How many ancestors a lineage lists at most; a longer chain is cut and marked truncated.
MAX_DEPTH = 50

#: An ancestor that is no trial: no trial id, number, job, app or version.
_NO_TRIAL = (None, None, None, None, None)

Via = Literal["zoo", "shared_params"]
Source = Literal["trial", "upload", "removed", "merged"]


@dataclass
class Ancestor:
    """One step up the chain: the ancestor, and the link its child started through.

    ``source`` is "trial" for a trial's model, "upload" for a zoo model trained outside a job
    (``trial_id`` None), "removed" when the zoo model or the sharing trial no longer exists,
    "merged" for shared weights that hold this trial's update added onto the shared weights
    trial ``merged_onto`` (an id; ``merged_onto_number`` its number) left; None when that one is gone.
    ``owner_id`` and ``access`` say who may see it (a trial's job owner, PRIVATE; an upload's
    zoo owner and access; None for a removed one, which shows no more than its child's row).
    """

    via: Via
    source: Source
    trial_id: int | None
    number: int | None
    train_job_id: int | None
    app: str | None
    app_version: int | None
    zoo_model_id: int | None
    similarity: float | None
    epochs: int | None
    phase: str | None
    owner_id: int | None
    access: ModelAccess | None
    merged_onto: int | None = None
    merged_onto_number: int | None = None


@dataclass(frozen=True)
class Lineage:
    """A trial's chain of parents, nearest first; ``inherited_epochs`` sums the known epochs up the chain."""

    start: Literal["scratch", "zoo", "shared_params"]
    chain: list[Ancestor]
    truncated: bool

    @property
    def inherited_epochs(self) -> int:
        return sum(ancestor.epochs or 0 for ancestor in self.chain)


def trial_lineage(session: Session, trial_id: int, *, max_depth: int = MAX_DEPTH) -> Lineage:
    """The lineage of trial ``trial_id`` (an empty, "scratch" one when there is no such trial)."""
    rows = _chain(session, trial_id, max_depth)
    if not rows:
        return Lineage("scratch", [], False)
    found: list[Ancestor] = []
    truncated = False
    while True:
        found += [_ancestor(child_row, row) for child_row, row in zip(rows, rows[1:], strict=False)]
        last = rows[-1]
        if last[2] is None and last[3] is None:
            break
        if len(found) >= max_depth:
            truncated = True
            break
        update = shared_merge(session, last[3]) if last[2] is None else None
        if update is None:  # the chain ends in something other than a trial
            found.append(_end_of_chain(last))
            break
        update_id, onto_id, onto_number = update
        rows = _chain(session, update_id, max_depth - len(found) - 1)
        found.append(_ancestor(last, rows[0], source="merged", onto=(onto_id, onto_number)))
    if not found:
        return Lineage("scratch", [], False)
    return Lineage("zoo" if found[0].via == "zoo" else "shared_params", found, truncated)


def _chain(session: Session, trial_id: int, max_depth: int) -> Sequence[Any]:
    """Trial ``trial_id``'s row and its trial ancestors' (up to ``max_depth``), nearest first, in one query."""
    parent_zoo = aliased(ZooModel)
    child = aliased(Trial)
    parent = aliased(Trial)
    anchor = select(literal(0, Integer).label("depth"), Trial.id.label("trial_id")).where(Trial.id == trial_id)
    chain = anchor.cte("lineage", recursive=True)
    step = (
        select((chain.c.depth + 1).label("depth"), parent.id.label("trial_id"))
        .select_from(chain)
        .join(child, child.id == chain.c.trial_id)
        .outerjoin(parent_zoo, parent_zoo.id == child.parent_zoo_model_id)
        .join(
            parent,
            or_(
                parent.id == parent_zoo.trial_id,
                and_(child.parent_zoo_model_id.is_(None), parent.params_path == child.shared_params_path),
            ),
        )
        .where(chain.c.depth < max_depth)
    )
    chain = chain.union_all(step)
    epochs = (
        select(func.count(func.distinct(InterimMetric.step)))
        .where(InterimMetric.trial_id == Trial.id)
        .scalar_subquery()
    )
    return session.execute(
        select(
            chain.c.depth,
            Trial.id,
            Trial.parent_zoo_model_id,
            Trial.shared_params_path,
            Trial.similarity,
            Trial.phase,
            SubJob.train_job_id,
            TrainJob.owner_id,
            epochs,
            ZooModel.id,
            ZooModel.trial_id,
            ZooModel.owner_id,
            ZooModel.access,
            Trial.number,
            TrainJob.app,
            TrainJob.app_version,
        )
        .select_from(chain)
        .join(Trial, Trial.id == chain.c.trial_id)
        .join(SubJob, SubJob.id == Trial.sub_job_id)
        .join(TrainJob, TrainJob.id == SubJob.train_job_id)
        .outerjoin(ZooModel, ZooModel.id == Trial.parent_zoo_model_id)
        .order_by(chain.c.depth)
    ).all()


def _ancestor(
    child_row: Sequence[Any],
    row: Sequence[Any],
    *,
    source: Source = "trial",
    onto: tuple[int | None, int] | None = None,
) -> Ancestor:
    """The trial of ``row``, the parent of the trial of ``child_row``."""
    via: Via = "zoo" if child_row[2] is not None else "shared_params"
    return Ancestor(
        via=via,
        source=source,
        trial_id=row[1],
        number=row[13],
        train_job_id=row[6],
        app=row[14],
        app_version=row[15],
        zoo_model_id=child_row[2],
        similarity=child_row[4] if via == "zoo" else None,
        epochs=int(row[8]),
        phase=row[5],
        owner_id=row[7],
        access=ModelAccess.PRIVATE,
        merged_onto=None if onto is None else onto[0],
        merged_onto_number=None if onto is None else onto[1],
    )


def _end_of_chain(last: Sequence[Any]) -> Ancestor:
    """The parent of the deepest trial, which is no trial: an upload, or a model or trial gone since."""
    zoo_id, similarity, found_zoo, zoo_trial, zoo_owner, zoo_access = (last[i] for i in (2, 4, 9, 10, 11, 12))
    if zoo_id is None:
        return Ancestor("shared_params", "removed", *_NO_TRIAL, None, None, None, None, None, None)
    if found_zoo is not None and zoo_trial is None:
        return Ancestor("zoo", "upload", *_NO_TRIAL, zoo_id, similarity, None, None, zoo_owner, zoo_access)
    return Ancestor("zoo", "removed", *_NO_TRIAL, zoo_id, similarity, None, None, None, None)
