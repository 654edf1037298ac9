"""``bench/overhead.py``'s request order: no target's endpoint is favoured by where it falls."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

from hypothesis import given, settings
from hypothesis import strategies as st


def overhead() -> ModuleType:
    path = Path(__file__).resolve().parent.parent / "bench" / "overhead.py"
    spec = importlib.util.spec_from_file_location("bench_overhead", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


ROUNDS = overhead().rounds


@given(st.integers(1, 4), st.integers(1, 3), st.integers(1, 3))
@settings(deadline=None)  # pure: what it checks is the order, not the time
def test_each_request_follows_another_process_equally_often(targets: int, kinds: int, periods: int) -> None:
    names, endpoints = list(range(targets)), [f"e{k}" for k in range(kinds)]
    plan = ROUNDS(names, endpoints, targets * kinds * periods)
    assert all(sorted(r) == sorted((t, e) for t in names for e in endpoints) for r in plan)
    sequence = [step for r in plan for step in r]
    # Whole periods, read as a cycle: the very first request has nothing before it.
    after_switch = Counter(b for a, b in zip(sequence, sequence[1:] + sequence[:1], strict=True) if a[0] != b[0])
    counts = {(t, e): after_switch[(t, e)] for t in names for e in endpoints}
    assert len(set(counts.values())) == 1, counts
