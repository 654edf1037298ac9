"""Every benchmark under ``bench/`` imports: a module renamed in ``proxy/`` breaks its benchmark here, not in a run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHES = sorted(p.stem for p in (ROOT / "bench").glob("*.py") if p.stem != "__init__")


def test_there_are_benchmarks_to_check() -> None:
    assert "scale" in BENCHES and "pg_storage" in BENCHES


# One child process for all of them: importing a benchmark runs nothing (each runs under
# ``__main__``), and a fresh interpreter sees exactly what ``python bench/x.py`` would.
@pytest.mark.timeout(300)
def test_every_benchmark_imports() -> None:
    script = (
        "import importlib, sys, traceback\n"
        "failed = []\n"
        f"for name in {BENCHES!r}:\n"
        "    try:\n"
        "        importlib.import_module('bench.' + name)\n"
        "    except Exception:\n"
        "        failed.append(name + ': ' + traceback.format_exc(limit=1))\n"
        "print('\\n'.join(failed))\n"
        "sys.exit(1 if failed else 0)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=290)
    assert result.returncode == 0, result.stdout + result.stderr
