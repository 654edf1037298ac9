"""``${VAR}`` and ``${VAR:-default}`` in config values, expanded from the environment given.

A value that is only ``${VAR}`` with ``VAR`` unset or empty (and no default)
counts as not set (``None``), so ``api_key: ${OPENAI_API_KEY}`` means "no key"
rather than an empty one; inside a longer string an unset variable is "".
Expansion is textual: ``port: ${PORT}`` is the string ``"8080"``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def interpolate(value: Any, env: Mapping[str, str]) -> Any:
    """``value`` (a YAML document or part of one) with every string expanded."""
    if isinstance(value, str):
        return expand(value, env)
    if isinstance(value, Mapping):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    return value


def expand(text: str, env: Mapping[str, str]) -> str | None:
    whole = _VARIABLE.fullmatch(text)
    if whole:
        found = env.get(whole.group(1), whole.group(2))
        return found if found else None
    return _VARIABLE.sub(lambda m: env.get(m.group(1), m.group(2) or ""), text)
