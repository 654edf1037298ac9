"""``paperclip memories list|delete|fragments|delete-fragment|forget-session|export|forget|import``.

One user's data, straight from the store: memories (``list``, ``delete``
with ``--purge``), the raw turns they come from (``fragments``, searched
with ``--q``; ``delete-fragment``; ``forget-session`` for a whole
conversation), everything at once (``export``, ``forget``, ``import``).

The command opens the database named by ``storage.url``. Only ``import`` and
``fragments --q`` load the configured embedding model (to embed, and the
vector tables are sized by it); the others embed nothing, so they neither
load a model nor touch the vector tables' shape. It may run while the proxy
serves from the same file: SQLite in WAL mode takes one writer at a time. A
running proxy (or replica) drops what was deleted from its in-memory indexes
at its next search of the user: every deletion moves the user's generation.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..config import Settings, TenantSettings
from ..errors import InvalidExport, NotFound
from ..memory.curation.memory_admin import Embed, MemoryAdmin, finds_restatements
from ..memory.curation.turn_search import turn_search
from ..memory.search.embedder import Embedder, Vectors, load_embedder
from ..memory.search.fragment_index import FragmentIndex
from ..server.admin.pagination import LIMIT_RANGE, MAX_LIMIT, page_limit
from ..store import connect, urls
from ..store.interface import DatabaseUnavailable
from ..store.records import FRAGMENT_STATUSES, ItemRow, StoredFragment
from ..tokens import TokenCounter
from .config_commands import CONFIG_HELP


def add_parser(sub: Any) -> None:
    """Register ``memories`` on the ``paperclip`` sub-command parser."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", default=None, help=CONFIG_HELP)
    common.add_argument("--tenant", required=True, help="a tenant name from the config")
    memories = sub.add_parser("memories", help="list, delete, export, forget or import a user's memories and turns")
    actions = memories.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", parents=[common], help="a user's memory items")
    listing.add_argument("--user", required=True)
    listing.add_argument("--all", action="store_true", help="include superseded and archived items")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    delete = actions.add_parser("delete", parents=[common], help="delete one memory, and the memories and turns that say it again; its turns are never recalled")
    delete.add_argument("--user", required=True)
    delete.add_argument("--id", type=int, required=True, help="the memory's id (see list)")
    delete.add_argument("--purge", action="store_true", help="also delete the turns it came from")
    turns = actions.add_parser("fragments", parents=[common], help="a user's raw turns (what recall injects)")
    turns.add_argument("--user", required=True)
    turns.add_argument("--session", default=None, help="one conversation's turns")
    turns.add_argument("--q", default=None, help="search the active turns (loads the embedding model)")
    turns.add_argument("--status", default="active", choices=[*FRAGMENT_STATUSES, "all"])
    turns.add_argument("--limit", type=limit_argument, default=MAX_LIMIT,
                       help=f"at most this many, 1 to {MAX_LIMIT} as the admin API's pages (default {MAX_LIMIT})")
    turns.add_argument("--after", type=int, default=None, help="after this fragment id (the next page)")
    turns.add_argument("--json", action="store_true", help="print JSON instead of a table")
    turn = actions.add_parser("delete-fragment", parents=[common],
                              help="delete one turn, and the memories drawn only from it")
    turn.add_argument("--user", required=True)
    turn.add_argument("--id", type=int, required=True, help="the fragment's id (see fragments)")
    session = actions.add_parser("forget-session", parents=[common],
                                 help="forget a whole conversation: turns, summaries, traces, its memories")
    session.add_argument("--session", required=True)
    session.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    export = actions.add_parser("export", parents=[common], help="everything stored about a user, as JSON")
    export.add_argument("--user", required=True)
    export.add_argument("--out", default=None, help="write to this file instead of stdout")
    forget = actions.add_parser("forget", parents=[common], help="delete everything stored about a user")
    forget.add_argument("--user", required=True)
    forget.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    restore = actions.add_parser("import", parents=[common], help="restore a user from an export file")
    restore.add_argument("file")
    restore.add_argument("--user", default=None, help="import as this user (default: the file's user)")


def limit_argument(raw: str) -> int:
    """``--limit`` within the admin API's page bounds (``pagination.page_limit``); argparse names the option."""
    limit = page_limit(raw)
    if limit is None:
        raise argparse.ArgumentTypeError(f"must be {LIMIT_RANGE}, not {raw!r}")
    return limit


def run(args: argparse.Namespace, settings: Settings) -> int:
    found = tenant_of(settings, args.tenant)
    if found is None:
        names = ", ".join(t.name for t in settings.tenants) or "none"
        return fail(f"unknown tenant {args.tenant!r} (configured: {names})")
    if urls.is_sqlite(settings.storage.url):
        path = urls.sqlite_path(settings.storage.url)
        if args.action != "import" and path != ":memory:" and not os.path.exists(path):
            return fail(f"no database at {path} (storage.url)")
    if args.action == "forget" and not args.yes and not confirm(f"user {args.user!r}", args.tenant):
        print("nothing forgotten", file=sys.stderr)
        return 1
    if args.action == "forget-session" and not args.yes and not confirm(f"session {args.session!r}", args.tenant):
        print("nothing forgotten", file=sys.stderr)
        return 1
    if args.action == "import":
        return _import(args, settings, found)
    return asyncio.run(_run(args, settings, found))


def tenant_of(settings: Settings, name: str) -> TenantSettings | None:
    """A configured tenant by name; with ``passthrough_keys``, also a key scope (``key-<hex>``)."""
    for tenant in settings.tenants:
        if tenant.name == name:
            return tenant
    if settings.passthrough_keys and name.startswith("key-"):
        return settings.defaults
    return None


def confirm(what: str, tenant: str) -> bool:
    try:
        answer = input(f"Forget everything stored about {what} of tenant {tenant!r}? [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def fail(message: str) -> int:
    print(f"paperclip memories: {message}", file=sys.stderr)
    return 2


def _import(args: argparse.Namespace, settings: Settings, tenant: TenantSettings) -> int:
    try:
        with open(args.file, encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, ValueError) as exc:
        return fail(f"cannot read {args.file}: {exc}")
    user = args.user or (raw.get("user") if isinstance(raw, dict) else None)
    if not isinstance(user, str) or not user:
        return fail(f"{args.file} names no user: pass --user")
    args.user = user
    try:
        return asyncio.run(_run(args, settings, tenant, raw))
    except DatabaseUnavailable as exc:
        return fail(f"{exc} (storage.url)")


async def _run(
    args: argparse.Namespace, settings: Settings, tenant: TenantSettings, raw: Any = None
) -> int:
    if args.action in EMBEDS or (args.action == "fragments" and args.q):
        try:
            embedder = await asyncio.to_thread(
                load_embedder,
                settings.embedding.model,
                backend=settings.embedding.backend,
                cache_dir=settings.embedding.cache_dir,
            )
        except Exception as exc:
            return fail(f"cannot load the embedding model {settings.embedding.model!r}: {exc}")
        store = await connect(settings.storage.url, embedder.dim)
        embed = _embedding_with(embedder)
        turns = turn_search(FragmentIndex(store.fragments, embedder, TokenCounter(None)))
        restatements = finds_restatements(embedder.name)
    else:
        store = await connect(settings.storage.url, None)
        embed, turns, restatements = _no_embedding, None, False
    try:
        await ACTIONS[args.action](MemoryAdmin(store, embed, turns=turns, restatements=restatements), args, tenant,
                                   raw)
    except InvalidExport as exc:
        return fail(f"{args.file}: {exc}")
    except NotFound as exc:
        return fail(str(exc))
    finally:
        await store.aclose()
    return 0


def _embedding_with(embedder: Embedder) -> Embed:
    async def embed(texts: Sequence[str]) -> Vectors:
        return await asyncio.to_thread(embedder.embed, list(texts))

    return embed


async def _no_embedding(texts: Sequence[str]) -> Vectors:
    raise RuntimeError("this command was started without an embedding model (see EMBEDS)")


async def _list(admin: MemoryAdmin, args: argparse.Namespace, tenant: TenantSettings, raw: Any) -> None:
    rows = await admin.items(args.tenant, args.user, include_inactive=args.all)
    print(json.dumps([r.public() for r in rows], indent=2) if args.json else _table(rows))


async def _delete(admin: MemoryAdmin, args: argparse.Namespace, tenant: TenantSettings, raw: Any) -> None:
    forgot = await admin.forget_memory(args.tenant, args.user, args.id, purge=args.purge)
    if forgot is None:
        raise NotFound(f"no memory {args.id} for user {args.user!r}")
    also = [i for i in forgot.items if i != args.id]
    print(f"deleted memory {args.id} of user {args.user!r}"
          + (f" and {len(also)} that said it again ({', '.join(map(str, also))})" if also else "")
          + f": {forgot.turns} turns " + ("deleted" if forgot.purged else "hidden, never recalled again"))


async def _fragments(admin: MemoryAdmin, args: argparse.Namespace, tenant: TenantSettings, raw: Any) -> None:
    if args.q:
        mem = tenant.memory
        found = await admin.search_turns(args.tenant, args.user, args.q, session=args.session,
                                         weights=(mem.vector_weight, mem.bm25_weight), limit=args.limit)
        rows = [{**StoredFragment.active(f.fragment).public(), "score": f.score} for f in found]
    else:
        listed = await admin.store.listings.fragments(
            args.tenant, args.user, after=args.after, limit=args.limit, session=args.session,
            status=None if args.status == "all" else args.status,
        )
        rows = [f.public() for f in listed]
    print(json.dumps(rows, indent=2, ensure_ascii=False) if args.json else _turn_table(rows))


async def _delete_fragment(admin: MemoryAdmin, args: argparse.Namespace, tenant: TenantSettings, raw: Any) -> None:
    forgot = await admin.forget_turn(args.tenant, args.user, args.id)
    if forgot is None:
        raise NotFound(f"no fragment {args.id} for user {args.user!r}")
    print(f"deleted fragment {args.id} of user {args.user!r}, and {len(forgot.items)} memories drawn only from it")


async def _forget_session(admin: MemoryAdmin, args: argparse.Namespace, tenant: TenantSettings, raw: Any) -> None:
    counts = await admin.forget_session(args.tenant, args.session)
    if counts is None:
        raise NotFound(f"no session {args.session!r} in tenant {args.tenant!r}")
    print(f"forgot session {args.session!r} of tenant {args.tenant!r}: {_counts(counts)}")


async def _export(admin: MemoryAdmin, args: argparse.Namespace, tenant: TenantSettings, raw: Any) -> None:
    data = await admin.export(args.tenant, args.user)
    _write(json.dumps(data, ensure_ascii=False, indent=2), args.out)


async def _forget(admin: MemoryAdmin, args: argparse.Namespace, tenant: TenantSettings, raw: Any) -> None:
    counts = await admin.forget(args.tenant, args.user)
    print(f"forgot user {args.user!r} of tenant {args.tenant!r}: {_counts(counts)}")


async def _restore(admin: MemoryAdmin, args: argparse.Namespace, tenant: TenantSettings, raw: Any) -> None:
    counts = await admin.restore(args.tenant, args.user, raw, pii=tenant.memory.pii)
    print(f"imported user {args.user!r} into tenant {args.tenant!r}: {_counts(counts)}")


Action = Callable[[MemoryAdmin, argparse.Namespace, TenantSettings, Any], Awaitable[None]]
ACTIONS: dict[str, Action] = {
    "list": _list, "delete": _delete, "fragments": _fragments, "delete-fragment": _delete_fragment,
    "forget-session": _forget_session, "export": _export, "forget": _forget, "import": _restore,
}
# The actions that compute vectors, and ``delete``, which searches for what says the memory again as the
# admin API does (``memory_admin.restates``); the others never load the embedding model.
EMBEDS = frozenset({"import", "delete"})


def _table(rows: Sequence[ItemRow]) -> str:
    if not rows:
        return "(no memories)"
    return "\n".join(f"{r.id:>6}  {r.status:<10}  {r.type:<10}  {r.key}  {r.content}" for r in rows)


def _turn_table(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return "(no turns)"
    return "\n".join(f"{r['id']:>6}  {r['status']:<10} {r['role']:<9} {r['session']}  {r['text']}" for r in rows)


def _write(text: str, out: str | None) -> None:
    if out is None:
        print(text)
        return
    with open(out, "w", encoding="utf-8") as f:
        f.write(text + "\n")


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in counts.items())
