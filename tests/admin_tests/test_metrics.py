"""``GET /metrics`` of the admin API over real HTTP: Prometheus' format, counters that move, labels that stay few.

The counters are the process's (other tests in this process count too), so every check
is a difference between two scrapes around the requests a test makes.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any

import pytest
import requests
from flask import Flask

from baobab import Settings
from baobab.testing import Scrape, scrape, serve_in_thread

USERS = "/api/v1/users"
TRIAL = "/api/v1/trials/<int:trial_id>"


@pytest.fixture
def url(app: Flask) -> Any:
    with serve_in_thread(app) as url:
        yield url


def test_requests_are_counted_by_route_method_and_status_and_timed(url: str, settings: Settings) -> None:
    before = scrape(f"{url}/metrics")
    assert requests.get(f"{url}{USERS}", timeout=10).status_code == 401
    credentials = {"email": settings.admin_email, "password": settings.admin_password}
    token = requests.post(f"{url}/api/v1/tokens", json=credentials, timeout=10).json()["token"]
    auth = {"Authorization": f"Bearer {token}"}
    for _ in range(3):
        assert requests.get(f"{url}{USERS}", headers=auth, timeout=10).status_code == 200
    assert requests.get(f"{url}/api/v1/trials/424242", headers=auth, timeout=10).status_code == 404
    after = scrape(f"{url}/metrics")

    def moved(name: str, **labels: str) -> float:
        return after.value(name, **labels) - before.value(name, **labels)

    requests_total = "baobab_api_requests_total"
    assert moved(requests_total, route=USERS, method="GET", status="401") == 1
    assert moved(requests_total, route=USERS, method="GET", status="200") == 3
    assert moved(requests_total, route="/api/v1/tokens", method="POST", status="201") == 1
    assert moved(requests_total, route=TRIAL, method="GET", status="404") == 1  # the rule, not the id
    # the scrape before counts itself once it is answered
    assert moved(requests_total, route="/metrics", method="GET", status="200") == 1
    assert moved("baobab_api_request_seconds_count", route=USERS, method="GET") == 4
    assert moved("baobab_api_request_seconds_sum", route=USERS, method="GET") > 0
    slowest = "+Inf"
    assert moved("baobab_api_request_seconds_bucket", route=USERS, method="GET", le=slowest) == 4
    assert all("424242" not in labels.get("route", "") for labels in after.series(requests_total))


def test_metrics_need_no_token_and_answer_prometheus_text(url: str) -> None:
    for headers in ({}, {"Authorization": "Bearer not-a-token"}):
        response = requests.get(f"{url}/metrics", headers=headers, timeout=10)
        assert response.status_code == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=")
        Scrape.parse(response.text)  # what Prometheus' own parser reads
    assert requests.post(f"{url}/metrics", timeout=10).status_code == 405  # GET only, still JSON's 405
    # the web UI's catch-all route does not take it over, and the API's paths stay the API's
    assert requests.get(f"{url}/api/v1/metrics", timeout=10).status_code == 404


def test_paths_and_methods_a_client_makes_up_add_no_series(url: str, settings: Settings) -> None:
    credentials = {"email": settings.admin_email, "password": settings.admin_password}
    token = requests.post(f"{url}/api/v1/tokens", json=credentials, timeout=10).json()["token"]
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def call(method: str, path: str) -> int:
        request = urllib.request.Request(f"{url}{path}", method=method, headers={"Authorization": f"Bearer {token}"})
        try:
            with opener.open(request, timeout=10) as response:
                return int(response.status)
        except urllib.error.HTTPError as e:
            e.close()
            return int(e.code)

    # the series these requests count in exist from here on (those of /metrics itself too)
    call("GET", "/api/v1/nothing")
    call("BREW", "/api/v1/users/1")
    scrape(f"{url}/metrics")
    before = scrape(f"{url}/metrics")
    for i in range(20):
        assert call("GET", f"/api/v1/nothing-{i}/{token}") == 404
        assert call(f"BREW{i}", f"/api/v1/users/{i}") in (404, 405)
    after = scrape(f"{url}/metrics")
    assert len(after.samples) == len(before.samples)  # the same series, counting higher
    assert (
        after.value("baobab_api_requests_total", route="<unmatched>", method="GET", status="404")
        - before.value("baobab_api_requests_total", route="<unmatched>", method="GET", status="404")
        == 20
    )
    assert (
        after.total("baobab_api_requests_total", method="OTHER")
        - before.total("baobab_api_requests_total", method="OTHER")
        == 20
    )
    text = requests.get(f"{url}/metrics", timeout=10).text
    assert token not in text and "nothing-" not in text and "BREW" not in text
