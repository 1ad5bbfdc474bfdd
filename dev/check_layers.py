"""The layer rule for ``daemon/``: no lower layer imports a higher one, and no import cycles.

Run by ``make lint``. Every ``import`` counts — at module level, inside a function, or under
``if TYPE_CHECKING:`` — because each is an edge a reader has to follow and a place a cycle can
start. Layers, bottom to top (``|`` separates independent siblings, which must not import
each other either)::

    base        daemon (the package's own __init__: the version), daemon.structs,
                daemon.errors, daemon.logs, daemon.javacheck, daemon.kafkacheck,
                daemon.sparkcheck, daemon.sparklines, daemon.tlsstores, daemon.tlsprotocols
    kafka       daemon.kafka (every use of aiokafka's private state; imports no config)
    config      daemon.config
    storage | executor
    cluster
    connectors
    runtime
    metrics
    rest | systemd
    daemon      daemon.daemon, daemon.assembly, daemon.signals
    cli         daemon.cli, daemon.__main__

A module may import its own layer and any layer below it. Within a layer, imports must still form
no cycle. A package's ``__init__`` is an ordinary module here: importing ``daemon.a.b`` is an
edge to ``daemon.a.b`` only (the implicit import of ``daemon.a`` is not counted, as in
import-linter), so a package may re-export its modules.

Exit status 0 when the rule holds; 1 with one line per violation otherwise.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

#: Bottom to top. Each layer is a tuple of independent siblings; each sibling a tuple of module
#: prefixes (a prefix matches the module itself and everything below it; ``=name`` matches
#: ``name`` alone).
LAYERS: tuple[tuple[tuple[str, ...], ...], ...] = (
    (
        (
            "=daemon",
            "daemon.structs",
            "daemon.errors",
            "daemon.logs",
            "daemon.javacheck",
            "daemon.kafkacheck",
            "daemon.sparkcheck",
            "daemon.sparklines",
            "daemon.tlsstores",
            "daemon.tlsprotocols",
        ),
    ),
    (("daemon.kafka",),),
    (("daemon.config",),),
    (("daemon.storage",), ("daemon.executor",)),
    (("daemon.cluster",),),
    (("daemon.connectors",),),
    (("daemon.runtime",),),
    (("daemon.metrics",),),
    (("daemon.rest",), ("daemon.systemd",)),
    (("daemon.daemon", "daemon.assembly", "daemon.signals"),),
    (("daemon.cli", "daemon.__main__"),),
)


@dataclass(frozen=True)
class Edge:
    """``importer`` imports ``imported``, at ``line`` of ``path``."""

    importer: str
    imported: str
    path: str
    line: int


def module_name(root: Path, path: Path) -> str:
    """``daemon/a/b.py`` → ``daemon.a.b``; ``daemon/a/__init__.py`` → ``daemon.a``."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def collect_modules(root: Path) -> dict[str, Path]:
    """Every module of the package at ``root``, by dotted name."""
    return {module_name(root, p): p for p in sorted(root.rglob("*.py"))}


def _resolve(name: str, modules: Mapping[str, Path]) -> str | None:
    """The longest known module that ``name`` is or lies in (``a.b.Class`` → ``a.b``)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _dynamic_import(node: ast.AST) -> str | None:
    """The module a call ``import_module("...")`` or ``__import__("...")`` names literally."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    first = node.args[0]
    if called in ("import_module", "__import__") and isinstance(first, ast.Constant):
        return first.value if isinstance(first.value, str) else None
    return None


def imports_of(
    name: str, path: Path, source: str, modules: Mapping[str, Path], package: str
) -> list[Edge]:
    """The edges from module ``name`` to the other modules of ``package``, anywhere in it."""
    tree = ast.parse(source, filename=str(path))
    is_package = path.name == "__init__.py"
    edges: list[Edge] = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                # A module's level-1 anchor is its package; a package's is itself.
                drop = node.level - (1 if is_package else 0)
                anchor = anchor[: len(anchor) - drop] if drop else anchor
                base = ".".join([*anchor, base] if base else anchor)
            # `from a import b` imports a.b when b is a module, else a name in a.
            targets = [f"{base}.{alias.name}" for alias in node.names] or [base]
        elif _dynamic_import(node) is not None:
            # importlib.import_module("daemon.x") / __import__("daemon.x") with a literal name.
            targets = [str(_dynamic_import(node))]
        else:
            continue
        for target in targets:
            if target != package and not target.startswith(package + "."):
                continue
            resolved = _resolve(target, modules)
            if resolved is not None and resolved != name:
                edges.append(Edge(name, resolved, str(path), node.lineno))
    return edges


def import_graph(root: Path) -> list[Edge]:
    """All intra-package import edges of the package at ``root``."""
    modules = collect_modules(root)
    edges: dict[Edge, None] = {}  # one per import line, in order (`from a import b, c` is one)
    for name, path in modules.items():
        rel = path.relative_to(root.parent)
        edges.update(dict.fromkeys(imports_of(name, rel, path.read_text(), modules, root.name)))
    return list(edges)


def _prefix_match(module: str, prefix: str) -> bool:
    if prefix.startswith("="):
        return module == prefix[1:]
    return module == prefix or module.startswith(prefix + ".")


def layer_of(
    module: str, layers: Sequence[Sequence[Sequence[str]]] = LAYERS
) -> tuple[int, int] | None:
    """(layer index, sibling index) of ``module``; the longest matching prefix wins."""
    best: tuple[int, int, int] | None = None
    for li, siblings in enumerate(layers):
        for si, prefixes in enumerate(siblings):
            for prefix in prefixes:
                if _prefix_match(module, prefix) and (best is None or len(prefix) > best[2]):
                    best = (li, si, len(prefix))
    return None if best is None else (best[0], best[1])


def layer_violations(
    edges: Iterable[Edge], layers: Sequence[Sequence[Sequence[str]]] = LAYERS
) -> list[str]:
    """One message per edge that goes up a layer or across siblings, or leaves the table."""
    problems: list[str] = []
    for e in edges:
        src, dst = layer_of(e.importer, layers), layer_of(e.imported, layers)
        where = f"{e.path}:{e.line}"
        if src is None or dst is None:
            missing = e.importer if src is None else e.imported
            problems.append(f"{where}: {missing} is in no layer (add it to LAYERS)")
        elif dst[0] > src[0]:
            problems.append(f"{where}: {e.importer} imports {e.imported}, a higher layer")
        elif dst[0] == src[0] and dst[1] != src[1]:
            problems.append(f"{where}: {e.importer} imports {e.imported}, an independent sibling")
    return problems


def find_cycles(edges: Iterable[Edge]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.importer, set()).add(e.imported)
        graph.setdefault(e.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0

    def visit(root: str) -> None:
        # Iterative, so a deep graph cannot hit the recursion limit.
        nonlocal counter
        work: list[tuple[str, Iterable[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def cycle_violations(edges: Sequence[Edge]) -> list[str]:
    """One message per cycle, naming the edges inside it so the reader knows where to cut."""
    problems: list[str] = []
    for component in find_cycles(edges):
        members = set(component)
        inside = sorted(
            f"{e.importer} -> {e.imported} ({e.path}:{e.line})"
            for e in edges
            if e.importer in members and e.imported in members
        )
        problems.append("import cycle among " + ", ".join(component) + ": " + "; ".join(inside))
    return problems


def check(root: Path) -> list[str]:
    """Every violation of the layer rule in the package at ``root``."""
    edges = import_graph(root)
    return layer_violations(edges) + cycle_violations(edges)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    root = Path(args[0] if args else Path(__file__).resolve().parent.parent / "daemon")
    problems = check(root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} layer rule violation(s); the layers are in {__file__}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
