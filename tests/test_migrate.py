"""``paperclip migrate``: a SQLite deployment copied into PostgreSQL, resumably, and counted."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from proxy.store import Store, open_postgres, open_store
from proxy.store.records import NewFragment, NewItem, SummaryRow
from proxy.store.transfer import TABLES, transfer
from tests.store_backends import add_item

REPO = Path(__file__).resolve().parents[1]
DIM = 8


def _vec(seed: int) -> Any:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


async def _deployment(path: Path) -> Store:
    """Two users with fragments, items (one superseded), summaries, traces; a third forgotten."""
    store = await asyncio.to_thread(open_store, str(path), DIM)
    for user in ("ana", "bob", "gone"):
        frags = [NewFragment(f"{user}{i}", "user", f"{user} says {i}", f"{user} says {i}", i, 3)
                 for i in range(7)]
        await store.fragments.add("acme", user, f"{user}-s", frags, np.stack([_vec(i) for i in range(7)]))
        item = NewItem("preference", "diet", f"{user} is vegetarian", "vegetarian", 0.9, 0.9, "user",
                       None, None, (1,), (f"{user}1",))
        old = await add_item(store.items, "acme", user, f"{user}-s", item, _vec(1))
        await add_item(store.items, "acme", user, f"{user}-s", item, _vec(2), supersedes=[old])
        summary = SummaryRow(f"sum-{user}", 0, "earlier", 2, 0, 4)
        await store.sessions.save_prefix("acme", user, f"{user}-s", "c3", 4, [summary], [summary])
        await store.traces.save("acme", user, f"{user}-s", f"t-{user}", {"user": user})
        assert await store.cursors.claim("acme", f"{user}-s", 0, "x", 30)
        await store.cursors.finish("acme", f"{user}-s", "x", 4)
    await store.users.forget("acme", "gone")
    await store.usage.add({("acme", "gpt-x", "2026-11-30"): {"requests": 2, "prompt_tokens": 40}})
    return store


def _comparable(export: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in export.items() if k != "exported_at"}


async def test_migrate_copies_everything_and_counts_it(tmp_path: Path, pg_url: str) -> None:
    sqlite = await _deployment(tmp_path / "p.db")
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "proxy", "migrate", "--from", f"sqlite:///{tmp_path / 'p.db'}", "--to", pg_url],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "all rows copied" in done.stdout and "fragments" in done.stderr  # the progress bars
    pg = await open_postgres(pg_url, DIM)
    try:
        for user in ("ana", "bob", "gone"):
            assert _comparable(await pg.users.export("acme", user)) == _comparable(
                await sqlite.users.export("acme", user))
        # Items keep their history (not the events the target's trigger would write), usage its counts.
        ana = await sqlite.items.all("acme", "ana", include_inactive=True)
        for item in ana:
            history = await sqlite.edits.history("acme", "ana", item.id)
            assert await pg.edits.history("acme", "ana", item.id) == history and history
        assert [e["event"] for e in await pg.edits.history("acme", "ana", ana[0].id)] == ["created", "superseded"]
        assert await pg.usage.rows("acme") == await sqlite.usage.rows("acme") != []
        # The forget's generation came along.
        assert (await pg.fragments.load_since("acme", "gone", 0, 10))[0] == (
            await sqlite.fragments.load_since("acme", "gone", 0, 10))[0] > 0
        vectors = [x.vector for x in (await pg.fragments.load_since("acme", "ana", 0, 10))[1]]
        # Fragment 1 was hidden by the superseded item it came from.
        assert np.allclose(np.stack(vectors), np.stack([_vec(i) for i in range(7) if i != 1]))
        # New rows continue after the copied ids.
        assert await pg.fragments.add("acme", "ana", "s2", [NewFragment("new", "user", "n", "n", 0, 1)],
                                      np.stack([_vec(9)])) == 1
    finally:
        await pg.aclose()
        sqlite.close()


async def test_an_interrupted_migrate_resumes_without_copying_twice(tmp_path: Path, pg_url: str) -> None:
    sqlite = await _deployment(tmp_path / "p.db")
    sqlite.close()
    seen: list[tuple[str, int]] = []

    def crash_after_two_batches(table: str, done: int, total: int) -> None:
        seen.append((table, done))
        if table == "fragments" and done >= 6:
            raise KeyboardInterrupt("the operator pressed ^C")

    with pytest.raises(KeyboardInterrupt):
        await transfer(str(tmp_path / "p.db"), pg_url, crash_after_two_batches, batch=3)
    assert seen[-1] == ("fragments", 6)
    resumed: list[tuple[str, int]] = []
    counts = await transfer(str(tmp_path / "p.db"), pg_url, lambda t, d, n: resumed.append((t, d)), batch=3)
    assert resumed[0] == ("fragments", 6)  # it went on from the last committed batch
    assert set(counts) == {t for t, _ in TABLES} and all(c.ok for c in counts.values()), counts
    assert counts["fragments"].source == 14 and counts["items"].source == 4


async def test_migrate_refuses_what_it_cannot_copy(tmp_path: Path) -> None:
    cases = [
        (["--from", "postgresql://a/b", "--to", "postgresql://c/d"], "--from must be a sqlite:/// URL"),
        (["--from", f"sqlite:///{tmp_path / 'none.db'}", "--to", "postgresql://c/d"], "no database at"),
        (["--from", f"sqlite:///{tmp_path / 'none.db'}", "--to", "mysql://c/d"], "--to must be"),
        # a PostgreSQL that does not answer: one line, no traceback
        (["--from", f"sqlite:///{tmp_path / 'src.db'}", "--to", f"postgresql://u:@/nodb?host={tmp_path / 'no-pg'}"],
         "cannot connect to PostgreSQL"),
    ]
    open_store(str(tmp_path / "src.db"), 4).close()
    for args, message in cases:
        done = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "proxy", "migrate", *args],
            cwd=REPO, capture_output=True, text=True, timeout=60,
        )
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr
