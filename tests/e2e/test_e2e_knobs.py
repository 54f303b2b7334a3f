"""End to end with knobs: `bmx run` sets the read-ahead of a loop device the test
creates and restricts fio to one core, records intended and actual knob states in
every record, and puts the read-ahead back to its baseline when the campaign ends."""

from __future__ import annotations

import json
import os

import pytest
from knobkit import LoopDevice

pytestmark = pytest.mark.slow

SPEC = """\
name: e2e_knobs
inventory: config/inventory/test.yml
factors:
  read_ahead_kb: [0, 512]
  cores: [1]
knobs:
  read_ahead_kb: {{role: knob_read_ahead, cost: none, vars: {{knob_read_ahead_path: "{mnt}/data"}}}}
  cores: {{role: knob_cpu_affinity, cost: none}}
workload:
  role: workload_fio
  vars: {{filename: "{mnt}/fio.dat", rw: read, bs: 64k, ioengine: psync, size: 4m, runtime: 200ms, time_based: 1}}
  timeout: 60
before_run: [drop_caches, fstrim]
replicates: 2
warmup: 0
order: {{strategy: random, seed: 11}}
"""


@pytest.fixture
def fs_loop(tmp_path):
    dev = LoopDevice(tmp_path / "loop", size_mb=64, mkfs=True)
    yield dev
    dev.close()


def test_run_with_knobs_records_states_and_restores_the_baseline(project, fs_loop):
    ra = fs_loop.sysfs("read_ahead_kb")
    ra.write_text("256\n")  # a baseline that is neither level
    spec = project.write_spec("e2e_knobs", SPEC.format(mnt=fs_loop.mountpoint))
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    exp = project.exp("e2e_knobs")
    records = [json.loads(p.read_text()) for p in exp.glob("runs/*/*/record.json")]
    assert len(records) == 4 and all(r["status"] == "ok" for r in records), [r["reason"] for r in records]
    cpu = min(os.sched_getaffinity(0))
    for r in sorted(records, key=lambda r: r["seq"]):
        k = r["knobs"]["read_ahead_kb"]
        assert k["intended"] == str(r["factors"]["read_ahead_kb"]) and k["actual"] == k["intended"], k
        assert k["ok"] and k["role"] == "knob_read_ahead" and "seconds" in k and isinstance(k["changed"], bool)
        c = r["knobs"]["cores"]
        assert c["intended"] == c["actual"] == "1" and c["changed"] is False, c
        assert [a["action"] for a in r["workload"]["before_run"]] == ["drop_caches", "fstrim"]
        result = json.loads((project.host_runs() / r["run_id"] / str(r["attempt"]) / "result.json").read_text())
        assert result["affinity"]["cpus"] == [cpu] and result["affinity_applied"] == [cpu], result
    # The first run of the campaign changed the read-ahead from its baseline.
    first = min(records, key=lambda r: r["seq"])
    assert first["knobs"]["read_ahead_kb"]["changed"] is True
    assert first["knobs"]["read_ahead_kb"]["baseline"] == "256"
    # Campaign end: back at the baseline, read back from the device itself.
    assert ra.read_text().strip() == "256"
    restored = json.loads((exp / "hosts" / "localhost" / "restored.json").read_text())
    assert restored["knobs"]["read_ahead_kb"]["actual"] == "256", restored
    facts = json.loads((exp / "hosts" / "localhost" / "facts.json").read_text())
    assert facts["online_cpus"] and "read_ahead_kb" in facts and facts["smt"]
