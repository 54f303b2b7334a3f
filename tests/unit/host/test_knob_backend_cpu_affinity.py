"""The bmx_knob module's knob_cpu_affinity backend (playbooks/library/bmx_knob.py) on CPU
trees the tests build: the CPUs chosen, what reads back, the run settings handed to the
batch runner, and that nothing is ever written. Through Ansible: tests/e2e/test_knob_cpu.py."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
PATH = ROOT / "playbooks" / "library" / "bmx_knob.py"
_spec = importlib.util.spec_from_file_location("bmx_knob_affinity", PATH)
bmx_knob = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bmx_knob)


def role_defaults(role: str) -> dict:
    """The literal fallbacks of a role's defaults/main.yml (``... | default(LITERAL) }}``)."""
    data = yaml.safe_load((ROOT / "playbooks" / "roles" / role / "defaults" / "main.yml").read_text())
    out = {}
    for name, text in data.items():
        found = re.search(r"\| default\(([^()]*)\)\s*}}$", str(text).strip())
        if found:
            out[name] = yaml.safe_load(found.group(1))
    return out


def cpu_tree(root: Path, siblings=("0,2", "1,3", "0,2", "1,3"), online: str = "") -> Path:
    """A kernel CPU directory: online list and each CPU's thread_siblings_list."""
    root.mkdir(parents=True)
    (root / "online").write_text((online or f"0-{len(siblings) - 1}") + "\n")
    for cpu, text in enumerate(siblings):
        (root / f"cpu{cpu}" / "topology").mkdir(parents=True)
        (root / f"cpu{cpu}" / "topology" / "thread_siblings_list").write_text(text + "\n")
    return root


def knob(value, root: Path, **role_vars) -> dict:
    return {"factor": "cores", "role": "knob_cpu_affinity", "value": value,
            "vars": {"knob_cpu_affinity_sysfs_root": str(root), **role_vars}}


def test_defaults_are_the_roles():
    assert bmx_knob.CpuAffinity.defaults == {k: v for k, v in role_defaults("knob_cpu_affinity").items()
                                             if k != "knob_cpu_affinity_value"}


def test_cores_chosen_read_back_and_go_to_the_runner(tmp_path):
    root = cpu_tree(tmp_path / "cpu")
    before = {p: p.read_text() for p in root.rglob("*") if p.is_file()}
    cases = {"1": [0, 2], "2": [0, 1, 2, 3], "1:off": [0], "2:off": [0, 1], "2:on": [0, 1, 2, 3], "2:ON": [0, 1, 2, 3]}
    for value, cpus in cases.items():
        state = bmx_knob.apply([knob(value, root)], host="h1")["cores"]
        # What reads back is computed from the CPUs chosen, in the kernel's spelling.
        assert state == {**state, "ok": value != "2:ON", "actual": value.lower(), "changed": False, "baseline": ""}, \
            (value, state)
        assert state["run_settings"] == {"cpus": cpus}, (value, state)
    assert {p: p.read_text() for p in root.rglob("*") if p.is_file()} == before


def test_more_cores_than_the_host_has_read_back_as_fewer_and_nothing_changes(tmp_path):
    root = cpu_tree(tmp_path / "cpu")
    state = bmx_knob.apply([knob(3, root, knob_cpu_affinity_pin_pidfiles=["/run/x.pid"])], host="h1")["cores"]
    assert state == {**state, "ok": False, "actual": "2", "changed": False, "intended": "3"}, state
    assert state["run_settings"] == {"cpus": [0, 1, 2, 3], "pin_pidfiles": ["/run/x.pid"]}
    # No sibling threads on a host that has none: N:on reads back as N:off.
    flat = cpu_tree(tmp_path / "flat", siblings=("0", "1"))
    state = bmx_knob.apply([knob("2:on", flat)])["cores"]
    assert state["actual"] == "2:off" and not state["ok"] and state["run_settings"] == {"cpus": [0, 1]}


def test_siblings_off_candidates_and_cpus_without_topology(tmp_path):
    root = cpu_tree(tmp_path / "cpu")
    one = bmx_knob.apply([knob(2, root, knob_cpu_affinity_siblings=False)])["cores"]
    assert one["ok"] and one["run_settings"] == {"cpus": [0, 1]}
    # Only CPUs 1-3 may be used: core {0,2} keeps only CPU 2, a core of one thread.
    some = bmx_knob.apply([knob("2:on", root, knob_cpu_affinity_candidates="1-3")])["cores"]
    assert some["actual"] == "2:off" and some["run_settings"] == {"cpus": [1, 2, 3]}
    # Offline CPUs are never chosen; a CPU without a topology file is a core of its own.
    (root / "online").write_text("0-1,3\n")
    (root / "cpu1" / "topology" / "thread_siblings_list").write_text("1\n")
    (root / "cpu3" / "topology" / "thread_siblings_list").unlink()
    rest = bmx_knob.apply([knob(3, root)])["cores"]
    assert rest["actual"] == "3" and rest["run_settings"] == {"cpus": [0, 1, 3]}


def test_values_and_cpu_lists_that_are_not_are_refused_by_role(tmp_path):
    root = cpu_tree(tmp_path / "cpu")
    for bad in ("x", 0, "2:maybe", ""):
        with pytest.raises(bmx_knob.KnobError, match=rf"^knob_cpu_affinity: '{bad}' is not a core count \(N, N:on"):
            bmx_knob.apply([knob(bad, root)])
    with pytest.raises(bmx_knob.KnobError, match="^knob_cpu_affinity: '3-1' is not a CPU list"):
        bmx_knob.apply([knob(1, root, knob_cpu_affinity_candidates="3-1")])
    with pytest.raises(bmx_knob.KnobError, match=r"^knob_cpu_affinity: cannot read the online CPUs of h1"):
        bmx_knob.apply([knob(1, tmp_path / "none")], host="h1")


def test_inspect_says_which_core_counts_the_host_cannot_emulate(tmp_path):
    root = cpu_tree(tmp_path / "cpu")
    found = bmx_knob.inspect([knob(1, root)], {"cores": ["1", "2:on", "3"]}, host="h1")["cores"]
    assert found["current"] == "" and found["levels"]["1"] == "" and found["levels"]["2:on"] == ""
    assert found["levels"]["3"].startswith("the CPUs chosen on h1 make 2, not 3"), found


def test_the_module_returns_run_settings_apart_from_the_knob_states(tmp_path):
    """main(), as Ansible runs it (WANT_JSON: the path of a JSON file of arguments)."""
    root = cpu_tree(tmp_path / "cpu")
    sysfs = tmp_path / "k"
    sysfs.write_text("a\n")
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"host": "h1", "knobs": [
        {"factor": "k", "role": "knob_sysfs", "value": "a",
         "vars": {"knob_sysfs_path": str(sysfs), "knob_sysfs_root": str(tmp_path)}},
        knob("1:off", root, knob_cpu_affinity_pin_pidfiles=["/run/pg.pid"])]}))
    out = json.loads(subprocess.run([sys.executable, str(PATH), str(args)], capture_output=True, text=True,
                                    check=True).stdout)
    assert out["changed"] is False and set(out["knobs"]) == {"k", "cores"}
    assert all("run_settings" not in s for s in out["knobs"].values()), out
    assert out["knobs"]["cores"] == {**out["knobs"]["cores"], "actual": "1:off", "ok": True, "changed": False}
    assert out["run_settings"] == {"k": {}, "cores": {"cpus": [0], "pin_pidfiles": ["/run/pg.pid"]}}
