"""Pagination as OpenAI's lists: walking pages with ``after`` yields every row once, in order."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.errors import BadRequest, NotFound
from proxy.server.admin.pagination import PageAsk, after_cursor, page, page_ask


def walk(rows: list[dict[str, str]], limit: int) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    after = None
    for _ in range(len(rows) + 2):
        ask = PageAsk(limit, after)
        body = page(after_cursor(rows, ask), ask)
        out += body["data"]
        if not body["has_more"]:
            return out
        after = body["last_id"]
    raise AssertionError("pagination did not end")


@given(st.lists(st.text(min_size=1, max_size=5), unique=True, max_size=40), st.integers(1, 12))
def test_pages_cover_every_row_once(ids: list[str], limit: int) -> None:
    rows = [{"id": i} for i in ids]
    assert walk(rows, limit) == rows


@given(st.integers(0, 30), st.integers(1, 10))
def test_has_more_and_edges(n: int, limit: int) -> None:
    rows = [{"id": str(i)} for i in range(n)]
    body = page(rows[: limit + 1], PageAsk(limit, None))
    assert body["has_more"] == (n > limit)
    assert body["first_id"] == (rows[0]["id"] if n else None)
    assert body["last_id"] == (rows[min(n, limit) - 1]["id"] if n else None)


def test_unknown_cursor_is_a_404_naming_after() -> None:
    with pytest.raises(NotFound) as gone:
        after_cursor([{"id": "a"}], PageAsk(5, "zz"))
    assert gone.value.param == "after"
    assert after_cursor([{"id": "a"}, {"id": "b"}], PageAsk(5, "a")) == [{"id": "b"}]


@pytest.mark.parametrize("limit", ["0", "101", "-1", "x", "1.5", "²", "٣", "9" * 5000])
def test_bad_limit(limit: str) -> None:
    with pytest.raises(BadRequest):
        page_ask({"limit": limit})
