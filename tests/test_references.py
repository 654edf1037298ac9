"""docs/reference/ follows the code: the CLI reference and the admin API's part of the HTTP reference
are what the code generates; every route, every header and every degraded reason is listed."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from starlette.routing import Route

from proxy import config, errors
from proxy.commands import api_reference, cli_reference
from proxy.commands.main import build_parser
from proxy.server.app import create_app
from proxy.server.inspector.page_guard import PAGE_HEADERS
from proxy.upstream.headers import HOP_BY_HOP

REPO = Path(__file__).resolve().parent.parent
REFERENCE = REPO / "docs" / "reference"


def test_the_cli_reference_is_what_the_parser_generates() -> None:
    assert (REFERENCE / "cli.md").read_text() == cli_reference.render(), (
        "regenerate it: python -m proxy.commands.cli_reference > docs/reference/cli.md"
    )


def commands(parser: argparse.ArgumentParser, name: str = "paperclip") -> list[str]:
    found = [name]
    for action in parser._actions:
        if isinstance(action.choices, dict):
            for sub_name, sub in action.choices.items():
                found += commands(sub, f"{name} {sub_name}")
    return found


def test_every_command_and_flag_has_its_section() -> None:
    text = (REFERENCE / "cli.md").read_text()
    names = commands(build_parser())
    assert {"paperclip serve", "paperclip memories forget-session", "paperclip config reference"} <= set(names)
    for name in names:
        assert f"`{name}`" in text, name
    assert "`--no-record-questions`" in text and "`--log-level LOG_LEVEL`" in text


def test_the_admin_api_reference_is_what_the_openapi_document_generates() -> None:
    text = (REFERENCE / "admin-api.md").read_text()
    assert api_reference.generated_block(text) == api_reference.render(), (
        "regenerate it: python -m proxy.commands.api_reference docs/reference/admin-api.md"
    )
    assert "#### `DELETE /paperclip/v1/users/{user}/memories/{item}`" in text


def test_the_generated_block_is_replaced_in_place_and_needs_its_markers() -> None:
    text = f"before\n{api_reference.BEGIN}\nold\n{api_reference.END}\nafter\n"
    new = api_reference.replace_block(text, "new")
    assert new.startswith("before\n") and new.endswith("after\n") and api_reference.generated_block(new) == "new"
    with pytest.raises(ValueError):
        api_reference.replace_block("no markers", "new")


def route_paths() -> list[str]:
    app = create_app(config.from_dict({}, env={}))
    paths = [re.sub(r"\{(\w+):path\}", r"{\1}", r.path) for r in app.routes if isinstance(r, Route)]
    return [p for p in paths if p != "/{path}" and not p.startswith("/paperclip/ui/")]


def test_every_route_of_the_app_is_in_the_http_reference() -> None:
    text = (REFERENCE / "admin-api.md").read_text()
    paths = route_paths()
    assert "/v1/chat/completions" in paths and "/paperclip/v1/users/{user}/fragments/{fragment}" in paths
    missing = [p for p in paths if not re.search(rf"`(?:[A-Z, ]+ )?{re.escape(p)}[`?,]", text)]
    assert missing == []


def code_names(pattern: str) -> set[str]:
    found: set[str] = set()
    for path in (REPO / "proxy").rglob("*.py"):
        found |= {m.lower() for m in re.findall(pattern, path.read_text(), flags=re.IGNORECASE)}
    return found


def degraded_reasons(cls: type[errors.Degraded] = errors.Degraded) -> set[str]:
    found = {cls.reason}
    for sub in cls.__subclasses__():
        found |= degraded_reasons(sub)
    return found


def test_every_header_and_degraded_reason_is_in_the_headers_reference() -> None:
    text = (REFERENCE / "headers.md").read_text().lower()
    controls = code_names(r"[\"']x-paperclip-[a-z-]+[\"']")
    names = {c.strip("\"'") for c in controls}
    assert {"x-paperclip-user", "x-paperclip-degraded"} <= names
    for name in sorted(names - {"x-paperclip-"}):
        assert f"`{name}" in text, name
    for name in sorted(HOP_BY_HOP | set(PAGE_HEADERS)):
        assert name in text, name
    reasons = degraded_reasons() | {"compression_failed", "compression_timeout", "too_large"}
    for reason in sorted(reasons):
        assert f"| `{reason}` |" in text, reason


def test_every_metric_is_in_the_http_reference_by_the_name_and_labels_prometheus_scrapes() -> None:
    """What a dashboard is written against: the sample name (``_total`` on a counter) and its labels."""
    from prometheus_client.metrics import MetricWrapperBase

    from proxy.metrics import Metrics

    row = next(line for line in (REFERENCE / "admin-api.md").read_text().splitlines() if "`GET /metrics`" in line)
    collectors = [m for m in vars(Metrics()).values() if isinstance(m, MetricWrapperBase)]
    assert len(collectors) >= 14
    shown = []
    for metric in collectors:
        name = metric._name + ("_total" if metric._type == "counter" else "")
        labels = ",".join(metric._labelnames)
        shown.append(f"`{name}{{{labels}}}`" if labels else f"`{name}`")
    assert [s for s in shown if s not in row] == []
