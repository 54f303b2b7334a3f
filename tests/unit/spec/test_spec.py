"""Spec loading and validation: every error kind names FILE:LINE and says what is wrong."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import jinja2
import pytest

from benchmatrix.cli import main
from benchmatrix.errors import SpecError, SpecErrors
from benchmatrix.spec.load import load_spec, render_vars

QUICKSTART = Path(__file__).resolve().parents[3] / "config" / "experiments" / "quickstart.yaml"

# A valid spec; the line numbers below are relied upon by the tests.
#  1 name: t
#  2 factors:
#  3   a: [1, 2]
#  4   b: [x, y]
#  5 workload:
#  6   role: workload_command
#  7   vars:
#  8     argv: [echo, "{{ a }}", "{{ b }}"]
BASE = """\
name: t
factors:
  a: [1, 2]
  b: [x, y]
workload:
  role: workload_command
  vars:
    argv: [echo, "{{ a }}", "{{ b }}"]
"""


# ---------------------------------------------------------------- helpers

def write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def errors_of(path: Path) -> list[SpecError]:
    """The errors load_spec raises for ``path``; checks the one-line FILE:LINE format."""
    with pytest.raises(SpecErrors) as info:
        load_spec(path)
    exc = info.value
    lines = str(exc).splitlines()
    assert len(lines) == len(exc.errors) >= 1
    for err, line in zip(exc.errors, lines):
        assert line == f"{path}:{err.line}: {err.message}"
        assert re.fullmatch(re.escape(str(path)) + r":\d+: \S.*", line)
    return exc.errors


def the_error(path: Path) -> SpecError:
    """The single error of ``path``."""
    errs = errors_of(path)
    assert len(errs) == 1, [str(e) for e in errs]
    return errs[0]


def assert_one_error(path: Path, line: int, *fragments: str) -> None:
    err = the_error(path)
    assert err.line == line, str(err)
    for frag in fragments:
        assert frag in err.message, str(err)
    assert str(err) == f"{path}:{line}: {err.message}"


# ---------------------------------------------------------------- YAML level

def test_base_spec_is_valid(tmp_path):
    spec = load_spec(write(tmp_path, BASE))
    assert len(spec.cells) == 4
    assert spec.warnings == []


def test_yaml_syntax_error(tmp_path):
    path = write(tmp_path, """\
        name: t
        factors:
          a: [1]
         b: [2]
        workload: {role: workload_x}
        """)
    assert_one_error(path, 4, "YAML syntax error")


def test_empty_file(tmp_path):
    path = write(tmp_path, "")
    assert_one_error(path, 1, "empty")


def test_comment_only_file_is_empty(tmp_path):
    path = write(tmp_path, "# nothing here\n")
    assert_one_error(path, 1, "empty")


def test_document_not_a_mapping(tmp_path):
    path = write(tmp_path, """\
        # a list is not a spec

        - name
        - factors
        """)
    assert_one_error(path, 3, "must be a mapping")


def test_scalar_document_not_a_mapping(tmp_path):
    path = write(tmp_path, "just some text\n")
    assert_one_error(path, 1, "must be a mapping")


def test_missing_file(tmp_path):
    err = the_error(tmp_path / "nope.yaml")
    assert "no such file" in err.message


def test_duplicate_factor_name(tmp_path):
    path = write(tmp_path, """\
        name: t
        factors:
          a: [1, 2]
          b: [x, y]
          a: [3, 4]
        workload:
          role: workload_command
          vars:
            argv: [echo, "{{ a }}", "{{ b }}"]
        """)
    assert_one_error(path, 5, "duplicate key 'a'", "line 3")


# ---------------------------------------------------------------- schema level

def test_unknown_top_level_key(tmp_path):
    path = write(tmp_path, BASE + "colour: red\n")
    assert_one_error(path, 9, "unknown key 'colour'")


def test_unknown_nested_key_points_at_the_key(tmp_path):
    path = write(tmp_path, BASE.replace("  role: workload_command\n",
                                        "  role: workload_command\n  timeoutt: 5\n"))
    assert_one_error(path, 7, "unknown key 'timeoutt'", "workload")


def test_replicates_zero(tmp_path):
    path = write(tmp_path, BASE + "warmup: 1\nreplicates: 0\n")
    assert_one_error(path, 10, "replicates", "minimum")


def test_replicates_wrong_type(tmp_path):
    path = write(tmp_path, BASE + "replicates: three\n")
    assert_one_error(path, 9, "replicates", "'three'", "integer")


def test_missing_required_key(tmp_path):
    path = write(tmp_path, "name: t\nfactors:\n  a: [1]\n")
    err = the_error(path)
    assert "workload" in err.message and "required" in err.message


def test_knob_cost_invalid(tmp_path):
    path = write(tmp_path, BASE + "knobs:\n  a:\n    role: knob_x\n    cost: expensive\n")
    assert_one_error(path, 12, "knobs.a.cost", "none, restart, reboot")


# ---------------------------------------------------------------- semantic level

def test_invalid_experiment_name(tmp_path):
    path = write(tmp_path, BASE.replace("name: t", "name: bad name!"))
    assert_one_error(path, 1, "invalid experiment name 'bad name!'")


def test_empty_level_list(tmp_path):
    path = write(tmp_path, BASE.replace("  b: [x, y]", "  b: [x, y]\n  c: []"))
    assert_one_error(path, 5, "factor 'c'", "empty level list")


def test_duplicate_level_in_factor(tmp_path):
    path = write(tmp_path, """\
        name: t
        factors:
          a:
            - 1
            - 2
            - 1
          b: [x, y]
        workload:
          role: workload_command
          vars:
            argv: [echo, "{{ a }}", "{{ b }}"]
        """)
    assert_one_error(path, 6, "factor 'a'", "twice")


def test_bool_and_int_levels_are_not_duplicates(tmp_path):
    path = write(tmp_path, BASE.replace("a: [1, 2]", "a: [1, true]"))
    assert len(load_spec(path).cells) == 4


def test_reserved_factor_name(tmp_path):
    path = write(tmp_path, BASE.replace("  b: [x, y]", "  b: [x, y]\n  host: [h1, h2]")
                 .replace('"{{ b }}"]', '"{{ b }}", "{{ host }}"]'))
    assert_one_error(path, 5, "'host'", "reserved")


def test_invalid_factor_name(tmp_path):
    path = write(tmp_path, BASE.replace("  b: [x, y]", "  b: [x, y]\n  bad-name: [1]"))
    assert_one_error(path, 5, "invalid factor name 'bad-name'")


def test_non_string_factor_key_points_at_its_own_line(tmp_path):
    path = write(tmp_path, "name: t\nfactors:\n  1: [a]\nworkload: {role: workload_x}\n")
    assert_one_error(path, 3, "factor name 1 is not a string")


def test_yaml_boolean_factor_name_is_refused(tmp_path):
    # YAML 1.1 reads an unquoted `on` as True: the user meant a factor named "on".
    path = write(tmp_path, "name: t\nfactors:\n  a: [1]\n  on: [x]\nworkload: {role: workload_x}\n")
    assert_one_error(path, 4, "factor name True is not a string", "quote it")


def test_unknown_factor_in_zip(tmp_path):
    path = write(tmp_path, BASE + "zip:\n  - - a\n    - zz\n")
    assert_one_error(path, 11, "zip group", "unknown factor 'zz'")


def test_zip_groups_of_unequal_length(tmp_path):
    path = write(tmp_path, BASE.replace("b: [x, y]", "b: [x, y, z]") + "zip:\n  - [a, b]\n")
    assert_one_error(path, 10, "zip group levels differ in length", "a has 2", "b has 3")


def test_factor_in_two_zip_groups(tmp_path):
    path = write(tmp_path, BASE.replace("b: [x, y]", "b: [x, y]\n  c: [p, q]")
                 .replace('"{{ b }}"]', '"{{ b }}", "{{ c }}"]')
                 + "zip:\n  - [a, b]\n  - [a, c]\n")
    assert_one_error(path, 12, "'a'", "more than one zip group")


def test_unknown_factor_in_exclude(tmp_path):
    path = write(tmp_path, BASE + "exclude:\n  - a: 1\n    zz: 3\n")
    assert_one_error(path, 11, "exclude entry", "unknown factor 'zz'")


def test_exclude_value_not_a_level(tmp_path):
    path = write(tmp_path, BASE + "exclude:\n  - b: x\n    a: 3\n")
    assert_one_error(path, 11, "exclude entry", "'3' is not a level of factor 'a'")


def test_exclude_list_value_with_one_bad_level(tmp_path):
    path = write(tmp_path, BASE + "exclude:\n  - a: [1, 7]\n")
    assert_one_error(path, 10, "'7' is not a level of factor 'a'")


def test_exclude_bool_is_not_an_int_level(tmp_path):
    path = write(tmp_path, BASE + "exclude:\n  - a: true\n")
    assert_one_error(path, 10, "'True' is not a level of factor 'a'")


def test_unknown_factor_in_include(tmp_path):
    path = write(tmp_path, BASE + "include:\n  - a: 3\n    b: z\n    zz: 1\n")
    assert_one_error(path, 12, "include entry", "unknown factor 'zz'")


def test_include_entry_missing_a_factor(tmp_path):
    path = write(tmp_path, BASE + "include:\n  - {a: 1, b: x}\n  - {a: 3}\n")
    assert_one_error(path, 11, "include entry misses factor(s): b")


def test_unknown_factor_in_knobs(tmp_path):
    path = write(tmp_path, BASE + "knobs:\n  a: {role: knob_a}\n  zz: {role: knob_zz}\n")
    assert_one_error(path, 11, "knobs", "unknown factor 'zz'")


def test_unknown_factor_in_order_control(tmp_path):
    path = write(tmp_path, BASE + "order:\n  control:\n    a: 1\n    b: x\n    zz: 3\n")
    assert_one_error(path, 13, "order.control", "unknown factor 'zz'")


def test_order_control_missing_a_factor(tmp_path):
    path = write(tmp_path, BASE + "order:\n  seed: 3\n  control: {a: 1}\n")
    assert_one_error(path, 11, "order.control misses factor(s): b")


def test_unknown_factor_in_report_compare_factor(tmp_path):
    path = write(tmp_path, BASE + "report:\n  compare:\n    factor: zz\n    baseline: 1\n")
    assert_one_error(path, 11, "report.compare.factor", "unknown factor 'zz'")


def test_unknown_factor_in_report_compare_by(tmp_path):
    path = write(tmp_path, BASE + "report:\n  compare:\n    factor: a\n    baseline: 1\n"
                                  "    by:\n      - b\n      - zz\n")
    assert_one_error(path, 15, "report.compare.by", "unknown factor 'zz'")


def test_report_compare_baseline_not_a_level(tmp_path):
    path = write(tmp_path, BASE + "report:\n  compare:\n    factor: a\n    baseline: 5\n    by: [b]\n")
    assert_one_error(path, 12, "report.compare.baseline '5'", "factor 'a'")


def test_matrix_expands_to_zero_cells(tmp_path):
    path = write(tmp_path, BASE + "replicates: 2\nexclude:\n  - {a: [1, 2]}\n")
    assert_one_error(path, 10, "zero cells")


def test_workload_var_uses_unknown_variable(tmp_path):
    path = write(tmp_path, BASE.replace('    argv: [echo, "{{ a }}", "{{ b }}"]',
                                        '    argv:\n      - echo\n      - "{{ a }}-{{ b }}"\n'
                                        '      - "{{ nope }}"'))
    assert_one_error(path, 11, "workload.vars.argv.2", "unknown variable 'nope'")


def test_workload_var_may_use_run_variables(tmp_path):
    path = write(tmp_path, BASE.replace('"{{ b }}"]', '"{{ b }}", "{{ run_id }}", "{{ replicate }}"]'))
    assert load_spec(path).warnings == []


def test_workload_var_jinja_syntax_error(tmp_path):
    path = write(tmp_path, BASE + '    label: "{{ a "\n')
    assert_one_error(path, 9, "template error in workload.vars.label")


def test_order_strategy_restricted_is_accepted(tmp_path):
    # Restricted plans arrived with the design-of-experiments issue (tests/unit/plan/test_design_restricted.py).
    spec = load_spec(write(tmp_path, BASE + "order:\n  seed: 1\n  strategy: restricted\n"))
    assert spec.order["strategy"] == "restricted" and spec.visits == spec.data["replicates"]


def test_order_strategy_unknown(tmp_path):
    path = write(tmp_path, BASE + "order:\n  strategy: shuffled\n")
    assert_one_error(path, 10, "order.strategy")


# ---------------------------------------------------------------- several errors

def test_several_semantic_errors_reported_sorted_by_line(tmp_path):
    path = write(tmp_path, """\
        report:
          compare:
            factor: zz
            baseline: 1
        name: "bad name"
        factors:
          a: [1, 2]
          b: [x, y]
        zip:
          - [a, b, c]
        workload:
          role: workload_command
          vars:
            argv: [echo, "{{ a }}", "{{ b }}", "{{ nope }}"]
        """)
    errs = errors_of(path)
    assert [e.line for e in errs] == [3, 5, 10, 14]
    assert "report.compare.factor" in errs[0].message
    assert "invalid experiment name" in errs[1].message
    assert "unknown factor 'c'" in errs[2].message
    assert "unknown variable 'nope'" in errs[3].message
    assert [int(line.split(":")[1]) for line in str(SpecErrors(errs)).splitlines()] == [3, 5, 10, 14]


def test_several_schema_errors_reported_sorted_by_line(tmp_path):
    path = write(tmp_path, """\
        warmup: -1
        name: t
        colour: red
        factors:
          a: [1, 2]
        replicates: many
        workload:
          role: workload_command
        """)
    errs = errors_of(path)
    assert [e.line for e in errs] == [1, 3, 6]
    assert "warmup" in errs[0].message
    assert "unknown key 'colour'" in errs[1].message
    assert "replicates" in errs[2].message


# ---------------------------------------------------------------- valid specs

def test_quickstart_loads_with_defaults():
    spec = load_spec(QUICKSTART)
    assert spec.name == "quickstart"
    assert len(spec.cells) == 8
    assert len({c.cell_id for c in spec.cells}) == 8
    assert spec.factor_names == ["rw", "bs", "iodepth"]
    assert spec.order["control_every"] == 10
    assert spec.order["strategy"] == "random"
    assert spec.order["seed"] == 42
    assert spec.order["control"] is None
    assert spec.control_cell() is None
    assert spec.workload["success"] == {"exit_code": 0}
    assert spec.workload["metrics"] == {}
    assert spec.workload["timeout"] == 60
    assert spec.data["zip"] == [] and spec.data["exclude"] == [] and spec.data["include"] == []
    assert spec.data["knobs"] == {} and spec.knobs == {}
    assert spec.data["before_run"] == []
    assert spec.data["replicates"] == 3 and spec.data["warmup"] == 1
    assert spec.warnings == []


def test_defaults_filled_in_minimal_spec(tmp_path):
    spec = load_spec(write(tmp_path, BASE))
    assert spec.data["replicates"] == 3
    assert spec.data["warmup"] == 0
    assert spec.data["hosts"] == "localhost"
    assert spec.data["inventory"] == "config/inventory/local.yml"
    assert spec.order == {"strategy": "random", "seed": 1, "control": None,
                          "control_every": 10, "visits": None}
    assert spec.workload["timeout"] == 600
    assert spec.workload["success"]["exit_code"] == 0
    assert spec.data["report"] == {"metrics": [], "compare": None}


def test_knob_costs_parsed(tmp_path):
    spec = load_spec(write(tmp_path, BASE + "knobs:\n  a: {role: knob_a, cost: reboot}\n"
                                            "  b: {role: knob_b, cost: {class: restart, seconds: 12}}\n"))
    assert spec.knobs["a"].cost_class == "reboot" and spec.knobs["a"].cost_seconds == 300.0
    assert spec.knobs["b"].cost_class == "restart" and spec.knobs["b"].cost_seconds == 12.0
    assert spec.knobs["a"].role == "knob_a"


def test_unused_factor_is_a_warning_with_its_line(tmp_path):
    path = write(tmp_path, BASE.replace("  b: [x, y]", "  b: [x, y]\n  c: [p, q]"))
    spec = load_spec(path)
    assert len(spec.cells) == 8
    assert len(spec.warnings) == 1
    assert spec.warnings[0].startswith(f"{path}:5: warning:")
    assert "factor 'c'" in spec.warnings[0]


def test_knob_factor_without_var_is_not_warned(tmp_path):
    path = write(tmp_path, BASE.replace("  b: [x, y]", "  b: [x, y]\n  c: [p, q]")
                 + "knobs:\n  c: {role: knob_c}\n")
    assert load_spec(path).warnings == []


# ---------------------------------------------------------------- digest

def test_digest_ignores_key_order_and_comments(tmp_path):
    one = write(tmp_path, BASE + "replicates: 4\nwarmup: 1\n", "one.yaml")
    two = write(tmp_path, """\
        # the same experiment, written differently
        warmup: 1   # one warm-up
        workload:
          vars:
            argv: [echo, "{{ a }}", "{{ b }}"]
          role: workload_command
        replicates: 4
        factors:
          a: [1, 2]
          b: [x, y]
        name: t
        """, "two.yaml")
    assert load_spec(one).digest == load_spec(two).digest


def test_digest_changes_when_factors_are_reordered(tmp_path):
    # The factor order is the matrix order, so the plan changes and must be re-made.
    one = write(tmp_path, "name: t\nfactors:\n  a: [1, 2]\n  b: [x, y]\nworkload: {role: workload_x}\n", "one.yaml")
    two = write(tmp_path, "name: t\nfactors:\n  b: [x, y]\n  a: [1, 2]\nworkload: {role: workload_x}\n", "two.yaml")
    assert load_spec(one).digest != load_spec(two).digest


def test_digest_changes_with_a_level(tmp_path):
    one = write(tmp_path, BASE, "one.yaml")
    two = write(tmp_path, BASE.replace("b: [x, y]", "b: [x, z]"), "two.yaml")
    assert load_spec(one).digest != load_spec(two).digest


def test_digest_is_stable_across_loads(tmp_path):
    path = write(tmp_path, BASE)
    assert load_spec(path).digest == load_spec(path).digest


# ---------------------------------------------------------------- render_vars

def test_render_vars_exact_template_keeps_type():
    assert render_vars("{{ x }}", {"x": 4}) == 4
    assert render_vars("{{x}}", {"x": True}) is True
    assert render_vars("{{ x }}", {"x": 1.5}) == 1.5


def test_render_vars_mixed_template_renders_string():
    assert render_vars("{{ x }}k", {"x": 4}) == "4k"
    assert render_vars("-b={{ x }}", {"x": 4}) == "-b=4"
    assert render_vars("{{ x }}{{ y }}", {"x": 4, "y": 2}) == "42"


def test_render_vars_recurses_and_leaves_plain_values():
    value = {"argv": ["fio", "--bs={{ bs }}", "{{ n }}"], "direct": 1, "name": "plain"}
    assert render_vars(value, {"bs": "4k", "n": 8}) == {
        "argv": ["fio", "--bs=4k", 8], "direct": 1, "name": "plain"}


def test_render_vars_undefined_variable_raises():
    with pytest.raises(jinja2.UndefinedError):
        render_vars("{{ y }}", {"x": 4})
    with pytest.raises(jinja2.UndefinedError):
        render_vars("a{{ y }}", {"x": 4})


@pytest.mark.parametrize("template", [
    "{{ x.__class__ }}",
    "{{ x.__class__.__mro__ }}",
    "{{ ''.__class__.__base__.__subclasses__() }}",
    "{{ x | attr('__class__') }}",
    "pre {{ x.__class__.__name__ }}",
])
def test_render_vars_sandbox_refuses_attribute_escapes(template):
    with pytest.raises(jinja2.exceptions.SecurityError):
        render_vars(template, {"x": 4})


def test_render_vars_trailing_newline_is_a_mixed_template():
    assert render_vars("{{ x }}\n", {"x": 4}) == "4\n"


# ---------------------------------------------------------------- CLI

def test_cli_validate_bad_spec(tmp_path, capsys):
    path = write(tmp_path, BASE + "replicates: 2\nexclude:\n  - a: 3\n")
    assert main(["validate", str(path)]) == 2
    out, err = capsys.readouterr()
    assert f"{path}:11: exclude entry: '3' is not a level of factor 'a'" in err.splitlines()[0]
    assert "Traceback" not in err and "Traceback" not in out


def test_cli_validate_reports_every_error_line(tmp_path, capsys):
    path = write(tmp_path, BASE.replace("name: t", "name: bad name") + "knobs:\n  zz: {role: knob_zz}\n")
    assert main(["validate", str(path)]) == 2
    _, err = capsys.readouterr()
    lines = err.strip().splitlines()
    # Line 10 twice: the knob names no factor, and no knob_zz role ships (issue 24).
    assert len(lines) == 3
    assert lines[0].startswith(f"{path}:1: ")
    assert lines[1].startswith(f"{path}:10: ") and lines[2].startswith(f"{path}:10: ")
    assert any("unknown knob role 'knob_zz' (knob roles: knob_cpu_affinity, " in ln for ln in lines), lines
    assert "Traceback" not in err


def test_cli_validate_yaml_error(tmp_path, capsys):
    path = write(tmp_path, "name: t\nfactors: [\n")
    assert main(["validate", str(path)]) == 2
    _, err = capsys.readouterr()
    assert re.match(re.escape(str(path)) + r":\d+: YAML syntax error", err)
    assert "Traceback" not in err


def test_cli_validate_quickstart(capsys):
    assert main(["validate", str(QUICKSTART)]) == 0
    out, err = capsys.readouterr()
    assert "ok" in out and "8 cells" in out
    assert "Traceback" not in err


def test_cli_validate_prints_warnings(tmp_path, capsys):
    path = write(tmp_path, BASE.replace("  b: [x, y]", "  b: [x, y]\n  c: [p, q]"))
    assert main(["validate", str(path)]) == 0
    _, err = capsys.readouterr()
    assert f"{path}:5: warning:" in err


def test_report_primary_must_be_among_report_metrics(tmp_path):
    path = write(tmp_path, BASE + "report:\n  metrics: [tps, p99_ms]\n  primary:\n    - tps\n    - iops\n")
    assert_one_error(path, 13, "report.primary names 'iops'", "not in report.metrics (tps, p99_ms)")


def test_report_primary_subset_is_valid_and_absent_means_every_metric(tmp_path):
    from benchmatrix.analyze.comparisons import family_metrics

    spec = load_spec(write(tmp_path, BASE + "report:\n  metrics: [tps, p99_ms]\n  primary: [p99_ms]\n"))
    assert family_metrics(spec) == ["p99_ms"]
    spec = load_spec(write(tmp_path, BASE + "report:\n  metrics: [tps, p99_ms]\n"))
    assert family_metrics(spec) == ["tps", "p99_ms"]


def test_name_templates_need_no_jinja2_and_a_failing_template_is_caught_by_render_failures(tmp_path):
    # A batch job loads the spec and renders each run's vars: "{{ name }}" (the quickstart's
    # every template) is the name itself, without importing Jinja2 (a quarter of a batch
    # job's CPU). A template that needs Jinja2 imports it, and its errors are caught.
    import subprocess
    import sys

    spec = tmp_path / "s.yaml"
    spec.write_text("name: s\nfactors:\n  bs: [4k, 8k]\nworkload:\n  role: workload_fio\n"
                    "  vars: {bs: '{{ bs }}', rw: read}\nreplicates: 1\n")
    probe = f"""
import sys
from benchmatrix.spec.load import load_spec, render_failures, render_vars
s = load_spec({str(spec)!r})
assert render_vars(s.workload["vars"], {{"bs": "4k"}}) == {{"bs": "4k", "rw": "read"}}
print("jinja2" in sys.modules)
try:
    render_vars("{{{{ missing | int }}}}x", {{}})
except render_failures() as exc:
    print(type(exc).__name__)
"""
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert res.stdout.split() == ["False", "UndefinedError"], res.stdout + res.stderr
    # "{{ true }}" is Jinja2's constant, not an unknown variable, as before.
    spec.write_text("name: s\nfactors:\n  bs: [4k, 8k]\nworkload:\n  role: workload_command\n"
                    "  vars: {argv: [echo, '{{ bs }}', '{{ true }}']}\nreplicates: 1\n")
    assert load_spec(spec).workload["vars"]["argv"][2] == "{{ true }}"


def test_whole_variable_is_the_one_rule_for_a_template_that_is_its_variable():
    # One rule for the spec's checks, the batch's render and the report's request sizes.
    from benchmatrix.spec.load import whole_variable

    assert whole_variable("{{ bs }}") == "bs"
    assert whole_variable("{{bs}}") == "bs"
    assert whole_variable("{{ true }}") is None  # Jinja2's constant
    assert whole_variable("{{ bs }}k") is None
    assert whole_variable("{{ bs | int }}") is None
    assert whole_variable("bs") is None
