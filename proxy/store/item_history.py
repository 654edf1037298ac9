"""Every item's history (created, merged, superseded, edited), written by triggers on ``items``.

Triggers, so every writer of items (extraction, the admin API, imports,
``paperclip migrate``) leaves the same history without knowing of it; SQLite's
and PostgreSQL's versions sit side by side here because they must write the
same events in the same shape (``edits.py`` and ``pg_edits.py`` read them and
add the ``edited`` rows). Deleting an item deletes its history.
"""

from __future__ import annotations

from typing import Any

from .db import Connection


def _script(conn: Connection, sql: str) -> None:
    for statement in sql.split(";"):
        if statement.strip():
            conn.execute(statement)


async def _pg_script(conn: Any, sql: str) -> None:
    for statement in sql.split(";"):
        if statement.strip():
            await conn.execute(statement)


def sqlite_item_history(conn: Connection) -> None:
    """SQLite's migration 009."""
    _script(conn,
        """
        CREATE TABLE item_events (
            id INTEGER PRIMARY KEY,
            item INTEGER NOT NULL,
            tenant TEXT NOT NULL,
            user TEXT NOT NULL,
            event TEXT NOT NULL,
            at REAL NOT NULL,
            by TEXT,
            detail TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX item_events_item ON item_events (item, id)
        """
    )
    # Each trigger is one statement (``_script`` splits on ";").
    for trigger in _ITEM_TRIGGERS:
        conn.execute(trigger)


_ITEM_TRIGGERS = (
    """CREATE TRIGGER item_created AFTER INSERT ON items BEGIN
        INSERT INTO item_events (item, tenant, user, event, at, by, detail)
        VALUES (new.id, new.tenant, new.user, 'created', new.created, new.source,
                json_object('content', new.content, 'type', new.type, 'importance', new.importance));
    END""",
    """CREATE TRIGGER item_merged AFTER UPDATE OF seen_count ON items
    WHEN new.seen_count > old.seen_count BEGIN
        INSERT INTO item_events (item, tenant, user, event, at, by, detail)
        VALUES (new.id, new.tenant, new.user, 'merged', new.updated, NULL,
                json_object('seen_count', new.seen_count));
    END""",
    """CREATE TRIGGER item_status AFTER UPDATE OF status ON items
    WHEN new.status != old.status BEGIN
        INSERT INTO item_events (item, tenant, user, event, at, by, detail)
        VALUES (new.id, new.tenant, new.user, new.status, new.updated, NULL,
                json_object('superseded_by', new.superseded_by));
    END""",
    """CREATE TRIGGER item_deleted AFTER DELETE ON items BEGIN
        DELETE FROM item_events WHERE item = old.id;
    END""",
)


async def pg_item_history(conn: Any) -> None:
    """PostgreSQL's migration 008."""
    await _pg_script(conn, """
        CREATE TABLE item_events (
            id BIGSERIAL PRIMARY KEY,
            item BIGINT NOT NULL,
            tenant TEXT NOT NULL,
            "user" TEXT NOT NULL,
            event TEXT NOT NULL,
            at DOUBLE PRECISION NOT NULL,
            "by" TEXT,
            detail TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX item_events_item ON item_events (item, id)
    """)
    # One statement with semicolons inside: not through ``_pg_script``.
    await conn.execute(_ITEM_HISTORY)
    await conn.execute(
        "CREATE TRIGGER item_history AFTER INSERT OR UPDATE OR DELETE ON items"
        " FOR EACH ROW EXECUTE FUNCTION item_history()"
    )


# The same events, in the same shape, as SQLite's ``_ITEM_TRIGGERS``, from one function.
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
