"""A SpaceModel trial's architecture: the mutation record its worker stores and the web UI draws.

The record is what ``baobab.space.MutationRecord.to_json()`` writes: the decisions that
shaped the instance, its graph key, and its nodes in the order the graph runs them, each
with its inputs and whether it differs from the space's base. It comes from a worker,
which runs user code, so :func:`architecture_field` checks it at the boundary: every
client may then take the nodes as a graph whose edges point from earlier nodes to later
ones, and draw it without guarding against names that lead nowhere or cycles.
"""

from __future__ import annotations

from typing import Any

from baobab.admin._openapi import register_schema
from baobab.exceptions import RequestError

__all__ = ["ARCHITECTURE_SCHEMA", "architecture_field"]

_NODE_PROPERTIES: dict[str, dict[str, Any]] = {
    "name": {"type": "string", "description": "unique in the graph"},
    "op": {"type": "string", "description": "the torch.fx opcode: placeholder, call_module, call_function, ..."},
    "what": {"type": "string", "description": "the operator in a word: a module class, a function or a method"},
    "inputs": {
        "type": "array",
        "items": {"type": "string"},
        "description": "names of earlier nodes this one reads",
    },
    "changed": {"type": "boolean", "description": "differs from the base: replaced, inserted or fed differently"},
    "mutator": {"type": ["string", "null"], "description": "the mutator that changed it, if one did"},
}

ARCHITECTURE_SCHEMA = register_schema(
    "Architecture",
    {
        "type": "object",
        "description": "the mutation record of a SpaceModel instance",
        "required": ["choices", "graph_key", "nodes"],
        "properties": {
            "choices": {"type": "object", "description": "the decisions that shaped the instance"},
            "graph_key": {"type": "string", "description": "equal for instances that compute the same graph"},
            "nodes": {
                "type": "array",
                "description": "in the order the graph runs them",
                "items": {"type": "object", "required": list(_NODE_PROPERTIES), "properties": _NODE_PROPERTIES},
            },
        },
    },
)

#: Each node field's Python types (as JSON decodes it) and how a message names them.
_NODE_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "name": ((str,), "a string"),
    "op": ((str,), "a string"),
    "what": ((str,), "a string"),
    "inputs": ((list,), "an array of node names"),
    "changed": ((bool,), "a boolean"),
    "mutator": ((str, type(None)), "a string or null"),
}


def _fail(where: str, rule: str, field: str) -> RequestError:
    return RequestError(f"{where} {rule}", field=field)


def architecture_field(body: dict[str, Any], name: str) -> dict[str, Any] | None:
    """``body[name]`` as an architecture record (see the module docstring), or None when absent or null.

    Raises:
        RequestError: the record breaks :data:`ARCHITECTURE_SCHEMA`, a node name comes
            twice, or an input names no earlier node; the message says where.
    """
    record = body.get(name)
    if record is None:
        return None
    if not isinstance(record, dict) or set(record) != {"choices", "graph_key", "nodes"}:
        raise _fail(repr(name), "must be an object with exactly 'choices', 'graph_key' and 'nodes'", name)
    if not isinstance(record["choices"], dict):
        raise _fail(f"{name}.choices", "must be an object", name)
    if not isinstance(record["graph_key"], str):
        raise _fail(f"{name}.graph_key", "must be a string", name)
    if not isinstance(record["nodes"], list):
        raise _fail(f"{name}.nodes", "must be an array", name)
    seen: set[str] = set()
    for i, node in enumerate(record["nodes"]):
        where = f"{name}.nodes[{i}]"
        if not isinstance(node, dict) or set(node) != set(_NODE_TYPES):
            raise _fail(where, f"must be an object with exactly {', '.join(map(repr, _NODE_TYPES))}", name)
        for key, (types, words) in _NODE_TYPES.items():
            if not isinstance(node[key], types):
                raise _fail(f"{where}.{key}", f"must be {words}", name)
        for j, source in enumerate(node["inputs"]):
            if not isinstance(source, str) or source not in seen:
                raise _fail(f"{where}.inputs[{j}]", f"is {source!r}, which names no earlier node", name)
        if node["name"] in seen:
            raise _fail(f"{where}.name", f"is {node['name']!r} again: node names are unique", name)
        seen.add(node["name"])
    return record
