"""Every item's history on PostgreSQL: the ``item_events`` table and the trigger that fills it.

One PL/pgSQL function writes the events SQLite's triggers write
(``edits.ITEM_TRIGGERS``), in the same shape, for whatever writes an item;
``pg_edits.py`` reads them and adds the ``edited`` rows. Kept apart from
``pg_edits`` because the schema (``pg_migrations``) may not import the pool.
"""

from __future__ import annotations

from typing import Any

PgConnection = Any


async def item_history(conn: PgConnection) -> None:
    """``item_events`` and the trigger that fills it: PostgreSQL's migration 008."""
    await conn.execute("""
        CREATE TABLE item_events (
            id BIGSERIAL PRIMARY KEY,
            item BIGINT NOT NULL,
            tenant TEXT NOT NULL,
            "user" TEXT NOT NULL,
            event TEXT NOT NULL,
            at DOUBLE PRECISION NOT NULL,
            "by" TEXT,
            detail TEXT NOT NULL DEFAULT '{}'
        )
    """)
    await conn.execute("CREATE INDEX item_events_item ON item_events (item, id)")
    await conn.execute(_ITEM_HISTORY)
    await conn.execute(
        "CREATE TRIGGER item_history AFTER INSERT OR UPDATE OR DELETE ON items"
        " FOR EACH ROW EXECUTE FUNCTION item_history()"
    )


# The same events, in the same shape, as SQLite's ``edits.ITEM_TRIGGERS``, from one function.
_ITEM_HISTORY = """
CREATE FUNCTION item_history() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO item_events (item, tenant, "user", event, at, "by", detail)
        VALUES (NEW.id, NEW.tenant, NEW."user", 'created', NEW.created, NEW.source,
                json_build_object('content', NEW.content, 'type', NEW.type,
                                  'importance', NEW.importance)::text);
    ELSIF TG_OP = 'DELETE' THEN
        DELETE FROM item_events WHERE item = OLD.id;
    ELSE
        IF NEW.seen_count > OLD.seen_count THEN
            INSERT INTO item_events (item, tenant, "user", event, at, "by", detail)
            VALUES (NEW.id, NEW.tenant, NEW."user", 'merged', NEW.updated, NULL,
                    json_build_object('seen_count', NEW.seen_count)::text);
        END IF;
        IF NEW.status IS DISTINCT FROM OLD.status THEN
            INSERT INTO item_events (item, tenant, "user", event, at, "by", detail)
            VALUES (NEW.id, NEW.tenant, NEW."user", NEW.status, NEW.updated, NULL,
                    json_build_object('superseded_by', NEW.superseded_by)::text);
        END IF;
    END IF;
    RETURN NULL;
END
$$
"""
