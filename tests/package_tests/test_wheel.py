"""The installable package: the wheel ``make wheel`` builds, installed as the README says, runs a job.

The wheel is built from this checkout (the web UI from ``make web`` inside it), installed
into a new virtual environment outside the checkout (no system site packages, no torch: the
template is scikit-learn's) by the README's own install line, read from its Install section
with the wheel it names replaced by the one built here, so that the README and this test
cannot drift apart; and that environment's ``baobab up`` console script
serves the web UI and runs a one-trial job through that environment's SDK. Installing
resolves the pinned dependencies through pip's configured index and cache: about a minute
or two, so the fast loop (``make test-fast``) leaves it out.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import requests

from baobab.store import build_tabular

pytestmark = pytest.mark.package

ROOT = Path(__file__).parents[2]
TEMPLATE = ROOT / "examples" / "models" / "sklearn_tabular.py"
WEB_INDEX = "baobab/admin/web_dist/index.html"
README = ROOT / "README.md"
EMAIL, PASSWORD = "root@example.com", "root-password"
#: A wheel as a pip argument names it: its path, and the extras asked for, if any.
_WHEEL_ARG = re.compile(r"(?P<path>[^\[\]]+\.whl)(?P<extras>\[[^\]]*\])?")


def _clean_environ(**more: str) -> dict[str, str]:
    """The caller's environment less what would reach the checkout or its venv."""
    dropped = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    environ = {k: v for k, v in os.environ.items() if k not in dropped and not k.startswith("BAOBAB_")}
    return environ | more


def readme_install(wheel: Path) -> list[str]:
    """The README's install line, ``pip install <wheel>`` in a shell block of its Install section, as
    words, with the wheel it names replaced by ``wheel`` (its extras kept).

    Fails when the README has no such line, or names a wheel file other than the one ``make wheel``
    builds (a version or a name the package no longer has).
    """
    section = re.search(r"^## Install\n(.*?)(?=^## |\Z)", README.read_text(), flags=re.MULTILINE | re.DOTALL)
    assert section is not None, "README.md has no '## Install' section"
    blocks = re.findall(r"^```(?:sh|bash|shell)\n(.*?)^```", section.group(1), flags=re.MULTILINE | re.DOTALL)
    commands = [shlex.split(line, comments=True) for block in blocks for line in block.splitlines()]
    installs = [
        words for words in commands if words[:2] == ["pip", "install"] and any(map(_WHEEL_ARG.fullmatch, words[2:]))
    ]
    assert len(installs) == 1, f"README.md's Install section should have one `pip install <wheel>` line: {installs}"
    words = installs[0]
    for at, word in enumerate(words[2:], start=2):
        named = _WHEEL_ARG.fullmatch(word)
        if named is not None:
            assert Path(named["path"]).name == wheel.name, (
                f"README.md installs {named['path']}, but `make wheel` builds {wheel.name}"
            )
            words[at] = str(wheel) + (named["extras"] or "")
    return words


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of this checkout, as ``make wheel`` builds it (with the built web UI)."""
    if not (ROOT / WEB_INDEX).is_file():
        pytest.fail(f"{WEB_INDEX} is missing: `make web` builds the web UI the wheel must carry")
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("baobab-*-py3-none-any.whl")
    return built


def test_the_wheel_carries_the_web_ui_and_the_migrations(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert WEB_INDEX in names
    assert any(n.startswith("baobab/admin/web_dist/assets/") and n.endswith(".js") for n in names)
    assert "baobab/store/migrations/script.py.mako" in names
    assert any(n.startswith("baobab/store/migrations/versions/") for n in names)


def test_the_installed_wheel_serves_the_ui_and_runs_a_one_trial_job(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=_clean_environ())
    # The README's install line as a user runs it in that environment: its `pip` is the venv's.
    pip, *arguments = readme_install(wheel)
    installed = subprocess.run(
        [str(venv / "bin" / pip), *arguments], cwd=tmp_path, env=_clean_environ(), capture_output=True, text=True
    )
    assert installed.returncode == 0, f"{shlex.join([pip, *arguments])}:\n{installed.stderr[-4000:]}"
    data = tmp_path / "breast_cancer"
    build_tabular("breast_cancer", data)
    home = tmp_path / "home"
    environ = _clean_environ(
        BAOBAB_HOME=str(home), BAOBAB_ADMIN_EMAIL=EMAIL, BAOBAB_ADMIN_PASSWORD=PASSWORD, BAOBAB_CPU_SLOTS="1"
    )
    log = tmp_path / "baobab-up.log"
    with log.open("w") as stderr:
        up = subprocess.Popen(
            [str(venv / "bin" / "baobab"), "up", "--port", "0", "--workers", "1"],
            cwd=tmp_path,
            env=environ,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    try:
        assert up.stdout is not None
        url = up.stdout.readline().strip()  # `baobab up` prints its URL alone, once it answers
        assert url.startswith("http"), log.read_text()
        page = requests.get(url + "/", timeout=30)
        assert page.status_code == 200 and '<div id="root">' in page.text, page.text[:500]

        ran = subprocess.run(
            [str(venv / "bin" / "python"), str(Path(__file__).with_name("sdk_one_trial.py")), url, EMAIL, PASSWORD]
            + [str(data), str(TEMPLATE)],
            cwd=tmp_path,
            env=environ,
            capture_output=True,
            text=True,
        )
        assert ran.returncode == 0, ran.stderr
        answer = json.loads(ran.stdout.splitlines()[-1])
        assert Path(answer["baobab"]).is_relative_to(venv), answer["baobab"]
        job = answer["job"]
        assert job["status"] == "COMPLETED", answer["trials"]
        assert job["trial_counts"]["COMPLETED"] == 1
    finally:
        up.send_signal(signal.SIGTERM)
        status = up.wait(timeout=120)
        up.stdout.close()
    assert status == 0, log.read_text()
