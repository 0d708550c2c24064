"""``GET /api/v1/openapi.json``: an OpenAPI 3.1 document of the admin API, built from its routes.

The document is generated per request from the app's ``url_map``, so a route added
anywhere is described without anyone having to remember it: every rule under ``/api/v1``
with its methods, its path parameters typed from their converters (``<int:model_id>`` is
an integer ≥ 0), the view's docstring as summary (first paragraph) and description (the
rest), the blueprint as tag, and the bearer-token requirement unless the view is marked
:func:`~baobab.admin._auth.public`.

What a route cannot tell (its request body, query parameters and answers) a view declares
with :func:`api_doc`, placed below the route decorator like ``require_roles``::

    @blueprint.get("")
    @require_roles(*ROLES)
    @api_doc(
        query={"task": {"enum": list(Task), "description": "only the templates of this task"}},
        responses={200: ("the templates", {"type": "object", "properties": {"models": ...}})},
    )
    def list_models(): ...

Schemas are JSON Schema 2020-12, as OpenAPI 3.1 has them. Name a schema several views
share with :func:`register_schema` and refer to it with :func:`schema_ref`; the error body
every endpoint answers is registered as ``Error``.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from flask import Blueprint, Flask, current_app
from pydantic import BaseModel
from werkzeug.routing import Rule
from werkzeug.routing.converters import (
    AnyConverter,
    BaseConverter,
    FloatConverter,
    IntegerConverter,
    PathConverter,
    UnicodeConverter,
    UUIDConverter,
)

import baobab
from baobab.admin._auth import is_public, public

__all__ = [
    "API_PREFIX",
    "ApiDoc",
    "api_doc",
    "blueprint",
    "build_document",
    "model_schema",
    "register_model",
    "register_schema",
    "schema_ref",
]

API_PREFIX = "/api/v1"
OPENAPI_VERSION = "3.1.0"

F = TypeVar("F", bound=Callable[..., Any])
#: What a response is declared as: a description, or (description, schema[, media type]).
ResponseSpec = str | tuple[str, Mapping[str, Any]] | tuple[str, Mapping[str, Any], str]

blueprint = Blueprint("openapi", __name__, url_prefix=API_PREFIX)

_DOC_ATTR = "baobab_api_doc"
_IGNORED_METHODS = frozenset({"HEAD", "OPTIONS"})
_PARAMETER_KEYS = frozenset({"description", "required", "deprecated", "example"})
_STATUS_RANGE = re.compile(r"[1-5]XX")
_COMPONENT_NAME = re.compile(r"[A-Za-z0-9._-]+")
_RULE_VARIABLE = re.compile(
    r"<(?:(?P<converter>[A-Za-z_][A-Za-z0-9_]*)(?:\((?P<args>.*?)\))?:)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)>"
)
_BEARER = "bearerAuth"

_schemas: dict[str, dict[str, Any]] = {}


def register_schema(name: str, schema: Mapping[str, Any]) -> dict[str, str]:
    """Names ``schema`` in ``components/schemas`` and returns :func:`schema_ref` to it.

    Registering the same schema again under its name is allowed (a module reloaded);
    another schema under a taken name is a ValueError, so two modules cannot clash silently.
    """
    if not _COMPONENT_NAME.fullmatch(name):
        raise ValueError(f"schema name {name!r} may hold only letters, digits, '.', '_' and '-'")
    schema = dict(schema)
    if name in _schemas and _schemas[name] != schema:
        raise ValueError(f"another schema is already registered as {name!r}")
    _schemas[name] = schema
    return schema_ref(name)


def register_model(model: type[BaseModel]) -> dict[str, str]:
    """Names the JSON schema of a Pydantic ``model`` (and of the models it holds) in ``components/schemas``.

    The model is the one declaration of a request body or of a part of one: it parses the
    body, and what it declares is what the document shows. Returns :func:`schema_ref` to it.
    """
    return register_schema(model.__name__, model_schema(model))


def model_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of a Pydantic ``model`` written out, the models and enums it holds named in
    ``components/schemas``: a request body's schema, which the document shows in place."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, part in schema.pop("$defs", {}).items():
        register_schema(name, part)
    return schema


def schema_ref(name: str) -> dict[str, str]:
    """``{"$ref": "#/components/schemas/<name>"}``: a schema named with :func:`register_schema`."""
    return {"$ref": f"#/components/schemas/{name}"}


ERROR_SCHEMA = register_schema(
    "Error",
    {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message", "field"],
                "properties": {
                    "code": {"type": "string", "description": "the HTTP status in words, e.g. not_found"},
                    "message": {"type": "string", "description": "what is wrong and how to fix it"},
                    "field": {"type": ["string", "null"], "description": "the request field at fault"},
                },
            }
        },
    },
)


@dataclass(frozen=True)
class ApiDoc:
    """What :func:`api_doc` stores on a view (see its arguments)."""

    summary: str | None = None
    description: str | None = None
    body: Mapping[str, Any] | None = None
    body_type: str = "application/json"
    body_required: bool = True
    query: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    path: Mapping[str, str] = field(default_factory=dict)
    responses: Mapping[int | str, ResponseSpec] = field(default_factory=dict)
    tags: Sequence[str] = ()
    deprecated: bool = False


def api_doc(
    *,
    summary: str | None = None,
    description: str | None = None,
    body: Mapping[str, Any] | None = None,
    body_type: str = "application/json",
    body_required: bool = True,
    query: Mapping[str, Mapping[str, Any]] | None = None,
    path: Mapping[str, str] | None = None,
    responses: Mapping[int | str, ResponseSpec] | None = None,
    tags: Sequence[str] = (),
    deprecated: bool = False,
) -> Callable[[F], F]:
    """A view decorator that declares what the OpenAPI document cannot read from the route.

    Args:
        summary: replaces the docstring's first paragraph as the summary.
        description: replaces the rest of the docstring as the description.
        body: the JSON schema of the request body; for a form, an object schema whose
            file fields are ``{"type": "string", "contentMediaType": ...}``.
        body_type: the body's media type (``"multipart/form-data"`` for uploads).
        body_required: whether the body may be left out.
        query: parameter name → its JSON schema, plus optional ``description``,
            ``required``, ``deprecated`` and ``example`` keys (moved onto the parameter).
            An empty schema means a string.
        path: path parameter name → its description (the type comes from the converter).
        responses: status (an int, ``"4XX"`` or ``"default"``) → a description, or
            ``(description, schema)`` for a JSON answer, or ``(description, schema,
            media_type)``. An error status without a schema answers the ``Error`` schema.
        tags: replace the blueprint's name as the operation's tags.
        deprecated: marks the operation deprecated.

    Raises:
        TypeError, ValueError: a declaration that would make a broken document, at import time.
    """
    doc = ApiDoc(
        summary=summary,
        description=description,
        body=_checked_mapping(body, "body") if body is not None else None,
        body_type=body_type,
        body_required=body_required,
        query={name: _checked_mapping(spec, f"query[{name!r}]") for name, spec in (query or {}).items()},
        path=dict(path or {}),
        responses={
            _checked_status(status): _checked_response(status, spec) for status, spec in (responses or {}).items()
        },
        tags=tuple(tags),
        deprecated=deprecated,
    )

    def decorate(view: F) -> F:
        setattr(view, _DOC_ATTR, doc)
        return view

    return decorate


def _checked_mapping(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"api_doc {what} must be a mapping (a JSON schema), got {type(value).__name__}")
    return value


def _checked_status(status: int | str) -> str:
    if isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 599:
        return str(status)
    if isinstance(status, str) and (status == "default" or _STATUS_RANGE.fullmatch(status)):
        return status
    raise ValueError(f"api_doc response status {status!r} is not an HTTP status, '4XX'-like range or 'default'")


def _checked_response(status: int | str, spec: ResponseSpec) -> ResponseSpec:
    if isinstance(spec, str):
        return spec
    if (
        isinstance(spec, tuple)
        and len(spec) in (2, 3)
        and isinstance(spec[0], str)
        and isinstance(spec[1], Mapping)
        and (len(spec) == 2 or isinstance(spec[2], str))
    ):
        return spec
    raise TypeError(f"api_doc response {status!r} must be a description or (description, schema[, media type])")


# -- the document ----------------------------------------------------------------------


def build_document(app: Flask) -> dict[str, Any]:
    """The OpenAPI 3.1 document of every route of ``app`` under ``/api/v1``."""
    paths: dict[str, dict[str, Any]] = {}
    operation_ids: set[str] = set()
    tags: set[str] = set()
    for rule in sorted(app.url_map.iter_rules(), key=lambda r: (r.rule, r.endpoint)):
        if not (rule.rule == API_PREFIX or rule.rule.startswith(API_PREFIX + "/")):
            continue
        view = app.view_functions.get(rule.endpoint)
        if view is None:
            continue
        path, parameters = _path_and_parameters(app, rule)
        methods = sorted((rule.methods or set()) - _IGNORED_METHODS)
        for method in methods:
            operation = _operation(view, rule, method if len(methods) > 1 else None, parameters, operation_ids)
            tags.update(operation["tags"])
            paths.setdefault(path, {})[method.lower()] = operation
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "Baobab admin API",
            "version": baobab.__version__,
            "description": (
                "Users, datasets, model templates, train jobs, trials and inference jobs of a Baobab "
                "platform. Every endpoint but the public ones needs 'Authorization: Bearer <token>' with a "
                "token from POST /api/v1/tokens; every error answers the Error schema."
            ),
        },
        "jsonSchemaDialect": "https://spec.openapis.org/oas/3.1/dialect/base",
        "servers": [{"url": "/"}],
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": dict(sorted(_schemas.items())),
            "securitySchemes": {
                _BEARER: {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "a token from POST /api/v1/tokens",
                }
            },
        },
        "security": [{_BEARER: []}],
        "tags": [{"name": tag, **_tag_description(app, tag)} for tag in sorted(tags)],
    }


def _path_and_parameters(app: Flask, rule: Rule) -> tuple[str, list[dict[str, Any]]]:
    """The OpenAPI path (``{name}`` for ``<converter:name>``) and its typed path parameters."""
    converters: Mapping[str, BaseConverter] = getattr(rule, "_converters", {})
    parameters = []
    for match in _RULE_VARIABLE.finditer(rule.rule):
        name = match["name"]
        converter = converters.get(name)
        if converter is None:  # a werkzeug without _converters: the class, with no arguments
            converter_class = app.url_map.converters.get(match["converter"] or "default", UnicodeConverter)
            schema = _converter_schema(converter_class, None)
        else:
            schema = _converter_schema(type(converter), converter)
        parameters.append({"name": name, "in": "path", "required": True, "schema": schema})
    return _RULE_VARIABLE.sub(lambda m: "{" + m["name"] + "}", rule.rule), parameters


def _converter_schema(kind: type[BaseConverter], converter: BaseConverter | None) -> dict[str, Any]:
    if issubclass(kind, IntegerConverter | FloatConverter):
        schema: dict[str, Any] = {"type": "integer" if issubclass(kind, IntegerConverter) else "number"}
        minimum = getattr(converter, "min", None)
        if minimum is None and not getattr(converter, "signed", False):
            minimum = 0
        if minimum is not None:
            schema["minimum"] = minimum
        if getattr(converter, "max", None) is not None:
            schema["maximum"] = converter.max  # type: ignore[union-attr]
        return schema
    if issubclass(kind, UUIDConverter):
        return {"type": "string", "format": "uuid"}
    if issubclass(kind, AnyConverter):
        items = sorted(getattr(converter, "items", ()))
        return {"type": "string", "enum": items} if items else {"type": "string"}
    if issubclass(kind, PathConverter):
        return {"type": "string", "description": "may contain '/'"}
    return {"type": "string"}


def _operation(
    view: Callable[..., Any],
    rule: Rule,
    method: str | None,
    path_parameters: list[dict[str, Any]],
    operation_ids: set[str],
) -> dict[str, Any]:
    doc: ApiDoc = getattr(view, _DOC_ATTR, None) or ApiDoc()
    summary, description = _docstring(view)
    operation_id = rule.endpoint if method is None else f"{rule.endpoint}.{method.lower()}"
    unique_id, n = operation_id, 2
    while unique_id in operation_ids:  # one view under several rules
        unique_id, n = f"{operation_id}.{n}", n + 1
    operation_ids.add(unique_id)
    operation: dict[str, Any] = {
        "operationId": unique_id,
        "tags": list(doc.tags) or [rule.endpoint.rpartition(".")[0] or "app"],
        "summary": doc.summary or summary or rule.endpoint,
    }
    if doc.description or description:
        operation["description"] = doc.description or description
    parameters = [{**p, "description": doc.path[p["name"]]} if p["name"] in doc.path else p for p in path_parameters]
    for name, spec in doc.query.items():
        parameter: dict[str, Any] = {"name": name, "in": "query", "required": False}
        parameter.update({k: v for k, v in spec.items() if k in _PARAMETER_KEYS})
        parameter["schema"] = {k: v for k, v in spec.items() if k not in _PARAMETER_KEYS} or {"type": "string"}
        parameters.append(parameter)
    if parameters:
        operation["parameters"] = parameters
    if doc.body is not None:
        operation["requestBody"] = {
            "required": doc.body_required,
            "content": {doc.body_type: {"schema": dict(doc.body)}},
        }
    open_to_all = is_public(view)
    if open_to_all:
        operation["security"] = []
    operation["responses"] = _responses(doc, open_to_all)
    if doc.deprecated:
        operation["deprecated"] = True
    return operation


def _responses(doc: ApiDoc, open_to_all: bool) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    for status, spec in doc.responses.items():
        if isinstance(spec, str):
            description, schema, media_type = spec, None, "application/json"
        else:
            description, schema = spec[0], spec[1]
            media_type = spec[2] if len(spec) == 3 else "application/json"
        if schema is None and (str(status).startswith(("4", "5")) or status == "default"):
            schema = ERROR_SCHEMA
        response: dict[str, Any] = {"description": description}
        if schema is not None:
            response["content"] = {media_type: {"schema": dict(schema)}}
        responses[str(status)] = response
    if not any(key.startswith("2") for key in responses):
        responses["2XX"] = {"description": "success; the description says what is answered"}
    if not open_to_all:
        responses.setdefault(
            "401", {"description": "no valid bearer token", "content": {"application/json": {"schema": ERROR_SCHEMA}}}
        )
    responses.setdefault(
        "4XX",
        {
            "description": "refused: the message says why, and field names the request field at fault",
            "content": {"application/json": {"schema": ERROR_SCHEMA}},
        },
    )
    return dict(sorted(responses.items()))


def _docstring(view: Callable[..., Any]) -> tuple[str | None, str | None]:
    """The first paragraph (on one line) and the rest of the view's docstring."""
    text = inspect.getdoc(view)
    if not text:
        return None, None
    first, _, rest = text.strip().partition("\n\n")
    return " ".join(first.split()), rest.strip() or None


def _tag_description(app: Flask, tag: str) -> dict[str, str]:
    blueprint_ = app.blueprints.get(tag)
    module = sys.modules.get(blueprint_.import_name) if blueprint_ is not None else None
    text = inspect.getdoc(module) if module is not None else None
    return {"description": text.strip().partition("\n\n")[0]} if text else {}


@blueprint.get("/openapi.json")
@public
@api_doc(responses={200: ("this document", {"type": "object", "required": ["openapi", "info", "paths"]})})
def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of this API, generated from its routes; needs no token."""
    return build_document(current_app)
