"""``/api/v1/users``: admins create, list, read, re-role and ban users.

Rules beyond "admins only" (SUPERADMIN and ADMIN): only a SUPERADMIN makes or
changes a SUPERADMIN, and nobody bans themself or changes their own role, so the
last admin cannot lock everyone out. Users are banned, never deleted (they own rows).
A ban or a role change ends the tokens the user holds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from flask import Blueprint
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from baobab.admin._access import ADMIN_ROLES
from baobab.admin._auth import check_password_rules, current_user, hash_password, normalize_email, require_roles
from baobab.admin._body import enum_field, json_object, string_field
from baobab.admin._openapi import api_doc, register_schema
from baobab.admin._state import admin_state
from baobab.exceptions import ConflictError, NotFoundError, PermissionDeniedError, RequestError
from baobab.store import User, UserRole, session_scope

__all__ = ["USER_SCHEMA", "blueprint", "user_json"]

T = TypeVar("T")

blueprint = Blueprint("users", __name__, url_prefix="/api/v1/users")

_ROLE = {"enum": [role.value for role in UserRole]}
USER_SCHEMA = register_schema(
    "User",
    {
        "type": "object",
        "required": ["id", "email", "role", "banned", "created_at"],
        "properties": {
            "id": {"type": "integer"},
            "email": {"type": "string"},
            "role": _ROLE,
            "banned": {"type": "boolean"},
            "created_at": {"type": "string", "format": "date-time"},
        },
    },
)
_CREATE_BODY: dict[str, Any] = {
    "type": "object",
    "required": ["email", "password", "role"],
    "properties": {"email": {"type": "string"}, "password": {"type": "string"}, "role": _ROLE},
}
_UPDATE_BODY: dict[str, Any] = {
    "type": "object",
    "minProperties": 1,
    "properties": {"role": _ROLE, "banned": {"type": "boolean"}},
}


def user_json(user: User) -> dict[str, Any]:
    """A user as the API shows it: never the password hash."""
    return {
        "id": user.id,
        "email": user.email,
        "role": user.role.value,
        "banned": user.banned,
        "created_at": user.created_at.isoformat(),
    }


@blueprint.post("")
@require_roles(*ADMIN_ROLES)
@api_doc(body=_CREATE_BODY, responses={201: ("the new user", USER_SCHEMA), 409: "the email is taken"})
def create_user() -> tuple[dict[str, Any], int]:
    """201 with the new user; 409 when the email is taken."""
    body = json_object(fields=_CREATE_BODY["properties"])
    email = _checked(normalize_email, string_field(body, "email"), "email")
    password = string_field(body, "password")
    _checked(check_password_rules, password, "password")
    role = enum_field(body, "role", UserRole)
    if role is UserRole.SUPERADMIN:
        _require_superadmin("create a SUPERADMIN", field="role")
    user = User(email=email, password_hash=hash_password(password), role=role)
    with session_scope(admin_state().engine) as session:
        session.add(user)
        try:
            session.flush()
        except IntegrityError:  # the unique email, checked by the database so that races are caught too
            raise ConflictError(f"a user with email {email!r} already exists", field="email") from None
    return user_json(user), 201


@blueprint.get("")
@require_roles(*ADMIN_ROLES)
@api_doc(
    responses={
        200: (
            "every user",
            {"type": "object", "required": ["users"], "properties": {"users": {"type": "array", "items": USER_SCHEMA}}},
        )
    }
)
def list_users() -> dict[str, Any]:
    """``{"users": [...]}``, oldest first."""
    with session_scope(admin_state().engine) as session:
        users = session.scalars(select(User).order_by(User.id)).all()
    return {"users": [user_json(user) for user in users]}


@blueprint.get("/<int:user_id>")
@require_roles(*ADMIN_ROLES)
@api_doc(responses={200: ("the user", USER_SCHEMA), 404: "no such user"})
def get_user(user_id: int) -> dict[str, Any]:
    """One user; 404 when there is none with this id."""
    with session_scope(admin_state().engine) as session:
        return user_json(_get(session, user_id))


@blueprint.patch("/<int:user_id>")
@require_roles(*ADMIN_ROLES)
@api_doc(body=_UPDATE_BODY, responses={200: ("the user as it is now", USER_SCHEMA), 404: "no such user"})
def update_user(user_id: int) -> dict[str, Any]:
    """Changes ``role`` and/or ``banned``; answers the user as it is afterwards.

    A ban or a role change ends the user's tokens (it raises their token generation,
    see :mod:`baobab.admin._auth`): they log in again, once unbanned, to act with the new role.
    """
    body = json_object(fields=_UPDATE_BODY["properties"])
    if not body:
        raise RequestError("nothing to change: give 'role', 'banned' or both")
    role = enum_field(body, "role", UserRole) if "role" in body else None
    banned = body.get("banned")
    if "banned" in body and not isinstance(banned, bool):
        raise RequestError(f"'banned' must be true or false, got {banned!r}", field="banned")
    me = current_user()
    with session_scope(admin_state().engine) as session:
        user = _get(session, user_id)
        if user.role is UserRole.SUPERADMIN:
            _require_superadmin("change a SUPERADMIN", field=None)
        if role is not None and role is not user.role:
            if user.id == me.id:
                raise PermissionDeniedError("you cannot change your own role", field="role")
            if role is UserRole.SUPERADMIN:
                _require_superadmin("grant the role SUPERADMIN", field="role")
            user.role = role
            user.token_generation += 1
        if banned is not None:
            if banned and user.id == me.id:
                raise PermissionDeniedError("you cannot ban yourself", field="banned")
            if banned and not user.banned:
                user.token_generation += 1
            user.banned = banned
    return user_json(user)


def _get(session: Session, user_id: int) -> User:
    user = session.get(User, user_id)
    if user is None:
        raise NotFoundError(f"no user with id {user_id}")
    return user


def _require_superadmin(action: str, *, field: str | None) -> None:
    me = current_user()
    if me.role is not UserRole.SUPERADMIN:
        raise PermissionDeniedError(f"only a SUPERADMIN may {action}; you are {me.role}", field=field)


def _checked(rule: Callable[[str], T], value: str, field: str) -> T:
    # The credential rules raise ValueError; here that is a 400 naming the field.
    try:
        return rule(value)
    except ValueError as e:
        raise RequestError(str(e), field=field) from None
