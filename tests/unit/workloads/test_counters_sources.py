"""Tests of the counter sources beyond cpu and disk (``collect: [memory, pressure,
process, perf]``): the real batch runner sampling this machine's /proc while a real
process does known work, the metrics the controller makes of them, their names in the
spec's checks and their place in what moved with a finding."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import host_layout
import numpy as np
import pytest
from fake_ansible import use_fake_port
from unit.analyze.test_explain import UNITS, campaign, judged
from unit.analyze.test_explain_collect import ROOT
from unit.analyze.test_explain_collect import UNITS as FIO_UNITS
from unit.analyze.test_explain_collect import campaign as fio_campaign

from benchmatrix.analyze.explain import counter_columns, moved_with
from benchmatrix.analyze.tables import derive_tables
from benchmatrix.errors import SpecErrors
from benchmatrix.host import batch_runner
from benchmatrix.spec.load import load_spec
from benchmatrix.workloads import WORKLOADS, load_counters, metric_direction, metric_names, parse_counters
from benchmatrix.workloads.counters import SOURCES, counter_metric_names

#: Work whose traces each source must show: 0.3 s of user CPU, 150 short sleeps
#: (voluntary context switches), 80 MiB held for 0.5 s (peak memory), and an 8 MiB
#: file read through a mapping with its pages dropped from the page cache first and
#: read-ahead turned off (one major fault and one page-in per 4 KiB page).
WORK = textwrap.dedent("""\
    import mmap, os, sys, time
    t = time.process_time()
    while time.process_time() - t < 0.3:
        pass
    for _ in range(150):
        time.sleep(0.001)
    held = bytearray(80 * 1024 * 1024)
    for i in range(0, len(held), 4096):
        held[i] = 1
    time.sleep(0.5)
    del held
    path = sys.argv[1]
    with open(path, "wb") as fh:
        fh.write(os.urandom(8 * 1024 * 1024))
        fh.flush()
        os.fsync(fh.fileno())
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    m = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
    m.madvise(mmap.MADV_RANDOM)
    total = sum(m[i] for i in range(0, len(m), 4096))
    print(total >= 0)
""")

NEW = ["memory", "pressure", "process"]


def _run_batch(tmp_path: Path, runs: list[dict], env: dict | None = None) -> Path:
    """The real batch runner, as a process of its own, on ``runs``; returns its workdir."""
    wd = tmp_path / "wd"
    manifest = {"experiment": "t", "batch": "b1", "workdir": str(wd), "archive": str(wd / "b1.tar.gz"),
                "runs": [{"attempt": 1, "seq": i + 1, "timeout": 60, "before_run": [], **r}
                         for i, r in enumerate(runs)]}
    (tmp_path / "m.json").write_text(json.dumps(manifest))
    done = subprocess.run([sys.executable, batch_runner.__file__, str(tmp_path / "m.json")],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    return wd


@pytest.fixture(scope="module")
def sampled(tmp_path_factory):
    """One runner, two runs with every new source: WORK, and ``true`` beside it."""
    tmp = tmp_path_factory.mktemp("sources")
    wd = _run_batch(tmp, [
        {"run_id": "work", "argv": [sys.executable, "-c", WORK, str(tmp / "data.bin")], "collect": NEW,
         "collect_interval_s": 0.1},
        {"run_id": "idle", "argv": ["true"], "collect": NEW, "collect_interval_s": 0.1},
    ])
    out = {}
    for run in ("work", "idle"):
        run_dir = host_layout.run_dir(wd, run)
        result = json.loads((run_dir / "result.json").read_text())
        assert result["outcome"] == "exited" and result["exit_code"] == 0, result
        out[run] = (run_dir, json.loads((run_dir / "counters.json").read_text()), load_counters(run_dir))
    return out


def test_the_workloads_own_cpu_switches_faults_and_peak_memory(sampled):
    _, raw, parsed = sampled["work"]
    _, _, idle = sampled["idle"]
    m, seconds = parsed.metrics, parsed.extra["seconds"]
    assert raw["collect"] == NEW and "process_fields" in raw
    # The busy loop's 0.3 s of CPU (process_time is a system call: user and system time).
    cpu = m["proc_cpu_user_s"][0] + m["proc_cpu_system_s"][0]
    assert m["proc_cpu_user_s"][1] == m["proc_cpu_system_s"][1] == "s" and 0.3 <= cpu < 5
    assert idle.metrics["proc_cpu_user_s"][0] + idle.metrics["proc_cpu_system_s"][0] < 0.1
    assert m["proc_cpu_pct"][1] == "%" and 0 < m["proc_cpu_pct"][0] <= 100 * os.cpu_count()
    # 150 sleeps are 150 voluntary switches at least.
    assert m["proc_voluntary_switches_s"][0] * seconds >= 150
    assert m["proc_voluntary_switches_s"][1] == "switches/s" and "proc_involuntary_switches_s" in m
    # Read-ahead off: every one of the 2048 pages of the file is a major fault of its own.
    assert m["proc_major_faults"][0] >= 1800 and idle.metrics["proc_major_faults"][0] < 100
    assert 80 * 1024 <= m["proc_max_rss_kib"][0] < 1024 * 1024 and m["proc_max_rss_kib"][1] == "KiB"
    assert idle.metrics.get("proc_max_rss_kib", (0,))[0] < 80 * 1024


def test_page_cache_and_paging_of_the_host(sampled):
    _, raw, parsed = sampled["work"]
    m, seconds = parsed.metrics, parsed.extra["seconds"]
    first, last = raw["samples"][0], raw["samples"][-1]
    fields = raw["memory_fields"]
    # The means over the run: the difference of the first and last sample over their time.
    pgpgin = last["memory"][fields.index("pgpgin")] - first["memory"][fields.index("pgpgin")]
    assert m["mem_page_in_kib_s"] == (pytest.approx(pgpgin / (last["t"] - first["t"])), "KiB/s")
    # The 8 MiB file came from the disk again, page by page (others on the host only add).
    assert m["mem_page_in_kib_s"][0] * seconds >= 0.9 * 8 * 1024
    assert m["mem_major_faults_s"][0] * seconds >= 1800 and m["mem_major_faults_s"][1] == "faults/s"
    for name in ("mem_cached_mib", "mem_available_mib"):
        assert m[name][1] == "MiB" and m[name][0] > 0
    assert "mem_cached_growth_mib" in m and "mem_dirty_mib" in m


def test_pressure_stall_shares(sampled):
    _, raw, parsed = sampled["work"]
    psi = {k: v for k, v in parsed.metrics.items() if k.startswith("psi_")}
    # This kernel has PSI (tests would need another host to see it missing).
    assert {"psi_cpu_some_pct", "psi_io_some_pct", "psi_io_full_pct", "psi_memory_some_pct",
            "psi_memory_full_pct"} <= set(psi)
    for value, unit in psi.values():
        assert unit == "%" and 0 <= value <= 100


def test_every_sampled_name_is_a_known_counter_name(sampled):
    names = counter_metric_names(NEW)
    for run in ("work", "idle"):
        _, _, parsed = sampled[run]
        assert parsed.metrics and all(names.matches(k) for k in parsed.metrics), sorted(parsed.metrics)
    assert not counter_metric_names(["cpu"]).matches("proc_cpu_user_s")
    assert set(SOURCES) == {"cpu", "disk", "memory", "pressure", "process", "perf"}


def test_perf_absent_or_without_the_events_is_skipped_with_a_note(tmp_path):
    # No perf on the runner's PATH: the run runs, no perf metric, one line saying why.
    wd = _run_batch(tmp_path, [{"run_id": "p", "argv": ["/bin/true"], "collect": ["perf"]}],
                    env={**os.environ, "PATH": str(tmp_path / "empty")})
    parsed = load_counters(host_layout.run_dir(wd, "p"))
    assert not [k for k in parsed.metrics if k.startswith("perf_")]
    assert len(parsed.warnings) == 1 and "perf" in parsed.warnings[0] and "\n" not in parsed.warnings[0]
    assert "not found" in parsed.warnings[0]


def test_perf_where_the_host_has_it(tmp_path):
    import shutil

    if shutil.which("perf") is None:
        pytest.skip("no perf on this machine")
    wd = _run_batch(tmp_path, [{"run_id": "p", "argv": [sys.executable, "-c", "sum(range(10**6))"],
                                "collect": ["perf"]}])
    run_dir = host_layout.run_dir(wd, "p")
    assert json.loads((run_dir / "result.json").read_text())["exit_code"] == 0
    parsed = load_counters(run_dir)
    found = {k: v for k, v in parsed.metrics.items() if k.startswith("perf_")}
    if found:  # the host counts them: a million additions take millions of instructions
        assert found["perf_instructions"][0] > 1e6 and found["perf_cycles"][0] > 0
    else:  # a virtual machine without a PMU (this one): the events are not supported
        assert len(parsed.warnings) == 1 and "not supported" in parsed.warnings[0], parsed.warnings


SPEC = """\
name: sources_case
factors:
  pause: ["0.05", "0.2"]
workload:
  role: workload_command
  vars:
    argv: [sleep, "{{ pause }}"]
collect: [memory, process]
replicates: 2
order: {strategy: random, seed: 3}
"""


@pytest.mark.slow
def test_a_campaign_through_the_batch_runner_has_the_new_columns_in_runs_csv(project):
    use_fake_port(project)
    spec = project.write_spec("sources_case", SPEC)
    res = project.bmx("run", str(spec), timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    with open(project.exp("sources_case") / "runs.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows)
    for r in rows:
        # sleep blocks once at least: a voluntary switch of the workload's own.
        assert float(r["proc_voluntary_switches_s"]) > 0
        assert float(r["mem_major_faults_s"]) >= 0 and float(r["mem_cached_mib"]) > 0
        assert float(r["proc_cpu_user_s"]) >= 0


def test_directions_of_the_counters_that_have_one():
    assert metric_direction("mem_major_faults_s") == "lower"
    assert metric_direction("psi_io_full_pct") == "lower"
    assert metric_direction("mem_cached_mib") == ""


def test_spec_collect_names_are_checked_with_did_you_mean(tmp_path):
    base = textwrap.dedent("""\
        name: t
        factors: {x: [1, 2]}
        workload:
          role: workload_command
          vars: {argv: [sleep, "0.1"]}
        report:
          threshold: {psi_io_some_pct: 10%}
        """)
    good = tmp_path / "good.yaml"
    good.write_text(base + "collect: [cpu, memory, pressure, process, perf]\n")
    assert load_spec(good, metric_names=metric_names).collect == ["cpu", "memory", "pressure", "process", "perf"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(base + "collect: [cpu, memroy]\n")
    with pytest.raises(SpecErrors) as err:
        load_spec(bad, metric_names=metric_names)
    assert f"{bad}:8:" in str(err.value) and "did you mean 'memory'?" in str(err.value)


def test_counters_a_workload_names_come_first_in_what_moved_with_it():
    # fio names the device's request size and await: of two counters that moved, the one
    # the descriptor names is listed first, even though the other moved further.
    assert WORKLOADS["workload_fio"].explained_by
    rng = np.random.default_rng(5)
    runs = campaign(rng, n=6, effect=3.0, planted={"disk_loop0_read_await_ms": (1.5, 0.5),
                                                   "cpu_iowait_pct": (3.0, 0.5)})
    result = judged(runs)
    kwargs = {"factor": "ra", "by": [], "scales": result.scales, "units": UNITS, "alpha": 0.05, "threshold": 0.05}
    plain = moved_with(runs, result.table, **kwargs)
    assert plain["counter"].tolist()[:2] == ["cpu_iowait_pct", "disk_loop0_read_await_ms"]
    first = moved_with(runs, result.table, first=WORKLOADS["workload_fio"].explained_by, **kwargs)
    assert first["counter"].tolist()[:2] == ["disk_loop0_read_await_ms", "cpu_iowait_pct"]
    assert first["rank"].tolist()[:2] == [1, 2]

def test_collect_lists_the_counters_fio_names_first():
    # Through collect's derive_tables on a synthetic quickstart (fio) campaign: the device's
    # request size grows by half with iodepth 8 while its MiB/s triples; both moved with
    # every bandwidth finding, and the request size, which fio's descriptor names, is first.
    spec = load_spec(ROOT / "config" / "experiments" / "quickstart.yaml")
    plan, runs = fio_campaign()
    rng = np.random.default_rng(9)
    runs["disk_loop0_read_kib_per_io"] = (4.0 * runs["iodepth"].map({1: 1.0, 8: 1.5})
                                          * np.exp(rng.normal(0, 0.01, len(runs))))
    tables = derive_tables(spec, plan, runs, {**FIO_UNITS, "disk_loop0_read_kib_per_io": "KiB"})
    both = 0
    for _, group in tables.moved_with[tables.moved_with["metric"] == "read_bw_kib"].groupby("comparison"):
        counters = group.sort_values("rank")["counter"].tolist()
        assert counters[0] == "disk_loop0_read_kib_per_io", counters
        both += "disk_loop0_read_mib_s" in counters
    assert both >= 2


def test_the_explain_engine_counts_the_new_sources_as_counters():
    rng = np.random.default_rng(5)
    runs = campaign(rng, n=4, effect=3.0)
    runs["proc_cpu_user_s"] = np.where(runs["ra"] == "on", 3.0, 1.0) * np.exp(rng.normal(0, 0.05, len(runs)))
    runs["mem_major_faults_s"] = 1.0
    assert {"proc_cpu_user_s", "mem_major_faults_s"} <= set(counter_columns(runs))
    result = judged(runs)
    table = moved_with(runs, result.table, factor="ra", by=[], scales=result.scales,
                       units={**UNITS, "proc_cpu_user_s": "s"}, alpha=0.05, threshold=0.05)
    assert "proc_cpu_user_s" in table["counter"].tolist()


def test_the_counters_bench_runs_every_variant_side_by_side(tmp_path):
    # bench/counters.py --quick: the sampler as execute drives it, every variant measured.
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, str(root / "bench" / "counters.py"), "--quick"], cwd=root,
                          env={**os.environ, "BMX_BENCH_RESULTS": str(tmp_path)}, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads((tmp_path / "counters_quick.json").read_text())
    assert set(data["summary"]) == {"none", "cpu,disk", "+ new /proc", "+ perf"}
    assert all(len(runs) == 2 for runs in data["raw"].values())
    assert data["summary"]["+ new /proc"]["samples"] >= 2 and data["summary"]["none"]["samples"] == 0
    assert "new /proc sources (memory, pressure, process) beyond cpu,disk" in done.stdout


def test_a_run_that_ends_without_its_counters_leaves_no_perf_output_behind(tmp_path, monkeypatch):
    # execute()'s error path halts the sampler without writing counters.json: the file perf
    # stat would have written its counts to goes too.
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "perf").write_text("#!/bin/sh\nexit 0\n")
    (fake / "perf").chmod(0o755)
    sampler = batch_runner._Sampler(["perf"], 1.0)
    argv = sampler.wrap(["/bin/true"], {"PATH": f"{fake}:/bin:/usr/bin"})
    assert argv[0] == str(fake / "perf") and argv[-2:] == ["--", "/bin/true"]
    output = Path(sampler.perf_file)
    assert output.exists()
    monkeypatch.setattr(batch_runner, "_sampler", sampler)
    assert batch_runner._stop_counters() is sampler
    assert not output.exists()


def _document(**extra) -> str:
    """A counters.json of two samples one second apart, cpu only, plus ``extra``."""
    doc = {"version": 1, "collect": ["cpu"], "interval_s": 1.0,
           "samples": [{"t": 0.0, "cpu": [0] * 8}, {"t": 1.0, "cpu": [50, 0, 0, 50, 0, 0, 0, 0]}]}
    for key, value in extra.items():
        if key.startswith("sample_"):
            for sample, v in zip(doc["samples"], value):
                sample[key[7:]] = v
        else:
            doc[key] = value
    return json.dumps(doc)


def test_a_kernels_readahead_counters_become_rates_by_their_name():
    # This machine's kernel has none; a kernel that counts read-ahead pages in /proc/vmstat
    # gets its counters by name (the runner keeps every vmstat name that says read-ahead).
    parsed = parse_counters(_document(memory_fields=["Cached", "pgpgin", "pgra_readahead_pages"],
                                      sample_memory=[[1024, 100, 0], [3072, 612, 20000]]))
    m = parsed.metrics
    assert m["mem_pgra_readahead_pages_s"] == (20000.0, "pages/s")
    assert counter_metric_names(["memory"]).matches("mem_pgra_readahead_pages_s")
    assert m["mem_page_in_kib_s"] == (512.0, "KiB/s")
    assert m["mem_cached_mib"] == (2.0, "MiB") and m["mem_cached_growth_mib"] == (2.0, "MiB")


def test_perf_counts_as_perf_stat_writes_them_where_the_host_counts():
    # perf stat -x , on a host with a PMU (events may carry a :u modifier under paranoid 2).
    output = ("# started on Thu Dec  3 04:50:00 2026\n\n"
              "2000000,,cycles:u,1000000,100.00,,\n"
              "3000000,,instructions:u,1000000,100.00,1.50,insn per cycle\n"
              "<not counted>,,cache-misses:u,0,0.00,,\n")
    parsed = parse_counters(_document(perf={"events": ["cycles", "instructions", "cache-misses"],
                                            "output": output}))
    m = parsed.metrics
    assert m["perf_cycles"] == (2e6, "cycles") and m["perf_instructions"] == (3e6, "instructions")
    assert m["perf_ipc"] == (1.5, "instructions/cycle") and "perf_cache_misses" not in m
    assert parsed.warnings == []


def test_a_perf_that_cannot_count_here_is_skipped_and_the_run_runs(tmp_path):
    # perf_event_paranoid 3 (Debian's default for users) or a seccomp profile: perf stat
    # refuses before it starts the command. The run must run as without perf, with a note.
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "perf").write_text("#!/bin/sh\necho 'Error: Access to performance monitoring is limited.' >&2\n"
                               "exit 255\n")
    (fake / "perf").chmod(0o755)
    wd = _run_batch(tmp_path, [{"run_id": "p", "argv": ["/bin/echo", "ran"], "collect": ["perf"]}],
                    env={**os.environ, "PATH": f"{fake}:/bin:/usr/bin"})
    run_dir = host_layout.run_dir(wd, "p")
    result = json.loads((run_dir / "result.json").read_text())
    assert result["exit_code"] == 0 and (run_dir / "stdout").read_text() == "ran\n"
    parsed = load_counters(run_dir)
    assert len(parsed.warnings) == 1 and "Access to performance monitoring is limited" in parsed.warnings[0]
