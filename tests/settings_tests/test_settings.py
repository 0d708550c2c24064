"""Settings: one registry, overrides > environment > defaults, typos and bad values refused."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest

from baobab._settings import SETTINGS, Executor, Mode, Settings, SettingsError

POSTGRES = "postgresql+psycopg2://baobab:hunter2@db.example:5432/baobab"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty environment of BAOBAB_* variables, with BAOBAB_HOME in a temporary folder."""
    for name in [name for name in os.environ if name.startswith("BAOBAB_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("BAOBAB_HOME", str(tmp_path))
    return tmp_path


def test_registry_declares_every_field_once() -> None:
    assert [s.name for s in SETTINGS] == [f.name for f in dataclasses.fields(Settings)]
    assert all(s.doc and s.env == "BAOBAB_" + s.name.upper() for s in SETTINGS)
    assert {s.name for s in SETTINGS if s.secret} == {"secret_key", "admin_password"}


def test_defaults_are_derived_from_home(home: Path) -> None:
    settings = Settings.from_env()
    assert settings.home == home
    assert settings.database_url == f"sqlite:///{home.as_posix()}/baobab.db"
    assert settings.artifacts_url == str(home / "artifacts")
    assert settings.broker_url is None and settings.trial_timeout_s is None
    assert settings.executor is Executor.LOCAL and settings.mode is Mode.EMBEDDED
    assert settings.max_upload_mb == 512 and settings.cpu_slots >= 1
    assert settings.humanize() == f"BAOBAB_HOME={home}"


def test_explicit_environ_replaces_os_environ(home: Path, tmp_path: Path) -> None:
    settings = Settings.from_env({"BAOBAB_HOME": str(tmp_path / "other"), "BAOBAB_CPU_SLOTS": "3"})
    assert settings.home == tmp_path / "other" and settings.cpu_slots == 3


def test_relative_and_user_paths_become_absolute(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    settings = Settings.from_env({"BAOBAB_HOME": "~/bb", "BAOBAB_ARTIFACTS_URL": "store"})
    assert settings.home == tmp_path / "user" / "bb"
    assert settings.artifacts_url == str(tmp_path / "store")
    assert Settings.from_env(artifacts_url="memory://baobab").artifacts_url == "memory://baobab"


def test_overrides_beat_environment_beat_defaults(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BAOBAB_CPU_SLOTS", "4")
    monkeypatch.setenv("BAOBAB_MAX_UPLOAD_MB", "64")
    monkeypatch.setenv("BAOBAB_DATABASE_URL", POSTGRES)
    settings = Settings.from_env(cpu_slots=2, home=home / "elsewhere", trial_timeout_s=30, max_upload_mb=None)
    assert settings.cpu_slots == 2  # override over environment
    assert settings.max_upload_mb == 64  # None means "not given"
    assert settings.trial_timeout_s == 30.0 and isinstance(settings.trial_timeout_s, float)
    assert settings.database_url == POSTGRES  # an explicit URL is not re-derived from the new home
    assert settings.artifacts_url == str(home / "elsewhere" / "artifacts")
    docker = Settings.from_env(executor="Docker", broker_url="redis://127.0.0.1:6379/0")
    assert docker.executor is Executor.DOCKER  # strings parse like variables


def test_empty_variable_counts_as_unset(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BAOBAB_CPU_SLOTS", "")
    monkeypatch.setenv("BAOBAB_BROKER_URL", "")
    settings = Settings.from_env()
    assert settings.broker_url is None and settings.cpu_slots >= 1


def test_unknown_variable_is_refused_with_the_closest_name(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BAOBAB_DATABSE_URL", POSTGRES)
    with pytest.raises(
        SettingsError, match=r"unknown setting BAOBAB_DATABSE_URL \(did you mean BAOBAB_DATABASE_URL\?\)"
    ):
        Settings.from_env()
    monkeypatch.delenv("BAOBAB_DATABSE_URL")
    monkeypatch.setenv("BAOBAB_ZZZ", "1")
    with pytest.raises(SettingsError, match=r"unknown setting BAOBAB_ZZZ; known settings: BAOBAB_HOME, ") as info:
        Settings.from_env()
    assert info.value.setting == "BAOBAB_ZZZ"


def test_unknown_override_is_refused_with_the_closest_name(home: Path) -> None:
    with pytest.raises(SettingsError, match=r"unknown setting 'cpu_slot' \(did you mean cpu_slots\?\)"):
        Settings.from_env(cpu_slot=2)


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("BAOBAB_CPU_SLOTS", "many", "BAOBAB_CPU_SLOTS='many': expected an integer >= 1"),
        ("BAOBAB_CPU_SLOTS", "0", "BAOBAB_CPU_SLOTS='0': expected an integer >= 1"),
        ("BAOBAB_MAX_UPLOAD_MB", "1.5", "BAOBAB_MAX_UPLOAD_MB='1.5': expected an integer >= 1"),
        ("BAOBAB_TRIAL_TIMEOUT_S", "nan", "BAOBAB_TRIAL_TIMEOUT_S='nan': expected a number >= 0.001"),
        ("BAOBAB_EXECUTOR", "slurm", "BAOBAB_EXECUTOR='slurm': expected one of local, celery, docker, kubernetes"),
        ("BAOBAB_MODE", "prod", "BAOBAB_MODE='prod': expected one of embedded, production"),
        ("BAOBAB_DOCKER_CPUS_PER_SLOT", "0", "BAOBAB_DOCKER_CPUS_PER_SLOT='0': expected a number >= 0.01"),
        ("BAOBAB_DOCKER_MEMORY_PER_SLOT", "4 GB", "BAOBAB_DOCKER_MEMORY_PER_SLOT='4 GB': expected a Docker size"),
        ("BAOBAB_PREDICTOR_MAX_REPLICAS", "0", "BAOBAB_PREDICTOR_MAX_REPLICAS='0': expected an integer >= 1"),
    ],
)
def test_bad_value_names_variable_value_and_expected_type(
    home: Path, monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError, match=re.escape(message)) as info:
        Settings.from_env()
    assert info.value.setting == variable


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"cpu_slots": 1.5}, "override cpu_slots=1.5: expected an integer >= 1, got float"),
        ({"cpu_slots": True}, "override cpu_slots=True: expected an integer >= 1, got bool"),
        ({"max_upload_mb": 0}, "override max_upload_mb=0: expected an integer >= 1, got int"),
        ({"home": 3}, "override home=3: expected a path, got int"),
    ],
)
def test_bad_override_names_key_value_and_expected_type(home: Path, override: dict, message: str) -> None:
    with pytest.raises(SettingsError, match=re.escape(message)):
        Settings.from_env(**override)


def test_production_refuses_the_development_secret_key(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BAOBAB_MODE", "production")
    with pytest.raises(SettingsError, match=r"set BAOBAB_SECRET_KEY to a random value, e\.g\. .*token_urlsafe") as info:
        Settings.from_env()
    assert info.value.setting == "BAOBAB_SECRET_KEY"
    assert Settings.from_env(secret_key="s3cr3t-from-the-vault").mode is Mode.PRODUCTION
    assert Settings.from_env(mode="embedded").mode is Mode.EMBEDDED  # the development key is fine there


def test_predictor_replicas_need_a_minimum_within_the_maximum(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BAOBAB_PREDICTOR_MIN_REPLICAS", "3")
    message = "BAOBAB_PREDICTOR_MIN_REPLICAS=3 is more than BAOBAB_PREDICTOR_MAX_REPLICAS=1"
    with pytest.raises(SettingsError, match=message):
        Settings.from_env()
    settings = Settings.from_env(predictor_max_replicas=4)
    assert (settings.predictor_min_replicas, settings.predictor_max_replicas) == (3, 4)


@pytest.mark.parametrize("executor", [Executor.CELERY, Executor.DOCKER, Executor.KUBERNETES])
def test_cluster_executors_need_a_broker(home: Path, monkeypatch: pytest.MonkeyPatch, executor: Executor) -> None:
    monkeypatch.setenv("BAOBAB_EXECUTOR", executor.value)
    with pytest.raises(SettingsError, match=rf"BAOBAB_EXECUTOR={executor.value} needs a broker: set BAOBAB_BROKER_URL"):
        Settings.from_env()
    assert Settings.from_env(broker_url="redis://127.0.0.1:6379/0").executor is executor


def test_humanize_lists_non_defaults_and_masks_secrets(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BAOBAB_DATABASE_URL", POSTGRES)
    monkeypatch.setenv("BAOBAB_BROKER_URL", "redis://:brokerpw@127.0.0.1:6379/0")
    monkeypatch.setenv("BAOBAB_ADMIN_PASSWORD", "adminpw")
    monkeypatch.setenv("BAOBAB_SECRET_KEY", "topsecret")
    monkeypatch.setenv("BAOBAB_EXECUTOR", "celery")
    settings = Settings.from_env()

    censored = settings.humanize()
    assert censored.splitlines() == [
        f"BAOBAB_HOME={home}",
        "BAOBAB_DATABASE_URL=postgresql+psycopg2://baobab:********@db.example:5432/baobab",
        "BAOBAB_BROKER_URL=redis://:********@127.0.0.1:6379/0",
        "BAOBAB_EXECUTOR=celery",
        "BAOBAB_SECRET_KEY=********",
        "BAOBAB_ADMIN_PASSWORD=********",
    ]
    for secret in ("hunter2", "brokerpw", "adminpw", "topsecret"):
        assert secret not in censored and secret not in repr(settings)
    uncensored = settings.humanize(censored=False)
    assert all(secret in uncensored for secret in ("hunter2", "brokerpw", "adminpw", "topsecret"))


def test_settings_are_frozen(home: Path) -> None:
    settings = Settings.from_env()
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.cpu_slots = 8  # type: ignore[misc]
