"""Live knobs inside one batch (issue 23): with `order.batch_live_knobs`, a batch spans
the settings of `cost: none` knobs and the batch runner sets them between runs, through
the same backends as the knob module; every record says what it intended and what the
host had, a setting the host refuses makes only its runs invalid, and the campaign's end
puts the baseline back (real Snakemake, Ansible, fio and sysfs on a loop device). The
read-ahead campaign is also the read-ahead scan of issue 37: its bandwidth and runtime
findings name the loop device's read request size first, as the case study did by hand."""

from __future__ import annotations

import json
import os
import subprocess

import host_layout
import pytest
from knobkit import LoopDevice

pytestmark = pytest.mark.slow

SPEC = """\
name: {name}
inventory: config/inventory/test.yml
factors:
  {factor}: {levels}
knobs:
  {factor}: {{role: {role}, cost: none, vars: {{{vars}}}}}
workload:
  role: workload_fio
  vars: {{filename: "{mnt}/fio.dat", rw: read, bs: 64k, ioengine: psync, size: 1m, runtime: 100ms, time_based: 1}}
  timeout: 60
replicates: {replicates}
warmup: 0
order: {{strategy: {strategy}, seed: 5, batch_live_knobs: true}}
"""


#: What makes the live read-ahead campaign the read-ahead scan (config/experiments/
#: readahead_scan.yaml, small): with fio's pass over SCAN_MB MiB in 8 KiB reads of a file
#: laid out beforehand, caches dropped (and the file system trimmed) before each run, the
#: disk counters sampled, read-ahead off against 512 KiB compared.
SCAN_TAIL = """\
before_run: [drop_caches, fstrim]
collect: [disk]
report:
  metrics: [read_bw_kib, read_runtime_ms]
  compare: {factor: read_ahead_kb, baseline: 0}
"""
SCAN_MB = 4


@pytest.fixture
def fs_loop(tmp_path):
    dev = LoopDevice(tmp_path / "loop", size_mb=64, mkfs=True)
    yield dev
    dev.close()


def _records(exp):
    return sorted((json.loads(p.read_text()) for p in exp.glob("runs/*/*/record.json")), key=lambda r: r["seq"])


def test_random_order_sets_live_knobs_between_runs_in_one_batch(project, fs_loop):
    """The read-ahead scan, its runs pinned to one CPU by a second knob of one level
    (knob_cpu_affinity): every record's knob states and before_run actions, the baseline
    back at the end (restored.json and the device), the findings (issue 37)."""
    ra = fs_loop.sysfs("read_ahead_kb")
    ra.write_text("256\n")
    # Laid out here, so that no run's pass is the one that writes it.
    (fs_loop.mountpoint / "scan.dat").write_bytes(os.urandom(SCAN_MB << 20))
    # The loop device reads its backing file directly, as a disk reads its platters: a
    # 4 KiB request costs a round trip to the disk below, not a copy from the page cache
    # (whose cost a loaded test machine swamps).
    subprocess.run(["losetup", "--direct-io=on", fs_loop.device], check=True, capture_output=True)
    text = SPEC.format(name="live_ra", factor="read_ahead_kb", levels="[0, 512]", role="knob_read_ahead",
                       vars=f'knob_read_ahead_path: "{fs_loop.mountpoint}/data"', mnt=fs_loop.mountpoint,
                       replicates=3, strategy="random")
    timed = (f'  vars: {{filename: "{fs_loop.mountpoint}/fio.dat", rw: read, bs: 64k, ioengine: psync, size: 1m, '
             'runtime: 100ms, time_based: 1}\n')
    assert timed in text
    scan = (f'  vars: {{filename: "{fs_loop.mountpoint}/scan.dat", rw: read, bs: 8k, ioengine: psync, '
            f'size: {SCAN_MB}m, direct: 0}}\n')
    pinned = {"  read_ahead_kb: [0, 512]\n": "  read_ahead_kb: [0, 512]\n  cores: [1]\n",
              "knobs:\n": "knobs:\n  cores: {role: knob_cpu_affinity, cost: none}\n", timed: scan}
    for old, new in pinned.items():
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    spec = project.write_spec("live_ra", text + SCAN_TAIL)
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    exp = project.exp("live_ra")
    records = _records(exp)
    assert len(records) == 6 and all(r["status"] == "ok" for r in records), [r["reason"] for r in records]
    assert len({r["batch"] for r in records}) == 1, "one batch holds both settings"
    levels = [str(r["factors"]["read_ahead_kb"]) for r in records]
    assert len(set(levels)) == 2 and any(a != b for a, b in zip(levels, levels[1:])), "the order changes settings"
    previous = "256"
    cpu = min(os.sched_getaffinity(0))
    for r, level in zip(records, levels):
        k = r["knobs"]["read_ahead_kb"]
        assert k["intended"] == level and k["actual"] == level and k["ok"], k
        assert k["role"] == "knob_read_ahead" and "seconds" in k, k
        # A run's record says a change happened exactly where its setting differs from the run before.
        assert k["changed"] is (level != previous), (r["seq"], k, previous)
        previous = level
        c = r["knobs"]["cores"]
        assert c["intended"] == c["actual"] == "1" and c["changed"] is False, c
        assert [a["action"] for a in r["workload"]["before_run"]] == ["drop_caches", "fstrim"]
        result = host_layout.result(project.host_runs().parent, r["run_id"], r["attempt"])
        assert result["affinity"]["cpus"] == [cpu] and result["affinity_applied"] == [cpu], result
    assert records[0]["knobs"]["read_ahead_kb"]["baseline"] == "256", records[0]["knobs"]
    assert ra.read_text().strip() == "256", "the campaign's end puts the baseline back"
    restored = json.loads((exp / "hosts" / "localhost" / "restored.json").read_text())
    assert restored["knobs"]["read_ahead_kb"]["actual"] == "256", restored
    facts = json.loads((exp / "hosts" / "localhost" / "facts.json").read_text())
    assert facts["online_cpus"] and "read_ahead_kb" in facts and facts["smt"]
    # What moved with the findings: the device's read request size, first, on the
    # terminal, in findings.json and in the report.
    size = f"disk_{fs_loop.name}_read_kib_per_io"
    digest = json.loads((exp / "findings.json").read_text())
    findings = {f["metric"]: f for f in digest["findings"]}
    # The device saw the bytes fio read, in the requests its options say: no consistency warning.
    assert not [w for w in digest["warnings"] if w["check"].startswith("consistency")], digest["warnings"]
    assert {"read_bw_kib", "read_runtime_ms"} <= set(findings), ((exp / "comparisons.csv").read_text(), res.stdout)
    for metric in ("read_bw_kib", "read_runtime_ms"):
        moved = findings[metric]["moved_with"]
        assert moved and moved[0]["counter"] == size, (metric, moved)
        assert moved[0]["mean_level"] > 4 * moved[0]["mean_baseline"], moved[0]
        at = res.stdout.index(findings[metric]["sentence"])
        assert res.stdout[at:].splitlines()[1].strip().startswith(f"moved with it: {size} "), res.stdout[at:]
    md = (exp / "report.md").read_text().split("## What moved with each finding")[1].split("\n## ")[0]
    for metric in ("read_bw_kib", "read_runtime_ms"):
        section = md.split(f"### {findings[metric]['sentence']}")[1].split("\n### ")[0]
        first = section.split("|---|")[1].split("\n")[1]
        assert first.startswith(f"| {size} |") and "one value per cell" in first, section


def _selected(sched) -> str:
    """The I/O scheduler a sysfs ``scheduler`` file selects (``none [mq-deadline]``)."""
    return sched.read_text().split("[")[1].split("]")[0]


def _schedulers(fs_loop):
    """(the loop device's scheduler file, its current scheduler, another it offers); skips without one."""
    sched = fs_loop.sysfs("scheduler")
    current = _selected(sched)
    other = "none" if current != "none" else "mq-deadline"
    if other not in sched.read_text():
        pytest.skip(f"this kernel offers no second I/O scheduler ({sched.read_text().strip()})")
    return sched, current, other


MIXED = """\
name: {name}
inventory: config/inventory/test.yml
factors:
  sched: [{sched}]
  read_ahead_kb: [0, 512]
knobs:
  sched: {{role: knob_sysfs, cost: restart, vars: {{knob_sysfs_path: "{path}"}}}}
  read_ahead_kb: {{role: knob_read_ahead, cost: none, vars: {{knob_read_ahead_path: "{mnt}/data"}}}}
workload:
  role: workload_fio
  vars: {{filename: "{mnt}/fio.dat", rw: read, bs: 64k, ioengine: psync, size: 1m, runtime: 100ms, time_based: 1}}
  timeout: 60
replicates: 1
warmup: 0
order: {{strategy: random, seed: 4}}
"""


def test_a_costlier_knob_still_goes_through_ansible_while_live_ones_change_inside_its_batches(project, fs_loop):
    # The default (no batch_live_knobs in the spec): a knob of cost restart cuts the
    # batches and Ansible sets it; the live read-ahead changes between runs inside them.
    # Seed 4 orders the four cells (loop devices on none) in two batches, one per
    # scheduler (the batch call of the one the device lacks sets it), each with both
    # read-ahead levels: every change this test checks, for two batch calls (seed 3
    # with two replicates made five).
    sched, current, other = _schedulers(fs_loop)
    ra = fs_loop.sysfs("read_ahead_kb")
    ra.write_text("256\n")
    spec = project.write_spec("live_mixed", MIXED.format(
        name="live_mixed", sched=f"{current}, {other}", path=sched, mnt=fs_loop.mountpoint))
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    records = _records(project.exp("live_mixed"))
    assert len(records) == 4 and all(r["status"] == "ok" for r in records), [r["reason"] for r in records]
    batches: dict[str, list] = {}
    for r in records:
        batches.setdefault(r["batch"], []).append(r)
    assert all(len({r["factors"]["sched"] for r in b}) == 1 for b in batches.values()), "sched cuts batches"
    assert any(len({r["factors"]["read_ahead_kb"] for r in b}) == 2 for b in batches.values()), \
        "read-ahead changes inside a batch"
    stretches = 1 + sum(a["factors"]["sched"] != b["factors"]["sched"] for a, b in zip(records, records[1:]))
    assert len(batches) == stretches
    previous = {"sched": current, "read_ahead_kb": "256"}
    for i, r in enumerate(records):
        first_of_batch = i == 0 or records[i - 1]["batch"] != r["batch"]
        for factor in ("sched", "read_ahead_kb"):
            k, level = r["knobs"][factor], str(r["factors"][factor])
            assert k["intended"] == level == k["actual"] and k["ok"], (factor, k)
            assert k["changed"] is (level != previous[factor]), (r["seq"], factor, k, previous)
            if factor == "sched" and k["changed"]:
                assert first_of_batch, "only Ansible, at a batch's start, changes the restart-class knob"
            previous[factor] = level
    assert any(r["knobs"]["sched"]["changed"] for r in records), "a batch call changed the scheduler"
    assert _selected(sched) == current and ra.read_text().strip() == "256", \
        "the campaign's end puts both baselines back"


#: A live knob the host refuses at one level (an I/O scheduler that does not exist) and
#: the CPUs each run is pinned to (knob_cpu_affinity), interleaved in one batch: one
#: campaign for the two tests below.
REFUSE_CORES = """\
name: live_refuse
inventory: config/inventory/test.yml
factors:
  sched: [{good}, bogus]
  cores: [1, 2]
knobs:
  sched: {{role: knob_sysfs, cost: none, vars: {{knob_sysfs_path: "{sched}"}}}}
  cores: {{role: knob_cpu_affinity, cost: none}}
workload:
  role: workload_command
  vars: {{argv: ["{python}", -c, "import os; print('cpus', len(os.sched_getaffinity(0)))"]}}
  metrics:
    cpus: {{regex: 'cpus (?P<value>[0-9]+)', unit: count, better: higher}}
  timeout: 60
replicates: 2
warmup: 0
order: {{strategy: random, seed: {seed}, batch_live_knobs: true}}
"""
REFUSE_CORES_SEED = 5  # refused and accepted settings alternate, the cores change between accepted ones


@pytest.fixture(scope="module")
def refuse_cores(tmp_path_factory):
    """The REFUSE_CORES campaign on a loop device's scheduler: (the records in plan order,
    bmx run's result, the scheduler file, the scheduler it had before)."""
    import sys

    from conftest import copy_project

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs to pin runs to one or two")
    project = copy_project(tmp_path_factory.mktemp("live_refuse"))
    dev = LoopDevice(project.root / "loop")
    try:
        sched, current, good = _schedulers(dev)
        spec = project.write_spec("live_refuse", REFUSE_CORES.format(good=good, sched=sched, python=sys.executable,
                                                                     seed=REFUSE_CORES_SEED))
        res = project.bmx("run", str(spec), "--cores", "1")
        yield _records(project.exp("live_refuse")), res, sched, current
    finally:
        dev.close()


def test_a_setting_the_host_refuses_mid_batch_invalidates_only_its_runs(refuse_cores):
    records, res, sched, current = refuse_cores
    assert len(records) == 8 and len({r["batch"] for r in records}) == 1, res.stdout + res.stderr
    by_level = {}
    for r in records:
        by_level.setdefault(r["factors"]["sched"], []).append(r)
    good = next(level for level in by_level if level != "bogus")
    assert [r["status"] for r in by_level[good]] == ["ok"] * 4, [r["reason"] for r in by_level[good]]
    assert [r["status"] for r in by_level["bogus"]] == ["invalid"] * 4
    assert all("bogus" in r["reason"] for r in by_level["bogus"]), [r["reason"] for r in by_level["bogus"]]
    # A refused setting does not end the batch: runs after it run with their own settings.
    first_refused = min(r["seq"] for r in by_level["bogus"])
    assert any(r["seq"] > first_refused for r in by_level[good]), [r["factors"] for r in records]
    assert _selected(sched) == current, "the baseline scheduler is back"


def test_cpu_affinity_changes_between_runs_inside_one_batch(refuse_cores):
    # knob_cpu_affinity's run settings (the CPUs a run is pinned to) come from the
    # runner's own apply before each run, not from the batch call's.
    records, res, _, _ = refuse_cores
    ok = [r for r in records if r["factors"]["sched"] != "bogus"]
    assert len(ok) == 4 and len({r["batch"] for r in records}) == 1, res.stdout + res.stderr
    levels = [r["factors"]["cores"] for r in ok]
    assert any(a != b for a, b in zip(levels, levels[1:])), "the order changes the setting inside the batch"
    for r in ok:
        assert r["status"] == "ok", r["reason"]
        assert r["metrics"]["cpus"]["value"] == r["factors"]["cores"], (r["run_id"], r["metrics"])
        k = r["knobs"]["cores"]
        assert k["intended"] == k["actual"] == str(r["factors"]["cores"]) and k["ok"], k
        assert len(r["workload"]["affinity_applied"]) == r["factors"]["cores"], r["workload"]


PG_LIVE = """\
name: live_pg
inventory: config/inventory/test.yml
factors:
  work_mem: [4MB, 64MB]
knobs:
  work_mem:
    role: knob_postgresql_setting
    cost: none
    vars: {{knob_postgresql_setting_name: work_mem, knob_postgresql_setting_provision: false,
           knob_postgresql_setting_host: "{socket}",
           knob_postgresql_setting_port: {port}, knob_postgresql_setting_psql: "{psql}"}}
workload:
  role: workload_command
  # A new session per run: it sees what the server has after the runner's reload.
  vars: {{argv: ["{psql}", --no-psqlrc, -At, "--host={socket}", "--port={port}", --username=postgres,
                --dbname=postgres, -c, "SELECT 'kb ' || pg_size_bytes(current_setting('work_mem')) / 1024"]}}
  metrics:
    work_mem_kb: {{regex: 'kb (?P<value>[0-9]+)', unit: KiB, better: higher}}
  timeout: 60
replicates: 3
warmup: 0
order: {{strategy: random, seed: 4}}
"""


def test_a_postgresql_setting_changes_by_reload_between_runs_inside_one_batch(project):
    # A cost-none PostgreSQL parameter (work_mem, set by ALTER SYSTEM and a reload) is
    # set by the batch runner before each run; the run itself, a new session, sees it.
    from pgserver import Server, pg_bindir

    bindir = pg_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed (Debian package postgresql)")
    server = Server(bindir)
    try:
        default = server.sql("SHOW work_mem")
        spec = project.write_spec("live_pg", PG_LIVE.format(socket=server.socket, port=server.port,
                                                           psql=bindir / "psql"))
        res = project.bmx("run", str(spec), "--cores", "1")
        assert res.returncode == 0, res.stdout + res.stderr
        records = _records(project.exp("live_pg"))
        assert len(records) == 6 and len({r["batch"] for r in records}) == 1, [r["batch"] for r in records]
        levels = [r["factors"]["work_mem"] for r in records]
        assert any(a != b for a, b in zip(levels, levels[1:])), "the order changes the setting inside the batch"
        for r in records:
            assert r["status"] == "ok", r["reason"]
            k = r["knobs"]["work_mem"]
            assert k["intended"] == k["actual"] == r["factors"]["work_mem"] and k["ok"], k
            assert r["metrics"]["work_mem_kb"]["value"] == {"4MB": 4096, "64MB": 65536}[r["factors"]["work_mem"]], \
                (r["run_id"], r["factors"], r["metrics"])
        assert server.sql("SHOW work_mem") == default, "the campaign's end puts the baseline back"
        assert server.sql("SELECT count(*) FROM pg_file_settings WHERE name = 'work_mem' "
                          "AND sourcefile LIKE '%postgresql.auto.conf'") == "0", "no ALTER SYSTEM entry is left"
    finally:
        server.stop()
