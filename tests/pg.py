"""A real PostgreSQL with pgvector for the tests: one server per test session, one schema per test.

PyPI's ``pgserver`` bundles PostgreSQL and pgvector and runs them from a
temporary folder (as an unprivileged system user when the tests run as
root). Each test gets an empty schema first on its ``search_path``: a
fresh database costs a copy of the template, a schema costs nothing, and
the ``vector`` extension installed once in ``public`` serves them all.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest


class PgServer:
    def __init__(self) -> None:
        with warnings.catch_warnings():
            # platformdirs warns that XDG_RUNTIME_DIR is unset (containers, CI): pgserver falls back to /tmp.
            warnings.simplefilter("ignore")
            import pgserver

            self.folder = tempfile.mkdtemp(prefix="paperclip-pg-")
            self.server: Any = pgserver.get_server(self.folder, cleanup_mode="delete")
        self.uri: str = self.server.get_uri()
        self.sql("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")

    def sql(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(self.uri, autocommit=True) as conn:
            conn.execute(statement)

    def fresh_schema(self) -> tuple[str, str]:
        """(schema, URL whose connections work inside it)."""
        schema = "t_" + uuid.uuid4().hex[:12]
        self.sql(f"CREATE SCHEMA {schema}")
        options = quote(f"-csearch_path={schema},public")
        return schema, f"{self.uri}&options={options}"

    def stop(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.server.cleanup()
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    server = PgServer()
    yield server
    server.stop()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    schema, url = pg_server.fresh_schema()
    yield url
    pg_server.sql(f"DROP SCHEMA {schema} CASCADE")
