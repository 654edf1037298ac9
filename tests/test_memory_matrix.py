"""``bench/memory_matrix.py``: every combination replayed once, its table per half."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .test_eval import SAMPLE

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(300)
def test_the_matrix_replays_each_combination_once_and_tables_each_half(tmp_path: Path) -> None:
    data = tmp_path / "two.json"
    data.write_text(json.dumps([SAMPLE, {**SAMPLE, "sample_id": "conv-y"}]), encoding="utf-8")
    folder, md = tmp_path / "runs", tmp_path / "table.md"
    command = [sys.executable, "bench/memory_matrix.py", str(data), "--dir", str(folder), "--embedder", "hash",
               "--modes", "sessions", "--half", "A=conv-x", "--half", "B=conv-y", "--md", str(md)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr
    files = sorted(p.name for p in folder.iterdir())
    assert files == [f"sessions-{c}-{m}.json" for c in ("burst", "dated") for m in ("observations", "rules")]
    rows = [line.split(" | ") for line in md.read_text().splitlines()[2:]]
    assert [(r[1], r[2], r[3]) for r in rows] == [
        (c, m, h) for c in ("dated", "burst") for m in ("rules", "observations") for h in ("A", "B")
    ]
    assert all(r[4] == "1.000" for r in rows)  # the tiny chat is all in the index, every clock, every model
    meta = json.loads((folder / "sessions-burst-observations.json").read_text())["meta"]
    assert (meta["clock"], meta["model"]) == ("burst", "observations")
    # Run again: nothing is replayed, the same table is printed.
    stamps = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    again = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "replaying" not in again.stderr
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == stamps
    assert again.stdout.strip() == md.read_text().strip()
