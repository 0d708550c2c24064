"""``POST /api/v1/tokens``: trade an email and password for a bearer token."""

from __future__ import annotations

from flask import Blueprint
from sqlalchemy import select

from baobab.admin._auth import TOKEN_MAX_AGE_S, issue_token, normalize_email, public, spend_verify_time, verify_password
from baobab.admin._body import json_object, string_field
from baobab.admin._openapi import api_doc
from baobab.admin._state import admin_state
from baobab.admin._users import USER_SCHEMA, user_json
from baobab.exceptions import AuthenticationError
from baobab.store import User, session_scope

__all__ = ["blueprint"]

blueprint = Blueprint("tokens", __name__, url_prefix="/api/v1/tokens")

# One message for an unknown email and a wrong password, so the answer does not tell
# which emails have accounts.
_WRONG_CREDENTIALS = "wrong email or password"


_BODY = {
    "type": "object",
    "required": ["email", "password"],
    "properties": {"email": {"type": "string"}, "password": {"type": "string"}},
}


@blueprint.post("")
@public
@api_doc(
    body=_BODY,
    responses={
        201: (
            "a bearer token for the user",
            {
                "type": "object",
                "required": ["token", "expires_in", "user"],
                "properties": {
                    "token": {"type": "string"},
                    "expires_in": {"type": "integer", "description": "seconds"},
                    "user": USER_SCHEMA,
                },
            },
        ),
        401: "wrong email or password, or a banned user",
    },
)
def create_token() -> tuple[dict[str, object], int]:
    """201 ``{"token", "expires_in", "user"}``; 401 for wrong credentials or a banned user."""
    body = json_object(fields=_BODY["properties"])
    email = string_field(body, "email")
    password = string_field(body, "password")
    try:
        email = normalize_email(email)
    except ValueError:
        email = ""  # matches no user, and is answered like any unknown email
    with session_scope(admin_state().engine) as session:
        user = session.scalar(select(User).where(User.email == email)) if email else None
    if user is None:
        spend_verify_time(password)
        raise AuthenticationError(_WRONG_CREDENTIALS)
    if not verify_password(password, user.password_hash):
        raise AuthenticationError(_WRONG_CREDENTIALS)
    if user.banned:
        raise AuthenticationError(f"user {user.email!r} is banned")
    return {"token": issue_token(user), "expires_in": TOKEN_MAX_AGE_S, "user": user_json(user)}, 201
