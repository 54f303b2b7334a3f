"""``bmx check SPEC`` through real Ansible (playbooks/check_host.yml): on localhost and on a namespace SSH host.

The settable knob is knob_sysfs pointed at a plain file the test owns (its
``knob_sysfs_root``); the blocked one is knob_smt against a CPU tree the test builds
whose smt/control reads ``forceoff`` (this machine's own SMT cannot be switched
either, but a built tree gives the same answer everywhere). Nothing may be written.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from netns import NamespaceHosts, available

pytestmark = pytest.mark.slow

SPEC = """\
name: {name}
hosts: {hosts}
inventory: config/inventory/{inventory}
factors:
  mode: [a, b]
{smt_factor}knobs:
  mode: {{role: knob_sysfs, cost: none, vars: {{knob_sysfs_path: "{knob}", knob_sysfs_root: "{root}"}}}}
{smt_knob}workload:
  role: workload_command
  vars:
    argv: [{py}, -c, "print('value = 1')"]
  metrics:
    score: {{regex: 'value = (?P<value>[0-9.]+)', unit: count, better: higher}}
  estimate_s: 2
  timeout: 60
replicates: 2
warmup: 0
order: {{strategy: random, seed: 3}}
"""


def write_spec(project, name, hosts="localhost", inventory="test.yml", smt_control=""):
    root = project.root / "knobs"
    root.mkdir(exist_ok=True)
    knob = root / "mode"
    knob.write_text("base\n")
    smt_factor = smt_knob = ""
    if smt_control:
        cpu = root / "cpu"
        (cpu / "smt").mkdir(parents=True)
        (cpu / "smt" / "control").write_text(smt_control + "\n")
        (cpu / "smt" / "active").write_text("0\n")
        smt_factor = "  ht: ['on', 'off']\n"
        smt_knob = f"  ht: {{role: knob_smt, cost: none, vars: {{knob_smt_sysfs_root: \"{cpu}\"}}}}\n"
    spec = project.write_spec(name, SPEC.format(name=name, hosts=hosts, inventory=inventory, knob=knob, root=root,
                                                smt_factor=smt_factor, smt_knob=smt_knob, py=sys.executable))
    return spec, knob


def test_check_on_localhost_ready(project):
    spec, knob = write_spec(project, "check_ok")
    res = project.bmx("check", str(spec))
    assert res.returncode == 0, res.stdout + res.stderr
    row = next(line for line in res.stdout.splitlines() if line.startswith("localhost") and " mode " in line)
    assert "knob_sysfs" in row and "base" in row and "a ok, b ok" in row, res.stdout
    assert f"localhost: workload tool {sys.executable} Python 3." in res.stdout, res.stdout
    # 4 runs of 2 s, plus the batches' overhead: an estimate, not "unknown".
    assert "estimated campaign time: " in res.stdout and "4 runs" in res.stdout, res.stdout
    assert "check_ok: ready to run" in res.stdout
    # The host's noise settings, read by the batch runner's own code (a busy host is a warning, not a blocker).
    assert "localhost: host governor " in res.stdout and ", THP " in res.stdout and " CPU(s), load " in res.stdout
    assert knob.read_text() == "base\n", "bmx check wrote to the host"
    assert not (project.exp("check_ok") / "plan.csv").exists()


def test_check_names_every_blocker_and_changes_nothing(project):
    spec, knob = write_spec(project, "check_blocked", smt_control="forceoff")
    knob.chmod(0o444)  # not writable: level b (and a) cannot be set
    res = project.bmx("check", str(spec))
    assert res.returncode == 1, res.stdout + res.stderr
    blockers = [line for line in res.stderr.splitlines() if line.startswith("bmx check: ")]
    # One line per planned level that cannot be set: mode a and b (not writable), ht on and off (forceoff).
    assert len(blockers) == 4, res.stderr
    assert any("knob ht (knob_smt) cannot be set to off" in b and "reads 'forceoff'" in b for b in blockers), blockers
    assert any("knob mode (knob_sysfs) cannot be set to b" in b and "not writable" in b for b in blockers), blockers
    assert all(b.startswith("bmx check: localhost: ") for b in blockers), blockers
    assert "cannot run: 4 blocker(s)" in res.stdout
    assert knob.read_text() == "base\n"
    # --json: the same findings as one document, the same exit status.
    text = res.stdout
    res = project.bmx("check", str(spec), "--json")
    doc = json.loads(res.stdout)
    assert res.returncode == 1 and doc["ready"] is False and len(doc["blockers"]) == 4, res.stdout + res.stderr
    host = doc["hosts"][0]
    assert host["host"] == "localhost" and host["blockers"] == [b.removeprefix("bmx check: ") for b in blockers]
    assert host["knobs"]["mode"]["current"] == "base"
    assert f"{doc['estimate']['runs']} runs, {doc['estimate']['batches']} batches" in text


@pytest.mark.skipif(bool(available()), reason=available() or "ok")
def test_check_over_ssh_on_a_namespace_host(project, tmp_path):
    net = NamespaceHosts(tmp_path / "net", 1)
    with net:
        inv = net.inventory({"h1": {"batch_runner_root": str(tmp_path / "hosts" / "h1")}})
        (project.root / "config" / "inventory" / "ns.yml").write_text(inv)
        spec, knob = write_spec(project, "check_ssh", hosts="all", inventory="ns.yml", smt_control="on")
        (knob.parent / "cpu" / "smt" / "active").write_text("1\n")
        import subprocess

        res = subprocess.run(net.ctl_cmd([sys.executable, "-m", "benchmatrix.cli", "check", str(spec)]),
                             cwd=project.root, env=project.env(), capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stdout + res.stderr
        rows = [line for line in res.stdout.splitlines() if line.startswith("h1 ")]
        assert any(" mode " in r and "base" in r and "a ok, b ok" in r for r in rows), res.stdout
        assert any(" ht " in r and "knob_smt" in r and "on ok, off ok" in r for r in rows), res.stdout
        assert "h1: workload tool" in res.stdout
        assert knob.read_text() == "base\n"
        assert (knob.parent / "cpu" / "smt" / "control").read_text() == "on\n"


def test_check_inspects_cpu_affinity_and_file_layout_on_the_host(project):
    """knob_cpu_affinity (a CPU tree of 2 cores, 2 threads each) and knob_file_layout (a
    file on this machine's large filesystem) are read on the host: a core count the
    tree cannot make and a fragmentation that would fill the filesystem are blockers."""
    cpu = project.root / "knobs" / "cpu"
    cpu.mkdir(parents=True)
    (cpu / "online").write_text("0-3\n")
    for n, siblings in enumerate(["0,2", "1,3", "0,2", "1,3"]):
        (cpu / f"cpu{n}" / "topology").mkdir(parents=True)
        (cpu / f"cpu{n}" / "topology" / "thread_siblings_list").write_text(siblings + "\n")
    data = project.root / "knobs" / "layout" / "fio.dat"
    text = SPEC.format(name="check_cpu_layout", hosts="localhost", inventory="test.yml", knob="", root="",
                       smt_factor="", smt_knob="", py=sys.executable)
    text = text.replace("  mode: [a, b]\n", "  cores: [1, '2:on', 3]\n  layout: [contiguous, fragmented]\n").replace(
        "  mode: {role: knob_sysfs, cost: none, vars: {knob_sysfs_path: \"\", knob_sysfs_root: \"\"}}\n",
        f"  cores: {{role: knob_cpu_affinity, cost: none, vars: {{knob_cpu_affinity_sysfs_root: \"{cpu}\"}}}}\n"
        f"  layout: {{role: knob_file_layout, cost: none, vars: {{knob_file_layout_path: \"{data}\", "
        "knob_file_layout_size_mb: 1, knob_file_layout_max_fill_mb: 1}}\n")
    spec = project.write_spec("check_cpu_layout", text)
    res = project.bmx("check", str(spec))
    assert res.returncode == 1, res.stdout + res.stderr
    blockers = sorted(line for line in res.stderr.splitlines() if line.startswith("bmx check: "))
    assert len(blockers) == 2, res.stderr
    assert "knob cores (knob_cpu_affinity) cannot be set to 3: the CPUs chosen on localhost make 2, not 3" \
        in blockers[0], blockers
    assert "knob layout (knob_file_layout) cannot be set to fragmented: fragmenting" in blockers[1], blockers
    assert "means filling its filesystem" in blockers[1], blockers
    row = next(line for line in res.stdout.splitlines() if line.startswith("localhost") and " layout " in line)
    assert "absent" in row and "contiguous ok" in row, res.stdout
    assert not data.parent.exists(), "bmx check created the file's directory"


CLIENT_SPEC = """\
name: check_clients
hosts: localhost
inventory: config/inventory/test.yml
factors:
  fiber: [0, 1]
  raid: [5, 10]
knobs:
  fiber: {{role: knob_mssql_setting, cost: restart, vars: {{knob_mssql_setting_name: lightweight pooling}}}}
  raid: {{role: knob_raid_level, cost: restart,
          vars: {{knob_raid_level_devices: [/dev/loop90, /dev/loop91], knob_raid_level_destroy: true}}}}
""" + SPEC[SPEC.index("workload:"):]


@pytest.mark.skipif(bool(shutil.which("sqlcmd")) or Path("/proc/mdstat").exists(),
                    reason="this machine has sqlcmd or md: nothing to refuse")
def test_check_says_a_missing_client_or_driver_once_per_knob(project):
    """No sqlcmd and no md driver here: each knob is one blocker, not one per level."""
    spec = project.write_spec("check_clients", CLIENT_SPEC.format(py=sys.executable))
    res = project.bmx("check", str(spec))
    assert res.returncode == 1, res.stdout + res.stderr
    blockers = [line for line in res.stderr.splitlines() if line.startswith("bmx check: ")]
    assert len(blockers) == 2, res.stderr
    assert any(b.startswith("bmx check: localhost: knob fiber (knob_mssql_setting) cannot be set: knob_mssql_setting: "
                            "sqlcmd not found on localhost") for b in blockers), blockers
    assert any(b.startswith("bmx check: localhost: knob raid (knob_raid_level) cannot be set: knob_raid_level: "
                            "localhost has no md (software RAID) driver") for b in blockers), blockers
    assert "cannot run: 2 blocker(s)" in res.stdout
    row = next(line for line in res.stdout.splitlines() if line.startswith("localhost") and " raid " in line)
    assert "5 BLOCKED, 10 BLOCKED" in row, res.stdout


def test_validate_names_a_misspelt_role_at_its_line(project):
    """A typo in a knob role is a FILE:LINE error that lists the shipped knob roles."""
    spec, _ = write_spec(project, "role_typo")
    text = spec.read_text().replace("role: knob_sysfs,", "role: knob_sysfss,")
    spec.write_text(text)
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "knob_sysfss" in ln)
    res = project.bmx("validate", str(spec))
    assert res.returncode == 2, res.stdout + res.stderr
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{spec}:{line}: unknown knob role 'knob_sysfss' (knob roles: "), err
    assert err[0].endswith(", knob_sysfs); did you mean 'knob_sysfs'?") and "knob_read_ahead, " in err[0], err
    # A role the project adds counts as soon as its directory is there.
    (project.root / "playbooks" / "roles" / "knob_sysfss" / "meta").mkdir(parents=True)
    assert project.bmx("validate", str(spec)).returncode == 0


FIO_SPEC = """\
name: {name}
hosts: localhost
inventory: config/inventory/test.yml
factors:
  depth: [1, 4]
workload:
  role: workload_fio
  vars: {vars}
  timeout: 60
replicates: 1
warmup: 0
"""


def test_check_dry_runs_fio_and_names_the_misspelt_option(project):
    """fio --parse-only on the host: a typo in an option (and in a job file) is a blocker
    quoting fio's own first error line; the good cell's command passes; the time comes
    from fio's runtime."""
    spec = project.write_spec("dry_fio", FIO_SPEC.format(
        name="dry_fio", vars='{rw: read, bs: 4k, size: 1m, runtime: 30, time_based: 1, iodeph: "{{ depth }}"}'))
    res = project.bmx("check", str(spec))
    assert res.returncode == 1, res.stdout + res.stderr
    blockers = [line for line in res.stderr.splitlines() if line.startswith("bmx check: ")]
    assert len(blockers) == 2, res.stderr
    assert all("fails fio --parse-only: fio: unrecognized option '--iodeph=" in b for b in blockers), blockers
    assert "localhost: dry run: 2 distinct command(s) for 2 cell(s), 0 ok, 2 failed" in res.stdout, res.stdout
    # 2 runs of fio's 30 s runtime, not "unknown".
    assert "estimated campaign time: " in res.stdout and "per run: the workload's time limit" in res.stdout
    # The scratch directory does not exist before the campaign prepares the host: no disk is named.
    assert f"localhost: files in {project.scratch}: not there yet: created when the campaign prepares localhost" \
        in res.stdout, res.stdout

    job = project.root / "config" / "experiments" / "typo.fio"
    job.write_text("[scan]\nrw=read\nbs=4k\nsize=1m\n{% if depth == 4 %}iodeph{% else %}iodepth{% endif %}="
                   "{{ depth }}\n")
    spec = project.write_spec("dry_job", FIO_SPEC.format(name="dry_job", vars=f"{{job_file: {job}}}"))
    res = project.bmx("check", str(spec))
    assert res.returncode == 1, res.stdout + res.stderr
    blockers = [line for line in res.stderr.splitlines() if line.startswith("bmx check: ")]
    assert len(blockers) == 1 and "cell depth=4: the workload's command fails fio --parse-only: " in blockers[0], \
        res.stderr
    assert blockers[0].endswith("fio --parse-only: Bad option <iodeph=4>"), blockers
    assert "1 ok, 1 failed" in res.stdout, res.stdout
    assert f"localhost: files in {project.scratch}: not there yet" in res.stdout, res.stdout

    # A scratch directory that exists is on a file system; with a loop file system the role
    # would mount there, it is "not there yet" however the directory looks today.
    project.scratch.mkdir()
    res = project.bmx("check", str(spec))
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith(f"localhost: files in {project.scratch}: "))
    assert ": on " in line and "mounted at /" in line, line
    project.inventory.write_text(project.inventory.read_text() + "      workload_fio_loopfs_mb: 16\n")
    res = project.bmx("check", str(spec))
    assert f"localhost: files in {project.scratch}: not there yet: a 16 MiB ext4 loop file system the role creates" \
        in res.stdout, res.stdout


@pytest.mark.skipif(shutil.which("sysbench") is None, reason="sysbench is not installed")
def test_check_tries_sysbench_options_against_its_option_list(project):
    spec = project.write_spec("dry_sysbench", FIO_SPEC.format(
        name="dry_sysbench", vars='{test: cpu, time: 1, threads: "{{ depth }}", options: {cpu-max-primes: 100}}')
        .replace("workload_fio", "workload_sysbench"))
    res = project.bmx("check", str(spec))
    assert res.returncode == 1, res.stdout + res.stderr
    blockers = [line for line in res.stderr.splitlines() if line.startswith("bmx check: ")]
    assert len(blockers) == 1, res.stderr
    # --threads and --time are sysbench's general options (sysbench --help), not cpu's: known too.
    assert blockers[0].endswith("the option list of sysbench cpu help: unknown option(s) --cpu-max-primes; "
                                "did you mean '--cpu-max-prime'?"), blockers
    assert "(and 1 more cell(s))" in blockers[0], blockers
    spec.write_text(spec.read_text().replace("cpu-max-primes", "cpu-max-prime"))
    res = project.bmx("check", str(spec))
    assert res.returncode == 0 and "dry run: 1 distinct command(s) for 2 cell(s), 1 ok" in res.stdout, \
        res.stdout + res.stderr
