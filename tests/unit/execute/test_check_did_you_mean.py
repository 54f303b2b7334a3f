"""bmx check: an option the workload's tool does not list gets "did you mean" with the
closest option of its help (issue 38, item 7)."""

from __future__ import annotations

from benchmatrix.execute.check import DryRun, HostCheck, _judge_dry_runs

HELP = "Usage: pgbench [OPTION]...\n  --client=NUM\n  --jobs=NUM\n  --time=NUM\n  --progress=NUM\n"


def test_an_unknown_option_names_the_closest_known_one():
    out = HostCheck("h1")
    dry = DryRun("options", ["pgbench", "--help"], ["c1"], options=["--clients", "--time"])
    _judge_dry_runs("h1", [dry], [{"rc": 0, "stdout": HELP, "stderr": "", "msg": ""}], out)
    assert len(out.blockers) == 1, out.blockers
    assert "unknown option(s) --clients" in out.blockers[0]
    assert out.blockers[0].endswith("; did you mean '--client'?"), out.blockers


def test_no_suggestion_when_nothing_is_close():
    out = HostCheck("h1")
    dry = DryRun("options", ["pgbench", "--help"], ["c1"], options=["--zzzzzz"])
    _judge_dry_runs("h1", [dry], [{"rc": 0, "stdout": HELP, "stderr": "", "msg": ""}], out)
    assert out.blockers and "did you mean" not in out.blockers[0]
