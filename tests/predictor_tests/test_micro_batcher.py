"""The micro-batcher with real threads: concurrent submissions share batches, answers go back apart."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from baobab.predictor import MicroBatcher


class Recorder:
    """A process function that answers ``2 * q`` and records each batch."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.batches: list[list[Any]] = []
        self.delay_s = delay_s

    def __call__(self, batch: list[Any]) -> list[Any]:
        self.batches.append(list(batch))
        time.sleep(self.delay_s)
        return [2 * q for q in batch]


def answers(parts: Any) -> list[Any]:
    return [q for part in parts for q in part.outcome[part.start : part.stop]]


def test_concurrent_submissions_within_the_window_share_a_batch() -> None:
    recorder = Recorder()
    batcher = MicroBatcher(recorder, window_s=0.2, max_batch_size=100)
    results: dict[int, list[Any]] = {}
    barrier = threading.Barrier(8)

    def client(i: int) -> None:
        barrier.wait()
        results[i] = answers(batcher.submit([i, 100 + i]).wait(10))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    batcher.close()
    assert results == {i: [2 * i, 200 + 2 * i] for i in range(8)}
    assert len(recorder.batches) < 8
    assert sorted(q for batch in recorder.batches for q in batch) == sorted([*range(8), *range(100, 108)])


def test_a_batch_never_exceeds_the_maximum_and_a_large_request_is_cut() -> None:
    recorder = Recorder()
    batcher = MicroBatcher(recorder, window_s=0.01, max_batch_size=4)
    ticket = batcher.submit(list(range(10)))
    parts = ticket.wait(10)
    batcher.close()
    assert answers(parts) == [2 * q for q in range(10)]
    assert [len(batch) for batch in recorder.batches] == [4, 4, 2]


def test_requests_queued_while_busy_go_in_the_next_batch_without_waiting_for_the_window() -> None:
    recorder = Recorder(delay_s=0.3)
    batcher = MicroBatcher(recorder, window_s=0.0, max_batch_size=100)
    first = batcher.submit([0])
    deadline = time.monotonic() + 10
    while not recorder.batches and time.monotonic() < deadline:  # until the dispatcher is busy with [0]
        time.sleep(0.005)
    later = [batcher.submit([i]) for i in range(1, 6)]
    assert answers(first.wait(10)) == [0]
    assert [answers(t.wait(10)) for t in later] == [[2], [4], [6], [8], [10]]
    batcher.close()
    assert recorder.batches == [[0], [1, 2, 3, 4, 5]]


def test_an_error_in_processing_reaches_every_request_of_the_batch() -> None:
    def fail(batch: list[Any]) -> list[Any]:
        raise RuntimeError("members gone")

    batcher = MicroBatcher(fail, window_s=0.05, max_batch_size=10)
    tickets = [batcher.submit([1]), batcher.submit([2])]
    for ticket in tickets:
        (part,) = ticket.wait(10)
        assert isinstance(part.error, RuntimeError) and part.outcome is None
    batcher.close()


def test_no_queries_need_no_batch_and_a_closed_batcher_refuses() -> None:
    recorder = Recorder()
    batcher = MicroBatcher(recorder, window_s=0.0, max_batch_size=10)
    assert batcher.submit([]).wait(0) == []
    batcher.close()
    assert recorder.batches == []
    with pytest.raises(RuntimeError, match="closed"):
        batcher.submit([1])
    with pytest.raises(ValueError, match="max_batch_size=0"):
        MicroBatcher(recorder, window_s=0.0, max_batch_size=0)


class Gate:
    """A process function that answers ``2 * q`` once let through, and says when a batch is in hand."""

    def __init__(self) -> None:
        self.entered = threading.Semaphore(0)
        self.release = threading.Event()
        self.batches: list[list[Any]] = []

    def __call__(self, batch: list[Any]) -> list[Any]:
        self.batches.append(list(batch))
        self.entered.release()
        assert self.release.wait(10)
        return [2 * q for q in batch]


def test_dispatchers_added_answer_batches_at_the_same_time() -> None:
    both = threading.Barrier(2, timeout=10)  # passes only when two batches are in hand at once

    def process(batch: list[Any]) -> list[Any]:
        both.wait()
        return [2 * q for q in batch]

    batcher = MicroBatcher(process, window_s=0.0, max_batch_size=1)
    batcher.add(process)
    first, second = batcher.submit([1]), batcher.submit([2])
    assert answers(first.wait(10)) == [2]
    assert answers(second.wait(10)) == [4]
    batcher.close()


def test_load_counts_the_requests_waiting_and_those_being_answered() -> None:
    gate = Gate()
    batcher = MicroBatcher(gate, window_s=0.0, max_batch_size=2)
    tickets = [batcher.submit([1, 2])]
    assert gate.entered.acquire(timeout=10)  # [1, 2] in hand
    tickets.append(batcher.submit([3, 4, 5]))  # cut in two parts: [3, 4] and [5]
    assert (batcher.queued, batcher.load) == (3, 3)
    gate.release.set()
    assert [answers(t.wait(10)) for t in tickets] == [[2, 4], [6, 8, 10]]
    assert batcher.load == 0
    batcher.close()


def test_a_removed_dispatcher_answers_its_batch_first_and_the_others_take_the_queue() -> None:
    gate, other = Gate(), Recorder()
    batcher = MicroBatcher(other, window_s=0.0, max_batch_size=1)
    removed = batcher.add(gate)
    # the first dispatcher is busy elsewhere until the gate holds a batch: block it on a slow one
    other.delay_s = 0.5
    held = [batcher.submit([1]), batcher.submit([2])]
    assert gate.entered.acquire(timeout=10)
    remover = threading.Thread(target=batcher.remove, args=(removed,))
    remover.start()
    remover.join(0.3)
    assert remover.is_alive(), "remove() returned with the dispatcher's batch still in hand"
    gate.release.set()
    remover.join(10)
    other.delay_s = 0.0
    later = [batcher.submit([q]) for q in range(3, 7)]
    assert sorted(answers(t.wait(10))[0] for t in [*held, *later]) == [2 * q for q in range(1, 7)]
    assert len(gate.batches) == 1  # nothing after it was removed
    batcher.close()


def test_closing_with_several_dispatchers_answers_everything_queued() -> None:
    recorder = Recorder(delay_s=0.01)
    batcher = MicroBatcher(recorder, window_s=0.0, max_batch_size=2)
    for _ in range(2):
        batcher.add(recorder)
    tickets = [batcher.submit([q]) for q in range(20)]
    batcher.close()
    assert [answers(t.wait(0)) for t in tickets] == [[2 * q] for q in range(20)]
    with pytest.raises(RuntimeError, match="closed"):
        batcher.add(recorder)
