"""Alembic's entry point: runs the migrations on the connection Baobab hands over.

Baobab (``upgrade_database``) passes an open connection in
``config.attributes["connection"]``; there is no alembic.ini.
"""

from __future__ import annotations

from alembic import context

from baobab.store._db import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise SystemExit("Baobab's migrations run through `baobab db upgrade`, on an open connection")
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    # SQLite cannot ALTER most things; batch mode copies the table instead.
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
