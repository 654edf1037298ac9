"""The restore's rules, without a database: the steps ``user_restore.steps`` yields for an export.

Both stores run these steps (``sqlite_users.py`` on SQLite, ``pg_users.py`` on
PostgreSQL; the round trip on both is in test_store_contract_memory.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from proxy.store import user_restore as plan
from proxy.store.records import cursor_key


def _item(item_id: int, key: str, superseded_by: int | None = None) -> dict[str, Any]:
    return {"id": item_id, "session": "s1", "type": "fact", "category": "other", "standing": False, "about": "user", "key": key, "content": f"{key} content",
            "terms": key, "importance": 0.5, "confidence": 0.9, "source": "user", "expires_at": None,
            "expires": None, "status": "superseded" if superseded_by else "active", "turns": [],
            "fragment_hashes": [], "seen_count": 1, "access_count": 0, "last_access": None,
            "created": 1.0, "updated": 1.0, "superseded_by": superseded_by}


def _fragment(n: int) -> dict[str, Any]:
    return {"session": "s1", "hash": f"h{n}", "role": "user", "text": f"turn {n}", "terms": "turn",
            "position": n, "tokens": 2, "created": 1.0, "status": "active"}


EXPORT = {
    "fragments": [_fragment(0), _fragment(1)],
    # 10 was superseded by 11; 12 is already in the store (found by key and content)
    "items": [_item(10, "diet", superseded_by=11), _item(11, "diet2"), _item(12, "city")],
    "sessions": [{"session": "s1", "extraction_cursor": 4, "prefixes": [],
                  "summaries": [{"id": "sum1", "level": 0, "text": "x", "tokens": 1, "start": 0, "end": 1,
                                 "created": 1.0}]}],
    "traces": [],
}


def _replay(there: set[str]) -> tuple[dict[str, int], list[plan.Step]]:
    """Run the plan against a store holding the fragment hashes / item keys in ``there``; what it did."""
    seen: list[plan.Step] = []
    next_id = iter(range(100, 200))

    def execute(step: plan.Step) -> Any:
        seen.append(step)
        match step:
            case plan.FindItem(key, _):
                return 7 if key in there else None
            case plan.Insert("fragments", _, values):
                return 0 if values[2] in there else 1
            case plan.Insert(_, _, _, _, True):
                return next(next_id)
            case plan.Insert():
                return 1
        return None

    vectors = np.zeros((3, 4), dtype=np.float32)
    return plan.run(plan.steps("u1", EXPORT, vectors, vectors[:2]), execute), seen


def test_the_scope_is_locked_before_its_first_fragment_and_every_row_is_counted_once() -> None:
    counts, seen = _replay(set())
    assert isinstance(seen[0], plan.LockScope)
    assert counts == {"fragments": 2, "items": 3, "summaries": 1, "prefixes": 0, "traces": 0}
    assert [s.table for s in seen if isinstance(s, plan.Insert)] == ["fragments"] * 2 + ["items"] * 3 + ["summaries"]
    assert all(s.vector is not None for s in seen if isinstance(s, plan.Insert) and s.table != "summaries")
    assert plan.Cursor(cursor_key("u1", "s1"), 4) in seen


def test_rows_already_there_are_skipped_and_history_points_at_the_new_ids() -> None:
    counts, seen = _replay({"h0", "city"})
    assert counts["fragments"] == 1 and counts["items"] == 2
    inserted = [s.values[6] for s in seen if isinstance(s, plan.Insert) and s.table == "items"]
    assert inserted == ["diet", "diet2"]  # "city" was found, not inserted again
    # items 10 and 11 got ids 100 and 101: the superseded one points at its successor's new id
    assert [s for s in seen if isinstance(s, plan.Supersede)] == [plan.Supersede(101, 100)]


async def test_the_async_runner_runs_the_same_steps() -> None:
    sync_counts, sync_seen = _replay(set())
    seen: list[plan.Step] = []

    async def execute(step: plan.Step) -> Any:
        seen.append(step)
        if isinstance(step, plan.Insert):
            return 100 + len(seen) if step.new_id else 1
        return None

    vectors = np.zeros((3, 4), dtype=np.float32)
    counts = await plan.run_async(plan.steps("u1", EXPORT, vectors, vectors[:2]), execute)
    assert counts == sync_counts
    assert [type(s) for s in seen] == [type(s) for s in sync_seen]
