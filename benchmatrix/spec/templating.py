"""Bounded, sandboxed Jinja2 for workload variables, fio job files and pgbench scripts.

Workload variables come from the spec, i.e. from whoever wrote it. Jinja's sandbox
keeps a template away from Python internals, but not from time and memory: one
expression like ``{{ "x" * 10**10 }}`` allocates 10 GB, ``{{ [[1] * 10**6] * 10**6 }}``
is a small list whose text is 10**12 characters, a nested loop can run for hours.
This environment bounds every value *before* it is built, so that a render's memory
and time stay bounded while it runs, not only its output once it exists:

- every value a template builds (by an operator, a filter, a method call or a list,
  tuple or dict display) is measured by the text it would print as
  (:func:`printed_size`, shared sub-lists counted as often as they print): at most
  :data:`MAX_SIZE` characters each, and at most :data:`MAX_ALLOCATED` for all the
  values of one render together (about 64 MB);
- ``*``, ``+``, ``%`` and ``**``, ``~`` and the filters that can multiply their input
  (``center``, ``indent``, ``wordwrap``, ``format``, ``replace``, ``join``, ``sum``,
  ``batch``, ``slice``) check the size of their result from their operands before
  computing it; ``*`` of two integers is bounded like ``**`` (:data:`MAX_INT_BITS`);
- filters that are slow per character (``wordwrap``, ``urlize``, ``pprint``) take at
  most :data:`SLOW_FILTER_SIZE` characters;
- a printed value is measured before it is turned into text;
- string methods that pad or reformat (``ljust``, ``zfill``, ``format``, ...) are
  not callable; ``lipsum`` and ``namespace`` (which lets loops accumulate) are gone;
- every ``for`` loop draws from one iteration budget per render, and a render that
  takes more than :data:`MAX_SECONDS` of CPU time stops at its next loop step,
  operator, filter or call (each of which is bounded by the sizes above);
- macros, ``call`` blocks, block assignments, ``filter`` blocks, recursive loops and
  ``include``/``import``/``extends`` are refused when the template is parsed, and so
  are brackets and blocks nested deeper than :data:`MAX_NESTING`, expressions of
  more than :data:`MAX_OPERATORS` operators (Jinja's parser and compiler recurse on
  them: 500 nested brackets or 3000 chained filters ended in a RecursionError) and
  templates of more than :data:`MAX_TOKENS` tokens (compiling takes time too);
- the rendered text itself is limited to :data:`MAX_SIZE` characters.

Any violation raises :class:`jinja2.sandbox.SecurityError` or
:class:`jinja2.TemplateSyntaxError` (template errors) naming the template's line,
which callers report as a one-line error naming the variable and the cell.
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
#: Largest integer a template may compute with ``**`` or ``*`` (in bits).
MAX_INT_BITS = 4096
#: Most characters (and items) all the values one render builds may add up to: about
#: 64 MB even for text of 4-byte characters. Charged as values are built, never refunded.
MAX_ALLOCATED = 16 * MAX_SIZE
#: Largest input of the filters that are slow per character (``wordwrap``, ``urlize``, ``pprint``).
SLOW_FILTER_SIZE = MAX_SIZE // 8
#: Deepest nesting of brackets and of blocks (``if``, ``for``, ...) in a template.
MAX_NESTING = 20
#: Most operators (``|``, ``.``, ``+``, ``not``, ``and``, comparisons, ...) in one ``{{ }}`` or ``{% %}``.
MAX_OPERATORS = 64
#: Most tokens (names, literals, operators, text between tags) of one template: Jinja
#: compiles about 25000 a second, and compiling is not bounded by :data:`MAX_SECONDS`.
MAX_TOKENS = 10_000

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
        self.allocated = MAX_ALLOCATED

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
    return printed_size(value) if isinstance(value, (str, list, tuple, dict, set, frozenset)) else 0


def printed_size(value: Any, limit: int = MAX_SIZE) -> int:
    """About how many characters ``str(value)`` has; any number over ``limit`` once it is.

    A list repeated inside another (``[[1] * 1000] * 1000``) costs little memory but
    prints every time it occurs, so it is counted every time; the walk stops as soon
    as ``limit`` is passed, so it costs at most about ``limit`` steps whatever the value.
    Strings count their length, numbers their digits, containers their brackets and
    separators; any other object the length of a short repr.
    """
    if isinstance(value, str):
        return len(value)  # printed as is; inside a container it gets quotes (below)
    total = 0
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            total += len(v) + 2
        elif isinstance(v, bool) or v is None:
            total += 5
        elif isinstance(v, int):
            total += v.bit_length() * 3 // 10 + 2
        elif isinstance(v, float):
            total += 24
        elif isinstance(v, (list, tuple, set, frozenset)):
            total += 2 + 2 * len(v)
            if total > limit:
                return total
            stack.extend(v)
        elif isinstance(v, dict):
            total += 2 + 4 * len(v)
            if total > limit:
                return total
            stack.extend(v.keys())
            stack.extend(v.values())
        else:
            total += 64
        if total > limit:
            return total
    return total


def _charge(value: Any, what: str) -> Any:
    """``value``, once it is within :data:`MAX_SIZE` and the render's :data:`MAX_ALLOCATED`."""
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    budget = _budget()
    budget.check_time()
    size = printed_size(value)
    if size > MAX_SIZE:
        raise _too_big(what, size)
    budget.allocated -= size
    if budget.allocated < 0:
        raise SecurityError(f"the template builds more than {MAX_ALLOCATED} characters or items of values in all")
    return value


def _check_int(value: Any, what: str) -> None:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SIZE:
        raise _too_big(what, abs(value))


def _bounded_iter(iterable: Any) -> Iterator[Any]:
    budget = _budget()
    for item in iterable:
        budget.iterations -= 1
        if budget.iterations < 0:
            raise SecurityError(f"the template's loops run more than {MAX_ITERATIONS} iterations")
        budget.check_time()  # every step: one step may compare or print a value of MAX_SIZE
        yield item


def _charged_iter(iterable: Iterator[Any], what: str) -> Iterator[Any]:
    """The items of a lazy filter result (``batch``, ``map``, ...), each charged as it comes."""
    for item in iterable:
        _budget().check_time()
        yield _charge(item, what)


def _bounded_concat(items: Iterable[Any]) -> str:
    parts, total = [], 0
    for item in items:
        if not isinstance(item, str) and printed_size(item) > MAX_SIZE - total:
            raise _too_big("a concatenation (~)", total + printed_size(item))
        text = str(item)
        total += len(text)
        if total > MAX_SIZE:
            raise _too_big("a concatenation (~)", total)
        parts.append(text)
    return _charge("".join(parts), "a concatenation (~)")


def _filter_join(eval_ctx: Any, value: Iterable[Any], d: str = "", attribute: Any = None) -> str:
    items = list(value)
    if attribute is not None:  # through the sandbox's getattr, as the built-in filter does
        getter = jinja2.filters.make_attrgetter(eval_ctx.environment, attribute)
        items = [getter(v) for v in items]
    total = len(str(d)) * max(len(items) - 1, 0)
    for v in items:  # measured before str(): an item may print as a huge text
        total += len(v) if isinstance(v, str) else printed_size(v, MAX_SIZE - total)
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


def _guarded(name: str, original: Any) -> Any:
    """The filter ``original`` checking the render's CPU deadline before it runs and
    charging what it returns (a lazy result item by item)."""
    offset = 1 if getattr(original, "jinja_pass_arg", None) else 0

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _budget().check_time()
        value = args[offset] if len(args) > offset else None
        if name in _SLOW_FILTERS and printed_size(value, SLOW_FILTER_SIZE) > SLOW_FILTER_SIZE:
            raise SecurityError(f"the {name} filter takes at most {SLOW_FILTER_SIZE} characters")
        result = original(*args, **kwargs)
        if result is value:
            return result
        if isinstance(result, Iterator):
            return _charged_iter(result, f"an item of the {name} filter's result")
        return _charge(result, f"the {name} filter's result")

    wrapper.jinja_pass_arg = getattr(original, "jinja_pass_arg", None)  # type: ignore[attr-defined]
    return wrapper


_SLOW_FILTERS = frozenset({"wordwrap", "urlize", "pprint"})


def _filter_indent(s: Any, width: Any = 4, first: bool = False, blank: bool = False) -> str:
    text = str(s)
    pad = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
    size = len(text) + (text.count("\n") + 1) * max(pad, 0)
    if size > MAX_SIZE:
        raise _too_big("indent", size)
    return jinja2.filters.do_indent(text, width, first, blank)


def _filter_wordwrap(environment: Any, s: Any, width: int = 79, break_long_words: bool = True,
                     wrapstring: str | None = None, break_on_hyphens: bool = True) -> str:
    text = str(s)
    sep = len(wrapstring if wrapstring is not None else environment.newline_sequence)
    size = len(text) + (len(text) // max(int(width), 1) + text.count("\n") + 1) * sep
    if size > MAX_SIZE:
        raise _too_big("wordwrap", size)
    return jinja2.filters.do_wordwrap(environment, text, width, break_long_words, wrapstring, break_on_hyphens)


def _format_size(fmt: str, args: Any) -> int:
    """An upper bound of the length of ``fmt % args`` (``%``-formats: widths and values)."""
    specs = re.findall(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?[a-zA-Z%]", fmt)
    if any(part == "*" for spec in specs for part in spec):
        return MAX_SIZE + 1
    widths = sum(int(w or 0) + int(p or 0) for w, p in specs)
    # Each conversion prints at most one of the values (all of them, for a bound); the
    # walk of the values stops once the bound is over the limit, as it is for many specs.
    args_limit = MAX_SIZE // max(len(specs), 1) + 1
    return len(fmt) + widths + len(specs) * printed_size(args, args_limit)


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
            if isinstance(text, str):
                size = _format_size(text, (args[offset + 1:], kwargs))
                if size > MAX_SIZE:
                    raise _too_big("the format filter's result", size)
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

    def __init__(self, finalize: Callable[[Any], Any] | None = None, **options: Any):
        super().__init__(undefined=jinja2.StrictUndefined, autoescape=False, finalize=_output_guard(finalize),
                         **options)
        for name in ("lipsum", "namespace"):
            self.globals.pop(name, None)
        self.filters["join"] = jinja2.pass_eval_context(_filter_join)
        self.filters["replace"] = jinja2.pass_eval_context(_filter_replace)
        self.filters["sum"] = jinja2.pass_environment(_filter_sum)
        self.filters["center"] = _bounded_filter("center", 1)
        self.filters["indent"] = _filter_indent
        self.filters["wordwrap"] = jinja2.pass_environment(_filter_wordwrap)
        self.filters["batch"] = _bounded_filter("batch", 1)
        self.filters["slice"] = _bounded_filter("slice", 1)
        self.filters["format"] = _bounded_filter("format")
        self.filters["bmx_concat"] = _bounded_concat
        self.filters = {name: _guarded(name, f) for name, f in self.filters.items()}
        self.filters["bmx_iter"] = _bounded_iter  # a generator: checks the deadline as it goes
        # List, tuple and dict displays: [a, a, a] of a large a is built by Python itself.
        self.filters["bmx_charge"] = lambda value: _charge(value, "a list, tuple or dict")

    def is_safe_callable(self, obj: Any) -> bool:
        target = getattr(obj, "__wrapped__", obj)  # the sandbox wraps str.format
        if isinstance(getattr(target, "__self__", None), str) and target.__name__ not in _SAFE_STR_METHODS:
            return False
        return super().is_safe_callable(obj)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 (as Jinja's)
        _budget().check_time()
        result = super().call(__context, __obj, *args, **kwargs)
        if any(result is a for a in args) or isinstance(result, Iterator):
            return result
        return _charge(result, "a call's result")  # e.g. {}.fromkeys(range(10**5), 'x' * 10**6)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _budget().check_time()
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(times, int):
                    size = printed_size(seq, MAX_SIZE // max(times, 1) + 1) * max(times, 0)
                    if size > MAX_SIZE:
                        raise _too_big("a repetition (*)", size)
            if isinstance(left, int) and isinstance(right, int):
                if left.bit_length() + right.bit_length() > MAX_INT_BITS:
                    raise SecurityError(f"{operator} of two integers would have more than {MAX_INT_BITS} bits")
        elif operator == "+":
            if _size(left) + _size(right) > MAX_SIZE:
                raise _too_big("a concatenation (+)", _size(left) + _size(right))
        elif operator == "%":
            if isinstance(left, str) and _format_too_wide(left):
                raise SecurityError(f"a %-format's width or precision exceeds {MAX_SIZE}")
            size = _format_size(left, right) if isinstance(left, str) else 0
            if size > MAX_SIZE:
                raise _too_big("a %-format", size)
        elif operator == "**":
            if isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
                if right * math.log2(abs(left)) > MAX_INT_BITS:
                    raise SecurityError(f"{left} ** {right} has more than {MAX_INT_BITS} bits")
        return _charge(super().call_binop(context, operator, left, right), f"the result of {operator}")

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        _check_nesting(self.lexer.tokenize(source, name, filename))
        tree = super()._parse(source, name, filename)
        _bound_tree(tree)
        return tree


def _output_guard(finalize: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
    """Jinja's ``finalize``: measure a printed value before ``str()`` turns it into text,
    then apply the caller's ``finalize``."""
    def guard(value: Any) -> Any:
        if type(value) not in (str, int, float, bool):
            size = printed_size(value)
            if size > MAX_SIZE:
                raise _too_big("a printed value", size)
        return finalize(value) if finalize is not None else value
    return guard


#: Tokens that add a level to an expression's tree (and to Jinja's recursion over it).
_OPERATOR_TOKENS = frozenset({"pipe", "dot", "add", "sub", "mul", "div", "floordiv", "mod", "pow", "tilde",
                              "eq", "ne", "lt", "lteq", "gt", "gteq"})
_OPERATOR_NAMES = frozenset({"not", "and", "or", "is", "in", "if"})
_BLOCKS = frozenset({"if", "for", "with", "filter", "macro", "call", "block", "autoescape", "trans"})


def _check_nesting(stream: Iterable[Any]) -> None:
    """Refuse, before parsing, templates whose parse or compilation would recurse too deep.

    Jinja's parser recurses once per bracket and block level, its compiler once per
    operator of an expression; Python's own limits end such a template in a
    RecursionError or MemoryError. Counting tokens needs no recursion.
    """
    brackets = blocks = operators = 0
    first_word = ""
    assigned = False
    for count, token in enumerate(stream, 1):
        if count > MAX_TOKENS:
            raise jinja2.TemplateSyntaxError(f"the template has more than {MAX_TOKENS} tokens", token.lineno)
        kind = token.type
        if kind in ("variable_begin", "block_begin"):
            operators, first_word, assigned = 0, "" if kind == "block_begin" else "-", False
            continue
        if kind == "block_end":
            if first_word in _BLOCKS or (first_word == "set" and not assigned):
                blocks += 1
            elif first_word.startswith("end"):
                blocks -= 1
            if blocks > MAX_NESTING:
                raise jinja2.TemplateSyntaxError(f"blocks nest deeper than {MAX_NESTING} levels", token.lineno)
            continue
        if kind == "name" and first_word == "":
            first_word = token.value
            continue
        if kind == "assign":
            assigned = True
        if kind in ("lparen", "lbracket", "lbrace"):
            brackets += 1
            operators += 1
            if brackets > MAX_NESTING:
                raise jinja2.TemplateSyntaxError(f"brackets nest deeper than {MAX_NESTING} levels", token.lineno)
        elif kind in ("rparen", "rbracket", "rbrace"):
            brackets -= 1
        elif kind in _OPERATOR_TOKENS or (kind == "name" and token.value in _OPERATOR_NAMES):
            operators += 1
        if operators > MAX_OPERATORS:
            raise jinja2.TemplateSyntaxError(f"an expression has more than {MAX_OPERATORS} operators, brackets "
                                             "and filters", token.lineno)


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
            if isinstance(value, nodes.Node):
                setattr(parent, field, _rewritten(value))
            elif isinstance(value, list):
                value[:] = [_rewritten(v) if isinstance(v, nodes.Node) else v for v in value]


def _rewritten(node: nodes.Node) -> nodes.Node:
    """``~`` through the bounded concatenation; list, tuple and dict displays charged."""
    if isinstance(node, nodes.Concat):
        return _as_bounded_concat(node)
    if isinstance(node, (nodes.List, nodes.Dict)) or (isinstance(node, nodes.Tuple) and node.ctx == "load"):
        if not getattr(node, "bmx_charged", False):
            node.bmx_charged = True  # type: ignore[attr-defined]  # the filter wraps it once
            return nodes.Filter(node, "bmx_charge", [], [], None, None, lineno=node.lineno)
    return node


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
    """The compiled template of ``source`` (cached: a campaign renders one text per cell).

    Raises:
        jinja2.TemplateSyntaxError: also for a template Python cannot compile (nested
            too deep past the token checks: a last guard, never a traceback).
    """
    try:
        return _environment(finalize).from_string(source)
    except (RecursionError, MemoryError, SyntaxError) as exc:
        raise jinja2.TemplateSyntaxError(f"the template is nested too deeply to compile ({type(exc).__name__})",
                                         1) from None


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
    try:
        template = compile_template(source, finalize)
    except jinja2.TemplateSyntaxError as exc:
        if "\n" not in source.strip() or not exc.lineno or str(exc.message).startswith("line "):
            raise
        # A job file or script of several lines: say which line, still on one line.
        located = jinja2.TemplateSyntaxError(f"line {exc.lineno}: {exc.message}", exc.lineno)
        located.translated = True  # str() is the message alone, without Jinja's source excerpt
        raise located from None
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
    except SecurityError as exc:
        line = _template_line(exc)
        raise SecurityError(f"line {line}: {exc}" if line and "\n" in source.strip() else str(exc)) from None
    except (RecursionError, MemoryError) as exc:  # a last guard: one line, never a traceback
        raise SecurityError(f"the template exceeds a bound of Python itself ({type(exc).__name__})") from None
    finally:
        _BUDGET.reset(token)


def _template_line(exc: BaseException) -> int | None:
    """The template line where ``exc`` was raised (Jinja maps its frames to template lines)."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line
