"""The small, safe expression language of ``bmx rerun --where``.

An expression is parsed with Python's :mod:`ast` and only a whitelist of node types
is accepted: column names, literals (strings, numbers, ``True``/``False``/``None``,
lists or tuples of them), comparisons (``== != < <= > >=``, ``in``, ``not in``) and
``and``/``or``/``not``. Nothing is ever evaluated by Python itself, so attribute
access, calls, subscripts, ``@`` variables and the like are refused with a one-line
error instead of running (``DataFrame.query`` with the python engine ran
``@pd.io.common.os.system(...)``).
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from benchmatrix.errors import BenchmatrixError

Row = Mapping[str, Any]

_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
}
_SYMBOL = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
           ast.In: "in", ast.NotIn: "not in"}


#: Longest expression accepted, in characters: a selection is a line, not a program.
MAX_CHARS = 2000
#: Deepest nesting of the expression tree (``not``, parentheses, ``and``/``or`` inside
#: each other): the checks and the evaluation recurse once per level.
MAX_DEPTH = 50


def _depth(tree: ast.AST) -> int:
    """The nesting depth of ``tree``, measured without recursion (a deep tree is the input to refuse)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            break
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


class WhereError(BenchmatrixError):
    """A ``--where`` expression outside the language, or one that cannot be evaluated."""


def _number(v: Any) -> float | None:
    """``v`` as a number when it is one or a string spelling one (plan values may be text)."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return v
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return None


def _coerce(a: Any, b: Any) -> tuple[Any, Any]:
    """Make a number and a string spelling a number comparable (``read_ahead_kb == 0``)."""
    if isinstance(a, str) != isinstance(b, str):
        na, nb = _number(a), _number(b)
        if na is not None and nb is not None:
            return na, nb
    return a, b


def _equal(a: Any, b: Any) -> bool:
    a, b = _coerce(a, b)
    return a == b


class Where:
    """A parsed ``--where`` expression; call :meth:`matches` on each row.

    Args:
        expr: The expression, e.g. ``"bs == '4k' and status in ['failed', 'timeout']"``.
        columns: The names a row offers; any other name is an error at parse time.

    Raises:
        WhereError: The expression is not valid in the language or names an unknown column.
    """

    def __init__(self, expr: str, columns: Iterable[str]):
        self.expr = expr
        self.columns = sorted(set(columns))
        if len(expr) > MAX_CHARS:
            raise self._error(f"the expression is {len(expr)} characters long, more than the limit of {MAX_CHARS}")
        try:
            tree = ast.parse(expr.strip(), mode="eval")
        except SyntaxError as exc:
            raise self._error(f"syntax error at column {exc.offset or 0}: {exc.msg}") from None
        except ValueError as exc:  # e.g. a NUL byte
            raise self._error(str(exc)) from None
        except (RecursionError, MemoryError):  # Python's own parser gives up on deep nesting
            raise self._error(f"the expression nests deeper than the limit of {MAX_DEPTH} levels") from None
        if _depth(tree.body) > MAX_DEPTH:
            raise self._error(f"the expression nests deeper than the limit of {MAX_DEPTH} levels")
        self._check(tree.body)
        self._tree = tree.body

    def _error(self, msg: str) -> WhereError:
        # A long expression is cut in the message: the error stays one readable line.
        shown = self.expr if len(self.expr) <= 120 else self.expr[:100] + f"... ({len(self.expr)} characters)"
        return WhereError(f"--where {shown!r}: {msg}")

    def _refuse(self, node: ast.AST) -> WhereError:
        text = ast.get_source_segment(self.expr.strip(), node) or type(node).__name__
        text = text if len(text) <= 80 else text[:60] + "..."
        return self._error(f"{text!r} is not allowed: use column names, literals, comparisons "
                           "(== != < <= > >= in, not in) and and/or/not")

    def _check(self, node: ast.AST) -> None:
        """Walk the tree and refuse every node outside the whitelist."""
        if isinstance(node, ast.BoolOp) and isinstance(node.op, (ast.And, ast.Or)):
            for v in node.values:
                self._check(v)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            self._check(node.operand)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            if not (isinstance(node.operand, ast.Constant) and _number(node.operand.value) is not None
                    and not isinstance(node.operand.value, str)):
                raise self._refuse(node)
        elif isinstance(node, ast.Compare):
            for op in node.ops:
                if type(op) not in _SYMBOL:
                    raise self._refuse(node)
            for v in [node.left, *node.comparators]:
                self._check(v)
        elif isinstance(node, ast.Name):
            if node.id not in self.columns:
                raise self._error(f"unknown column {node.id!r}; columns: {', '.join(self.columns)}")
        elif isinstance(node, ast.Constant):
            if not isinstance(node.value, (str, int, float, bool, type(None))):
                raise self._refuse(node)
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            for v in node.elts:
                if not isinstance(v, (ast.Constant, ast.UnaryOp)):
                    raise self._refuse(v)
                self._check(v)
        else:
            raise self._refuse(node)

    def matches(self, row: Row) -> bool:
        """Whether ``row`` (column name -> value) satisfies the expression.

        Raises:
            WhereError: Two values cannot be compared (e.g. ``bs < 4`` with ``bs`` text).
        """
        return bool(self._eval(self._tree, row))

    def _eval(self, node: ast.AST, row: Row) -> Any:
        if isinstance(node, ast.BoolOp):
            if isinstance(node.op, ast.And):
                return all(self._eval(v, row) for v in node.values)
            return any(self._eval(v, row) for v in node.values)
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                return not self._eval(node.operand, row)
            value = self._eval(node.operand, row)
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.Compare):
            left = self._eval(node.left, row)
            for op, comp in zip(node.ops, node.comparators):
                right = self._eval(comp, row)
                if not self._compare(op, left, right, node):
                    return False
                left = right
            return True
        if isinstance(node, ast.Name):
            return row.get(node.id)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return [self._eval(v, row) for v in node.elts]
        raise self._refuse(node)  # unreachable after _check

    def _compare(self, op: ast.cmpop, a: Any, b: Any, node: ast.AST) -> bool:
        if isinstance(op, (ast.In, ast.NotIn)):
            if not isinstance(b, list):
                raise self._error(f"'{_SYMBOL[type(op)]}' needs a list on its right, e.g. bs in ['4k', '64k']")
            found = any(_equal(a, x) for x in b)
            return found if isinstance(op, ast.In) else not found
        if isinstance(op, (ast.Eq, ast.NotEq)):
            return _equal(a, b) == isinstance(op, ast.Eq)
        if a is None or b is None:  # a missing value (no metric) is neither smaller nor larger
            return False
        a, b = _coerce(a, b)
        try:
            return _COMPARE[type(op)](a, b)
        except TypeError:
            text = ast.get_source_segment(self.expr.strip(), node) or ""
            raise self._error(f"cannot compare {a!r} {_SYMBOL[type(op)]} {b!r} in {text!r}") from None
