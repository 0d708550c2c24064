"""Credentials: scrypt password hashes, signed tokens, and who is calling.

Passwords are hashed with scrypt (``hashlib``) under a random salt; the cost
parameters are stored in the hash, so they can be raised later without breaking
stored passwords. The cost matches Werkzeug's default (N=2**15, r=8, p=1: 32 MiB,
about 0.1 s a hash).

A token is ``{"uid": <user id>, "gen": <the user's token generation>}`` signed with
``BAOBAB_SECRET_KEY`` and a timestamp (itsdangerous), valid :data:`TOKEN_MAX_AGE_S`. It
grants nothing by itself: every request loads the user row again, so a ban or a new role
applies at once. A ban or a role change also raises the user's token generation, which
ends every token issued before it: unbanning a user does not bring their old tokens back.

Every endpoint needs a token unless its view is marked :func:`public`:
:func:`authenticate` runs before each request, and a view added later cannot forget it.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from flask import current_app, g, request
from itsdangerous import BadData, SignatureExpired, URLSafeTimedSerializer

from baobab._text import clean_text
from baobab.admin._query import MAX_ID
from baobab.admin._state import admin_state
from baobab.exceptions import AuthenticationError, PermissionDeniedError
from baobab.store import User, UserRole, session_scope, trial_of_token

__all__ = [
    "MIN_PASSWORD_LENGTH",
    "TOKEN_MAX_AGE_S",
    "authenticate",
    "check_trial_token",
    "check_password_rules",
    "current_user",
    "hash_password",
    "is_public",
    "issue_token",
    "normalize_email",
    "public",
    "require_roles",
    "spend_verify_time",
    "token_serializer",
    "verify_password",
]

TOKEN_MAX_AGE_S = 24 * 3600
MIN_PASSWORD_LENGTH = 8
_MAX_EMAIL_LENGTH = 254  # the users.email column
_EMAIL = re.compile(r"[^@\s\x00-\x1f\x7f]+@[^@\s\x00-\x1f\x7f]+")
_TOKEN_SALT = "baobab.admin.token"
_SCHEME = "scrypt"
_N, _R, _P = 2**15, 8, 1
_SALT_BYTES, _KEY_BYTES = 16, 32
_PUBLIC_ATTR = "baobab_public"

F = TypeVar("F", bound=Callable[..., Any])


def normalize_email(email: str) -> str:
    """The email as stored: trimmed, NFC-normalised and lower-cased, so that lookups ignore case.

    Raises:
        ValueError: the email holds a control or format character (:func:`baobab._text.clean_text`:
            U+202E and ``gro.elpmaxe@nimda`` would show as ``admin@example.org``), is not
            ``name@domain`` or is longer than the column.
    """
    email = clean_text(email.strip(), "email").lower()
    if not _EMAIL.fullmatch(email):
        raise ValueError(f"{email!r} is not an email address (expected name@domain)")
    if len(email) > _MAX_EMAIL_LENGTH:
        raise ValueError(f"email has {len(email)} characters, at most {_MAX_EMAIL_LENGTH} are allowed")
    return email


def check_password_rules(password: str) -> None:
    """Raises ValueError when ``password`` is too short to accept."""
    if len(password) < MIN_PASSWORD_LENGTH:
        raise ValueError(f"password has {len(password)} characters, at least {MIN_PASSWORD_LENGTH} are required")


def hash_password(password: str) -> str:
    """``scrypt$N$r$p$salt$key`` (salt and key in URL-safe base64) for ``password``."""
    salt = secrets.token_bytes(_SALT_BYTES)
    key = _scrypt(password, salt, _N, _R, _P, _KEY_BYTES)
    return "$".join([_SCHEME, str(_N), str(_R), str(_P), _b64(salt), _b64(key)])


def verify_password(password: str, password_hash: str) -> bool:
    """True when ``password`` matches; a hash in an unknown format never matches."""
    try:
        scheme, n, r, p, salt, key = password_hash.split("$")
        if scheme != _SCHEME:
            return False
        expected = base64.urlsafe_b64decode(key)
        actual = _scrypt(password, base64.urlsafe_b64decode(salt), int(n), int(r), int(p), len(expected))
    except ValueError:  # a malformed field, or scrypt refusing the parameters
        return False
    return hmac.compare_digest(actual, expected)


@functools.cache
def _dummy_hash() -> str:
    return hash_password(secrets.token_urlsafe())


def spend_verify_time(password: str) -> None:
    """Costs what :func:`verify_password` costs, so an unknown email answers as slowly as a known one."""
    verify_password(password, _dummy_hash())


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int, dklen: int) -> bytes:
    # OpenSSL's default memory cap (32 MiB) is just below what N=2**15, r=8 needs.
    maxmem = 128 * r * (n + p + 2)
    return hashlib.scrypt(password.encode("utf-8"), salt=salt, n=n, r=r, p=p, dklen=dklen, maxmem=maxmem)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii")


def token_serializer(secret_key: str) -> URLSafeTimedSerializer:
    """The serializer that signs and checks tokens with ``secret_key``."""
    return URLSafeTimedSerializer(secret_key, salt=_TOKEN_SALT)


def issue_token(user: User) -> str:
    """A signed token for ``user``, valid :data:`TOKEN_MAX_AGE_S` seconds or until its token generation changes."""
    return admin_state().tokens.dumps({"uid": user.id, "gen": user.token_generation})


def public(view: F) -> F:
    """Marks a view that needs no token (only ``POST /api/v1/tokens``)."""
    setattr(view, _PUBLIC_ATTR, True)
    return view


def is_public(view: Callable[..., Any]) -> bool:
    """True for a view marked :func:`public`."""
    return bool(getattr(view, _PUBLIC_ATTR, False))


def authenticate() -> None:
    """Loads the caller from the bearer token into :func:`current_user`; runs before every request.

    Raises:
        AuthenticationError: the header is missing or malformed, the token expired or
            was not signed with this server's key, its user is gone or banned, or a ban or
            role change since it was issued ended it.
    """
    view = current_app.view_functions.get(request.endpoint) if request.endpoint else None
    if view is None or is_public(view):
        return  # public, or no route matched (the 404/405 follows)
    header = request.headers.get("Authorization")
    if header is None:
        raise AuthenticationError(
            "missing Authorization header: send 'Authorization: Bearer <token>' with a token from POST /api/v1/tokens"
        )
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthenticationError("malformed Authorization header: expected 'Bearer <token>'")
    try:
        payload = admin_state().tokens.loads(token.strip(), max_age=TOKEN_MAX_AGE_S)
    except SignatureExpired as e:
        if e.date_signed is not None and e.date_signed > datetime.now(UTC):
            raise AuthenticationError(
                f"token not yet valid: it is dated in the future ({e.date_signed.isoformat()}); "
                "get a new one from POST /api/v1/tokens, and check this machine's clock"
            ) from None
        raise AuthenticationError(
            f"token expired (tokens last {TOKEN_MAX_AGE_S} s): get a new one from POST /api/v1/tokens"
        ) from None
    except BadData:
        raise AuthenticationError("invalid token: it was not issued by this server") from None
    uid, generation = (payload.get("uid"), payload.get("gen")) if isinstance(payload, dict) else (None, None)
    if isinstance(uid, bool) or not isinstance(uid, int) or not 1 <= uid <= MAX_ID:
        raise AuthenticationError("invalid token: it names no user")
    if isinstance(generation, bool) or not isinstance(generation, int):
        raise AuthenticationError("invalid token: it has no token generation; get a new one from POST /api/v1/tokens")
    with session_scope(admin_state().engine) as session:
        user = session.get(User, uid)
    if user is None:
        raise AuthenticationError("invalid token: its user no longer exists")
    if user.banned:
        raise AuthenticationError(f"user {user.email!r} is banned")
    if generation != user.token_generation:
        raise AuthenticationError(
            "token ended: the user was banned or their role changed after it was issued; "
            "get a new one from POST /api/v1/tokens"
        )
    g.baobab_user = user


def current_user() -> User:
    """The user making the current request (a detached row, read at the start of the request).

    Raises:
        AuthenticationError: the request carried no valid token (a public view asked).
    """
    user: User | None = g.get("baobab_user")
    if user is None:
        raise AuthenticationError("this endpoint needs 'Authorization: Bearer <token>'")
    return user


def require_roles(*roles: UserRole) -> Callable[[F], F]:
    """A view decorator that answers 403 unless the caller has one of ``roles``."""
    allowed = " or ".join(role.value for role in roles)

    def decorate(view: F) -> F:
        @functools.wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            user = current_user()
            if user.role not in roles:
                raise PermissionDeniedError(f"this needs the role {allowed}; user {user.email!r} is {user.role}")
            return view(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def check_trial_token(trial_id: int) -> None:
    """The request must carry the token of ``trial_id``: the one its worker got with it.

    A trial's token opens the worker routes of that trial alone; the worker holds no
    user's token and no database credentials.
    """
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthenticationError("missing trial token: send 'Authorization: Bearer <the token the trial came with>'")
    granted = trial_of_token(admin_state().settings.signing_key(), token.strip())
    if granted is None:
        raise AuthenticationError("invalid trial token: it was not issued by this platform, or it expired")
    if granted != trial_id:
        raise PermissionDeniedError(f"this token is for trial {granted}, not trial {trial_id}")


def check_body_trial_token(trial_id: int, token: str, field: str) -> None:
    """A second trial's token, sent in the body of a request the header's token opens (a finish
    that claims the worker's next trial): 403 naming ``field`` unless it is ``trial_id``'s."""
    granted = trial_of_token(admin_state().settings.signing_key(), token)
    if granted is None:
        raise PermissionDeniedError(
            f"{field!r} is not a trial token: it was not issued by this platform, or it expired", field=field
        )
    if granted != trial_id:
        raise PermissionDeniedError(f"{field!r} is the token of trial {granted}, not trial {trial_id}", field=field)
