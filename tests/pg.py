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

    def schema_url(self) -> Iterator[str]:
        """A fixture's body: the URL of a fresh schema, dropped after the test."""
        schema, url = self.fresh_schema()
        yield url
        self.sql(f"DROP SCHEMA {schema} CASCADE")

    def halt(self) -> None:
        """Stop the database server (``pg_ctl stop -m fast``: clients are cut off), keeping its data."""
        from pgserver._commands import pg_ctl

        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.server.pgdata, user=self.server.system_user)

    def freeze(self) -> None:
        """Stop the server's processes where they are (SIGSTOP): connections stay open, nothing answers."""
        for process in self._processes():
            process.suspend()

    def thaw(self) -> None:
        for process in self._processes():
            process.resume()

    def _processes(self) -> list[Any]:
        import psutil  # pgserver's own dependency

        with open(f"{self.server.pgdata}/postmaster.pid") as pid_file:
            postmaster = psutil.Process(int(pid_file.readline()))
        return [postmaster, *postmaster.children(recursive=True)]

    def resume(self) -> None:
        """Start it again, at the same address."""
        with self.server._lock:
            self.server.ensure_postgres_running()

    def stop(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.server.cleanup()
        shutil.rmtree(self.folder, ignore_errors=True)


def a_server() -> Iterator[PgServer]:
    """A fixture's body: a server of its own, removed after its tests."""
    server = PgServer()
    yield server
    server.stop()


pg_server = pytest.fixture(scope="session")(a_server)


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    yield from pg_server.schema_url()
