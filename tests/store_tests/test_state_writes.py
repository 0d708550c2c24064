"""Only the repository writes a trial's, a sub-job's, a train job's or an inference job's state, or a lease.

The repository (``baobab/store/_db``: trial rows, trial control, job rows, inference
rows, leases) owns every transition, so the rules of the state machines live in one
place. This test reads the source of ``baobab/`` (with :mod:`ast`, nothing is run) and
fails on a state or lease write anywhere else:

- ``update(T)`` or ``insert(T)`` (``T`` one of the four tables, or its ``__table__``)
  followed by ``.values(status=...)``, or by ``.values(**...)`` whose columns it cannot see;
- ``.values(driver=...)`` or ``.values(lease_expires_at=...)``, on any statement;
- ``T(status=...)`` (or a lease column), a row made with its state;
- ``row.status = ...`` (or a lease column, or ``setattr``) where ``row`` is a row of
  ``T``: a name the function binds with ``T(...)``, ``session.get(T, ...)``, a query
  over ``select(T)``, or an annotation naming ``T``; or a relationship such as
  ``job.sub_jobs[0]``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

import baobab

BAOBAB = Path(baobab.__file__).parent

#: The repository: the only modules that may write a state column or a lease.
REPOSITORY_MODULES = (
    "store/_db/_inference_rows.py",
    "store/_db/_job_rows.py",
    "store/_db/_leases.py",
    "store/_db/_trial_control.py",
    "store/_db/_trial_rows.py",
)

_TABLES = frozenset({"Trial", "SubJob", "TrainJob", "InferenceJob"})
_STATE = "status"
_LEASE = frozenset({"driver", "lease_expires_at"})
_WRITTEN = _LEASE | {_STATE}
_RELATIONSHIPS = frozenset({"trials", "sub_jobs", "sub_job", "train_job"})
_ROW_GETTERS = frozenset({"get", "get_one", "merge"})


class _Scanner(ast.NodeVisitor):
    """Collects ``(line, what)`` for each state or lease write in one module."""

    def __init__(self, tree: ast.Module) -> None:
        self.found: list[tuple[int, str]] = []
        # module-level aliases such as ``_trials = Trial.__table__``
        self._tables = set(_TABLES)
        for node in tree.body:
            if isinstance(node, ast.Assign) and self._table(node.value) is not None:
                self._tables.update(t.id for t in node.targets if isinstance(t, ast.Name))
        self._rows: list[set[str]] = [set()]

    # -- what a node is -------------------------------------------------------------------

    def _table(self, node: ast.AST) -> str | None:
        """The state table ``node`` names (``Trial``, ``Trial.__table__``, an alias), else None."""
        if isinstance(node, ast.Name) and node.id in self._tables:
            return node.id
        if isinstance(node, ast.Attribute) and node.attr == "__table__":
            return self._table(node.value)
        return None

    def _names_table(self, node: ast.AST) -> bool:
        return any(self._table(n) is not None for n in ast.walk(node))

    def _statement_table(self, node: ast.AST) -> str | None:
        """The table of an ``update(T)`` or ``insert(T)`` anywhere within ``node``."""
        for call in ast.walk(node):
            if isinstance(call, ast.Call) and call.args and _callee(call) in ("update", "insert"):
                table = self._table(call.args[0])
                if table is not None:
                    return table
        return None

    def _selects_rows(self, node: ast.AST) -> bool:
        """``node`` holds a ``select(T)`` of whole rows (not ``select(T.id)``)."""
        return any(
            isinstance(call, ast.Call)
            and _callee(call) == "select"
            and any(self._table(arg) is not None for arg in call.args)
            for call in ast.walk(node)
        )

    def _gives_rows(self, value: ast.AST) -> bool:
        """``value`` is (or holds) rows of a state table."""
        if isinstance(value, ast.Call):
            callee = _callee(value)
            if isinstance(value.func, ast.Name) and self._table(value.func) is not None:
                return True  # T(...)
            if callee in _ROW_GETTERS and value.args and self._table(value.args[0]) is not None:
                return True  # session.get(T, id)
        return self._selects_rows(value) or self._is_row(value)

    def _is_row(self, node: ast.AST) -> bool:
        """``node`` is a row of a state table: a name bound to one, or a relationship's row."""
        while isinstance(node, (ast.Subscript, ast.Attribute)):
            if isinstance(node, ast.Attribute) and node.attr in _RELATIONSHIPS:
                return True
            node = node.value
        if isinstance(node, ast.Name):
            return node.id in self._rows[-1]
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and self._table(node.func) is not None

    # -- scopes and bindings --------------------------------------------------------------

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
        rows = {a.arg for a in arguments if a.annotation is not None and self._names_table(a.annotation)}
        self._rows.append(rows)
        self.generic_visit(node)
        self._rows.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def _bind(self, targets: Iterable[ast.AST]) -> None:
        for target in targets:
            if isinstance(target, ast.Name):
                self._rows[-1].add(target.id)
            elif isinstance(target, (ast.Tuple, ast.List)):
                self._bind(target.elts)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_target(target)
        if self._gives_rows(node.value):
            self._bind(node.targets)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target)
        if self._names_table(node.annotation) or (node.value is not None and self._gives_rows(node.value)):
            self._bind([node.target])
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        if self._gives_rows(node.iter):
            self._bind([node.target])
        self.generic_visit(node)

    visit_AsyncFor = visit_For

    def visit_comprehension(self, node: ast.comprehension) -> None:
        if self._gives_rows(node.iter):
            self._bind([node.target])
        self.generic_visit(node)

    # -- writes ---------------------------------------------------------------------------

    def _check_target(self, target: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._check_target(element)
        elif isinstance(target, ast.Starred):
            self._check_target(target.value)
        elif isinstance(target, ast.Attribute) and target.attr in _WRITTEN and self._is_row(target.value):
            self.found.append((target.lineno, f"assigns {ast.unparse(target)}"))

    def visit_Call(self, node: ast.Call) -> None:
        columns = {k.arg for k in node.keywords}
        for arg in node.args:
            if isinstance(arg, ast.Dict):
                columns.update(k.value for k in arg.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
        callee = _callee(node)
        if callee == "values" and isinstance(node.func, ast.Attribute):
            table = self._statement_table(node.func.value)
            if columns & _LEASE:
                self.found.append((node.lineno, f"writes the lease columns {sorted(columns & _LEASE)}"))
            elif table is not None and (_STATE in columns or None in columns):
                written = "status" if _STATE in columns else "columns it cannot see (**)"
                self.found.append((node.lineno, f"writes {written} of {table}"))
        elif isinstance(node.func, ast.Name) and self._table(node.func) is not None and columns & _WRITTEN:
            self.found.append((node.lineno, f"builds a row of {node.func.id} with {sorted(columns & _WRITTEN)}"))
        elif callee == "setattr" and len(node.args) >= 2:
            name = node.args[1]
            if isinstance(name, ast.Constant) and name.value in _WRITTEN and self._is_row(node.args[0]):
                self.found.append((node.lineno, f"sets {name.value} with setattr"))
        self.generic_visit(node)


def _callee(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def state_writes(source: str) -> list[tuple[int, str]]:
    """The state and lease writes in ``source``: ``(line, what)``."""
    tree = ast.parse(source)
    scanner = _Scanner(tree)
    scanner.visit(tree)
    return sorted(scanner.found)


def test_no_module_outside_the_repository_writes_a_state_or_a_lease() -> None:
    found = []
    for path in sorted(BAOBAB.rglob("*.py")):
        relative = path.relative_to(BAOBAB).as_posix()
        if relative not in REPOSITORY_MODULES:
            found += [f"baobab/{relative}:{line}: {what}" for line, what in state_writes(path.read_text())]
    assert found == [], "call an operation of the repository (baobab.store) instead:\n" + "\n".join(found)


@pytest.mark.parametrize("relative", REPOSITORY_MODULES)
def test_the_repository_modules_exist_and_write(relative: str) -> None:
    assert state_writes((BAOBAB / relative).read_text()), (
        f"baobab/{relative} writes no state: is it still the repository?"
    )



@pytest.mark.parametrize(
    "source",
    [
        "update(Trial).where(Trial.id == 1).values(status=TrialState.CANCELLED)",
        "sqlalchemy.update(TrainJob).values(status=s, error=e)",
        "session.execute(update(SubJob).where(x).values(status=JobStatus.RUNNING))",
        "self._mine(update(InferenceJob)).where(x).values(status=InferenceJobStatus.STARTING)",
        "update(Trial.__table__).values({'status': 'RUNNING'})",
        "_t = Trial.__table__\nstatement = update(_t).values(status=TrialState.PENDING)",
        "insert(Trial).values(sub_job_id=1, status=TrialState.PENDING)",
        "update(Trial).values(**values)",
        "update(TrainJob).where(x).values(driver=None, lease_expires_at=None)",
        "update(anything).values(lease_expires_at=now)",
        "job = TrainJob(app='a', status=JobStatus.PENDING)",
        "session.add(SubJob(strategy='random', status=JobStatus.PENDING))",
        "def f(session):\n    trial = session.get(Trial, 1)\n    trial.status = TrialState.CANCELLED",
        "def f(job: TrainJob):\n    job.driver = 'me'",
        "def f(session):\n    for row in session.scalars(select(InferenceJob)):\n        row.status = s",
        "def f(session):\n    job = session.scalars(select(TrainJob).where(x)).one()\n    job.status, job.error = s, e",
        "def f(job):\n    job.sub_jobs[0].trials[0].status = TrialState.CANCELLED",
        "def f(session):\n    trial = session.get(Trial, 1)\n    setattr(trial, 'status', s)",
    ],
)
def test_the_scanner_finds_a_state_or_lease_write(source: str) -> None:
    assert state_writes(source), source


@pytest.mark.parametrize(
    "source",
    [
        "update(Trial).where(Trial.status == TrialState.RUNNING).values(heartbeat_at=now)",
        "update(ZooModel).values(status='x')",
        "select(Trial.status).where(Trial.id == 1)",
        "Trial(sub_job_id=1, number=0)",
        "self.status = status",
        "def f(session):\n    ids = session.scalars(select(Trial.id))\n    for row in ids:\n        row.status = 1",
        "def f(sub: SubJobState):\n    sub.status, sub.error = outcome",
        "tags.update(operation['tags'])\nquery.values(status=1)",
    ],
)
def test_the_scanner_passes_what_writes_no_state(source: str) -> None:
    assert state_writes(source) == [], source
