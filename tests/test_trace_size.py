"""``traces.candidates``: a trace keeps the first N ranked candidates and every injected one, and no more."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import ADMIN_KEY, Proxy, base_config
from tests.test_retrieval import FACT, QUESTION, english, long_history, send


def traced(proxy: Proxy) -> dict[str, Any]:
    send(proxy, long_history(FACT, english, pairs=40))
    headers = send(proxy, [{"role": "user", "content": QUESTION}])  # a fresh chat: every turn is a candidate
    with proxy.http(ADMIN_KEY) as http:
        found = http.get(f"/paperclip/v1/traces/{headers['x-paperclip-trace']}")
    assert found.status_code == 200
    data: dict[str, Any] = found.json()
    return data


def test_a_trace_keeps_the_first_candidates_and_the_injected_ones(
    make_proxy: Callable[..., Proxy], upstream_url: str, tmp_path: Path
) -> None:
    wide = traced(make_proxy(base_config(upstream_url, tmp_path / "wide.db", traces={"candidates": 50})))
    narrow = traced(make_proxy(base_config(upstream_url, tmp_path / "narrow.db", traces={"candidates": 2})))
    injected = {i for card in wide["injected"] for i in card.split(",")}
    ranked = [c["id"] for c in wide["candidates"]]
    assert len(ranked) > 2 + len(injected)  # enough candidates for the cap to bite
    assert narrow["injected"] == wide["injected"]  # the same request, the same recall
    assert [c["id"] for c in narrow["candidates"]] == [i for n, i in enumerate(ranked) if n < 2 or i in injected]
    assert len(json.dumps(narrow)) < len(json.dumps(wide))
