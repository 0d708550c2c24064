"""The inference endpoint: one predictor process per running inference job.

``python -m baobab.predictor <inference_job_id>`` serves one job: its members (the
trials it serves) run in inference worker processes, one per member
(:mod:`baobab.worker._inference`) or one for the members of one template and structure,
stacked (:mod:`baobab.worker._fused_inference`); queries of concurrent requests are
micro-batched, fanned out to every worker and ensembled (:mod:`baobab.predictor._ensemble`).
:class:`InferenceSupervisor`, a thread of ``baobab up``, starts and stops those
processes as inference jobs come and go.
"""

from __future__ import annotations

from baobab.predictor._batching import MicroBatcher
from baobab.predictor._ensemble import check_answer, ensemble, majority_vote, mean_value, mean_vector
from baobab.predictor._main import PredictorOptions
from baobab.predictor._queries import QueryFormat, check_queries
from baobab.predictor._supervisor import InferenceSupervisor

__all__ = [
    "InferenceSupervisor",
    "MicroBatcher",
    "PredictorOptions",
    "QueryFormat",
    "check_answer",
    "check_queries",
    "ensemble",
    "majority_vote",
    "mean_value",
    "mean_vector",
]
