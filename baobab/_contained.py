"""The one home of child processes: how one is started in a group of its own, limited in time, killed and reported.

Every child process the platform starts and must be able to end with all it started
is a :class:`ProcessGroup`: a :class:`subprocess.Popen` in a session (so a process
group) of its own, signalled and killed as a group (:meth:`ProcessGroup.signal_group`,
:meth:`ProcessGroup.stop`, :meth:`ProcessGroup.end`), given a time limit
(:meth:`ProcessGroup.exited_within`) and reported in words (:func:`how_it_ended`). A
predictor is one (it runs only the platform's code).

Every template process (a local trial worker, a Celery worker's trial process, a trial
run by ``baobab try``, an inference worker, the check of an upload) is a
:class:`TemplateProcess`: a process group whose command runs under a small launcher
(this file, run by the same Python with ``-I -S``: no site-packages, nothing of the
platform). What holds, by what the kernel allows:

**A PID namespace** (Linux, run as root, or as another user where unprivileged user
namespaces are enabled; the launcher then maps the user to itself):

- the template process sees only the processes of its namespace: ``/proc`` is
  mounted anew for it, so ``/proc/<pid>/environ`` or ``cmdline`` of the server, or of
  any process outside, does not exist, and ``os.kill(<pid>, ...)`` names no process
  outside (the number means a process of the namespace, or none);
- when the template process ends, however it ends (it exits, crashes, is killed with
  :meth:`TemplateProcess.end`, or the process that started it dies), the namespace's
  first process exits and the kernel kills every process left in it: double-forked
  ``setsid()`` daemons included, which no process group or session holds;
- Landlock (:mod:`baobab._sandbox`) keeps the template from unmounting that ``/proc``
  (a kernel without Landlock leaves a template that runs as root free to);
  Where a fresh ``/proc`` cannot be mounted (a container whose ``/proc`` is partly
  masked), the processes outside can still be read in ``/proc`` (their environment
  is kept from the template by Landlock, their command line is not), but not signalled,
  and the tree still dies with the template process. The launcher says so in the log.

**No namespace** (not Linux, or namespaces refused, as in a container without
``CAP_SYS_ADMIN`` and without user namespaces; logged): the launcher becomes a child
subreaper (``PR_SET_CHILD_SUBREAPER``), so orphans, double-forked daemons included,
become its children; when the template process exits, it kills them all before it
exits itself. The template can see and signal every process of its user, and a
daemon that left the process group outlives a :meth:`TemplateProcess.end` (SIGKILL
to the group: the launcher cannot act on it); a template process that ends by itself
takes its tree with it.

A long-lived template process that runs one trial after another (a worker process of
the local executor or of a Celery pool process) is a :func:`become_subreaper` and kills
what each trial left behind with :func:`end_strays`, daemons included, when the trial
ends; its namespace kills whatever is left when it ends itself.

The launcher passes the template process's exit status on as its own (a death by a
signal is the same death), forwards SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and
SIGUSR2 to it, holds none of its pipes (the end of its output is the end of the
template process), and kills the template process's tree when the process that
started it dies. It costs two small processes per template process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "HOST_PID_VARIABLE",
    "ProcessGroup",
    "TemplateProcess",
    "become_subreaper",
    "children_of",
    "descendants_of",
    "end_strays",
    "host_pid",
    "how_it_ended",
    "with_package_path",
]

#: The launcher's pid, set for the template process: its pid in its PID namespace is 2.
HOST_PID_VARIABLE = "_BAOBAB_HOST_PID"  # not BAOBAB_*: the settings refuse unknown ones

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8
_MS_REC, _MS_PRIVATE = 0x4000, 1 << 18
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
#: What the launcher passes on to the template process.
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


class ProcessGroup(subprocess.Popen[bytes]):
    """``args`` started in a session, so a process group, of its own: signalled, stopped and killed as one.

    Takes :class:`subprocess.Popen`'s keyword arguments (``stdin``, ``stdout``, ``env``,
    ``pass_fds``, ...), bytes mode only. Its own session also keeps it out of reach of
    the terminal's Ctrl-C: its starter ends it.
    """

    def __init__(self, args: Sequence[str], **kwargs: Any) -> None:
        kwargs["start_new_session"] = True
        super().__init__(list(args), **kwargs)

    def signal_group(self, signum: int) -> None:
        """Send ``signum`` to every process of the group (none once the process is reaped)."""
        if self.returncode is None:  # not reaped: the group id is still its own
            try:
                os.killpg(self.pid, signum)
            except (ProcessLookupError, PermissionError):
                pass

    def kill(self) -> None:
        """SIGKILL the process group (not reaped: call :meth:`wait`)."""
        self.signal_group(signal.SIGKILL)

    def end(self) -> int:
        """Kill the process and its group, reap it; its exit status (its own if it had exited already)."""
        self.kill()
        return self.wait()

    def stop(self, grace_s: float) -> int:
        """SIGTERM to the group, then :meth:`end` after ``grace_s`` seconds; its exit status."""
        self.signal_group(signal.SIGTERM)
        self.exited_within(grace_s)
        return self.end()

    def exited_within(self, timeout_s: float) -> bool:
        """Whether it exits within ``timeout_s`` seconds; if not it is ended (:meth:`end`)."""
        try:
            self.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.end()
            return False
        return True


class TemplateProcess(ProcessGroup):
    """A template process: ``args`` started in its own PID namespace (see the module docstring).

    A :class:`ProcessGroup` whose leader is the launcher: :meth:`send_signal` and
    :meth:`terminate` reach the template process (the launcher forwards them);
    :meth:`kill` and :meth:`end` kill it with its whole tree.
    """

    def __init__(self, args: Sequence[str], **kwargs: Any) -> None:
        super().__init__([sys.executable, "-I", "-S", "-B", os.path.abspath(__file__), "--", *args], **kwargs)


def how_it_ended(returncode: int) -> str:
    """A reaped process's exit status in words: ``was killed by signal SIGKILL``, ``exited with status 3``."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = str(-returncode)
        return f"was killed by signal {name}"
    return f"exited with status {returncode}"


def with_package_path(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with this baobab first on ``PYTHONPATH``: a child finds it even when it is not installed (a checkout)."""
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = (package_root, env.get("PYTHONPATH"))
    return {**env, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def host_pid() -> int:
    """The pid by which the platform knows this process: its launcher's, which ends it when killed.

    Inside a PID namespace :func:`os.getpid` is 2 in every template process, so a name
    made of it would not tell two of them apart, nor could anyone outside signal it.
    """
    return int(os.environ.get(HOST_PID_VARIABLE, os.getpid()))


def become_subreaper() -> bool:
    """Make this process the parent of every orphan among its descendants (Linux); False where it cannot."""
    try:
        import ctypes

        return bool(ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def children_of(pid: int) -> set[int]:
    """The processes whose parent is ``pid``, as this process's ``/proc`` shows them."""
    return {child for child, parent in _parents().items() if parent == pid}


def descendants_of(pid: int) -> set[int]:
    """The processes below ``pid``, as this process's ``/proc`` shows them: template processes too, whose
    sessions of their own put them out of reach of a signal to ``pid``'s group."""
    return _below(_parents(), {pid}) - {pid}


def end_strays(keep: Iterable[int] = ()) -> int:
    """Kill this process's children but ``keep``, and their descendants; reap them; how many were killed.

    In a :func:`become_subreaper` process, what a template left running after its
    trial (a double-forked daemon included) is among its children: this ends it. The
    children in ``keep`` (started before the trial, say) are left alone, and only
    killed children are reaped: the statuses of the others stay for their owners.
    """
    kept = set(keep)
    me = os.getpid()
    killed = 0
    while True:
        parents = _parents()
        strays = {pid for pid, parent in parents.items() if parent == me and pid not in kept}
        if not strays:
            return killed
        tree = _below(parents, strays)  # their descendants: killed at once, none is left to fork again
        for pid in tree:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in strays:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        killed += len(tree)


def _below(parents: dict[int, int], roots: set[int]) -> set[int]:
    """``roots`` and every process below them in ``parents`` (pid -> parent pid)."""
    tree = set(roots)
    grown = True
    while grown:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= more
        grown = bool(more)
    return tree


def _parents() -> dict[int, int]:
    """Every visible process and its parent, from ``/proc/<pid>/stat``."""
    parents = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # gone meanwhile
        parents[int(name)] = int(stat[stat.rindex(b")") + 2 :].split()[1])
    return parents


# -- the launcher (run as a script: the standard library only) -----------------------------------


def _say(message: str) -> None:
    os.write(2, f"baobab launcher: {message}\n".encode())


def _libc() -> Any:
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _enter_namespaces(libc: Any) -> bool:
    """A new PID and mount namespace for the next child (a user namespace first, unless root)."""
    import ctypes

    if os.geteuid() != 0:
        uid, gid = os.geteuid(), os.getegid()
        if libc.unshare(_CLONE_NEWUSER) != 0:
            _say(f"no user namespace ({os.strerror(ctypes.get_errno())})")
            return False
        for path, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{path}", "w") as f:
                f.write(text)
    if libc.unshare(_CLONE_NEWPID | _CLONE_NEWNS) != 0:
        _say(f"no PID namespace ({os.strerror(ctypes.get_errno())})")
        return False
    return True


def _mount_proc(libc: Any) -> None:
    import ctypes

    if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0 or (
        libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None) != 0
    ):
        _say(
            f"cannot mount /proc for the PID namespace ({os.strerror(ctypes.get_errno())}): "
            "the template process can read what /proc shows of the processes outside, not signal them"
        )


def _only_fds(*kept: int) -> None:
    """Hold none of the template process's files: stdin and stdout on /dev/null, no descriptor but ``kept``, stderr."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    low = 3
    for fd in sorted(kept):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 16)


def _forward_to(child: int) -> None:
    def forward(signum: int, _: object) -> None:
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    for signum in _FORWARDED:
        signal.signal(signum, forward)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORWARDED)


def _start(command: list[str], *, subreaper: bool) -> int:
    """Fork and exec ``command``; called with the forwarded signals blocked."""
    pid = os.fork()
    if pid:
        return pid
    try:
        if subreaper:
            _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORWARDED)
        os.execvp(command[0], command)
    except BaseException as e:
        _say(f"cannot run {command[0]}: {e}")
    os._exit(127)


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # an old kernel, or gone already
        return None


def _wait_for(child: int, starter: int | None = None) -> int:
    """Reap every child until ``child`` ends; its wait status.

    With a ``starter`` (the launcher's parent), ``child`` is killed once the starter is
    gone: no thread can watch it, a process that left its PID namespace makes none.
    """
    import select

    child_fd = _pidfd(child) if starter is not None else None
    starter_fd = _pidfd(starter) if starter is not None else None
    while True:
        try:
            pid, status = os.waitpid(-1, 0 if starter is None else os.WNOHANG)
        except ChildProcessError:
            return 127 << 8
        if pid == child:
            return status
        if pid:
            continue  # an orphan, reaped
        watched = [fd for fd in (child_fd, starter_fd) if fd is not None]
        ready = select.select(watched, [], [], 1.0)[0]
        if starter is not None and (starter_fd in ready or (starter_fd is None and os.getppid() != starter)):
            os.kill(child, signal.SIGKILL)
            starter = starter_fd = None


def _die_as(status: int) -> None:
    """Exit as a process with wait status ``status`` did."""
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if signum not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _launch(command: list[str]) -> None:
    starter = os.getppid()
    os.environ[HOST_PID_VARIABLE] = str(os.getpid())
    libc = _libc()
    signal.pthread_sigmask(signal.SIG_BLOCK, _FORWARDED)  # until a handler forwards them
    if not _enter_namespaces(libc):
        _say("the template's processes can see and signal those of its user; its orphans end with it")
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        child = _start(command, subreaper=True)
        _only_fds()
        _forward_to(child)
        status = _wait_for(child, starter)
        end_strays()
        _die_as(status)
    report_r, report_w = os.pipe()
    alive_r, alive_w = os.pipe()  # at its end of file, the launcher is gone
    init = os.fork()
    if init == 0:  # the namespace's first process: when it ends, all in the namespace end
        import select

        os.close(report_r)
        os.close(alive_w)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if select.select([alive_r], [], [], 0)[0]:  # the launcher died before the line above: so do we
            os._exit(1)
        os.close(alive_r)
        _mount_proc(libc)
        child = _start(command, subreaper=False)
        _only_fds(report_w)
        _forward_to(child)
        status = _wait_for(child)
        os.write(report_w, str(status).encode())
        os._exit(0)
    os.close(report_w)
    os.close(alive_r)
    _only_fds(report_r, alive_w)
    _forward_to(init)
    init_status = _wait_for(init, starter)
    report = os.read(report_r, 64)
    _die_as(int(report) if report else init_status)


if __name__ == "__main__":
    if sys.argv[1:2] != ["--"] or len(sys.argv) < 3:
        _say("usage: python _contained.py -- COMMAND [ARG...]")
        sys.exit(2)
    _launch(sys.argv[2:])
