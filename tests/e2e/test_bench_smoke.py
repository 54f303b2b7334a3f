"""The benchmarks in bench/ still run: their --quick variants, results in tmp_path.

Only the cheap ones (no peers to install): floor, held_connection, scale, report (also --fixed), publish, overhead's
bare-versus-bmx smoke run and targets' rows a and d-f at tiny sizes (d and e need
root). Rows i and j (issue 23) are left to `bench/targets.py --quick --only i,j`: five
small campaigns would add about 3 minutes to the suite, and what they time has e2e tests
of its own (test_live_knobs_e2e.py, the campaign passes in test_e2e_local.py). So is row
g (`--quick --only g`, issue 36): its namespace hosts and their campaign were 31 of the
smoke's 145 s, and bmx over several SSH hosts has its own (test_hosts_ssh.py). The
published figures come from the full runs (bench/README.md).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # about 2 minutes together on a shared 2-core machine

ROOT = Path(__file__).resolve().parents[2]


def run_bench(script: str, tmp_path: Path, timeout: float = 300, *args: str) -> dict:
    env = {**os.environ, "BMX_BENCH_RESULTS": str(tmp_path)}
    res = subprocess.run([sys.executable, str(ROOT / "bench" / script), "--quick", *args], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    name = script.removesuffix(".py") + "_quick.json"
    assert f"wrote {tmp_path / name}" in res.stdout
    return json.loads((tmp_path / name).read_text())


def test_scale_quick(tmp_path):
    data = run_bench("scale.py", tmp_path)
    assert {(r["design"], r["runs"]) for r in data["planning"]} == {("random", 1000), ("restricted", 1000)}
    assert all(r["plan_job_s"] > 0 and r["plan_job_peak_rss_mib"] > 0 for r in data["planning"])
    assert all(r["batch_jobs"] >= 20 for r in data["dry_run"])
    assert data["machine"]["nproc"] >= 1


def test_floor_quick(tmp_path):
    data = run_bench("floor.py", tmp_path)
    parts = data["parts"]
    assert set(parts) == {"python", "snakemake", "plan floor", "report floor", "ansible 0", "ansible 1"}
    assert all(p["wall_s"] > 0 and p["rounds"] == 1 for p in parts.values())
    q = data["quickstart_floor"]
    assert math.isclose(q["wall_s"], sum(parts[k]["wall_s"] for k in q["parts"]))


def test_held_connection_quick(tmp_path):
    # Issue 34, item 5's measurement: one namespace SSH host, three ways to start a program.
    import netns

    if netns.available():
        pytest.skip(netns.available())
    data = run_bench("held_connection.py", tmp_path)
    variants = data["variants"]
    assert set(variants) == {"ansible call", "ssh, held master", "ssh, new"}
    assert all(v["cpu_s"] > 0 and len(v["rounds"]) == 2 for v in variants.values())


def test_report_quick(tmp_path):
    data = run_bench("report.py", tmp_path)
    with_records = [r for r in data["rows"] if r["records"]]
    assert with_records and all(r["collect_s"] > 0 and r["report_s"] > 0 for r in with_records)
    assert any(not r["records"] for r in data["rows"])


def test_report_fixed_quick(tmp_path):
    env = {**os.environ, "BMX_BENCH_RESULTS": str(tmp_path)}
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "report.py"), "--fixed", "--quick"], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    rows = {r["campaign"]: r for r in json.loads((tmp_path / "report_fixed_quick.json").read_text())["rows"]}
    assert rows["tiny"]["runs"] == 30 and rows["quickstart"]["plots"] == 6
    for r in rows.values():
        assert 0 < r["imports_s"] < r["importtime_run_s"] and r["collect_s_median"] > 0
        assert "pandas" in r["heavy_imported"]
        # Neither campaign has a control cell: no check needs scipy.stats.
        assert "scipy.stats" not in r["heavy_imported"]


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


def test_targets_quick(tmp_path):
    # Under 60 s on an idle machine; the timeout leaves room for a shared, busy one.
    data = run_bench("targets.py", tmp_path, 900, "--only", "a,b,c,d,e,f,h")
    rows = {r["row"]: r for r in data["targets"]}
    assert sorted(rows) == list("abcdefghij")  # every target has a row, measured or saying why not
    assert {k for k, r in rows.items() if r["benchmatrix"] == "not run"} == {"b", "c", "g", "h", "i", "j"}
    sl = data["sections"]["local_slope"]["variants"]
    # A slope from a smoke run's tiny campaigns is noise around a few ms (both sizes are
    # one batch now), so only its presence is checked, not its sign.
    assert math.isfinite(sl["bmx"]["marginal_per_run_s"]) and len(sl["bare"]["points"]) == 2
    assert len(sl["bmx"]["points"]) == 2
    (col,) = data["sections"]["collect"]["rows"]
    assert col["runs"] >= 200 and col["collect_s"] > 0 and col["peak_rss_mib"] > 0
    assert rows["f"]["met"] is None  # 1M records only with --full
    assert data["machine"]["loadavg_at_start"]
    assert "many_hosts" not in data["sections"]
    if os.geteuid() == 0:
        (knob,) = data["sections"]["knobs"]["cases"].values()
        assert knob["no-op_added_s"] is not None and knob["direct_change_s"] >= 0
        assert rows["d"]["met"] is not None
