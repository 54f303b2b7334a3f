"""Reboots are real: knob_kernel_cmdline and the reboot path of playbooks/tasks/knobs.yml.

The bmx_knob module edits the boot loader's configuration, the host reboots, and the
running kernel's command line is read back (the line editing and the module's two
calls around a reboot as plain Python: tests/unit/host/test_knob_backend_kernel_cmdline.py).
Nothing here touches this machine's own /etc/default/grub, /boot or /proc/cmdline:
every test points the role's boot-loader file, update command and command-line source
at files in its own scratch directory (role variables), and the campaign test reboots
a network-namespace SSH host
(tests/netns.py) whose "reboot" is a stand-in the test provides: it restarts that
host's sshd, gives it a new boot id and "boots" the command line the boot loader's
file holds. A real reboot of this machine cannot be part of a test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import read_csv
from knobkit import KnobRunner, knob

ROOT = Path(__file__).resolve().parents[2]
SYSTEM_FILES = [Path("/etc/default/grub"), Path("/boot/grub/grub.cfg"), Path("/proc/cmdline")]


# ------------------------------------------------------------------ the shipped example
def test_ht_cores_example_takes_ht_by_reboot():
    from benchmatrix.spec.load import load_spec
    done = subprocess.run([sys.executable, "-m", "benchmatrix.cli", "validate", "config/experiments/ht_cores.yaml"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning" not in (done.stdout + done.stderr).lower()
    spec = load_spec(ROOT / "config" / "experiments" / "ht_cores.yaml")
    ht = spec.knobs["ht"]
    assert (ht.role, ht.cost_class) == ("knob_kernel_cmdline", "reboot")
    assert ht.vars == {"knob_kernel_cmdline_parameter": "nosmt",
                       "knob_kernel_cmdline_levels": {"on": "absent", "off": "present"}}
    text = (ROOT / "config" / "experiments" / "ht_cores.yaml").read_text()
    assert "ht: {role: knob_smt, cost: none}" in text, "the live alternative is shown"


def test_validate_requires_cost_reboot(tmp_path):
    text = (ROOT / "config" / "experiments" / "ht_cores.yaml").read_text().replace(
        "    role: knob_kernel_cmdline\n    cost: reboot\n", "    role: knob_kernel_cmdline\n    cost: restart\n")
    spec = tmp_path / "ht_restart.yaml"
    spec.write_text(text)
    ht_line = "  ht:                                 # nosmt on the kernel command line: one reboot per change"
    line = text.splitlines().index(ht_line) + 1
    done = subprocess.run([sys.executable, "-m", "benchmatrix.cli", "validate", str(spec)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert (f"{spec}:{line}: knob 'ht': knob_kernel_cmdline takes effect only after a reboot; "
            "declare cost: reboot (not restart)") in done.stderr + done.stdout


def test_rebooting_knobs_are_applied_first(tmp_path):
    # A reboot after a live knob (CPU hotplug here) would undo it while its record
    # claimed it: the batch applies knobs of rebooting roles first, whatever the spec order.
    from benchmatrix.execute.restore import knob_items as _knob_items
    from benchmatrix.spec.load import load_spec
    text = (ROOT / "config" / "experiments" / "ht_cores.yaml").read_text()
    head, knobs = text.split("knobs:\n", 1)
    ht_block, rest = knobs.split("  cores: ", 1)
    cores_line, tail = rest.split("\n", 1)
    spec_path = tmp_path / "ht_last.yaml"
    spec_path.write_text(head + "knobs:\n  cores: " + cores_line + "\n" + ht_block + tail)
    spec = load_spec(spec_path)
    assert list(spec.knobs) == ["cores", "ht"]
    items = _knob_items(spec, {"ht": "off", "cores": 20, "users": 50})
    assert [i["factor"] for i in items] == ["ht", "cores"]
    assert items[0] == {"factor": "ht", "role": "knob_kernel_cmdline", "value": "off", "vars": spec.knobs["ht"].vars,
                        "cost": "reboot"}


# ------------------------------------------------------------------ the role on localhost
class Boot:
    """A boot loader file, an update command and a running command line in a scratch dir."""

    def __init__(self, root: Path, line: str = "quiet splash", running: str | None = None):
        root.mkdir(parents=True, exist_ok=True)
        self.grub = root / "grub"
        self.cmdline = root / "cmdline"
        self.updates = root / "updates"
        self.grub.write_text(f'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="{line}"\nGRUB_CMDLINE_LINUX=""\n')
        self.cmdline.write_text(f"BOOT_IMAGE=/vmlinuz root=/dev/vda1 ro {line if running is None else running}\n")

    def vars(self) -> dict[str, object]:
        return {"knob_kernel_cmdline_grub_file": str(self.grub), "knob_kernel_cmdline_source": str(self.cmdline),
                # The update command records its calls instead of regenerating a boot loader's files.
                "knob_kernel_cmdline_update_command": [sys.executable, "-c",
                                                       f"open({str(self.updates)!r}, 'a').write('update\\n')"]}

    def update_calls(self) -> int:
        return len(self.updates.read_text().splitlines()) if self.updates.exists() else 0


def ht(value: str, boot: Boot, cost: str = "reboot", **extra) -> dict:
    return knob("ht", "knob_kernel_cmdline", value, cost=cost, knob_kernel_cmdline_parameter="nosmt",
                knob_kernel_cmdline_levels={"on": "absent", "off": "present"}, **boot.vars(), **extra)


@pytest.fixture
def runner(tmp_path):
    return KnobRunner(tmp_path)


@pytest.fixture
def system_files():
    """This machine's own boot configuration and command line, to check they are never written."""
    def seen():
        # A /proc file's mtime is when its inode was last made, which the kernel redoes
        # at will: its content is what counts.
        return {p: (None if p.parts[1] == "proc" else p.stat().st_mtime_ns, p.read_bytes())
                for p in SYSTEM_FILES if p.exists()}

    before = seen()
    yield
    assert seen() == before


@pytest.mark.slow
def test_already_running_the_level_writes_the_config_without_a_reboot(runner, tmp_path, system_files):
    # The kernel runs with nosmt already (booted by hand) but the boot loader's file
    # lacks it: the file is written so the next boot keeps it; no reboot is needed, so
    # none is asked for (and the local connection could not reboot anyway).
    boot = Boot(tmp_path / "boot", line="quiet", running="quiet nosmt")
    states, _ = runner.run([ht("off", boot)])
    state = states["ht"]
    assert state["ok"] and state["actual"] == "off" and state["changed"] is True, state
    assert state["rebooted"] is False and state["baseline"] == "off"
    assert 'GRUB_CMDLINE_LINUX_DEFAULT="quiet nosmt"' in boot.grub.read_text()
    assert boot.update_calls() == 1
    states, _ = runner.run([ht("off", boot)])
    assert states["ht"]["changed"] is False and boot.update_calls() == 1


@pytest.mark.slow
def test_clear_errors(runner, tmp_path, system_files):
    boot = Boot(tmp_path / "boot")
    err = str(runner.fail([ht("off", boot, cost="none")]))
    assert "knob ht (knob_kernel_cmdline) on localhost" in err and "cost: reboot" in err, err
    boot.grub.write_text('GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT quiet"\n')
    err = str(runner.fail([ht("off", boot)], extravars={"allow_reboot": True}))
    assert f"on localhost: {boot.grub}: GRUB_CMDLINE_LINUX_DEFAULT=" in err and "edit it by hand" in err, err


# ------------------------------------------------------------------ the whole path on an SSH host
# The host's boot loader and "reboot", a stand-in run on the namespace host:
#   update DIR             grub-mkconfig's part: DIR/grub.cfg gets the command line that
#                          the shell-syntax file DIR/grub gives, as update-grub would;
#   reboot DIR SSHD CONF   returns at once; then, detached: every sshd of the host's
#                          network namespace dies (as in a reboot, sessions included),
#                          the "kernel" boots DIR/grub.cfg's line into DIR/cmdline, the
#                          host gets a new DIR/boot_id, DIR/reboots.log a line, and sshd
#                          starts again.
FAKE_BOOT = r'''
import os, subprocess, sys, time, uuid

cmd, d = sys.argv[1], sys.argv[2]

def booted_line():
    return subprocess.run(["sh", "-c", '. "$1"; echo $GRUB_CMDLINE_LINUX $GRUB_CMDLINE_LINUX_DEFAULT', "sh",
                           os.path.join(d, "grub")], check=True, capture_output=True, text=True).stdout.strip()

if cmd == "update":
    with open(os.path.join(d, "grub.cfg"), "w") as fh:
        fh.write("linux /vmlinuz root=/dev/vda1 ro " + booted_line() + "\n")
    sys.exit(0)

sshd, conf = sys.argv[3], sys.argv[4]
if os.fork():
    sys.exit(0)
os.setsid()
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
time.sleep(0.5)
mine = os.stat("/proc/self/ns/net").st_ino
for pid in os.listdir("/proc"):
    try:
        if (pid.isdigit() and open(f"/proc/{pid}/comm").read().strip() == "sshd"
                and os.stat(f"/proc/{pid}/ns/net").st_ino == mine):
            os.kill(int(pid), 9)
    except OSError:
        pass
with open(os.path.join(d, "grub.cfg")) as fh:
    line = fh.read().split(None, 1)[1].strip()
with open(os.path.join(d, "cmdline"), "w") as fh:
    fh.write("BOOT_IMAGE=" + line + "\n")
boot_id = str(uuid.uuid4()) + "\n"
with open(os.path.join(d, "boot_id"), "w") as fh:
    fh.write(boot_id)
with open(os.path.join(d, "boot_ids"), "a") as fh:
    fh.write(boot_id)
with open(os.path.join(d, "reboots.log"), "a") as fh:
    fh.write(line + "\n")
subprocess.run([sshd, "-f", conf, "-E", conf + ".log"])
'''

CAMPAIGN = """\
name: {name}
hosts: all
inventory: config/inventory/ns.yml
{allow}factors:
  ht: ["on", "off"]
  users: [1, 2]
knobs:
  ht:
    role: knob_kernel_cmdline
    cost: reboot
    vars: {{knob_kernel_cmdline_parameter: nosmt, knob_kernel_cmdline_levels: {{"on": absent, "off": present}}}}
workload:
  role: workload_command
  vars: {{argv: [echo, "users {{{{ users }}}}"]}}
  timeout: 30
replicates: {replicates}
warmup: 0
order: {{strategy: restricted, seed: 1}}
"""


class SshBoot:
    """One namespace host's boot files (grub, grub.cfg, cmdline, boot_id) and fake boot."""

    def __init__(self, root: Path, net, host: str, line: str):
        self.dir = root / host
        self.dir.mkdir(parents=True)
        self.script = root / "fake_boot.py"
        self.script.write_text(FAKE_BOOT)
        self.grub = self.dir / "grub"
        self.grub.write_text(f'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="{line}"\nGRUB_CMDLINE_LINUX=""\n')
        self.original = self.grub.read_text()
        py = sys.executable
        subprocess.run([py, str(self.script), "update", str(self.dir)], check=True)
        self.cmdline = self.dir / "cmdline"
        self.cmdline.write_text("BOOT_IMAGE=/vmlinuz root=/dev/vda1 ro " + line + "\n")
        (self.dir / "boot_id").write_text("first-boot\n")
        (self.dir / "boot_ids").write_text("first-boot\n")
        from netns import SSHD
        self.host_vars = {
            "knob_kernel_cmdline_grub_file": str(self.grub),
            "knob_kernel_cmdline_source": str(self.cmdline),
            "knob_kernel_cmdline_update_command": json.dumps([py, str(self.script), "update", str(self.dir)]),
            "knob_kernel_cmdline_reboot_command": json.dumps(
                f"{py} {self.script} reboot {self.dir} {SSHD} {net.workdir / f'sshd_{host}.conf'}"),
            "knob_kernel_cmdline_boot_time_command": json.dumps(f"cat {self.dir / 'boot_id'}"),
            "knob_kernel_cmdline_reboot_timeout": "60",
        }

    def reboots(self) -> list[str]:
        log = self.dir / "reboots.log"
        return log.read_text().splitlines() if log.exists() else []


@pytest.fixture
def ssh_host(project, tmp_path):
    """The project copy plus one namespace SSH host with boot files in the test's scratch dir."""
    from netns import NamespaceHosts, available
    if available():
        pytest.skip(available())
    net = NamespaceHosts(tmp_path / "net", 1)
    net.__enter__()
    try:
        yield project, net
    finally:
        net.teardown()


def ssh_campaign(project, net, boot: SshBoot, name: str, allow: bool, replicates: int, text: str = CAMPAIGN):
    host_vars = {"batch_runner_root": str(project.root / "hostwork"), **boot.host_vars}
    (project.root / "config" / "inventory" / "ns.yml").write_text(net.inventory({"h1": host_vars}))
    spec = project.write_spec(name, text.format(name=name, replicates=replicates,
                                                allow="allow_reboot: true\n" if allow else ""))
    plan = project.bmx("plan", str(spec), "--json")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    res = subprocess.run(net.ctl_cmd([sys.executable, "-m", "benchmatrix.cli", "run", str(spec)]),
                         cwd=project.root, env=project.env(), capture_output=True, text=True, timeout=600)
    return json.loads(plan.stdout), res


TWO_KNOBS = CAMPAIGN.replace("""  users: [1, 2]
knobs:
""", """  mit: ["auto", "off"]
  users: [1, 2]
zip: [[ht, mit]]
knobs:
  mit: {{role: knob_kernel_cmdline, cost: reboot, vars: {{knob_kernel_cmdline_parameter: mitigations}}}}
""")


@pytest.mark.slow
def test_reboot_path_on_an_ssh_host(ssh_host, tmp_path, system_files):
    # Two kernel parameters that change together (zipped): nosmt for ht, mitigations.
    project, net = ssh_host
    boot = SshBoot(tmp_path / "boot", net, "h1", "quiet mitigations=auto splash")   # ht on, mit auto
    planned, res = ssh_campaign(project, net, boot, "reboot_ht", allow=True, replicates=1, text=TWO_KNOBS)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    exp = project.exp("reboot_ht")
    plan = sorted(read_csv(exp / "plan.csv"), key=lambda p: int(p["seq"]))
    # Seed 1: a visit of the host's baseline (nothing to do), one of ht off with
    # mitigations off (one reboot for both), then the campaign-end restore (a reboot
    # back). The plan counts its first setting as a change, and a pair that changes
    # together as one reboot, so its reboot-class changes equal the reboots made.
    assert [(p["ht"], p["mit"]) for p in plan] == [("on", "auto")] * 2 + [("off", "off")] * 2
    assert planned["this_plan"]["reconfigurations"]["reboot"] == 2
    assert boot.reboots() == ["/vmlinuz root=/dev/vda1 ro quiet mitigations=off splash nosmt",
                              "/vmlinuz root=/dev/vda1 ro quiet mitigations=auto splash"]
    assert len(set((boot.dir / "boot_ids").read_text().split())) == 3, "each reboot gave a new boot id"

    records = sorted((json.loads(p.read_text()) for p in exp.glob("runs/*/*/record.json")), key=lambda r: r["seq"])
    assert len(records) == 4 and all(r["status"] == "ok" for r in records), [r["reason"] for r in records]
    for r in records:
        for factor, baseline in (("ht", "on"), ("mit", "auto")):
            k = r["knobs"][factor]
            assert k["intended"] == r["factors"][factor] == k["actual"] and k["ok"], (factor, k)
            assert k["role"] == "knob_kernel_cmdline" and k["baseline"] == baseline
            assert k["rebooted"] is (r["factors"][factor] == "off")
    assert [r["knobs"]["ht"]["changed"] for r in records] == [False, False, True, False]
    # One reboot for both, and verified after it: before it the running kernel had
    # neither parameter set, so the actual values were read from the rebooted kernel, by
    # the module call that follows the reboot.
    log = (exp / "logs" / "ansible" / f"{records[2]['batch']}.log").read_text()
    tasks = [(part.split("]", 1)[0], part) for part in log.split("TASK [")[1:]]
    names = [name for name, _ in tasks]
    reboots = [body for name, body in tasks if name == "Reboot the host for the knobs"]
    assert len(reboots) == 1 and "changed: [h1]" in reboots[0], "one reboot serves ht and mit"
    after = names[names.index("Reboot the host for the knobs"):]
    assert after[1] == "Read the knobs back after the reboot and set the live ones", after
    read_back = dict(tasks)["Read the knobs back after the reboot and set the live ones"]
    assert "ok: [h1]" in read_back or "changed: [h1]" in read_back, read_back
    # Campaign end: the original line is back in the boot loader's file and running.
    assert boot.grub.read_text() == boot.original
    assert boot.cmdline.read_text().split()[-3:] == ["quiet", "mitigations=auto", "splash"]
    restored = json.loads((exp / "hosts" / "h1" / "restored.json").read_text())
    assert restored["knobs"]["ht"]["actual"] == "on" and restored["knobs"]["ht"]["rebooted"], restored
    assert restored["knobs"]["mit"]["actual"] == "auto", restored


@pytest.mark.slow
def test_reboot_refused_without_allow_reboot(project, tmp_path, system_files):
    # The knob loop's refusal without allow_reboot, before any write, in a campaign: it
    # comes before any reboot, so a localhost campaign shows it (the SSH host's reboots
    # are test_reboot_path_on_an_ssh_host's); the reboot command, never to be called,
    # only records a call (and Ansible never reboots a local connection).
    boot = Boot(tmp_path / "boot", line="quiet nosmt splash")   # ht off: the plan's first visit is on
    grub = boot.grub.read_text()
    reboots = tmp_path / "reboots"
    knob_vars = {**boot.vars(), "knob_kernel_cmdline_reboot_command":
                 f"{sys.executable} -c \"open('{reboots}', 'a').write('reboot')\""}
    spec = project.write_spec("reboot_refused", local_campaign(knob_vars).format(name="reboot_refused", replicates=1,
                                                                                 allow=""))
    res = project.bmx("run", str(spec))
    assert res.returncode != 0
    refusal = ("knob ht (knob_kernel_cmdline) needs a reboot of localhost for the level on (nosmt absent; "
               "the running kernel has it present)")
    assert refusal in res.stderr, res.stderr[-3000:]
    runs = read_csv(project.exp("reboot_refused") / "runs.csv")
    refused = [r for r in runs if r["ht"] == "on"]
    assert refused and all(r["status"] == "failed" for r in refused)
    for r in refused:
        assert refusal in r["reason"], r["reason"]
        assert "allow_reboot: true" in r["reason"] and "\n" not in r["reason"]
    assert all(r["status"] == "ok" for r in runs if r["ht"] == "off"), "no reboot needed: they ran"
    assert not reboots.exists() and boot.grub.read_text() == grub and boot.update_calls() == 0


def test_levels_reach_ansible_as_the_strings_given():
    # The factor levels "on"/"off" of ht reached the knob roles as the booleans True and
    # False: a value tagged !unsafe is resolved as if unquoted by Ansible's YAML loader.
    import yaml
    from ansible.parsing.yaml.loader import AnsibleLoader

    from benchmatrix.execute.ansible import _Dumper, _Unsafe
    data = {"bmx_knobs": [{"value": v}
                          for v in ("on", "off", "yes", "null", "12", "4096.0", "{{ lookup('pipe', 'id') }}")]}
    text = yaml.dump(_Unsafe.wrap(data), Dumper=_Dumper)
    assert AnsibleLoader(text).get_single_data() == data
    assert "!unsafe '{{ lookup" in text, "a template stays marked as never to be evaluated"


@pytest.mark.slow
def test_a_reboot_into_the_old_line_is_caught(ssh_host, tmp_path, system_files):
    # The boot loader's configuration is not regenerated (an update command that does
    # nothing): the host reboots into its old command line. The check after the reboot
    # reads the running kernel, so the runs are invalid instead of mislabelled.
    project, net = ssh_host
    boot = SshBoot(tmp_path / "boot", net, "h1", "quiet splash")
    boot.host_vars["knob_kernel_cmdline_update_command"] = '["true"]'
    _, res = ssh_campaign(project, net, boot, "reboot_stale", allow=True, replicates=1)
    assert res.returncode != 0
    records = sorted((json.loads(p.read_text()) for p in project.exp("reboot_stale").glob("runs/*/*/record.json")),
                     key=lambda r: r["seq"])
    assert [r["status"] for r in records] == ["ok", "ok", "invalid", "invalid"], [r["reason"] for r in records]
    assert records[2]["reason"] == "knob ht: intended 'off', actual 'on'"
    assert records[2]["knobs"]["ht"]["rebooted"] is True
    assert boot.reboots() == ["/vmlinuz root=/dev/vda1 ro quiet splash"]
    # The restore takes the unbooted nosmt out of the boot loader's file again.
    assert boot.grub.read_text() == boot.original


def local_campaign(boot_vars: dict[str, object]) -> str:
    """CAMPAIGN on localhost, its knob's boot files and commands those of a :class:`Boot`."""
    knob_vars = json.dumps({"knob_kernel_cmdline_parameter": "nosmt",
                            "knob_kernel_cmdline_levels": {"on": "absent", "off": "present"}, **boot_vars})
    knob_line = ('vars: {{knob_kernel_cmdline_parameter: nosmt, knob_kernel_cmdline_levels: {{"on": absent, '
                 '"off": present}}}}')
    assert knob_line in CAMPAIGN
    return (CAMPAIGN.replace("inventory: config/inventory/ns.yml", "inventory: config/inventory/test.yml")
            .replace("hosts: all", "hosts: localhost")
            .replace(knob_line, "vars: " + knob_vars.replace("{", "{{").replace("}", "}}")))


@pytest.mark.slow
def test_check_reads_the_running_kernel_and_wants_allow_reboot(project, tmp_path, system_files):
    # bmx check reads the knob through the module's inspect mode (nothing written) and,
    # without allow_reboot, names the reboot a second level would take as a blocker.
    boot = Boot(tmp_path / "boot")
    grub = boot.grub.read_text()
    text = local_campaign(boot.vars())
    for allow, rc in (False, 1), (True, 0):
        name = f"check_ht_{allow}"
        spec = project.write_spec(name, text.format(name=name, replicates=1,
                                                    allow="allow_reboot: true\n" if allow else ""))
        res = project.bmx("check", str(spec))
        assert res.returncode == rc, res.stdout + res.stderr
        row = next(line for line in res.stdout.splitlines() if line.startswith("localhost") and " ht " in line)
        assert "knob_kernel_cmdline" in row and " on " in row and "on ok, off ok" in row, res.stdout
        blocker = "bmx check: localhost: knob ht (knob_kernel_cmdline) needs a reboot of localhost"
        assert (blocker in res.stderr) is not allow, res.stderr
    assert boot.grub.read_text() == grub and boot.update_calls() == 0
