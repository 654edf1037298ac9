"""``embedding.backend`` and ``embedding.cache_dir`` (SPEC §7): validated, and where the cache goes by default."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from proxy import config
from proxy.errors import ConfigError


def test_defaults_are_auto_and_the_user_cache_folder() -> None:
    settings = config.from_dict({}, env={"HOME": "/home/ada"})
    assert settings.embedding.backend == "auto"
    assert settings.embedding.cache_dir == Path("/home/ada/.cache/paperclip")


def test_xdg_cache_home_wins_over_home() -> None:
    settings = config.from_dict({}, env={"HOME": "/home/ada", "XDG_CACHE_HOME": "/data/cache"})
    assert settings.embedding.cache_dir == Path("/data/cache/paperclip")


def test_no_home_means_no_cache() -> None:
    assert config.from_dict({}, env={}).embedding.cache_dir is None


@pytest.mark.parametrize("backend", ["auto", "onnx", "torch"])
def test_each_backend_is_accepted(backend: str) -> None:
    settings = config.from_dict({"embedding": {"backend": backend}}, env={})
    assert settings.embedding.backend == backend


def test_an_explicit_cache_dir_with_an_environment_variable() -> None:
    raw = {"embedding": {"cache_dir": "${STATE}/models"}}
    settings = config.from_dict(raw, env={"STATE": "/srv/paperclip", "HOME": "/home/ada"})
    assert settings.embedding.cache_dir == Path("/srv/paperclip/models")


@pytest.mark.parametrize(
    ("embedding", "key", "problem"),
    [
        ({"backend": "onnxruntime"}, "embedding.backend", "must be one of auto, onnx, torch"),
        ({"cache_dir": 3}, "embedding.cache_dir", "must be a path"),
        ({"device": "cuda"}, "embedding.device", "unknown key"),
    ],
)
def test_bad_embedding_keys_name_the_key(embedding: dict[str, object], key: str, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        config.from_dict({"embedding": embedding}, env={})
    assert info.value.key == key and problem in info.value.problem


def test_the_shipped_proxy_yaml_documents_both_keys() -> None:
    shipped = Path(__file__).resolve().parents[1] / "proxy.yaml"
    assert yaml.safe_load(shipped.read_text())["embedding"] == {
        "model": "bundled",
        "backend": "auto",
        "cache_dir": None,
    }
    settings = config.load(shipped, env={"XDG_CACHE_HOME": "/x"})
    assert (settings.embedding.model, settings.embedding.backend) == ("bundled", "auto")
    assert settings.embedding.cache_dir == Path("/x/paperclip")
