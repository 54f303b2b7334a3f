"""No function in the package over 80 lines or with more than 6 parameters without a
reason written beside it (issue 26): a ``# shape: REASON`` comment on the line above
its ``def`` (or its first decorator), or at the end of the ``def`` line's signature."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "benchmatrix"
MAX_LINES = 80
MAX_PARAMS = 6
MARK = "# shape:"


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    names = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
    return len([n for n in names if n not in ("self", "cls")])


def _reason(lines: list[str], fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    first = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
    above = lines[first - 2].strip() if first >= 2 else ""
    header = "\n".join(lines[fn.lineno - 1:fn.body[0].lineno - 1])
    for text in (above, header):
        if MARK in text:
            return text.split(MARK, 1)[1].strip().splitlines()[0]
    return ""


def oversized() -> list[tuple[str, int, str, int, int, str]]:
    """(file, line, function, lines, parameters, reason) of every function over a limit."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size, params = node.end_lineno - node.lineno + 1, _params(node)
                if size > MAX_LINES or params > MAX_PARAMS:
                    out.append((str(path.relative_to(ROOT)), node.lineno, node.name, size, params,
                                _reason(lines, node)))
    return out


def test_every_oversized_function_says_why():
    missing = [f"{f}:{line}: {name} ({size} lines, {params} parameters)"
               for f, line, name, size, params, reason in oversized() if len(reason) < 15]
    assert not missing, (f"functions over {MAX_LINES} lines or {MAX_PARAMS} parameters without a "
                         f"'{MARK} reason' beside them (split them, or say why not):\n" + "\n".join(missing))


def test_the_reason_finder_reads_both_places(tmp_path):
    src = ("# shape: a reason written above the def\n"
           "def f(a, b, c, d, e, f, g):\n    pass\n\n"
           "def g(a, b, c, d, e, f, g):  # shape: a reason at the end of the signature\n    pass\n\n"
           "def h(a, b, c, d, e, f, g):\n    pass\n")
    tree = ast.parse(src)
    lines = src.splitlines()
    got = [_reason(lines, n) for n in tree.body]
    assert got == ["a reason written above the def", "a reason at the end of the signature", ""]
