"""Alembic migrations of the metadata database (run them with ``baobab db upgrade``).

A package only so that setuptools ships the scripts; nothing here is imported.

To write revision N+1 after changing ``baobab/store/_db/_tables.py``, autogenerate it
against a database at the current head, then review it (plain ``sa`` types only, as
in ``0001_initial.py``)::

    from alembic import command
    from baobab.store._db import create_engine_from_url, upgrade_database
    from baobab.store._db._migrate import alembic_config

    upgrade_database(url)
    with create_engine_from_url(url).begin() as connection:
        command.revision(alembic_config(connection), "what changed", autogenerate=True, rev_id="0002")

``tests/store_tests/test_db_schema.py`` fails until models and migrations agree.
"""
