"""The one error hierarchy of Baobab.

    BaobabError
    ├── KnobConfigError        a template's knob config or knob values are invalid
    ├── DatasetError           a dataset file cannot be read as its format says
    ├── TemplateError          a model template cannot be loaded or breaks its contract
    ├── InvalidArchitectureError   a template's architecture, for these knobs, cannot be built or does not fit
    ├── StrategyError          a search strategy was asked for something it cannot do
    ├── BudgetError            a train job's budget has an unknown key or a value out of range
    ├── StoreError             the metadata database failed, or its schema is out of date
    ├── ArtifactError          an artifact key breaks a rule, or an artifact cannot be used
    │   └── ArtifactNotFoundError   no artifact is stored under the key
    ├── SettingsError          a setting is unknown or has a bad value
    ├── RequestError           an API request is malformed or a field breaks a rule (400)
    ├── AuthenticationError    no valid credentials (401)
    ├── PermissionDeniedError  the user may not do this (403)
    ├── NotFoundError          the resource asked for does not exist (404)
    └── ConflictError          the change clashes with what is stored (409)

Each error carries the place it is about (a knob name, a file and row) as attributes,
so the REST layer and the CLI can name the field without parsing messages.
"""

from __future__ import annotations

__all__ = [
    "AuthenticationError",
    "ConflictError",
    "NotFoundError",
    "PermissionDeniedError",
    "RequestError",
    "ArtifactError",
    "ArtifactNotFoundError",
    "BaobabError",
    "BudgetError",
    "DatasetError",
    "InvalidArchitectureError",
    "KnobConfigError",
    "SettingsError",
    "StoreError",
    "StrategyError",
    "TemplateError",
]


class BaobabError(Exception):
    """Base class of every error Baobab raises on purpose."""


class KnobConfigError(BaobabError, ValueError):
    """A knob config or a knob value breaks a rule; ``knob`` names the knob."""

    def __init__(self, message: str, *, knob: str | None = None) -> None:
        self.knob = knob
        super().__init__(f"knob {knob!r}: {message}" if knob else message)


class DatasetError(BaobabError, ValueError):
    """A dataset cannot be decoded; ``file`` and ``row`` say where (row 1 is the header)."""

    def __init__(self, message: str, *, file: str | None = None, row: int | None = None) -> None:
        self.file = file
        self.row = row
        where = []
        if file is not None:
            where.append(str(file))
        if row is not None:
            where.append(f"row {row}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


class TemplateError(BaobabError):
    """A model template fails to import or breaks the BaseModel contract."""


class InvalidArchitectureError(BaobabError):
    """The architecture these knob values describe cannot be built, or its graph does not fit.

    A template raises it from its constructor or ``train()`` (a shape mismatch found
    when the module is built and run on one example batch, say), with a message that
    says why. The trial then ends INVALID, not ERRORED: a point of the search space
    that has no model is an outcome of the search, not a fault of the template, so it
    counts toward no error limit, and the strategy learns never to propose it again.
    """


class StrategyError(BaobabError, ValueError):
    """A search strategy is unknown or cannot search the given knob config."""


class StoreError(BaobabError):
    """The metadata database refused a change or cannot be used; the cause is chained."""


class SettingsError(BaobabError, ValueError):
    """A setting is unknown or has a bad value; ``setting`` names the variable or override."""

    def __init__(self, message: str, *, setting: str | None = None) -> None:
        self.setting = setting
        super().__init__(message)


class ArtifactError(BaobabError, ValueError):
    """An artifact key breaks a rule, or an artifact cannot be used; ``key`` names it."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        self.key = key
        super().__init__(f"artifact {key!r}: {message}" if key is not None else message)


class ArtifactNotFoundError(ArtifactError, FileNotFoundError):
    """No artifact is stored under ``key``."""


class BudgetError(BaobabError, ValueError):
    """A budget breaks a rule; ``field`` names the budget key (or ``budget`` for the whole)."""

    def __init__(self, message: str, *, field: str) -> None:
        self.field = str(field)
        super().__init__(f"{self.field}: {message}")


class RequestError(BaobabError, ValueError):
    """A request is malformed or a field breaks a rule (400); ``field`` names it."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


class AuthenticationError(BaobabError):
    """No valid credentials: a missing, expired or forged token, a wrong password (401)."""


class PermissionDeniedError(BaobabError):
    """The user is known but may not do this (403); ``field`` names the field at fault."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


class NotFoundError(BaobabError, LookupError):
    """The resource asked for does not exist (404)."""


class ConflictError(BaobabError):
    """The change clashes with what is stored, e.g. a duplicate email (409); ``field`` names it."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)
