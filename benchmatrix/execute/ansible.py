"""The typed boundary around ansible-runner.

Every playbook call goes through :func:`run_playbook`: it gives each call a private
data directory (ansible-runner persists extra vars there, and a shared one leaks
keys between calls), checks the runner's status and rc, reads the events, and turns
failures into :class:`~benchmatrix.errors.HostUnreachableError` or
:class:`~benchmatrix.errors.PlaybookFailedError` naming the host and the task.

Results come back as data, never by task name: a playbook publishes them with
``ansible.builtin.set_stats`` (``per_host: true``, ``aggregate: false``), one key per
kind (:data:`RESULT_SCHEMAS`), or a module returns them in its result under
``bmx_payloads`` (the one-call batch, bmx_batch), and :func:`read_payloads` validates each one;
``PlaybookResult.payload(KEY)`` hands it to the caller or raises
:class:`~benchmatrix.errors.ResultChannelError`.
"""

from __future__ import annotations

import fcntl
import importlib
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchmatrix.errors import AnsibleError, HostUnreachableError, Interrupted, PlaybookFailedError, ResultChannelError
from benchmatrix.execute.scratch import scratch_dir

_STR_LIST = {"type": "array", "items": {"type": "string"}}
_KNOB_STATE = {
    "type": "object", "required": ["role", "intended", "actual", "changed", "baseline", "ok"],
    "properties": {"role": {"type": "string"}, "changed": {"type": "boolean"}, "ok": {"type": "boolean"},
                   "rebooted": {"type": "boolean"}, "seconds": {"type": "number"}},
}
#: The result channel between playbooks and the controller: each key a playbook may
#: publish with ``set_stats`` and the JSON schema its payload must meet (docs/contracts.md).
RESULT_SCHEMAS: dict[str, dict[str, Any]] = {
    # run_batch.yml, restore_host.yml (tasks/knobs.yml's bmx_knob_states): factor -> state.
    "bmx_knobs": {"type": "object", "additionalProperties": _KNOB_STATE},
    # tests/knobkit.py's knob playbook: tasks/knobs.yml's merged bmx_run_settings.
    "bmx_run_settings": {"type": "object"},
    # tasks/prepare.yml (in a host's first run_batch.yml call): the host's facts
    # (gathered: all of them; else its state only).
    "bmx_facts": {"type": "object", "required": ["gathered", "fingerprint", "state_files", "facts"],
                  "properties": {"gathered": {"type": "boolean"}, "fingerprint": {"type": "string"},
                                 "state_files": _STR_LIST, "facts": {"type": "object"}}},
    # run_batch.yml, collect_batch.yml (roles/batch_runner): where the batch's archive is; in place on a
    # local-connection host, else fetched into the job's staging directory. run_known_batch.yml's
    # one call: the archive itself (content, base64), or remote when it is too large for the result;
    # on a local-connection host no archive: direct, path the runner's work directory.
    "bmx_archive": {"type": "object", "required": ["in_place", "path"],
                    "properties": {"in_place": {"type": "boolean"}, "path": {"type": "string", "minLength": 1},
                                   "content": {"type": "string"}, "remote": {"type": "boolean"},
                                   "direct": {"type": "boolean"}}},
    # run_batch.yml: the host's values of the role variables a one-call batch builds its
    # commands with (benchmatrix.execute.prepare.role_var_names), "" for an unset one.
    "bmx_role_vars": {"type": "object"},
    # run_known_batch.yml: why the one call ran nothing (the runner missing or stale; the
    # host's fingerprint or role variables changed).
    "bmx_call": {"type": "object", "properties": {"missing": {"type": "string"}, "stale": {"type": "string"}}},
    # renew_lease.yml: the runner's progress file, base64 ("" before the first run ends).
    "bmx_progress": {"type": "object", "required": ["content"], "properties": {"content": {"type": "string"}}},
    # check_host.yml: what bmx check judges (benchmatrix.execute.check.check_host).
    "bmx_check": {
        "type": "object",
        "required": ["knobs", "tool_rc", "tool_out", "dry_rc", "dry_out", "dry_err", "dry_msg", "storage_paths",
                     "storage_out", "loopfs_mb", "host_env", "tool_installs", "allow_reboot"],
        "properties": {
            "knobs": {"type": "object", "additionalProperties": {"type": "object"}},
            "tool_rc": {"type": "integer"}, "tool_out": _STR_LIST,
            "dry_rc": {"type": "array", "items": {"type": "integer"}}, "dry_out": _STR_LIST, "dry_err": _STR_LIST,
            "dry_msg": _STR_LIST, "storage_paths": _STR_LIST,
            "storage_out": {"type": "array", "items": _STR_LIST}, "loopfs_mb": {"type": "integer"},
            "host_env": {"type": "object"}, "tool_installs": {"type": "boolean"},
            "allow_reboot": {"type": "boolean"},
        },
    },
}


@dataclass
class PlaybookResult:
    """What a successful playbook call returns.

    Attributes:
        events: The runner's events (dicts), in order.
        seconds: Wall time of the call.
        log: Path of the full Ansible output.
    """

    events: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    log: str = ""
    playbook: str = ""
    host: str = ""
    payloads: dict[str, dict[str, Any]] = field(default_factory=dict)

    def payload(self, key: str) -> Any:
        """The call's host's ``key`` payload, valid against ``RESULT_SCHEMAS[key]``.

        Raises:
            ResultChannelError: the playbook published no ``key`` for the host.
        """
        if key not in RESULT_SCHEMAS:
            raise ValueError(f"{key} is not a result payload (RESULT_SCHEMAS)")
        try:
            return self.payloads[self.host][key]
        except KeyError:
            raise ResultChannelError(f"playbook {self.playbook} published no {key}", host=self.host,
                                     log=self.log) from None


def read_payloads(events: list[dict[str, Any]], playbook: str, log: str = "") -> dict[str, dict[str, Any]]:
    """Every host's result payloads ({host: {key: payload}}), from its ``set_stats`` publications.

    ansible-runner's ``playbook_on_stats`` event carries only the global custom stats
    (``artifact_data``); a host's own come with the result of the task that set them
    (``ansible_stats``), whatever the task is called. A later publication of a key
    replaces an earlier one (``aggregate: false``).

    Raises:
        ResultChannelError: a publication is not per host, aggregates, or holds an
            unknown key or a payload its schema refuses.
    """
    import jsonschema

    out: dict[str, dict[str, Any]] = {}
    for ev in events:
        data = ev.get("event_data") or {}
        res = data.get("res") or {}
        stats = res.get("ansible_stats") if ev.get("event") == "runner_on_ok" else None
        # The one-call batch's module (bmx_batch) returns its payloads in its result, failed or not.
        module = res.get("bmx_payloads") if ev.get("event") in ("runner_on_ok", "runner_on_failed") else None
        if not isinstance(stats, dict) and not isinstance(module, dict):
            continue
        host = str(data.get("host", ""))

        def refuse(why: str, host: str = host) -> ResultChannelError:
            return ResultChannelError(f"playbook {playbook}: {why}", host=host, log=log)

        if isinstance(stats, dict):
            if not stats.get("per_host"):
                raise refuse("set_stats must publish with per_host: true")
            if stats.get("aggregate", True):
                raise refuse("set_stats must publish with aggregate: false")
        for key, value in ((stats or {}).get("data") or module or {}).items():
            if key not in RESULT_SCHEMAS:
                raise refuse(f"unknown payload {key} (known: {', '.join(sorted(RESULT_SCHEMAS))})")
            error = jsonschema.exceptions.best_match(
                jsonschema.Draft202012Validator(RESULT_SCHEMAS[key]).iter_errors(value))
            if error is not None:
                at = ".".join(str(p) for p in error.absolute_path)
                raise refuse(f"{key} is malformed: {_first_line(error.message, 200)}" + (f" (at {at})" if at else ""))
            out.setdefault(host, {})[key] = value
    return out


def published_before_failure(events: list[dict[str, Any]], playbook: str, log: str = "") -> dict[str, dict[str, Any]]:
    """The payloads a failed playbook published before it failed ({} when one of them is
    malformed): a batch's knob states, published before its runner started."""
    try:
        return read_payloads(events, playbook, log)
    except ResultChannelError:
        return {}


# shape: the call's events, runner, playbook, host and paths, each failure's message needs its own
def _failure(events: list[dict[str, Any]], runner: Any, playbook: str, host: str, stdout_path: Path,
             log_path: str) -> AnsibleError | None:
    """The error of a failed call (unreachable first, then a failed task, then the
    runner's status), or None when it succeeded."""
    failure = task_failure(events, host, log_path)
    if failure is not None:
        return failure
    return status_failure(runner, playbook, host, stdout_path, log_path)


def status_failure(runner: Any, playbook: str, host: str, stdout_path: Path, log_path: str) -> AnsibleError | None:
    """The error of a call that ended unsuccessfully without a failed task (None when it succeeded)."""
    if runner.status != "successful" or runner.rc != 0:
        tail, task = "", ""
        if stdout_path.exists():
            tail, task = _playbook_error(stdout_path.read_text(errors="replace"))
        return PlaybookFailedError(f"playbook {playbook} ended with status {runner.status} (rc {runner.rc})"
                                   + (f": {_first_line(tail, 500)}" if tail else ""), host=host, task=task,
                                   log=log_path)
    return None


def task_failure(events: list[dict[str, Any]], host: str, log_path: str) -> AnsibleError | None:
    """The first unreachable host, else the first failed task not ignored, among ``events``."""
    for ev in events:
        data = ev.get("event_data", {})
        if ev.get("event") == "runner_on_unreachable":
            return HostUnreachableError(f"unreachable: {_failure_message(data.get('res', {}))}",
                                        host=data.get("host", host), task=data.get("task", ""), log=log_path)
    for ev in events:
        data = ev.get("event_data", {})
        if ev.get("event") == "runner_on_failed" and not data.get("ignore_errors"):
            return PlaybookFailedError(_failure_message(data.get("res", {})), host=data.get("host", host),
                                       task=data.get("task", ""), log=log_path)
    return None


class _Unsafe(str):
    """A string Ansible must never template (dumped with the ``!unsafe`` tag)."""

    @classmethod
    def wrap(cls, value: Any) -> Any:
        if isinstance(value, str):
            return cls(value)
        if isinstance(value, dict):
            return {k: cls.wrap(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [cls.wrap(v) for v in value]
        return value


# libyaml's emitter where PyYAML has it: several times faster than the pure-Python one
# (a batch's runs travel as one JSON text, bmx_runs, so what is left is small).
class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    pass


# Only a string that holds template syntax needs the tag; any other is dumped as a plain
# quoted string, because Ansible's loader resolves a tagged value as if it were
# unquoted: a level "on" came out as True, "12" as 12, "null" as None.
_TEMPLATE_MARKERS = ("{{", "{%", "{#")


def _represent_unsafe(dumper: Any, value: _Unsafe) -> yaml.Node:
    if any(m in value for m in _TEMPLATE_MARKERS):
        return dumper.represent_scalar("!unsafe", str(value))
    return dumper.represent_str(str(value))


_Dumper.add_representer(_Unsafe, _represent_unsafe)


def vars_yaml(trusted: dict[str, Any], data: dict[str, Any] | None = None) -> str:
    """Variables as Ansible's YAML: ``trusted`` as they are, every string in ``data`` that
    holds template syntax tagged ``!unsafe`` (:func:`run_playbook`'s ``data``)."""
    return yaml.dump({**trusted, **{k: _Unsafe.wrap(v) for k, v in (data or {}).items()}},
                     Dumper=_Dumper, default_flow_style=False, sort_keys=False)


#: "killed by signal N" not yet followed by the signal's name.
_SIGNALLED = re.compile(r"\bkilled by signal (\d+)\b(?! \()")


def _first_line(text: Any, limit: int = 300) -> str:
    text = str(text or "").strip()
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line[:limit] + ("..." if len(line) > limit else "")


def _signal_named(signum: int) -> str:
    try:
        return f"signal {signum} ({signal.Signals(signum).name})"
    except ValueError:
        return f"signal {signum}"


def _failure_message(res: dict[str, Any]) -> str:
    """The first line that says why a task failed.

    Ansible puts it in ``msg`` for most modules, in ``reason`` when a role or file
    cannot be loaded ("the role 'x' was not found in ..."), in the output of a command,
    or in the failed items of a loop. A command killed by a signal (a negative ``rc``,
    which the command module words only "non-zero return code") is named with the
    signal and its last stderr line; so is "killed by signal N" in a message (the
    batch_runner role's for a hidden result).
    """
    rc = res.get("rc")
    if isinstance(rc, int) and not isinstance(rc, bool) and rc < 0:
        lines = [ln.strip() for ln in str(res.get("stderr") or "").splitlines() if ln.strip()]
        return _first_line(f"the command was killed by {_signal_named(-rc)}" + (f": {lines[-1]}" if lines else ""))
    parts = [res.get("msg"), res.get("reason"), res.get("stderr"), res.get("module_stderr"), res.get("stdout")]
    for part in parts:
        if part:
            return _SIGNALLED.sub(lambda m: f"killed by {_signal_named(int(m.group(1)))}", _first_line(part))
    for item in res.get("results") or []:
        if isinstance(item, dict) and item.get("failed"):
            why = _failure_message(item)
            if why != "no message":
                label = item.get("_ansible_item_label", item.get("item"))
                return why if label is None else _first_line(f"item {label}: {why}")
    return "no message"


def _playbook_error(stdout: str) -> tuple[str, str]:
    """(message, task) of a playbook that stopped without a failed task event.

    A role that cannot be parsed (a YAML error in its tasks) stops the play with an
    ``[ERROR]: ...`` block naming the file (``Origin: PATH:LINE:COL``) under the
    ``TASK [...]`` that included it.
    """
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    at = next((i for i in range(len(lines) - 1, -1, -1) if "ERROR" in lines[i]), None)
    if at is None:
        return (lines[-1] if lines else ""), ""
    message = lines[at].strip()
    if message.startswith("[ERROR]:"):
        message = message[len("[ERROR]:"):].strip()
    origin = next((ln.strip()[len("Origin:"):].strip() for ln in lines[at + 1:at + 4]
                   if ln.strip().startswith("Origin:")), "")
    if origin:
        message = f"{message} (in {origin})"
    task = next((ln.strip()[len("TASK ["):].split("]")[0] for ln in reversed(lines[:at])
                 if ln.strip().startswith("TASK [")), "")
    return message, task


#: Environment variable: how many ansible-playbook starts may run at once on this
#: controller (default: its CPU count, at least 2; 0: no bound).
STARTS_ENV = "BMX_ANSIBLE_STARTS"
#: Seconds a call holds its start slot at most (a knob that reboots the host waits
#: minutes inside one task: it must not hold the other hosts' starts that long).
START_SLOT_MAX_S = 15.0


def start_slots() -> int:
    """How many ansible-playbook processes may be starting at once (``BMX_ANSIBLE_STARTS``).

    Raises:
        AnsibleError: the variable is not a whole number >= 0.
    """
    value = os.environ.get(STARTS_ENV, "").strip()
    if not value:
        return max(os.cpu_count() or 1, 2)
    if not value.isdigit():
        raise AnsibleError(f"{STARTS_ENV}={value!r}: must be a whole number of starts at once (0: no bound)")
    return int(value)


@contextmanager
def start_slot(slots: int | None = None, directory: Path | None = None,
               max_seconds: float = START_SLOT_MAX_S) -> Iterator[Any]:
    """Hold one of ``slots`` start slots of this controller (every benchmatrix process of
    this user shares them); yields a function that gives the slot back early. The slot
    goes back after ``max_seconds`` anyway.

    An ansible-playbook start (imports, parsing the inventory and the playbook, about
    0.7 CPU seconds here) and the tasks before a batch's runs are controller CPU work.
    With many hosts at once, every job doing it together only makes each slower and
    holds every job's Ansible processes in memory at once (about 160 MiB of summed RSS
    each); a start slot lets a few go at full speed while the other jobs wait holding
    only their own Python process. A slot is an ``flock`` on ``slotN.lock`` in a
    directory under the system's temporary directory: a killed job gives its slot back
    with its open files.
    """
    slots = start_slots() if slots is None else slots
    if slots <= 0:
        yield lambda: None
        return
    directory = Path(directory or Path(tempfile.gettempdir()) / f"bmx-ansible-starts-{os.getuid()}")
    directory.mkdir(mode=0o700, exist_ok=True)
    held: list[Any] = []
    first = os.getpid() % slots  # jobs start looking at different slots
    while not held:
        for i in range(slots):
            fh = open(directory / f"slot{(first + i) % slots}.lock", "a")
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                fh.close()
                continue
            held.append(fh)
            break
        else:
            time.sleep(0.05)

    lock = threading.Lock()

    def give_back() -> None:
        with lock:  # from the call's events or from the timer
            while held:
                held.pop().close()  # closing the file releases the flock

    timer = threading.Timer(max_seconds, give_back)
    timer.daemon = True
    timer.start()
    try:
        yield give_back
    finally:
        timer.cancel()
        give_back()


#: The tag of the task whose start ends a call's start phase (``run_playbook``'s
#: ``start_tag``): batch_runner's task that starts the runner. A tag, not the task's name,
#: so the task can be renamed; ansible-runner's events carry no tags, so the tagged
#: tasks are found in the playbook files (:func:`tagged_tasks`) and matched by file and line.
START_TAG = "bmx_runner_start"


def _tagged(node: yaml.Node, tag: str, path: str, found: set[str]) -> None:
    if isinstance(node, yaml.SequenceNode):
        for item in node.value:
            if isinstance(item, yaml.MappingNode):
                tags = next((v for k, v in item.value if k.value == "tags"), None)
                if isinstance(tags, yaml.ScalarNode):
                    names = [t.strip() for t in str(tags.value).split(",")]
                else:
                    names = [t.value for t in getattr(tags, "value", []) if isinstance(t, yaml.ScalarNode)]
                if tag in names:
                    # Ansible's task_path: the file and the 1-based line the task starts on.
                    found.add(f"{path}:{item.start_mark.line + 1}")
            _tagged(item, tag, path, found)
    elif isinstance(node, yaml.MappingNode):
        for _, value in node.value:
            _tagged(value, tag, path, found)


def tagged_tasks(project_dir: Path, tag: str) -> set[str]:
    """The tasks tagged ``tag`` in the YAML files under ``project_dir``, as Ansible's
    events name a task's place (``task_path``): ``/real/path/file.yml:LINE``.

    Only files whose text holds ``tag`` are parsed; a file that is no YAML is skipped
    (Ansible itself reports it when a playbook uses it).
    """
    found: set[str] = set()
    for path in sorted(Path(project_dir).rglob("*.y*ml")):
        try:
            text = path.read_text()
            if tag not in text:
                continue
            for document in yaml.compose_all(text, Loader=yaml.SafeLoader):
                if document is not None:
                    _tagged(document, tag, os.path.realpath(path), found)
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
    return found


def task_place(task_path: Any) -> str:
    """An event's ``task_path`` (``file:line``) with the file's real path."""
    file, _, line = str(task_path or "").rpartition(":")
    return f"{os.path.realpath(file)}:{line}" if file else ""


#: Environment variable: ``MODULE:FUNCTION``, a stand-in called instead of ansible-runner with
#: :func:`run_playbook`'s arguments (the test suite's fake port, tests/fake_ansible.py, which runs
#: the batch runner without Ansible); unset in every real use.
PORT_ENV = "BMX_PLAYBOOK_PORT"


def _port(name: str) -> Callable[..., PlaybookResult]:
    """The stand-in ``MODULE:FUNCTION`` names (:data:`PORT_ENV`).

    Raises:
        AnsibleError: it cannot be imported.
    """
    module, _, function = name.partition(":")
    try:
        return getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError, ValueError) as exc:
        raise AnsibleError(f"{PORT_ENV}={name!r}: {exc}") from None


# shape: one call's playbook, host, inventory, vars, log + optional data/timeout/slot, keyword-only
def run_playbook(playbook: str, *, project_dir: Path, inventory: Path, host: str,
                 extravars: dict[str, Any], log: Path, data: dict[str, Any] | None = None,
                 timeout: int | None = None, start_tag: str = "",
                 on_started: Callable[[], None] | None = None) -> PlaybookResult:
    """Run one playbook against one host through ansible-runner.

    Every call gets a private data directory in the system's temporary directory,
    removed afterwards (or by the next ``bmx run`` when this process was killed
    outright: :mod:`benchmatrix.execute.scratch`): ansible-runner writes the extra
    vars and every task result (with the values of vault-decrypted variables) there,
    none of which may end up in results/. A private directory per call also keeps extra vars from leaking
    into later calls.

    Args:
        playbook: File name inside ``project_dir`` (e.g. ``run_batch.yml``).
        project_dir: The ansible-runner project directory (``playbooks/``).
        inventory: Inventory file; made absolute (a relative string would be taken
            as inventory *content* by ansible-runner).
        host: The host to limit the play to.
        extravars: Extra variables made by benchmatrix itself (trusted).
        data: Extra variables that carry users' values (rendered workload variables,
            factor levels, knob vars). Every string in them that holds ``{{``, ``{%``
            or ``{#`` is tagged ``!unsafe``, so Ansible never evaluates it: a level
            such as ``${#VAR}`` stays text, and no spec can run code on the
            controller. The others go as quoted strings, so ``on`` stays ``on``.
        log: Where Ansible's stdout is kept (it names tasks and hosts, never variables).
        timeout: Seconds before the runner gives up.
        start_tag: The tag of the task whose start ends the call's start phase (e.g.
            :data:`START_TAG`, the task that waits for a batch's runs); the first such
            task to start counts; default: the playbook's first task. Until then,
            and for at most :data:`START_SLOT_MAX_S`, the call holds one of the
            controller's start slots (:func:`start_slot`, ``BMX_ANSIBLE_STARTS``).
        on_started: Called once (from ansible-runner's event thread) when that task starts:
            a batch's lease is renewed from its runner's start, not while its call
            still waits for a start slot or prepares the host.

    Raises:
        HostUnreachableError: Ansible could not connect to the host.
        PlaybookFailedError: A task failed, or the playbook could not run.
        ResultChannelError: A result payload the playbook published is malformed or
            unknown (:func:`read_payloads`).
    """
    port = os.environ.get(PORT_ENV, "")
    if port:
        return _port(port)(playbook, project_dir=project_dir, inventory=inventory, host=host, extravars=extravars,
                           log=log, data=data, timeout=timeout, start_tag=start_tag, on_started=on_started)
    import ansible_runner  # imported late: costs ~0.2 s, only batch jobs need it

    # ansible-playbook sits beside this interpreter in a virtualenv that may not be on PATH.
    bindir = str(Path(sys.executable).parent)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")

    project_dir = Path(project_dir).resolve()
    inventory = Path(inventory).resolve()
    if not inventory.is_file():
        raise AnsibleError(f"inventory {inventory} does not exist")
    data_dir = scratch_dir("ansible")
    try:
        (data_dir / "env").mkdir()
        # Written by hand rather than through ansible-runner's extravars: only a YAML
        # file can carry the !unsafe tag.
        (data_dir / "env" / "extravars").write_text(vars_yaml(extravars, data))
        starts = tagged_tasks(project_dir, start_tag) if start_tag else None
        return _run(ansible_runner, playbook, project_dir, inventory, host, data_dir, Path(log), timeout,
                    starts, on_started)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def ansible_env(project_dir: Path) -> dict[str, str]:
    """The environment of every ansible-playbook benchmatrix starts: the project's settings and roles."""
    return {"ANSIBLE_CONFIG": str(project_dir / "ansible.cfg"), "ANSIBLE_ROLES_PATH": str(project_dir / "roles"),
            "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"}


# shape: run_playbook's body in its private data dir: the same inputs plus the runner and that dir
def _run(ansible_runner: Any, playbook: str, project_dir: Path, inventory: Path, host: str,
         data_dir: Path, log: Path, timeout: int | None, starts: set[str] | None = None,
         on_started: Callable[[], None] | None = None) -> PlaybookResult:
    envvars = ansible_env(project_dir)
    t0 = time.monotonic()
    with start_slot(max_seconds=START_SLOT_MAX_S) as give_back:

        called = threading.Event()

        def on_event(event: dict[str, Any]) -> bool:
            kind = event.get("event")
            started = kind == "playbook_on_task_start" and not called.is_set() and (
                starts is None or task_place((event.get("event_data") or {}).get("task_path")) in starts)
            if started or kind == "playbook_on_stats":
                give_back()  # started: the rest (a batch's runs) goes without a slot
            if started:
                called.set()
                if on_started is not None:
                    on_started()
            return True  # keep the event

        runner = ansible_runner.run(
            private_data_dir=str(data_dir), project_dir=str(project_dir), playbook=playbook,
            inventory=str(inventory), limit=host, envvars=envvars,
            quiet=True, ident="call", rotate_artifacts=1, timeout=timeout,
            suppress_env_files=False, event_handler=on_event,
        )
    seconds = time.monotonic() - t0
    stdout_path = data_dir / "artifacts" / "call" / "stdout"
    log.parent.mkdir(parents=True, exist_ok=True)
    if stdout_path.exists():
        shutil.copyfile(stdout_path, log)
    log_path = str(log)
    if runner.status == "canceled":
        # ansible-runner swallows the KeyboardInterrupt and reports the call as canceled.
        stopped = Interrupted(f"host {host}: playbook {playbook} interrupted")
        stopped.payloads = published_before_failure(list(runner.events), playbook, log_path)
        raise stopped
    events = list(runner.events)
    failure = _failure(events, runner, playbook, host, stdout_path, log_path)
    if failure is not None:
        failure.payloads = published_before_failure(events, playbook, log_path)
        raise failure
    return PlaybookResult(events, seconds, log_path, playbook=playbook, host=host,
                          payloads=read_payloads(events, playbook, log_path))
