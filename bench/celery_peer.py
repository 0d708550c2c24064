"""A bare Celery worker doing one trial's template calls per task: the peer of ``overhead.py --executor celery``.

Same delivery rules as Baobab's workers (acks late, one task at a time per process), no
platform: no trial rows, no API, no artifacts. Each finished task increments a Redis
counter, which the benchmark watches.
"""

from __future__ import annotations

import os
from pathlib import Path

import redis
from celery import Celery

from baobab.model import load_template
from baobab.store import params_to_bytes

BROKER = os.environ["BENCH_BROKER_URL"]
COUNTER = "bench:done"
TEMPLATE = Path(__file__).parent / "templates" / "sleeper.py"

app = Celery("celery_peer", broker=BROKER)
app.conf.update(task_acks_late=True, worker_prefetch_multiplier=1, task_ignore_result=True)
_counter = redis.Redis.from_url(BROKER)


@app.task(name="peer.trial")
def trial(x: float, sleep_s: float) -> None:
    cls = load_template(str(TEMPLATE), "Sleeper")
    model = cls(x=x)
    model.train("", sleep_s=sleep_s)
    model.evaluate("")
    params_to_bytes(model.dump_parameters())
    _counter.incr(COUNTER)
