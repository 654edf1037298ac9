"""The layering of ``proxy/`` (docs/architecture.md), read from the source with ``ast``.

A module's layer is its top folder under ``proxy/``; the files at the top of
``proxy/`` and the ``config/`` folder are the core:

    commands   paperclip's command line                     may import anything below
    eval       the replay evaluations
    server     the HTTP edge: app, endpoints, relay, admin API, inspector
    upstream   the upstream clients and their wire
    pipeline   a chat call between the edge and the memory
    context    memory      (siblings: neither imports the other)
    store      imports nothing of proxy outside proxy/store
    core       errors, tokens, hashing, prompts, ... and config/: any layer but the
               store may import them; they import only each other

A layer imports its own modules and the layers below it, never one above.
Every import counts (also inside functions and ``TYPE_CHECKING``): a lazy
import still ties the modules together. No module reads another module's
private (``_name``) names, no two modules share a file name, and a module
past ``WARN_LINES`` is reported (past ``MAX_LINES`` it fails): one concept
may be long, but rarely that long.
"""

from __future__ import annotations

import ast
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "proxy"
WARN_LINES = 500
MAX_LINES = 800
# Rank of each layer (a top folder of proxy/); a module may import a lower rank, or its own layer.
RANK = {
    "store": 0, "context": 1, "memory": 1, "pipeline": 2, "upstream": 3, "server": 4, "eval": 5, "commands": 6,
}
CORE_FOLDERS = frozenset({"config"})

Graph = Mapping[str, frozenset[str]]


def layer_of(module: str, packages: Iterable[str] = ()) -> str:
    """``proxy.memory.recall.recall`` → ``memory``; ``proxy.tokens`` → ``core``; ``proxy`` → ``core``.

    A top-level name is a layer when it is a folder (a package among
    ``packages``, or a known layer); a top-level file is core.
    """
    parts = module.split(".")[1:]
    if parts == ["__main__"]:  # ``python -m proxy``: the command line's entry point
        return "commands"
    if not parts or parts[0] in CORE_FOLDERS:
        return "core"
    top = parts[0]
    folder = len(parts) > 1 or f"proxy.{top}" in set(packages) or top in RANK
    if not folder:
        return "core"
    return top if top in RANK else f"unknown folder {top}"


def allowed(source: str, target: str) -> bool:
    """Whether a module of layer ``source`` may import one of layer ``target``."""
    if source == target:
        return True
    if source == "store" or (source not in RANK and source != "core"):
        return False
    if target == "core":
        return True
    if source == "core" or target not in RANK:
        return False
    return RANK[target] < RANK[source]


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(name: str, package: str, text: str, known: Iterable[str]) -> Iterable[tuple[str, str | None]]:
    """(module imported, name taken from it or None) for each proxy import in the source ``text`` of
    module ``name`` (whose package, for relative imports, is ``package``)."""
    modules = set(known)
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            yield from ((a.name, None) for a in node.names if a.name.split(".")[0] == "proxy")
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
                yield (sub, None) if sub in modules else (base, alias.name)


def _read(path: Path) -> tuple[str, str, str]:
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    return name, package, path.read_text(encoding="utf-8")


def imports_of(path: Path, known: Iterable[str]) -> frozenset[str]:
    """The proxy modules ``path`` imports (``from . import x`` resolved to the module ``x``)."""
    modules = set(known)
    name, package, text = _read(path)
    return frozenset(m for m, _ in _imports(name, package, text, modules) if m in modules and m != name)


def private_imports(name: str, package: str, text: str, known: Iterable[str]) -> list[str]:
    """Private names a module takes from another: ``from .x import _y``, or ``x._y`` on a module ``x``."""
    modules = set(known)
    found = [f"{name} imports {m}.{n}" for m, n in _imports(name, package, text, modules)
             if n is not None and m != name and n.startswith("_") and not n.startswith("__")]
    leaves = {m.rpartition(".")[2] for m in modules}
    tree = ast.parse(text)
    bound = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
             for a in node.names if a.name in leaves}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            found.append(f"{name} reads {node.value.id}.{node.attr}")
    return sorted(found)


def sources() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


def import_graph() -> dict[str, frozenset[str]]:
    paths = sources()
    names = [module_name(p) for p in paths]
    return {name: imports_of(p, names) for name, p in zip(names, paths, strict=True)}


def packages() -> list[str]:
    return [module_name(p) for p in sources() if p.name == "__init__.py"]


def layer_violations(graph: Graph, known_packages: Iterable[str] = ()) -> list[str]:
    pk = list(known_packages)
    return sorted(
        f"{a} ({layer_of(a, pk)}) imports {b} ({layer_of(b, pk)})"
        for a, targets in graph.items()
        for b in targets
        if not allowed(layer_of(a, pk), layer_of(b, pk))
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


def long_modules(limit: int) -> list[str]:
    found = ((p, len(p.read_text(encoding="utf-8").splitlines())) for p in sources())
    return [f"{p.relative_to(ROOT.parent)} ({n})" for p, n in found if n > limit]


def repeated_names(paths: Iterable[Path]) -> list[str]:
    counts = Counter(p.name for p in paths if p.name != "__init__.py")
    return sorted(name for name, n in counts.items() if n > 1)


# --- the checks on proxy/ ---------------------------------------------------------------------


def test_no_layer_imports_a_layer_above_it() -> None:
    assert layer_violations(import_graph(), packages()) == []


def test_every_folder_is_a_layer_or_core() -> None:
    tops = {p.relative_to(ROOT).parts[0] for p in sources() if len(p.relative_to(ROOT).parts) > 1}
    assert sorted(tops - set(RANK) - CORE_FOLDERS) == []


def test_there_is_no_import_circle_between_modules() -> None:
    assert circles(import_graph()) == []


def test_no_module_reads_another_modules_private_names() -> None:
    names = [module_name(p) for p in sources()]
    assert [v for p in sources() for v in private_imports(*_read(p), names)] == []


def test_no_two_modules_share_a_file_name() -> None:
    assert repeated_names(sources()) == []


@pytest.mark.filterwarnings("default::UserWarning")
def test_no_module_passes_the_size_limit() -> None:
    for entry in long_modules(WARN_LINES):
        warnings.warn(f"{entry} lines: past {WARN_LINES}, is it still one concept?", UserWarning, stacklevel=1)
    assert long_modules(MAX_LINES) == []


# --- the checkers themselves catch what they are for ------------------------------------------


def test_the_layers_are_read_from_the_folders() -> None:
    assert layer_of("proxy.store.sqlite.sqlite_database") == "store"
    assert layer_of("proxy.memory.recall.recall") == "memory"
    assert layer_of("proxy.memory.search.embedder.registry") == "memory"
    assert layer_of("proxy.context.planner") == "context"
    assert layer_of("proxy.pipeline", ["proxy.pipeline"]) == "pipeline"
    assert layer_of("proxy.pipeline.memory_pipeline") == "pipeline"
    assert layer_of("proxy.upstream.wire.http11") == "upstream"
    assert layer_of("proxy.server.admin.routes") == "server"
    assert layer_of("proxy.commands.main") == "commands"
    assert layer_of("proxy.tokens") == "core"
    assert layer_of("proxy.config.schema") == "core"
    assert layer_of("proxy") == "core"
    assert layer_of("proxy.__main__") == "commands"
    assert layer_of("proxy.gadgets.thing") == "unknown folder gadgets"
    assert layer_of("proxy.gadgets", ["proxy.gadgets"]) == "unknown folder gadgets"


def test_an_upward_import_is_reported() -> None:
    graph = {
        "proxy.store.sqlite.items": frozenset({"proxy.memory.lifecycle", "proxy.store.records"}),
        "proxy.memory.recall.recall": frozenset({"proxy.pipeline.chat_call", "proxy.tokens", "proxy.store.records"}),
        "proxy.context.planner": frozenset({"proxy.memory.recall.query"}),
        "proxy.pipeline.memory_pipeline": frozenset({"proxy.server.relay", "proxy.memory.recall.recall"}),
        "proxy.upstream.clients": frozenset({"proxy.server.runtime", "proxy.pipeline.pipeline_protocol"}),
        "proxy.tokens": frozenset({"proxy.store.records", "proxy.hashing"}),
        "proxy.store.sqlite.users": frozenset({"proxy.tokens"}),
        "proxy.server.chat": frozenset({"proxy.pipeline.memory_pipeline", "proxy.upstream.clients", "proxy.errors"}),
        "proxy.gadgets.thing": frozenset({"proxy.errors"}),
    }
    assert layer_violations(graph) == [
        "proxy.context.planner (context) imports proxy.memory.recall.query (memory)",
        "proxy.gadgets.thing (unknown folder gadgets) imports proxy.errors (core)",
        "proxy.memory.recall.recall (memory) imports proxy.pipeline.chat_call (pipeline)",
        "proxy.pipeline.memory_pipeline (pipeline) imports proxy.server.relay (server)",
        "proxy.store.sqlite.items (store) imports proxy.memory.lifecycle (memory)",
        "proxy.store.sqlite.users (store) imports proxy.tokens (core)",
        "proxy.tokens (core) imports proxy.store.records (store)",
        "proxy.upstream.clients (upstream) imports proxy.server.runtime (server)",
    ]


def test_a_circle_is_reported_with_its_members() -> None:
    graph = {
        "a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a", "d"}),
        "d": frozenset(), "e": frozenset({"e"}),
    }
    assert circles(graph) == [["a", "b", "c"]]


def test_private_names_taken_from_another_module_are_reported() -> None:
    text = (
        "from ..search.bm25 import tokenize, _private\n"
        "from ..search import fusion\n"
        "from . import cards as c\n"
        "x = fusion._hidden + c._card + c.__name__ + _local + tokenize._attr\n"
        "_local = 1\n"
    )
    names = [module_name(p) for p in sources()]
    probe = "proxy.memory.recall.probe"
    assert private_imports(probe, "proxy.memory.recall", text, names) == [
        f"{probe} imports proxy.memory.search.bm25._private",
        f"{probe} reads c._card",
        f"{probe} reads fusion._hidden",
    ]


def test_a_repeated_file_name_is_reported() -> None:
    paths = [Path("a/guard.py"), Path("b/guard.py"), Path("a/__init__.py"), Path("b/__init__.py"), Path("c/x.py")]
    assert repeated_names(paths) == ["guard.py"]


def test_relative_imports_are_resolved() -> None:
    graph = import_graph()
    assert "proxy.errors" in graph["proxy.server.relay"]  # from ..errors import ...
    assert "proxy.memory.search.bm25" in graph["proxy.server.startup"]  # from ..memory.search import bm25
    assert "proxy.pipeline.memory_layer" in graph["proxy.server.runtime"]  # from ..pipeline.memory_layer import ...
    assert all(m.startswith("proxy") for targets in graph.values() for m in targets)
