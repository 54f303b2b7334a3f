"""The bounded Jinja sandbox of workload variables: hostile templates fail fast, plain ones work."""

from __future__ import annotations

import re
import time
import tracemalloc

import jinja2
import pytest

from benchmatrix.report.plots import safe_file_stem
from benchmatrix.spec.templating import MAX_SIZE, render

CTX = {"a": 1, "b": "y", "bs": "4k"}


@pytest.mark.parametrize("template, expected", [
    ("{{ a }}-{{ b ~ 'x' }}", "1-yx"),
    ("--bs={{ bs|upper }}", "--bs=4K"),
    ("{{ 'a,b'.split(',')|join(' ') }}", "a b"),
    ("{% for x in [1, 2] %}{{ x }}{% endfor %}", "12"),
    ("{{ 'x' * 3 }}{{ a + 1 }}{{ 2 ** 10 }}", "xxx21024"),
    ("{{ '%05d' % a }} {{ '%s-%s'|format(a, b) }}", "00001 1-y"),
    ("{{ 'ab'|replace('a', 'zz') }}{{ 'x'|center(3) }}", "zzb x "),
    ("{{ [[1], [2]]|sum(start=[]) }}", "[1, 2]"),
])
def test_ordinary_templates_render(template, expected):
    assert render(template, CTX) == expected


@pytest.mark.parametrize("template", [
    "{{ 'x' * 10**10 }}",                                   # the 10 GB allocation
    "{{ [1] * 10**9 }}",
    "{{ 7 ** 100000 }}",
    "{{ 'x'|center(10**10) }}",
    "{{ 'x'|indent(10**9, true) }}",
    "{{ range(10)|batch(10**9, 0)|list }}",
    "{{ range(10)|map('center', 10**9)|list }}",
    "{{ '%0999999999d' % 1 }}",
    "{{ '%*d'|format(99999999, 1) }}",
    "{{ 'x'.zfill(10**9) }}",
    "{{ '{:>999999999}'.format(1) }}",
    "{{ ('x' * 1000)|replace('x', 'x' * 1000)|replace('x', 'x' * 1000) }}",
    "{{ ['x' * 600000, 'y' * 600000]|join }}",
    "{% set s = 'x' * 100000 %}{{ s~s~s~s~s~s~s~s~s~s~s }}",
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "{% for i in range(2000) %}{{ 'x' * 1000 }}{% endfor %}",  # the output itself
])
def test_amplifying_templates_are_refused_fast(template):
    start = time.process_time()
    with pytest.raises(jinja2.sandbox.SecurityError):
        render(template, CTX)
    assert time.process_time() - start < 5.0  # refused, not computed: far below the seconds an amplification takes


def test_slow_template_stops_after_its_cpu_budget():
    # Each step is cheap and small (a count over 1 MB); 100000 of them are not.
    template = "{% set s = 'x' * 1000000 %}{% for i in range(100000) %}{{ s.count('y') }}{% endfor %}"
    start = time.process_time()
    with pytest.raises(jinja2.sandbox.SecurityError, match="CPU time"):
        render(template, CTX)
    assert time.process_time() - start < 1.5


def _bounded_run(template: str) -> tuple[BaseException | None, float, int]:
    """Render ``template``: the exception (None when it rendered), CPU seconds, peak bytes allocated."""
    tracemalloc.start()
    start = time.process_time()
    try:
        render(template, CTX)
        raised = None
    except jinja2.TemplateError as exc:
        raised = exc
    finally:
        cpu = time.process_time() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return raised, cpu, peak


# Issue 25 item 3: each once reached about 1 GB (or hung, or ran 40 s) because the size
# check came after the value existed.
HUGE_WHILE_RUNNING = [
    "{{ [[1] * 100000] * 100000 }}",                         # a list printed as text
    "{{ [['x' * 1000] * 300] * 10000 }}",
    "{{ {}.fromkeys(range(100000), 'x' * 1000000) }}",       # a dict printed as text
    "{{ '%1000000s' * 1000 % ((1,) * 1000) }}",              # many % widths
    "{{ '%(a)s' * 2000 % {'a': 'x' * 1000000} }}",
    "{{ ('%1000000s' * 1000)|format(*range(1000)) }}",
    "{{ ('x\n' * 500000)|indent(1000000) }}",                 # indent over many lines
    "{{ ('x\n' * 500000)|indent('y' * 1000) }}",
    "{{ ('x ' * 500000)|wordwrap(1)|indent(1000) }}",         # 39.6 s of CPU
    "{{ ('x ' * 60000)|wordwrap(1, wrapstring='y' * 1000) }}",
    "{{ ([[1] * 100000] * 1000)|tojson }}",
    "{{ 'a' ~ ([[1] * 100000] * 1000) }}",
    "{{ [[[1] * 100000] * 1000]|join }}",
    "{{ ([['x'] * 100000] * 1000)|string|length }}",
    "{{ ([[1] * 100000] * 1000)|center(10) }}",
    "{% set a = [1] * 100000 %}{{ [a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a] }}",
    "{% set a = [1] * 100000 %}{{ (a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a)|length }}",
    "{% set a = 'x' * 100000 %}{{ {'k1': a, 'k2': a, 'k3': a, 'k4': a, 'k5': a, 'k6': a, 'k7': a, 'k8': a, "
    "'k9': a, 'k10': a, 'k11': a} }}",
    "{{ range(10)|batch(100000, 'x' * 1000)|list }}",
    "{{ (2 ** 4000) * (2 ** 4000) }}",                         # a number too long even to print
    "{% set a = 'x' * 1000000 %}" + "".join(f"{{% set a{i} = a ~ '{i}' %}}" for i in range(40)),
]


@pytest.mark.parametrize("template", HUGE_WHILE_RUNNING)
def test_values_too_large_to_print_are_refused_before_they_exist(template):
    raised, cpu, peak = _bounded_run(template)
    assert isinstance(raised, jinja2.sandbox.SecurityError), raised
    assert "\n" not in str(raised)
    assert cpu < 5.0, f"{cpu:.2f} s"  # refused before it exists (the peak says so); 5 s: margin for load
    assert peak < 64 * 2**20, f"{peak / 2**20:.0f} MB"


def test_all_values_of_a_render_together_are_bounded():
    template = "{% set a = 'x' * 1000000 %}" + "".join(f"{{% set a{i} = a ~ '{i}' %}}" for i in range(40))
    with pytest.raises(jinja2.sandbox.SecurityError, match="characters or items of values in all"):
        render(template, CTX)


def test_a_bound_names_the_template_line():
    with pytest.raises(jinja2.sandbox.SecurityError, match=r"^line 3: a repetition"):
        render("a={{ a }}\nb={{ b }}\nc={{ [[1] * 100000] * 1000 }}\n", CTX)
    with pytest.raises(jinja2.TemplateSyntaxError) as info:
        render("a={{ a }}\nb={{ b }}\nc={{ " + "[" * 30 + "]" * 30 + " }}\n", CTX)
    assert str(info.value) == "line 3: brackets nest deeper than 20 levels"


# Issue 25 item 4: these ended in RecursionError or MemoryError tracebacks.
@pytest.mark.parametrize("template, what", [
    ("{{ " + "[" * 500 + "]" * 500 + " }}", "brackets nest deeper than 20"),
    ("{{ " + "(" * 3000 + "a" + ")" * 3000 + " }}", "brackets nest deeper than 20"),
    ("{{ a" + "|string" * 3000 + " }}", "more than 64 operators"),
    ("{{ " + "not " * 3000 + "a }}", "more than 64 operators"),
    ("{{ a" + " + a" * 3000 + " }}", "more than 64 operators"),
    ("{{ a" + ".real" * 3000 + " }}", "more than 64 operators"),
    ("{% if a %}" * 500 + "x" + "{% endif %}" * 500, "blocks nest deeper than 20"),
    ("{% for i in [1] %}" * 500 + "x" + "{% endfor %}" * 500, "blocks nest deeper than 20"),
    ("{% set a = [1] %}" + "{% set a = [a] %}" * 3000 + "{{ a|length }}", "more than 10000 tokens"),
])
def test_deep_templates_are_refused_with_one_line(template, what):
    with pytest.raises(jinja2.TemplateSyntaxError) as info:
        render(template, CTX)
    assert what in str(info.value) and "\n" not in str(info.value)


def _at_depth(frames: int, fn):
    """``fn()`` called ``frames`` Python frames deeper: a caller with a deep stack of its own."""
    return fn() if frames == 0 else _at_depth(frames - 1, fn)


def test_templates_within_the_nesting_limits_render_even_from_a_deep_stack():
    nested = "{{ " + "[" * 20 + "a" + "]" * 20 + "|length }}"
    chained = "{{ a" + "|string" * 60 + " }}"
    blocks = "{% if a %}" * 20 + "x" + "{% endif %}" * 20
    for template, expected in ((nested, "1"), (chained, "1"), (blocks, "x")):
        assert _at_depth(300, lambda t=template: render(t, CTX)) == expected


@pytest.mark.parametrize("template, what", [
    ("{% macro f(s) %}{{ f(s ~ s) }}{% endmacro %}{{ f('x') }}", "macros"),
    ("{% for x in [[1]] recursive %}{{ loop(x) }}{% endfor %}", "recursive loops"),
    ("{% include 'other' %}", "include"),
    ("{% set x %}{% for i in range(99999) %}{{ 'x' * 1000000 }}{% endfor %}{% endset %}", "block assignments"),
    ("{% filter upper %}{% for i in range(99999) %}{{ 'x' * 1000000 }}{% endfor %}{% endfilter %}", "filter blocks"),
])
def test_unbounded_constructs_are_refused_when_parsed(template, what):
    with pytest.raises(jinja2.TemplateSyntaxError, match=re.escape(what) + ".* are not allowed"):
        render(template, CTX)


@pytest.mark.parametrize("name", ["lipsum", "namespace"])
def test_growth_helpers_are_gone(name):
    with pytest.raises(jinja2.UndefinedError):
        render("{{ %s() }}" % name, CTX)


def test_join_by_attribute_stays_in_the_sandbox():
    assert render("{{ [{'n': 'a'}, {'n': 'b'}]|join(',', attribute='n') }}", CTX) == "a,b"
    with pytest.raises(jinja2.sandbox.SecurityError):
        render("{{ [range]|join(attribute='__globals__') }}", CTX)


def test_limit_is_inclusive():
    assert len(render("{{ 'x' * n }}", {"n": MAX_SIZE})) == MAX_SIZE


@pytest.mark.parametrize("name, expected", [
    ("lines_read_bw_kib", "lines_read_bw_kib"),
    ("lines_disk_dm-0_read_mib_s", "lines_disk_dm-0_read_mib_s"),
])
def test_safe_file_stem_keeps_plain_names(name, expected):
    assert safe_file_stem(name) == expected


@pytest.mark.parametrize("name", ["lines_a/b", "lines_../../x", "..", ".hidden", "a\\b", "x" * 300, "lines_\u00e9"])
def test_safe_file_stem_stays_in_its_directory(name):
    stem = safe_file_stem(name)
    assert "/" not in stem and "\\" not in stem and not stem.startswith(".")
    assert len(stem) <= 100 and stem.isascii()
    assert stem != safe_file_stem(name + "_")  # a changed name carries a hash: no collisions
