"""The stages form a stack: every import goes down it (issue 26), and no module import
circle hides within a stage (issue 14).

    cli > execute > campaigns > report > analyze > results > plan > workloads > spec > leaves

A module may import its own package, any stage below its own and the leaves; the leaves
(errors, names, layout, files, the package's __init__, and host/, which is copied to hosts)
import nothing from benchmatrix but other leaves. Every import counts: at the top of a
module or inside a function, absolute or relative. Found from the source with ast, so the
check needs no import of the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "benchmatrix"

# Top first (cli.py is the top stage); a module of benchmatrix/ that is in no stage must be a leaf.
STACK = ("cli", "execute", "campaigns", "report", "analyze", "results", "plan", "workloads", "spec")
LEAVES = ("__init__", "errors", "names", "layout", "files", "host")


def _module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str:
    """The stage or leaf a module belongs to: `benchmatrix.results.status` -> `results`,
    `benchmatrix` -> `__init__`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports(package: Path = PACKAGE) -> list[tuple[Path, int, str, str]]:
    """(file, line, importing module, imported module) for every import of the package by the package."""
    root = package.name
    modules = {_module_name(p, package): p for p in package.rglob("*.py")}
    found = []
    for name, path in sorted(modules.items()):
        package_of = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package_of.split(".")
                    anchor = anchor[:len(anchor) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                # `from pkg import mod` imports the module pkg.mod; `from mod import name` imports mod.
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                if target == root or target.startswith(root + "."):
                    found.append((path, node.lineno, name, target))
    return found


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package modules it imports anywhere in its body."""
    graph: dict[str, set[str]] = {_module_name(p, package): set() for p in package.rglob("*.py")}
    for _, _, importer, target in imports(package):
        if target in graph and target != importer:
            graph[importer].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def violations(package: Path = PACKAGE, stack=STACK, leaves=LEAVES) -> list[str]:
    """One line per import that goes up the stack or sideways out of a leaf: FILE:LINE: a imports b."""
    rank = {stage: i for i, stage in enumerate(stack)}
    bad = []
    for path, line, importer, target in imports(package):
        src, dst = layer_of(importer), layer_of(target)
        if src == dst:
            continue
        if src not in rank and src not in leaves:
            ok = False  # a module that is neither a stage nor a leaf: name it in STACK or LEAVES
        elif src in leaves:
            ok = dst in leaves
        else:
            ok = dst in leaves or (dst in rank and rank[dst] > rank[src])
        if not ok:
            where = path.relative_to(package.parent)
            bad.append(f"{where}:{line}: {importer} ({src}) imports {target} ({dst}), which is not below it")
    return bad


def test_every_import_goes_down_the_stack():
    bad = violations()
    assert not bad, "imports against the stack " + " > ".join(STACK) + " > leaves:\n" + "\n".join(bad)


def test_every_module_is_in_a_stage_or_a_leaf():
    layers = {layer_of(_module_name(p, PACKAGE)) for p in PACKAGE.rglob("*.py")}
    assert layers <= set(STACK) | set(LEAVES), layers - set(STACK) - set(LEAVES)


def test_an_upward_import_inside_a_function_is_named(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "low").mkdir(parents=True)
    (pkg / "high").mkdir()
    for d in (pkg, pkg / "low", pkg / "high"):
        (d / "__init__.py").write_text("")
    (pkg / "errors.py").write_text("")
    (pkg / "high" / "a.py").write_text("from pkg.low.b import g\nfrom ..errors import E\n")
    (pkg / "low" / "b.py").write_text("def g():\n    from ..high import a\n    return a\n")
    (pkg / "errors.py").write_text("def f():\n    import pkg.low.b\n")
    assert violations(pkg, stack=("high", "low"), leaves=("__init__", "errors")) == [
        "pkg/errors.py:2: pkg.errors (errors) imports pkg.low.b (low), which is not below it",
        "pkg/low/b.py:2: pkg.low.b (low) imports pkg.high.a (high), which is not below it",
    ]


def test_the_package_has_no_import_cycle():
    assert cycles(import_graph()) == []


def test_a_function_level_import_cycle_is_found(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import g\n\ndef f():\n    return g()\n")
    (pkg / "b.py").write_text("def g():\n    from pkg import a\n    return a\n")
    (pkg / "c.py").write_text("from . import a\n")
    assert cycles(import_graph(pkg)) == [["pkg.a", "pkg.b"]]
