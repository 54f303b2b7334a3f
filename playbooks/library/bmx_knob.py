#!/usr/bin/python
"""Read, set and verify file-backed host knobs in one module call (benchmatrix).

Runs on the host, standard library only (a WANT_JSON module: no Ansible code on the
host). Each knob role whose state is a file under /proc or /sys has a backend here with ``read()`` and
``write()``: knob_sysctl, knob_sysfs, knob_read_ahead, knob_smt and knob_cpu_online.
One call takes every such knob of a batch: it checks and reads them all first (so a
refusal changes nothing), writes only those whose value read back differs from the
intended one, reads those back, and returns per knob ``{role, intended, actual,
changed, baseline, rebooted, seconds, ok}``. ``mode: inspect`` writes nothing and
tells, for each knob, its current value and whether each of ``levels`` can be set
(``bmx check``).

The roles' variables keep their names and meaning (roles/knob_NAME/defaults/main.yml
documents them): a knob's value for ``knob_sysfs_path`` is the host's own variable of
that name when the inventory or the extra vars set one (``settings``), else the
spec's ``vars`` of the knob, else the role's default.
"""

from __future__ import annotations

import json
import os
import re
import time

DOCUMENTATION = r"""
module: bmx_knob
short_description: Read, set and verify benchmatrix's file-backed host knobs in one call
description:
  - Backends for knob_sysctl, knob_sysfs, knob_read_ahead, knob_smt and knob_cpu_online.
  - Reads every knob first and refuses (changing nothing) when one cannot be set; writes only what differs and
    reads it back.
options:
  knobs:
    description: The knobs, each C({factor, role, value, vars}) as benchmatrix's bmx_knobs items.
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
"""

RETURN = r"""
knobs:
  description: Per factor C({role, intended, actual, changed, baseline, rebooted, seconds, ok}); in C(inspect)
    mode C({role, current, levels}), where levels maps each level to an empty string or why it cannot be set.
  type: dict
  returned: always
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


#: role name -> backend class; each backend class registers itself with @register.
BACKENDS = {}


def register(cls):
    """Class decorator: make ``cls`` the backend of the knob role ``cls.role``."""
    BACKENDS[cls.role] = cls
    return cls


class Backend:
    """One knob: ``read()`` returns (actual, baseline state) for the intended value's
    spelling; ``write()`` puts the intended value; ``problem(level)`` says why a level
    cannot be set, or ''."""

    role = ""
    defaults: dict = {}

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

    def current(self, value):
        """What ``mode: inspect`` shows as the knob's current state."""
        return self.read(value)[1]


@register
class Sysctl(Backend):
    role = "knob_sysctl"
    defaults = {"knob_sysctl_proc_root": "/proc/sys"}
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

    def write(self, value, state):
        _write(self.role, self.path, str(value), self.host)

    def write_problem(self, value):
        return _writable(self.path)


@register
class Sysfs(Backend):
    role = "knob_sysfs"
    defaults = {"knob_sysfs_root": "/sys"}

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

    def write(self, value, state):
        _write(self.role, self.path, str(value), self.host)

    def write_problem(self, value):
        return _writable(self.path)


@register
class ReadAhead(Backend):
    role = "knob_read_ahead"
    defaults = {"knob_read_ahead_path": "/var/tmp/benchmatrix/scratch"}

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

    def write_problem(self, value):
        return _writable(self.device())


ON_WORDS = ("on", "true", "1", "yes", "enabled")
OFF_WORDS = ("off", "false", "0", "no", "disabled")


@register
class Smt(Backend):
    role = "knob_smt"
    defaults = {"knob_smt_sysfs_root": "/sys/devices/system/cpu"}
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


def cpu_list(text):
    """A kernel CPU list as sorted numbers: '0-2,5' -> [0, 1, 2, 5]; '' -> []."""
    cpus = set()
    for part in filter(None, (p.strip() for p in str(text or "").split(","))):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m or int(m.group(2) or m.group(1)) < int(m.group(1)):
            raise KnobError(f"knob_cpu_online: '{text}' is not a CPU list")
        cpus.update(range(int(m.group(1)), int(m.group(2) or m.group(1)) + 1))
    return sorted(cpus)


@register
class CpuOnline(Backend):
    role = "knob_cpu_online"
    defaults = {"knob_cpu_online_sysfs_root": "/sys/devices/system/cpu"}

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
    ``service_postgresql_conn`` (tasks/knobs.yml provisions it before the call)."""

    role = "knob_postgresql_setting"
    defaults = {"knob_postgresql_setting_provision": True, "knob_postgresql_setting_host": "/var/run/postgresql",
                "knob_postgresql_setting_port": 5432, "knob_postgresql_setting_user": "postgres",
                "knob_postgresql_setting_database": "postgres", "knob_postgresql_setting_psql": "psql",
                "knob_postgresql_setting_runas": [], "knob_postgresql_setting_os_user": "postgres",
                "knob_postgresql_setting_timeout": 120, "knob_postgresql_setting_bindir": "",
                "knob_postgresql_setting_logfile": "", "knob_postgresql_setting_restart_argv": []}
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


# == backends: knob_mssql_setting, knob_oracle_parameter, knob_raid_level ==


# == backends: knob_kernel_cmdline ==


# == end of backends ==


def backend(knob, settings, host):
    """The backend object of one ``bmx_knobs`` item."""
    try:
        cls = BACKENDS[knob.get("role")]
    except KeyError:
        raise KnobError(f"knob {knob.get('factor')}: role {knob.get('role')!r} has no file backend "
                        f"(these do: {', '.join(sorted(BACKENDS))})") from None
    return cls(knob, settings or {}, host)


def apply(knobs, settings=None, host="this host", check_mode=False, mode="apply"):
    """Check and read every knob, then write those that differ and read them back.

    Returns {factor: {role, intended, actual, changed, baseline, rebooted, seconds, ok}}.
    Raises KnobError before any write when one knob cannot be checked or read.
    """
    t0 = time.monotonic()
    found = []
    for knob in knobs:
        b = backend(knob, settings, host)
        value = knob.get("value")
        b.check(value)
        actual, baseline = b.read(value)
        found.append((knob, b, value, actual, baseline))
    read_s = (time.monotonic() - t0) / max(len(found), 1)
    out = {}
    for knob, b, value, actual, baseline in found:
        t1 = time.monotonic()
        changed = actual != str(value)
        if changed and mode == "apply" and not check_mode:
            b.write(value, baseline)
            actual, _ = b.read(value)
        out[knob["factor"]] = {"role": knob["role"], "intended": str(value), "actual": actual, "changed": changed,
                               "baseline": baseline, "rebooted": False,
                               "seconds": round(read_s + time.monotonic() - t1, 4), "ok": actual == str(value)}
    return out


def inspect(knobs, levels, settings=None, host="this host"):
    """Each knob's current value and, per planned level, why it cannot be set ('' when it can)."""
    out = {}
    for knob in knobs:
        b = backend(knob, settings, host)
        try:
            current = b.current(knob.get("value"))
        except (KnobError, OSError) as exc:
            current = f"unreadable: {exc}"
        planned = levels.get(knob["factor"], [knob.get("value")])
        out[knob["factor"]] = {"role": knob["role"], "current": current,
                               "levels": {str(v): b.problem(v) for v in planned}}
    return out


MODES = ("apply", "read", "inspect")


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
        if mode == "inspect":
            out = {"changed": False, "knobs": inspect(knobs, p.get("levels") or {}, settings, host)}
        else:
            states = apply(knobs, settings, host, bool(p.get("_ansible_check_mode")), mode)
            out = {"changed": mode == "apply" and any(s["changed"] for s in states.values()), "knobs": states}
    except KnobError as exc:
        out = {"failed": True, "msg": str(exc)}
    except OSError as exc:
        out = {"failed": True, "msg": f"bmx_knob on {p.get('host') or 'this host'}: {exc}"}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
