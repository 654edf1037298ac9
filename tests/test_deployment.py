"""The deployment files (deploy/, docs/guide/deployment.md) say what the code accepts."""

from __future__ import annotations

from pathlib import Path

import yaml

from proxy import config

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"


def test_the_replicas_config_is_valid_and_on_postgresql() -> None:
    url = "postgresql://paperclip:pw@db:5432/paperclip"
    settings = config.load(DEPLOY / "proxy.yaml", env={"PAPERCLIP_DATABASE_URL": url, "OPENAI_API_KEY": "sk"})
    assert settings.storage.url == url
    assert settings.server.host == "0.0.0.0"


def test_compose_runs_replicas_on_pgvector_behind_the_balancer() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert services["db"]["image"].startswith("pgvector/pgvector:")
    replica = services["paperclip"]
    assert replica["deploy"]["replicas"] >= 2
    assert "@db:5432/" in replica["environment"]["PAPERCLIP_DATABASE_URL"]
    assert any(v.endswith(replica["environment"]["PAPERCLIP_CONFIG"] + ":ro") for v in replica["volumes"])
    assert services["lb"]["ports"] == ["8787:8787"]
    nginx = (DEPLOY / "nginx.conf").read_text()
    assert "server paperclip:8787" in nginx and "proxy_buffering off" in nginx
