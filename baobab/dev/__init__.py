"""``baobab dev test-model``: a small search over a template on this machine, with no server.

:func:`run_dev` validates the template, searches its knobs with a strategy of
:mod:`baobab.advisor`, runs each trial in a child process of :mod:`baobab.worker` (the
steps a platform worker takes), and checks that the best model's parameters reload.
It is a package of its own, above ``advisor`` and ``worker``, because the template API
(:mod:`baobab.model`) must import neither; only the CLI imports it.
"""

from __future__ import annotations

from baobab.dev._runner import DEFAULT_TRIALS, DevRunResult, DevTrial, run_dev

__all__ = ["DEFAULT_TRIALS", "DevRunResult", "DevTrial", "run_dev"]
