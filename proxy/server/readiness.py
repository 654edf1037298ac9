"""Whether the database is still there and answering, so ``/readyz`` and the log tell the truth.

SQLite keeps writing to a database file deleted (or replaced) under it, into
an inode nothing can reach: every write after that is lost at the next start.
So the file opened at start is watched; once it is gone, replaced or not
writable, the memory layer steps aside for good (requests are forwarded
unchanged, ``X-Paperclip-Degraded: memory_unavailable``), ``/readyz``
answers 503 with the reason, and the log says it once. A restart picks up
whatever database is then at the configured path.

Either database is pinged every ``WATCH_EVERY_S``: one that does not answer
(a stopped PostgreSQL) turns the layer ``StoreDown`` — requests go out
plainly at once (``store_unavailable``) rather than each waiting
``storage.timeout_s``, and ``/readyz`` answers 503 — and the first ping it
answers again puts the layer back, without a restart. A ping not answered
within ``PING_DEADLINE_S`` is a database that does not answer, whatever the
ping is still doing: giving up a query on a server that stopped where it was
(its sockets open) takes the PostgreSQL driver up to 10 s more. Such a ping
is left to end on its own, and no other starts while it runs.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

from ..store import urls
from ..store.interface import DatabaseUnavailable
from .runtime import Offline, Ready, Runtime, StoreDown

WATCH_EVERY_S = 1.0
PING_DEADLINE_S = 2.0


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


async def watch_store(runtime: Runtime, every_s: float = WATCH_EVERY_S) -> None:
    """Until the memory layer is off for good: check the SQLite file, ping the database, say what is true."""
    ping: asyncio.Future[None] | None = None  # a ping not answered yet
    while True:
        state = runtime.memory.state
        layer = runtime.memory.layer
        if isinstance(state, Offline) or layer is None:
            return
        ready = state.ready if isinstance(state, StoreDown) else state
        opened = ready.database_file if isinstance(ready, Ready) else None
        if isinstance(opened, FileIdentity):
            path = urls.sqlite_path(runtime.settings.storage.url)
            if not await check_database(runtime, path, opened):
                return
        if ping is None:
            ping = asyncio.ensure_future(layer.bounded.ping())
            ping.add_done_callback(lambda done: done.cancelled() or done.exception())  # read, even if left
        done, _ = await asyncio.wait({ping}, timeout=PING_DEADLINE_S)
        if not done:
            runtime.memory.store_down(f"the database did not answer within {PING_DEADLINE_S:g} s")
        else:
            failed, ping = ping.exception(), None
            if isinstance(failed, DatabaseUnavailable):
                runtime.memory.store_down(str(failed))
            elif failed is not None:
                raise failed
            else:
                runtime.memory.store_back()
        await asyncio.sleep(every_s)
