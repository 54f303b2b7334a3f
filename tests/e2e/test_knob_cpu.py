"""knob_smt, knob_cpu_online and knob_cpu_affinity through real Ansible.

This machine has no SMT control (smt/control reads notsupported) and its CPUs must
never be taken offline, so the refusal of knob_smt and the CPU choice of
knob_cpu_affinity run against the real /sys, while the switching itself runs
against a CPU directory the test builds (a stand-in: nothing real can be switched
here). The kernel is played by the test only where it has to be: a fake tree does
not update smt/active or the online list by itself.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from knobkit import KnobRunner, assert_cycle, knob

from benchmatrix.workloads.cpulist import parse_cpu_list

pytestmark = pytest.mark.slow

SYS_CPU = Path("/sys/devices/system/cpu")


@pytest.fixture
def runner(tmp_path):
    return KnobRunner(tmp_path)


def cpu_tree(root: Path, cpus: int = 4, smt: str = "on", siblings: list[str] | None = None) -> Path:
    """A CPU directory like the kernel's: cpu0 cannot be unplugged (no online file)."""
    siblings = siblings or ["0,2", "1,3", "0,2", "1,3"]
    (root / "smt").mkdir(parents=True)
    (root / "smt" / "control").write_text(smt + "\n")
    (root / "smt" / "active").write_text("1\n" if smt == "on" else "0\n")
    (root / "present").write_text(f"0-{cpus - 1}\n")
    (root / "online").write_text(f"0-{cpus - 1}\n")
    for cpu in range(cpus):
        (root / f"cpu{cpu}" / "topology").mkdir(parents=True)
        (root / f"cpu{cpu}" / "topology" / "thread_siblings_list").write_text(siblings[cpu] + "\n")
        if cpu:
            (root / f"cpu{cpu}" / "online").write_text("1\n")
    return root


def test_smt_refuses_this_machine_naming_the_host(runner):
    control = (SYS_CPU / "smt" / "control").read_text().strip() if (SYS_CPU / "smt" / "control").exists() else ""
    if control in ("on", "off"):
        pytest.skip(f"this machine can switch SMT ({control}); the refusal needs notsupported or forceoff")
    err = runner.fail([knob("ht", "knob_smt", "off")])
    assert "SMT cannot be switched on localhost" in str(err), str(err)
    if control:
        assert f"reads '{control}'" in str(err)


def test_smt_refuses_forceoff(runner, tmp_path):
    root = cpu_tree(tmp_path / "cpu", smt="forceoff")
    err = runner.fail([knob("ht", "knob_smt", "on", knob_smt_sysfs_root=str(root))])
    assert "reads 'forceoff'" in str(err) and "nosmt=force" in str(err) and "localhost" in str(err)
    assert (root / "smt" / "control").read_text().strip() == "forceoff"


def test_smt_cycle_on_a_cpu_tree(runner, tmp_path):
    root = cpu_tree(tmp_path / "cpu", smt="on")
    state = assert_cycle(runner, lambda v: knob("ht", "knob_smt", v, knob_smt_sysfs_root=str(root)), "off",
                         lambda: (root / "smt" / "control").read_text().strip())
    assert state["baseline"] == "on"
    # Spellings other than on/off read back in the intended spelling.
    states, _ = runner.run([knob("ht", "knob_smt", False, knob_smt_sysfs_root=str(root))])
    assert states["ht"]["ok"] and states["ht"]["actual"] == "False", states
    # Switched on while no sibling thread runs: not on, whatever the control says.
    (root / "smt" / "active").write_text("0\n")
    states, _ = runner.run([knob("ht", "knob_smt", "on", knob_smt_sysfs_root=str(root))])
    assert not states["ht"]["ok"] and states["ht"]["actual"] == "on (inactive)", states


def test_smt_check_mode_changes_nothing(runner, tmp_path):
    root = cpu_tree(tmp_path / "cpu", smt="on")
    states, _ = runner.run([knob("ht", "knob_smt", "off", knob_smt_sysfs_root=str(root))], check=True)
    assert states["ht"]["changed"] is True and states["ht"]["actual"] == "on", states
    assert (root / "smt" / "control").read_text().strip() == "on"


def online_cpus(root: Path) -> str:
    return ",".join(str(c) for c in range(4) if c == 0 or (root / f"cpu{c}" / "online").read_text().strip() == "1")


def test_cpu_online_cycle_on_a_cpu_tree(runner, tmp_path):
    root = cpu_tree(tmp_path / "cpu")
    make = lambda v: knob("cores", "knob_cpu_online", v, knob_cpu_online_sysfs_root=str(root))  # noqa: E731
    state = assert_cycle(runner, make, 2, lambda: online_cpus(root))
    assert state["baseline"] == "4"
    states, _ = runner.run([make(2)])
    assert online_cpus(root) == "0,1"  # the highest CPUs went offline first
    states, _ = runner.run([make(3)])
    assert states["cores"]["ok"] and online_cpus(root) == "0,1,2"  # the lowest came back first
    err = runner.fail([make(5)])
    assert "5 CPUs cannot be online: 4 are present" in str(err)


def test_cpu_online_reads_this_machine_without_changing_it(runner):
    online = (SYS_CPU / "online").read_text().strip()
    count = len(parse_cpu_list(online))
    states, _ = runner.run([knob("cores", "knob_cpu_online", count)])
    assert states["cores"] == {**states["cores"], "ok": True, "changed": False, "actual": str(count)}
    assert (SYS_CPU / "online").read_text().strip() == online


def test_cpu_affinity_on_a_cpu_tree(runner, tmp_path):
    root = cpu_tree(tmp_path / "cpu")
    cases = {"1": [0, 2], "2": [0, 1, 2, 3], "1:off": [0], "2:off": [0, 1], "2:on": [0, 1, 2, 3]}
    for value, cpus in cases.items():
        states, settings = runner.run([knob("cores", "knob_cpu_affinity", value,
                                            knob_cpu_affinity_sysfs_root=str(root))])
        assert states["cores"]["ok"] and states["cores"]["actual"] == value, (value, states)
        assert settings == {"cpus": cpus}, (value, settings)
    # More cores than the host has: the CPUs chosen read back as fewer, and the batch is invalid.
    states, settings = runner.run([knob("cores", "knob_cpu_affinity", 3, knob_cpu_affinity_sysfs_root=str(root),
                                        knob_cpu_affinity_pin_pidfiles=["/run/x.pid"])])
    assert not states["cores"]["ok"] and states["cores"]["actual"] == "2", states
    assert settings == {"cpus": [0, 1, 2, 3], "pin_pidfiles": ["/run/x.pid"]}


def test_cpu_affinity_on_this_machine(runner):
    allowed = sorted(os.sched_getaffinity(0))
    states, settings = runner.run([knob("cores", "knob_cpu_affinity", 1)])
    assert states["cores"]["ok"] and states["cores"]["changed"] is False, states
    assert len(settings["cpus"]) >= 1 and set(settings["cpus"]) <= set(allowed)
    # No sibling threads here: asking for them reads back as off, an invalid batch.
    states, _ = runner.run([knob("cores", "knob_cpu_affinity", "1:on")])
    smt_here = (SYS_CPU / "smt" / "active").exists() and (SYS_CPU / "smt" / "active").read_text().strip() == "1"
    assert states["cores"]["ok"] is smt_here, states
