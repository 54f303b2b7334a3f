"""The benchmarks in bench/ still run: their --quick variants, results in tmp_path.

Only the cheap ones (no peers to install, no root): scale, report, publish and
overhead's bare-versus-bmx smoke run. The published figures come from the full runs
(bench/README.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # about 37 s together

ROOT = Path(__file__).resolve().parents[2]


def run_bench(script: str, tmp_path: Path) -> dict:
    env = {**os.environ, "BMX_BENCH_RESULTS": str(tmp_path)}
    res = subprocess.run([sys.executable, str(ROOT / "bench" / script), "--quick"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    name = script.removesuffix(".py") + "_quick.json"
    assert f"wrote {tmp_path / name}" in res.stdout
    return json.loads((tmp_path / name).read_text())


def test_scale_quick(tmp_path):
    data = run_bench("scale.py", tmp_path)
    assert {r["runs"] for r in data["planning"]} == {1000, 2000}
    assert all(r["plan_job_s"] > 0 and r["plan_job_peak_rss_mib"] > 0 for r in data["planning"])
    assert all(r["batch_jobs"] >= 20 for r in data["dry_run"])
    assert data["machine"]["nproc"] >= 1


def test_report_quick(tmp_path):
    data = run_bench("report.py", tmp_path)
    with_records = [r for r in data["rows"] if r["records"]]
    assert with_records and all(r["collect_s"] > 0 and r["report_s"] > 0 for r in with_records)
    assert any(not r["records"] for r in data["rows"])


def test_overhead_quick(tmp_path):
    data = run_bench("overhead.py", tmp_path)
    cpu = data["workloads"]["cpu"]["summary"]
    assert set(cpu) == {"bare", "bmx"}
    assert cpu["bmx"]["median_wall_per_run_s"] > cpu["bare"]["median_wall_per_run_s"] > 0
    phases = data["workloads"]["cpu"]["bmx_phases_median"]
    # Every second of the campaign is attributed to a phase.
    assert abs(phases["unaccounted"]) < 0.05, phases


def test_publish_quick(tmp_path):
    data = run_bench("publish.py", tmp_path)
    (row,) = data["rows"]
    assert (row["campaigns"], row["cells"], row["series"]) == (5, 50, 50)
    assert row["wall_s"] > 0 and row["site_mib"] > 0 and row["steps"] >= 1     # the planted step at least
