"""The first SUPERADMIN, created when the API starts on a database with no users."""

from __future__ import annotations

import logging
import secrets
import sys

from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError

from baobab import Mode, Settings
from baobab.admin._auth import check_password_rules, hash_password, normalize_email
from baobab.exceptions import SettingsError
from baobab.store import User, UserRole, session_scope

__all__ = ["DEFAULT_ADMIN_EMAIL", "bootstrap_superadmin"]

DEFAULT_ADMIN_EMAIL = "admin@localhost"

logger = logging.getLogger("baobab.admin")


def bootstrap_superadmin(engine: Engine, settings: Settings) -> User | None:
    """Creates the first SUPERADMIN when the database has no user at all.

    Its email is ``BAOBAB_ADMIN_EMAIL`` (``admin@localhost`` when unset) and its
    password ``BAOBAB_ADMIN_PASSWORD``. Without a password, embedded mode generates
    one and prints it to stderr, this once: it is stored nowhere but as a hash, and
    the next start finds a user and creates nothing. Production mode never makes up
    a password; it logs how to set one and starts with no user.

    Returns:
        The new user, or None when there already was a user (or production mode
        had no password).

    Raises:
        SettingsError: the configured email or password breaks the users' rules.
    """
    try:
        email = normalize_email(settings.admin_email or DEFAULT_ADMIN_EMAIL)
    except ValueError as e:
        raise SettingsError(f"BAOBAB_ADMIN_EMAIL: {e}", setting="BAOBAB_ADMIN_EMAIL") from None
    password = settings.admin_password
    try:
        if password is not None:
            check_password_rules(password)
    except ValueError as e:
        raise SettingsError(f"BAOBAB_ADMIN_PASSWORD: {e}", setting="BAOBAB_ADMIN_PASSWORD") from None
    with session_scope(engine) as session:
        if session.scalar(select(User.id).limit(1)) is not None:
            return None
        if password is None and settings.mode is Mode.PRODUCTION:
            logger.warning(
                "the database has no user and production mode makes up no password: "
                "set BAOBAB_ADMIN_EMAIL and BAOBAB_ADMIN_PASSWORD and restart to create the first SUPERADMIN"
            )
            return None
        generated = password is None
        if password is None:
            password = secrets.token_urlsafe(16)
        user = User(email=email, password_hash=hash_password(password), role=UserRole.SUPERADMIN)
        session.add(user)
        try:
            session.flush()
        except IntegrityError:  # another process started at the same moment and made it
            session.rollback()
            return None
    if generated:
        # Printed after the commit, so a password is only shown for a user that exists.
        print(
            f"baobab: created the SUPERADMIN {email} with the generated password {password}\n"
            "baobab: it is shown this once; set BAOBAB_ADMIN_PASSWORD before the first start to choose it",
            file=sys.stderr,
            flush=True,
        )
    return user
