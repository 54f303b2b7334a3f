"""The bounded Jinja sandbox of workload variables: hostile templates fail fast, plain ones work."""

from __future__ import annotations

import re
import time

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
    assert time.process_time() - start < 1.0


def test_slow_template_stops_after_its_cpu_budget():
    template = "{% set s = 'x' * 1000000 %}" + "{{ s|list|sort|length }}{{ s.split('y')|length }}" * 40
    start = time.process_time()
    with pytest.raises(jinja2.sandbox.SecurityError, match="CPU time"):
        render(template, CTX)
    assert time.process_time() - start < 5


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
