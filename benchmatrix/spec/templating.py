"""Bounded, sandboxed Jinja2 for workload variables, fio job files and pgbench scripts.

Workload variables come from the spec, i.e. from whoever wrote it. Jinja's sandbox
keeps a template away from Python internals, but not from time and memory: one
expression like ``{{ "x" * 10**10 }}`` allocates 10 GB, a nested loop can run for
hours. This environment closes the ways a short template can grow without bound:

- ``*``, ``+``, ``%`` and ``**`` check the size of their result before computing it;
- ``~`` (concatenation) and the filters that can multiply their input (``center``,
  ``indent``, ``format``, ``replace``, ``join``, ``sum``, ``batch``, ``slice``) are
  bounded the same way;
- string methods that pad or reformat (``ljust``, ``zfill``, ``format``, ...) are
  not callable; ``lipsum`` and ``namespace`` (which lets loops accumulate) are gone;
- every ``for`` loop draws from one iteration budget per render, and a render that
  takes more than :data:`MAX_SECONDS` of CPU time stops at its next loop step,
  operator or filter;
- macros, ``call`` blocks, block assignments, ``filter`` blocks, recursive loops and
  ``include``/``import``/``extends`` are refused when the template is parsed;
- the rendered text itself is limited to :data:`MAX_SIZE` characters.

Any violation raises :class:`jinja2.sandbox.SecurityError` (a template error), which
callers report as a one-line error naming the variable and the cell.
"""

from __future__ import annotations

import contextvars
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache
from typing import Any

import jinja2
import jinja2.filters
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

#: Most characters (or items) of any value a template builds, and of its output.
MAX_SIZE = 1024 * 1024
#: Most loop iterations of one render, all loops together.
MAX_ITERATIONS = 100_000
#: Most CPU seconds one render may take (checked at loop steps, operators and filters).
MAX_SECONDS = 1.0
#: Largest integer a template may compute with ``**`` (in bits).
MAX_INT_BITS = 4096

# str methods a template may call: none of them can grow a string beyond its input.
_SAFE_STR_METHODS = frozenset({
    "capitalize", "casefold", "count", "endswith", "find", "index", "isalnum", "isalpha",
    "isdecimal", "isdigit", "islower", "isnumeric", "isspace", "istitle", "isupper", "lower",
    "lstrip", "partition", "removeprefix", "removesuffix", "rfind", "rindex", "rpartition",
    "rsplit", "rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title", "upper",
})
class _Budget:
    """What one render may still spend: loop iterations and CPU time."""

    def __init__(self) -> None:
        self.iterations = MAX_ITERATIONS
        self.deadline = time.thread_time() + MAX_SECONDS

    def check_time(self) -> None:
        if time.thread_time() > self.deadline:
            raise SecurityError(f"the template takes more than {MAX_SECONDS:g} s of CPU time to render")


_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("bmx_jinja_budget", default=None)


def _budget() -> _Budget:
    # Outside render() (compile-time constant folding) a fresh budget applies.
    return _BUDGET.get() or _Budget()


def _too_big(what: str, size: float) -> SecurityError:
    return SecurityError(f"{what} would be {size:.0f} characters or items long, more than the limit of {MAX_SIZE}")


def _size(value: Any) -> int:
    return len(value) if isinstance(value, (str, list, tuple)) else 0


def _check_int(value: Any, what: str) -> None:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SIZE:
        raise _too_big(what, abs(value))


def _bounded_iter(iterable: Any) -> Iterator[Any]:
    budget = _budget()
    for item in iterable:
        budget.iterations -= 1
        if budget.iterations < 0:
            raise SecurityError(f"the template's loops run more than {MAX_ITERATIONS} iterations")
        if budget.iterations % 256 == 0:
            budget.check_time()
        yield item


def _bounded_concat(items: Iterable[Any]) -> str:
    parts, total = [], 0
    for item in items:
        text = str(item)
        total += len(text)
        if total > MAX_SIZE:
            raise _too_big("a concatenation (~)", total)
        parts.append(text)
    return "".join(parts)


def _filter_join(eval_ctx: Any, value: Iterable[Any], d: str = "", attribute: Any = None) -> str:
    items = list(value)
    if attribute is not None:  # through the sandbox's getattr, as the built-in filter does
        getter = jinja2.filters.make_attrgetter(eval_ctx.environment, attribute)
        items = [getter(v) for v in items]
    total = sum(len(str(v)) for v in items) + len(str(d)) * max(len(items) - 1, 0)
    if total > MAX_SIZE:
        raise _too_big("join", total)
    return jinja2.filters.do_join(eval_ctx, items, d)


def _filter_replace(eval_ctx: Any, s: Any, old: Any, new: Any, count: Any = None) -> str:
    text, old, new = str(s), str(old), str(new)
    hits = text.count(old) if count is None or count < 0 else min(text.count(old), count)
    size = len(text) + hits * (len(new) - len(old))
    if size > MAX_SIZE:
        raise _too_big("replace", size)
    return jinja2.filters.do_replace(eval_ctx, text, old, new, count)


def _filter_sum(environment: Any, iterable: Iterable[Any], attribute: Any = None, start: Any = 0) -> Any:
    items = list(iterable)
    if isinstance(start, (list, tuple, str)):
        size = _size(start) + sum(_size(v) for v in items)
        if size > MAX_SIZE:
            raise _too_big("sum", size)
    return jinja2.filters.sync_do_sum(environment, items, attribute, start)


def _timed(original: Any) -> Any:
    """``original`` (a filter) checking the render's CPU deadline before it runs."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _budget().check_time()
        return original(*args, **kwargs)

    wrapper.jinja_pass_arg = getattr(original, "jinja_pass_arg", None)  # type: ignore[attr-defined]
    return wrapper


def _bounded_filter(name: str, *checked: int) -> Any:
    """The built-in filter ``name`` with its positional arguments ``checked`` bounded."""
    original = jinja2.filters.FILTERS[name]

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # args[0] may be the environment/eval context for pass_* filters; indexes
        # in ``checked`` are counted from the filtered value.
        offset = 1 if getattr(original, "jinja_pass_arg", None) else 0
        for i in checked:
            if len(args) > offset + i:
                _check_int(args[offset + i], f"the {name} filter's result")
        for value in kwargs.values():
            _check_int(value, f"the {name} filter's result")
        if name == "format":
            text = args[offset] if len(args) > offset else ""
            if isinstance(text, str) and _format_too_wide(text):
                raise SecurityError(f"the format filter's width or precision exceeds {MAX_SIZE}")
            for value in args[offset + 1:]:
                _check_int(value, "the format filter's result")
        return original(*args, **kwargs)

    wrapper.jinja_pass_arg = getattr(original, "jinja_pass_arg", None)  # type: ignore[attr-defined]
    return wrapper


def _format_too_wide(fmt: str) -> bool:
    """True when a %-format asks for a width or precision over :data:`MAX_SIZE` (or ``*``)."""
    for spec in re.findall(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?", fmt):
        for part in spec:
            if part == "*" or (part.isdigit() and int(part) > MAX_SIZE):
                return True
    return False


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """An immutable Jinja sandbox whose templates cannot exhaust time or memory (see module doc)."""

    intercepted_binops = frozenset({"*", "+", "%", "**"})

    def __init__(self, **options: Any):
        super().__init__(undefined=jinja2.StrictUndefined, autoescape=False, **options)
        for name in ("lipsum", "namespace"):
            self.globals.pop(name, None)
        self.filters["join"] = jinja2.pass_eval_context(_filter_join)
        self.filters["replace"] = jinja2.pass_eval_context(_filter_replace)
        self.filters["sum"] = jinja2.pass_environment(_filter_sum)
        self.filters["center"] = _bounded_filter("center", 1)
        self.filters["indent"] = _bounded_filter("indent", 1)
        self.filters["batch"] = _bounded_filter("batch", 1)
        self.filters["slice"] = _bounded_filter("slice", 1)
        self.filters["format"] = _bounded_filter("format")
        self.filters["bmx_concat"] = _bounded_concat
        self.filters = {name: _timed(f) for name, f in self.filters.items()}
        self.filters["bmx_iter"] = _bounded_iter  # a generator: checks the deadline as it goes

    def is_safe_callable(self, obj: Any) -> bool:
        target = getattr(obj, "__wrapped__", obj)  # the sandbox wraps str.format
        if isinstance(getattr(target, "__self__", None), str) and target.__name__ not in _SAFE_STR_METHODS:
            return False
        return super().is_safe_callable(obj)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 (as Jinja's)
        _budget().check_time()
        return super().call(__context, __obj, *args, **kwargs)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _budget().check_time()
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(times, int):
                    if len(seq) * times > MAX_SIZE:
                        raise _too_big("a repetition (*)", len(seq) * times)
        elif operator == "+":
            if _size(left) + _size(right) > MAX_SIZE:
                raise _too_big("a concatenation (+)", _size(left) + _size(right))
        elif operator == "%":
            if isinstance(left, str) and _format_too_wide(left):
                raise SecurityError(f"a %-format's width or precision exceeds {MAX_SIZE}")
        elif operator == "**":
            if isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
                if right * math.log2(abs(left)) > MAX_INT_BITS:
                    raise SecurityError(f"{left} ** {right} has more than {MAX_INT_BITS} bits")
        return super().call_binop(context, operator, left, right)

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        tree = super()._parse(source, name, filename)
        _bound_tree(tree)
        return tree


def _bound_tree(tree: nodes.Node) -> None:
    """Refuse unbounded constructs and route loops and ``~`` through the bounded filters."""
    # Block set and filter blocks collect their whole body in memory before any bound
    # can see it; the rest recurse or load other templates.
    refused = {nodes.Macro: "macros", nodes.CallBlock: "call blocks", nodes.Include: "include",
               nodes.Import: "import", nodes.FromImport: "import", nodes.Extends: "extends",
               nodes.AssignBlock: "block assignments ({% set %}...{% endset %})",
               nodes.FilterBlock: "filter blocks"}
    for kind, what in refused.items():
        for node in tree.find_all(kind):
            raise jinja2.TemplateSyntaxError(f"{what} are not allowed in workload variables", node.lineno)
    for loop in tree.find_all(nodes.For):
        if loop.recursive:
            raise jinja2.TemplateSyntaxError("recursive loops are not allowed in workload variables", loop.lineno)
        loop.iter = nodes.Filter(loop.iter, "bmx_iter", [], [], None, None, lineno=loop.lineno)
    for parent in [tree, *tree.find_all(nodes.Node)]:
        for field, value in parent.iter_fields():
            if isinstance(value, nodes.Concat):
                setattr(parent, field, _as_bounded_concat(value))
            elif isinstance(value, list):
                value[:] = [_as_bounded_concat(v) if isinstance(v, nodes.Concat) else v for v in value]


def _as_bounded_concat(node: nodes.Concat) -> nodes.Filter:
    return nodes.Filter(nodes.List(node.nodes, lineno=node.lineno), "bmx_concat", [], [], None, None,
                        lineno=node.lineno)


#: The environment every workload variable is rendered in.
ENV = BoundedSandbox(keep_trailing_newline=True)


@lru_cache(maxsize=8)
def _environment(finalize: Callable[[Any], Any] | None) -> BoundedSandbox:
    return ENV if finalize is None else BoundedSandbox(keep_trailing_newline=True, finalize=finalize)


@lru_cache(maxsize=4096)
def compile_template(source: str, finalize: Callable[[Any], Any] | None = None) -> jinja2.Template:
    """The compiled template of ``source`` (cached: a campaign renders one text per cell)."""
    return _environment(finalize).from_string(source)


def render(source: str, context: dict[str, Any], finalize: Callable[[Any], Any] | None = None) -> str:
    """Render ``source`` with ``context`` inside the bounds of :class:`BoundedSandbox`.

    Args:
        source: The template text.
        context: The names the template may use.
        finalize: Called on every value an expression prints (Jinja's ``finalize``),
            e.g. to refuse line breaks in a job file's values; it may raise.

    Raises:
        jinja2.TemplateError: a syntax error, an undefined variable, or a bound
            exceeded (:class:`jinja2.sandbox.SecurityError`).
    """
    template = compile_template(source, finalize)
    budget = _Budget()
    token = _BUDGET.set(budget)
    try:
        parts, total = [], 0
        for chunk in template.generate(context):
            budget.check_time()
            total += len(chunk)
            if total > MAX_SIZE:
                raise _too_big("the rendered text", total)
            parts.append(chunk)
        return "".join(parts)
    finally:
        _BUDGET.reset(token)
