"""The error envelope that the servers write and the clients read: one shape, both ways."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from baobab.error_envelope import ErrorEnvelope, decode_error, error_message, status_code_name


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (400, "bad_request"),
        (404, "not_found"),
        (409, "conflict"),
        (413, "request_entity_too_large"),  # the name the API has always used, whatever Python calls it now
        (422, "unprocessable_entity"),
        (502, "bad_gateway"),
        (799, "error"),
    ],
)
def test_status_code_names(status: int, code: str) -> None:
    assert status_code_name(status) == code


def test_what_is_encoded_decodes_the_same() -> None:
    envelope = ErrorEnvelope.for_status(400, "'budget' is required", "budget")
    body = envelope.to_json()
    assert body == {"error": {"code": "bad_request", "message": "'budget' is required", "field": "budget"}}
    assert decode_error(json.loads(json.dumps(body)), 400) == envelope


@pytest.mark.parametrize(
    "body",
    [None, [], "text", {"message": "no envelope"}, {"error": "a string"}, {"error": {"code": "x"}}],
)
def test_what_is_not_an_envelope(body: object) -> None:
    assert decode_error(body, 500) is None


def test_odd_code_and_field_are_named_from_the_status_or_left_out() -> None:
    envelope = decode_error({"error": {"message": "gone", "code": 7, "field": ["x"]}}, 404)
    assert envelope == ErrorEnvelope("not_found", "gone", None)


def test_error_message_falls_back_on_the_text() -> None:
    assert error_message(json.dumps(ErrorEnvelope.for_status(403, "not yours").to_json()), 403) == "not yours"
    page = "<html>" + "x" * 500
    assert error_message(page, 502) == page[:200]


def test_the_module_imports_nothing_of_the_servers() -> None:
    heavy = ("flask", "werkzeug", "sqlalchemy", "requests", "baobab.admin", "baobab.predictor", "baobab.store")
    code = f"import sys, baobab.error_envelope; print(sorted(m for m in sys.modules if m.startswith({heavy!r})))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
