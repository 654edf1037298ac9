"""pydantic's validation errors in the config's words: the dotted key, and what is wrong with it.

``"defaults.memory.top_k: must be positive, not -1"`` rather than
``"Input should be greater than 0"``: the reader is editing a YAML file, so
types are YAML's (an integer, a number, true or false, a mapping) and a
choice lists its values.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from .values import allowed

_KINDS = {
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "string": "a string",
    "dict": "a mapping",
    "model": "a mapping",
    "model_attributes": "a mapping",
    "tuple": "a list",
    "list": "a list",
    "path": "a path",
}


def problems(error: ValidationError, model: type[BaseModel]) -> Iterator[tuple[str, str]]:
    """Each error of validating ``model`` as (dotted key below it, problem), in the order found."""
    for detail in error.errors():
        loc = tuple(str(part) for part in detail["loc"])
        yield ".".join(loc), describe(detail, model, loc)


def describe(detail: ErrorDetails, model: type[BaseModel], loc: Sequence[str]) -> str:
    kind, given, ctx = detail["type"], detail["input"], detail.get("ctx") or {}
    if kind == "extra_forbidden":
        known = ", ".join(sorted(_model_at(model, loc[:-1]).model_fields))
        return f"unknown key (known here: {known})"
    if kind == "value_error":
        return str(ctx.get("error", detail["msg"]))
    if kind == "literal_error":
        allowed = ", ".join(map(str, _choices(model, loc)))
        return f"must be one of {allowed}, not {given!r}"
    if given is None:
        return "must be set"
    bound = _bound(kind, ctx, model, loc)
    if bound:
        return f"{bound}, not {given!r}"
    if kind == "string_too_short":
        return "must not be empty"
    for prefix, name in _KINDS.items():
        if kind in (f"{prefix}_type", f"{prefix}_parsing", f"{prefix}_from_float"):
            return f"must be {name}, not {given!r}"
    return str(detail["msg"])


def _bound(kind: str, ctx: dict[str, Any], model: type[BaseModel], loc: Sequence[str]) -> str | None:
    if kind not in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return None
    field = _field(model, loc)
    low, high = (allowed(field).bound("gt", "ge"), allowed(field).bound("lt", "le")) if field else (None, None)
    if low is not None and high is not None:
        return f"must be between {_number(low[1])} and {_number(high[1])}"
    if kind == "greater_than":
        return "must be positive" if ctx["gt"] == 0 else f"must be greater than {_number(ctx['gt'])}"
    if kind == "greater_than_equal":
        return "must not be negative" if ctx["ge"] == 0 else f"must be at least {_number(ctx['ge'])}"
    if kind == "less_than_equal":
        return f"must be at most {_number(ctx['le'])}"
    return f"must be less than {_number(ctx['lt'])}"


def _number(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _model_at(model: type[BaseModel], loc: Sequence[str]) -> type[BaseModel]:
    """The section model that holds the key at ``loc`` (a path of section names from ``model``)."""
    for name in loc:
        field = model.model_fields.get(name)
        if field is None or not (isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)):
            break
        model = field.annotation
    return model


def _field(model: type[BaseModel], loc: Sequence[str]) -> FieldInfo | None:
    return _model_at(model, loc[:-1]).model_fields.get(loc[-1]) if loc else None


def _choices(model: type[BaseModel], loc: Sequence[str]) -> tuple[Any, ...]:
    field = _field(model, loc)
    return allowed(field).choices if field is not None else ()
