"""The OpenAPI 3.1 document is valid, and every real response of the admin API matches it."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate

from proxy.server.admin.openapi import document
from proxy.server.admin.routes import TABLE
from tests.admin_helpers import admin, ask, teach
from tests.conftest import Proxy
from tests.test_admin_api import OPERATOR, operated


def check(doc: dict[str, Any], r: httpx.Response) -> None:
    """Validate ``r`` against the document's schema for its path, method and status."""
    path = r.request.url.path.removeprefix("/paperclip/v1")
    template = next(t for t in doc["paths"] if re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", t), path))
    operation = doc["paths"][template].get(r.request.method.lower())
    if operation is None:  # a method the path does not have: a 405 in the error envelope
        assert r.status_code == 405
        schema = {"$ref": "#/components/schemas/Error", "components": doc["components"]}
    else:
        responses = operation["responses"]
        spec = responses.get(str(r.status_code), responses["default"])
        schema = {**spec["content"]["application/json"]["schema"], "components": doc["components"]}
    Draft202012Validator(schema).validate(r.json())


def test_document_is_valid_openapi_31(proxy: Proxy) -> None:
    with httpx.Client(base_url=proxy.url) as http:
        doc = http.get("/paperclip/v1/openapi.json").json()
    assert doc["openapi"] == "3.1.0"
    validate(doc)


def test_the_document_describes_every_path_and_method_the_admin_api_serves() -> None:
    paths = document()["paths"]
    assert set(paths) == set(TABLE)
    for path, (handlers, _) in TABLE.items():
        assert set(paths[path]) == {m.lower() for m in handlers}, path


def test_every_response_matches_the_document(
    make_proxy: Callable[..., Proxy], upstream_url: str, tmp_path: Path
) -> None:
    proxy = make_proxy(operated(upstream_url, tmp_path))
    session = teach(proxy, "bob")
    trace = ask(proxy, "bob")["x-paperclip-trace"]
    with admin(proxy) as http:
        doc = http.get("/paperclip/v1/openapi.json").json()
        created = http.post("/paperclip/v1/users/bob/memories", json={"content": "Bob collects stamps."})
        item = created.json()["item"]["id"]
        memory = f"/paperclip/v1/users/bob/memories/{item}"
        calls = [
            created,
            http.get("/paperclip/v1/users"),
            http.get("/paperclip/v1/users/bob/sessions"),
            http.get("/paperclip/v1/users/bob/memories"),
            http.get("/paperclip/v1/users/bob/memories", params={"q": "stamps"}),
            http.get(memory),
            http.patch(memory, json={"importance": 0.8}),
            http.get(f"{memory}/history"),
            http.get("/paperclip/v1/users/bob/export"),
            http.get("/paperclip/v1/users/bob/profile"),
            http.get(f"/paperclip/v1/sessions/{session}"),
            http.get("/paperclip/v1/traces"),
            http.get(f"/paperclip/v1/traces/{trace}"),
            http.get("/paperclip/v1/usage"),
            http.get("/paperclip/v1/tenants"),
            http.patch(memory, json={"colour": "red"}),
            http.get("/paperclip/v1/traces/t-none"),
            http.put("/paperclip/v1/traces"),
            http.get("/paperclip/v1/users/bob/fragments", params={"session": session, "status": "all"}),
            http.get("/paperclip/v1/users/bob/fragments", params={"q": "Zorblax"}),
            http.delete(memory, params={"purge": "true"}),
        ]
        fragment = calls[-2].json()["data"][0]["id"]
        calls += [
            http.delete(f"/paperclip/v1/users/bob/fragments/{fragment}"),
            http.delete("/paperclip/v1/users/bob/fragments/0"),
            http.delete(f"/paperclip/v1/sessions/{session}"),
            http.delete("/paperclip/v1/users/bob"),
        ]
    with admin(proxy, OPERATOR) as http:
        calls += [http.get("/paperclip/v1/usage"), http.get("/paperclip/v1/tenants"),
                  http.get("/paperclip/v1/users", params={"tenant": "globex"})]
    assert {c.status_code for c in calls} == {200, 201, 400, 404, 405}
    for r in calls:
        check(doc, r)
