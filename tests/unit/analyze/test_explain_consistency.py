"""The checks the read-ahead case study made by hand (issue 37, item 3): the bytes the
workload says it read against those its device saw (throughput × runtime), and its IOPS ×
request size against its bandwidth. Synthetic runs.csv rows with a known truth; the
spec's request size read through the real spec loader."""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchmatrix.analyze.explain import consistency_warnings, request_sizes
from benchmatrix.spec.load import load_spec


def fio_runs(n=4, device_share=1.0, other_kib_s=0.0, bs_kib=8.0, real_kib=8.0, seed=3):
    """Runs of one cell: fio read 64 MiB in ``real_kib`` requests (what it says: ``bs_kib``);
    the device loop0 saw ``device_share`` of it plus ``other_kib_s`` from something else."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        runtime_s = 2.0 * np.exp(rng.normal(0, 0.05))
        duration_s = runtime_s + 0.04
        io_kib = 65536.0
        bw = io_kib / runtime_s
        device_kib = io_kib * device_share + other_kib_s * duration_s
        rows.append({"run_id": f"r{i}", "cell_id": "c0", "status": "ok", "warmup": False, "control": False,
                     "attempt": 1, "host": "h1", "duration_s": duration_s, "read_io_kib": io_kib,
                     "read_bw_kib": bw, "read_runtime_ms": runtime_s * 1000, "read_iops": bw / real_kib,
                     "disk_loop0_read_mib_s": device_kib / 1024 / duration_s,
                     "disk_vda_read_mib_s": 0.2, "disk_read_mib_s": 0.2})
    return pd.DataFrame(rows)


def test_a_workload_that_did_what_it_says_raises_nothing():
    assert consistency_warnings(fio_runs(), {"c0": 8.0}) == []


def test_reads_the_device_did_not_see_are_a_warning_naming_the_runs():
    # Served from the page cache: the device saw a tenth of what fio read.
    out = consistency_warnings(fio_runs(device_share=0.1), {"c0": 8.0})
    assert [w["check"] for w in out] == ["consistency_bytes"]
    w = out[0]
    assert w["severity"] == "warning" and w["runs_total"] == 4
    assert "loop0" in w["message"] and "0.1" in w["message"] and "page cache" in w["message"]
    assert w["details"][0].startswith("r0: the workload read 64 MiB, loop0 saw 6.4 MiB")


def test_a_device_busy_with_something_else_is_a_warning():
    out = consistency_warnings(fio_runs(other_kib_s=200_000.0), {"c0": 8.0})
    assert [w["check"] for w in out] == ["consistency_bytes"]
    assert "something else" in out[0]["message"]


def test_iops_times_the_request_size_against_the_bandwidth():
    # fio says 8 KiB requests but moved 64 KiB per IO (a job file's own bs).
    out = consistency_warnings(fio_runs(real_kib=64.0), {"c0": 8.0})
    assert [w["check"] for w in out] == ["consistency_request_size"]
    assert "8 KiB" in out[0]["message"] and "64 KiB" in out[0]["message"]
    # Without the cell's request size there is nothing to check it against.
    assert consistency_warnings(fio_runs(real_kib=64.0), {}) == []


def test_request_sizes_of_a_fio_spec(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("""\
name: sizes
inventory: config/inventory/local.yml
factors:
  bs: [4k, 1m, 512]
workload:
  role: workload_fio
  vars: {rw: read, bs: "{{ bs }}", size: 16m}
replicates: 1
""")
    spec = load_spec(path)
    sizes = request_sizes(spec)
    assert sorted(sizes.values()) == [0.5, 4.0, 1024.0]
    assert request_sizes(load_spec("config/experiments/quickstart.yaml")) != {}
