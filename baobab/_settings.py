"""Settings: one typed registry of every ``BAOBAB_*`` environment variable.

Every setting is declared once in :data:`SETTINGS` with its type, default and a
one-line doc, in the spirit of Celery's ``app/defaults.py``; :class:`Settings` is the
frozen object built from them. Values come from three sources, highest first:

1. keyword overrides given to :meth:`Settings.from_env` (a CLI option, a test);
2. the environment (``BAOBAB_<NAME>``);
3. the defaults below, where the database file and the artifacts folder are derived
   from ``home`` (so ``BAOBAB_HOME=/data/baobab`` moves both).

Typos fail loudly: an unknown ``BAOBAB_*`` variable or override is refused with the
closest known name, because a misspelt ``BAOBAB_DATABSE_URL`` silently falling back to
the SQLite default would lose a cluster's data. An empty variable counts as unset.

Pass the :class:`Settings` object explicitly (Celery's "breaking the chain"); nothing
in Baobab reads ``os.environ`` for a setting except :meth:`Settings.from_env`.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import secrets
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from baobab.exceptions import SettingsError

__all__ = ["ENV_PREFIX", "SETTINGS", "Executor", "Mode", "Placement", "Setting", "Settings", "SettingsError"]

ENV_PREFIX = "BAOBAB_"
#: The key earlier versions signed with when none was set: published, so refused everywhere.
_PUBLIC_SECRET_KEY = "baobab-development-key-do-not-use-in-production"
#: Where embedded mode keeps the key it made (mode 0600), under ``home``.
SECRET_KEY_FILE = "secret_key"
_MASK = "********"
#: Settings that are URLs which may carry a password.
_CREDENTIAL_URLS = ("database_url", "broker_url")
# The password in ``scheme://user:password@host...`` (user may be empty, as in Redis URLs).
# A memory size as Docker takes it: a whole number of bytes, or with b, k, m or g.
_DOCKER_SIZE = re.compile(r"[1-9][0-9]*[bkmgBKMG]?")
_URL_PASSWORD = re.compile(r"^(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/@]*):[^/]*@")


class Mode(StrEnum):
    """How strict Baobab is about its configuration."""

    EMBEDDED = "embedded"  # one machine, development defaults allowed
    PRODUCTION = "production"  # refuses development secrets


class Executor(StrEnum):
    """Where trials and services run (see DESIGN.md, "Executor")."""

    LOCAL = "local"
    CELERY = "celery"
    DOCKER = "docker"
    KUBERNETES = "kubernetes"


class Placement(StrEnum):
    """How the job driver decides which job's trials start next and how many run fused together.

    ``rules``, the default: the fixed rules (the job with the fewest running trials; groups
    sized by the job's fusion option). ``search``, experimental, asks the placement planner
    (:mod:`baobab.advisor.placement`) for its searched plan, and the fixed rules decide where it
    has nothing to weigh yet; the baselines the search starts from are there for comparison.
    ``search`` is not the default because no benchmark has shown it at least as good as the
    rules (bench/results/placement.md: 1.05x fcfs against the rules' 1.08x on CPU slots, and
    fcfs ahead of both on the GPU); bench/user_job.py measures it against the default.
    """

    RULES = "rules"
    SEARCH = "search"
    FCFS = "fcfs"
    LARGEST_FIRST = "largest_first"
    SHORTEST_FIRST = "shortest_first"


@dataclass(frozen=True)
class Setting:
    """One setting: its field name, value type, default and doc.

    Attributes:
        name: The field of :class:`Settings`; the variable is ``BAOBAB_<NAME>``.
        type: ``Path``, ``str``, ``int``, ``float`` or a ``StrEnum`` of the valid choices.
        default: The value when neither an override nor the environment gives one;
            ``None`` means "not set" (such a setting is optional).
        doc: One line for ``--help`` texts and generated docs.
        derive: When set, the default is ``derive(home)`` instead of ``default``.
        secret: Masked by :meth:`Settings.humanize` and ``repr``.
        minimum: The smallest valid value of an ``int`` or ``float`` setting.
    """

    name: str
    type: type
    default: Any
    doc: str
    derive: Callable[[Path], Any] | None = None
    secret: bool = False
    minimum: float | None = None

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()

    def default_for(self, home: Path) -> Any:
        return self.derive(home) if self.derive is not None else self.default

    def parse(self, raw: str) -> Any:
        """Converts a string (an environment value) to this setting's type.

        Raises:
            SettingsError: naming the variable, the value and the expected type.
        """
        try:
            if issubclass(self.type, StrEnum):
                return self.type(raw.strip().lower())
            if self.type is Path:
                return Path(raw).expanduser().absolute()
            if self.type in (int, float):
                return self._in_range(self.type(raw.strip()))
            return raw
        except ValueError:
            raise SettingsError(f"{self.env}={raw!r}: expected {self.expected}", setting=self.env) from None

    def coerce(self, value: Any) -> Any:
        """Checks an override given as a Python value; strings are parsed like the environment."""
        if isinstance(value, str):
            return self.parse(value)
        if self.type is Path and isinstance(value, os.PathLike):
            return Path(value).expanduser().absolute()
        if self.type is str and isinstance(value, os.PathLike):
            return os.fspath(value)
        if self.type is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if isinstance(value, self.type) and not isinstance(value, bool):
            try:
                return self._in_range(value)
            except ValueError:
                pass
        raise SettingsError(
            f"override {self.name}={value!r}: expected {self.expected}, got {type(value).__name__}",
            setting=self.name,
        )

    @property
    def expected(self) -> str:
        if issubclass(self.type, StrEnum):
            return "one of " + ", ".join(member.value for member in self.type)
        names = {Path: "a path", str: "a string", int: "an integer", float: "a number"}
        bound = f" >= {self.minimum:g}" if self.minimum is not None else ""
        return names[self.type] + bound

    def _in_range(self, value: Any) -> Any:
        if self.minimum is not None and not value >= self.minimum:  # NaN fails too
            raise ValueError(value)
        return value


def _default_gpus() -> int:
    # The NVIDIA GPUs this process may use: CUDA_VISIBLE_DEVICES when it is set (empty or -1: none),
    # else the device files, so that no CUDA library has to load to count them.
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip() and d.strip() != "-1"])
    return len([p for p in Path("/dev").glob("nvidia*") if p.name.removeprefix("nvidia").isdigit()])


def _default_cpu_slots() -> int:
    # The cores this process may run on, which in a container can be fewer than the machine's.
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


SETTINGS: tuple[Setting, ...] = (
    Setting("home", Path, Path("~/.baobab").expanduser(), "folder for the embedded database and artifacts"),
    Setting(
        "database_url",
        str,
        None,
        "SQLAlchemy URL of the metadata store (SQLite file baobab.db in home by default)",
        derive=lambda home: f"sqlite:///{(home / 'baobab.db').as_posix()}",
    ),
    Setting(
        "artifacts_url",
        str,
        None,
        "local folder or fsspec URL for datasets, templates and parameters (home/artifacts by default)",
        derive=lambda home: str(home / "artifacts"),
    ),
    Setting("broker_url", str, None, "Celery broker URL (Redis or RabbitMQ); required by the celery executor"),
    Setting("executor", Executor, Executor.LOCAL, "where trials run: local, celery, docker or kubernetes"),
    Setting(
        "secret_key",
        str,
        None,
        "key that signs session and trial tokens (embedded default: a random one kept in home/secret_key)",
        secret=True,
    ),
    Setting("mode", Mode, Mode.EMBEDDED, "embedded (development defaults allowed) or production"),
    Setting("admin_email", str, None, "email of the superadmin created on first start"),
    Setting("admin_password", str, None, "password of the superadmin created on first start", secret=True),
    Setting("max_upload_mb", int, 512, "largest accepted upload, in MiB", minimum=1),
    Setting("max_json_kb", int, 1024, "largest accepted JSON request body, in KiB", minimum=1),
    Setting(
        "max_predict_mb",
        int,
        16,
        "largest predict request body, in MiB: a predictor's POST /predict and the API's relay to it (413 beyond)",
        minimum=1,
    ),
    Setting(
        "login_failures_per_account",
        int,
        10,
        "failed logins an account may have in a window of login_failure_window_s; more are answered 429",
        minimum=1,
    ),
    Setting(
        "login_failures_per_address",
        int,
        50,
        "failed logins one client address may have in a window of login_failure_window_s; more are answered 429",
        minimum=1,
    ),
    Setting(
        "login_failure_window_s",
        float,
        300.0,
        "seconds over which failed logins are counted; the window starts at the first failure",
        minimum=0.01,
    ),
    Setting("zip_member_mb", int, 256, "largest inflated member or decoded image of an uploaded zip (MiB)", minimum=1),
    Setting("zip_total_mb", int, 4096, "largest inflated size or decoded images of an uploaded zip (MiB)", minimum=1),
    Setting("zip_max_ratio", float, 200.0, "largest compression ratio of a zip member of 1 MiB or more", minimum=1),
    Setting("cpu_slots", int, _default_cpu_slots(), "trials run at once on CPUs (default: usable cores)", minimum=1),
    Setting(
        "gpus",
        int,
        _default_gpus(),
        "GPUs the workers have in all; a train job asking for more GPU_COUNT is refused (kubernetes executor: "
        "k8s_gpus_per_pod x k8s_max_gpu_pods instead; default: the NVIDIA GPUs this machine shows)",
        minimum=0,
    ),
    Setting("trial_timeout_s", float, None, "wall-clock limit of one trial in seconds (default: none)", minimum=0.001),
    Setting(
        "trial_memory_mb",
        int,
        None,
        "memory limit of a local worker, one trial slot, in MiB (default: memory / cpu_slots, 2048 at least)",
        minimum=64,
    ),
    Setting(
        "data_cache_mb",
        int,
        4096,
        "disk a worker machine's shared cache of preprocessed TorchModel datasets may use, in MiB (0: no cache)",
        minimum=0,
    ),
    Setting(
        "placement",
        Placement,
        Placement.RULES,
        "how the driver places trials: rules (fixed; the default), search (the placement planner; experimental), "
        "or a planner baseline",
    ),
    Setting("api_url", str, None, "URL of the admin API that cluster workers report to; required by baobab worker"),
    Setting("heartbeat_s", float, 5.0, "seconds between the heartbeats of a cluster worker's trial", minimum=0.01),
    Setting(
        "heartbeat_timeout_s",
        float,
        60.0,
        "a cluster trial whose worker is silent this long is handed to another worker",
        minimum=0.01,
    ),
    Setting(
        "redelivery_s",
        float,
        3600.0,
        "a trial message unacknowledged this long (its worker died holding it) is delivered again (Redis)",
        minimum=0.01,
    ),
    Setting("lease_s", float, 30.0, "how long an advisor's hold on a job lasts unless renewed", minimum=0.01),
    Setting(
        "finish_wait_s",
        float,
        0.0,
        "0: a cluster trial's outcome is stored before its message is acknowledged; above 0, it may wait this "
        "long for the worker's next claim to carry it (one request for both; lost if the machine dies then)",
        minimum=0.0,
    ),
    Setting(
        "zoo_budget_mb",
        int,
        20480,
        "storage the model zoo may use, in MiB; past it the models of least value for their size go",
        minimum=1,
    ),
    Setting(
        "predictor_min_replicas",
        int,
        1,
        "worker processes each member of an inference job has at least (embedded autoscaling)",
        minimum=1,
    ),
    Setting(
        "predictor_max_replicas",
        int,
        1,
        "worker processes each member may have while queries wait for them (1: no autoscaling)",
        minimum=1,
    ),
    Setting(
        "docker_image", str, "baobab-worker:0.1.0", "image of the worker and predictor containers (docker executor)"
    ),
    Setting(
        "docker_network", str, None, "Docker network of the containers, where the broker and the API are reachable"
    ),
    Setting("docker_artifacts", str, None, "volume name or host folder mounted as the containers' artifacts"),
    Setting("docker_user", str, None, "uid:gid of the containers, never root (default 10001:10001, the images' user)"),
    Setting("docker_scope", str, "baobab", "label value naming this platform's containers on a shared Docker host"),
    Setting("docker_cpus_per_slot", float, 1.0, "CPUs a worker container gets per trial slot", minimum=0.01),
    Setting("docker_memory_per_slot", str, "4g", "memory a container gets per trial slot (Docker size: 512m, 4g)"),
    # The kubernetes executor's pool; the Helm chart gives them to the advisor from its values.
    Setting("k8s_namespace", str, "default", "namespace of the Helm release the advisor scales (kubernetes executor)"),
    Setting(
        "k8s_release", str, "baobab", "the chart's full name: worker Deployments are <release>-worker-cpu and -gpu"
    ),
    Setting("k8s_gpus_per_pod", int, 1, "GPUs each GPU worker pod has (kubernetes executor)", minimum=1),
    Setting("k8s_slots_per_pod", int, 2, "trial slots each CPU worker pod has (kubernetes executor)", minimum=1),
    Setting("k8s_max_gpu_pods", int, 64, "most GPU worker pods the advisor scales to (kubernetes executor)", minimum=0),
    Setting("k8s_max_cpu_pods", int, 64, "most CPU worker pods the advisor scales to (kubernetes executor)", minimum=0),
    Setting("k8s_predictor_min_pods", int, 1, "pods each predictor has at least (kubernetes executor)", minimum=1),
    Setting(
        "k8s_predictor_max_pods",
        int,
        1,
        "pods a predictor's autoscaler may grow it to (kubernetes executor; equal to the minimum: no autoscaler)",
        minimum=1,
    ),
    Setting(
        "k8s_predictor_target_cpu",
        int,
        70,
        "CPU use, in percent of a predictor pod's request, that its autoscaler aims at (1 to 100)",
        minimum=1,
    ),
)
_BY_NAME = {setting.name: setting for setting in SETTINGS}
_BY_ENV = {setting.env: setting for setting in SETTINGS}


@dataclass(frozen=True, repr=False)
class Settings:
    """The configuration of one Baobab process; build it with :meth:`from_env`.

    Fields mirror :data:`SETTINGS`, where each one's type, default and doc are declared.
    """

    home: Path
    database_url: str
    artifacts_url: str
    broker_url: str | None
    executor: Executor
    secret_key: str | None
    mode: Mode
    admin_email: str | None
    admin_password: str | None
    max_upload_mb: int
    max_json_kb: int
    max_predict_mb: int
    login_failures_per_account: int
    login_failures_per_address: int
    login_failure_window_s: float
    zip_member_mb: int
    zip_total_mb: int
    zip_max_ratio: float
    cpu_slots: int
    gpus: int
    trial_timeout_s: float | None
    trial_memory_mb: int | None
    data_cache_mb: int
    placement: Placement
    api_url: str | None
    heartbeat_s: float
    heartbeat_timeout_s: float
    redelivery_s: float
    lease_s: float
    finish_wait_s: float
    zoo_budget_mb: int
    predictor_min_replicas: int
    predictor_max_replicas: int
    docker_image: str
    docker_network: str | None
    docker_artifacts: str | None
    docker_user: str | None
    docker_scope: str
    docker_cpus_per_slot: float
    docker_memory_per_slot: str
    k8s_namespace: str
    k8s_release: str
    k8s_gpus_per_pod: int
    k8s_slots_per_pod: int
    k8s_max_gpu_pods: int
    k8s_max_cpu_pods: int
    k8s_predictor_min_pods: int
    k8s_predictor_max_pods: int
    k8s_predictor_target_cpu: int

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Builds the settings: overrides, then ``BAOBAB_*`` variables, then defaults.

        Args:
            environ: The variables to read; ``os.environ`` when None.
            **overrides: Values by field name (``cpu_slots=2``); a string is parsed as
                the variable would be, and None means "not given", so a CLI can pass its
                options straight through.

        Raises:
            SettingsError: for an unknown variable or override (with the closest known
                name), a value of the wrong type or out of range, an invalid choice (with
                the valid ones), the celery executor without a broker, or production mode
                with the development secret key.
        """
        if environ is None:
            from baobab._sandbox import hide_from_proc  # not for SDK users, who import this module too

            environ = os.environ
            # Read once here; what template processes of this one could read of them goes.
            hide_from_proc(s.env for s in SETTINGS if s.secret or s.name in _CREDENTIAL_URLS)
        for name in sorted(environ):
            if name.startswith(ENV_PREFIX) and name not in _BY_ENV:
                raise SettingsError(f"unknown setting {name}{_did_you_mean(name, env=True)}", setting=name)
        for name in overrides:
            if name not in _BY_NAME:
                raise SettingsError(f"unknown setting {name!r}{_did_you_mean(name, env=False)}", setting=name)

        given: dict[str, Any] = {}
        for setting in SETTINGS:
            if overrides.get(setting.name) is not None:
                given[setting.name] = setting.coerce(overrides[setting.name])
            elif environ.get(setting.env, ""):
                given[setting.name] = setting.parse(environ[setting.env])
        home = given.get("home", _BY_NAME["home"].default)
        values = {s.name: given[s.name] if s.name in given else s.default_for(home) for s in SETTINGS}
        values["artifacts_url"] = _absolute_location(values["artifacts_url"])
        settings = cls(**values)
        settings.check()
        return settings

    def humanize(self, *, censored: bool = True) -> str:
        """Lists the settings that differ from their defaults, one ``BAOBAB_X=value`` a line.

        Args:
            censored: Mask secrets and the passwords inside URLs, so the text can go to
                a log or a bug report.
        """
        lines = []
        for setting in SETTINGS:
            value = getattr(self, setting.name)
            if value == setting.default_for(self.home):
                continue
            lines.append(f"{setting.env}={_shown(setting, value, censored)}")
        return "\n".join(lines)

    def to_env(self, names: Collection[str] | None = None) -> dict[str, str]:
        """``BAOBAB_*`` variables that give another process these settings (``names`` only, if given).

        Unset ones are left out. Used to hand settings to the processes and containers
        Baobab starts, so each sees what its parent was configured with.
        """
        env = {}
        for setting in SETTINGS:
            value = getattr(self, setting.name)
            if value is not None and (names is None or setting.name in names):
                env[setting.env] = value.value if isinstance(value, StrEnum) else str(value)
        return env

    def gpus_offered(self) -> int:
        """The most GPUs one train job can get: the pods the kubernetes executor may scale to, else ``gpus``."""
        if self.executor is Executor.KUBERNETES:
            return self.k8s_gpus_per_pod * self.k8s_max_gpu_pods
        return self.gpus

    def signing_key(self) -> str:
        """The key that signs tokens: ``BAOBAB_SECRET_KEY``, or in embedded mode one of this home's.

        Embedded mode makes a random key on first use and keeps it in
        ``home/secret_key`` (mode 0600), so every process on this home agrees on it and
        nobody else can guess it; production mode refuses to start without the variable.
        """
        if self.secret_key is not None:
            return self.secret_key
        if self.mode is Mode.PRODUCTION:
            raise SettingsError("production mode needs BAOBAB_SECRET_KEY", setting="BAOBAB_SECRET_KEY")
        return _home_secret(self.home / SECRET_KEY_FILE)

    def __repr__(self) -> str:
        shown = (f"{s.name}={_shown(s, getattr(self, s.name), True)!r}" for s in SETTINGS)
        return f"Settings({', '.join(shown)})"

    def check(self) -> None:
        if self.heartbeat_timeout_s <= 2 * self.heartbeat_s:
            raise SettingsError(
                f"BAOBAB_HEARTBEAT_TIMEOUT_S={self.heartbeat_timeout_s:g} must be more than twice "
                f"BAOBAB_HEARTBEAT_S={self.heartbeat_s:g}, or one late heartbeat hands a live trial to another worker",
                setting="BAOBAB_HEARTBEAT_TIMEOUT_S",
            )
        if self.executor is not Executor.LOCAL and self.broker_url is None:
            raise SettingsError(
                f"BAOBAB_EXECUTOR={self.executor.value} needs a broker: set BAOBAB_BROKER_URL "
                "(e.g. redis://host:6379/0)",
                setting="BAOBAB_BROKER_URL",
            )
        if self.predictor_min_replicas > self.predictor_max_replicas:
            raise SettingsError(
                f"BAOBAB_PREDICTOR_MIN_REPLICAS={self.predictor_min_replicas} is more than "
                f"BAOBAB_PREDICTOR_MAX_REPLICAS={self.predictor_max_replicas}",
                setting="BAOBAB_PREDICTOR_MIN_REPLICAS",
            )
        if self.k8s_predictor_min_pods > self.k8s_predictor_max_pods:
            raise SettingsError(
                f"BAOBAB_K8S_PREDICTOR_MIN_PODS={self.k8s_predictor_min_pods} is more than "
                f"BAOBAB_K8S_PREDICTOR_MAX_PODS={self.k8s_predictor_max_pods}",
                setting="BAOBAB_K8S_PREDICTOR_MIN_PODS",
            )
        if self.k8s_predictor_target_cpu > 100:
            raise SettingsError(
                f"BAOBAB_K8S_PREDICTOR_TARGET_CPU={self.k8s_predictor_target_cpu}: expected a percentage, 1 to 100",
                setting="BAOBAB_K8S_PREDICTOR_TARGET_CPU",
            )
        if not _DOCKER_SIZE.fullmatch(self.docker_memory_per_slot):
            raise SettingsError(
                f"BAOBAB_DOCKER_MEMORY_PER_SLOT={self.docker_memory_per_slot!r}: expected a Docker size "
                "such as 512m or 4g",
                setting="BAOBAB_DOCKER_MEMORY_PER_SLOT",
            )
        if self.secret_key == _PUBLIC_SECRET_KEY:
            raise SettingsError(
                "BAOBAB_SECRET_KEY is the development key that earlier versions published: anyone could sign "
                f"tokens with it. {_MAKE_A_KEY}",
                setting="BAOBAB_SECRET_KEY",
            )
        if self.mode is Mode.PRODUCTION and self.secret_key is None:
            raise SettingsError(f"production mode needs a secret key: {_MAKE_A_KEY}", setting="BAOBAB_SECRET_KEY")


_MAKE_A_KEY = (
    "set BAOBAB_SECRET_KEY to a random value, e.g. the output of: "
    "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
)


@functools.cache
def _home_secret(path: Path) -> str:
    """The key kept in ``path``, made (random, mode 0600) when there is none.

    The file is written whole under a temporary name and linked into place, so a
    process starting beside another never reads half a key, and the first one wins.
    """
    try:
        return _read_secret(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}-{secrets.token_hex(8)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(48) + "\n")
        try:
            os.link(temp, path)
        except FileExistsError:
            pass  # another process made it first: use theirs
    finally:
        temp.unlink(missing_ok=True)
    return _read_secret(path)


def _read_secret(path: Path) -> str:
    key = path.read_text().strip()
    if len(key) < 32:
        raise SettingsError(f"{path} holds no usable secret key; delete it to have a new one made", setting=str(path))
    return key


def _shown(setting: Setting, value: Any, censored: bool) -> str:
    text = str(value)
    if censored and value is not None:
        text = _MASK if setting.secret else _URL_PASSWORD.sub(rf"\g<head>:{_MASK}@", text)
    return text


def _did_you_mean(name: str, *, env: bool) -> str:
    # Compared without the shared BAOBAB_ prefix, which would make every name look close.
    bare = name.removeprefix(ENV_PREFIX).lower()
    close = difflib.get_close_matches(bare, list(_BY_NAME), n=1, cutoff=0.6)
    known = [setting.env if env else setting.name for setting in SETTINGS]
    if not close:
        return f"; known settings: {', '.join(known)}"
    return f" (did you mean {_BY_NAME[close[0]].env if env else close[0]}?)"


def _absolute_location(location: str) -> str:
    # A local folder is made absolute so that processes started elsewhere find the same one.
    if "://" in location:
        return location
    return str(Path(location).expanduser().absolute())
