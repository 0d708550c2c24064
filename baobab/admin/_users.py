"""``/api/v1/users``: admins create, list, read, re-role and ban users.

Rules beyond "admins only" (SUPERADMIN and ADMIN): only a SUPERADMIN makes or
changes a SUPERADMIN, and nobody bans themself or changes their own role, so the
last admin cannot lock everyone out. Users are banned, never deleted (they own rows).
A ban or a role change ends the tokens the user holds.
"""

from __future__ import annotations

from typing import Annotated, Any

from flask import Blueprint
from pydantic import AfterValidator, Strict
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from baobab.admin._access import ADMIN_ROLES
from baobab.admin._auth import check_password_rules, current_user, hash_password, normalize_email, require_roles
from baobab.admin._openapi import api_doc, model_schema, register_schema
from baobab.admin._request_body import RequestBody, Text, read_body
from baobab.admin._state import admin_state
from baobab.exceptions import ConflictError, NotFoundError, PermissionDeniedError, RequestError
from baobab.store import User, UserRole, session_scope

__all__ = ["USER_SCHEMA", "blueprint", "user_json"]

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


def _password(value: str) -> str:
    check_password_rules(value)
    return value


#: A role as sent: its name (strict parsing would want the enum member itself).
_Role = Annotated[UserRole, Strict(False)]


class _CreateBody(RequestBody):
    email: Annotated[Text, AfterValidator(normalize_email)]
    password: Annotated[Text, AfterValidator(_password)]
    role: _Role


class _UpdateBody(RequestBody):
    role: _Role | None = None
    banned: bool | None = None


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
@api_doc(body=model_schema(_CreateBody), responses={201: ("the new user", USER_SCHEMA), 409: "the email is taken"})
def create_user() -> tuple[dict[str, Any], int]:
    """201 with the new user; 409 when the email is taken."""
    body = read_body(_CreateBody)
    if body.role is UserRole.SUPERADMIN:
        _require_superadmin("create a SUPERADMIN", field="role")
    user = User(email=body.email, password_hash=hash_password(body.password), role=body.role)
    with session_scope(admin_state().engine) as session:
        session.add(user)
        try:
            session.flush()
        except IntegrityError:  # the unique email, checked by the database so that races are caught too
            raise ConflictError(f"a user with email {body.email!r} already exists", field="email") from None
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
@api_doc(body=model_schema(_UpdateBody), responses={200: ("the user as it is now", USER_SCHEMA), 404: "no such user"})
def update_user(user_id: int) -> dict[str, Any]:
    """Changes ``role`` and/or ``banned``; answers the user as it is afterwards.

    A ban or a role change ends the user's tokens (it raises their token generation,
    see :mod:`baobab.admin._auth`): they log in again, once unbanned, to act with the new role.
    """
    body = read_body(_UpdateBody)
    role, banned = body.role, body.banned
    if role is None and banned is None:
        raise RequestError("nothing to change: give 'role', 'banned' or both")
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
