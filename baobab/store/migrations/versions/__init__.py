"""One module per schema revision; Alembic loads them by file, in ``down_revision`` order."""
