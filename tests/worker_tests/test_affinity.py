"""Choosing the worker machine that holds a job's data (the Celery executor's routing)."""

from __future__ import annotations

from collections import Counter

from baobab.worker._affinity import choose_node, node_of


def test_the_node_is_the_worker_name_without_its_process() -> None:
    assert node_of("w0@cluster:1234") == "w0@cluster"
    assert node_of("baobab-7@host.example:99") == "baobab-7@host.example"


def test_the_holder_that_ran_most_of_the_job_is_chosen_while_it_has_room() -> None:
    capacity = {"a@h": 2, "b@h": 4, "c@h": 8}
    holders = Counter({"a@h": 5, "b@h": 1})  # c has the most room but holds nothing of the job
    assert choose_node(holders, capacity, Counter({"a@h": 3}), queue_ahead=1) == "a@h"
    # a full (2 slots and 2 waiting): the other holder, not the one with nothing of the job
    assert choose_node(holders, capacity, Counter({"a@h": 4}), queue_ahead=1) == "b@h"
    # equal shares of the job: the one with more room
    assert choose_node(Counter({"a@h": 2, "b@h": 2}), capacity, Counter(), queue_ahead=1) == "b@h"


def test_no_node_when_each_holder_is_full_or_gone() -> None:
    capacity = {"a@h": 1}
    # a slot and one queued ahead: a third trial would wait behind two
    assert choose_node(Counter({"a@h": 3}), capacity, Counter({"a@h": 2}), queue_ahead=1) is None
    assert choose_node(Counter({"a@h": 3}), capacity, Counter({"a@h": 1}), queue_ahead=1) == "a@h"
    assert choose_node(Counter({"gone@h": 3}), capacity, Counter(), queue_ahead=1) is None
    assert choose_node(Counter(), capacity, Counter(), queue_ahead=1) is None
