"""``paperclip memories list|export|forget|import`` as subprocesses, on a database a proxy wrote."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import yaml

from proxy.server.admin.pagination import MAX_LIMIT
from tests.admin_helpers import MARK, ask, teach
from tests.conftest import Proxy, base_config
from tests.fake_upstream import FakeUpstream

ROOT = Path(__file__).resolve().parents[1]


class Cli:
    def __init__(self, config: Path) -> None:
        self.config = config

    def __call__(self, *args: str, ok: bool = True, stdin: str = "") -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "proxy", "memories", args[0], "--config", str(self.config), *args[1:]],
            cwd=ROOT, capture_output=True, text=True, input=stdin, timeout=60, check=False,
        )
        if ok:
            assert done.returncode == 0, done.stderr
        return done

    def items(self, user: str, *extra: str) -> list[dict[str, Any]]:
        return list(json.loads(self("list", "--tenant", "acme", "--user", user, "--json", *extra).stdout))


@pytest.fixture
def setup(make_proxy: Callable[..., Proxy], upstream_url: str, tmp_path: Path) -> tuple[Proxy, Cli]:
    raw = base_config(upstream_url, tmp_path / "cli.db")
    config = tmp_path / "proxy.yaml"
    config.write_text(yaml.safe_dump(raw))
    return make_proxy(raw), Cli(config)


def test_export_forget_import_restores_retrieval(
    setup: tuple[Proxy, Cli], upstream: FakeUpstream, tmp_path: Path
) -> None:
    proxy, cli = setup
    teach(proxy, "bob")
    items = cli.items("bob")
    assert any("Zorblax" in i["content"] for i in items)
    out = tmp_path / "bob.json"
    cli("export", "--tenant", "acme", "--user", "bob", "--out", str(out))
    exported = json.loads(out.read_text())
    assert exported["version"] == 1 and exported["user"] == "bob" and exported["fragments"]
    assert json.loads(cli("export", "--tenant", "acme", "--user", "bob").stdout)["items"] == exported["items"]

    assert "forgot user 'bob'" in cli("forget", "--tenant", "acme", "--user", "bob", "--yes").stdout
    assert cli.items("bob", "--all") == []
    assert MARK not in b"".join(p.read_bytes() for p in tmp_path.glob("cli.db*")).lower()
    assert ask(proxy, "bob")["x-paperclip-memories"] == "0"

    assert "imported user 'bob'" in cli("import", str(out), "--tenant", "acme").stdout
    restored = cli.items("bob")
    assert [(i["key"], i["content"]) for i in restored] == [(i["key"], i["content"]) for i in items]
    headers = ask(proxy, "bob")
    assert int(headers["x-paperclip-memories"]) >= 1
    assert "Zorblax" in str(upstream.chat_requests()[-1].json()["messages"][-1]["content"])
    # Importing again adds nothing.
    assert "fragments 0, items 0" in cli("import", str(out), "--tenant", "acme").stdout


def test_import_as_another_user(setup: tuple[Proxy, Cli], tmp_path: Path) -> None:
    proxy, cli = setup
    teach(proxy, "bob")
    out = tmp_path / "bob.json"
    cli("export", "--tenant", "acme", "--user", "bob", "--out", str(out))
    cli("import", str(out), "--tenant", "acme", "--user", "robert")
    assert [i["content"] for i in cli.items("robert")] == [i["content"] for i in cli.items("bob")]


def test_forget_asks_first(setup: tuple[Proxy, Cli]) -> None:
    proxy, cli = setup
    teach(proxy, "bob")
    refused = cli("forget", "--tenant", "acme", "--user", "bob", ok=False, stdin="n\n")
    assert refused.returncode == 1 and cli.items("bob")
    cli("forget", "--tenant", "acme", "--user", "bob", stdin="y\n")
    assert cli.items("bob") == []


def test_errors_exit_2(setup: tuple[Proxy, Cli], tmp_path: Path) -> None:
    _, cli = setup
    unknown = cli("list", "--tenant", "nope", "--user", "bob", ok=False)
    assert unknown.returncode == 2 and "unknown tenant 'nope'" in unknown.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": 1, "user": "bob", "items": [{"type": "entity"}]}))
    invalid = cli("import", str(bad), "--tenant", "acme", ok=False)
    assert invalid.returncode == 2 and "items[0].content: missing" in invalid.stderr


def test_fragments_limit_takes_the_admin_apis_bounds(setup: tuple[Proxy, Cli]) -> None:
    proxy, cli = setup
    teach(proxy, "bob")

    def turns(limit: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        return cli("fragments", "--tenant", "acme", "--user", "bob", "--json", "--limit", limit, ok=ok)

    for bad in ("0", "-3", str(MAX_LIMIT + 1), "ten"):
        refused = turns(bad, ok=False)
        assert refused.returncode == 2 and refused.stdout == "", bad
        assert f"argument --limit: must be an integer from 1 to {MAX_LIMIT}, not {bad!r}" in refused.stderr
    assert len(json.loads(turns("1").stdout)) == 1
    assert len(json.loads(turns(str(MAX_LIMIT)).stdout)) > 1


def test_reading_commands_never_load_the_embedding_model(setup: tuple[Proxy, Cli], tmp_path: Path) -> None:
    proxy, cli = setup
    teach(proxy, "bob")
    items = cli.items("bob")
    exported = _without_time(cli("export", "--tenant", "acme", "--user", "bob").stdout)
    # The same database under a model that cannot load: only commands that embed need it.
    raw = yaml.safe_load(cli.config.read_text())
    raw["embedding"] = {"model": str(tmp_path / "no-such-model"), "backend": "onnx"}
    cli.config.write_text(yaml.safe_dump(raw))
    assert cli.items("bob") == items
    assert _without_time(cli("export", "--tenant", "acme", "--user", "bob").stdout) == exported
    out = tmp_path / "bob.json"
    out.write_text(json.dumps(exported))
    failed = cli("import", str(out), "--tenant", "acme", "--user", "robert", ok=False)
    assert failed.returncode == 2 and "cannot load the embedding model" in failed.stderr
    assert "forgot user 'bob'" in cli("forget", "--tenant", "acme", "--user", "bob", "--yes").stdout
    assert cli.items("bob", "--all") == []
    # The vector tables kept the shape of the proxy's model (hash: 256 dimensions).
    with closing(sqlite3.connect(tmp_path / "cli.db")) as db:
        query = "SELECT sql FROM sqlite_master WHERE name IN ('vec_fragments', 'vec_items')"
        shapes = [sql for (sql,) in db.execute(query)]
    assert len(shapes) == 2 and all("float[256]" in sql for sql in shapes)


def _without_time(text: str) -> dict[str, Any]:
    data = dict(json.loads(text))
    data.pop("exported_at")
    return data


def test_a_memory_is_deleted_with_its_turns_and_turns_and_sessions_are_listed_searched_and_forgotten(
    setup: tuple[Proxy, Cli], upstream: FakeUpstream
) -> None:
    proxy, cli = setup
    session = teach(proxy, "bob")
    other = teach(proxy, "bob", "My parrot Quillimo whistles at dawn, please remember that.")

    def turns(*extra: str) -> list[dict[str, Any]]:
        return list(json.loads(cli("fragments", "--tenant", "acme", "--user", "bob", "--json", *extra).stdout))

    said = [t for t in turns() if "Zorblax" in t["text"]]
    assert len(said) == 1 and said[0]["session"] == session
    assert {t["session"] for t in turns("--session", other)} == {other}
    assert turns("--q", "Quillimo")[0]["text"].startswith("My parrot Quillimo")
    assert "Zorblax" in cli("fragments", "--tenant", "acme", "--user", "bob").stdout  # a table

    memories = [i["id"] for i in cli.items("bob") if "Zorblax" in i["content"]]
    assert memories
    for memory in memories:  # the last one with its turns
        done = cli("delete", "--tenant", "acme", "--user", "bob", "--id", str(memory),
                   *(["--purge"] if memory == memories[-1] else []))
        assert f"deleted memory {memory}" in done.stdout
    assert "turns deleted" in done.stdout
    assert not any("Zorblax" in t["text"] for t in turns("--status", "all"))
    ask(proxy, "bob")
    assert MARK not in upstream.chat_requests()[-1].body.lower()
    missing = cli("delete", "--tenant", "acme", "--user", "bob", "--id", str(memories[0]), ok=False)
    assert missing.returncode == 2 and "no memory" in missing.stderr

    parrot = next(t for t in turns() if "Quillimo" in t["text"])
    assert "deleted fragment" in cli("delete-fragment", "--tenant", "acme", "--user", "bob", "--id",
                                     str(parrot["id"])).stdout
    assert not any("Quillimo" in t["text"] for t in turns("--status", "all"))

    refused = cli("forget-session", "--tenant", "acme", "--session", session, ok=False, stdin="n\n")
    assert refused.returncode == 1 and turns("--session", session)
    assert "forgot session" in cli("forget-session", "--tenant", "acme", "--session", session, "--yes").stdout
    assert turns("--session", session, "--status", "all") == []
    again = cli("forget-session", "--tenant", "acme", "--session", session, "--yes", ok=False)
    assert again.returncode == 2 and "no session" in again.stderr  # as the admin API's 404
