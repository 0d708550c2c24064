"""``baobab db upgrade`` and ``baobab db current``, and where the default database lies."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from baobab.cli.db import db
from baobab.store import describe_url, head_revision


def test_upgrade_then_current_with_a_url(db_url: str) -> None:
    runner = CliRunner()
    head = head_revision()
    before = runner.invoke(db, ["current", "--url", db_url])
    assert before.exit_code == 0, before.output
    assert f"empty (no Baobab tables); run `baobab db upgrade` to create revision {head}" in before.output
    upgraded = runner.invoke(db, ["upgrade", "--url", db_url])
    assert upgraded.exit_code == 0, upgraded.output
    assert upgraded.output == f"{describe_url(db_url)}: at schema revision {head} (head)\n"
    after = runner.invoke(db, ["current", "--url", db_url])
    assert after.exit_code == 0, after.output
    assert after.output == f"{describe_url(db_url)}: at schema revision {head} (head)\n"


def test_the_url_defaults_to_baobab_database_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'from-env.db'}"
    monkeypatch.setenv("BAOBAB_DATABASE_URL", url)
    result = CliRunner().invoke(db, ["upgrade"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "from-env.db").is_file()


def test_the_url_defaults_to_a_sqlite_file_in_baobab_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BAOBAB_DATABASE_URL", raising=False)
    monkeypatch.setenv("BAOBAB_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(db, ["upgrade"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "home" / "baobab.db").is_file()


def test_a_bad_setting_in_the_environment_is_a_clean_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BAOBAB_DATABSE_URL", "sqlite:///x.db")
    result = CliRunner().invoke(db, ["current"])
    assert result.exit_code == 1
    assert "BAOBAB_DATABSE_URL" in result.output and "BAOBAB_DATABASE_URL" in result.output


def test_an_unreachable_database_is_a_clean_error_with_the_password_masked() -> None:
    result = CliRunner().invoke(db, ["current", "--url", "postgresql://ada:secret@127.0.0.1:1/x?connect_timeout=2"])
    assert result.exit_code == 1
    assert "Error: metadata store: reading the schema revision of postgresql://ada:***@127.0.0.1:1/x" in (result.output)
    assert "secret" not in result.output
