"""Tests of the system-counter metrics (tests/fixtures/counters: counters.json files the
batch runner wrote on this machine)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmatrix.errors import ParseError
from benchmatrix.workloads import load_counters, parse_counters
from benchmatrix.workloads.counters import CPU_METRICS, DISK_UNITS

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "counters"


def data(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def test_means_over_the_run_from_first_and_last_sample():
    raw = data("fio_read_2s.json")
    parsed = parse_counters(json.dumps(raw))
    m = parsed.metrics
    first, last = raw["samples"][0], raw["samples"][-1]
    seconds = last["t"] - first["t"]

    for name in CPU_METRICS:
        assert m[name][1] == "%"
    assert sum(m[n][0] for n in ("cpu_user_pct", "cpu_system_pct", "cpu_iowait_pct", "cpu_idle_pct",
                                 "cpu_steal_pct")) == pytest.approx(100.0)
    reads = last["disk"]["vda"][0] - first["disk"]["vda"][0]
    sectors = last["disk"]["vda"][2] - first["disk"]["vda"][2]
    assert m["disk_vda_reads_s"] == (pytest.approx(reads / seconds), "IO/s")
    assert m["disk_vda_read_mib_s"][0] == pytest.approx(sectors * 512 / 2**20 / seconds)
    # fio read 64 KiB requests: the average request size says so (the seed's "bytes per read").
    assert m["disk_vda_read_kib_per_io"][0] == pytest.approx(64, rel=0.1)
    assert m["disk_read_kib_per_io"] == m["disk_vda_read_kib_per_io"]
    assert 0 < m["disk_vda_util_pct"][0] <= 100
    assert parsed.extra["samples"] == 4 and parsed.extra["devices"]["vda"]["virtual"] is False
    assert parsed.extra["peak"]["disk_vda_util_pct"] >= m["disk_vda_util_pct"][0] - 1e-9
    for name, (_value, unit) in m.items():
        if name.startswith("disk_"):
            suffix = next(s for s in DISK_UNITS if name.endswith("_" + s))
            assert DISK_UNITS[suffix] == unit, name


def test_two_samples_are_enough():
    m = parse_counters((FIXTURES / "dd_short.json").read_text()).metrics
    assert m["disk_vda_writes_s"][0] > 0 and m["disk_vda_write_kib_per_io"][0] > 0


def test_virtual_devices_are_reported_but_not_summed():
    raw = data("fio_read_2s.json")
    raw["devices"]["loop7"] = {"virtual": True}
    for i, sample in enumerate(raw["samples"]):
        sample["disk"]["loop7"] = [100 * i, 0, 800 * i, 10 * i, 0, 0, 0, 0, 0, 10 * i, 10 * i]
    m = parse_counters(json.dumps(raw)).metrics
    assert m["disk_loop7_read_kib_per_io"][0] == pytest.approx(4.0)
    assert m["disk_reads_s"] == m["disk_vda_reads_s"]


def test_counter_going_backwards_drops_that_device():
    raw = data("fio_read_2s.json")
    raw["samples"][-1]["disk"]["vda"][0] = 0
    m = parse_counters(json.dumps(raw)).metrics
    assert not any(k.startswith("disk_") for k in m) and "cpu_user_pct" in m


def test_load_counters_from_a_run_directory(tmp_path):
    assert load_counters(tmp_path) is None
    assert load_counters(None) is None
    shutil.copy(FIXTURES / "dd_short.json", tmp_path / "counters.json")
    assert "cpu_busy_pct" in load_counters(tmp_path).metrics


@pytest.mark.parametrize("raw,message", [
    ((FIXTURES / "truncated.json").read_text(), "not valid JSON"),
    ("", "not valid JSON"),
    ("[]", "no 'samples' list"),
    ('{"samples": [{"t": 0, "cpu": [1, 2, 3, 4, 5, 6, 7, 8]}]}', "holds 1 sample(s)"),
    ('{"samples": [{"t": 1}, {"t": 1}]}', "span no time"),
])
def test_malformed(raw, message):
    with pytest.raises(ParseError) as caught:
        parse_counters(raw)
    assert message in str(caught.value)
