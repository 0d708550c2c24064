"""Trial tokens: what a cluster worker shows the admin API to report on one trial.

A cluster worker holds no database credentials and no user's password. The executor
hands it, with each trial, a token signed with ``BAOBAB_SECRET_KEY`` that names that
trial and nothing else: it lets the worker claim the trial, beat, record metrics and
logs, store the outcome, and ask the model zoo for that trial's parent and register its
model (``/api/v1/zoo/trials/<id>/...``); it opens no other endpoint.
"""

from __future__ import annotations

from itsdangerous import BadData, URLSafeTimedSerializer

__all__ = ["TRIAL_TOKEN_MAX_AGE_S", "issue_trial_token", "trial_of_token"]

#: Long enough for a trial that waits in a busy queue and then trains for days.
TRIAL_TOKEN_MAX_AGE_S = 30 * 24 * 3600
_SALT = "baobab.worker.trial"


def _serializer(secret_key: str) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(secret_key, salt=_SALT)


def issue_trial_token(secret_key: str, trial_id: int) -> str:
    """A token for reporting on ``trial_id`` only."""
    return _serializer(secret_key).dumps({"trial": int(trial_id)})


def trial_of_token(secret_key: str, token: str) -> int | None:
    """The trial id a token was issued for; None when it is forged, expired or malformed."""
    try:
        payload = _serializer(secret_key).loads(token, max_age=TRIAL_TOKEN_MAX_AGE_S)
    except BadData:
        return None
    trial = payload.get("trial") if isinstance(payload, dict) else None
    return trial if isinstance(trial, int) and not isinstance(trial, bool) else None
