"""Checking an uploaded template in a process of its own, under a time limit.

``python -m baobab.admin._template_check FILE CLASS_NAME TASK`` loads the template
(:func:`~baobab.model.load_template`), checks its knob config
(:func:`~baobab.model.check_template`) and writes one JSON line to its stdout:
``{"knob_config": {...}}`` (the object :func:`~baobab.model.knob_config_to_json`
writes) with exit status 0, or ``{"error": "..."}`` (the reason, with the template's
own traceback) with exit status 1. Exit status 2 is a wrong command line. What the
template prints goes to stderr, so it never mixes with the answer.

Why a process: importing a template runs user code, which may loop forever, call
``sys.exit``, crash the interpreter or leave modules and threads behind. The admin API
must survive all of it, so :func:`check_template_in_process` starts the child as a
:class:`~baobab._contained.TemplateProcess` (its own PID namespace: it sees no other
process), with a scrubbed environment (none of the server's ``BAOBAB_*`` settings, its
secret key above all, reach the template, whose error messages go back to the
client) and a temporary home and working folder, kills it with everything it started
past the time limit or once it has answered (a daemon it left behind too), and turns
every way the child can end into a :class:`TemplateError` that names the file as the
client sent it, not as the server stored it.
"""

from __future__ import annotations

import faulthandler
import json
import os
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from baobab._contained import TemplateProcess, how_it_ended, with_package_path
from baobab._sandbox import Confinement, confine, template_env
from baobab.enums import Task
from baobab.exceptions import TemplateError
from baobab.model import KnobConfig, check_template, knob_config_to_json, load_template, template_traceback

__all__ = ["DEFAULT_CHECK_TIMEOUT_S", "check_template_in_process", "main"]

#: How long loading a template at upload may take; importing torch takes a few seconds.
DEFAULT_CHECK_TIMEOUT_S = 60.0

_EXIT_OK, _EXIT_REFUSED, _EXIT_USAGE = 0, 1, 2
_TAIL_LINES = 25
_TAIL_BYTES = 64 * 1024
_MAX_ANSWER_BYTES = 16 * 2**20
_MAX_MESSAGE_CHARS = 10_000


# -- the child -------------------------------------------------------------------------


def _check(path: str, class_name: str) -> KnobConfig:
    """Load and check the template; a syntax error is reported without Baobab's import frames."""
    try:
        source = Path(path).read_bytes()
        compile(source, str(Path(path).resolve()), "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as e:  # ValueError: null bytes, on some Python versions
        reason = "".join(traceback.format_exception_only(type(e), e)).rstrip()
        raise TemplateError(f"{Path(path).resolve()}: the template is not valid Python:\n{reason}") from None
    except OSError:
        pass  # load_template says it cannot read the file, in its words
    return check_template(load_template(path, class_name))


def main(argv: Sequence[str] | None = None) -> int:
    """The child: check ``FILE CLASS_NAME TASK [CONFINEMENT]``, answer one JSON line, return the exit status.

    CONFINEMENT (JSON, see :mod:`baobab._sandbox`) is taken on before the template is read.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) not in (3, 4):
        print("usage: python -m baobab.admin._template_check FILE CLASS_NAME TASK [CONFINEMENT]", file=sys.stderr)
        return _EXIT_USAGE
    path, class_name, task = args[:3]
    if task not in Task.__members__:
        print(f"unknown task {task!r}; valid tasks: {', '.join(Task)}", file=sys.stderr)
        return _EXIT_USAGE
    if len(args) == 4:
        confinement = Confinement.from_json(args[3])
        confine(Confinement(confinement.protected, confinement.private, (Path(path),)))
    faulthandler.enable()  # a crash in C code still shows the template's Python frames on stderr
    # The answer keeps the original stdout; the template's prints, Python's and C's, go to stderr.
    answer = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    try:
        config = _check(path, class_name)
        message: dict[str, Any] = {"knob_config": json.loads(knob_config_to_json(config))}
    except TemplateError as e:
        message = {"error": str(e)}
    except (TypeError, ValueError) as e:  # knob_config_to_json: a value JSON cannot hold
        message = {"error": f"{Path(path).resolve()}: the knob config cannot be written as JSON: {e}"}
    except BaseException as e:  # noqa: B036 - sys.exit() or KeyboardInterrupt raised by the template
        message = {"error": f"{Path(path).resolve()}: loading the template raised:\n{template_traceback(e, path)}"}
    answer.write(json.dumps(message) + "\n")
    answer.close()
    return _EXIT_OK if "knob_config" in message else _EXIT_REFUSED


# -- the parent ------------------------------------------------------------------------


def check_template_in_process(
    path: str | os.PathLike[str],
    class_name: str,
    task: Task | str,
    *,
    timeout_s: float = DEFAULT_CHECK_TIMEOUT_S,
    shown_as: str | None = None,
    protected: Sequence[Path] = (),
) -> dict[str, Any]:
    """Check the template file at ``path`` in a child process; return its knob config as a JSON object.

    Args:
        path: the template file, on this machine.
        class_name: the class in it that derives from ``BaseModel``.
        task: what the template is uploaded for.
        timeout_s: past this the child and everything it started are killed.
        shown_as: how messages name the file (the client's file name); ``path`` when None.
        protected: paths the template's code may not touch (the platform's home, database
            and artifacts; see :mod:`baobab._sandbox`); the file itself stays readable.

    Raises:
        TemplateError: the template is refused; the message says why (the template's
            traceback, the time limit, or how its process died, with its last output).
    """
    file = Path(path).resolve()
    shown = shown_as if shown_as is not None else str(file)
    with (
        tempfile.TemporaryDirectory(prefix="baobab-check-", ignore_cleanup_errors=True) as work,
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
    ):
        # Prints reach the output before a crash; BLAS starts one thread, not one per core.
        env = with_package_path(template_env(threads=1, PYTHONUNBUFFERED="1", HOME=work, TMPDIR=work))
        process = TemplateProcess(
            [
                sys.executable,
                "-m",
                "baobab.admin._template_check",
                str(file),
                class_name,
                str(Task(task)),
                Confinement(tuple(protected), private=Path(work)).to_json(),
            ],  # fmt: skip
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            cwd=work,
            env=env,
        )
        try:
            exited = process.exited_within(timeout_s)
        finally:
            process.end()  # and whatever it left running
        answer = _read_answer(out) if exited else None
        tail = _tail(err)

    def named(text: str) -> str:
        return _clip(text.replace(str(file), shown).replace(str(file.parent), "."))

    if not exited:
        message = (
            f"{shown}: loading the template took longer than {timeout_s:g} s, the limit of the upload check, and "
            "was stopped; does it compute or wait for something when imported? Move such work into train()"
        )
        raise TemplateError(named(f"{message}; its last output:\n{tail}" if tail else message))
    if process.returncode == _EXIT_OK and answer is not None and isinstance(answer.get("knob_config"), dict):
        return answer["knob_config"]
    if process.returncode == _EXIT_REFUSED and answer is not None and isinstance(answer.get("error"), str):
        raise TemplateError(named(answer["error"]))
    how = how_it_ended(process.returncode)
    message = f"{shown}: the process loading the template {how} before it answered (did the template crash Python?)"
    raise TemplateError(named(f"{message}; its last output:\n{tail}" if tail else message))


def _read_answer(out: IO[bytes]) -> dict[str, Any] | None:
    out.seek(0)
    lines = out.read(_MAX_ANSWER_BYTES).decode("utf-8", errors="replace").strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def _tail(err: IO[bytes]) -> str:
    """The last lines the child wrote to stderr."""
    size = err.seek(0, os.SEEK_END)
    err.seek(max(size - _TAIL_BYTES, 0))
    lines = err.read().decode("utf-8", errors="replace").rstrip().splitlines()
    return "\n".join(lines[-_TAIL_LINES:])


def _clip(message: str) -> str:
    """Keep a long message's head (what failed) and tail (the exception)."""
    if len(message) <= _MAX_MESSAGE_CHARS:
        return message
    head, tail = message[:2000], message[-(_MAX_MESSAGE_CHARS - 2100) :]
    return f"{head}\n[... {len(message) - len(head) - len(tail)} characters left out ...]\n{tail}"


if __name__ == "__main__":
    sys.exit(main())
