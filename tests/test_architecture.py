"""The layering of ``proxy/`` (docs/architecture.md), read from the source with ``ast``.

    edge      app, chat, passthrough, relay, upstream, transport, admin/, cli, eval/ … (the rest)
    pipeline  proxy/pipeline/
    context   proxy/context/        memory   proxy/memory/       (siblings: neither imports the other)
    store     proxy/store/          imports nothing of proxy outside proxy/store
    foundation config, errors, tokens, hashing, prompts, metrics, sse, background, tenancy
              beside the layers: any layer but the store may import them; they import only each other

A layer imports its own modules and the layers below it, never one above.
Every import counts (also inside functions and ``TYPE_CHECKING``): a lazy
import still ties the modules together.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "proxy"
MAX_LINES = 300
FOUNDATIONS = frozenset(
    {"config", "errors", "tokens", "hashing", "prompts", "metrics", "sse", "background", "tenancy"}
)
# Rank of each layer; a module may import modules of a lower rank, or of its own layer.
RANK = {"store": 0, "context": 1, "memory": 1, "pipeline": 2, "edge": 3}

Graph = Mapping[str, frozenset[str]]


def layer_of(module: str) -> str:
    """``proxy.memory.recall`` → ``memory``; ``proxy.chat`` → ``edge``; ``proxy.tokens`` → ``foundation``."""
    parts = module.split(".")[1:]
    if not parts:
        return "edge"
    if parts[0] in FOUNDATIONS:
        return "foundation"
    return parts[0] if parts[0] in RANK else "edge"


def allowed(source: str, target: str) -> bool:
    """Whether a module of layer ``source`` may import one of layer ``target``."""
    if source == target:
        return True
    if source == "store":
        return False
    if target == "foundation":
        return True
    if source == "foundation" or target == "edge":
        return False
    return RANK[target] < RANK[source]


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, known: Iterable[str]) -> frozenset[str]:
    """The proxy modules ``path`` imports (``from . import x`` resolved to the module ``x``)."""
    modules = set(known)
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "proxy")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base.split(".")[0] != "proxy":
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
    return frozenset(m for m in found if m in modules and m != name)


def import_graph() -> dict[str, frozenset[str]]:
    paths = sorted(ROOT.rglob("*.py"))
    names = [module_name(p) for p in paths]
    return {name: imports_of(p, names) for name, p in zip(names, paths, strict=True)}


def layer_violations(graph: Graph) -> list[str]:
    return sorted(
        f"{a} ({layer_of(a)}) imports {b} ({layer_of(b)})"
        for a, targets in graph.items()
        for b in targets
        if not allowed(layer_of(a), layer_of(b))
    )


def circles(graph: Graph) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def long_modules(limit: int = MAX_LINES) -> list[str]:
    found = ((p, len(p.read_text(encoding="utf-8").splitlines())) for p in sorted(ROOT.rglob("*.py")))
    return [f"{p.relative_to(ROOT.parent)} ({n})" for p, n in found if n > limit]


# --- the checks on proxy/ ---------------------------------------------------------------------


def test_no_layer_imports_a_layer_above_it() -> None:
    assert layer_violations(import_graph()) == []


def test_there_is_no_import_circle_between_modules() -> None:
    assert circles(import_graph()) == []


def test_no_module_passes_300_lines() -> None:
    assert long_modules() == []


# --- the checkers themselves catch what they are for ------------------------------------------


def test_the_layers_are_read_from_the_paths() -> None:
    assert layer_of("proxy.store.db") == "store"
    assert layer_of("proxy.memory.recall") == "memory"
    assert layer_of("proxy.context.planner") == "context"
    assert layer_of("proxy.pipeline") == "pipeline"
    assert layer_of("proxy.pipeline.memory") == "pipeline"
    assert layer_of("proxy.tokens") == "foundation"
    assert layer_of("proxy.chat") == "edge"
    assert layer_of("proxy.admin.routes") == "edge"
    assert layer_of("proxy.store") == "store"
    assert layer_of("proxy") == "edge"


def test_an_upward_import_is_reported() -> None:
    graph = {
        "proxy.store.items": frozenset({"proxy.memory.lifecycle", "proxy.store.db"}),
        "proxy.memory.recall": frozenset({"proxy.pipeline.call", "proxy.tokens", "proxy.store.db"}),
        "proxy.context.planner": frozenset({"proxy.memory.query"}),
        "proxy.pipeline.memory": frozenset({"proxy.relay", "proxy.memory.recall"}),
        "proxy.tokens": frozenset({"proxy.store.db", "proxy.hashing"}),
        "proxy.store.users": frozenset({"proxy.tokens"}),
        "proxy.chat": frozenset({"proxy.pipeline.memory", "proxy.store.db", "proxy.errors"}),
    }
    assert layer_violations(graph) == [
        "proxy.context.planner (context) imports proxy.memory.query (memory)",
        "proxy.memory.recall (memory) imports proxy.pipeline.call (pipeline)",
        "proxy.pipeline.memory (pipeline) imports proxy.relay (edge)",
        "proxy.store.items (store) imports proxy.memory.lifecycle (memory)",
        "proxy.store.users (store) imports proxy.tokens (foundation)",
        "proxy.tokens (foundation) imports proxy.store.db (store)",
    ]


def test_a_circle_is_reported_with_its_members() -> None:
    graph = {
        "a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a", "d"}),
        "d": frozenset(), "e": frozenset({"e"}),
    }
    assert circles(graph) == [["a", "b", "c"]]


def test_relative_imports_are_resolved() -> None:
    graph = import_graph()
    assert "proxy.errors" in graph["proxy.relay"]  # from .errors import ...
    assert "proxy.memory.bm25" in graph["proxy.startup"]  # from .memory import bm25
    assert "proxy.pipeline.layer" in graph["proxy.runtime"]  # from .pipeline.layer import ...
    assert all(m.startswith("proxy") for targets in graph.values() for m in targets)
