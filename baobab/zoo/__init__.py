"""The model zoo: every trained PyTorch model warms up the next (ModelKeeper, NSDI 2023).

- :func:`trace_graph` reads a module's architecture as a :class:`ModelGraph`
  (``torch.fx``; untraceable models fall back to their module tree);
- :func:`match_graphs` aligns two graphs (similarity in [0, 1], node mapping) and
  :func:`select_parent` picks the parent among the zoo's candidates;
- :func:`transform_weights` carries the parent's weights over (copy, Net2Net widening,
  magnitude pruning, kernel crop or pad, identity layers for a deeper child);
- :class:`DbZoo` and :class:`HttpZoo` reach the zoo through the database or the admin
  API; :func:`make_warm_starter` and :func:`register_trial_model` are what a worker
  calls around a trial, :func:`warm_start` and :func:`register_model` what a script
  calls with a :class:`baobab.sdk.Client`; retention keeps the most valuable models within a budget;
- :func:`trial_lineage` reads a trial's chain of parents (zoo models, shared parameters, merges of shared
  trainings) in one query, plus two per merge.

Names are imported on first use: the admin API (no torch in its image) needs only the
graph, matching and database parts, and a trial process none of the database's.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from baobab.zoo._client import DbZoo, HttpZoo, ParentOffer, TrialHttpZoo, TrialRegistry, ZooClient, module_state
    from baobab.zoo._graph import GraphFormatError, GraphNode, ModelGraph
    from baobab.zoo._lineage import MAX_DEPTH, Ancestor, Lineage, trial_lineage
    from baobab.zoo._matching import Match, match_graphs, similarities
    from baobab.zoo._registry import (
        DEFAULT_BUDGET_BYTES,
        RegisteredModel,
        choose_parent,
        enforce_budget,
        record_parent,
        register_trial,
        register_upload,
        trial_job,
    )
    from baobab.zoo._retention import RetentionItem, choose_kept, model_value
    from baobab.zoo._selection import Candidate, FeatureCache, Selection, SelectionPolicy, select_parent
    from baobab.zoo._trace import trace_graph
    from baobab.zoo._transform import TransferReport, transform_weights
    from baobab.zoo._warm_start import (
        WarmStartResult,
        make_warm_starter,
        model_graph,
        module_params,
        register_model,
        register_module,
        register_trial_model,
        warm_start,
        warm_start_module,
    )

_WHERE = {
    "DbZoo": "_client",
    "HttpZoo": "_client",
    "ParentOffer": "_client",
    "TrialHttpZoo": "_client",
    "TrialRegistry": "_client",
    "ZooClient": "_client",
    "module_state": "_client",
    "GraphFormatError": "_graph",
    "GraphNode": "_graph",
    "ModelGraph": "_graph",
    "MAX_DEPTH": "_lineage",
    "Ancestor": "_lineage",
    "Lineage": "_lineage",
    "trial_lineage": "_lineage",
    "Match": "_matching",
    "match_graphs": "_matching",
    "similarities": "_matching",
    "DEFAULT_BUDGET_BYTES": "_registry",
    "RegisteredModel": "_registry",
    "choose_parent": "_registry",
    "enforce_budget": "_registry",
    "record_parent": "_registry",
    "register_trial": "_registry",
    "register_upload": "_registry",
    "trial_job": "_registry",
    "RetentionItem": "_retention",
    "choose_kept": "_retention",
    "model_value": "_retention",
    "Candidate": "_selection",
    "FeatureCache": "_selection",
    "Selection": "_selection",
    "SelectionPolicy": "_selection",
    "select_parent": "_selection",
    "trace_graph": "_trace",
    "TransferReport": "_transform",
    "transform_weights": "_transform",
    "WarmStartResult": "_warm_start",
    "make_warm_starter": "_warm_start",
    "model_graph": "_warm_start",
    "module_params": "_warm_start",
    "register_model": "_warm_start",
    "register_module": "_warm_start",
    "register_trial_model": "_warm_start",
    "warm_start": "_warm_start",
    "warm_start_module": "_warm_start",
}

__all__ = [
    "Ancestor",
    "Candidate",
    "DEFAULT_BUDGET_BYTES",
    "DbZoo",
    "FeatureCache",
    "GraphFormatError",
    "GraphNode",
    "HttpZoo",
    "Lineage",
    "MAX_DEPTH",
    "Match",
    "ModelGraph",
    "ParentOffer",
    "RegisteredModel",
    "RetentionItem",
    "Selection",
    "SelectionPolicy",
    "TransferReport",
    "TrialHttpZoo",
    "TrialRegistry",
    "WarmStartResult",
    "ZooClient",
    "choose_kept",
    "choose_parent",
    "enforce_budget",
    "make_warm_starter",
    "match_graphs",
    "model_graph",
    "model_value",
    "module_params",
    "module_state",
    "record_parent",
    "register_model",
    "register_module",
    "register_trial",
    "register_trial_model",
    "register_upload",
    "select_parent",
    "similarities",
    "trace_graph",
    "transform_weights",
    "trial_job",
    "trial_lineage",
    "warm_start",
    "warm_start_module",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"baobab.zoo.{module}"), name)
