"""``GET /api/v1/openapi.json``: a structurally valid OpenAPI 3.1 document of every route, served without a token."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from baobab.admin import _openapi, _train_job_spec
from baobab.admin._openapi import api_doc, register_schema, schema_ref

sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)

METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
STATUS = re.compile(r"[1-5]\d\d|[1-5]XX|default")
RULE_VARIABLE = re.compile(r"<(?:([a-z]+)(?:\([^)]*\))?:)?(\w+)>")


def openapi_path(rule: str) -> str:
    return RULE_VARIABLE.sub(r"{\2}", rule)


def refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from refs(item)


def check_document(document: dict[str, Any], app: Flask) -> None:
    """Fails unless ``document`` is a well-formed OpenAPI 3.1 document of exactly the app's /api/v1 routes."""
    assert document["openapi"].startswith("3.1.")
    assert isinstance(document["info"]["title"], str) and isinstance(document["info"]["version"], str)
    schemes = document["components"]["securitySchemes"]
    assert schemes["bearerAuth"] == {
        "type": "http", "scheme": "bearer", "description": "a token from POST /api/v1/tokens"
    }  # fmt: skip
    assert document["security"] == [{"bearerAuth": []}]
    for ref in refs(document):
        assert ref.startswith("#/components/schemas/"), ref
        assert ref.rpartition("/")[2] in document["components"]["schemas"], ref

    expected: dict[str, set[str]] = {}
    for rule in app.url_map.iter_rules():
        if rule.rule.startswith("/api/v1/"):
            methods = {m.lower() for m in rule.methods or ()} - {"head", "options"}
            expected.setdefault(openapi_path(rule.rule), set()).update(methods)
    assert {path: set(item) for path, item in document["paths"].items()} == expected

    operation_ids = []
    tag_names = {tag["name"] for tag in document["tags"]}
    for path, item in document["paths"].items():
        names_in_path = re.findall(r"{(\w+)}", path)
        for method, operation in item.items():
            assert method in METHODS
            operation_ids.append(operation["operationId"])
            assert isinstance(operation["summary"], str) and operation["summary"], (path, method)
            assert set(operation["tags"]) <= tag_names
            parameters = operation.get("parameters", [])
            path_parameters = [p for p in parameters if p["in"] == "path"]
            assert [p["name"] for p in path_parameters] == names_in_path, (path, method)
            for parameter in parameters:
                assert parameter["in"] in ("path", "query", "header", "cookie")
                assert isinstance(parameter["schema"], dict)
                if parameter["in"] == "path":
                    assert parameter["required"] is True
            assert len({(p["name"], p["in"]) for p in parameters}) == len(parameters)
            if "requestBody" in operation:
                for media_type, content in operation["requestBody"]["content"].items():
                    assert "/" in media_type and isinstance(content["schema"], dict)
            assert operation["responses"], (path, method)
            for status, response in operation["responses"].items():
                assert STATUS.fullmatch(status), status
                assert isinstance(response["description"], str) and response["description"]
                for content in response.get("content", {}).values():
                    assert isinstance(content["schema"], dict)
            if operation.get("security") != []:  # a public view answers 401 only where it says so itself
                assert "security" not in operation and "401" in operation["responses"]
    assert len(operation_ids) == len(set(operation_ids))


def test_served_without_a_token_and_valid(app: Flask, client: FlaskClient) -> None:
    response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    assert response.content_type == "application/json"
    document = response.json
    check_document(document, app)
    paths = document["paths"]
    # Public views need no token; the others need the bearer token.
    assert paths["/api/v1/openapi.json"]["get"]["security"] == []
    assert paths["/api/v1/tokens"]["post"]["security"] == []
    assert "security" not in paths["/api/v1/users"]["get"]
    # Path parameters are typed from their converters; summaries come from docstrings.
    get_user = paths["/api/v1/users/{user_id}"]["get"]
    assert get_user["parameters"] == [
        {"name": "user_id", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 0}}
    ]
    assert get_user["summary"] == "One user; 404 when there is none with this id."
    assert get_user["tags"] == ["users"]
    users_tag = next(tag for tag in document["tags"] if tag["name"] == "users")
    assert users_tag["description"].startswith("``/api/v1/users``: admins create, list, read, re-role and ban users.")


@sqlite_only
def test_the_model_endpoints_declare_bodies_queries_and_answers(client: FlaskClient) -> None:
    document = client.get("/api/v1/openapi.json").json
    models = document["paths"]["/api/v1/models"]
    upload = models["post"]
    assert upload["summary"] == "Upload a model template; 201 with it once it loads in a separate process."
    assert upload["description"].startswith("The template is imported and its knob config read in a process")
    form = upload["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert form["required"] == ["file", "name", "task", "class_name"]
    assert set(form["properties"]) == {"file", "name", "task", "class_name", "dependencies", "access"}
    assert form["properties"]["access"]["default"] == "PRIVATE"
    assert upload["responses"]["201"]["content"]["application/json"]["schema"] == schema_ref("Model")
    assert upload["responses"]["400"]["content"]["application/json"]["schema"] == schema_ref("Error")
    assert set(upload["responses"]) == {"201", "400", "401", "403", "413", "4XX"}
    [task] = models["get"]["parameters"]
    assert task == {
        "name": "task", "in": "query", "required": False, "description": "only the templates for this task",
        "schema": {"enum": ["IMAGE_CLASSIFICATION", "TABULAR_CLASSIFICATION", "TABULAR_REGRESSION"]},
    }  # fmt: skip
    download = document["paths"]["/api/v1/models/{model_id}/file"]["get"]
    assert download["parameters"][0]["description"] == "the template's id"
    assert download["responses"]["200"]["content"] == {"text/x-python": {"schema": {"type": "string"}}}
    delete = document["paths"]["/api/v1/models/{model_id}"]["delete"]
    assert set(delete["responses"]) == {"204", "401", "403", "404", "409", "4XX"}
    assert "content" not in delete["responses"]["204"]
    model = document["components"]["schemas"]["Model"]
    assert set(model["required"]) == {
        "id", "name", "task", "class_name", "access", "dependencies", "knob_config", "checksum", "owner_id",
        "created_at",
    }  # fmt: skip


@sqlite_only
def test_routes_added_later_are_covered_with_what_they_declare(app: Flask, client: FlaskClient) -> None:
    @api_doc(
        query={"limit": {"type": "integer", "minimum": 1, "required": True, "example": 5}, "q": {}},
        body={"type": "object", "properties": {"colour": {"type": "string"}}},
        path={"widget_id": "which widget"},
        responses={202: ("queued", {"type": "object"}), "5XX": "the widget broke", 404: "no such widget"},
        tags=["widgets"],
        deprecated=True,
    )
    def paint(**kwargs: Any) -> dict[str, Any]:
        """Paint a widget.

        Takes a while: answers 202 at once.
        """
        return {}

    def undocumented(**kwargs: Any) -> str:
        return ""

    rule = "/api/v1/widgets/<int:widget_id>/<uuid:key>/<any(red, blue):shade>/<float(signed=True):x>/<path:rest>"
    app.add_url_rule(rule, "widgets.paint", paint, methods=["PUT", "PATCH"])
    app.add_url_rule("/api/v1/gadgets/<name>", "undocumented", undocumented)
    app.add_url_rule("/health", "health", undocumented)

    document = client.get("/api/v1/openapi.json").json
    check_document(document, app)
    assert "/health" not in document["paths"]
    item = document["paths"]["/api/v1/widgets/{widget_id}/{key}/{shade}/{x}/{rest}"]
    assert set(item) == {"put", "patch"}
    put = item["put"]
    assert (put["operationId"], item["patch"]["operationId"]) == ("widgets.paint.put", "widgets.paint.patch")
    assert (put["summary"], put["description"], put["tags"], put["deprecated"]) == (
        "Paint a widget.", "Takes a while: answers 202 at once.", ["widgets"], True
    )  # fmt: skip
    assert [(p["name"], p["in"], p["schema"]) for p in put["parameters"]] == [
        ("widget_id", "path", {"type": "integer", "minimum": 0}),
        ("key", "path", {"type": "string", "format": "uuid"}),
        ("shade", "path", {"type": "string", "enum": ["blue", "red"]}),
        ("x", "path", {"type": "number"}),
        ("rest", "path", {"type": "string", "description": "may contain '/'"}),
        ("limit", "query", {"type": "integer", "minimum": 1}),
        ("q", "query", {"type": "string"}),
    ]
    assert put["parameters"][0]["description"] == "which widget"
    assert (put["parameters"][5]["required"], put["parameters"][5]["example"]) == (True, 5)
    assert put["requestBody"] == {
        "required": True,
        "content": {"application/json": {"schema": {"type": "object", "properties": {"colour": {"type": "string"}}}}},
    }
    assert put["responses"]["202"] == {
        "description": "queued",
        "content": {"application/json": {"schema": {"type": "object"}}},
    }
    assert put["responses"]["5XX"]["content"]["application/json"]["schema"] == schema_ref("Error")
    assert "2XX" not in put["responses"]

    gadget = document["paths"]["/api/v1/gadgets/{name}"]["get"]
    assert gadget["summary"] == "undocumented"  # no docstring: the endpoint's name
    assert gadget["parameters"] == [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}]
    assert set(gadget["responses"]) == {"2XX", "401", "4XX"}


def test_bad_declarations_fail_at_import_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_openapi, "_schemas", dict(_openapi._schemas))  # register nothing for the other tests
    with pytest.raises(ValueError, match="99 is not an HTTP status"):
        api_doc(responses={99: "odd"})
    with pytest.raises(ValueError, match="'2xx' is not an HTTP status"):
        api_doc(responses={"2xx": "lower case"})
    with pytest.raises(TypeError, match=r"response 200 must be a description or \(description, schema"):
        api_doc(responses={200: ("ok", "not a schema")})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="api_doc body must be a mapping"):
        api_doc(body=[1])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"api_doc query\['q'\] must be a mapping"):
        api_doc(query={"q": "string"})  # type: ignore[dict-item]
    assert register_schema("TestThing", {"type": "object"}) == {"$ref": "#/components/schemas/TestThing"}
    assert register_schema("TestThing", {"type": "object"}) == schema_ref("TestThing")  # the same again is fine
    with pytest.raises(ValueError, match="another schema is already registered as 'TestThing'"):
        register_schema("TestThing", {"type": "string"})
    with pytest.raises(ValueError, match="may hold only letters"):
        register_schema("a thing", {})


#: Operations that take no request body: asking is all they need.
BODILESS = {("post", "/api/v1/inference_jobs/{job_id}/stop"), ("post", "/api/v1/train_jobs/{app}/{app_version}/stop"),
            ("post", "/api/v1/trials/{trial_id}/stop"), ("post", "/api/v1/inference_jobs/{job_id}/rollback"),
            ("post", "/api/v1/inference_jobs/{job_id}/versions/{name}/promote")}  # fmt: skip


def test_every_operation_declares_its_body_and_its_answers(app: Flask, client: FlaskClient) -> None:
    """What a client (or schemathesis) needs: every body and every success answer has a schema."""
    document = client.get("/api/v1/openapi.json").json
    for path, item in document["paths"].items():
        for method, operation in item.items():
            where = (method, path)
            if method in ("post", "put", "patch") and where not in BODILESS:
                content = operation["requestBody"]["content"]
                assert len(content) == 1, where
                [(media_type, body)] = content.items()
                if media_type == "application/json":
                    assert body["schema"].get("type") == "object", where
                elif media_type == "multipart/form-data":
                    assert body["schema"]["properties"]["file"]["type"] == "string", where
                else:
                    assert body["schema"] == {"type": "string", "format": "binary"}, where
            else:
                assert "requestBody" not in operation, where
            successes = {status: r for status, r in operation["responses"].items() if status.startswith("2")}
            assert successes and "2XX" not in successes, where
            for status, response in successes.items():
                if status == "204":
                    assert "content" not in response, where
                else:
                    [(media_type, answer)] = response["content"].items()
                    assert answer["schema"], where
                    if media_type == "application/json":
                        assert answer["schema"].get("type") == "object" or "$ref" in answer["schema"], where
    # The names schemas share, and the bodies generated from the declarations the code reads.
    schemas = document["components"]["schemas"]
    assert {"Dataset", "Error", "InferenceJob", "Model", "TrainJob", "Trial", "User"} <= set(schemas)
    create = document["paths"]["/api/v1/train_jobs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert create == _train_job_spec.CREATE_SCHEMA
    assert set(create["properties"]) == set(_train_job_spec.TrainJobBody.model_fields)
    # The budget's bounds are those parse_budget holds it to (read from the same schema).
    budget = create["properties"]["budget"]["properties"]
    assert (budget["MODEL_TRIAL_COUNT"]["minimum"], budget["MODEL_TRIAL_COUNT"]["maximum"]) == (1, 100_000)
    params = document["paths"]["/api/v1/trials/{trial_id}/params"]["get"]["responses"]["200"]["content"]
    assert params == {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}
    upload = document["paths"]["/api/v1/datasets"]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert upload["required"] == ["file", "name", "format"]
