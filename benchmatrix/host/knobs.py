#!/usr/bin/python
"""Read, set and verify every benchmatrix host knob of a batch in one module call.

Runs on the host, standard library only (a WANT_JSON module: no Ansible code on the
host). Every knob role (playbooks/roles/knob_NAME) has a backend class here, registered
with ``@register``, with ``check()``, ``read()`` and ``write()``: files under /proc and
/sys (knob_sysctl, knob_sysfs, knob_read_ahead, knob_smt, knob_cpu_online,
knob_cpu_governor), the CPUs a batch runs on (knob_cpu_affinity: run settings only), a
file's layout on disk
(knob_file_layout), database settings through their clients (knob_postgresql_setting,
knob_mssql_setting, knob_oracle_parameter), an md array (knob_raid_level) and the
kernel command line, which takes a reboot (knob_kernel_cmdline; see apply()).
One call takes every knob of a batch: it checks and reads them all first (so a
refusal changes nothing), writes only those whose value read back differs from the
intended one, reads those back, and returns per knob ``{role, intended, actual,
changed, baseline, rebooted, seconds, ok}``. ``mode: inspect`` writes nothing and
tells, for each knob, its current value and whether each of ``levels`` can be set
(``bmx check``).

The roles' variables keep their names and meaning: each backend declares them as
``options`` (:class:`Option`: name, type, default, description), the one copy that
roles/knob_NAME/defaults/main.yml and meta/argument_specs.yml repeat (a unit test holds
them to it) and that ``bmx validate`` checks a spec's knob ``vars`` against. A knob's
value for ``knob_sysfs_path`` is the host's own variable of that name when the
inventory or the extra vars set one (``settings``), else the spec's ``vars`` of the
knob, else the declared default.

One file, three users: Ansible runs it as the module playbooks/library/bmx_knob.py (a
symbolic link to benchmatrix/host/knobs.py), the controller imports it
(``benchmatrix.host.knobs``: the declarations, for ``bmx validate``), and it can be
shipped next to the batch runner. Hence the standard library only, Python 3.8 syntax,
and no import of the rest of benchmatrix.
"""

from __future__ import annotations

import json
import os
import re
import time

DOCUMENTATION = r"""
module: bmx_knob
short_description: Read, set and verify benchmatrix's host knobs in one call
description:
  - One backend per knob role (knob_sysctl, knob_sysfs, knob_read_ahead, knob_smt, knob_cpu_online,
    knob_cpu_governor, knob_cpu_affinity, knob_file_layout, knob_postgresql_setting, knob_mssql_setting,
    knob_oracle_parameter, knob_raid_level, knob_kernel_cmdline).
  - Reads every knob first and refuses (changing nothing) when one cannot be set; writes only what differs and
    reads it back.
options:
  knobs:
    description: The knobs, each C({factor, role, value, vars}) as benchmatrix's bmx_knobs items; an item with
      C(live) true is only read (its baseline and current value; the batch runner sets it before each run).
    type: list
    elements: dict
    required: true
  settings:
    description: The host's own values of role variables (inventory, extra vars); they win over a knob's vars.
    type: dict
    default: {}
  host:
    description: The inventory name of the host, for messages.
    type: str
    default: this host
  mode:
    description: C(apply) sets and verifies; C(read) only reads; C(inspect) reads and checks C(levels).
    type: str
    choices: [apply, read, inspect]
    default: apply
  levels:
    description: For C(inspect), the planned levels per factor.
    type: dict
    default: {}
  allow_reboot:
    description: Whether a knob may reboot the host; without it a knob that needs a reboot fails the call before
      any write.
    type: bool
    default: false
  before:
    description: After a reboot, the first call's C(knobs) result; its reboot-class knobs keep their baseline and
      are recorded changed and rebooted.
    type: dict
  reboot_seconds:
    description: After a reboot, the seconds it took (added to the rebooted knobs' C(seconds)).
    type: float
    default: 0
  baseline_dir:
    description: A directory on the host where each knob's value before its first change is kept before anything
      is written; a kept value is the C(baseline) returned until a restore put it back. Empty keeps nothing.
    type: str
    default: ""
  restore:
    description: Set each knob to its kept baseline where one is kept (else its C(value); an item without a value
      and with none kept is left out), and remove the kept baselines it put back.
    type: bool
    default: false
"""

RETURN = r"""
knobs:
  description: Per factor C({role, intended, actual, changed, baseline, rebooted, seconds, ok}); in C(inspect)
    mode C({role, current, levels}), where levels maps each level to an empty string or why it cannot be set.
  type: dict
  returned: always
run_settings:
  description: Per factor what the batch runner merges into every run of the batch (knob_cpu_affinity's
    C({cpus, pin_pidfiles})), C({}) for the other knobs.
  type: dict
  returned: in apply and read mode
reboot:
  description: C({factors, command, boot_time_command, timeout}), the knobs whose values take a reboot that
    tasks/knobs.yml makes next, and how (empty commands keep ansible.builtin.reboot's defaults); factors is empty
    when none does.
  type: dict
  returned: in apply and read mode
"""


class KnobError(Exception):
    """A knob that cannot be read or set; the message names the role and the host."""


def _read(path):
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read()


def _write(role, path, text, host):
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise KnobError(f"{role}: cannot write '{text}' to {path} on {host}: {exc.strerror or exc}") from None


def _words(text):
    """Whitespace collapsed, as the roles read files back."""
    return " ".join(text.split())


def _writable(path):
    """Why ``path`` cannot be written, or ''."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"{path}: {exc.strerror}"
    if not st.st_mode & 0o222 or not os.access(path, os.W_OK):
        return f"{path} is not writable (mode {oct(st.st_mode & 0o777)}, uid {os.geteuid()})"
    return ""


class Option:
    """One role variable a backend reads: its name, Ansible argument-spec type (``str``,
    ``path``, ``int``, ``bool``, ``list``, ``dict``), default and description.

    The role's meta/argument_specs.yml and defaults/main.yml say the same (a unit test
    holds them to it), and ``bmx validate`` checks a spec's knob ``vars`` against it.
    ``required`` options have no default (``var()`` gives ''). A ``derived`` option's default is computed
    when unset (from the knob's cost class, or the workload's path): ``default`` is the
    usual result, for the docs, and the backend computes the real one.
    """

    __slots__ = ("name", "type", "default", "description", "required", "elements", "derived")

    # shape: a role option's 7 fields, 4 defaulted; a slots dataclass needs 3.10, this module is 3.8
    def __init__(self, name, type, description, default=None, required=False, elements=None, derived=False):
        self.name, self.type, self.description = name, type, description
        self.default, self.required, self.elements, self.derived = default, required, elements, derived

    def __repr__(self):
        return f"Option({self.name!r}, {self.type!r})"

    def type_problem(self, value):
        """Why ``value`` (a spec's YAML value) is not of this option's type, or ''. A Jinja
        template (a string with ``{{``) is left to Ansible."""
        if isinstance(value, str) and "{{" in value:
            return ""
        ok = {"str": (str, int, float), "path": (str,), "int": (int,), "float": (int, float),
              "bool": (bool,), "list": (list, str), "dict": (dict,)}.get(self.type, (object,))
        good = isinstance(value, ok) and not (isinstance(value, bool) and self.type in ("str", "int", "float"))
        if self.type == "int" and isinstance(value, str):
            good = value.strip().lstrip("+-").isdigit()
        if self.type == "bool" and isinstance(value, str):
            good = value.lower() in ON_WORDS + OFF_WORDS
        if self.type == "list" and isinstance(value, list) and self.elements == "str":
            good = all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value)
        if good:
            return ""
        kind = (f"a list of {self.elements}" if self.type == "list" and self.elements
                else ("an " if self.type[0] in "aeiou" else "a ") + self.type)
        return f"{self.name} must be {kind}, not {value!r}"


#: role name -> backend class; each backend class registers itself with @register.
BACKENDS = {}


def register(cls):
    """Class decorator: make ``cls`` the backend of the knob role ``cls.role``; its
    ``defaults`` (what ``var()`` falls back to) come from its declared ``options``.

    Raises:
        ValueError: another backend already registered ``cls.role`` (the second would
            silently replace the first).
    """
    if cls.role in BACKENDS:
        raise ValueError(f"knob backend {cls.role!r} registered twice: {BACKENDS[cls.role].__name__} "
                         f"and {cls.__name__}")
    cls.defaults = {o.name: "" if o.required else o.default for o in cls.options if not o.derived}
    BACKENDS[cls.role] = cls
    return cls


class Backend:
    """One knob: ``read()`` returns (actual, baseline state) for the intended value's
    spelling; ``write()`` puts the intended value; ``problem(level)`` says why a level
    cannot be set, or ''."""

    role = ""
    #: The role's variables besides ``<role>_value`` (the level), as :class:`Option` items.
    options = ()
    #: {name: default} of the options, set by @register: what var() falls back to.
    defaults: dict = {}
    #: The cheapest cost class a change of this knob can have (``bmx validate`` refuses a
    #: cheaper one in the spec): "reboot" for a backend whose changes take a reboot.
    cost = "none"
    #: False for a knob that changes nothing on the host (it only hands run settings to
    #: the batch runner): it is never written and never ``changed``.
    writes = True
    #: True for ``mode: inspect`` (bmx check): require() loads, installs and starts nothing.
    dry = False
    #: The role variables that name what a change touches (a file, a device, a database
    #: setting): the key of the baseline kept on the host (:func:`kept_baseline`); every
    #: option when empty. Timeouts and restart permissions are left out: the batch runner
    #: passes other ones than the module for the same knob.
    target = ()
    #: Host variables besides the role's own (``knob_*``) that the backend reads from the
    #: host's settings (the workload's directory): tasks/knobs.yml and check_host.yml pass
    #: them (:func:`setting_names`).
    host_settings = ()

    def services(self):
        """The roles that must run on the host before the knob call (a database server this
        knob sets), as names of roles with a ``main`` tasks file; () for most knobs.
        tasks/knobs.yml includes them (:func:`services`)."""
        return ()

    @classmethod
    def describe(cls, path, host):
        """What the backend finds on the host about the workload path, for the host's
        facts (tasks/prepare.yml, mode ``facts``): ``{"device": {...}, "state_files":
        [...]}`` where it has something to say (knob_read_ahead: the path's disk), else {}."""
        return {}

    def identity(self):
        """What a change of this knob touches, as a list of texts (:attr:`target`'s values)."""
        return [str(self.var(n)) for n in self.target or tuple(o.name for o in self.options)]

    def __init__(self, knob, settings, host):
        self.knob, self.host = knob, host
        self.vars = dict(knob.get("vars") or {})
        self.settings = settings

    def var(self, name):
        """The host's own setting, else the knob's vars, else the role's default."""
        for source in (self.settings, self.vars):
            if source.get(name) not in (None, ""):
                return source[name]
        return self.defaults.get(name, "")

    def fail(self, message):
        raise KnobError(f"{self.role}: {message}")

    def check(self, value):
        """Refuse an intended value or a setup that cannot work (before any write)."""

    def require(self):
        """Refuse a host that lacks what every level needs (a client, a driver), naming it."""

    def blocker(self):
        """Why no level can be set on this host (require() failing), or ''."""
        try:
            self.require()
        except KnobError as exc:
            return str(exc)
        return ""

    def problem(self, value):
        try:
            self.check(value)
            if self.read(value)[0] == str(value):
                return ""  # already set: nothing to write
            return self.write_problem(value)
        except KnobError as exc:
            return str(exc)

    def write_problem(self, value):
        return ""

    def run_settings(self, value):
        """What the batch runner merges into every run of the batch (e.g. ``cpus``); {} for most knobs."""
        return {}

    #: True when a change takes effect only after a reboot (tasks/knobs.yml makes it).
    reboot = False

    def differs(self, value, actual):
        """Whether to write: the value read back is not the intended one."""
        return actual != str(value)

    def reboot_why(self, value):
        """What the refusal of a reboot adds after "needs a reboot of HOST"."""
        return ""

    def reboot_how(self):
        """{command, boot_time_command, timeout} for ansible.builtin.reboot ('' keeps its default)."""
        return {}

    def current(self, value):
        """What ``mode: inspect`` shows as the knob's current state."""
        return self.read(value)[1]


class FileBackend(Backend):
    """A knob that is one file's text (``path``): written as the intended value."""

    path = ""

    def write(self, value, state):
        _write(self.role, self.path, str(value), self.host)

    def write_problem(self, value):
        return _writable(self.path)


@register
class Sysctl(FileBackend):
    role = "knob_sysctl"
    target = ("knob_sysctl_key", "knob_sysctl_proc_root")
    options = (
        Option("knob_sysctl_key", "str", "The sysctl key, e.g. vm.swappiness.", required=True),
        Option("knob_sysctl_proc_root", "path", "Root of the sysctl tree.", default="/proc/sys"),
    )
    KEY = re.compile(r"^[a-z0-9_]+(\.[A-Za-z0-9_-]+)+$")

    @property
    def path(self):
        key = str(self.var("knob_sysctl_key"))
        if not self.KEY.match(key):
            self.fail(f"'{key}' is not a sysctl key (set knob_sysctl_key in the knob's vars)")
        return os.path.join(str(self.var("knob_sysctl_proc_root")), key.replace(".", "/"))

    def read(self, value):
        try:
            text = _words(_read(self.path))
        except OSError as exc:
            self.fail(f"cannot read {self.path} on {self.host}: {exc.strerror}")
        return text, text


@register
class Sysfs(FileBackend):
    role = "knob_sysfs"
    target = ("knob_sysfs_path", "knob_sysfs_root")
    options = (
        Option("knob_sysfs_path", "str", "Absolute path of the sysfs file, under C(knob_sysfs_root).", required=True),
        Option("knob_sysfs_root", "path", "The tree the path must lie in.", default="/sys"),
    )

    @property
    def path(self):
        path, root = str(self.var("knob_sysfs_path")), str(self.var("knob_sysfs_root"))
        if not path.startswith("/") or not os.path.normpath(path).startswith(os.path.normpath(root).rstrip("/") + "/"):
            self.fail(f"'{path}' is not a file under {root} "
                      "(set knob_sysfs_path in the knob's vars to an absolute sysfs path)")
        if not os.path.isfile(path):
            self.fail(f"{path} does not exist on {self.host}")
        return path

    def read(self, value):
        text = _words(_read(self.path))
        # A choice list such as "always [madvise] never" reads back as the selected word.
        if "[" in text and "]" in text:
            text = text.split("[", 1)[1].split("]", 1)[0]
        return text, text


@register
class ReadAhead(Backend):
    role = "knob_read_ahead"
    target = ("knob_read_ahead_path", "knob_read_ahead_device")
    host_settings = ("bmx_workload_path", "workload_fio_directory", "workload_fio_loopfs_mb")
    options = (
        Option("knob_read_ahead_path", "str",
               "A path on the filesystem whose device is tuned (its nearest existing parent is used).",
               default="/var/tmp/benchmatrix/scratch"),
        Option("knob_read_ahead_device", "str",
               "A device name or /dev path to tune instead of resolving the path; a partition tunes its disk.",
               default=""),
    )

    def var(self, name):
        value = super().var(name)
        if name == "knob_read_ahead_path" and not (self.settings.get(name) or self.vars.get(name)):
            # The workload's path, as the role's default says.
            value = (self.settings.get("bmx_workload_path") or self.settings.get("workload_fio_directory")
                     or value)
        return value

    def check(self, value):
        if not re.match(r"^[0-9]+$", str(value)):
            self.fail(f"'{value}' is not a read-ahead in KiB (a whole number)")

    @classmethod
    def describe(cls, path, host):
        """The file system and disk of ``path`` (its nearest existing parent), as
        :meth:`device` finds them: {name, sysfs, read_ahead_file, scheduler_file,
        partition, source, fstype, target, maj_min, error}, error "" when the disk was
        found; the disk's read-ahead and scheduler files are state files of the facts."""
        import subprocess

        near = path
        while not os.path.exists(near) and near not in ("/", ""):
            near = os.path.dirname(near) or "/"
        try:
            proc = subprocess.run(["findmnt", "--json", "--output", "MAJ:MIN,SOURCE,FSTYPE,TARGET", "--target", near],
                                  capture_output=True, text=True, check=False)
            rc, said = proc.returncode, (proc.stdout + proc.stderr).strip()
        except OSError as exc:
            rc, said = 127, f"findmnt: {exc.strerror or exc}"
        fs = {}
        if rc == 0:
            try:
                fs = (json.loads(said).get("filesystems") or [{}])[0]
            except ValueError:
                rc = 1
        entry = "/sys/dev/block/" + fs.get("maj:min", "") if fs.get("maj:min") else ""
        real = disk = part = ""
        if entry and os.path.exists(entry):
            real = disk = os.path.realpath(entry)
            if os.path.exists(os.path.join(real, "partition")):
                disk, part = os.path.dirname(real), os.path.basename(real)
        name = os.path.basename(disk)
        queue = f"/sys/block/{name}/queue/" if disk else ""
        if disk:
            error = ""
        elif rc != 0:
            error = f"cannot find the filesystem of {path} on {host}: {said}"
        else:
            error = (f"{path} is on {fs.get('fstype')} {fs.get('source')} (device {fs.get('maj:min')}) on {host}, "
                     "not on a single block device; set knob_read_ahead_device")
        device = {"name": name, "sysfs": disk, "read_ahead_file": queue and queue + "read_ahead_kb",
                  "scheduler_file": queue and queue + "scheduler", "partition": part,
                  "source": fs.get("source") or "", "fstype": fs.get("fstype") or "",
                  "target": fs.get("target") or "", "maj_min": fs.get("maj:min") or "", "error": error}
        return {"device": device, "state_files": [device["read_ahead_file"], device["scheduler_file"]] if disk else []}

    def identity(self):
        # The disk itself: another path on it, or its name instead of a path, is the same knob.
        try:
            return [self.device()]
        except KnobError:
            return super().identity()

    def device(self):
        """The read_ahead_kb file of the disk holding the path (a partition tunes its disk)."""
        name, path = str(self.var("knob_read_ahead_device")), str(self.var("knob_read_ahead_path"))
        if name:
            node = name if name.startswith("/") else "/dev/" + name
            entry = "/sys/class/block/" + os.path.basename(os.path.realpath(node))
            if not os.path.exists(node) or not os.path.exists(entry):
                self.fail(f"no block device {name} on {self.host}")
        else:
            fs = self.filesystem(path)
            entry = "/sys/dev/block/" + fs.get("maj:min", "")
            if not os.path.exists(entry):
                self.fail(f"{path} is on {fs.get('fstype')} {fs.get('source')} (device {fs.get('maj:min')}) "
                          f"on {self.host}, not on a single block device; set knob_read_ahead_device")
        real = os.path.realpath(entry)
        disk = os.path.dirname(real) if os.path.exists(os.path.join(real, "partition")) else real
        return f"/sys/block/{os.path.basename(disk)}/queue/read_ahead_kb"

    def filesystem(self, path):
        import subprocess

        while not os.path.exists(path) and path != "/":
            path = os.path.dirname(path) or "/"
        proc = subprocess.run(["findmnt", "--json", "--output", "MAJ:MIN,SOURCE,FSTYPE,TARGET", "--target", path],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            self.fail(f"cannot find the filesystem of {self.var('knob_read_ahead_path')} on {self.host}: "
                      f"{proc.stderr.strip()}")
        return (json.loads(proc.stdout).get("filesystems") or [{}])[0]

    def read(self, value):
        text = _read(self.device()).strip()
        return text, text

    def write(self, value, state):
        _write(self.role, self.device(), str(value), self.host)

    def loopfs_due(self):
        """(size in MiB, mount point) of fio's loop file system (workload_fio_loopfs_mb) when
        the knob's path is on it and it is not mounted yet; None otherwise. Until the
        campaign prepares the host, the path lies on the disk below the mount point, which
        is not the device the knob will tune."""
        try:
            size = int(str(self.settings.get("workload_fio_loopfs_mb") or 0))
        except ValueError:
            return None
        if size <= 0 or str(self.var("knob_read_ahead_device")):
            return None
        mount = os.path.normpath(str(self.settings.get("workload_fio_directory")
                                     or self.defaults["knob_read_ahead_path"]))
        path = os.path.normpath(str(self.var("knob_read_ahead_path")))
        if path != mount and not path.startswith(mount.rstrip("/") + "/"):
            return None
        return None if os.path.ismount(mount) else (size, mount)

    def current(self, value):
        due = self.loopfs_due()
        if due:
            return (f"not there yet: the loop device of the {due[0]} MiB loop file system the role mounts at "
                    f"{due[1]} when the campaign prepares {self.host}")
        return super().current(value)

    def write_problem(self, value):
        return _writable(self.device())


ON_WORDS = ("on", "true", "1", "yes", "enabled")
OFF_WORDS = ("off", "false", "0", "no", "disabled")


@register
class Smt(Backend):
    role = "knob_smt"
    target = ("knob_smt_sysfs_root",)
    options = (
        Option("knob_smt_sysfs_root", "path", "The kernel's CPU directory.", default="/sys/devices/system/cpu"),
    )
    WHY = {"notsupported": "(the CPU, or the hypervisor of this virtual machine, exposes no sibling threads)",
           "notimplemented": "(the architecture has no SMT control)",
           "forceoff": "(disabled for good by nosmt=force on the kernel command line: remove it and reboot)"}

    @property
    def control(self):
        return os.path.join(str(self.var("knob_smt_sysfs_root")), "smt", "control")

    def check(self, value):
        if str(value).lower() not in ON_WORDS + OFF_WORDS:
            self.fail(f"'{value}' is not on or off")

    def read(self, value):
        if not os.path.exists(self.control):
            self.fail(f"SMT cannot be switched on {self.host}: {self.control} does not exist (a kernel without "
                      "CONFIG_HOTPLUG_SMT); switch hyperthreading in the firmware instead")
        control = _read(self.control).strip()
        if control not in ("on", "off"):
            self.fail(f"SMT cannot be switched on {self.host}: {self.control} reads '{control}' "
                      f"{self.WHY.get(control, '')}".rstrip())
        active = _read(os.path.join(os.path.dirname(self.control), "active")).strip()
        # on: control on and sibling threads active; off: control off; "on (inactive)":
        # switched on but no sibling thread is online (see knob_cpu_online).
        real = "off" if control == "off" else ("on" if active == "1" else "on (inactive)")
        word = str(value).lower()
        same = (real == "on" and word in ON_WORDS) or (real == "off" and word in OFF_WORDS)
        return (str(value) if same else real), real

    def write(self, value, state):
        _write(self.role, self.control, "on" if str(value).lower() in ON_WORDS else "off", self.host)

    def write_problem(self, value):
        return _writable(self.control)


def cpu_list(text, role="knob_cpu_online"):
    """A kernel CPU list as sorted numbers: '0-2,5' -> [0, 1, 2, 5]; '' -> []; ``role`` names the knob in errors."""
    cpus = set()
    for part in filter(None, (p.strip() for p in str(text or "").split(","))):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m or int(m.group(2) or m.group(1)) < int(m.group(1)):
            raise KnobError(f"{role}: '{text}' is not a CPU list")
        cpus.update(range(int(m.group(1)), int(m.group(2) or m.group(1)) + 1))
    return sorted(cpus)


@register
class CpuOnline(Backend):
    role = "knob_cpu_online"
    target = ("knob_cpu_online_sysfs_root",)
    options = (
        Option("knob_cpu_online_sysfs_root", "path", "The kernel's CPU directory.", default="/sys/devices/system/cpu"),
    )

    @property
    def root(self):
        return str(self.var("knob_cpu_online_sysfs_root"))

    def state(self, wanted):
        """Which CPUs to bring online (lowest first) or take offline (highest first).
        A CPU without an ``online`` file (often cpu0) cannot be unplugged; its state
        is the kernel's online list."""
        present = cpu_list(_read(os.path.join(self.root, "present")))
        kernel_online = set(cpu_list(_read(os.path.join(self.root, "online"))))
        switch = {}
        for cpu in present:
            try:
                switch[cpu] = _read(os.path.join(self.root, f"cpu{cpu}", "online")).strip() == "1"
            except OSError:
                pass
        is_online = {cpu: switch.get(cpu, cpu in kernel_online) for cpu in present}
        now = sorted(cpu for cpu, up in is_online.items() if up)
        out = {"count": len(now), "to_online": [], "to_offline": []}
        try:
            wanted = int(str(wanted).strip())
        except ValueError:
            self.fail(f"'{wanted}' is not a number of CPUs on {self.host}")
        if not 1 <= wanted <= len(present):
            self.fail(f"{wanted} CPUs cannot be online: {len(present)} are present on {self.host}")
        if wanted > len(now):
            can = [cpu for cpu in present if not is_online[cpu] and cpu in switch]
            if len(can) < wanted - len(now):
                self.fail(f"only {len(now) + len(can)} CPUs can be brought online on {self.host}")
            out["to_online"] = can[:wanted - len(now)]
        elif wanted < len(now):
            can = [cpu for cpu in reversed(now) if cpu in switch]
            if len(can) < len(now) - wanted:
                self.fail(f"only {len(can)} of the {len(now)} online CPUs can be taken offline "
                          f"(no online file: {', '.join(str(c) for c in now if c not in switch)}) on {self.host}")
            out["to_offline"] = sorted(can[:len(now) - wanted])
        return out

    def read(self, value):
        state = self.state(value)
        return str(state["count"]), str(state["count"])

    def write(self, value, state):
        plan = self.state(value)
        for cpu, bit in [(c, "1") for c in plan["to_online"]] + [(c, "0") for c in plan["to_offline"]]:
            _write(self.role, os.path.join(self.root, f"cpu{cpu}", "online"), bit, self.host)

    def write_problem(self, value):
        plan = self.state(value)
        for cpu in plan["to_online"] + plan["to_offline"]:
            why = _writable(os.path.join(self.root, f"cpu{cpu}", "online"))
            if why:
                return why
        return ""


@register
class CpuGovernor(Backend):
    """The cpufreq governor of the selected CPUs (cpuN/cpufreq/scaling_governor). The
    level is one governor for every selected CPU; a baseline where CPUs differ reads as
    ``N:GOVERNOR`` pairs (``0:performance,1:powersave``), a level this backend sets back."""

    role = "knob_cpu_governor"
    target = ("knob_cpu_governor_cpus", "knob_cpu_governor_sysfs_root")
    options = (
        Option("knob_cpu_governor_cpus", "str",
               "CPU list whose governor is set (e.g. 0-3,6); empty for every online CPU.", default=""),
        Option("knob_cpu_governor_sysfs_root", "path",
               "The kernel's CPU directory (online, cpuN/cpufreq).", default="/sys/devices/system/cpu"),
    )
    WORD = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")

    @property
    def root(self):
        return str(self.var("knob_cpu_governor_sysfs_root"))

    def file(self, cpu, name="scaling_governor"):
        return os.path.join(self.root, f"cpu{cpu}", "cpufreq", name)

    def cpus(self):
        """The selected CPUs: the knob's list, else every online CPU."""
        wanted = str(self.var("knob_cpu_governor_cpus") or "")
        try:
            return cpu_list(wanted or _read(os.path.join(self.root, "online")), self.role)
        except OSError as exc:
            self.fail(f"cannot read the online CPUs of {self.host}: {exc.strerror or exc}")

    def wanted(self, value):
        """{cpu: governor} the level asks for: one word for every CPU, or N:GOVERNOR pairs."""
        text, cpus = str(value).strip(), self.cpus()
        if ":" not in text:
            if not self.WORD.match(text):
                self.fail(f"'{value}' is not a governor name (e.g. performance, powersave, schedutil)")
            return dict.fromkeys(cpus, text)
        out = {}
        for part in text.split(","):
            cpu, _, word = part.strip().partition(":")
            if not cpu.isdigit() or not self.WORD.match(word) or int(cpu) not in cpus:
                self.fail(f"'{part.strip()}' is not CPU:GOVERNOR for a selected CPU ({', '.join(map(str, cpus))})")
            out[int(cpu)] = word
        return out

    def check(self, value):
        for cpu, governor in self.wanted(value).items():
            try:
                available = _read(self.file(cpu, "scaling_available_governors")).split()
            except OSError:
                continue  # an older driver without the list: the write will tell
            if governor not in available:
                self.fail(f"governor '{governor}' is not available for CPU {cpu} on {self.host} "
                          f"(available: {', '.join(available)})")

    def governors(self):
        out = {}
        for cpu in self.cpus():
            try:
                out[cpu] = _read(self.file(cpu)).strip()
            except OSError:
                self.fail(f"CPU {cpu} of {self.host} has no cpufreq governor ({self.file(cpu)} does not exist: "
                          "no frequency scaling driver, or a virtual machine without one)")
        return out

    def read(self, value):
        now = self.governors()
        same = set(now.values())
        baseline = same.pop() if len(same) == 1 else ",".join(f"{c}:{g}" for c, g in sorted(now.items()))
        want = self.wanted(value)
        # Read back in the level's spelling when every selected CPU has what it asks for.
        return (str(value) if all(now.get(c) == g for c, g in want.items()) else baseline), baseline

    def write(self, value, state):
        now = self.governors()
        for cpu, governor in sorted(self.wanted(value).items()):
            if now.get(cpu) != governor:
                _write(self.role, self.file(cpu), governor, self.host)

    def write_problem(self, value):
        now = self.governors()
        return next((why for cpu, governor in sorted(self.wanted(value).items())
                     if now.get(cpu) != governor for why in [_writable(self.file(cpu))] if why), "")


# == backends: knob_postgresql_setting ==

#: One pg_settings row as JSON (psql variable :name): the value SHOW prints, whether
#: postgresql.auto.conf (ALTER SYSTEM) sets it, what a restart needs, and when the
#: server last loaded its configuration (a reload has been processed once it changes).
PG_QUERY = (
    "SELECT json_build_object('name', s.name, 'setting', s.setting, 'unit', s.unit, 'vartype', s.vartype, "
    "'context', s.context, 'source', s.source, 'pending_restart', s.pending_restart, "
    "'show', current_setting(s.name), "
    "'in_auto_conf', EXISTS (SELECT 1 FROM pg_file_settings f WHERE f.name = s.name "
    "AND f.sourcefile LIKE '%postgresql.auto.conf'), "
    "'data_directory', current_setting('data_directory'), "
    "'server_version_num', current_setting('server_version_num')::int, "
    "'conf_load_time', pg_conf_load_time(), 'pid', pg_backend_pid()) "
    "FROM pg_settings s WHERE lower(s.name) = lower(:'name');\n")

_PG_MEMORY = {"B": 1, "kB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3, "TB": 1024 ** 4}
_PG_TIME = {"us": 0.001, "ms": 1, "s": 1000, "min": 60000, "h": 3600000, "d": 86400000}
_PG_NUMBER = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z]*)\s*$")


def pg_bool(text):
    """PostgreSQL's boolean spellings (parse_bool): on, off, 1, 0 and unique prefixes
    of true, false, yes, no; None when it is none of them."""
    word = str(text).strip().lower()
    if not word:
        return None
    if word in ("1", "on") or "true".startswith(word) or "yes".startswith(word):
        return True
    if word in ("0", "of", "off") or "false".startswith(word) or "no".startswith(word):
        return False
    return None


def pg_base_unit(unit):
    """A pg_settings unit in bytes or milliseconds: '8kB' -> (8192, 'memory'); 'ms' -> (1, 'time'); '' -> (1, None)."""
    match = re.match(r"^(\d*)\s*([A-Za-z]+)$", unit or "")
    if not match:
        return 1, None
    factor, name = int(match.group(1) or 1), match.group(2)
    if name in _PG_MEMORY:
        return factor * _PG_MEMORY[name], "memory"
    if name in _PG_TIME:
        return factor * _PG_TIME[name], "time"
    return 1, None


def pg_number(text, unit):
    """The value of ``text`` ('64MB', '1.5s', '100') in the parameter's unit, or None."""
    match = _PG_NUMBER.match(str(text))
    if not match:
        return None
    value, given = float(match.group(1)), match.group(2)
    if not given:
        return value
    base, kind = pg_base_unit(unit)
    table = _PG_MEMORY if kind == "memory" else _PG_TIME if kind == "time" else {}
    if given not in table:
        return None
    return value * table[given] / base


def pg_same_value(row, intended):
    """Whether ``intended`` sets the parameter to what ``row`` (pg_settings) holds:
    booleans by meaning, numbers in the parameter's unit (integers rounded), enums
    without case, strings exactly."""
    import math

    vartype, text = row.get("vartype"), str(intended)
    if vartype == "bool":
        return pg_bool(text) is not None and pg_bool(text) == pg_bool(row.get("setting"))
    if vartype in ("integer", "real"):
        want = pg_number(text, row.get("unit"))
        try:
            have = float(row.get("setting"))
        except (TypeError, ValueError):
            return False
        if want is None:
            return False
        if vartype == "integer":
            return int(round(want)) == int(round(have))
        return math.isclose(want, have, rel_tol=1e-9, abs_tol=1e-12)
    if vartype == "enum":
        return text.strip().lower() == str(row.get("setting")).lower()
    return text == str(row.get("setting"))


def pg_actual(row, intended):
    """The value read back, in the intended spelling when it is the same setting
    ("64MB" and "65536kB"), else as SHOW prints it (" (restart pending)" when the
    server still runs the old value). DEFAULT: no ALTER SYSTEM entry, no restart pending."""
    text = str(intended)
    if text.strip().upper() == "DEFAULT":
        if not row.get("in_auto_conf") and not row.get("pending_restart"):
            return text
        return str(row.get("show"))
    if pg_same_value(row, text) and not row.get("pending_restart"):
        return text
    return str(row.get("show")) + (" (restart pending)" if row.get("pending_restart") else "")


def pg_baseline(row):
    """What restore writes back: DEFAULT when no ALTER SYSTEM entry sets the
    parameter (the reset leaves postgresql.auto.conf without one), else its value."""
    return str(row.get("show")) if row.get("in_auto_conf") else "DEFAULT"


def ansible_bool(value):
    """Ansible's ``| bool`` of a variable's value."""
    return value is True or str(value).strip().lower() in ("true", "yes", "on", "1", "y", "t")


@register
class PostgresqlSetting(Backend):
    """A PostgreSQL parameter: ALTER SYSTEM SET (RESET for DEFAULT) and pg_reload_conf(),
    a restart for a postmaster parameter when the knob's cost allows it; every read is
    one psql call of PG_QUERY. The server is service_postgresql's when the host has
    ``service_postgresql_conn`` (tasks/knobs.yml provisions it before the call: :meth:`services`)."""

    role = "knob_postgresql_setting"
    host_settings = ("service_postgresql_conn",)
    target = ("knob_postgresql_setting_name", "knob_postgresql_setting_host", "knob_postgresql_setting_port",
              "knob_postgresql_setting_database")
    options = (
        Option("knob_postgresql_setting_name", "str", "The parameter (pg_settings name).", required=True),
        Option("knob_postgresql_setting_provision", "bool",
               "Make sure service_postgresql's private cluster runs, and connect to it.", default=True),
        Option("knob_postgresql_setting_host", "str", "Socket directory or host name.", default="/var/run/postgresql"),
        Option("knob_postgresql_setting_port", "int", "Port.", default=5432),
        Option("knob_postgresql_setting_user", "str", "Database role (a superuser).", default="postgres"),
        Option("knob_postgresql_setting_database", "str", "Database to connect to.", default="postgres"),
        Option("knob_postgresql_setting_psql", "str", "psql on the host.", default="psql"),
        Option("knob_postgresql_setting_runas", "list", "Command prefix for psql.", default=[], elements="str"),
        Option("knob_postgresql_setting_allow_restart", "bool",
               "Whether a restart is allowed (default from the knob's cost class).", default=False, derived=True),
        Option("knob_postgresql_setting_restart_argv", "list",
               "How the server is restarted ([] = pg_ctl restart of the server's data directory).",
               default=[], elements="str"),
        Option("knob_postgresql_setting_os_user", "str",
               "Owner of the data directory, for the default restart.", default="postgres"),
        Option("knob_postgresql_setting_bindir", "str",
               "Server binaries for the default restart (\"\" = service_postgresql's, else the server's major "
               "version's).", default=""),
        Option("knob_postgresql_setting_logfile", "str",
               "Server log for the default restart (\"\" = postgresql.log beside the data directory).", default=""),
        Option("knob_postgresql_setting_timeout", "int",
               "Seconds pg_ctl waits for the restart, and at most for new sessions to show a reloaded value.",
               default=120),
    )
    #: Defaults taken from service_postgresql's connection when the host has one.
    CONN = {"knob_postgresql_setting_host": "host", "knob_postgresql_setting_port": "port",
            "knob_postgresql_setting_user": "user", "knob_postgresql_setting_psql": "psql",
            "knob_postgresql_setting_bindir": "bindir"}
    NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*([.][A-Za-z_][A-Za-z0-9_]*)?$")

    def __init__(self, knob, settings, host):
        super().__init__(knob, settings, host)
        self.row = None  # the last row read
        self.cached = None  # a row check() read, for the read() that follows it
        self.unreachable = False

    def var(self, name):
        for source in (self.settings, self.vars):
            if source.get(name) not in (None, ""):
                return source[name]
        conn = self.settings.get("service_postgresql_conn")
        if isinstance(conn, dict) and conn.get(self.CONN.get(name)) not in (None, ""):
            return conn[self.CONN[name]]
        return self.defaults.get(name, "")

    def services(self):
        # provision (the default): benchmatrix's private cluster runs, and the connection
        # service_postgresql_conn it sets is how the knob reaches it.
        return ("service_postgresql",) if ansible_bool(self.var("knob_postgresql_setting_provision")) else ()

    @property
    def name(self):
        name = str(self.var("knob_postgresql_setting_name"))
        if not self.NAME.match(name):
            self.fail(f"'{name}' is not a parameter name (set knob_postgresql_setting_name in the knob's vars)")
        return name

    @property
    def allow_restart(self):
        """The host's own knob_postgresql_setting_allow_restart, else the knob's cost class
        (restart or reboot), as the role's default."""
        own = self.settings.get("knob_postgresql_setting_allow_restart")
        if own not in (None, ""):
            return ansible_bool(own)
        return str(self.knob.get("cost") or "none") in ("restart", "reboot")

    @property
    def timeout(self):
        return float(self.var("knob_postgresql_setting_timeout"))

    def psql_argv(self, *extra):
        """psql's command line (runas prefix first); the parameter is the psql variable :name."""
        return [str(a) for a in self.var("knob_postgresql_setting_runas")] + [
            str(self.var("knob_postgresql_setting_psql")), "--no-psqlrc", "--tuples-only", "--no-align",
            "--set=ON_ERROR_STOP=1", f"--host={self.var('knob_postgresql_setting_host')}",
            f"--port={self.var('knob_postgresql_setting_port')}",
            f"--username={self.var('knob_postgresql_setting_user')}",
            f"--dbname={self.var('knob_postgresql_setting_database')}", f"--set=name={self.name}", *extra]

    def psql(self, sql, *extra):
        """Run ``sql`` (stdin) through psql; returns (rc, stdout, why it failed)."""
        import subprocess

        try:
            proc = subprocess.run(self.psql_argv(*extra), input=sql, capture_output=True, text=True,
                                  timeout=self.timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return -1, "", str(exc)
        return proc.returncode, proc.stdout, proc.stderr.strip() or f"psql exited with {proc.returncode}"

    def read_row(self):
        """The parameter's row (one psql call)."""
        rc, out, why = self.psql(PG_QUERY)
        if rc != 0:
            self.unreachable = True
            self.fail(f"cannot query PostgreSQL at {self.var('knob_postgresql_setting_host')}:"
                      f"{self.var('knob_postgresql_setting_port')} as {self.var('knob_postgresql_setting_user')} "
                      f"on {self.host}: {why}")
        if not out.strip():
            self.fail(f"PostgreSQL on {self.host} has no parameter '{self.name}'")
        return json.loads(out)

    def refusal(self, row, value):
        """Why ``value`` cannot be set on the server ``row`` was read from, or '' (also
        '' when it is set already: nothing to do)."""
        if pg_actual(row, value) == str(value):
            return ""
        if row.get("context") == "internal":
            return f"{self.role}: {self.name} is fixed when PostgreSQL is built or initialized (context internal)"
        if row.get("context") == "postmaster" and not self.allow_restart:
            return (f"{self.role}: changing {self.name} on {self.host} restarts PostgreSQL (context postmaster); "
                    "declare the knob with cost: restart to allow it")
        return ""

    def check(self, value):
        # Reads the row (read() uses it) so that the refusals come before any write.
        self.cached = self.read_row()
        why = self.refusal(self.cached, value)
        if why:
            raise KnobError(why)

    def read(self, value):
        self.row, self.cached = self.cached or self.read_row(), None
        return pg_actual(self.row, value), pg_baseline(self.row)

    def current(self, value):
        return str(self.read_row().get("show"))

    def restart_argv(self, row):
        """knob_postgresql_setting_restart_argv, else pg_ctl restart of the server's data
        directory as the os user (bindir: service_postgresql's, else Debian's of the
        server's major version; log: postgresql.log beside the data directory)."""
        argv = self.var("knob_postgresql_setting_restart_argv")
        if argv:
            return [str(a) for a in argv]
        bindir = self.var("knob_postgresql_setting_bindir") or \
            f"/usr/lib/postgresql/{int(row.get('server_version_num') or 0) // 10000}/bin"
        logfile = self.var("knob_postgresql_setting_logfile") or \
            os.path.join(os.path.dirname(str(row.get("data_directory") or "")), "postgresql.log")
        return ["runuser", "-u", str(self.var("knob_postgresql_setting_os_user")), "--", f"{bindir}/pg_ctl",
                "restart", "--pgdata", str(row.get("data_directory") or ""), "--mode", "fast", "--wait",
                "--timeout", str(int(self.timeout)), "--log", logfile]

    def write(self, value, state):
        import subprocess
        import tempfile

        before = self.row or self.read_row()
        if str(value).upper() == "DEFAULT":
            sql = 'ALTER SYSTEM RESET :"name";\nSELECT pg_reload_conf();\n'
        else:
            sql = "ALTER SYSTEM SET :\"name\" TO :'value';\nSELECT pg_reload_conf();\n"
        rc, _, why = self.psql(sql, f"--set=value={value}")
        if rc != 0:
            self.fail(f"cannot set {self.name} to '{value}' on {self.host}: {why}")
        if before.get("context") == "postmaster":
            argv = self.restart_argv(before)
            # Output to a file, not a pipe: a server started by the command may keep it open.
            with tempfile.TemporaryFile("w+") as log:
                try:
                    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                          timeout=self.timeout + 30, check=False)
                    rc, why = proc.returncode, ""
                except (OSError, subprocess.TimeoutExpired) as exc:
                    rc, why = -1, str(exc)
                log.seek(0)
                why = why or " ".join(log.read().split())[-400:]
            if rc != 0:
                self.fail(f"restarting PostgreSQL on {self.host} for {self.name} failed "
                          f"({' '.join(argv)}): {why or f'exit status {rc}'}")
        self.cached = self.wait(value, before)

    def wait(self, value, before):
        """Poll new sessions until they show the value, or show that the server has
        loaded its configuration since ``before`` (whatever they show then is what it
        is), bounded by knob_postgresql_setting_timeout; the last row read."""
        # PostgreSQL sets pg_conf_load_time() after it applied the reloaded settings, and
        # new sessions inherit it from the postmaster: once it moves, the value shown is final.
        deadline, pause = time.monotonic() + self.timeout, 0.005
        while True:
            try:
                row = self.read_row()
                if pg_actual(row, value) == str(value) or row.get("conf_load_time") != before.get("conf_load_time"):
                    return row
            except KnobError:  # the server is still restarting
                row = None
            if time.monotonic() >= deadline:
                return row  # None: read() reads again and fails with psql's message
            time.sleep(pause)
            pause = min(pause * 2, 0.2)

    def problem(self, value):
        why = super().problem(value)
        if why and self.unreachable and ansible_bool(self.var("knob_postgresql_setting_provision")) \
                and not self.settings.get("service_postgresql_conn"):
            return ""  # service_postgresql starts the private server when the campaign runs
        return why

    def write_problem(self, value):
        if (self.row or {}).get("context") != "postmaster":
            return ""
        import shutil

        argv = self.restart_argv(self.row)
        if not shutil.which(argv[0]):
            return f"{argv[0]} (knob_postgresql_setting_restart_argv) is not on {self.host}'s PATH"
        pg_ctl = next((a for a in argv if a.endswith("/pg_ctl")), "")
        if pg_ctl and not os.path.exists(pg_ctl):
            return f"{pg_ctl} does not exist on {self.host} (set knob_postgresql_setting_bindir)"
        return ""


# == backends: knob_cpu_affinity, knob_file_layout ==


@register
class CpuAffinity(Backend):
    """Nothing on the host changes: the batch runner starts each workload on the CPUs
    chosen here (run setting ``cpus``). What reads back is computed from the CPUs chosen,
    never echoed: the number of distinct cores among them, and with ``N:on``/``N:off``
    whether every chosen core runs on two or more threads."""

    role = "knob_cpu_affinity"
    writes = False
    options = (
        Option("knob_cpu_affinity_siblings", "bool",
               "With a plain N, use every sibling thread of each chosen core.", default=True),
        Option("knob_cpu_affinity_candidates", "str",
               "CPU list the cores are chosen from; empty for every online CPU.", default=""),
        Option("knob_cpu_affinity_pin_pidfiles", "list",
               "PID files of servers the batch runner pins to the same CPUs.", default=[], elements="str"),
        Option("knob_cpu_affinity_sysfs_root", "path",
               "The kernel's CPU directory.", default="/sys/devices/system/cpu"),
    )
    VALUE = re.compile(r"^\s*(\d+)\s*(?::\s*(on|off)\s*)?$", re.IGNORECASE)

    def check(self, value):
        match = self.VALUE.match(str(value))
        if not match or int(match.group(1)) < 1:
            self.fail(f"'{value}' is not a core count (N, N:on or N:off)")

    def choose(self, value):
        """The CPUs of the first N cores (in order of their lowest CPU) and what they read back as."""
        match = self.VALUE.match(str(value))
        suffix = (match.group(2) or "").lower()
        siblings = suffix == "on" if suffix else str(self.var("knob_cpu_affinity_siblings")).lower() in ON_WORDS
        root = str(self.var("knob_cpu_affinity_sysfs_root"))
        try:
            allowed = set(cpu_list(_read(os.path.join(root, "online")), self.role))
        except OSError as exc:
            self.fail(f"cannot read the online CPUs of {self.host}: {exc.strerror} ({root}/online)")
        candidates = str(self.var("knob_cpu_affinity_candidates")).strip()
        if candidates:
            allowed &= set(cpu_list(candidates, self.role))
        cores = {}
        for cpu in sorted(allowed):
            try:  # a CPU without a topology file is a core of its own
                text = _read(os.path.join(root, f"cpu{cpu}", "topology", "thread_siblings_list")).strip()
            except OSError:
                text = ""
            threads = tuple(c for c in (cpu_list(text, self.role) if text else [cpu]) if c in allowed) or (cpu,)
            cores.setdefault(min(threads), sorted(set(threads) | {cpu}))
        chosen = [cores[k] for k in sorted(cores)][:int(match.group(1))]
        if not siblings:
            chosen = [threads[:1] for threads in chosen]
        smt = bool(chosen) and all(len(threads) > 1 for threads in chosen)
        actual = str(len(chosen)) + ((":on" if smt else ":off") if suffix else "")
        return sorted(c for threads in chosen for c in threads), actual

    def read(self, value):
        return self.choose(value)[1], ""  # no baseline: nothing to restore

    def run_settings(self, value):
        pidfiles = self.var("knob_cpu_affinity_pin_pidfiles")
        return {"cpus": self.choose(value)[0], **({"pin_pidfiles": pidfiles} if pidfiles else {})}

    def write_problem(self, value):
        return (f"the CPUs chosen on {self.host} make {self.read(value)[0]}, not {value} "
                "(fewer cores, or no sibling threads)")


MIB = 1024 * 1024


@register
class FileLayout(Backend):
    """The workload file laid out contiguous or fragmented into about N extents, or absent;
    read back as filefrag's extent count, classified (README of the role)."""

    host_settings = ("workload_fio_directory", "workload_fio_filename")

    role = "knob_file_layout"
    target = ("knob_file_layout_path",)
    options = (
        Option("knob_file_layout_path", "path",
               "The workload file.", default="/var/tmp/benchmatrix/scratch/benchmatrix-fio.dat", derived=True),
        Option("knob_file_layout_size_mb", "int", "Size of the file in MiB.", default=256),
        Option("knob_file_layout_extents", "int", "About how many extents the fragmented layout aims at.", default=100),
        Option("knob_file_layout_filler_kb", "int", "Size of one filler file in KiB; 0 derives it.", default=0),
        Option("knob_file_layout_contiguous_max", "int",
               "At most this many extents reads back as contiguous; 0 = max(4, size_mb / 32).", default=0),
        Option("knob_file_layout_fragmented_min", "int",
               "At least this many extents reads back as fragmented; 0 = max(extents / 2, contiguous_max + 1).",
               default=0),
        Option("knob_file_layout_max_fill_mb", "int",
               "Refuse to fragment on a filesystem with more free MiB than this.", default=4096),
        Option("knob_file_layout_seed", "int",
               "Seed of the random choice of filler files that are deleted.", default=1),
    )
    LEVELS = ("contiguous", "fragmented", "absent")
    FILLER_DIR = ".benchmatrix-filler"

    @property
    def path(self):
        path = self.var("knob_file_layout_path")
        if not path:  # fio's scratch file, as the role's default says
            path = (f"{self.settings.get('workload_fio_directory') or '/var/tmp/benchmatrix/scratch'}/"
                    f"{self.settings.get('workload_fio_filename') or 'benchmatrix-fio.dat'}")
        return str(path)

    def num(self, name):
        try:
            return int(str(self.var(f"knob_file_layout_{name}")).strip())
        except ValueError:
            self.fail(f"knob_file_layout_{name} is '{self.var(f'knob_file_layout_{name}')}', not a whole number")

    def check(self, value):
        if str(value) not in self.LEVELS:
            self.fail(f"'{value}' is not contiguous, fragmented or absent "
                      '(a layout in between, e.g. a baseline of "N extents", cannot be recreated)')
        if self.num("size_mb") < 1:
            self.fail(f"knob_file_layout_size_mb must be at least 1 (for {self.path} on {self.host})")

    def extents(self, path):
        import subprocess

        proc = subprocess.run(["filefrag", path], capture_output=True, text=True, check=False,
                              env={**os.environ, "LC_ALL": "C"})
        match = re.search(r":\s*(\d+) extents? found\s*$", proc.stdout.strip())
        if proc.returncode != 0 or not match:
            self.fail(f"filefrag {path} failed on {self.host}: "
                      f"{(proc.stderr or proc.stdout).strip() or f'rc {proc.returncode}'}")
        return int(match.group(1))

    def read(self, value):
        path = self.path
        if not os.path.exists(path):
            return "absent", "absent"
        if not os.path.isfile(path):
            self.fail(f"{path} is not a regular file on {self.host}")
        size, extents = os.path.getsize(path), self.extents(path)
        size_mb = self.num("size_mb")
        contiguous_max = self.num("contiguous_max") or max(4, size_mb // 32)
        fragmented_min = self.num("fragmented_min") or max(contiguous_max + 1, self.num("extents") // 2)
        if extents <= contiguous_max:
            layout = "contiguous"
        elif extents >= fragmented_min:
            layout = "fragmented"
        else:
            layout = f"{extents} extents"
        if size != size_mb * MIB:
            layout += f", {size / MIB:.1f} MiB"
        return layout, layout

    def write(self, value, state):
        path = self.path
        try:
            if value == "absent":
                self.remove(path)
                return
            self.makedirs(os.path.dirname(path))
            buf = os.urandom(MIB)
            if value == "contiguous":
                self.contiguous(path, buf)
            else:
                self.fragmented(path, buf)
        except OSError as exc:
            self.fail(f"cannot lay out {path} {value} on {self.host}: {exc}")

    @staticmethod
    def makedirs(path):
        """Create the file's directory and its missing parents with mode 0755, as Ansible's file module does."""
        if path and not os.path.isdir(path):
            FileLayout.makedirs(os.path.dirname(path))
            os.mkdir(path)
            os.chmod(path, 0o755)

    @staticmethod
    def remove(path):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    @staticmethod
    def write_data(fd, size, buf):
        written = 0
        while written < size:
            written += os.write(fd, buf[:min(len(buf), size - written)])
        os.fsync(fd)

    @classmethod
    def write_file(cls, path, size, buf, mode):
        """A new file of ``size`` bytes of ``buf``, synced; a failed write removes it and raises."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            cls.write_data(fd, size, buf)
        except OSError:
            cls.remove(path)
            raise
        finally:
            os.close(fd)

    @staticmethod
    def existing_dir(path):
        """The nearest directory of ``path`` that exists (where its missing directories would go)."""
        where = os.path.dirname(path)
        while not os.path.isdir(where) and where not in ("", "/"):
            where = os.path.dirname(where)
        return where or "/"

    def contiguous(self, path, buf):
        size = self.num("size_mb") * MIB
        self.remove(path)
        os.sync()  # ext4 reuses freed blocks only once the journal has committed their release
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.posix_fallocate(fd, 0, size)
            self.write_data(fd, size, buf)
        finally:
            os.close(fd)

    def fill_problem(self, path):
        """Why fragmenting ``path`` would not be done (its filesystem is too large or too full), or ''."""
        size, max_fill = self.num("size_mb") * MIB, self.num("max_fill_mb")
        st = os.statvfs(self.existing_dir(path))
        free = st.f_bavail * st.f_frsize
        if os.path.isfile(path):
            free += os.stat(path).st_blocks * 512  # the old file is removed first
        if free > max_fill * MIB:
            return (f"fragmenting {path} on {self.host} means filling its filesystem, which has {free // MIB} MiB "
                    f"free, more than max_fill_mb ({max_fill}): put the file on a small filesystem of its own "
                    "(e.g. an ext4 image mounted through a loop device) or raise knob_file_layout_max_fill_mb")
        if free < 2 * size + 4 * MIB:
            return (f"fragmenting {path} on {self.host} needs twice its size free on its filesystem: "
                    f"{free // MIB} MiB free, {size // MIB} MiB wanted")
        return ""

    def fragmented(self, path, buf):
        """Fill the filesystem with filler files, delete half of them at random (seeded),
        write the data file into the holes, delete the rest of the filler."""
        import errno
        import random
        import shutil

        size = self.num("size_mb") * MIB
        filler = os.path.join(os.path.dirname(path), self.FILLER_DIR)
        shutil.rmtree(filler, ignore_errors=True)
        why = self.fill_problem(path)  # before the old file goes: a refusal removes nothing
        if why:
            self.fail(why)
        self.remove(path)
        os.sync()
        # Deleting half of the filler at random leaves holes of two filler files on average;
        # ext4 fills them with about 0.6 extents each (measured), hence size / (3.3 * extents).
        filler_kb = (self.num("filler_kb")
                     or max(4, int(round(size / 1024 / (3.3 * max(self.num("extents"), 1)) / 4.0)) * 4))
        piece = filler_kb * 1024
        block = buf[:piece] if piece <= len(buf) else buf * (piece // len(buf) + 1)
        os.makedirs(filler)
        names = []
        while True:
            name = os.path.join(filler, "%07d" % len(names))
            try:
                self.write_file(name, piece, block, 0o600)
            except OSError as exc:
                if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                    break  # the filesystem is full
                raise
            names.append(name)
        for name in random.Random(self.num("seed")).sample(names, len(names) // 2):
            os.unlink(name)
        os.sync()
        try:
            self.write_file(path, size, buf, 0o644)
        except OSError as exc:
            shutil.rmtree(filler, ignore_errors=True)
            self.fail(f"writing {path} between the filler files failed on {self.host}: {exc}")
        shutil.rmtree(filler, ignore_errors=True)
        os.sync()

    def write_problem(self, value):
        path = self.path
        where = self.existing_dir(path)
        if not os.access(where, os.W_OK):
            return f"{where} is not writable on {self.host} (uid {os.geteuid()})"
        return self.fill_problem(path) if value == "fragmented" else ""


# == backends: knob_mssql_setting, knob_oracle_parameter, knob_raid_level ==


def _run_client(argv, env=None, stdin=None):
    """Run ``argv`` (a list: no shell) and return (rc, stdout, stderr); a program that
    cannot be started returns rc 127 and the OS error as stderr, as a command task would
    fail with it. ``env`` adds to the module's environment."""
    import subprocess

    try:
        proc = subprocess.run([str(a) for a in argv], input=stdin, capture_output=True, text=True, check=False,
                              env={**os.environ, **env} if env else None)
    except OSError as exc:
        return 127, "", f"{argv[0]}: {exc.strerror or exc}"
    return proc.returncode, proc.stdout, proc.stderr


def _said(rc, out, err):
    """A command's output for a message, on one line."""
    return " ".join(f"{out} {err}".split()) or f"exit {rc}"


def _argv_list(value):
    """A list variable that a spec may also give as one string of words."""
    return value.split() if isinstance(value, str) else [str(v) for v in value or []]


class ClientBackend(Backend):
    """A knob read and set through a client program (sqlcmd, sqlplus, mdadm): ``check()``
    reads the state once (refusing what the role refuses before any change) and the
    following ``read()`` takes that reading instead of asking again; a read-back after
    ``write()`` asks again. A restart (``restart`` in the state) is allowed only for a
    knob of cost class restart or reboot, as the roles' ``*_allow_restart`` say."""

    def __init__(self, knob, settings, host):
        super().__init__(knob, settings, host)
        self._state = self.last = None

    def allow_restart(self):
        name = self.role + "_allow_restart"
        if self.settings.get(name) not in (None, "") or self.vars.get(name) not in (None, ""):
            return ansible_bool(self.var(name))
        return str(self.knob.get("cost") or "none") in ("restart", "reboot")

    def valid(self, value):
        """Refuse a value (or a variable) the client must not see."""

    def restart_refusal(self):
        """The refusal of a change that needs a restart the knob's cost class does not allow."""
        return "takes a restart; declare the knob with cost: restart to allow it"

    def check(self, value):
        self.valid(value)
        self.require()
        self._state = self.state(value)
        if self._state["actual"] != str(value) and self._state.get("restart") and not self.allow_restart():
            self.fail(self.restart_refusal())

    def state(self, value):
        """{actual, baseline, restart, ...} as read now from the host."""
        raise NotImplementedError

    def read(self, value):
        self.last, self._state = self._state or self.state(value), None
        return self.last["actual"], self.last["baseline"]


@register
class MssqlSetting(ClientBackend):
    """An sp_configure option of SQL Server through sqlcmd: reads sys.configurations
    (value|value_in_use|is_dynamic), sets with sp_configure + RECONFIGURE, restarts the
    server (and waits for it) when the option is not dynamic."""

    role = "knob_mssql_setting"
    target = ("knob_mssql_setting_name", "knob_mssql_setting_server")
    options = (
        Option("knob_mssql_setting_name", "str", "The sp_configure option.", required=True),
        Option("knob_mssql_setting_server", "str", "Server (sqlcmd -S).", default="localhost"),
        Option("knob_mssql_setting_user", "str", "Login; empty for a trusted connection.", default="sa"),
        Option("knob_mssql_setting_password", "str", "Password of the login.", default=""),
        Option("knob_mssql_setting_sqlcmd", "str",
               "sqlcmd on the host; empty to look in the usual places.", default=""),
        Option("knob_mssql_setting_sqlcmd_candidates", "list",
               "Where sqlcmd is looked for.",
               default=["/opt/mssql-tools18/bin/sqlcmd", "/opt/mssql-tools/bin/sqlcmd", "/usr/bin/sqlcmd",
                        "/usr/local/bin/sqlcmd"], elements="str"),
        Option("knob_mssql_setting_sqlcmd_options", "list", "Extra sqlcmd options.", default=["-C"], elements="str"),
        Option("knob_mssql_setting_allow_restart", "bool",
               "Whether a restart is allowed (default from the knob's cost class).", default=False, derived=True),
        Option("knob_mssql_setting_restart_argv", "list",
               "How SQL Server is restarted.", default=["systemctl", "restart", "mssql-server"], elements="str"),
        Option("knob_mssql_setting_timeout", "int", "Seconds to wait for the server.", default=120),
    )
    READ_SQL = ("SET NOCOUNT ON; SELECT CONCAT(CONVERT(varchar(30), value), '|', CONVERT(varchar(30), value_in_use), "
                "'|', CONVERT(int, is_dynamic)) FROM sys.configurations WHERE name = N'$(name)'")
    SET_SQL = ("EXEC sp_configure 'show advanced options', 1; RECONFIGURE; EXEC sp_configure N'$(name)', $(value); "
               "RECONFIGURE;")

    def var(self, name):
        # An empty login is meaningful (a trusted connection, sqlcmd -E), as in the role.
        if name == "knob_mssql_setting_user":
            for source in (self.settings, self.vars):
                if source.get(name) is not None:
                    return source[name]
        return super().var(name)

    @property
    def name(self):
        return str(self.var("knob_mssql_setting_name"))

    def valid(self, value):
        if not re.match(r"^[A-Za-z0-9 ()_.-]+$", self.name) or not re.match(r"^-?[0-9]+$", str(value)):
            self.fail(f"option '{self.name}' (letters, digits, spaces, ()_.-) and value '{value}' "
                      "(a whole number) are required")

    def restart_refusal(self):
        return (f"'{self.name}' takes effect on {self.host} only after a restart of SQL Server; "
                "declare the knob with cost: restart to allow it")

    def sqlcmd(self):
        """The sqlcmd found on the host, or a refusal naming where it was looked for."""
        given = str(self.var("knob_mssql_setting_sqlcmd"))
        places = [given] if given else _argv_list(self.var("knob_mssql_setting_sqlcmd_candidates"))
        found = next((p for p in places if os.path.exists(p)), None)
        if found is None:
            self.fail(f"sqlcmd not found on {self.host} (looked for {', '.join(places)}); install Microsoft's "
                      "mssql-tools18 or set knob_mssql_setting_sqlcmd")
        return found

    def require(self):
        self.sqlcmd()

    def argv(self, *extra):
        """sqlcmd's command line (the option name goes in as the sqlcmd variable $(name))."""
        user = str(self.var("knob_mssql_setting_user"))
        return ([self.sqlcmd(), "-S", str(self.var("knob_mssql_setting_server"))]
                + (["-U", user] if user else ["-E"]) + _argv_list(self.var("knob_mssql_setting_sqlcmd_options"))
                + ["-b", "-h", "-1", "-W", "-l", str(self.var("knob_mssql_setting_timeout")), "-v", f"name={self.name}"]
                + list(extra))

    def sql(self, *extra):
        """Run sqlcmd with the password in its environment (never on the command line)."""
        return _run_client(self.argv(*extra), env={"SQLCMDPASSWORD": str(self.var("knob_mssql_setting_password"))})

    def parse(self, value, rc, out, err):
        """sys.configurations' row as sqlcmd printed it -> the state."""
        server = self.var("knob_mssql_setting_server")
        if rc != 0:
            self.fail(f"cannot query SQL Server {server} from {self.host}: {_said(rc, out, err)}")
        if not out.strip():
            self.fail(f"SQL Server {server} has no sp_configure option '{self.name}'")
        fields = (out.strip().split("|") + ["", "", ""])[:3]
        row = dict(zip(("value", "value_in_use", "is_dynamic"), fields))
        actual = fields[1] if fields[0] == fields[1] else f"{fields[1]} (restart pending: {fields[0]})"
        return {"actual": actual, "baseline": fields[1], "restart": fields[2] != "1", "row": row}

    def state(self, value):
        return self.parse(value, *self.sql("-Q", self.READ_SQL))

    def write(self, value, baseline):
        state = self.last or self.state(value)
        rc, out, err = self.sql("-v", f"value={int(str(value))}", "-Q", self.SET_SQL)
        if rc != 0:
            self.fail(f"cannot set '{self.name}' to {value} on SQL Server {self.var('knob_mssql_setting_server')} "
                      f"from {self.host}: {_said(rc, out, err)}")
        if not state["restart"]:
            return
        restart = _argv_list(self.var("knob_mssql_setting_restart_argv"))
        rc, out, err = _run_client(restart)
        if rc != 0:
            self.fail(f"restarting SQL Server on {self.host} ({' '.join(restart)}) failed: {_said(rc, out, err)}")
        timeout = int(self.var("knob_mssql_setting_timeout"))
        deadline = time.monotonic() + timeout
        while True:
            rc, out, err = self.sql("-Q", "SELECT 1")
            if rc == 0:
                return
            if time.monotonic() > deadline:
                self.fail(f"SQL Server {self.var('knob_mssql_setting_server')} did not answer on {self.host} "
                          f"within {timeout} s of its restart: {_said(rc, out, err)}")
            time.sleep(2)

    def write_problem(self, value):
        return ""  # check() queried the server: it answers and knows the option


#: What sqlplus runs first: errors end it with a failing exit status; bare output.
ORACLE_HEADER = ("WHENEVER SQLERROR EXIT SQL.SQLCODE\nWHENEVER OSERROR EXIT FAILURE\n"
                 "SET HEADING OFF FEEDBACK OFF PAGESIZE 0 LINESIZE 1000 TRIMOUT ON VERIFY OFF ECHO OFF\n")


@register
class OracleParameter(ClientBackend):
    """An Oracle initialization parameter through sqlplus: reads v$parameter
    (value|issys_modifiable), sets with ALTER SYSTEM ... SCOPE=BOTH, or SCOPE=SPFILE and
    a restart of the instance for a static parameter."""

    role = "knob_oracle_parameter"
    target = ("knob_oracle_parameter_name", "knob_oracle_parameter_oracle_home", "knob_oracle_parameter_oracle_sid",
              "knob_oracle_parameter_connect")
    options = (
        Option("knob_oracle_parameter_name", "str", "The parameter.", required=True),
        Option("knob_oracle_parameter_oracle_home", "str", "ORACLE_HOME.", default="/opt/oracle/product/19c/dbhome_1"),
        Option("knob_oracle_parameter_oracle_sid", "str", "ORACLE_SID.", default="ORCLCDB"),
        Option("knob_oracle_parameter_sqlplus", "str", "sqlplus; empty for ORACLE_HOME/bin/sqlplus.", default=""),
        Option("knob_oracle_parameter_connect", "str", "sqlplus connect string.", default="/ as sysdba"),
        Option("knob_oracle_parameter_runas", "list",
               "Command prefix that runs sqlplus as the instance's owner.",
               default=["runuser", "-u", "oracle", "--"], elements="str"),
        Option("knob_oracle_parameter_allow_restart", "bool",
               "Whether a restart is allowed (default from the knob's cost class).", default=False, derived=True),
        Option("knob_oracle_parameter_restart_script", "str",
               "SQL*Plus commands that restart the instance.", default="SHUTDOWN IMMEDIATE\nSTARTUP\n"),
    )

    @property
    def name(self):
        return str(self.var("knob_oracle_parameter_name"))

    def valid(self, value):
        # SQL*Plus has no bind variables for ALTER SYSTEM: the text goes into the statement.
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_#$]*$", self.name) or re.search(r"[\n\r']", str(value)):
            self.fail(f"'{self.name}' is not a parameter name, or its value contains a quote or a line break")

    def restart_refusal(self):
        return (f"{self.name} takes effect on {self.host} only after a restart of the instance; "
                "declare the knob with cost: restart to allow it")

    def sqlplus(self):
        path = str(self.var("knob_oracle_parameter_sqlplus")) or (
            str(self.var("knob_oracle_parameter_oracle_home")) + "/bin/sqlplus")
        if not os.path.exists(path):
            self.fail(f"sqlplus not found on {self.host} ({path} does not exist); "
                      "set knob_oracle_parameter_oracle_home to the database's ORACLE_HOME, "
                      "or knob_oracle_parameter_sqlplus")
        return path

    def require(self):
        self.sqlplus()

    def argv(self):
        return (_argv_list(self.var("knob_oracle_parameter_runas"))
                + [self.sqlplus(), "-S", "-L", str(self.var("knob_oracle_parameter_connect"))])

    def script(self, text, header=ORACLE_HEADER):
        """Run SQL*Plus commands (stdin) with ORACLE_HOME and ORACLE_SID set."""
        return _run_client(self.argv(), stdin=f"{header}{text}\nEXIT\n",
                           env={"ORACLE_HOME": str(self.var("knob_oracle_parameter_oracle_home")),
                                "ORACLE_SID": str(self.var("knob_oracle_parameter_oracle_sid"))})

    def read_sql(self):
        return f"SELECT 'BMX|' || value || '|' || issys_modifiable FROM v$parameter WHERE name = '{self.name.lower()}';"

    def set_sql(self, value, restart):
        # Numbers and booleans bare, anything else as a string literal (quotes refused in check()).
        text = str(value)
        literal = text if re.match(r"^([0-9]+|TRUE|FALSE|true|false)$", text) else f"'{text}'"
        return f"ALTER SYSTEM SET {self.name.lower()} = {literal} SCOPE={'SPFILE' if restart else 'BOTH'};"

    def parse(self, value, rc, out, err):
        """sqlplus's output of read_sql() -> the state."""
        if rc != 0:
            self.fail(f"cannot query the Oracle instance {self.var('knob_oracle_parameter_oracle_sid')} on "
                      f"{self.host}: {_said(rc, out, err)}")
        line = next((ln for ln in out.splitlines() if ln.startswith("BMX|")), None)
        if line is None:
            self.fail(f"the instance on {self.host} has no parameter '{self.name}'")
        got, _, modifiable = line[len("BMX|"):].rpartition("|")
        # Same value whatever the case (Oracle prints TRUE for true).
        actual = str(value) if got.lower() == str(value).lower() else got
        return {"actual": actual, "baseline": got, "restart": modifiable.strip() == "FALSE",
                "row": {"value": got, "issys_modifiable": modifiable.strip()}}

    def state(self, value):
        return self.parse(value, *self.script(self.read_sql()))

    def write(self, value, baseline):
        state = self.last or self.state(value)
        rc, out, err = self.script(self.set_sql(value, state["restart"]))
        if rc != 0:
            self.fail(f"ALTER SYSTEM SET {self.name.lower()} failed on {self.host}: {_said(rc, out, err)}")
        if state["restart"]:
            rc, out, err = self.script(str(self.var("knob_oracle_parameter_restart_script")),
                                       header="WHENEVER OSERROR EXIT FAILURE\n")
            if rc != 0:
                self.fail(f"restarting the Oracle instance {self.var('knob_oracle_parameter_oracle_sid')} on "
                          f"{self.host} failed: {_said(rc, out, err)}")

    def write_problem(self, value):
        return ""  # check() queried the instance: it answers and knows the parameter


_RAID_LEVEL = re.compile(r"^(?:raid)?(\d+)$", re.IGNORECASE)


def raid_level_number(value):
    """'raid10' / '10' / 10 -> 10; 'absent' -> 'absent'; anything else -> None."""
    text = str(value).strip().lower()
    if text == "absent":
        return "absent"
    match = _RAID_LEVEL.match(text)
    return int(match.group(1)) if match else None


def raid_state(detail, exists, wanted, devices, chunk_kb):
    """What an md array reads back as, from ``mdadm --detail``: {level, chunk_kb, members,
    state, actual}. ``actual`` is the intended spelling ("10", "raid10") when level,
    chunk size and member devices all match and the array is neither degraded, failed
    nor inactive, else a description ("raid5 chunk 64K on loop1,loop2,loop3, degraded")."""
    if not exists or not str(detail or "").strip():
        return {"level": None, "chunk_kb": None, "members": [], "state": "absent", "actual": "absent"}
    fields = {}
    members = []
    for line in str(detail).splitlines():
        key, sep, value = line.partition(" : ")
        if sep:
            fields[key.strip().lower()] = value.strip()
        dev = re.search(r"\s(/dev/\S+)\s*$", line)
        if dev and re.match(r"^\s+\d+\s+\d+\s+\d+\s+\d+\s", line):
            members.append(os.path.basename(dev.group(1)))
    level = raid_level_number(fields.get("raid level", ""))
    chunk_match = re.match(r"^(\d+)K$", fields.get("chunk size", ""))
    chunk_value = int(chunk_match.group(1)) if chunk_match else None
    state = fields.get("state", "unknown")
    # Names as mdadm prints them: give the devices by their kernel names (/dev/sdb, /dev/loop1).
    want_members = sorted(os.path.basename(str(d)) for d in devices or [])
    have_members = sorted(members)
    ok = (level == raid_level_number(wanted) and have_members == want_members
          and (chunk_value is None or level == 1 or chunk_value == int(chunk_kb))
          and not re.search(r"degraded|failed|inactive", state))
    desc = f"raid{level}" + (f" chunk {chunk_value}K" if chunk_value else "")
    desc += " on " + ",".join(have_members) + (", " + state if state not in ("clean", "active") else "")
    return {"level": level, "chunk_kb": chunk_value, "members": have_members, "state": state,
            "actual": str(wanted) if ok else desc}


@register
class RaidLevel(ClientBackend):
    """An md array /dev/md/NAME at a level over listed devices, through mdadm: builds it
    (destroying the devices' contents, only with knob_raid_level_destroy), waits for the
    resync, makes and mounts a filesystem; ``absent`` takes it down."""

    role = "knob_raid_level"
    target = ("knob_raid_level_name", "knob_raid_level_devices")
    options = (
        Option("knob_raid_level_devices", "list",
               "Member devices; everything on them is destroyed.", default=[], elements="str"),
        Option("knob_raid_level_chunk_kb", "int", "Chunk size in KiB.", default=512),
        Option("knob_raid_level_name", "str", "The array is /dev/md/NAME.", default="benchmatrix"),
        Option("knob_raid_level_fstype", "str", "Filesystem made on the array.", default="ext4"),
        Option("knob_raid_level_mkfs_options", "list", "mkfs options.", default=[], elements="str"),
        Option("knob_raid_level_mount_point", "path",
               "Where the filesystem is mounted.", default="/var/tmp/benchmatrix/raid"),
        Option("knob_raid_level_mount_options", "str", "Mount options.", default="noatime"),
        Option("knob_raid_level_destroy", "bool", "Allow wiping the member devices.", default=False),
        Option("knob_raid_level_wait_resync", "bool",
               "Wait for the initial resync (else --assume-clean).", default=True),
        Option("knob_raid_level_install", "bool", "Install mdadm when missing.", default=False),
    )
    #: Where the kernel shows md, where mdadm may be, where arrays appear (tests point them elsewhere).
    PROC_MDSTAT = "/proc/mdstat"
    MDADM = ("/sbin/mdadm", "/usr/sbin/mdadm")
    DEV_MD = "/dev/md"
    #: Package managers tried, in order, for knob_raid_level_install (argv before the package name).
    INSTALLERS = (("apt-get", "install", "-y", "-q"), ("dnf", "install", "-y"), ("yum", "install", "-y"),
                  ("zypper", "--non-interactive", "install"))

    @property
    def devices(self):
        return _argv_list(self.var("knob_raid_level_devices"))

    @property
    def array(self):
        return f"{self.DEV_MD}/{self.var('knob_raid_level_name')}"

    def valid(self, value):
        level = raid_level_number(value)
        if level is None or (level != "absent" and len(self.devices) < 2):
            self.fail(f"'{value}' is not a RAID level (0, 1, 5, 6, 10 or raidN) or absent, "
                      "or knob_raid_level_devices names fewer than two devices")

    def check(self, value):
        super().check(value)
        if (self._state["actual"] != str(value) and raid_level_number(value) != "absent"
                and not ansible_bool(self.var("knob_raid_level_destroy"))):
            self.fail(f"building a RAID {value} array on {self.host} destroys everything on "
                      f"{', '.join(self.devices)}; set knob_raid_level_destroy: true to allow it")

    def require(self):
        """md in the kernel (loading md_mod if needed) and mdadm (installing it when
        knob_raid_level_install is true). ``bmx check`` (dry) loads and installs nothing."""
        if not os.path.exists(self.PROC_MDSTAT):
            modprobe = next((p for p in ("/usr/sbin/modprobe", "/sbin/modprobe", "/usr/bin/modprobe")
                             if os.path.exists(p)), "modprobe")
            rc, out, err = _run_client([modprobe, "--dry-run", "md_mod"] if self.dry else [modprobe, "md_mod"])
            if not os.path.exists(self.PROC_MDSTAT) and not (self.dry and rc == 0):
                self.fail(f"{self.host} has no md (software RAID) driver: {self.PROC_MDSTAT} is absent and "
                          f"'modprobe md_mod' failed ({_said(rc, out, err)})")
        if self.mdadm(need=False) is None and ansible_bool(self.var("knob_raid_level_install")) and not self.dry:
            self.install()
        if self.mdadm(need=False) is None and not (self.dry and ansible_bool(self.var("knob_raid_level_install"))):
            self.fail(f"mdadm is not installed on {self.host}; install the mdadm package or set "
                      "knob_raid_level_install: true")

    def install(self):
        import shutil

        for argv in self.INSTALLERS:
            if shutil.which(argv[0]):
                rc, out, err = _run_client([*argv, "mdadm"], env={"DEBIAN_FRONTEND": "noninteractive"})
                if rc != 0:
                    self.fail(f"installing mdadm on {self.host} with {argv[0]} failed: {_said(rc, out, err)[-300:]}")
                return
        tried = ", ".join(a[0] for a in self.INSTALLERS)
        self.fail(f"mdadm is not installed on {self.host} and no package manager ({tried}) was found to install it; "
                  "install the mdadm package")

    def mdadm(self, need=True):
        found = next((p for p in self.MDADM if os.path.exists(p)), None)
        if found is None and need:
            self.fail(f"mdadm is not installed on {self.host}; install the mdadm package or set "
                      "knob_raid_level_install: true")
        return found

    def state(self, value):
        exists = os.path.exists(self.array)
        detail = ""
        if exists:
            rc, detail, err = _run_client([self.mdadm(), "--detail", self.array])
            if rc != 0:
                self.fail(f"mdadm --detail {self.array} failed on {self.host}: {_said(rc, detail, err)}")
        state = raid_state(detail, exists, value, self.devices, self.var("knob_raid_level_chunk_kb"))
        state["baseline"] = "absent" if state["state"] == "absent" else f"raid{state['level']}"
        return state

    def create_argv(self, value):
        """mdadm --create's command line for the intended level."""
        level = raid_level_number(value)
        return ([self.mdadm(), "--create", self.array, "--run", "--metadata=1.2", f"--level={level}",
                 f"--raid-devices={len(self.devices)}"]
                + ([] if level == 1 else [f"--chunk={self.var('knob_raid_level_chunk_kb')}K"])
                + ([] if ansible_bool(self.var("knob_raid_level_wait_resync")) else ["--assume-clean"])
                + self.devices)

    def step(self, argv, ok=(0,)):
        rc, out, err = _run_client(argv)
        if rc not in ok:
            self.fail(f"{' '.join(str(a) for a in argv)} failed on {self.host}: {_said(rc, out, err)}")
        return out

    def write(self, value, baseline):
        mdadm = self.mdadm()
        if os.path.exists(self.array):  # take the old array down
            rc, mounts, _ = _run_client(["findmnt", "--noheadings", "--output", "TARGET", "--source", self.array])
            for target in mounts.splitlines() if rc == 0 else []:
                self.step(["umount", target.strip()])
            self.step([mdadm, "--stop", self.array])
        for device in self.devices:  # 1: no superblock there
            self.step([mdadm, "--zero-superblock", "--force", device], ok=(0, 1))
        if raid_level_number(value) == "absent":
            return
        self.step(self.create_argv(value))
        if ansible_bool(self.var("knob_raid_level_wait_resync")):
            self.step([mdadm, "--wait", self.array], ok=(0, 1))  # 1: nothing to wait for
        fstype, mount_point = str(self.var("knob_raid_level_fstype")), str(self.var("knob_raid_level_mount_point"))
        self.step(["mkfs", "-t", fstype, *_argv_list(self.var("knob_raid_level_mkfs_options")), self.array])
        os.makedirs(mount_point, mode=0o755, exist_ok=True)
        self.step(["mount", "-t", fstype, "-o", str(self.var("knob_raid_level_mount_options")), self.array,
                   mount_point])

    def write_problem(self, value):
        return "" if os.geteuid() == 0 else f"building an md array on {self.host} needs root (uid {os.geteuid()})"


# == backends: knob_kernel_cmdline ==

# A parameter's *state* on a kernel command line is "absent" (not on the line),
# "present" (a flag without a value, such as nosmt) or its value ("off" for
# mitigations=off). When a parameter appears more than once the last one counts, as in
# the kernel's own parser for most parameters.
_CMDLINE_PARAMETER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
# A state must stay one word of the command line and one shell word inside double quotes.
_CMDLINE_UNSAFE = re.compile(r"[\s\"'$`\\]")


def _cmdline_matches(word, parameter):
    return word == parameter or word.startswith(parameter + "=")


def cmdline_state(line, parameter):
    """'quiet nosmt', 'nosmt' -> 'present'; 'mitigations=off', 'mitigations' -> 'off'."""
    found = [w for w in str(line or "").split() if _cmdline_matches(w, parameter)]
    if not found:
        return "absent"
    _, sep, value = found[-1].partition("=")
    return value if sep else "present"


def cmdline_edit(line, parameter, state):
    """The line with ``parameter`` in ``state``: a parameter already on the line keeps its
    place (later duplicates go), a new one goes at the end, ``absent`` removes it; every
    other word stays, so editing back to the old state gives the old line back
    (whitespace normalized; a parameter removed from the middle comes back at the end)."""
    word = parameter if state == "present" else f"{parameter}={state}"
    out, placed = [], False
    for w in str(line or "").split():
        if not _cmdline_matches(w, parameter):
            out.append(w)
        elif not placed:
            placed = True
            if state != "absent":
                out.append(word)
    if not placed and state != "absent":
        out.append(word)
    return " ".join(out)


def grub_cmdline(text, variable):
    """{found, line, error} for ``variable`` in a shell-syntax boot loader file's ``text``
    (the last assignment wins); error says why it cannot be edited safely."""
    found = re.findall(rf"^[ \t]*{re.escape(variable)}=(.*?)[ \t]*$", str(text or ""), flags=re.MULTILINE)
    if not found:
        return {"found": False, "line": "", "error": ""}
    raw = found[-1]
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        value, inner_unsafe = raw[1:-1], ("'" if raw[0] == "'" else "\"$`\\")
    else:
        value, inner_unsafe = raw, "\"'$`\\ \t#;"
    if any(c in value for c in inner_unsafe):
        return {"found": True, "line": value,
                "error": f"{variable}={raw} is not a plain quoted list of words (quotes, $, ` or \\ inside); "
                         "edit it by hand into the form VAR=\"word word\""}
    return {"found": True, "line": value, "error": ""}


def cmdline_want(value, levels, parameter):
    """{state, error}: the state the level ``value`` asks for (through ``levels``)."""
    value = "" if value is None else str(value)
    booleans = [k for k in (levels or {}) if isinstance(k, bool)]
    levels = {str(k): v for k, v in (levels or {}).items()}
    state = str(levels.get(value, value))
    if booleans:
        return {"state": state, "error": f"knob_kernel_cmdline_levels has the key(s) {booleans}: YAML reads bare "
                                         "on/off/yes/no as booleans; quote them (\"on\": absent)"}
    if not _CMDLINE_PARAMETER.match(str(parameter or "")):
        return {"state": state, "error": f"'{parameter}' is not a kernel parameter name "
                                         "(set knob_kernel_cmdline_parameter in the knob's vars)"}
    if state == "" or _CMDLINE_UNSAFE.search(state):
        return {"state": state, "error": f"'{value}' is not a state of {parameter}: use absent, present or one "
                                         "word without spaces, quotes, $, ` or \\ (or map the level in "
                                         "knob_kernel_cmdline_levels)"}
    return {"state": state, "error": ""}


def cmdline_spelled(state, value, levels):
    """A state read back, spelled as the level asked for when it means that state, else
    as the level that means it, else as the state itself."""
    value = "" if value is None else str(value)
    levels = {str(k): str(v) for k, v in (levels or {}).items()}
    if levels.get(value, value) == state:
        return value
    return next((level for level, meant in levels.items() if meant == state), state)


@register
class KernelCmdline(Backend):
    """A kernel parameter: written into the boot loader's file (then its update command
    runs); the running kernel's command line has it only after a reboot, which
    tasks/knobs.yml makes (``reboot``). ``actual`` is the running kernel's state."""

    role = "knob_kernel_cmdline"
    target = ("knob_kernel_cmdline_parameter", "knob_kernel_cmdline_grub_file",
              "knob_kernel_cmdline_grub_variable")
    reboot = True
    cost = "reboot"
    options = (
        Option("knob_kernel_cmdline_parameter", "str",
               "The kernel parameter, e.g. nosmt, mitigations, isolcpus, transparent_hugepage.", required=True),
        Option("knob_kernel_cmdline_levels", "dict",
               "Factor levels mapped to states, e.g. {\"on\" absent, \"off\" present} for nosmt.", default={}),
        Option("knob_kernel_cmdline_grub_file", "path",
               "The boot loader's configuration file (shell syntax).", default="/etc/default/grub"),
        Option("knob_kernel_cmdline_grub_variable", "str",
               "The variable of that file that holds the command line.", default="GRUB_CMDLINE_LINUX_DEFAULT"),
        Option("knob_kernel_cmdline_update_command", "list",
               "The command (argv) that regenerates the boot loader's configuration after an edit.",
               default=["update-grub"], elements="str"),
        Option("knob_kernel_cmdline_source", "path",
               "Where the running kernel's command line is read.", default="/proc/cmdline"),
        Option("knob_kernel_cmdline_reboot_command", "str",
               "The command that reboots the host; empty for ansible.builtin.reboot's default.", default=""),
        Option("knob_kernel_cmdline_boot_time_command", "str",
               "A command whose output changes with every boot; empty for ansible.builtin.reboot's default (the "
               "boot id).", default=""),
        Option("knob_kernel_cmdline_reboot_timeout", "int", "Seconds to wait for the host to come back.", default=900),
    )

    @property
    def parameter(self):
        return str(self.var("knob_kernel_cmdline_parameter"))

    @property
    def grub(self):
        """(the boot loader's file, the variable of it that holds the command line)"""
        return str(self.var("knob_kernel_cmdline_grub_file")), str(self.var("knob_kernel_cmdline_grub_variable"))

    def want(self, value):
        want = cmdline_want(value, self.var("knob_kernel_cmdline_levels"), self.parameter)
        if want["error"]:
            raise KnobError(f"knob_kernel_cmdline on {self.host}: {want['error']}")
        return want["state"]

    def check(self, value):
        # The plan must count every change of this knob as a reboot, or it would
        # interleave its levels as if they were free.
        if str(self.knob.get("cost") or "reboot") != "reboot":
            raise KnobError(f"knob {self.knob.get('factor') or self.parameter} ({self.role}) on {self.host}: a "
                            "kernel command-line parameter changes only with a reboot; declare cost: reboot for "
                            "this knob in the spec")
        self.want(value)

    def config(self):
        """(file text, {found, line, error}) of the boot loader's file."""
        path, variable = self.grub
        try:
            text = _read(path)
        except OSError as exc:
            self.fail(f"cannot read the boot loader's file {path} on {self.host}: {exc.strerror}")
        found = grub_cmdline(text, variable)
        if found["error"]:
            raise KnobError(f"knob_kernel_cmdline on {self.host}: {path}: {found['error']}")
        return text, found

    def read(self, value):
        source = str(self.var("knob_kernel_cmdline_source"))
        try:
            self.running = cmdline_state(_read(source), self.parameter)
        except OSError as exc:
            self.fail(f"cannot read the running kernel's command line {source} on {self.host}: {exc.strerror}")
        # The running kernel decides the reboot; the boot loader's file decides the write.
        # They differ when an earlier change was written but not booted yet.
        self.configured = cmdline_state(self.config()[1]["line"], self.parameter)
        actual = cmdline_spelled(self.running, value, self.var("knob_kernel_cmdline_levels"))
        return actual, actual

    def differs(self, value, actual):
        return actual != str(value) or self.configured != self.want(value)

    def write(self, value, state):
        want = self.want(value)
        text, found = self.config()
        if cmdline_state(found["line"], self.parameter) == want:
            return  # written before, not booted yet: only the reboot is missing
        path, variable = self.grub
        new = f'{variable}="{cmdline_edit(found["line"], self.parameter, want)}"\n'
        lines = text.splitlines(keepends=True)
        at = [i for i, ln in enumerate(lines) if re.match(rf"[ \t]*{re.escape(variable)}=", ln)]
        if at:  # the last assignment is the one that counts
            lines[at[-1]] = new
        else:
            lines.append(("\n" if lines and not lines[-1].endswith("\n") else "") + new)
        try:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write("".join(lines))
        except OSError as exc:
            self.fail(f"cannot write the boot loader's file {path} on {self.host}: {exc.strerror or exc}")
        self.update()

    def update(self):
        import shlex
        import subprocess

        argv = self.var("knob_kernel_cmdline_update_command")
        argv = shlex.split(argv) if isinstance(argv, str) else [str(a) for a in argv]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
        except OSError as exc:
            self.fail(f"cannot run the boot loader's update command {argv} on {self.host}: {exc.strerror}")
        if done.returncode != 0:
            last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or [""]
            self.fail(f"the boot loader's update command {' '.join(argv)} failed on {self.host} "
                      f"(exit {done.returncode}): {last[0]}")

    def reboot_why(self, value):
        return (f" for the level {value} ({self.parameter} {self.want(value)}; the running kernel has it "
                f"{self.running})")

    def reboot_how(self):
        return {"command": str(self.var("knob_kernel_cmdline_reboot_command")),
                "boot_time_command": str(self.var("knob_kernel_cmdline_boot_time_command")),
                "timeout": int(self.var("knob_kernel_cmdline_reboot_timeout") or 900)}

    def write_problem(self, value):
        return _writable(self.grub[0])


# == end of backends ==

# == baselines kept on the host ==
#
# The controller writes results/NAME/hosts/HOST/baseline.json from what a batch call
# returns; when the whole controller dies during a host's first batch it never does, and
# the runner may go on changing live knobs until its lease ends. So the value before a
# knob's first change is kept on the host itself, before anything is written, and wins
# over the value read until a restore has put it back (then it is removed).


def _baseline_path(b, baseline_dir):
    """The file of ``b``'s kept baseline: named by a digest of its role and target, so a
    password among the variables never reaches the file system."""
    import hashlib

    key = json.dumps([b.role, b.identity()], sort_keys=True, default=str)
    return os.path.join(baseline_dir, f"{b.role}-{hashlib.sha256(key.encode()).hexdigest()[:32]}.json")


def kept_baseline(b, baseline_dir):
    """The baseline kept on the host for ``b``'s knob, or None (none kept, or no ``baseline_dir``)."""
    if not baseline_dir:
        return None
    try:
        with open(_baseline_path(b, baseline_dir), encoding="utf-8") as fh:
            record = json.load(fh)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, ValueError) as exc:
        raise KnobError(f"knob {b.knob.get('factor')} ({b.role}) on {b.host}: cannot read its kept baseline "
                        f"{_baseline_path(b, baseline_dir)}: {getattr(exc, 'strerror', None) or exc}") from None
    return record.get("baseline") if isinstance(record, dict) else None


def keep_baseline(b, baseline_dir, baseline):
    """Keep ``baseline`` on the host for ``b``'s knob (durably: written, synced, renamed)
    unless one is kept already. Raises KnobError when it cannot: the caller writes nothing."""
    if not baseline_dir or kept_baseline(b, baseline_dir) is not None:
        return
    path = _baseline_path(b, baseline_dir)
    record = {"role": b.role, "factor": b.knob.get("factor"), "baseline": baseline,
              "kept_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(baseline_dir, mode=0o700, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        fd = os.open(baseline_dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise KnobError(f"knob {b.knob.get('factor')} ({b.role}) on {b.host}: cannot keep its baseline in "
                        f"{baseline_dir}: {exc.strerror or exc}; nothing was changed") from None


def forget_baseline(b, baseline_dir):
    """Remove ``b``'s kept baseline: a restore put the knob back to it."""
    if baseline_dir:
        try:
            os.unlink(_baseline_path(b, baseline_dir))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise KnobError(f"knob {b.knob.get('factor')} ({b.role}) on {b.host}: back at its baseline, but "
                            f"cannot remove the kept one in {baseline_dir}: {exc.strerror or exc}") from None


def services(knobs, settings=None, host="this host"):
    """The roles the knobs need running before the knob call (each backend's
    ``services()``), each once, in the knobs' order. A knob of an unknown role needs
    none here: the knob call refuses it with the roles it knows."""
    out = []
    for knob in knobs or []:
        if knob.get("role") in BACKENDS:
            out += [s for s in backend(knob, settings or {}, host).services() if s not in out]
    return out


def setting_names(knobs):
    """The regular expression of the host variables the knob call passes as settings:
    every knob role's own (``knob_*``) and the host settings the knobs' backends read."""
    extra = []
    for knob in knobs or []:
        cls = BACKENDS.get(knob.get("role"))
        extra += [n for n in (cls.host_settings if cls else ()) if n not in extra]
    return "^(" + "|".join(["knob_[a-z_]+"] + [re.escape(n) for n in extra]) + ")$"


def host_facts(path, files, host="this host"):
    """Mode ``facts`` (tasks/prepare.yml, a new or changed host; with :func:`described`'s
    ``facts`` and ``state``): the host's description (``metadata``,
    :func:`system_metadata`), what every backend finds about the workload
    path (:meth:`Backend.describe`) and ``state_lines``, grep's
    ``PATH:LINE`` lines of :data:`STATE_FILES`, ``files`` and the backends' state files (a
    missing or unreadable file gives none)."""
    out = {"device": {}, "state_files": [], "metadata": system_metadata()}
    for cls in BACKENDS.values():
        found = cls.describe(path, host)
        out["device"].update(found.get("device") or {})
        out["state_files"] += [f for f in found.get("state_files") or [] if f not in out["state_files"]]
    lines = []
    for name in dict.fromkeys(STATE_FILES + list(files or []) + out["state_files"]):
        try:
            with open(name, encoding="utf-8", errors="replace") as fh:
                lines += [f"{name}:{line.rstrip(chr(10))}" for line in fh]
        except OSError:
            continue
    out["state_lines"] = lines
    return out


#: The host's fingerprint (lines before "---": boot id, kernel, CPUs, memory, the package
#: databases' change times, the workload path's file system) and its state (after: grep's
#: PATH:VALUE lines of the state files). A shell script, run as ``sh -c SCRIPT bmx_probe
#: PATH FILE...``, so that every host answers in the same words (findmnt, getconf).
PROBE_SCRIPT = (
    'w=$1; p=$1; shift; '
    'echo "boot_id $(cat /proc/sys/kernel/random/boot_id 2>/dev/null)"; '
    'echo "kernel $(uname -srvm)"; '
    'echo "cpus $(getconf _NPROCESSORS_CONF 2>/dev/null)"; '
    'echo "memory $(grep -s MemTotal /proc/meminfo)"; '
    'echo "packages $(stat -c %Y /var/lib/dpkg/status /var/lib/rpm 2>/dev/null | tr \'\\n\' \' \')"; '
    'while [ ! -e "$p" ] && [ "$p" != / ]; do p=$(dirname -- "$p"); done; '
    'echo "workload_path $w $(stat -c %d -- "$p" 2>/dev/null) $(findmnt -n -o SOURCE --target "$p" 2>/dev/null)"; '
    'echo ---; '
    'grep -s -H \'\' "$@"; exit 0')


#: The CPU and SMT state files every probe of a host reads, before the workload path's
#: block-device files the backends name (:func:`host_facts`, cached by the controller).
STATE_FILES = ["/sys/devices/system/cpu/online", "/sys/devices/system/cpu/smt/control",
               "/sys/devices/system/cpu/smt/active"]


def host_state(lines):
    """{online_cpus, smt, read_ahead_kb, io_scheduler}: the host's CPU, SMT and block-device
    state from grep's ``PATH:VALUE`` lines of the state files (facts.json's state keys)."""
    sysfs = {}
    for line in lines:
        name, _, value = line.partition(":")
        sysfs[os.path.basename(name)] = value.rsplit(":", 1)[-1].strip()
    scheduler = sysfs.get("scheduler")
    if scheduler is not None and "[" in scheduler:
        scheduler = scheduler.split("[", 1)[1].split("]", 1)[0]
    return {"online_cpus": sysfs.get("online", "unknown"),
            "smt": sysfs.get("control", "absent") + (" (active %s)" % sysfs["active"] if "active" in sysfs else ""),
            "read_ahead_kb": sysfs.get("read_ahead_kb", "unknown"),
            "io_scheduler": "unknown" if scheduler is None else scheduler}


#: Ansible's names of the distributions whose os-release ID is not its name capitalized
#: (its ``distribution`` fact); any other ID: os-release's NAME.
DISTRIBUTIONS = {"debian": "Debian", "ubuntu": "Ubuntu", "rhel": "RedHat", "centos": "CentOS", "fedora": "Fedora",
                 "rocky": "Rocky", "almalinux": "AlmaLinux", "ol": "OracleLinux", "amzn": "Amazon",
                 "sles": "SLES", "sles_sap": "SLES_SAP", "opensuse-leap": "openSUSE Leap",
                 "opensuse-tumbleweed": "openSUSE Tumbleweed", "arch": "Archlinux", "alpine": "Alpine",
                 "linuxmint": "Linux Mint", "raspbian": "Debian", "kali": "Kali", "gentoo": "Gentoo"}


def cpu_description(cpuinfo, architecture):
    """{cpu_model, cpu_count, sockets, cores, threads_per_core} from /proc/cpuinfo's text,
    counted as Ansible's setup module counts them on Linux (its ``processor`` list's third
    entry, ``processor_vcpus``, ``processor_count``, ``processor_cores``,
    ``processor_threads_per_core``), so that a host reads the same as when setup described
    it (Xen paravirtual guests and s390x, which setup counts apart, are counted as others)."""
    listed, seen = [], {"vendor_id": 0, "model name": 0, "processor": 0}
    physical, cores, siblings = "0", {}, []
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key in ("model name", "Processor", "vendor_id", "cpu", "Vendor", "processor"):
            listed.append(value)
            if key in seen:
                seen[key] += 1
        elif key == "physical id":
            physical = value
            cores.setdefault(physical, 1)
        elif key == "cpu cores":
            cores[physical] = int(value)
        elif key == "siblings":
            siblings.append(int(value))
    count = len(listed)
    if seen["vendor_id"] and seen["vendor_id"] == seen["model name"]:
        count = seen["vendor_id"]
    if architecture.startswith(("armv", "aarch", "ppc")):
        count = seen["processor"]
    sockets = len(cores) or count
    per_socket = next(iter(cores.values()), 0) or 1
    threads = round((siblings[0] if siblings else 1) / per_socket)
    return {"cpu_model": listed[2] if len(listed) > 2 else "unknown", "cpu_count": threads * sockets * per_socket,
            "sockets": sockets, "cores": per_socket, "threads_per_core": threads}


def _distribution():
    """``NAME VERSION`` as Ansible's ``distribution`` and ``distribution_version`` facts
    give them for the usual Linux distributions (os-release; Debian's point release from
    /etc/debian_version)."""
    release = {}
    for name in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            with open(name, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    key, _, value = line.strip().partition("=")
                    release[key] = value.strip().strip("\"'")
            break
        except OSError:
            continue
    ident = release.get("ID", "")
    version = release.get("VERSION_ID", "")
    if ident == "debian":
        try:
            with open("/etc/debian_version", encoding="utf-8") as fh:
                point = fh.read().strip()
            if point[:1].isdigit():
                version = point
        except OSError:
            pass
    name = DISTRIBUTIONS.get(ident) or release.get("NAME") or "unknown"
    return ("%s %s" % (name, version)).strip()


def system_metadata():
    """The host's description in facts.json (hostname, CPU, memory, kernel, distribution,
    architecture, Python), read here in one module call: what a new host's first batch
    reports (the one call's ``describe``, :func:`new_host_facts`) and tasks/prepare.yml
    publishes (mode ``facts``). In the words of Ansible's setup module, which described
    hosts before (about 0.9 CPU-s on each host: a module of its own)."""
    import platform
    import socket

    uname = os.uname()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            cpuinfo = fh.read()
    except OSError:
        cpuinfo = ""
    memory_mb = 0
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    memory_mb = int(line.split()[1]) // 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    return {"hostname": platform.node().split(".")[0], "fqdn": socket.getfqdn(),
            **cpu_description(cpuinfo, uname.machine), "memory_mb": memory_mb, "kernel": uname.release,
            "distribution": _distribution(), "architecture": uname.machine, "python": platform.python_version()}


def described(found, path, tool_version=""):
    """facts.json's facts of a new or changed host from :func:`host_facts`'s answer for the
    workload path ``path``: its description (``metadata``), the tool's version, the path's
    file system and block device, and the CPU, SMT and block-device state. Mode ``facts``
    returns them (``facts``, tasks/prepare.yml publishes them) and :func:`new_host_facts`
    reports them: one host reads the same whichever call prepared it."""
    dev = found["device"]
    facts = dict(found["metadata"], tool_version=tool_version, workload_path=path, filesystem=dev.get("fstype", ""),
                 filesystem_source=dev.get("source", ""), mount_point=dev.get("target", ""),
                 block_device=dev.get("name") or dev.get("error", ""))
    facts.update(found["state"] if "state" in found else host_state(found["state_lines"]))  # mode facts read it
    return facts


def new_host_facts(path, host, tool_version=""):
    """The ``bmx_facts`` payload of a host new to the controller (the one call's first batch
    on it, bmx_batch ``describe``), as tasks/prepare.yml publishes it for run_batch.yml:
    the fingerprint (:func:`probe`) and the facts (:func:`described`) read after the
    workload tool's install."""
    found = host_facts(path, [], host)
    return {"gathered": True, "fingerprint": probe(path, [])["fingerprint"], "state_files": found["state_files"],
            "facts": described(found, path, tool_version)}


def probe(path, files):
    """Mode ``probe`` (tasks/prepare.yml, and the one-call batch of a known host):
    {fingerprint, state_lines, state} of :data:`PROBE_SCRIPT` for the workload path
    ``path`` and the state files (:data:`STATE_FILES`, then ``files``)."""
    import subprocess

    files = STATE_FILES + [str(f) for f in files or [] if str(f) not in STATE_FILES]
    out = subprocess.run(["sh", "-c", PROBE_SCRIPT, "bmx_probe", str(path)] + files,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False,
                         universal_newlines=True).stdout
    lines = out.splitlines()
    if "---" not in lines:
        return {"fingerprint": "", "state_lines": [], "state": host_state([])}
    cut = lines.index("---")
    return {"fingerprint": "\n".join(lines[:cut]), "state_lines": lines[cut + 1:], "state": host_state(lines[cut + 1:])}


def backend(knob, settings, host):
    """The backend object of one ``bmx_knobs`` item."""
    try:
        cls = BACKENDS[knob.get("role")]
    except KeyError:
        raise KnobError(f"knob {knob.get('factor')}: role {knob.get('role')!r} has no backend in the bmx_knob "
                        f"module (these do: {', '.join(sorted(BACKENDS))})") from None
    return cls(knob, settings or {}, host)


# shape: the module's options (knobs, settings, host, modes, reboot, first call's result), each defaulted
def apply(knobs, settings=None, host="this host", check_mode=False, mode="apply", allow_reboot=False, before=None,
          reboot_seconds=0.0, baseline_dir="", restore=False):
    """Check and read every knob, then write those that differ and read them back.

    A knob of a backend whose changes take a reboot (``reboot``) needs one when its value
    read back differs: without ``allow_reboot`` the call refuses before any write; with
    it, only the reboot-class knobs are written (the reboot would undo the others) and
    marked ``rebooted``. tasks/knobs.yml then reboots and calls again with ``before``,
    the first call's result (and the reboot's ``reboot_seconds``): that call reads every
    knob back, sets the others, and records each reboot-class knob as changed when the
    first call changed it, with the first call's baseline and rebooted mark.

    An item with ``live`` true (a cost-none knob of a batch that spans its settings) is
    only read, never written, and its state carries ``live``: the batch runner sets it
    before each run, so a value the host refuses or misses makes only those runs
    invalid, not the batch. A live item the check refuses is not even read (its state
    has empty ``actual`` and ``baseline``): the runner refuses its runs the same way.

    With ``baseline_dir`` (a directory on the host) each knob's value before its first
    change is kept there before anything is written (:func:`keep_baseline`; a knob whose
    baseline cannot be kept refuses the call before any write), and a kept one is the
    ``baseline`` returned, whatever the knob holds now: a controller that died before it
    recorded the baseline loses nothing. ``restore`` (restore_host.yml) sets each knob
    to its kept baseline where one is kept (its ``value`` otherwise; an item whose
    value is None and that has none kept is left out) and removes what it put back.

    Returns {factor: {role, intended, actual, changed, baseline, rebooted, seconds, ok, run_settings}}
    (main() returns run_settings apart, so the knob states recorded keep their keys).
    Raises KnobError before any write when one knob cannot be checked or read, or needs
    a reboot that is not allowed.
    """
    t0 = time.monotonic()
    found, refused, kept = [], {}, {}
    for knob in knobs:
        b = backend(knob, settings, host)
        kept[knob["factor"]] = kept_baseline(b, baseline_dir) if b.writes else None
        if restore and kept[knob["factor"]] is not None:
            knob = dict(knob, value=kept[knob["factor"]])
            b.knob = knob
        elif restore and knob.get("value") is None:
            continue  # bmx restore without the controller's baseline: nothing kept, nothing to undo
        value = knob.get("value")
        try:
            b.check(value)
        except KnobError:
            if not knob.get("live"):
                raise
            refused[knob["factor"]] = {"role": knob["role"], "intended": str(value), "actual": "",
                                       "changed": False, "baseline": "", "rebooted": False, "seconds": 0.0,
                                       "ok": False, "run_settings": {}, "live": True}
            continue
        actual, baseline = b.read(value)
        found.append((knob, b, value, actual, baseline))
    found.sort(key=lambda f: not f[1].reboot)  # reboot-class knobs first
    reboot = [f for f in found if f[1].reboot and f[3] != str(f[2])] if mode == "apply" and before is None else []
    if reboot and not allow_reboot:
        knob, b, value = reboot[0][:3]
        raise KnobError(f"knob {knob['factor']} ({knob['role']}) needs a reboot of {host}{b.reboot_why(value)}; "
                        "set allow_reboot: true for this host in the inventory, or in the spec, to allow it")
    read_s = (time.monotonic() - t0) / max(len(found), 1)

    def writes(knob, b, value, actual):
        return b.writes and b.differs(value, actual) and not knob.get("live")

    if mode == "apply" and not check_mode and not restore:
        # Every baseline is kept before the first write: a refusal here changes nothing.
        for knob, b, value, actual, baseline in found:
            if writes(knob, b, value, actual) and (b.reboot or not reboot):
                keep_baseline(b, baseline_dir, baseline)
    out = {}
    for knob, b, value, actual, baseline in found:
        t1 = time.monotonic()
        changed = writes(knob, b, value, actual)
        if changed and mode == "apply" and not check_mode and (b.reboot or not reboot):
            b.write(value, baseline)
            actual, _ = b.read(value)
        if kept[knob["factor"]] is not None:
            baseline = kept[knob["factor"]]
            if restore and mode == "apply" and not check_mode and actual == str(value):
                forget_baseline(b, baseline_dir)
        state = {"role": knob["role"], "intended": str(value), "actual": actual, "changed": changed,
                 "baseline": baseline, "rebooted": not check_mode and any(knob is f[0] for f in reboot),
                 "seconds": round(read_s + time.monotonic() - t1, 4), "ok": actual == str(value),
                 "run_settings": b.run_settings(value)}
        if knob.get("live"):
            state["live"] = True
        was = (before or {}).get(knob["factor"]) if b.reboot else None
        if was:
            state.update(changed=changed or bool(was["changed"]), baseline=was["baseline"],
                         rebooted=bool(was["rebooted"]), seconds=round(state["seconds"] + float(was["seconds"])
                                                                       + float(reboot_seconds or 0), 4))
        out[knob["factor"]] = state
    return {**out, **refused}


def reboot_request(knobs, states, settings=None, host="this host"):
    """{factors, command, boot_time_command, timeout}: the knobs marked ``rebooted`` and how
    the host reboots for them (the last one's role variables); factors [] for no reboot."""
    marked = [k for k in knobs if (states.get(k["factor"]) or {}).get("rebooted")]  # a restore may leave some out
    return {"factors": [k["factor"] for k in marked],
            **(backend(marked[-1], settings, host).reboot_how() if marked else {})}


def inspect(knobs, levels, settings=None, host="this host"):
    """Each knob's current value and, per planned level, why it cannot be set ('' when it can)."""
    out = {}
    for knob in knobs:
        planned = levels.get(knob["factor"], [knob.get("value")])
        try:
            b = backend(knob, settings, host)
        except KnobError as exc:  # a role without a backend: a blocker of its own, the others are still read
            out[knob["factor"]] = {"role": knob.get("role"), "current": f"unreadable: {exc}", "blocker": str(exc),
                                   "levels": {str(v): str(exc) for v in planned}}
            continue
        b.dry = True
        blocker = b.blocker()
        try:
            current = f"unreadable: {blocker}" if blocker else b.current(knob.get("value"))
        except (KnobError, OSError) as exc:
            current = f"unreadable: {exc}"
        out[knob["factor"]] = {"role": knob["role"], "current": current,
                               "levels": {str(v): blocker or b.problem(v) for v in planned}}
        if blocker:  # one blocker for every level (bmx check says it once)
            out[knob["factor"]]["blocker"] = blocker
    return out


MODES = ("apply", "read", "inspect", "facts", "probe")


def main():
    """Entry point: a "WANT_JSON" module (Ansible passes the path of a JSON file of
    arguments and reads one JSON object from stdout). Measured here: about a quarter of
    the time of the same module on AnsibleModule, whose import dominates a call that
    only reads a few files."""
    import sys

    p = {}
    try:
        with open(sys.argv[1], encoding="utf-8") as fh:
            p = json.load(fh)
        knobs, mode = p.get("knobs"), p.get("mode") or "apply"
        if not isinstance(knobs, list) or not all(isinstance(k, dict) for k in knobs):
            raise KnobError("bmx_knob: knobs must be a list of {factor, role, value, vars}")
        if mode not in MODES:
            raise KnobError(f"bmx_knob: mode must be one of {', '.join(MODES)}, not {mode!r}")
        host, settings = p.get("host") or "this host", p.get("settings") or {}
        if mode == "facts":
            path = str(p.get("path") or "/")
            out = {"changed": False, **host_facts(path, p.get("files") or [], host)}
            out["state"] = host_state(out["state_lines"])
            out["facts"] = described(out, path, str(p.get("tool_version") or ""))
        elif mode == "probe":
            out = {"changed": False, **probe(str(p.get("path") or "/"), p.get("files") or [])}
        elif mode == "inspect":
            out = {"changed": False, "knobs": inspect(knobs, p.get("levels") or {}, settings, host)}
        else:
            states = apply(knobs, settings, host, bool(p.get("_ansible_check_mode")), mode,
                           ansible_bool(p.get("allow_reboot")), p.get("before"),
                           p.get("reboot_seconds") or 0, str(p.get("baseline_dir") or ""),
                           ansible_bool(p.get("restore")))
            run_settings = {factor: state.pop("run_settings") for factor, state in states.items()}
            out = {"changed": mode == "apply" and any(s["changed"] for s in states.values()), "knobs": states,
                   "run_settings": run_settings,
                   "reboot": reboot_request(knobs, states, settings, host) if p.get("before") is None
                   else {"factors": []}}
    except KnobError as exc:
        out = {"failed": True, "msg": str(exc)}
    except OSError as exc:
        out = {"failed": True, "msg": f"bmx_knob on {p.get('host') or 'this host'}: {exc}"}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
