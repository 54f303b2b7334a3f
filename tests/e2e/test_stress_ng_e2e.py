"""workload_stress_ng for real on localhost: a two-cell bmx run (one-second cpu stressor,
one or two instances) through Snakemake, ansible-runner and the batch runner, then the
records with the parsed metrics (docs/contributing.md's worked example of a workload)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("stress-ng") is None, reason="needs stress-ng")]

SPEC = """\
name: {name}
inventory: config/inventory/test.yml
factors:
  workers: [1, 2]
workload:
  role: workload_stress_ng
  vars:
    stressors: {{cpu: "{{{{ workers }}}}"}}
    timeout: 1
    options: {{cpu-method: int64}}
  timeout: 30
replicates: 1
warmup: 0
"""


def test_stress_ng_cpu_records_its_bogo_ops(project):
    spec = project.write_spec("wl_stress_ng", SPEC.format(name="wl_stress_ng"))
    res = project.bmx("run", str(spec), "--cores", "1")
    recs = [json.loads(p.read_text()) for p in sorted(Path(project.exp("wl_stress_ng")).glob("runs/*/*/record.json"))]
    assert res.returncode == 0, res.stdout + res.stderr + json.dumps([r.get("reason") for r in recs])
    assert len(recs) == 2 and all(r["status"] == "ok" for r in recs), [(r["run_id"], r["reason"]) for r in recs]
    for rec in recs:
        m = rec["metrics"]
        assert m["bogo_ops_per_s"]["unit"] == "ops/s" and m["bogo_ops_per_s"]["value"] > 0
        assert m["bogo_ops"]["unit"] == "ops" and 0.5 < m["wall_s"]["value"] < 10
        assert list(rec["details"]["jobs"]) == ["cpu"]
