"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Dialect, Enum, TypeDecorator

__all__ = ["UtcDateTime", "json_column_type", "string_enum", "utcnow"]


def utcnow() -> datetime:
    """The current time, timezone-aware in UTC: the only kind of time the store keeps."""
    return datetime.now(UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """A timestamp that goes in and comes out timezone-aware, in UTC.

    PostgreSQL keeps the offset (``timestamptz``); SQLite keeps text without one, so
    values are converted to UTC on the way in and marked UTC on the way out. A naive
    datetime is refused rather than guessed at: it is a bug in the caller.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()}: the store keeps timezone-aware times only")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def json_column_type() -> JSON:
    """JSON where Python None is SQL NULL (not the JSON text ``null``), so IS NULL works."""
    return JSON(none_as_null=True)


def string_enum(enum_class: type[enum.Enum]) -> Enum:
    """An enum kept as its value in a VARCHAR(32), with no CHECK and no native type.

    Adding a state then needs no migration; reading an unknown value fails loudly.
    """
    return Enum(
        enum_class,
        native_enum=False,
        create_constraint=False,
        length=32,
        values_callable=_values,
        validate_strings=True,
    )


def _values(enum_class: type[enum.Enum]) -> list[Any]:
    return [member.value for member in enum_class]
