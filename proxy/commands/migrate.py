"""``paperclip migrate --from sqlite:///paperclip.db --to postgresql://...``: move a deployment's data.

Resumable (run it again after an interruption: it continues where it
stopped), a progress bar per table on stderr, and the rows of every table
counted on both sides at the end: exit status 0 only when they agree.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from ..store import urls
from ..store.interface import DatabaseUnavailable
from ..store.transfer import Count, transfer


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("migrate", help="copy a SQLite database into PostgreSQL (resumable)")
    parser.add_argument("--from", dest="source", required=True, help="sqlite:///path/to/paperclip.db")
    parser.add_argument("--to", dest="target", required=True, help="postgresql://user:password@host/db")


def run(args: argparse.Namespace) -> int:
    if not urls.is_sqlite(args.source):
        return _fail(f"--from must be a sqlite:/// URL, not {args.source!r}")
    if not urls.is_postgres(args.target):
        return _fail("--to must be a postgresql:// URL")
    path = urls.sqlite_path(args.source)
    if not os.path.exists(path):
        return _fail(f"no database at {path}")
    bars = _Bars()
    try:
        counts = asyncio.run(transfer(path, args.target, bars.update))
    except (OSError, ValueError, DatabaseUnavailable) as exc:
        return _fail(str(exc))
    finally:
        bars.close()
    return _report(counts)


class _Bars:
    """One tqdm bar per table, on stderr."""

    def __init__(self) -> None:
        self.bars: dict[str, Any] = {}

    def update(self, table: str, done: int, total: int) -> None:
        from tqdm import tqdm

        bar = self.bars.get(table)
        if bar is None:
            bar = self.bars[table] = tqdm(total=total, initial=done, desc=table, unit="row", file=sys.stderr)
        bar.update(done - bar.n)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()


def _report(counts: dict[str, Count]) -> int:
    width = max(len(t) for t in counts)
    print(f"{'table':<{width}}  {'source':>10}  {'target':>10}")
    for table, count in counts.items():
        mark = "" if count.ok else "  MISMATCH"
        print(f"{table:<{width}}  {count.source:>10}  {count.target:>10}{mark}")
    if all(c.ok for c in counts.values()):
        print("all rows copied")
        return 0
    print("counts differ: the target holds other rows, or the source changed during the copy", file=sys.stderr)
    return 1


def _fail(message: str) -> int:
    print(f"paperclip migrate: {message}", file=sys.stderr)
    return 2
