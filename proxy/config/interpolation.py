"""``${VAR}``, ``${VAR:-default}`` and ``${VAR-default}`` in config values, expanded from the environment given.

As in a shell or docker compose, ``:-`` takes the default when ``VAR`` is
unset or empty, ``-`` only when it is unset. A value that is only ``${VAR}`` with ``VAR`` unset or empty (and no default)
counts as not set (``None``), so ``api_key: ${OPENAI_API_KEY}`` means "no key"
rather than an empty one; inside a longer string an unset variable is "".
A value that is wholly one ``${...}`` becomes :class:`Spelled` text: where
its key takes a number or true/false the schema reads it as the YAML it
spells (``port: ${PORT:-8787}`` is the integer 8787); elsewhere, keys
included, it is the text itself. With text around it, it is always a string.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}")


class Spelled(str):
    """The text a value that was wholly one ``${...}`` expanded to, as the file would have it."""

    def scalar(self) -> Any:
        """The YAML scalar the text spells (an integer, a number, true/false, null), else the text."""
        try:
            value = yaml.safe_load(self)
        except yaml.YAMLError:
            return str(self)
        return value if value is None or isinstance(value, bool | int | float) else str(self)


def interpolate(value: Any, env: Mapping[str, str]) -> Any:
    """``value`` (a YAML document or part of one) with every string expanded."""
    if isinstance(value, str):
        found = expand(value, env)
        return Spelled(found) if found is not None and _VARIABLE.fullmatch(value) else found
    if isinstance(value, Mapping):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    return value


def expand(text: str, env: Mapping[str, str]) -> str | None:
    whole = _VARIABLE.fullmatch(text)
    if whole:
        return _value(whole, env) or None
    return _VARIABLE.sub(lambda m: _value(m, env), text)


def _value(variable: re.Match[str], env: Mapping[str, str]) -> str:
    name, operator, default = variable.group(1, 2, 3)
    found = env.get(name)
    if found is None or (operator == ":-" and not found):
        return default or ""
    return found
