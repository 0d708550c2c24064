"""The HTTP session a cluster worker calls the admin API with (trial reports, the model zoo).

Every such call is safe to repeat (a claim by the same worker returns its claim again,
a second finish finds the state the first one stored, zoo lookups only read), so failed
calls are retried, POSTs included, for about a minute: an API restarting or a database
connection cut costs a delay, not a trial.
"""

from __future__ import annotations

import requests
from requests.adapters import HTTPAdapter
from urllib3.util import Retry

__all__ = ["API_TIMEOUT_S", "api_session"]

#: Seconds one API call may take before it counts as failed (and is retried).
API_TIMEOUT_S = 30.0
_RETRY = Retry(total=8, backoff_factor=0.25, status_forcelist=(500, 502, 503, 504), allowed_methods=None)


def api_session() -> requests.Session:
    """An HTTP session that retries through short outages of the admin API."""
    session = requests.Session()
    for scheme in ("http://", "https://"):
        session.mount(scheme, HTTPAdapter(max_retries=_RETRY))
    return session
