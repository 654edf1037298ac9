"""The configuration reference, rendered from the schema: every key, its default, what it takes, its meaning.

``paperclip config reference`` prints it; ``docs/reference/config.md`` is its
output, and a test fails when the two differ, so the reference cannot drift
from the code. Pure: no I/O.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from .schema import Defaults, Section, Tenant, TopLevel
from .values import allowed, http_url, key_list, origin_list, proxy_address, storage_url

INTRO = """\
# Configuration reference

<!-- Generated from proxy/config/schema.py by `paperclip config reference`: edit the schema, not this file. -->

`paperclip serve` reads `--config FILE`, else `$PAPERCLIP_CONFIG`, else
`./proxy.yaml`, else the `proxy.yaml` built into the package (the repo's,
which turns `passthrough_keys` on); its first log line names the file. The
file holds the top-level keys and sections below, `defaults` (what every
tenant inherits) and `tenants`. Every key is optional; a key left out has
the default shown here, whichever file is read.

A value may be `${VAR}`, `${VAR:-default}` (the default when `VAR` is unset
or empty) or `${VAR-default}` (only when it is unset), as in a shell or
docker compose; a value that is only `${VAR}`, with `VAR` unset or empty, is
not set (null). Types are strict: `"80"` is not a port and `"yes"` is not
`true`. A value that is only one `${...}` is read, once expanded, as the
YAML it spells where its key takes a number or `true`/`false` (`port:
${PAPERCLIP_PORT:-8787}`, `passthrough_keys: ${PASSTHROUGH:-false}`); a key
or any other string keeps the text as it is, and text around a `${...}`
makes the value a string. Every problem of a file is reported at once, each
with the file, the dotted key and what is wrong, and the command exits with
status 2 before anything starts.
"""

TENANTS = """\
## `tenants.<name>`

A tenant is `defaults` with its own overrides: any key of the `defaults.*`
sections above may be set under `tenants.<name>` (or at the top of
`<name>.yaml` in `tenants_dir`), key by key — `tenants.acme.memory.top_k: 4`
changes that one key and inherits the rest. A tenant also has its own keys:
"""

_VALIDATED = {
    http_url: "http(s) URL",
    storage_url: "database URL",
    proxy_address: "proxy URL `http://[user:pass@]host:port`",
    key_list: "list of keys",
    origin_list: "list of origins",
}
_BASES: dict[Any, str] = {bool: "`true` / `false`", int: "integer", float: "number", str: "string", Path: "path"}


def render() -> str:
    """The whole reference, as Markdown."""
    top = [name for name, f in TopLevel.model_fields.items() if _section(f) is None]
    parts = [INTRO, _heading("Top level", None), _table(TopLevel, "", top)]
    for where, model in (("", TopLevel), ("defaults.", Defaults)):
        for name, field in model.model_fields.items():
            section = _section(field)
            if section is not None:
                parts += [_heading(f"`{where}{name}`", section), _table(section, f"{where}{name}.")]
    own = [name for name in Tenant.model_fields if name not in Defaults.model_fields]
    parts += [TENANTS, _table(Tenant, "tenants.<name>.", own)]
    return "\n".join(parts)


def _heading(title: str, section: type[Section] | None) -> str:
    doc = inspect.getdoc(section) if section is not None else None
    text = doc.partition(": ")[2] if doc else "Keys at the top of the file, beside the sections."
    return f"## {title}\n\n{text[0].upper()}{text[1:]}\n"


def _table(model: type[BaseModel], prefix: str, names: list[str] | None = None) -> str:
    rows = ["| key | default | takes | meaning |", "|---|---|---|---|"]
    for name in names or list(model.model_fields):
        field = model.model_fields[name]
        meaning = (field.description or "").replace("|", "\\|")
        rows.append(f"| `{prefix}{name}` | `{_yaml(field.default)}` | {takes(field)} | {meaning} |")
    return "\n".join(rows) + "\n"


def takes(field: FieldInfo) -> str:
    """What a field accepts, in words: its type or choices, bounds, and whether null is allowed."""
    shape = allowed(field)
    if shape.choices:
        words = "one of " + ", ".join(f"`{c}`" for c in shape.choices)
    else:
        named = [_VALIDATED[f] for f in shape.validated_by() if f in _VALIDATED]
        words = named[0] if named else _BASES.get(shape.base, "string")
        words += "".join(_bounds(shape.bound("gt", "ge"), shape.bound("lt", "le")))
    return words + (" or `null`" if shape.nullable else "")


def _bounds(low: tuple[str, Any] | None, high: tuple[str, Any] | None) -> Iterator[str]:
    if low and high:
        yield f" {_yaml(low[1])}–{_yaml(high[1])}"
    elif low:
        yield f" {'>' if low[0] == 'gt' else '≥'} {_yaml(low[1])}"
    elif high:
        yield f" {'<' if high[0] == 'lt' else '≤'} {_yaml(high[1])}"


def _yaml(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, tuple | list):
        return "[" + ", ".join(map(_yaml, value)) + "]"
    return str(value)


def _section(field: FieldInfo) -> type[Section] | None:
    kind = field.annotation
    return kind if isinstance(kind, type) and issubclass(kind, Section) else None
