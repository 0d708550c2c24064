"""The README's Python snippets are code a user pastes: each must define every name it uses.

The first snippet opens the SDK session (``client``) that later ones go on with, so each
later one is read after it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).parents[2] / "README.md"
SNIPPETS = re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.MULTILINE | re.DOTALL)


def test_the_readme_has_python_snippets() -> None:
    assert len(SNIPPETS) >= 2


@pytest.mark.parametrize("number", range(len(SNIPPETS)))
def test_a_readme_snippet_defines_every_name_it_uses(number: int, tmp_path: Path) -> None:
    snippet = tmp_path / f"snippet_{number}.py"
    snippet.write_text(SNIPPETS[number] if number == 0 else SNIPPETS[0] + SNIPPETS[number])
    # F821: a name used and never defined (a function called without its import).
    ruff = Path(sys.executable).with_name("ruff")
    checked = subprocess.run(
        [str(ruff), "check", "--isolated", "--select", "F821", "--output-format", "concise", str(snippet)],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, f"README snippet {number}:\n{SNIPPETS[number]}\n{checked.stdout}"
