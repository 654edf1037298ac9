"""Whether the database is still there and writable, so ``/readyz`` and the log tell the truth.

SQLite keeps writing to a database file deleted (or replaced) under it, into
an inode nothing can reach: every write after that is lost at the next start.
So the file opened at start is watched; once it is gone, replaced or not
writable, the memory layer steps aside (requests are forwarded unchanged,
``X-Paperclip-Degraded: memory_unavailable``), ``/readyz`` answers 503 with
the reason, and the log says it once. A restart picks up whatever database
is then at the configured path.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

from .runtime import Runtime

WATCH_EVERY_S = 5.0


@dataclass(frozen=True)
class FileIdentity:
    device: int
    inode: int


def identity(path: str) -> FileIdentity | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return FileIdentity(st.st_dev, st.st_ino)


def database_problem(path: str, opened: FileIdentity | None) -> str | None:
    """What is wrong with the database file at ``path`` (opened as ``opened``), or None."""
    if path == ":memory:":
        return None
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return f"the database file {path} was deleted"
    except OSError as exc:
        return f"the database file {path} cannot be read: {exc.strerror}"
    if opened is not None and FileIdentity(st.st_dev, st.st_ino) != opened:
        return f"the database file {path} was replaced by another file"
    if not os.access(path, os.W_OK):
        return f"the database file {path} is not writable"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"the database folder {folder} is not writable"
    return None



async def check_database(runtime: Runtime, path: str, opened: FileIdentity | None) -> bool:
    """Check once; False (and the memory layer taken offline) when the database is unusable."""
    problem = await asyncio.to_thread(database_problem, path, opened)
    if problem is not None:
        runtime.memory.offline(problem)
    return problem is None


async def watch_database(
    runtime: Runtime, path: str, opened: FileIdentity | None, every_s: float = WATCH_EVERY_S
) -> None:
    """Check every ``every_s`` until the database is unusable (then the memory layer is off)."""
    while True:
        if not await check_database(runtime, path, opened):
            return
        await asyncio.sleep(every_s)
