"""The admin API's OpenAPI 3.1 document, served at ``/paperclip/v1/openapi.json``.

Built from data here, next to nothing else: tests/test_admin_openapi.py
validates the document and checks every real response of the API against
the schema it names, so the two cannot drift apart unnoticed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...memory.memory_schema import CATEGORIES, TYPES
from .pagination import MAX_LIMIT

Schema = dict[str, Any]


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(required: list[str], **props: Schema) -> Schema:
    return {"type": "object", "required": required, "properties": props}


_STR, _INT, _NUM, _BOOL = {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}
_NSTR, _NNUM, _NINT = {"type": ["string", "null"]}, {"type": ["number", "null"]}, {"type": ["integer", "null"]}


def list_of(item: str) -> Schema:
    return _obj(
        ["object", "data", "has_more", "first_id", "last_id"],
        object={"const": "list"}, data={"type": "array", "items": _ref(item)},
        has_more=_BOOL, first_id=_NSTR, last_id=_NSTR,
    )


SCHEMAS: dict[str, Schema] = {
    "Error": _obj(["error"], error=_obj(
        ["message", "type", "param", "code"], message=_STR, type=_STR, param=_NSTR, code=_NSTR,
    )),
    "Memory": _obj(
        ["id", "type", "key", "content", "importance", "status", "created", "updated"],
        id=_INT, session=_NSTR, type={"enum": list(TYPES)}, category={"enum": list(CATEGORIES)},
        standing=_BOOL, about=_STR, key=_STR, content=_STR, importance=_NUM, confidence=_NUM, source=_STR, expires_at=_NSTR,
        status={"enum": ["active", "superseded", "archived"]}, superseded_by=_NINT,
        turns={"type": "array", "items": _INT}, seen_count=_INT, access_count=_INT,
        last_access=_NNUM, created=_NUM, updated=_NUM,
        score=_NUM, vector=_NNUM, bm25=_NNUM,
    ),
    "MemoryInput": {**_obj(
        ["content"], content=_STR, type=_STR, category={"enum": list(CATEGORIES)}, standing=_BOOL, about=_STR,
        key=_STR, importance=_NUM, expires_at=_NSTR,
    ), "additionalProperties": False},
    "MemoryPatch": {**_obj(
        [], content=_STR, type=_STR, category={"enum": list(CATEGORIES)}, standing=_BOOL, importance=_NUM,
        expires_at=_NSTR,
    ), "additionalProperties": False, "minProperties": 1},
    "Added": _obj(["action", "item", "superseded"], action={"enum": ["added", "merged", "superseded"]},
                  item=_ref("Memory"), superseded={"type": "array", "items": _INT}),
    "Deleted": _obj(["id", "object", "deleted"], id=_INT, object=_STR, deleted={"const": True},
                    memories={"type": "array", "items": _INT}, turns=_INT, purged=_BOOL),
    "Fragment": _obj(
        ["id", "object", "session", "role", "text", "position", "tokens", "created", "status"],
        id=_INT, object={"const": "paperclip.fragment"}, session=_STR, role=_STR, text=_STR, position=_INT,
        tokens=_INT, created=_NUM, status={"enum": ["active", "superseded", "forgotten"]},
        score=_NUM, vector=_NNUM, bm25=_NNUM,
    ),
    "FragmentDeleted": _obj(["id", "object", "deleted", "memories"], id=_INT,
                            object={"const": "paperclip.fragment"}, deleted={"const": True},
                            memories={"type": "array", "items": _INT}),
    "SessionForgotten": _obj(["id", "object", "deleted", "counts"], id=_STR, object={"const": "paperclip.session"},
                             deleted={"const": True}, counts={"type": "object"}),
    "HistoryEvent": _obj(
        ["id", "event", "at", "by", "detail"], id=_INT,
        event={"enum": ["created", "merged", "superseded", "archived", "active", "edited"]},
        at=_NUM, by=_NSTR, detail={"type": "object"},
    ),
    "User": _obj(
        ["id", "object", "memories", "fragments", "sessions", "requests", "last_seen"],
        id=_STR, object={"const": "paperclip.user"}, memories=_INT, memories_total=_INT,
        fragments=_INT, sessions=_INT, requests=_INT, last_seen=_NNUM,
    ),
    "Forgotten": _obj(["user", "object", "deleted", "counts"], user=_STR, object=_STR,
                      deleted={"const": True}, counts={"type": "object"}),
    "Export": _obj(["version", "tenant", "user", "items", "fragments", "sessions", "traces"],
                   version=_INT, tenant=_STR, user=_STR, exported_at=_STR,
                   items={"type": "array"}, fragments={"type": "array"},
                   sessions={"type": "array"}, traces={"type": "array"}),
    "UserSession": _obj(
        ["id", "object", "first_seen", "last_seen", "fragments", "requests", "summaries"],
        id=_STR, object={"const": "paperclip.session"}, first_seen=_NUM, last_seen=_NUM,
        fragments=_INT, requests=_INT, summaries=_INT,
    ),
    "Session": _obj(["object", "session", "watermark", "summaries", "prefixes"],
                    object={"const": "paperclip.session"}, session=_STR, watermark=_INT,
                    summaries={"type": "array"}, prefixes={"type": "array"},
                    users={"type": "array", "items": _STR}, fragments=_INT,
                    extraction_cursor=_NINT),
    "TraceSummary": _obj(
        ["id", "object", "user", "session", "created", "tokens_in", "tokens_forwarded", "degraded"],
        id=_STR, object={"const": "paperclip.trace"}, user=_STR, session=_STR, created=_NUM,
        tokens_in=_NINT, tokens_forwarded=_NINT, degraded=_NSTR, query=_NSTR,
        candidates=_INT, injected=_INT, summaries=_INT,
    ),
    "Trace": _obj(
        ["object", "trace", "user", "session", "tokens_in", "tokens_forwarded", "candidates", "injected"],
        object={"const": "paperclip.trace"}, trace=_STR, user=_STR, session=_STR, created=_NUM,
        tokens_in=_INT, tokens_forwarded=_INT, degraded=_NSTR, watermark=_INT,
        summaries={"type": "array"}, query=_NSTR, memory_block=_NSTR,
        candidates={"type": "array", "items": {"type": "object", "required": ["score"]}},
        injected={"type": "array"},
    ),
    "Usage": _obj(
        ["id", "object", "tenant", "model", "day", "requests", "tokens_client", "tokens_forwarded",
         "billed_requests", "prompt_tokens", "completion_tokens", "tokens_saved"],
        id=_STR, object={"const": "paperclip.usage"}, tenant=_STR, model=_STR, day=_STR,
        requests=_INT, tokens_client=_INT, tokens_forwarded=_INT, billed_requests=_INT,
        prompt_tokens=_INT, completion_tokens=_INT, cached_tokens=_INT, tokens_saved=_INT,
    ),
    "Profile": _obj(
        ["object", "user", "enabled", "budget_tokens", "tokens", "data", "block"],
        object={"const": "paperclip.profile"}, user=_STR, enabled=_BOOL, budget_tokens=_INT, tokens=_INT,
        data={"type": "array", "items": _ref("Memory")}, block=_NSTR,
    ),
    "Tenant": _obj(["id", "object", "kind"], id=_STR, object={"const": "paperclip.tenant"},
                   kind={"enum": ["tenant", "passthrough"]}),
}
for _name in ("Memory", "Fragment", "User", "UserSession", "TraceSummary", "Usage", "Tenant", "HistoryEvent"):
    SCHEMAS[f"{_name}List"] = list_of(_name)


def _param(name: str, where: str = "query", schema: Schema | None = None, doc: str = "") -> Schema:
    return {"name": name, "in": where, "required": where == "path", "schema": schema or _STR,
            "description": doc}


_PAGE = [_param("limit", schema={"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}),
         _param("after", doc="the id of the last row of the previous page")]
_TENANT = _param("tenant", doc="an operator key names the tenant (or passthrough scope key-...)")
_USER, _ITEM = _param("user", "path"), _param("item", "path", {"type": "integer"})


def _op(summary: str, schema: str, params: Sequence[Schema] = (), body: str | None = None,
        status: str = "200") -> Schema:
    out: Schema = {
        "summary": summary,
        "parameters": [*params, _TENANT],
        "responses": {
            status: {"description": "OK", "content": {"application/json": {"schema": _ref(schema)}}},
            "default": {"description": "An error, in OpenAI's envelope",
                        "content": {"application/json": {"schema": _ref("Error")}}},
        },
    }
    if body is not None:
        out["requestBody"] = {"required": True, "content": {"application/json": {"schema": _ref(body)}}}
    return out


PATHS: dict[str, Schema] = {
    "/openapi.json": {"get": {
        "summary": "This document (no key needed)",
        "security": [],
        "parameters": [],
        "responses": {"200": {"description": "The admin API's OpenAPI 3.1 document",
                              "content": {"application/json": {"schema": {"type": "object"}}}}},
    }},
    "/tenants": {"get": _op("Tenants the key may see", "TenantList", _PAGE)},
    "/usage": {"get": _op("Tokens per tenant, model and day: client, forwarded, billed", "UsageList",
                          [*_PAGE, _param("since"), _param("until")])},
    "/users": {"get": _op("Users of the tenant, with counts and last seen", "UserList", _PAGE)},
    "/users/{user}": {"delete": _op("Forget the user completely", "Forgotten", [_USER])},
    "/users/{user}/export": {"get": _op("Everything stored about the user (each memory with its `history`)",
                                         "Export", [_USER])},
    "/users/{user}/profile": {"get": _op("The standing facts that lead every memory block (`within_budget`: "
                                         "false for those past `profile_budget_tokens`, which follow the profile "
                                         "where the question's matches leave room)", "Profile", [_USER])},
    "/users/{user}/sessions": {"get": _op("The user's sessions, the latest begun first: a session keeps its "
                                          "place as it goes on, so a walk by `after` neither repeats nor "
                                          "skips one", "UserSessionList", [_USER, *_PAGE])},
    "/users/{user}/memories": {
        "get": _op("List (or with q, search) the user's memories", "MemoryList",
                   [_USER, *_PAGE, _param("q"), _param("status"), _param("type"), _param("all")]),
        "post": _op("Add a memory by hand", "Added", [_USER], "MemoryInput", "201"),
    },
    "/users/{user}/memories/{item}": {
        "get": _op("One memory", "Memory", [_USER, _ITEM]),
        "patch": _op("Edit a memory (re-embedded)", "Memory", [_USER, _ITEM], "MemoryPatch"),
        "delete": _op("Forget one memory, and the user's memories and turns that say it again (`memories`: "
                      "every memory deleted); its source turns are never injected again", "Deleted",
                      [_USER, _ITEM, _param("purge", doc="true: also delete its source turns from the store")]),
    },
    "/users/{user}/memories/{item}/history": {
        "get": _op("Created, merged, superseded, edited: when and by whom", "HistoryEventList",
                   [_USER, _ITEM, *_PAGE]),
    },
    "/users/{user}/fragments": {
        "get": _op("List (or with q, search) the raw turns Paperclip recalls from", "FragmentList",
                   [_USER, *_PAGE, _param("q"), _param("session"), _param("status"), _param("all")]),
    },
    "/users/{user}/fragments/{fragment}": {
        "delete": _op("Delete one turn, and the memories drawn only from it", "FragmentDeleted",
                      [_USER, _param("fragment", "path", {"type": "integer"})]),
    },
    "/sessions/{session}": {
        "get": _op("A session's summary chain and watermark", "Session", [_param("session", "path")]),
        "delete": _op("Forget a whole conversation: turns, summaries, traces, memories drawn only from it "
                      "(404 when nothing of the tenant names it: unknown, another tenant's, or already forgotten)",
                      "SessionForgotten", [_param("session", "path")]),
    },
    "/traces": {"get": _op("Recent requests, newest first", "TraceSummaryList",
                           [*_PAGE, _param("user"), _param("session"), _param("degraded")])},
    "/traces/{trace}": {"get": _op("What one request forwarded, and why", "Trace",
                                   [_param("trace", "path")])},
}


def document() -> Schema:
    return {
        "openapi": "3.1.0",
        "info": {"title": "Paperclip admin API", "version": "1",
                 "description": "Memories, users, sessions, traces and usage of a Paperclip proxy."},
        "servers": [{"url": "/paperclip/v1"}],
        "security": [{"bearer": []}, {"apiKey": []}],
        "paths": PATHS,
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer",
                           "description": "An operator key, a tenant's admin key, or (passthrough) a client key"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "api-key"},
            },
        },
    }
