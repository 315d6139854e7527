"""The import graph of ``roost/`` and ``a2a/`` has no cycle, and imports point down the layers
of docs/architecture.md: edges → services → state → pure.

The graph is built from the modules' own ``import`` / ``from`` statements with :mod:`ast`, every
one of them: at module level, inside functions, and under ``if TYPE_CHECKING:`` (a type-only
import still ties two modules together: neither can be read, moved or tested without the other).
An edge goes to the module named, or to the package itself when a name is taken from its
``__init__``. A cycle is printed file by file, with the line of each import that closes it; an
import against the layers with its file and line.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("roost", "a2a")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    """Every module of the packages, by dotted name."""
    return {_module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def _imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """(imported module, line) for every import statement in the file, wherever it stands."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in known:
                    yield sub, node.lineno
                elif base in known:
                    yield base, node.lineno


def graph() -> dict[str, dict[str, int]]:
    """module -> {imported module: first line importing it}, within the package only."""
    known = modules()
    edges: dict[str, dict[str, int]] = {}
    for name, path in known.items():
        out: dict[str, int] = {}
        for target, line in _imports(name, path, known):
            if target != name:
                out.setdefault(target, line)
        edges[name] = out
    return edges


def cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found, key=lambda c: (-len(c), c))


def _loop_through(component: list[str], edges: dict[str, dict[str, int]]) -> list[str]:
    """One concrete loop inside a component, as ``a.py:LINE -> b`` steps (a breadth-first search
    from the component's first module back to itself)."""
    members = set(component)
    start = component[0]
    came: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(edges[node]):
                if child not in members:
                    continue
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came[path[-1]])
                    path.reverse()
                    path.append(start)
                    return [f"{a} (line {edges[a][b]}) -> {b}" for a, b in itertools.pairwise(path)]
                if child not in came and child != start:
                    came[child] = node
                    nxt.append(child)
        frontier = nxt
    return []


def describe(found: list[list[str]], edges: dict[str, dict[str, int]]) -> str:
    lines = []
    for component in found:
        lines.append(f"a cycle of {len(component)} modules: {', '.join(component)}")
        lines.extend(f"    {step}" for step in _loop_through(component, edges))
    return "\n".join(lines)


def test_the_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The builder itself: module-level, function-level, TYPE_CHECKING and relative imports all count."""
    edges = graph()
    assert edges.get("roost.daemon.compose"), "the daemon imports something"
    known = {"p": tmp_path / "p" / "__init__.py", "p.a": tmp_path / "p" / "a.py", "p.b": tmp_path / "p" / "b.py"}
    (tmp_path / "p").mkdir()
    known["p"].write_text("")
    known["p.a"].write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p.b import X\ndef f():\n    from . import b\n"
    )
    known["p.b"].write_text("from .a import f\n")
    got_a = {t for t, _ in _imports("p.a", known["p.a"], known)}
    got_b = {t for t, _ in _imports("p.b", known["p.b"], known)}
    assert got_a == {"p.b"} and got_b == {"p.a"}
    tiny = {"p.a": {"p.b": 3}, "p.b": {"p.a": 1}, "p": {}}
    assert cycles(tiny) == [["p.a", "p.b"]]
    assert "p.a (line 3) -> p.b" in describe(cycles(tiny), tiny)


def test_roost_and_a2a_have_no_import_cycle() -> None:
    edges = graph()
    assert any(m.startswith("a2a.") for m in edges) and any(
        t.startswith("a2a.") for t in edges["roost.services.completionfile"]
    )
    found = cycles(edges)
    assert not found, "\n" + describe(found, edges)


# -- layers ----------------------------------------------------------------------------------
# docs/architecture.md draws four layers, and the folders are the layers: a module's layer is the
# first folder below its package. An import may point sideways or down, never up.

FOLDER_LAYERS: dict[str, dict[str, str]] = {
    "roost": {
        "core": "pure",
        "state": "state",
        "observe": "state",
        "system": "state",
        "services": "services",
        "backends": "services",
    },
    "a2a": {"protocol": "pure"},
}
# A module in none of those folders: the daemon's and the programs' edges (roost/http, admin,
# dashboard, capsule, ctl, daemon, cli), and a2a's client and door.
OTHERWISE = {"roost": "edges", "a2a": "services"}
RANK = {"pure": 0, "state": 1, "services": 2, "edges": 3}
# What a pure module never imports: it decides from values, it does no I/O.
IO_LIBRARIES = frozenset(
    {"aiohttp", "psutil", "ray", "shutil", "socket", "sqlite3", "structlog", "subprocess", "urllib"}
)


def layer_of(module: str) -> str:
    package, _, rest = module.partition(".")
    if not rest:
        return "pure"  # a package's face: roost/__init__.py, a2a/__init__.py
    folder = rest.split(".")[0]
    return FOLDER_LAYERS[package].get(folder, OTHERWISE[package])


def test_every_layer_folder_holds_modules() -> None:
    known = modules()
    for package, folders in FOLDER_LAYERS.items():
        for folder in folders:
            assert any(m.startswith(f"{package}.{folder}.") for m in known), f"{package}/{folder}/ holds no module"
    assert layer_of("roost.core.tokens") == "pure" and layer_of("roost.state.repos.jobs") == "state"
    assert layer_of("roost.observe.events") == "state" and layer_of("roost.system.blocking") == "state"
    assert (
        layer_of("roost.services.referee.service") == "services"
        and layer_of("roost.backends.ray.node.keeper") == "services"
    )
    assert layer_of("roost.http.job_routes") == "edges" and layer_of("roost.daemon.compose") == "edges"
    assert layer_of("a2a.protocol.models") == "pure" and layer_of("a2a.door") == "services"
    assert layer_of("roost") == "pure" and layer_of("a2a") == "pure"


def test_imports_point_down_the_layers() -> None:
    edges = graph()
    known = modules()
    upward = [
        f"{known[a].relative_to(ROOT)}:{line} ({layer_of(a)}) imports {b} ({layer_of(b)})"
        for a, targets in sorted(edges.items())
        for b, line in sorted(targets.items())
        if RANK[layer_of(b)] > RANK[layer_of(a)]
    ]
    assert not upward, "\n" + "\n".join(upward)


def _external_imports(path: Path) -> Iterator[tuple[str, int]]:
    """(top-level name, line) of every absolute import of something outside the packages."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top not in PACKAGES:
                yield top, node.lineno


@pytest.mark.parametrize("module", sorted(m for m in modules() if layer_of(m) == "pure"))
def test_a_pure_module_imports_no_io_library(module: str) -> None:
    path = modules()[module]
    found = [f"{path.relative_to(ROOT)}:{line} imports {name}" for name, line in _external_imports(path)]
    assert not [f for f in found if f.rsplit(" ", 1)[1] in IO_LIBRARIES], "\n" + "\n".join(found)
