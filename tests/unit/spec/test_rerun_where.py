"""`bmx rerun --where`: a safe expression language, never Python evaluation (issue 13.3).

Fast: a real plan and real record files, no Snakemake or Ansible run.
"""

from __future__ import annotations

import pytest

from benchmatrix.execute.planning import plan
from benchmatrix.layout import exp_dir_of
from benchmatrix.plan.design import read_plan
from benchmatrix.results.records import base_record as _base_record
from benchmatrix.results.records import write_record
from benchmatrix.results.status import select_reruns
from benchmatrix.spec.load import load_spec
from benchmatrix.spec.where import Where, WhereError

SPEC = """\
name: where_case
inventory: config/inventory/test.yml
factors:
  bs: [4k, 64k]
  depth: [1, 16]
workload:
  role: workload_command
  vars: {argv: [/bin/true]}
  metrics:
    tps: {regex: 'tps = (?P<value>[0-9.]+)', unit: tx/s, better: higher}
replicates: 2
warmup: 0
order: {strategy: random, seed: 3}
"""


@pytest.fixture
def campaign(project):
    """A planned campaign whose runs all have one record: depth 16 failed, the rest ok."""
    spec_path = project.write_spec("where_case", SPEC)
    spec = load_spec(str(spec_path))
    exp = exp_dir_of(project.root, spec)
    plan(str(spec_path), project.root, exp / "plan.csv", 50)
    runs, _ = read_plan(exp / "plan.csv")
    for r in runs:
        ok = str(r.factors["depth"]) == "1"
        write_record(exp, _base_record(spec, r, r.host, r.batch, r.factors, {}) | {
            "status": "ok" if ok else "failed", "reason": "" if ok else "exit status 1",
            "metrics": {"tps": {"value": 100.0 if r.factors["bs"] == "4k" else 250.0, "unit": "tx/s"}} if ok else {}})
    return project, spec, exp, runs


def picked(exp, spec, expr):
    return select_reruns(exp, spec.factor_names, False, expr)


def test_injection_through_where_never_runs(campaign, tmp_path):
    project, spec, exp, runs = campaign
    marker = tmp_path / "pwned"
    for expr in (f"@pd.io.common.os.system('touch {marker}') == 0",
                 f"__import__('os').system('touch {marker}') == 0",
                 f"bs.__class__ == 'x' or open('{marker}', 'w')",
                 "[x for x in ().__class__.__base__.__subclasses__()]"):
        with pytest.raises(WhereError) as info:
            picked(exp, spec, expr)
        assert "\n" not in str(info.value) and "--where" in str(info.value)
        assert not marker.exists(), f"{expr} ran"
    # The same through the command line: one line on stderr, nothing run, nothing re-planned.
    res = project.bmx("rerun", str(project.root / "config/experiments/where_case.yaml"),
                      "--where", f"@pd.io.common.os.system('touch {marker}') == 0")
    assert res.returncode == 1 and res.stderr.count("\n") == 1 and "syntax error" in res.stderr, res.stderr
    assert not marker.exists()
    assert not (exp / "reruns.csv").exists()


def test_where_factors_results_literals_in_and_or_not(campaign):
    _, spec, exp, runs = campaign
    measured = [r for r in runs if not r.warmup]
    ids = lambda pred: sorted(r.run_id for r in measured if pred(r))  # noqa: E731

    def got(expr):
        return sorted(run_id for run_id, _ in picked(exp, spec, expr))

    assert got("bs == '4k'") == ids(lambda r: r.factors["bs"] == "4k")
    assert got("depth == 16") == ids(lambda r: str(r.factors["depth"]) == "16")  # number against plan text
    assert got("depth > 1 and bs != '64k'") == ids(
        lambda r: str(r.factors["depth"]) == "16" and r.factors["bs"] == "4k")
    assert got("status in ['failed', 'timeout']") == ids(lambda r: str(r.factors["depth"]) == "16")
    assert got("not (status == 'ok') or bs not in ('4k',)") == ids(
        lambda r: str(r.factors["depth"]) == "16" or r.factors["bs"] == "64k")
    assert got("tps >= 200") == ids(lambda r: str(r.factors["depth"]) == "1" and r.factors["bs"] == "64k")
    assert got("tps < 200") == ids(lambda r: str(r.factors["depth"]) == "1" and r.factors["bs"] == "4k")
    assert got("attempt == 1 and replicate <= 1") == ids(lambda r: r.replicate <= 1)
    assert got("tps == None") == ids(lambda r: str(r.factors["depth"]) == "16")
    assert got("0 < depth < 10") == ids(lambda r: str(r.factors["depth"]) == "1")


@pytest.mark.parametrize("expr, words", [
    ("bs == ", "syntax error"),
    ("colour == 'red'", "unknown column 'colour'"),
    ("bs.upper() == '4K'", "not allowed"),
    ("bs[0] == '4'", "not allowed"),
    ("depth + 1 == 2", "not allowed"),
    ("depth == (lambda: 1)()", "not allowed"),
    ("bs in 'abc4k'", "needs a list"),
    ("bs < 4", "cannot compare"),
    ("depth == -bs", "not allowed"),
])
def test_where_errors_are_one_line(campaign, expr, words):
    _, spec, exp, _ = campaign
    with pytest.raises(WhereError) as info:
        picked(exp, spec, expr)
    msg = str(info.value)
    assert words in msg and "\n" not in msg and msg.startswith("--where "), msg


def test_where_unit():
    w = Where("a in [1, -2.5] and b == 'x'", ["a", "b"])
    assert w.matches({"a": "-2.5", "b": "x"}) and not w.matches({"a": 3, "b": "x"})
    assert Where("not a", ["a"]).matches({"a": False})
    with pytest.raises(WhereError):
        Where("a == b'bytes'", ["a"])


@pytest.mark.parametrize("expr", [
    "not " * 1000 + "a == 1",                       # the 1000 chained 'not' (RecursionError)
    "not " * 100_000 + "a == 1",                    # the parser itself runs out (MemoryError)
    "(" * 250 + "a == 1" + ")" * 250,
    " and ".join(["a == 1"] * 5000),
    "a == 1 " + "or (a == 1 " * 90 + ")" * 90,
    "-" * 3000 + "1 == a",
])
def test_deep_or_huge_where_is_one_line_error(expr):
    with pytest.raises(WhereError) as info:
        Where(expr, ["a"])
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("--where ") and len(msg) < 400, msg[:500]


def test_where_nesting_within_the_limit_still_works():
    assert Where("not " * 20 + "a == 1", ["a"]).matches({"a": 1})
    assert Where("(" * 20 + "a == 1" + ")" * 20, ["a"]).matches({"a": 1})
