"""Request logs in the artifact store: days of parts, newest day first, parts in name (time) order."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from baobab.store import ArtifactStore, delete_request_logs, request_log_days, request_log_part_key


def test_days_gather_their_parts_in_order_and_deleting_takes_only_that_jobs_logs(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "artifacts")
    assert request_log_days(store, 7) == []
    first, second = date(2026, 3, 1), date(2026, 3, 2)
    parts = {
        request_log_part_key(7, first, "235959000001-bbbbbbbb-000002"): b'{"n": 2}\n',
        request_log_part_key(7, first, "120000000000-aaaaaaaa-000001"): b'{"n": 1}\n{"n": 1.5}\n',
        request_log_part_key(7, second, "000000000003-aaaaaaaa-000003"): b'{"n": 3}\n',
        request_log_part_key(70, first, "120000000000-cccccccc-000001"): b'{"other": true}\n',
    }
    for key, data in parts.items():
        store.put_bytes(key, data)
    assert request_log_part_key(7, first, "x") == "request_logs/inference-7/2026-03-01/x.jsonl"
    # What no predictor writes is not a part of a day.
    store.put_bytes("request_logs/inference-7/2026-02-30/a.jsonl", b"no such day\n")
    store.put_bytes("request_logs/inference-7/notes/a.jsonl", b"not a day\n")
    store.put_bytes("request_logs/inference-7/2026-03-01/a.txt", b"not JSON lines\n")

    days = request_log_days(store, 7)
    assert [d.day for d in days] == [second, first]  # newest first
    assert days[1].keys == (
        "request_logs/inference-7/2026-03-01/120000000000-aaaaaaaa-000001.jsonl",
        "request_logs/inference-7/2026-03-01/235959000001-bbbbbbbb-000002.jsonl",
    )
    assert days[1].size_bytes == len(b'{"n": 1}\n{"n": 1.5}\n') + len(b'{"n": 2}\n')
    assert (days[0].size_bytes, len(days[0].keys)) == (len(b'{"n": 3}\n'), 1)
    assert request_log_days(store, 7, day=first) == [days[1]]  # one day's folder alone
    assert request_log_days(store, 7, day=date(2026, 3, 9)) == []

    assert delete_request_logs(store, 7) is True
    assert request_log_days(store, 7) == []
    assert not (tmp_path / "artifacts" / "request_logs" / "inference-7").exists()
    assert [d.day for d in request_log_days(store, 70)] == [first]
    assert delete_request_logs(store, 7) is False
