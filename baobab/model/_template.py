"""Loading and checking model templates: a ``.py`` file and the name of a class in it.

A template is user code. Importing it may fail, and the class in it may break the
BaseModel contract in ways Python only notices much later (a missing method at
instantiation, a bad knob config when a strategy is built). The functions here find
those problems up front and say which one it is, in terms of the template: an import
error carries the template's own traceback (the frames from the template file on,
not Baobab's import machinery), a missing class lists the classes the file defines.

They are free of CLI and HTTP concerns so that the dev runner, the workers and the
admin's upload validation (which runs them in a separate process) share them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
import traceback
import types
from pathlib import Path

from baobab.exceptions import KnobConfigError, TemplateError
from baobab.model._base import BaseModel
from baobab.model._knobs import KnobConfig, validate_knob_config

__all__ = ["check_template", "load_template", "template_traceback"]

#: Modules imported from template files, by the SHA-256 of the file's bytes.
_modules: dict[str, types.ModuleType] = {}


def template_traceback(error: BaseException, path: str | Path) -> str:
    """Format ``error`` from the first frame in the template file at ``path`` on.

    The frames above it (Baobab calling into the template) say nothing to the
    template's author. When no frame is in the template (a syntax error, or an
    error raised by Baobab itself) the whole traceback is kept.
    """
    filename = str(Path(path).resolve())
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(error), error, tb or error.__traceback__)).rstrip()


def _import_template(path: Path) -> types.ModuleType:
    try:
        source = path.read_bytes()
    except OSError as e:
        raise TemplateError(f"{path}: cannot read the template: {e.strerror or e}") from None
    checksum = hashlib.sha256(source).hexdigest()
    if checksum in _modules:
        return _modules[checksum]
    name = f"_baobab_template_{checksum[:16]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TemplateError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    # Registered while it runs, as for any import: dataclasses and pickling look it up.
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as e:
        del sys.modules[name]
        if not isinstance(e, Exception):
            raise
        raise TemplateError(f"{path}: importing the template failed:\n{template_traceback(e, path)}") from None
    _modules[checksum] = module
    return module


def load_template(path: str | Path, class_name: str) -> type[BaseModel]:
    """Import the template file at ``path`` and return its class ``class_name``.

    The file is imported as a module named after its checksum, once per process: the
    same file loaded twice gives the same class, an edited file a new one.

    Raises:
        TemplateError: the file cannot be read or imported (with the template's
            traceback), has no class ``class_name`` (listing the classes it defines),
            or that class is not a concrete :class:`BaseModel` (naming what it misses).
    """
    path = Path(path).resolve()
    module = _import_template(path)
    cls = getattr(module, class_name, None)
    if cls is None:
        defined = sorted(n for n, v in vars(module).items() if inspect.isclass(v) and v.__module__ == module.__name__)
        listing = ", ".join(defined) if defined else "none"
        raise TemplateError(f"{path}: no class {class_name!r}; classes defined in the file: {listing}")
    if not inspect.isclass(cls):
        raise TemplateError(f"{path}: {class_name!r} is a {type(cls).__name__}, not a class")
    if not issubclass(cls, BaseModel):
        raise TemplateError(
            f"{path}: class {class_name!r} does not derive from baobab.model.BaseModel; "
            f"declare it as `class {class_name}(BaseModel)`"
        )
    missing = sorted(getattr(cls, "__abstractmethods__", ()))
    if missing:
        raise TemplateError(f"{path}: class {class_name!r} does not implement {', '.join(missing)}")
    return cls


def check_template(cls: type[BaseModel]) -> KnobConfig:
    """Call ``cls.get_knob_config()`` and validate what it returns.

    Raises:
        TemplateError: ``get_knob_config()`` raises (with the template's traceback) or
            returns a config :func:`validate_knob_config` rejects (naming the knob; the
            :class:`KnobConfigError` is the ``__cause__``).
    """
    where = f"{cls.__name__}.get_knob_config()"
    try:
        config = cls.get_knob_config()
    except Exception as e:
        path = inspect.getsourcefile(cls) or ""
        raise TemplateError(f"{where} raised:\n{template_traceback(e, path)}") from None
    try:
        return validate_knob_config(config)
    except KnobConfigError as e:
        raise TemplateError(f"{where} returned a bad config: {e}") from e
