"""knob_kernel_cmdline's backend of the bmx_knob module (playbooks/library/bmx_knob.py)
as plain Python, on a scratch boot loader file and command line the tests write: the
line editing, the write into the boot loader's file and its update command, the
refusal of a reboot that is not allowed before any write, and the two calls around a
reboot. The reboot itself (ansible.builtin.reboot) runs in tests/e2e/test_reboot.py on
a namespace SSH host; this machine's own /etc/default/grub and /proc/cmdline are never
touched here (every path is the test's)."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("bmx_knob_cmdline", ROOT / "playbooks" / "library" / "bmx_knob.py")
bmx_knob = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bmx_knob)
LEVELS = {"on": "absent", "off": "present"}


# ------------------------------------------------------------------ line editing
@pytest.mark.parametrize("line, parameter, state", [
    ("BOOT_IMAGE=/vmlinuz root=/dev/vda1 ro quiet", "nosmt", "absent"),
    ("quiet nosmt splash", "nosmt", "present"),
    ("quiet nosmt=force", "nosmt", "force"),
    ("mitigations=auto quiet mitigations=off", "mitigations", "off"),   # the last one counts
    ("isolcpus=2-3,6-7", "isolcpus", "2-3,6-7"),
    ("nosmtx quiet", "nosmt", "absent"),
])
def test_state_of_a_parameter(line, parameter, state):
    assert bmx_knob.cmdline_state(line, parameter) == state


@pytest.mark.parametrize("line, parameter, state, new", [
    ("quiet splash", "nosmt", "present", "quiet splash nosmt"),
    ("quiet nosmt splash", "nosmt", "absent", "quiet splash"),
    ("quiet mitigations=auto splash", "mitigations", "off", "quiet mitigations=off splash"),
    ("mitigations=auto quiet mitigations=off", "mitigations", "off", "mitigations=off quiet"),
    ("", "transparent_hugepage", "never", "transparent_hugepage=never"),
    ("quiet", "nosmt", "absent", "quiet"),
])
def test_edit_a_line(line, parameter, state, new):
    assert bmx_knob.cmdline_edit(line, parameter, state) == new
    assert bmx_knob.cmdline_state(new, parameter) == state


def test_set_then_reset_gives_the_original_line_back():
    original = "quiet mitigations=auto splash"
    for parameter, state in [("nosmt", "present"), ("mitigations", "off"), ("isolcpus", "2,3")]:
        before = bmx_knob.cmdline_state(original, parameter)
        changed = bmx_knob.cmdline_edit(original, parameter, state)
        assert changed != original
        assert bmx_knob.cmdline_edit(changed, parameter, before) == original


@pytest.mark.parametrize("text, found, line, error", [
    ('GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet splash"\nGRUB_CMDLINE_LINUX=""\n', True, "quiet splash", ""),
    ("GRUB_CMDLINE_LINUX_DEFAULT='quiet'\n", True, "quiet", ""),
    ("GRUB_CMDLINE_LINUX_DEFAULT=quiet\n", True, "quiet", ""),
    ('GRUB_CMDLINE_LINUX_DEFAULT="a"\nGRUB_CMDLINE_LINUX_DEFAULT="b c"\n', True, "b c", ""),
    ("GRUB_DEFAULT=0\n", False, "", ""),
    ('GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT nosmt"\n', True, None, "not a plain quoted list"),
])
def test_grub_file_parsing(text, found, line, error):
    got = bmx_knob.grub_cmdline(text, "GRUB_CMDLINE_LINUX_DEFAULT")
    assert got["found"] is found
    if line is not None:
        assert got["line"] == line
    assert (error in got["error"]) if error else got["error"] == ""


def test_levels_and_spelling():
    assert bmx_knob.cmdline_want("off", LEVELS, "nosmt") == {"state": "present", "error": ""}
    assert bmx_knob.cmdline_want("off", {}, "mitigations") == {"state": "off", "error": ""}
    assert "not a state of nosmt" in bmx_knob.cmdline_want("a b", {}, "nosmt")["error"]
    assert "not a kernel parameter name" in bmx_knob.cmdline_want("off", {}, "")["error"]
    assert "quote them" in bmx_knob.cmdline_want("off", {True: "absent", False: "present"}, "nosmt")["error"]
    # Read back in the spelling asked for, else as the level that means it, else raw.
    assert bmx_knob.cmdline_spelled("present", "off", LEVELS) == "off"
    assert bmx_knob.cmdline_spelled("absent", "off", LEVELS) == "on"
    assert bmx_knob.cmdline_spelled("force", "off", LEVELS) == "force"
    assert bmx_knob.cmdline_spelled("present", "present", LEVELS) == "present"


def test_backend_defaults_are_the_roles():
    # The backend's defaults must be those the role documents in defaults/main.yml
    # (each there is `bmx_knob.vars.NAME | default(VALUE)`).
    text = (ROOT / "playbooks" / "roles" / "knob_kernel_cmdline" / "defaults" / "main.yml").read_text()
    role = {}
    for name, value in yaml.safe_load(text).items():
        m = re.fullmatch(r"\{\{ bmx_knob\.vars\.(\w+) \| default\((.*)\) \}\}", str(value))
        if m and m.group(1) == name:
            role[name] = ast.literal_eval(m.group(2))
    assert role == bmx_knob.KernelCmdline.defaults


# ------------------------------------------------------------------ the backend on scratch files
class Boot:
    """A boot loader file, an update command that counts its calls, and a running command line."""

    def __init__(self, root: Path, line: str = "quiet splash", running: str | None = None):
        root.mkdir(parents=True, exist_ok=True)
        self.grub, self.cmdline, self.updates = root / "grub", root / "cmdline", root / "updates"
        self.grub.write_text(f'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="{line}"\nGRUB_CMDLINE_LINUX=""\n')
        self.boot(line if running is None else running)

    def boot(self, line: str) -> None:
        """What a reboot does to the running command line."""
        self.cmdline.write_text(f"BOOT_IMAGE=/vmlinuz root=/dev/vda1 ro {line}\n")

    def knob(self, factor: str, value: str, parameter: str = "nosmt", cost: str = "reboot", **more) -> dict:
        vars_ = {"knob_kernel_cmdline_parameter": parameter, "knob_kernel_cmdline_grub_file": str(self.grub),
                 "knob_kernel_cmdline_source": str(self.cmdline),
                 "knob_kernel_cmdline_update_command": [sys.executable, "-c",
                                                        f"open({str(self.updates)!r}, 'a').write('u\\n')"], **more}
        if parameter == "nosmt":
            vars_.setdefault("knob_kernel_cmdline_levels", LEVELS)
        return {"factor": factor, "role": "knob_kernel_cmdline", "value": value, "vars": vars_, "cost": cost}

    def update_calls(self) -> int:
        return len(self.updates.read_text().splitlines()) if self.updates.exists() else 0

    def line(self) -> str:
        return bmx_knob.grub_cmdline(self.grub.read_text(), "GRUB_CMDLINE_LINUX_DEFAULT")["line"]


def sysfs_knob(root: Path, value: str) -> dict:
    (root / "f").write_text("base\n")
    return {"factor": "live", "role": "knob_sysfs", "value": value,
            "vars": {"knob_sysfs_path": str(root / "f"), "knob_sysfs_root": str(root)}}


def test_a_reboot_that_is_not_allowed_is_refused_before_any_write(tmp_path):
    boot = Boot(tmp_path / "boot")
    live = sysfs_knob(tmp_path, "x")
    grub = boot.grub.read_text()
    # The live knob comes first in the list; still nothing is written.
    with pytest.raises(bmx_knob.KnobError) as err:
        bmx_knob.apply([live, boot.knob("ht", "off")], host="h1")
    assert str(err.value) == ("knob ht (knob_kernel_cmdline) needs a reboot of h1 for the level off (nosmt present; "
                              "the running kernel has it absent); set allow_reboot: true for this host in the "
                              "inventory, or in the spec, to allow it")
    assert boot.grub.read_text() == grub and boot.update_calls() == 0
    assert (tmp_path / "f").read_text() == "base\n", "the live knob was written before the refusal"


def test_the_reboot_path_two_calls_around_one_reboot(tmp_path):
    boot = Boot(tmp_path / "boot", line="quiet mitigations=auto splash")
    knobs = [sysfs_knob(tmp_path, "x"), boot.knob("ht", "off"), boot.knob("mit", "off", parameter="mitigations",
                                                                           knob_kernel_cmdline_reboot_timeout=60)]
    first = bmx_knob.apply(knobs, host="h1", allow_reboot=True)
    # Both parameters written into the boot loader's file, one update each; the live knob
    # waits for after the reboot (which would undo it).
    assert boot.line() == "quiet mitigations=off splash nosmt" and boot.update_calls() == 2
    assert (tmp_path / "f").read_text() == "base\n"
    assert {f: (s["rebooted"], s["changed"], s["baseline"], s["ok"]) for f, s in first.items()} == {
        "ht": (True, True, "on", False), "mit": (True, True, "auto", False), "live": (False, True, "base", False)}
    request = bmx_knob.reboot_request(knobs, first, host="h1")
    assert request == {"factors": ["ht", "mit"], "command": "", "boot_time_command": "", "timeout": 60}

    boot.boot("quiet mitigations=off splash nosmt")   # the reboot
    after = bmx_knob.apply(knobs, host="h1", before=first, reboot_seconds=30)
    assert (tmp_path / "f").read_text() == "x"
    for factor, baseline in (("ht", "on"), ("mit", "auto")):
        assert after[factor] == {**after[factor], "rebooted": True, "changed": True, "baseline": baseline,
                                 "ok": True, "actual": "off", "intended": "off"}
        assert after[factor]["seconds"] >= 30
    assert after["live"] == {**after["live"], "rebooted": False, "changed": True, "ok": True, "actual": "x"}
    assert boot.update_calls() == 2, "nothing written again after the reboot"

    # Back to the baseline: one more reboot, and the original line is back.
    back = [boot.knob("ht", "on"), boot.knob("mit", "auto", parameter="mitigations")]
    states = bmx_knob.apply(back, host="h1", allow_reboot=True)
    assert [s["rebooted"] for s in states.values()] == [True, True]
    assert boot.line() == "quiet mitigations=auto splash"


def test_the_module_asks_for_the_reboot_on_the_first_call_only(tmp_path):
    # main() as Ansible runs it (WANT_JSON: a file of arguments, one JSON object out).
    import json
    import subprocess

    boot = Boot(tmp_path / "boot")
    args = tmp_path / "args.json"

    def call(**params):
        args.write_text(json.dumps({"knobs": [boot.knob("ht", "off")], "host": "h1", **params}))
        done = subprocess.run([sys.executable, str(ROOT / "playbooks" / "library" / "bmx_knob.py"), str(args)],
                              capture_output=True, text=True, check=True)
        return json.loads(done.stdout)

    refused = call()
    assert refused["failed"] and "needs a reboot of h1" in refused["msg"]
    first = call(allow_reboot=True)
    assert first["reboot"] == {"factors": ["ht"], "command": "", "boot_time_command": "", "timeout": 900}
    boot.boot("quiet splash nosmt")
    after = call(before=first["knobs"], reboot_seconds=5)
    assert after["reboot"] == {"factors": []} and after["knobs"]["ht"]["ok"] and after["knobs"]["ht"]["rebooted"]


def test_booting_the_old_line_reads_back_the_old_state(tmp_path):
    # The update command did nothing: the host boots its old line. The read-back after
    # the reboot says so (ok false), and no second reboot is asked for.
    boot = Boot(tmp_path / "boot")
    knobs = [boot.knob("ht", "off")]
    first = bmx_knob.apply(knobs, host="h1", allow_reboot=True)
    after = bmx_knob.apply(knobs, host="h1", before=first)   # no boot() in between
    assert after["ht"] == {**after["ht"], "actual": "on", "ok": False, "rebooted": True, "changed": True}
    assert boot.update_calls() == 1


def test_running_the_level_already_writes_the_file_without_a_reboot(tmp_path):
    boot = Boot(tmp_path / "boot", line="quiet", running="quiet nosmt")
    states = bmx_knob.apply([boot.knob("ht", "off")], host="h1")   # no allow_reboot needed
    assert states["ht"] == {**states["ht"], "ok": True, "actual": "off", "changed": True, "rebooted": False,
                            "baseline": "off"}
    assert boot.line() == "quiet nosmt" and boot.update_calls() == 1
    assert bmx_knob.apply([boot.knob("ht", "off")], host="h1")["ht"]["changed"] is False
    assert boot.update_calls() == 1


def test_written_but_not_booted_needs_only_the_reboot(tmp_path):
    boot = Boot(tmp_path / "boot", line="quiet nosmt", running="quiet")
    states = bmx_knob.apply([boot.knob("ht", "off")], host="h1", allow_reboot=True)
    assert states["ht"]["rebooted"] and boot.update_calls() == 0


def test_check_mode_refuses_but_asks_for_no_reboot(tmp_path):
    boot = Boot(tmp_path / "boot")
    with pytest.raises(bmx_knob.KnobError, match="needs a reboot of h1"):
        bmx_knob.apply([boot.knob("ht", "off")], host="h1", check_mode=True)
    states = bmx_knob.apply([boot.knob("ht", "off")], host="h1", check_mode=True, allow_reboot=True)
    assert states["ht"]["rebooted"] is False and boot.update_calls() == 0


def test_clear_errors(tmp_path):
    boot = Boot(tmp_path / "boot")
    with pytest.raises(bmx_knob.KnobError, match=r"knob ht \(knob_kernel_cmdline\) on h1: .*declare cost: reboot"):
        bmx_knob.apply([boot.knob("ht", "off", cost="none")], host="h1", allow_reboot=True)
    with pytest.raises(bmx_knob.KnobError, match="knob_kernel_cmdline on h1: 'a b' is not a state of nosmt"):
        bmx_knob.apply([boot.knob("ht", "a b")], host="h1", allow_reboot=True)
    boot.grub.write_text('GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT quiet"\n')
    with pytest.raises(bmx_knob.KnobError, match=f"on h1: {re.escape(str(boot.grub))}: .*edit it by hand"):
        bmx_knob.apply([boot.knob("ht", "off")], host="h1", allow_reboot=True)
    boot = Boot(tmp_path / "boot2")
    knob = boot.knob("ht", "off", knob_kernel_cmdline_update_command=["false"])
    with pytest.raises(bmx_knob.KnobError, match="update command false failed on h1 \\(exit 1\\)"):
        bmx_knob.apply([knob], host="h1", allow_reboot=True)


def test_a_missing_variable_is_added_at_the_end(tmp_path):
    boot = Boot(tmp_path / "boot")
    boot.grub.write_text("GRUB_DEFAULT=0")
    bmx_knob.apply([boot.knob("ht", "off")], host="h1", allow_reboot=True)
    assert boot.grub.read_text() == 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="nosmt"\n'


def test_inspect_reads_the_running_kernel(tmp_path):
    boot = Boot(tmp_path / "boot")
    got = bmx_knob.inspect([boot.knob("ht", "on")], {"ht": ["on", "off"]}, host="h1")
    assert got["ht"] == {"role": "knob_kernel_cmdline", "current": "on", "levels": {"on": "", "off": ""}}
