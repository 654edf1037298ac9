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
    # Each browser's own address reaches the replicas (the sign-in limits are per address), and only the
    # balancer, the one way in, is trusted to say it.
    assert "proxy_set_header X-Forwarded-For $remote_addr;" in nginx
    assert replica["environment"]["FORWARDED_ALLOW_IPS"] == "*" and "ports" not in replica


def test_the_replicas_config_is_the_shipped_one_on_postgresql_whatever_the_image_sets() -> None:
    """The replicas run the Docker image, whose environment asks for JSON logs (PAPERCLIP_LOG_FORMAT) and
    where an operator sets PAPERCLIP_ADMIN_KEY / PAPERCLIP_METRICS_KEY as for the shipped file: the
    replicas' file reads them alike, and differs from the shipped one only in where the data is."""
    url = "postgresql://paperclip:pw@db:5432/paperclip"
    image = {"PAPERCLIP_LOG_FORMAT": "json", "PAPERCLIP_DATA_DIR": "/data", "OPENAI_API_KEY": "sk",
             "PAPERCLIP_ADMIN_KEY": "operator-key-0123456789", "PAPERCLIP_METRICS_KEY": "metrics-key-0123456789"}
    replicas = config.load(DEPLOY / "proxy.yaml", env={**image, "PAPERCLIP_DATABASE_URL": url})
    shipped = config.load(config.EMBEDDED_FILE, env=image)
    assert replicas.server.log_format == "json"
    assert replicas.server.admin_keys == shipped.server.admin_keys
    assert replicas.server.metrics_keys == shipped.server.metrics_keys
    differ = {
        name for name in type(shipped).model_fields
        if name not in ("source", "storage", "server") and getattr(replicas, name) != getattr(shipped, name)
    }
    assert differ == set()
    assert replicas.server.model_copy(update={"host": shipped.server.host}) == shipped.server


def test_the_deployment_guide_says_the_image_listens_where_its_command_says_whatever_the_config() -> None:
    """The image's command passes --host and --port, which override server.host and server.port: a mounted
    config that sets another port does not move it, and the guide must say so."""
    dockerfile = (DEPLOY.parent / "Dockerfile").read_text()
    command = next(line for line in dockerfile.splitlines() if line.startswith("CMD "))
    assert "--host 0.0.0.0" in command and "--port 8787" in command
    guide = " ".join((DEPLOY.parent / "docs" / "guide" / "deployment.md").read_text().split())
    assert "listens on `0.0.0.0:8787` whatever `server.host` and `server.port` say" in guide
