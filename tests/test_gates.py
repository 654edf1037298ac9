"""The strict gates run as part of the suite, so README's one test command checks everything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=900
    )


def test_ruff_is_clean() -> None:
    paths = [p for p in ("proxy", "tests", "bench") if (ROOT / p).is_dir()]
    result = run("ruff", "check", *paths)
    assert result.returncode == 0, result.stdout + result.stderr


# mypy --strict over the whole package takes minutes on a cold cache and busy cores:
# the suite's 120 s default per test is for tests, not for this gate.
@pytest.mark.timeout(900)
def test_mypy_strict_is_clean_on_the_package() -> None:
    result = run("mypy", "--strict", "proxy")
    assert result.returncode == 0, result.stdout + result.stderr
