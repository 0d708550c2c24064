"""``POST /api/v1/tokens``: trade an email and password for a bearer token.

Failed logins are limited per account (``BAOBAB_LOGIN_FAILURES_PER_ACCOUNT``) and per
client address (``BAOBAB_LOGIN_FAILURES_PER_ADDRESS``) in a window of
``BAOBAB_LOGIN_FAILURE_WINDOW_S``: past a limit, logins are answered 429 with
``Retry-After`` until the window ends, without checking the password. The counters live
in the metadata store (:mod:`baobab.store._db._login_failures`), so every API process
of a cluster counts against the same limits; an unknown email counts like a known one.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from flask import Blueprint, request
from sqlalchemy import select
from werkzeug.exceptions import TooManyRequests

from baobab.admin._auth import TOKEN_MAX_AGE_S, issue_token, normalize_email, public, spend_verify_time, verify_password
from baobab.admin._openapi import api_doc, model_schema
from baobab.admin._request_body import RequestBody, Text, read_body
from baobab.admin._state import admin_state
from baobab.admin._users import USER_SCHEMA, user_json
from baobab.exceptions import AuthenticationError
from baobab.store import User, release_login_attempt, reserve_login_attempt, session_scope

__all__ = ["blueprint"]

blueprint = Blueprint("tokens", __name__, url_prefix="/api/v1/tokens")

# One message for an unknown email and a wrong password, so the answer does not tell
# which emails have accounts.
_WRONG_CREDENTIALS = "wrong email or password"


class _Body(RequestBody):
    email: Text
    password: Text


@blueprint.post("")
@public
@api_doc(
    body=model_schema(_Body),
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
        429: "too many failed logins for this account or from this address; Retry-After says when to try again",
    },
)
def create_token() -> tuple[dict[str, object], int]:
    """201 ``{"token", "expires_in", "user"}``; 401 for wrong credentials or a banned user; 429 past a limit."""
    body = read_body(_Body)
    sent_email, password = body.email, body.password
    try:
        email = normalize_email(sent_email)
    except ValueError:
        email = ""  # matches no user, and is answered like any unknown email
    keys = _reserve_attempt(email or sent_email.strip().lower())
    with session_scope(admin_state().engine) as session:
        user = session.scalar(select(User).where(User.email == email)) if email else None
    if user is None:
        spend_verify_time(password)
        raise AuthenticationError(_WRONG_CREDENTIALS)
    if not verify_password(password, user.password_hash):
        raise AuthenticationError(_WRONG_CREDENTIALS)
    with session_scope(admin_state().engine) as session:
        release_login_attempt(session, keys)  # the password was right: not a failure
    if user.banned:
        raise AuthenticationError(f"user {user.email!r} is banned")
    return {"token": issue_token(user), "expires_in": TOKEN_MAX_AGE_S, "user": user_json(user)}, 201


def _reserve_attempt(account: str) -> list[str]:
    """Count this attempt as a failure until the password proves right; the keys it counted on.

    Raises:
        TooManyRequests: the account or the client address is over its limit (429, ``Retry-After``).
    """
    settings = admin_state().settings
    account_key, address_key = f"account:{account}"[:300], f"address:{request.remote_addr or '?'}"
    limits = [
        (account_key, settings.login_failures_per_account),
        (address_key, settings.login_failures_per_address),
    ]
    with session_scope(admin_state().engine) as session:
        wait = reserve_login_attempt(
            session, limits, datetime.now(UTC), timedelta(seconds=settings.login_failure_window_s)
        )
    if wait is not None:
        retry_after = max(1, math.ceil(wait))
        raise TooManyRequests(
            f"too many failed logins for this account or from this address (at most "
            f"{settings.login_failures_per_account} per account and {settings.login_failures_per_address} "
            f"per address in {settings.login_failure_window_s:g} s); try again in {retry_after} s",
            retry_after=retry_after,
        )
    return [account_key, address_key]
