"""What a process that runs template code may see: its environment, and on Linux its disk.

Template code comes from users, and in embedded mode everything of the platform lies
on the same disk: the SQLite database, the key that signs every token
(``home/secret_key``), and every user's datasets, templates and parameters. So each
process that runs a template (a trial worker, an inference worker, the check of an
upload) is started with :func:`template_env`, which keeps none of the platform's
variables, and confines itself with :func:`confine` before it starts any thread:

- the protected paths (``BAOBAB_HOME``, the SQLite file, a local artifacts folder) can
  be neither read nor written, except the process's own private folder inside them
  and files named to it for reading (the one template a check loads);
- everything else can be read; writing is allowed in the private folder and ``/dev``
  only, so a template cannot plant code where the platform will run it, nor leave files
  for another user's templates in the ``/tmp`` and ``/var/tmp`` they would share
  (``TMPDIR`` is the private folder's ``tmp``, which :mod:`tempfile` and the libraries
  that honour it use); and in the process's own ``/proc/<pid>/task``: CUDA names its
  threads there (``pthread_setname_np`` opens ``task/<tid>/comm`` to write and
  truncate), and without it ``cuInit`` fails with "OS call failed" (error 304), seen on
  an H200;
- Landlock also keeps it from tracing processes outside its sandbox, which is what
  reading another process's ``/proc/<pid>/environ`` or memory takes, and from
  mounting or unmounting anything (the ``/proc`` of its PID namespace stays);
- which processes it can see and signal, and how its tree ends with it, is the
  business of :mod:`baobab._contained`, which starts every template process.

This uses Landlock (Linux 5.13 and later, the PyPI package ``landlock``). Where the
kernel has none, :func:`confine` logs that the disk is not confined and returns
False: the environment is still clean, but a template can read what the platform's
user can (the README says so).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "THREAD_VARIABLES",
    "Confinement",
    "confine",
    "hide_from_proc",
    "landlock_available",
    "protected_paths",
    "template_env",
]

logger = logging.getLogger("baobab.sandbox")

#: The variables a template process inherits; everything else (secrets, the platform's settings) stays behind.
_ENV_KEPT = (
    "PATH",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "PYTHONPATH",
    "PYTHONHASHSEED",
    "LD_LIBRARY_PATH",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
)
#: The thread pools of the numeric libraries (torch reads the first two): how many threads
#: a template may use is its parent's decision, set before any of them is imported.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)
#: The allocators of the libraries a template process loads, where theirs would count against its memory limit:
#: Arrow's default (mimalloc) reserves a GiB of address space as it reads the first table, and the data limit
#: (RLIMIT_DATA, baobab.worker._memory) counts reserved address space, so a tabular template had a GiB less
#: than its limit. The C library's malloc reserves what it uses.
_ALLOCATORS = {"ARROW_DEFAULT_MEMORY_POOL": "system"}
#: Where a template process may write besides its private folder: the devices (a GPU's, ``/dev/null``) and
#: ``/dev/shm``, where POSIX shared memory and semaphores live (multiprocessing, torch's DataLoader workers).
#: Not ``/tmp`` or ``/var/tmp``: every user's templates would share them, and ``TMPDIR`` is private.
_WRITABLE = ("/dev",)


def template_env(private: Path | None = None, *, threads: int, **extra: str) -> dict[str, str]:
    """The environment of a process that runs template code.

    Args:
        private: its own folder; ``HOME`` and ``TMPDIR`` point into it, so libraries
            that keep caches and temporary files there write where the sandbox lets them
            (``/tmp`` is closed to them).
        threads: the size of every numeric library's thread pool.
        **extra: more variables, set as given.
    """
    env = {name: os.environ[name] for name in _ENV_KEPT if name in os.environ}
    env.update(dict.fromkeys(THREAD_VARIABLES, str(threads)))
    env.update(_ALLOCATORS)
    if private is not None:
        env["HOME"] = str(private)
        env["TMPDIR"] = str(private / "tmp")
    env.update(extra)
    return env


@dataclass(frozen=True)
class Confinement:
    """What a template process may not touch, and what it may all the same.

    Attributes:
        protected: no access beneath these (the platform's home, database, artifacts).
        private: read and write beneath it even inside a protected path (created if missing).
        readable: files or folders inside a protected path it may read (a template to check).
    """

    protected: tuple[Path, ...]
    private: Path | None = None
    readable: tuple[Path, ...] = field(default=())

    def to_json(self) -> str:
        """For the command line of the process that will confine itself."""
        return json.dumps(
            {
                "protected": [str(p) for p in self.protected],
                "private": None if self.private is None else str(self.private),
                "readable": [str(p) for p in self.readable],
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Confinement:
        data = json.loads(text)
        private = data.get("private")
        return cls(
            protected=tuple(Path(p) for p in data["protected"]),
            private=None if private is None else Path(private),
            readable=tuple(Path(p) for p in data.get("readable", ())),
        )

    def with_private(self, private: Path) -> Confinement:
        return Confinement(self.protected, private, self.readable)


def protected_paths(home: Path, database_url: str, artifacts_url: str) -> tuple[Path, ...]:
    """The paths of a platform that no template may touch: its home, SQLite file and local artifacts.

    The SQLite file is protected with its journal files, not its whole folder, which
    may hold what templates should reach (a test's signal files, say). A journal made
    later lands in a folder that has no rule of its own, so it is out of reach too.
    """
    paths = [home]
    if database_url.startswith("sqlite:///") and database_url != "sqlite:///:memory:":
        database = database_url.removeprefix("sqlite:///")
        paths += [Path(database + suffix) for suffix in ("", "-wal", "-shm", "-journal")]
    if "://" not in artifacts_url or artifacts_url.startswith("file://"):
        paths.append(Path(artifacts_url.removeprefix("file://")))
    return tuple(dict.fromkeys(Path(os.path.realpath(p)) for p in paths))


def landlock_available() -> bool:
    """Whether this kernel confines processes with Landlock."""
    try:
        from landlock.plumbing import landlock_abi_version

        return landlock_abi_version() >= 1
    except Exception:  # no such syscall, or not Linux
        return False


def confine(confinement: Confinement) -> bool:
    """Confine this process and whatever it starts later; call it before starting any thread.

    Landlock applies to the calling thread and the threads and processes it creates
    afterwards: a thread started earlier would stay free.

    Returns:
        True when the disk is confined; False (logged) where the kernel has no Landlock.
    """
    if confinement.private is not None:
        (confinement.private / "tmp").mkdir(parents=True, exist_ok=True)
    if not landlock_available():
        logger.warning("this kernel has no Landlock: template code can read what this user can (see the README)")
        return False
    from landlock.plumbing import FSAccess
    from landlock.porcelain import Ruleset

    read = FSAccess.READ_FILE | FSAccess.READ_DIR | FSAccess.EXECUTE
    everything = FSAccess.all()
    protected = [Path(os.path.realpath(p)) for p in confinement.protected]
    ruleset = Ruleset(restrict_rules=everything)
    for path in _around(Path("/"), protected):
        _allow(ruleset, path, read)
    for root in _WRITABLE:
        for path in _around(Path(root), protected):
            _allow(ruleset, path, everything)
    for path in confinement.readable:
        _allow(ruleset, Path(os.path.realpath(path)), read)
    if confinement.private is not None:
        _allow(ruleset, Path(os.path.realpath(confinement.private)), everything)
    # its own threads' names (see the module docstring): no other process's, nor its other files
    # (/proc/self, not /proc/<getpid()>: in a PID namespace whose /proc was not mounted anew the two differ)
    own_tasks = Path(os.path.realpath("/proc/self")) / "task"
    _allow(ruleset, own_tasks, (FSAccess.WRITE_FILE | FSAccess.TRUNCATE) & everything)
    ruleset.apply()
    return True


def _allow(ruleset: object, path: Path, rights: int) -> None:
    from landlock.plumbing import FSAccess

    try:
        if not path.is_dir():
            rights &= FSAccess.all_file()  # a file takes no folder rights
        ruleset.allow(str(path), rules=rights)  # type: ignore[attr-defined]
    except OSError:
        pass  # gone meanwhile, or a socket: nothing to allow


def _around(root: Path, protected: Iterable[Path], every: tuple[Path, ...] | None = None) -> list[Path]:
    """Paths whose union is everything beneath ``root`` except the protected paths.

    A folder that holds a protected path is replaced by its other entries, level by
    level; Landlock grants by folder, so this is how "all but these" is said. Links are
    left out where their target is, or holds, a protected path: a rule follows the link.
    """
    protected = list(protected)
    every = tuple(protected) if every is None else every  # the whole list, for the links below
    inside = [p for p in protected if p == root or root in p.parents]
    if not inside:
        return [root] if root.exists() else []
    if root in inside or not root.is_dir():
        return []
    try:
        children = [root / name for name in os.listdir(root)]
    except OSError:
        return []
    paths: list[Path] = []
    for child in children:
        real = Path(os.path.realpath(child))
        if real != child and any(p == real or real in p.parents or p in real.parents for p in every):
            continue  # a link to a protected path or to a folder holding one: the rule would land on it
        paths.extend(_around(child, inside, every))
    return paths


def hide_from_proc(names: Iterable[str]) -> None:
    """Blank these variables in this process's initial environment.

    ``/proc/<pid>/environ`` shows that block, not ``os.environ``, to every process of
    the same user, Landlock or not: a template could read the platform's secrets
    there. The values are overwritten in place and unset for the C library; Python's
    ``os.environ`` keeps them, and processes started later get an explicit environment.
    """
    wanted = set(names)
    try:
        stat = Path("/proc/self/stat").read_text()
    except OSError:
        return  # not Linux: no /proc to read it from either
    fields = stat[stat.rindex(")") + 2 :].split()
    start, end = int(fields[47]), int(fields[48])  # env_start and env_end, fields 50 and 51 of proc(5)
    if not start or end <= start:
        return
    import ctypes

    block = ctypes.string_at(start, end - start)
    offset = 0
    for entry in block.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep and name.decode(errors="replace") in wanted and value:
            ctypes.memset(start + offset + len(name) + 1, 0, len(value))
            os.unsetenv(name)
        offset += len(entry) + 1
