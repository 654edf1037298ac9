"""A route matched on the path as it was sent, so an id holding "/" (sent as ``%2F``) is one segment."""

from __future__ import annotations

from urllib.parse import unquote

from starlette.routing import Match, Route
from starlette.types import Scope


class EncodedRoute(Route):
    """Matches the path as it was sent, percent-encoded, and decodes each parameter after.

    A user id holding "/" arrives as ``%2F``; matched on the decoded path it
    would split into two segments and match nothing.
    """

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        raw = scope.get("raw_path")
        if not raw:
            return super().matches(scope)
        match, child = super().matches({**scope, "path": raw.decode("latin-1"), "root_path": ""})
        if match is not Match.NONE:
            child["path_params"] = {k: unquote(v) for k, v in child["path_params"].items()}
        return match, child
