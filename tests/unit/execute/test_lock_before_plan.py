"""A command that needs plan.csv, run while a ``bmx run`` holds the experiment but has not
written its plan yet (issue 35, item 7): the lock's refusal (exit 4, the holder named),
not "no plan yet". The holder is a real process with the real lock; no Snakemake."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmatrix import cli

ROOT = Path(__file__).resolve().parents[3]
QUICKSTART = str(ROOT / "config" / "experiments" / "quickstart.yaml")
HOLD = ("import sys; from pathlib import Path; from benchmatrix.execute import lock; "
        "fh = lock.acquire(Path(sys.argv[1]), 'bmx run'); print('held', flush=True); sys.stdin.read()")


@pytest.fixture
def exp(tmp_path, monkeypatch):
    monkeypatch.setenv("BMX_PROJECT_DIR", str(tmp_path))
    return tmp_path / "results" / "quickstart"


@pytest.fixture
def starting_run(exp):
    """A bmx run that took the experiment's lock and is still planning (no plan.csv)."""
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(exp)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        yield child
    finally:
        child.stdin.close()
        child.wait(timeout=30)


@pytest.mark.parametrize("argv", [["rerun", QUICKSTART, "--failed"], ["report", QUICKSTART],
                                  ["status", QUICKSTART]])
def test_a_command_needing_the_plan_gives_the_locks_refusal_while_a_run_starts(starting_run, exp, capsys, argv):
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == 4, err
    assert "no plan yet" not in err
    assert f"experiment quickstart is in use by another bmx or snakemake process (pid {starting_run.pid} (bmx run)" \
        in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert not (exp / "plan.csv").exists()


@pytest.mark.parametrize("argv", [["rerun", QUICKSTART, "--failed"], ["report", QUICKSTART],
                                  ["status", QUICKSTART]])
def test_without_a_holder_a_missing_plan_is_still_no_plan_yet(exp, capsys, argv):
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == 1 and "no plan yet" in err, err
    assert not exp.exists(), "asking for a plan that is not there made the experiment's directory"
    exp.mkdir(parents=True)  # an experiment whose run ended before it planned (its lock file left empty)
    (exp / ".bmx.lock").write_text("")
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == 1 and "no plan yet" in err, err
