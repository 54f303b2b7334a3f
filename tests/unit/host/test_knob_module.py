"""The bmx_knob module's backends (playbooks/library/bmx_knob.py) as plain Python, on
file trees the tests build: what one call reads, writes and returns. The same code runs
on hosts through Ansible in tests/e2e/test_knob_sysfs.py and test_knob_cpu.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[3] / "playbooks" / "library" / "bmx_knob.py"
_spec = importlib.util.spec_from_file_location("bmx_knob", PATH)
bmx_knob = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bmx_knob)


def sysfs_knob(root: Path, name: str, value, text: str = "base\n") -> dict:
    (root / name).write_text(text)
    return {"factor": name, "role": "knob_sysfs", "value": value,
            "vars": {"knob_sysfs_path": str(root / name), "knob_sysfs_root": str(root)}}


def cpu_tree(root: Path, cpus: int = 4, smt: str = "on") -> Path:
    (root / "smt").mkdir(parents=True)
    (root / "smt" / "control").write_text(smt + "\n")
    (root / "smt" / "active").write_text("1\n")
    (root / "present").write_text(f"0-{cpus - 1}\n")
    (root / "online").write_text(f"0-{cpus - 1}\n")
    for cpu in range(1, cpus):  # cpu0 has no online file: it cannot be unplugged
        (root / f"cpu{cpu}").mkdir()
        (root / f"cpu{cpu}" / "online").write_text("1\n")
    return root


def test_one_call_writes_only_what_differs_and_reads_it_back(tmp_path):
    same, other = sysfs_knob(tmp_path, "same", "base"), sysfs_knob(tmp_path, "other", "x")
    states = bmx_knob.apply([same, other], host="h1")
    assert states["same"] == {**states["same"], "changed": False, "ok": True, "actual": "base", "baseline": "base"}
    assert states["other"] == {**states["other"], "changed": True, "ok": True, "actual": "x", "baseline": "base",
                               "intended": "x", "role": "knob_sysfs", "rebooted": False}
    assert (tmp_path / "other").read_text() == "x"


def test_a_refusal_comes_before_any_write(tmp_path):
    first = sysfs_knob(tmp_path, "first", "changed")
    cpu = cpu_tree(tmp_path / "cpu", smt="forceoff")
    smt = {"factor": "ht", "role": "knob_smt", "value": "off", "vars": {"knob_smt_sysfs_root": str(cpu)}}
    with pytest.raises(bmx_knob.KnobError, match="SMT cannot be switched on h1: .* reads 'forceoff'.*nosmt=force"):
        bmx_knob.apply([first, smt], host="h1")
    assert (tmp_path / "first").read_text() == "base\n", "the first knob was written before the refusal"


def test_check_mode_reads_and_changes_nothing(tmp_path):
    knob = sysfs_knob(tmp_path, "k", "x")
    states = bmx_knob.apply([knob], check_mode=True)
    assert states["k"]["changed"] is True and states["k"]["actual"] == "base" and not states["k"]["ok"]
    assert (tmp_path / "k").read_text() == "base\n"


def test_sysfs_choice_list_reads_the_selected_word(tmp_path):
    knob = sysfs_knob(tmp_path, "scheduler", "none", text="[mq-deadline] none\n")
    assert bmx_knob.apply([knob], check_mode=True)["scheduler"]["baseline"] == "mq-deadline"


def test_host_settings_win_over_the_knobs_vars(tmp_path):
    knob = sysfs_knob(tmp_path, "k", "x")
    (tmp_path / "elsewhere").write_text("y\n")
    states = bmx_knob.apply([knob], settings={"knob_sysfs_path": str(tmp_path / "elsewhere")}, check_mode=True)
    assert states["k"]["baseline"] == "y"


def test_cpu_online_takes_the_highest_offline_and_brings_the_lowest_back(tmp_path):
    root = cpu_tree(tmp_path / "cpu")
    knob = {"factor": "cores", "role": "knob_cpu_online", "value": 2,
            "vars": {"knob_cpu_online_sysfs_root": str(root)}}
    states = bmx_knob.apply([knob])
    assert states["cores"] == {**states["cores"], "actual": "2", "baseline": "4", "changed": True, "ok": True}
    assert [(root / f"cpu{c}" / "online").read_text() for c in (1, 2, 3)] == ["1\n", "0", "0"]
    states = bmx_knob.apply([{**knob, "value": 3}])
    assert states["cores"]["baseline"] == "2" and states["cores"]["actual"] == "3"
    assert (root / "cpu2" / "online").read_text() == "1"
    with pytest.raises(bmx_knob.KnobError, match="5 CPUs cannot be online: 4 are present on h1"):
        bmx_knob.apply([{**knob, "value": 5}], host="h1")


def test_smt_reads_back_in_the_spelling_asked_for(tmp_path):
    root = cpu_tree(tmp_path / "cpu")
    knob = {"factor": "ht", "role": "knob_smt", "value": True, "vars": {"knob_smt_sysfs_root": str(root)}}
    states = bmx_knob.apply([knob])
    assert states["ht"] == {**states["ht"], "changed": False, "actual": "True", "baseline": "on", "ok": True}
    (root / "smt" / "active").write_text("0\n")
    states = bmx_knob.apply([{**knob, "value": "on"}])
    assert states["ht"]["actual"] == "on (inactive)" and not states["ht"]["ok"]


def test_inspect_tells_each_level_and_writes_nothing(tmp_path):
    knob = sysfs_knob(tmp_path, "k", "base")
    root = cpu_tree(tmp_path / "cpu")
    cores = {"factor": "cores", "role": "knob_cpu_online", "value": 4,
             "vars": {"knob_cpu_online_sysfs_root": str(root)}}
    (tmp_path / "k").chmod(0o444)
    found = bmx_knob.inspect([knob, cores], {"k": ["base", "x"], "cores": ["2", "4", "6"]}, host="h1")
    assert found["k"]["current"] == "base"
    assert found["k"]["levels"]["base"] == ""  # already set: nothing to write
    assert "not writable" in found["k"]["levels"]["x"]
    assert found["cores"]["levels"]["2"] == "" and found["cores"]["levels"]["4"] == ""
    assert "6 CPUs cannot be online" in found["cores"]["levels"]["6"]
    assert (root / "cpu3" / "online").read_text() == "1\n"


def test_an_unknown_role_is_refused_by_name():
    with pytest.raises(bmx_knob.KnobError, match="role 'knob_no_such_role' has no backend in the bmx_knob module"):
        bmx_knob.apply([{"factor": "x", "role": "knob_no_such_role", "value": 5}])


def test_inspect_names_a_role_without_a_backend_as_its_own_blocker(tmp_path):
    """bmx check: a knob of a role the module does not know is one blocker; the others are still read."""
    (tmp_path / "f").write_text("3\n")
    knobs = [{"factor": "x", "role": "knob_no_such_role", "value": 5},
             {"factor": "y", "role": "knob_sysfs", "value": "3",
              "vars": {"knob_sysfs_path": str(tmp_path / "f"), "knob_sysfs_root": str(tmp_path)}}]
    out = bmx_knob.inspect(knobs, {"x": [5, 6], "y": ["3"]})
    assert "has no backend in the bmx_knob module" in out["x"]["blocker"]
    assert set(out["x"]["levels"]) == {"5", "6"}
    assert out["y"]["current"] == "3" and out["y"]["levels"] == {"3": ""}


@pytest.mark.parametrize("role", ["knob_sysctl", "knob_sysfs", "knob_read_ahead", "knob_smt", "knob_cpu_online"])
def test_the_proc_and_sys_backends_defaults_are_the_roles(role):
    """The role's defaults/main.yml documents the variables the backend reads: every
    default the backend falls back to is the role's own (literal or the `default(...)`
    fallback of its template)."""
    import yaml
    from unit.host.test_knob_backend_cpu_affinity import role_defaults

    data = yaml.safe_load((PATH.parents[1] / "roles" / role / "defaults" / "main.yml").read_text())
    literal = {k: v for k, v in data.items() if "{{" not in str(v)}
    documented = {**role_defaults(role), **literal}
    backend = bmx_knob.BACKENDS[role]
    assert backend.defaults, role
    for name, value in backend.defaults.items():
        assert name in data, f"{role}: {name} is not in defaults/main.yml"
        if name in documented:
            assert str(documented[name]) == str(value), (role, name, documented[name], value)
        else:  # a chain of fallbacks (the workload's path first): the last one is the backend's
            assert str(data[name]).replace(" ", "").endswith(f"default('{value}')))}}}}"), (role, name, data[name])
