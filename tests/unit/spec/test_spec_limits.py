"""Hostile and runaway specs (issue 13 items 1, 2 and 9): bounded, one-line FILE:LINE errors.

Every case here once gave a traceback, hung, allocated gigabytes, or validated and
then failed late in a campaign.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from test_spec import BASE, assert_one_error, errors_of, write

from benchmatrix.spec.load import load_spec


def fast_errors(path: Path, budget: float = 5.0) -> list:
    """The errors of ``path``, which must come within ``budget`` seconds of CPU time: a guard
    against work that grows with the square of the input (seconds to hours), with a wide
    margin over the ~0.2 s these take, so that a loaded machine does not fail it."""
    start = time.process_time()
    errs = errors_of(path)
    assert time.process_time() - start < budget
    return errs


def assert_fast_error(path: Path, line: int, *fragments: str, budget: float = 5.0) -> None:
    start = time.process_time()
    assert_one_error(path, line, *fragments)
    assert time.process_time() - start < budget


# ---------------------------------------------------------------- YAML: recursion, bombs, bytes

def test_self_referencing_alias(tmp_path):
    path = write(tmp_path, "name: t\nfactors: &f\n  a: *f\nworkload: {role: workload_x}\n")
    assert_fast_error(path, 3, "alias *f refers to its own anchor &f")


def test_self_referencing_list_alias(tmp_path):
    path = write(tmp_path, "name: t\nfactors:\n  a: &l [1, *l]\nworkload: {role: workload_x}\n")
    assert_fast_error(path, 3, "alias *l refers to its own anchor")


def test_self_merging_mapping(tmp_path):
    path = write(tmp_path, "name: t\nfactors: &m\n  <<: *m\nworkload: {role: workload_x}\n")
    assert_fast_error(path, 3, "refers to its own anchor")


@pytest.mark.parametrize("depth", [70, 2500, 100_000])
def test_deep_flow_nesting(tmp_path, depth):
    path = write(tmp_path, "name: t\nfactors:\n  a: " + "[" * depth + "]" * depth + "\nworkload: {role: workload_x}\n")
    err = fast_errors(path)[0]
    assert err.line == 3 and "nesting" in err.message


def test_deep_block_nesting(tmp_path):
    body = "".join("  " * i + f"k{i}:\n" for i in range(1, 80)) + "  " * 80 + "x: 1\n"
    path = write(tmp_path, "name: t\nfactors:\n" + body + "workload: {role: workload_x}\n")
    assert_fast_error(path, 2 + 64, "nesting deeper than 64 levels")


def test_aliases_stacking_deep_structures(tmp_path):
    lines = ["name: t"] + [f"d{i}: &d{i} " + "[" * 60 + (f"*d{i - 1}" if i else "1") + "]" * 60 for i in range(30)]
    path = write(tmp_path, "\n".join(lines) + "\nfactors: {a: [1]}\nworkload: {role: workload_x}\n")
    assert_fast_error(path, 2, "nesting deeper than 64 levels once aliases are expanded")  # the anchor d0


def test_billion_laughs_is_refused_before_it_expands(tmp_path):
    lines = ["name: t", "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    path = write(tmp_path, "\n".join(lines) + "\nfactors: {a: [1]}\nworkload: {role: workload_x}\n")
    err = fast_errors(path)[0]
    assert "aliases expand to more than 100000 values" in err.message


def test_merge_key_bomb_is_refused(tmp_path):
    lines = ["name: t", "factors:", "  m0: &m0 {" + ", ".join(f"k{j}: 1" for j in range(50)) + "}"]
    lines += [f"  m{i}: &m{i} {{<<: [*m{i - 1}], x{i}: 1}}" for i in range(1, 4000)]
    path = write(tmp_path, "\n".join(lines) + "\nworkload: {role: workload_x}\n")
    assert "merge keys expand to more than" in fast_errors(path)[0].message


@pytest.mark.parametrize("char, code", [("\x00", "U+0000"), ("\x07", "U+0007"), ("\x1b", "U+001B")])
def test_control_characters(tmp_path, char, code):
    path = tmp_path / "spec.yaml"
    path.write_text(BASE.replace("b: [x, y]", f"b: [x, y{char}]"), encoding="utf-8")
    assert_fast_error(path, 4, f"character {code} is not allowed")


def test_not_utf8(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_bytes(BASE.encode().replace(b"b: [x, y]", b"b: [x, \xff]"))
    assert_fast_error(path, 4, "not UTF-8")


def test_oversized_file(tmp_path):
    path = write(tmp_path, BASE + "description: " + "x" * 2_000_000 + "\n")
    assert_fast_error(path, 1, "the file has more than 1048576 bytes")


def test_endless_file_is_read_no_further_than_the_limit():
    assert_fast_error(Path("/dev/zero"), 1, "the file has more than 1048576 bytes")


@pytest.mark.parametrize("key", ["1", "true", "~", "1.5", "2020-01-01"])
def test_non_string_keys_anywhere(tmp_path, key):
    path = write(tmp_path, BASE + f"report:\n  {key}: 2\n")
    assert_fast_error(path, 10, "is not a string", "quote it")


def test_mixed_type_factor_keys(tmp_path):
    path = write(tmp_path, "name: t\nfactors:\n  b: [c]\n  1: [a]\nworkload: {role: workload_x}\n")
    assert_fast_error(path, 4, "factor name 1 is not a string")


def test_bad_scalar_for_its_tag(tmp_path):
    path = write(tmp_path, BASE + "replicates: !!int abc\n")
    assert_fast_error(path, 9, "not a valid !!int")


def test_two_documents(tmp_path):
    path = write(tmp_path, BASE + "---\nname: u\n")
    assert_fast_error(path, 9, "more than one YAML document")


def test_key_with_control_escape_is_reported_on_one_line(tmp_path):
    path = write(tmp_path, BASE + '"a\\nb": 1\n')
    assert_fast_error(path, 9, "unknown key 'a\\nb'")


# ---------------------------------------------------------------- merge keys still work

MERGE = """\
name: t
factors:
  a: [1, 2]
knobs:
  a: &k {role: knob_x, cost: restart}
workload:
  role: workload_command
  vars: {argv: [echo, "{{ a }}"]}
"""


def test_merge_key_override_is_not_a_duplicate(tmp_path):
    text = MERGE.replace("knobs:\n  a: &k {role: knob_x, cost: restart}",
                         "knobs:\n  a:\n    <<: {role: knob_x, cost: restart}\n    cost: none")
    spec = load_spec(write(tmp_path, text))
    assert spec.knobs["a"].role == "knob_x" and spec.knobs["a"].cost_class == "none"


def test_merge_of_an_anchor_and_first_listed_merge_wins(tmp_path):
    text = MERGE.replace("  vars:", "  <<: [{timeout: 7}, {timeout: 9, estimate_s: 2}]\n  vars:")
    spec = load_spec(write(tmp_path, text))
    assert spec.workload["timeout"] == 7 and spec.workload["estimate_s"] == 2


def test_explicit_duplicate_beside_a_merge_is_still_an_error(tmp_path):
    text = MERGE.replace("  vars:", "  <<: {timeout: 7}\n  timeout: 8\n  timeout: 9\n  vars:")
    assert_fast_error(write(tmp_path, text), 10, "duplicate key 'timeout' (first defined on line 9)")


def test_merge_of_a_scalar_is_an_error(tmp_path):
    text = MERGE.replace("  vars:", "  <<: 3\n  vars:")
    assert_fast_error(write(tmp_path, text), 8, "merge key '<<' takes a mapping")


# ---------------------------------------------------------------- matrix size

def test_huge_matrix_is_refused_before_expanding(tmp_path):
    factors = "".join(f"  f{i}: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n" for i in range(20))
    path = write(tmp_path, "name: t\nfactors:\n" + factors + "workload: {role: workload_x}\n")
    assert_fast_error(path, 2, "the matrix has 100000000000000000000 cells", "limit of 100000")


def test_zip_group_counts_as_one_dimension(tmp_path):
    levels = "[" + ", ".join(map(str, range(400))) + "]"
    text = (f"name: t\nfactors:\n  a: {levels}\n  b: {levels}\n  c: {levels}\nzip: [[a, b]]\n"
            "workload: {role: workload_x}\n")
    assert_fast_error(write(tmp_path, text), 2, "the matrix has 160000 cells (400 x 400)")


def test_too_many_runs_per_host(tmp_path):
    levels = "[" + ", ".join(map(str, range(1000))) + "]"
    text = f"name: t\nfactors:\n  a: {levels}\n  b: [1, 2]\nreplicates: 600\nworkload: {{role: workload_x}}\n"
    assert_fast_error(write(tmp_path, text), 5, "2000 cells x (600 replicates + 0 warm-up) = 1200000 runs")


def test_many_levels_duplicate_check_is_linear(tmp_path):
    levels = ", ".join(map(str, range(40_000))) + ", 17.0"
    path = write(tmp_path, f"name: t\nfactors:\n  a: [{levels}]\nworkload: {{role: workload_x}}\n")
    # A quadratic check takes minutes on 40k levels; a linear one well under a second
    # (3 s of CPU leaves room for a busy 2-core machine).
    assert_fast_error(path, 3, "factor 'a' lists level '17.0' twice", budget=10.0)


def test_200k_levels_answer_fast(tmp_path):
    path = write(tmp_path, "name: t\nfactors:\n  a: [" + ",".join(["1"] * 200_000)
                 + "]\nworkload: {role: workload_x}\n")
    assert len(fast_errors(path, budget=10.0)) == 1


def test_too_many_values_are_refused_before_any_is_built(tmp_path, monkeypatch):
    # Building nodes (and resolving each scalar's tag) for the first 50 000 values took
    # 0.6-1.0 s of CPU before the refusal; the count is a pass over parser events alone.
    from benchmatrix.spec import yamlload

    resolved = []
    real = yamlload._Loader.resolve
    monkeypatch.setattr(yamlload._Loader, "resolve", lambda self, *a: resolved.append(a) or real(self, *a))
    path = write(tmp_path, "name: t\nfactors:\n  a: [" + ",".join(["1"] * (yamlload.MAX_NODES + 10))
                 + "]\nworkload: {role: workload_x}\n")
    assert_one_error(path, 3, f"the file has more than {yamlload.MAX_NODES} values")
    assert resolved == []


# ---------------------------------------------------------------- what validates, runs

@pytest.mark.parametrize("extra, line, fragments", [
    ("replicates: 3.0\n", 9, ["replicates: must be a whole number, not 3.0"]),
    ("warmup: 1.0\n", 9, ["warmup: must be a whole number, not 1.0"]),
    ("replicates: 1000000000000\n", 9, ["replicates: 1000000000000 is greater than the maximum of 10000"]),
    ("warmup: 5000\n", 9, ["warmup: 5000 is greater than the maximum of 1000"]),
    ("order: {visits: 2.0}\n", 9, ["order.visits: must be a whole number"]),
    ("order: {seed: 1.5}\n", 9, ["order.seed: must be a whole number"]),
    ("report: {cv_threshold: .nan}\n", 9, ["report.cv_threshold: nan is not a finite number"]),
    ("factors2: 1\n", 9, ["unknown key 'factors2'"]),
])
def test_numbers_that_crashed_later(tmp_path, extra, line, fragments):
    assert_fast_error(write(tmp_path, BASE + extra), line, *fragments)


@pytest.mark.parametrize("value, fragment", [
    (".inf", "workload.timeout: inf is not a finite number"),
    (".nan", "workload.timeout: nan is not a finite number"),
    ("-.inf", "workload.timeout: -inf is not a finite number"),
    ("1000000", "1000000 is greater than the maximum of 604800"),
])
def test_timeout_must_be_finite_and_bounded(tmp_path, value, fragment):
    path = write(tmp_path, BASE.replace("  vars:", f"  timeout: {value}\n  vars:"))
    assert_fast_error(path, 7, fragment)


def test_non_finite_level(tmp_path):
    path = write(tmp_path, BASE.replace("a: [1, 2]", "a: [1, .inf]"))
    assert_fast_error(path, 3, "factors.a.1: inf is not a finite number")


def test_nul_in_a_level_or_a_rendered_value(tmp_path):
    path = write(tmp_path, BASE.replace("b: [x, y]", 'b: [x, "y\\0"]'))
    assert_fast_error(path, 4, "factors.b.1: contains a NUL character")
    path = write(tmp_path, BASE.replace('"{{ b }}"', "'{{ b ~ \"\\x00\" }}'"))
    assert_fast_error(path, 8, "cannot be rendered for cell a=1 b=x", "contains a NUL character")


def test_integer_too_long_to_read(tmp_path):
    assert_fast_error(write(tmp_path, BASE + "replicates: " + "9" * 5000 + "\n"), 9, "not a valid !!int", "digits")


METRIC = BASE + "  metrics:\n    {name}: {{regex: 'v=(?P<value>[0-9]+)', unit: x}}\n"


@pytest.mark.parametrize("name, fragment", [
    ("status", "metric name 'status' is reserved"),
    ("seq", "metric name 'seq' is reserved"),
    ("a", "metric name 'a' is also a factor's name"),
    ("a/b", "invalid metric name 'a/b'"),
    ("'../../x'", "invalid metric name '../../x'"),
    ("'x..y'", "invalid metric name 'x..y'"),
    ("1st", "invalid metric name '1st'"),
    ("'has space'", "invalid metric name 'has space'"),
])
def test_declared_metric_names(tmp_path, name, fragment):
    assert_fast_error(write(tmp_path, METRIC.format(name=name)), 10, fragment)


def test_metric_names_referred_to_by_the_report(tmp_path):
    path = write(tmp_path, BASE + "report:\n  metrics: [tps, ../x]\n  tables: [{rows: a, metric: status}]\n")
    errs = fast_errors(path)
    assert [(e.line, e.message.split(":")[0]) for e in errs] == [(10, "report.metrics.1"),
                                                                   (11, "report.tables.0.metric")]


def test_good_metric_names_validate(tmp_path):
    spec = load_spec(write(tmp_path, METRIC.format(name="p99_latency-ms.v2")))
    assert "p99_latency-ms.v2" in spec.workload["metrics"]


# ---------------------------------------------------------------- same level, same cell (issue 12 item 12)

def test_control_written_as_whole_float_is_the_matrix_cell(tmp_path):
    text = BASE.replace("a: [1, 2]", "a: [4096, 8192]") + (
        "knobs:\n  a: {role: knob_x, cost: restart}\n"
        "order: {strategy: restricted, control: {a: 4096.0, b: x}}\n")
    spec = load_spec(write(tmp_path, text))
    ctl = spec.control_cell()
    assert ctl.cell_id in {c.cell_id for c in spec.cells}
    assert ctl.factors == {"a": 4096, "b": "x"} and type(ctl.factors["a"]) is int


def test_include_of_whole_float_adds_no_cell(tmp_path):
    spec = load_spec(write(tmp_path, BASE + "include:\n  - {a: 1.0, b: x}\n"))
    assert len(spec.cells) == 4


# ---------------------------------------------------------------- templates of every cell

def test_template_allocating_gigabytes_is_refused(tmp_path):
    path = write(tmp_path, BASE.replace('"{{ b }}"', "\"{{ 'x' * 10**10 }}\""))
    assert_fast_error(path, 8, "workload.vars.argv.2 cannot be rendered for cell a=1 b=x",
                      "SecurityError", "limit of 1048576")


def test_template_failing_for_one_cell_only(tmp_path):
    path = write(tmp_path, BASE.replace("a: [1, 2]", "a: [1, 0]").replace('"{{ a }}"', '"{{ 100 // a }}"'))
    assert_fast_error(path, 8, "workload.vars.argv.1 cannot be rendered for cell a=0 b=x", "ZeroDivisionError")


def test_template_failing_for_an_included_cell(tmp_path):
    text = BASE.replace('"{{ a }}"', '"{{ 100 // a }}"') + "include:\n  - {a: 0, b: x}\n"
    assert_fast_error(write(tmp_path, text), 8, "cannot be rendered for cell a=0 b=x", "ZeroDivisionError")


def test_template_rendered_once_per_distinct_combination(tmp_path, monkeypatch):
    from benchmatrix.spec import templating

    calls = []
    real = templating.render
    monkeypatch.setattr(templating, "render", lambda text, ctx: calls.append(text) or real(text, ctx))
    levels = "[" + ", ".join(map(str, range(300))) + "]"
    text = (f"name: t\nfactors:\n  a: {levels}\n  b: {levels}\nworkload:\n  role: workload_command\n"
            "  vars: {argv: [echo, '--a={{ a }}', '{{ b }}']}\n")
    start = time.process_time()
    spec = load_spec(write(tmp_path, text))
    assert len(spec.cells) == 90_000
    assert len(calls) == 300  # '--a={{ a }}' per level of a; '{{ b }}' is taken as is
    assert time.process_time() - start < 10


def test_too_many_templates(tmp_path):
    argv = ", ".join(f"'{{{{ a }}}}-{i}'" for i in range(501))
    path = write(tmp_path, BASE.replace('argv: [echo, "{{ a }}", "{{ b }}"]', f"argv: [{argv}]"))
    assert_fast_error(path, 7, "workload.vars holds 501 templates, more than the limit of 500")


def test_render_budget_leaves_a_warning_not_an_error(tmp_path, monkeypatch):
    from benchmatrix.spec import load as spec_module

    monkeypatch.setattr(spec_module, "MAX_RENDERS", 1)
    spec = load_spec(write(tmp_path, BASE.replace('"{{ a }}"', '"-{{ a }}"')))
    assert [w.split(": ", 1)[1][:60] for w in spec.warnings] == [
        "warning: workload templates were tried on the first 1 distin"]


def test_many_unknown_factor_names_answer_fast(tmp_path):
    factors = "".join(f"  f{i}: [1]\n" for i in range(4000))
    exclude = "".join(f"  - {{g{i}: 1}}\n" for i in range(4000))
    path = write(tmp_path, f"name: t\nfactors:\n{factors}exclude:\n{exclude}workload: {{role: workload_x}}\n")
    errs = fast_errors(path)
    assert len(errs) == 4000 and "... (4000 factors)" in errs[0].message


def test_exclude_value_that_is_no_scalar(tmp_path):
    assert_fast_error(write(tmp_path, BASE + "exclude:\n  - {a: {x: 1}}\n"), 10,
                      "exclude entry: '{'x': 1}' is not a level")


def test_many_exclude_values_against_many_levels_answer_fast(tmp_path):
    levels = ", ".join(map(str, range(10_000)))
    wrong = ", ".join(str(-i) for i in range(1, 10_001))
    path = write(tmp_path, f"name: t\nfactors:\n  a: [{levels}]\nexclude:\n  - {{a: [{wrong}]}}\n"
                           "workload: {role: workload_x}\n")
    errs = fast_errors(path)
    assert len(errs) == 10_000 and errs[0].message.endswith("(levels: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, "
                                                            "14, 15, 16, 17, 18, 19, ...)")


def test_control_level_must_be_a_scalar(tmp_path):
    text = BASE + "knobs:\n  a: {role: knob_x, cost: restart}\norder: {strategy: restricted, control: {a: [1], b: x}}\n"
    assert_fast_error(write(tmp_path, text), 11, "order.control.a: [1] is not of type")


def test_report_table_names_unknown_factor(tmp_path):
    path = write(tmp_path, BASE + "report:\n  tables:\n    - {rows: zz, columns: [b, yy], metric: m}\n")
    errs = fast_errors(path)
    assert [e.message.split(" (")[0] for e in errs] == [
        "report.tables.0.columns names unknown factor 'yy'", "report.tables.0.rows names unknown factor 'zz'"]


def test_render_time_budget_leaves_a_warning(tmp_path, monkeypatch):
    from benchmatrix.spec import load as spec_module

    monkeypatch.setattr(spec_module, "MAX_RENDER_SECONDS", 0.0)
    spec = load_spec(write(tmp_path, BASE.replace('"{{ a }}"', '"-{{ a }}"')))
    assert [w.split(": ", 1)[1][:60] for w in spec.warnings] == [
        "warning: workload templates were tried on the first 0 distin"]
