"""What a template's data loading reads of its model, and what it sets: the key and state of a data cache entry.

:mod:`baobab.worker._data_cache` files a preprocessed dataset under the values that its
``load_data`` and ``preprocess`` read, and keeps the attributes they set. This module finds
both out: :func:`recording` notes the reads while a build runs, :func:`snapshot` and
:func:`key_values` turn what a model holds into the JSON a key is made of, and :func:`state_set`
says which attributes a build set. A name is ``(attribute, None)`` for an instance
attribute, or ``(attribute, key)`` for a key of the model's ``knobs`` or ``train_args``,
which are read key by key: a trial depends on the knobs it reads, not on all of them.
"""

from __future__ import annotations

import contextlib
import json
import types
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

__all__ = ["Name", "key_values", "order", "recording", "snapshot", "state_set"]

#: What a build read: (attribute, None) for an attribute, (attribute, key) for a key of a keyed attribute.
Name = tuple[str, str | None]
#: Model attributes that are dicts read key by key.
_KEYED = ("knobs", "train_args")


class _KeyReads(dict[str, Any]):
    """A model's knobs or train args that note which keys are read; whatever reads them all reads every key."""

    def __init__(self, data: Mapping[str, Any], attribute: str, reads: set[Name]) -> None:
        super().__init__(data)
        self._attribute = attribute
        self._reads = reads

    def _read(self, key: object) -> None:
        if isinstance(key, str):  # keys are str: another key is never there, whatever the dict holds
            self._reads.add((self._attribute, key))

    def _read_all(self) -> None:
        self._reads.update((self._attribute, key) for key in dict.keys(self))

    def __getitem__(self, key: str) -> Any:
        self._read(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self._read(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self._read(key)
        return super().__contains__(key)

    def pop(self, key: str, *default: Any) -> Any:
        self._read(key)
        return super().pop(key, *default)

    def setdefault(self, key: str, default: Any = None) -> Any:
        self._read(key)
        return super().setdefault(key, default)

    def keys(self) -> Any:
        self._read_all()
        return super().keys()

    def values(self) -> Any:
        self._read_all()
        return super().values()

    def items(self) -> Any:
        self._read_all()
        return super().items()

    def __iter__(self) -> Iterator[str]:
        self._read_all()
        return super().__iter__()

    def __len__(self) -> int:
        self._read_all()
        return super().__len__()

    def __eq__(self, other: object) -> bool:
        self._read_all()
        return super().__eq__(other)

    def __ne__(self, other: object) -> bool:
        self._read_all()
        return super().__ne__(other)

    def __repr__(self) -> str:
        self._read_all()
        return super().__repr__()

    def copy(self) -> dict[str, Any]:
        self._read_all()
        return dict(dict.items(self))

    __hash__ = None


@contextlib.contextmanager
def recording(model: Any) -> Iterator[set[Name]]:
    """Note what the block reads of ``model``: its instance attributes, and the keys of its knobs and train args.

    The model's class is swapped for a subclass whose ``__getattribute__`` notes the reads
    (an instance's attribute reads go through its type), and its knobs and train args for
    :class:`_KeyReads`; both are put back after the block, with what the block wrote to them.
    """
    reads: set[Name] = set()
    cls: Any = type(model)  # Any: its __getattribute__ is looked up on the class, unbound
    state = vars(model)
    keyed = {name: state[name] for name in _KEYED if type(state.get(name)) is dict}

    def __getattribute__(self: Any, name: str) -> Any:
        if name not in keyed and name in object.__getattribute__(self, "__dict__"):
            reads.add((name, None))
        return cls.__getattribute__(self, name)

    def body(namespace: dict[str, Any]) -> None:
        namespace.update(__getattribute__=__getattribute__, __module__=cls.__module__, __qualname__=cls.__qualname__)

    recorder = types.new_class(cls.__name__, (cls,), exec_body=body)
    for name, value in keyed.items():
        state[name] = _KeyReads(value, name, reads)
    model.__class__ = recorder
    try:
        yield reads
    finally:
        model.__class__ = cls
        for name, original in keyed.items():
            current = state.get(name)
            if isinstance(current, _KeyReads):
                state[name] = original if dict.__eq__(current, original) else dict(dict.items(current))


def _json(value: Any) -> str | None:
    """``value`` as JSON text, if JSON gives it back exactly (no tuple, NaN, NumPy scalar or int key); else None."""
    try:
        text = json.dumps(value, sort_keys=True, allow_nan=False)
        same = bool(json.loads(text) == value)
    except (TypeError, ValueError):
        return None
    return text if same else None


def snapshot(model: Any, names: Iterable[Name] | None = None) -> dict[Name, str | None]:
    """The JSON of ``model``'s attributes and of each key of its keyed ones (of ``names`` only, if given),
    None for a value that is not JSON; names absent from the model are left out."""
    state = vars(model)
    if names is None:
        keys = [(name, key) for name in _KEYED if isinstance(state.get(name), dict) for key in state[name]]
        names = [(name, None) for name in state] + keys
    taken: dict[Name, str | None] = {}
    for attribute, key in names:
        value = state.get(attribute)
        if attribute not in state or (key is not None and not (isinstance(value, dict) and key in value)):
            continue
        taken[(attribute, key)] = _json(value if key is None else value[key])
    return taken


def key_values(snapshot: Mapping[Name, str | None], names: Iterable[Name]) -> list[list[Any]] | None:
    """``[attribute, key, JSON or None when absent]`` for each name in a stable order; None if one is not JSON."""
    values: list[list[Any]] = []
    for attribute, key in sorted(names, key=order):
        if (attribute, key) in snapshot and snapshot[(attribute, key)] is None:
            return None
        values.append([attribute, key, snapshot.get((attribute, key))])
    return values


def state_set(references: Mapping[str, Any], before: Mapping[Name, str | None], model: Any) -> dict[str, Any] | None:
    """The attributes the build set or changed, as JSON values; None if one is not JSON, or one was deleted."""
    state = vars(model)
    if not references.keys() <= state.keys():
        return None
    changed: dict[str, Any] = {}
    for name, value in state.items():
        text = _json(value)
        if name in references and value is references[name] and text == before.get((name, None)):
            continue
        if text is None:
            return None
        changed[name] = json.loads(text)
    return changed


def order(name: Name) -> tuple[str, bool, str]:
    """A sort key of names: JSON of sorted names is the same in every process."""
    return name[0], name[1] is not None, name[1] or ""
