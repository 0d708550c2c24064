"""Who sees which row: the one access policy of the admin API.

Two kinds of rows have an owner:

- private ones (datasets, train jobs and their trials, inference jobs): their owner and
  the admins see them;
- shareable ones (model templates, zoo models), which have an ``access``: their owner,
  the admins, and everyone when they are PUBLIC.

Changing a shareable row (deleting a template) takes its owner or an admin. A row the
caller may not see answers 404 like a missing one, which each route says in its message;
the rules themselves live only here, as predicates on a row and as filters on a query.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from sqlalchemy import Select

from baobab.store import ModelAccess, User, UserRole

__all__ = [
    "ADMIN_ROLES",
    "ALL_ROLES",
    "is_admin",
    "may_change",
    "may_see_private",
    "may_see_shared",
    "private_rows",
    "shared_rows",
    "shared_with",
]

ADMIN_ROLES = (UserRole.SUPERADMIN, UserRole.ADMIN)
#: Every role: the routes that each user may call on what they see.
ALL_ROLES = (UserRole.MODEL_DEVELOPER, UserRole.APP_DEVELOPER, *ADMIN_ROLES)

Q = TypeVar("Q", bound=Select[Any])


class _Owned(Protocol):
    owner_id: Any


class _Shared(_Owned, Protocol):
    access: Any


def is_admin(user: User) -> bool:
    """Admins see and change every row."""
    return user.role in ADMIN_ROLES


def may_see_private(user: User, row: _Owned) -> bool:
    """A private row: its owner's, or an admin's to see."""
    return is_admin(user) or row.owner_id == user.id


def may_see_shared(user: User, row: _Shared) -> bool:
    """A shareable row: its owner's or an admin's, and everyone's when PUBLIC."""
    return may_see_private(user, row) or row.access is ModelAccess.PUBLIC


def may_change(user: User, row: _Owned) -> bool:
    """Only the owner or an admin changes a row, even one everybody sees."""
    return may_see_private(user, row)


def shared_with(owner_id: int, row: _Shared) -> bool:
    """Whether ``owner_id`` may use a shareable row on their own behalf (their own or a PUBLIC one).

    What a trial may reach through its job's owner: an admin's job sees no more than anyone's.
    """
    return row.owner_id == owner_id or row.access is ModelAccess.PUBLIC


def private_rows(query: Q, entity: Any, user: User) -> Q:
    """``query`` narrowed to the rows of ``entity`` (a mapped class with ``owner_id``) that ``user`` sees."""
    return query if is_admin(user) else query.where(entity.owner_id == user.id)


def shared_rows(query: Q, entity: Any, user: User) -> Q:
    """``query`` narrowed to the rows of ``entity`` (with ``owner_id`` and ``access``) that ``user`` sees."""
    if is_admin(user):
        return query
    return query.where((entity.owner_id == user.id) | (entity.access == ModelAccess.PUBLIC))
