"""Each process of a campaign imports only what it uses (issue 34, item 4): pandas,
numpy, scipy and matplotlib cost 0.1-0.5 CPU-s each per process, and a known 1-host
campaign of 10 no-op runs should cost at most 5 controller CPU-s in all.

Each check imports in a fresh interpreter and lists what got loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from unit.report.test_report_cost import _loaded_after

from benchmatrix import layout
from benchmatrix.layout import FAILED_STATES as FAILED

ROOT = Path(__file__).resolve().parents[3]


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
    from unit.results.test_run_states import CASES, campaign

    from benchmatrix.spec.load import load_spec

    spec = load_spec(ROOT / "config" / "experiments" / "quickstart.yaml")
    exp, _, _, _ = campaign(spec, tmp_path)
    # What a campaign that compares nothing prints at its end: each cell's numbers.
    cells = [{"cell": "c1", "n": 3, "mean": 1234.5, "ci_low": 1200.0, "ci_high": None}]
    (exp / layout.FINDINGS).write_text(json.dumps({
        "configured": False, "findings": [], "counts": {}, "total": 0, "warnings": [],
        "numbers": [{"metric": "read_iops", "unit": "IO/s", "better": "higher", "cells": cells}],
        "report": {"html": "report.html", "md": "report.md"}}))
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
        "shown = io.StringIO()\n"
        "print_findings(exp, shown)\n"
        "assert '1,234' in shown.getvalue() and 'c1' in shown.getvalue(), shown.getvalue()")
    assert "benchmatrix" in loaded
    assert "pandas" not in loaded
    assert "numpy" not in loaded


def _child(statement: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``statement`` in a fresh interpreter with ``env`` added to this one's environment."""
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    from benchmatrix.spec.load import SCHEMA_OK_ENV

    # Not this process's answer (a load_spec here sets it): only what the test gives.
    full = {**{k: v for k, v in os.environ.items() if k != SCHEMA_OK_ENV}, **env,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, cwd=ROOT)


def test_a_job_loads_the_spec_its_parent_checked_without_jsonschema(tmp_path):
    # bmx run (or Snakemake) checks the spec against its JSON Schema; the processes it
    # starts (Snakemake, the plan, batch and collect jobs) load the same spec again, and
    # importing jsonschema costs each about 0.09 CPU-s. The schema's answer for the same
    # document travels in the environment; any other document is checked in full.
    from benchmatrix.spec.load import SCHEMA_OK_ENV

    qs = str(ROOT / "config" / "experiments" / "quickstart.yaml")
    parent = _child("import os\nfrom benchmatrix.spec.load import SCHEMA_OK_ENV, load_spec\n"
                    f"load_spec({qs!r})\nprint(os.environ[SCHEMA_OK_ENV])", {})
    assert parent.returncode == 0, parent.stderr
    passed = parent.stdout.splitlines()[0]
    assert "jsonschema" in json.loads(parent.stdout.splitlines()[-1])  # the parent did check it
    job = _child(f"from benchmatrix.spec.load import load_spec\nload_spec({qs!r})", {SCHEMA_OK_ENV: passed})
    assert job.returncode == 0, job.stderr
    loaded = json.loads(job.stdout.splitlines()[-1])
    assert "benchmatrix" in loaded and "yaml" in loaded
    assert "jsonschema" not in loaded

    # The spec edited since (an unknown key): the schema's own error, not a skipped check.
    edited = tmp_path / "quickstart.yaml"
    edited.write_text(Path(qs).read_text() + "colour: blue\n")
    bad = _child(f"from benchmatrix.spec.load import load_spec\nload_spec({str(edited)!r})", {SCHEMA_OK_ENV: passed})
    assert bad.returncode != 0
    assert "unknown key 'colour'" in bad.stderr
