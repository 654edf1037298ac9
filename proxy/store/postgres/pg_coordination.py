"""What replicas on one PostgreSQL agree on through it: leases and per-scope generations.

Leases: background work that must run once (compressing a session's
range, an hourly cleanup) takes a named lease first. Taking it is one
``INSERT ... ON CONFLICT DO UPDATE ... WHERE`` statement: PostgreSQL locks
the conflicting row, so of replicas racing for a free lease exactly one
gets a row back. A lease expires on the database's clock; the work of a
replica that died is taken over by the next one to ask after ``ttl_s``.

Generations: a transaction that removes or hides a scope's rows (forget,
supersede) bumps the scope's generation inside it; a replica's in-memory
index reads the generation with every search and reloads the scope when it
moved. A forget on one replica is therefore never shown by another: the
next search anywhere sees the new generation in the same read as the rows.
"""

from __future__ import annotations

from ..records import generation_key
from .pg_database import PgConnection, PgDatabase


class PgLeases:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    async def acquire(self, name: str, owner: str, ttl_s: float) -> bool:
        """Take or renew the lease ``name`` for ``ttl_s`` seconds; False while another holds it."""
        async with self.db.connection() as conn:
            cur = await conn.execute(
                "INSERT INTO locks (name, owner, expires)"
                " VALUES (%s, %s, now() + make_interval(secs => %s))"
                " ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires = excluded.expires"
                " WHERE locks.expires < now() OR locks.owner = excluded.owner"
                " RETURNING owner",
                (name, owner, ttl_s),
            )
            return await cur.fetchone() is not None

    async def release(self, name: str, owner: str) -> None:
        async with self.db.connection() as conn:
            await conn.execute("DELETE FROM locks WHERE name = %s AND owner = %s", (name, owner))


async def bump_generation(conn: PgConnection, tenant: str, user: str) -> None:
    """Call inside the transaction that removes or hides the scope's rows."""
    await conn.execute(
        "INSERT INTO scope_generations (scope, generation) VALUES (%s, 1)"
        " ON CONFLICT (scope) DO UPDATE SET generation = scope_generations.generation + 1",
        (generation_key(tenant, user),),
    )


async def lock_scope(conn: PgConnection, tenant: str, user: str) -> None:
    """Until the transaction ends, be the only writer of the scope's fragments.

    Indexes in memory load a scope's fragments by id (``id > last seen``).
    Ids come from a sequence when a row is inserted, but transactions commit
    in any order: without this lock a fragment with a smaller id could
    commit after a reader moved past it, and that reader would never load
    it. Under the lock a scope's ids commit in order.
    """
    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (scope_lock_key(tenant, user),))


def scope_lock_key(tenant: str, user: str) -> str:
    """What ``lock_scope`` hashes into the lock's id (a statement may take the lock itself)."""
    return f"fragments\x1f{tenant}\x1f{user}"


# Keyed as SQLite keys it (``fragments.generation_key``): a digest, so a forgotten
# user's id does not outlive their data in the row that tells other replicas.
GENERATION = "SELECT generation FROM scope_generations WHERE scope = %s"


async def generation(conn: PgConnection, tenant: str, user: str) -> int:
    cur = await conn.execute(GENERATION, (generation_key(tenant, user),))
    row = await cur.fetchone()
    return 0 if row is None else int(row[0])
