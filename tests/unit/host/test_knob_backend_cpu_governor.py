"""knob_cpu_governor's backend (benchmatrix/host/knobs.py, run by Ansible as
playbooks/library/bmx_knob.py) on a CPU directory the test builds: the test plays the
kernel's part (cpuN/cpufreq/scaling_governor and scaling_available_governors), since
this machine's governors are not the tests' to change (and a virtual machine often has
none)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[3] / "playbooks" / "library" / "bmx_knob.py"
_spec = importlib.util.spec_from_file_location("bmx_knob_governor", PATH)
bmx_knob = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bmx_knob)

AVAILABLE = "performance powersave schedutil\n"


def cpu_tree(root: Path, governors=("powersave", "powersave", "powersave", "powersave")) -> Path:
    root.mkdir(parents=True)
    (root / "online").write_text(f"0-{len(governors) - 1}\n")
    for cpu, governor in enumerate(governors):
        (root / f"cpu{cpu}" / "cpufreq").mkdir(parents=True)
        (root / f"cpu{cpu}" / "cpufreq" / "scaling_governor").write_text(governor + "\n")
        (root / f"cpu{cpu}" / "cpufreq" / "scaling_available_governors").write_text(AVAILABLE)
    return root


def governors(root: Path) -> list[str]:
    return [(p / "cpufreq" / "scaling_governor").read_text().strip() for p in sorted(root.glob("cpu[0-9]*"))]


def knob(value, root: Path, **role_vars) -> dict:
    return {"factor": "gov", "role": "knob_cpu_governor", "value": value,
            "vars": {"knob_cpu_governor_sysfs_root": str(root), **role_vars}}


def test_sets_every_online_cpu_and_reads_back(tmp_path):
    root = cpu_tree(tmp_path / "cpu")
    state = bmx_knob.apply([knob("performance", root)], host="h1")["gov"]
    assert state == {**state, "changed": True, "ok": True, "actual": "performance", "baseline": "powersave",
                     "intended": "performance", "rebooted": False}
    assert governors(root) == ["performance"] * 4
    again = bmx_knob.apply([knob("performance", root)], host="h1")["gov"]
    assert again["changed"] is False and again["ok"] is True
    back = bmx_knob.apply([knob(state["baseline"], root)], host="h1")["gov"]
    assert back["ok"] is True and governors(root) == ["powersave"] * 4


def test_selected_cpus_only_and_a_mixed_baseline_is_set_back(tmp_path):
    root = cpu_tree(tmp_path / "cpu")
    state = bmx_knob.apply([knob("performance", root, knob_cpu_governor_cpus="2-3")])["gov"]
    assert state["ok"] and governors(root) == ["powersave", "powersave", "performance", "performance"]
    # Every online CPU now reads mixed: the baseline names each CPU, and is a level.
    whole = bmx_knob.apply([knob("schedutil", root)])["gov"]
    assert whole["baseline"] == "0:powersave,1:powersave,2:performance,3:performance"
    assert governors(root) == ["schedutil"] * 4
    back = bmx_knob.apply([knob(whole["baseline"], root)])["gov"]
    assert back["ok"] and back["actual"] == whole["baseline"]
    assert governors(root) == ["powersave", "powersave", "performance", "performance"]


@pytest.mark.parametrize(("value", "role_vars", "message"), [
    ("turbo", {}, "knob_cpu_governor: governor 'turbo' is not available for CPU 0 on h1 "
                  "(available: performance, powersave, schedutil)"),
    ("per formance", {}, "knob_cpu_governor: 'per formance' is not a governor name"),
    ("7:performance", {}, "knob_cpu_governor: '7:performance' is not CPU:GOVERNOR for a selected CPU (0, 1, 2, 3)"),
    ("performance", {"knob_cpu_governor_cpus": "0-9"}, "knob_cpu_governor: CPU 4 of h1 has no cpufreq governor"),
    ("performance", {"knob_cpu_governor_cpus": "3-1"}, "knob_cpu_governor: '3-1' is not a CPU list"),
])
def test_refusals_come_before_any_write(tmp_path, value, role_vars, message):
    root = cpu_tree(tmp_path / "cpu")
    (tmp_path / "first").write_text("base\n")
    first = {"factor": "first", "role": "knob_sysfs", "value": "changed",
             "vars": {"knob_sysfs_path": str(tmp_path / "first"), "knob_sysfs_root": str(tmp_path)}}
    with pytest.raises(bmx_knob.KnobError) as info:
        bmx_knob.apply([first, knob(value, root, **role_vars)], host="h1")
    assert str(info.value).startswith(message), str(info.value)
    assert (tmp_path / "first").read_text() == "base\n" and governors(root) == ["powersave"] * 4


def test_inspect_tells_each_level_and_a_host_without_cpufreq(tmp_path):
    root = cpu_tree(tmp_path / "cpu")
    (root / "cpu1" / "cpufreq" / "scaling_governor").chmod(0o444)
    out = bmx_knob.inspect([knob("powersave", root)], {"gov": ["powersave", "performance", "turbo"]}, host="h1")
    levels = out["gov"]["levels"]
    assert out["gov"]["current"] == "powersave" and levels["powersave"] == ""
    assert "cpu1/cpufreq/scaling_governor is not writable (mode 0o444" in levels["performance"]
    assert "governor 'turbo' is not available" in levels["turbo"]
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "online").write_text("0\n")
    out = bmx_knob.inspect([knob("performance", bare)], {"gov": ["performance"]}, host="h1")
    assert "CPU 0 of h1 has no cpufreq governor" in out["gov"]["levels"]["performance"]
