"""Each process of a campaign imports only what it uses (issue 34, item 4): pandas,
numpy, scipy and matplotlib cost 0.1-0.5 CPU-s each per process, and a known 1-host
campaign of 10 no-op runs should cost at most 5 controller CPU-s in all.

Each check imports in a fresh interpreter and lists what got loaded.
"""

from __future__ import annotations

from unit.report.test_report_cost import _loaded_after

from benchmatrix.layout import FAILED_STATES as FAILED


def test_bmx_run_tells_a_fixed_design_without_pandas():
    # supervise.execute asks settings_of whether the campaign is adaptive before its first pass.
    loaded = _loaded_after("from benchmatrix.analyze.adaptive import settings_of\n"
                           "from benchmatrix.spec.load import load_spec\n"
                           "assert settings_of(load_spec('config/experiments/quickstart.yaml')) is None")
    assert "benchmatrix" in loaded
    assert "pandas" not in loaded
    assert "numpy" not in loaded



def test_a_job_imports_only_its_own_task():
    # Every scripts/TASK.py goes through execute.entry: the plan job needs neither the
    # batch machinery (leases, Ansible, records) nor collect's tables, and so on.
    loaded = _loaded_after("from benchmatrix.execute.entry import TASKS\n"
                           # _loaded_after lists top-level names: the submodules as such names
                           "sys.modules.update({m.replace('.', '/'): sys for m in list(sys.modules)\n"
                           "                    if m.startswith('benchmatrix.')})")
    assert "benchmatrix/execute/entry" in loaded
    assert not {f"benchmatrix/execute/{m}" for m in ("batch", "collect", "planning", "restore", "lease",
                                                         "ansible")} & set(loaded)


def test_bmx_runs_end_of_run_status_without_pandas(tmp_path):
    # What execute() does once its passes end: the states of every run (the one rule,
    # results.status), its summary lines and the findings. pandas alone cost bmx run
    # about 0.45 CPU-s there.
    from unit.results.test_run_states import CASES, ROOT, campaign

    from benchmatrix.spec.load import load_spec

    spec = load_spec(ROOT / "config" / "experiments" / "quickstart.yaml")
    exp, _, _, _ = campaign(spec, tmp_path)
    want_failed = sum(1 for _, _, state, _ in CASES.values() if state == "failed")
    loaded = _loaded_after(
        "import io\n"
        "from benchmatrix.execute.supervise import done_lines\n"
        "from benchmatrix.report.terminal import print_findings\n"
        "from benchmatrix.results.status import campaign_status, exit_code\n"
        "from benchmatrix.spec.load import load_spec\n"
        f"exp = {str(exp)!r}\n"
        "status = campaign_status(exp, load_spec('config/experiments/quickstart.yaml').factor_names)\n"
        "out, err = done_lines(status, 1.0, 'quickstart.yaml')\n"
        f"assert exit_code(status) == 1 and sum(status['totals'][s] for s in {FAILED!r}) == {want_failed}\n"
        "assert 'failed' in out[0] and err\n"
        "print_findings(exp, io.StringIO())")
    assert "benchmatrix" in loaded
    assert "pandas" not in loaded
    assert "numpy" not in loaded
