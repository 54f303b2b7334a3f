"""One Ansible call per wave of hosts (issue 34, item 2).

A known host's batch is one module call (run_known_batch.yml); a new or changed host's
first batch (with its preparation) and a batch whose knobs need a service or a reboot
take run_batch.yml. The batch jobs of different hosts that run at the same time are a
*wave*: ``bmx run`` owns a broker (:class:`WaveBroker`) on a unix socket, named to the
jobs by :data:`SOCKET_ENV`; each batch job hands its request to it (:func:`call`) and
waits. The broker gathers the requests that arrive together (until no job it knows of
is still on its way to a request, at most :data:`WINDOW_ENV` seconds after the latest)
and runs the requests for each playbook as ONE ansible-playbook call (:func:`run_wave`;
a wave of new and known hosts is two calls side by side): forks = hosts, strategy free,
each host's variables as host variables of an inventory written for the call. Each job gets its
own host's result, failure and payloads back, as :func:`~benchmatrix.execute.ansible.run_playbook`
would have given them: a host that fails fails only its own job. The lease renewals of
running batches (:func:`renew`, each on a connection of its own) are gathered the same
way, those within :data:`RENEW_WINDOW_S` of each other one call.

Without a broker (plain ``snakemake``, the fake port :data:`~benchmatrix.execute.ansible.PORT_ENV`,
a broker that cannot be reached) a job makes its own call, as before.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmatrix.errors import (
    AnsibleError,
    HostUnreachableError,
    Interrupted,
    PlaybookFailedError,
    ResultChannelError,
)
from benchmatrix.execute import ansible
from benchmatrix.execute.scratch import scratch_dir

#: Environment variable: the path of the broker's socket (set by ``bmx run`` for its
#: Snakemake process and so for every batch job).
SOCKET_ENV = "BMX_WAVE_SOCKET"
#: Environment variable: how long the broker waits for the next request of the jobs still
#: on their way to theirs, after the latest one came (seconds, default :data:`WINDOW_S`).
#: A loaded controller brings a wave's requests seconds apart, each soon after the one
#: before; a wave waits at most :data:`MAX_WAIT_WINDOWS` windows (or :data:`MAX_WAIT_S`)
#: from its first request.
WINDOW_ENV = "BMX_WAVE_WINDOW_S"
WINDOW_S = 1.5
MAX_WAIT_S = 10.0
MAX_WAIT_WINDOWS = 4
#: The lease renewal of running batches (renew_lease.yml): the renewals that come within
#: this many seconds of each other are one call (at most a quarter of their interval).
RENEW_PLAYBOOK = "renew_lease.yml"
RENEW_WINDOW_S = 5.0
#: The playbooks a wave runs: the one-call batch of a known host, and the batch of a
#: host that needs its roles' tasks (a new or changed host's first batch, with its
#: preparation; a knob that needs a service or a reboot). A wave's requests for each are
#: one call of it; the calls of one wave run side by side.
WAVE_PLAYBOOKS = ("run_known_batch.yml", "run_batch.yml")

#: Extra variables that name the hosts a play of the playbook is for (run_known_batch.yml's
#: first play, the hosts new to the controller): a host's call names itself, a wave's call
#: gets every such host of the wave, comma-separated.
HOST_LISTS = ("bmx_new_hosts",)

#: Extra variables the playbook reads as it is loaded (run_known_batch.yml imports the
#: workload role's ``ensure`` tasks by this name: an import costs no worker fork, an
#: include one per host and batch): they stay extra variables of the wave's call, so a
#: wave is one call per playbook and their values.
PLAY_VARS = ("bmx_workload_role",)

#: Seconds between two looks at whether a renewal waiting for the broker's answer is withdrawn.
WITHDRAW_POLL_S = 0.2

_ERRORS: dict[str, type[AnsibleError]] = {
    c.__name__: c for c in (AnsibleError, HostUnreachableError, PlaybookFailedError, ResultChannelError)}


# ---------------------------------------------------------------- one call for many hosts

@dataclass
class WaveCall:
    """One host's part of a wave: what :func:`~benchmatrix.execute.ansible.run_playbook` would take."""

    host: str
    extravars: dict[str, Any]
    data: dict[str, Any]
    log: Path
    on_started: Callable[[], None] | None = None


@dataclass
class _Outcome:
    """A host's end of a wave: its result or its error."""

    result: ansible.PlaybookResult | None = None
    error: BaseException | None = None
    events: list[dict[str, Any]] = field(default_factory=list)


# shape: the wave's shared playbook, project, inventory and tag, then its hosts' calls
def run_wave(playbook: str, *, project_dir: Path, inventory: Path, calls: list[WaveCall], start_tag: str = "",
             cancel: Callable[[], bool] | None = None, timeout: int | None = None) -> dict[str, _Outcome]:
    """Run ``playbook`` once for every host of ``calls`` (forks = hosts, strategy free).

    Each host's extra variables and data become its host variables in an inventory
    written for the call beside ``inventory`` (data strings with template syntax tagged
    ``!unsafe``, as run_playbook does); the call's extra variables are ``bmx_wave``,
    the hosts' pattern, those of :data:`HOST_LISTS` (the hosts that set them) and those of
    :data:`PLAY_VARS` (the same for every call: the broker groups by them). The
    call's output is copied to each host's log. A host's
    ``on_started`` is called when its task tagged ``start_tag`` starts. ``timeout``:
    seconds before the whole call gives up (ansible-runner's timeout).

    Returns:
        host -> its outcome: a PlaybookResult of its own payloads, or the AnsibleError
        (or Interrupted) its part of the call ended with.

    Raises:
        ValueError: the calls differ in a variable of :data:`PLAY_VARS`.
    """
    import ansible_runner  # imported late: only a wave needs it

    play_vars = {play_key(c.extravars) for c in calls}
    if len(play_vars) > 1:
        raise ValueError(f"one wave's calls differ in {', '.join(PLAY_VARS)}: {sorted(play_vars)}")

    bindir = str(Path(sys.executable).parent)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    project_dir, inventory = Path(project_dir).resolve(), Path(inventory).resolve()
    hosts = [c.host for c in calls]
    by_host = {c.host: c for c in calls}
    data_dir = scratch_dir("wave")
    try:
        (data_dir / "env").mkdir()
        lists = {k: ",".join(c.host for c in calls if c.extravars.get(k)) for k in HOST_LISTS}
        shared = {k: calls[0].extravars[k] for k in PLAY_VARS if k in calls[0].extravars} if calls else {}
        (data_dir / "env" / "extravars").write_text(ansible.vars_yaml(
            {"bmx_wave": ",".join(hosts), **shared, **{k: v for k, v in lists.items() if v}}))
        wave_inventory = data_dir / "wave.yml"
        # Host variables, not extra variables: each host has its own batch. The inventory
        # comes after the user's, so its values win for the same host.
        wave_inventory.write_text("all:\n  hosts:\n" + "".join(
            f"    {json.dumps(c.host)}:\n" + _indent(ansible.vars_yaml(
                {k: v for k, v in c.extravars.items() if k not in HOST_LISTS + PLAY_VARS}, c.data), 6)
            for c in calls))
        starts = ansible.tagged_tasks(project_dir, start_tag) if start_tag else None
        started: set[str] = set()

        def on_event(event: dict[str, Any]) -> bool:
            ev = event.get("event_data") or {}
            host = str(ev.get("host", ""))
            if event.get("event") == "runner_on_start" and host in by_host and host not in started and (
                    starts is None or ansible.task_place(ev.get("task_path")) in starts):
                started.add(host)
                give_back()
                if by_host[host].on_started is not None:
                    by_host[host].on_started()  # type: ignore[misc]
            elif event.get("event") == "playbook_on_stats":
                give_back()
            return True

        envvars = {**ansible.ansible_env(project_dir), "ANSIBLE_FORKS": str(max(len(calls), 1))}
        with ansible.start_slot(max_seconds=ansible.START_SLOT_MAX_S) as give_back:
            runner = ansible_runner.run(
                private_data_dir=str(data_dir), project_dir=str(project_dir), playbook=playbook,
                inventory=[str(inventory), str(wave_inventory)], limit=",".join(hosts), envvars=envvars,
                quiet=True, ident="call", rotate_artifacts=1, suppress_env_files=False,
                event_handler=on_event, cancel_callback=cancel, timeout=timeout)
        stdout_path = data_dir / "artifacts" / "call" / "stdout"
        for c in calls:
            c.log.parent.mkdir(parents=True, exist_ok=True)
            if stdout_path.exists():
                shutil.copyfile(stdout_path, c.log)
        # ansible-runner reads and parses every event file on each look at ``events``: once
        # for the wave, not once per host (16 hosts read 16 times the 16 archives in them).
        events = list(runner.events)
        return {c.host: _outcome(events, runner, playbook, c.host, stdout_path, str(c.log)) for c in calls}
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def play_key(extravars: dict[str, Any]) -> str:
    """The values of a call's :data:`PLAY_VARS`, as one key: calls of one wave share it."""
    return json.dumps([extravars.get(k) for k in PLAY_VARS])


def _indent(text: str, n: int) -> str:
    return "".join(" " * n + line + "\n" for line in text.splitlines())


# shape: the wave's events and runner, then one host's names and paths
def _outcome(events: list[dict[str, Any]], runner: Any, playbook: str, host: str, stdout_path: Path,
             log: str) -> _Outcome:
    """One host's end of a wave: its own events decide, as a call of its own would."""
    mine = [ev for ev in events if str((ev.get("event_data") or {}).get("host", "")) == host]
    if runner.status == "canceled":
        stopped = Interrupted(f"host {host}: playbook {playbook} interrupted")
        stopped.payloads = ansible.published_before_failure(mine, playbook, log)
        return _Outcome(error=stopped)
    failure = ansible.task_failure(mine, host, log)
    if failure is None:
        stats = next((ev.get("event_data") or {} for ev in events if ev.get("event") == "playbook_on_stats"), {})
        if host not in (stats.get("processed") or {}):  # the play never reached it (or never ran)
            failure = ansible.status_failure(runner, playbook, host, stdout_path, log) or PlaybookFailedError(
                f"playbook {playbook} did not run on the host", host=host, log=log)
    if failure is not None:
        failure.payloads = ansible.published_before_failure(mine, playbook, log)
        return _Outcome(error=failure, events=mine)
    try:
        payloads = ansible.read_payloads(mine, playbook, log)
    except ResultChannelError as exc:
        return _Outcome(error=exc, events=mine)
    return _Outcome(result=ansible.PlaybookResult(mine, 0.0, log, playbook=playbook, host=host, payloads=payloads),
                    events=mine)


# ---------------------------------------------------------------- the broker (in bmx run)

class _Conn:
    """One batch job's connection: its state and a lock for the replies."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.lock = threading.Lock()
        #: new (before its hello), arriving (on its way to a request), pending, flying (in a
        #: wave), away (its own call); a renewal's connection: renewing, then flying
        self.state = "new"
        #: a renewal's longest wait for others (seconds)
        self.max_wait = 0.0
        self.request: dict[str, Any] | None = None
        self.since = 0.0

    def send(self, message: dict[str, Any]) -> None:
        with self.lock:
            try:
                self.sock.sendall(json.dumps(message).encode() + b"\n")
            except OSError:
                pass  # the job is gone (interrupted): its host's runner was stopped by it


class WaveBroker:
    """The broker ``bmx run`` owns while Snakemake runs (a context manager).

    ``path``: its socket, for :data:`SOCKET_ENV`. It accepts only
    :data:`WAVE_PLAYBOOKS` from ``project_dir``'s playbooks. Leaving the context cancels
    the waves still running (their jobs were interrupted with Snakemake).
    """

    def __init__(self, project_dir: Path, window_s: float | None = None):
        self.playbooks = (Path(project_dir) / "playbooks").resolve()
        self.window_s = window_s if window_s is not None else float(os.environ.get(WINDOW_ENV) or WINDOW_S)
        self.max_wait_s = max(MAX_WAIT_S, MAX_WAIT_WINDOWS * self.window_s)
        self.conns: list[_Conn] = []
        #: batch jobs Snakemake started that have not connected yet (:meth:`expect`)
        self.expected = 0
        #: batch jobs that connected before bmx read their start line (:meth:`expect` owes them)
        self.early = 0
        self.cond = threading.Condition()
        self.closed = False
        self.waves: list[threading.Thread] = []
        self.dir = scratch_dir("broker")  # 0700; a short path (sun_path)
        self.path = str(self.dir / "s")
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)

    def __enter__(self) -> WaveBroker:
        self.server.bind(self.path)
        self.server.listen(64)
        for target in (self._accept, self._dispatch):
            threading.Thread(target=target, name=f"bmx-wave-{target.__name__[1:]}", daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        self.server.close()
        for conn in list(self.conns):
            conn.sock.close()
        for wave in list(self.waves):
            wave.join(timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)

    def expect(self) -> None:
        """A batch job has started (Snakemake said so): a wave waits for it too, within its window.

        bmx reads Snakemake's stream as it comes: a job may have connected before its start
        line is read. That job is not counted again (it would be waited for by its own
        request until the window ran out).
        """
        with self.cond:
            if self.early:
                self.early -= 1
            else:
                self.expected += 1

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.server.accept()
            except OSError:
                return  # closed
            conn = _Conn(sock)
            with self.cond:
                self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), name="bmx-wave-job", daemon=True).start()

    def _serve(self, conn: _Conn) -> None:
        try:
            for line in conn.sock.makefile("rb"):
                message = json.loads(line)
                with self.cond:
                    if "hello" in message:
                        conn.state = "arriving"
                        if self.expected:
                            self.expected -= 1
                        else:
                            self.early += 1  # said hello before bmx read its start line (expect)
                    elif "request" in message:
                        conn.request, conn.state, conn.since = message["request"], "pending", time.monotonic()
                    elif "renew" in message:
                        conn.request, conn.state, conn.since = message["renew"], "renewing", time.monotonic()
                        conn.max_wait = float(message["renew"].get("max_wait") or 0.0)
                    elif "away" in message:
                        conn.state = "away"
                    self.cond.notify_all()
        except (OSError, ValueError):
            pass
        with self.cond:
            self.conns.remove(conn)
            self.cond.notify_all()
        conn.sock.close()

    def _ready(self) -> list[_Conn]:
        """The requests to run now (called holding the condition): every pending one once
        no job is on its way to a request, or once the latest request waited the window
        (or the first the longest wait)."""
        pending = [c for c in self.conns if c.state == "pending"]
        if not pending:
            return []
        now = time.monotonic()
        arriving = self.expected > 0 or any(c.state == "arriving" for c in self.conns)
        if arriving and now - max(c.since for c in pending) < self.window_s \
                and now - min(c.since for c in pending) < self.max_wait_s:
            return []
        return pending

    def _renewals(self) -> list[_Conn]:
        """The lease renewals to run now (called holding the condition): every waiting one,
        once one of them has waited its longest."""
        waiting = [c for c in self.conns if c.state == "renewing"]
        now = time.monotonic()
        return waiting if any(now - c.since >= c.max_wait for c in waiting) else []

    def _dispatch(self) -> None:
        with self.cond:
            while not self.closed:
                ready = self._ready() + self._renewals()
                if not ready:
                    self.cond.wait(timeout=0.05 if any(c.state in ("pending", "renewing") for c in self.conns)
                                   else None)
                    continue
                for conn in ready:
                    conn.state = "flying"
                # One call per playbook, inventory and PLAY_VARS, side by side: a new
                # host's preparation does not hold back the known hosts' batches.
                groups: dict[tuple[str, str, str], list[_Conn]] = {}
                for conn in ready:
                    req = conn.request or {}
                    if req.get("playbook") not in (*WAVE_PLAYBOOKS, RENEW_PLAYBOOK) or \
                            Path(req.get("project_dir", "")).resolve() != self.playbooks:
                        self._refuse(conn)
                        continue
                    key = (str(req["playbook"]), str(req["inventory"]), play_key(req.get("extravars") or {}))
                    groups.setdefault(key, []).append(conn)
                for (playbook, inventory, _), members in groups.items():
                    wave = threading.Thread(target=self._run, args=(playbook, inventory, members), name="bmx-wave",
                                            daemon=True)
                    self.waves = [w for w in self.waves if w.is_alive()] + [wave]
                    wave.start()

    def _refuse(self, conn: _Conn) -> None:
        """A request the broker does not run (called holding the condition): the job hears why."""
        req = conn.request or {}
        conn.send({"error": {"kind": "AnsibleError", "host": req.get("host", ""),
                             "text": f"the wave broker runs only {', '.join((*WAVE_PLAYBOOKS, RENEW_PLAYBOOK))} "
                                     "of its project"}})
        self._answered(conn)

    @staticmethod
    def _answered(conn: _Conn) -> None:
        """A connection whose request was answered: a batch job goes on to its next
        request (a time slice), a renewal's connection is done."""
        renewal = (conn.request or {}).get("playbook") == RENEW_PLAYBOOK
        conn.state, conn.request = ("done" if renewal else "arriving"), None

    def _run(self, playbook: str, inventory: str, members: list[_Conn]) -> None:
        """One call of a wave: the ready requests for one playbook and inventory."""
        try:
            calls = [self._wave_call(conn) for conn in members]
            timeouts = [int(t) for t in ((c.request or {}).get("timeout") for c in members) if t]
            outcomes = run_wave(playbook, project_dir=self.playbooks, inventory=Path(inventory),
                                calls=calls, start_tag=str((members[0].request or {}).get("start_tag") or ""),
                                cancel=lambda: self.closed, timeout=min(timeouts) if timeouts else None)
            replies = [_reply(outcomes[c.host]) for c in calls]
        except Exception as exc:  # no job may wait forever: each hears why its call failed
            hosts = [str((conn.request or {}).get("host", "")) for conn in members]
            replies = [{"error": {"kind": "AnsibleError", "host": host,
                                  "text": f"host {host}: the wave's call failed: {type(exc).__name__}: {exc}"}}
                       for host in hosts]
        for conn, reply in zip(members, replies, strict=True):
            conn.send(reply)
        with self.cond:
            for conn in members:
                if conn.state == "flying":
                    self._answered(conn)
            self.cond.notify_all()

    @staticmethod
    def _wave_call(conn: _Conn) -> WaveCall:
        req = conn.request or {}
        return WaveCall(host=req["host"], extravars=req["extravars"], data=req.get("data") or {},
                        log=Path(req["log"]), on_started=lambda: conn.send({"started": True}))


def _reply(outcome: _Outcome) -> dict[str, Any]:
    if outcome.result is not None:
        res = outcome.result
        return {"result": {"events": res.events, "log": res.log, "playbook": res.playbook, "host": res.host,
                           "payloads": res.payloads}}
    exc = outcome.error
    return {"error": {"kind": type(exc).__name__, "text": str(exc), "host": getattr(exc, "host", ""),
                      "task": getattr(exc, "task", ""), "log": getattr(exc, "log", ""),
                      "payloads": getattr(exc, "payloads", {})}}


# ---------------------------------------------------------------- the job's side

_client: dict[str, Any] = {}


def broker_path() -> str:
    """The socket of ``bmx run``'s broker this job's calls go through; "" when there is
    none to go through (plain ``snakemake``, the fake port :data:`~benchmatrix.execute.ansible.PORT_ENV`)."""
    return "" if os.environ.get(ansible.PORT_ENV) else os.environ.get(SOCKET_ENV, "")


def hello() -> None:
    """Tell ``bmx run``'s broker that this batch job is on its way to a call (it waits for
    it before starting a wave, within its window). Without a broker: nothing."""
    path = broker_path()
    if not path or "sock" in _client:
        return
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        sock.sendall(b'{"hello": true}\n')
    except OSError:
        sock.close()
        return  # no broker to reach: the job makes its own calls
    _client.update(sock=sock, lines=sock.makefile("rb"))


def joins(playbook: str) -> bool:
    """Whether this job's call of ``playbook`` goes through the broker (:func:`call`);
    if not, the broker hears that the job makes a call of its own now (its waves need
    not wait for it)."""
    if "sock" not in _client:
        return False
    if playbook in WAVE_PLAYBOOKS:
        return True
    _send({"away": True})
    return False


def _send(message: dict[str, Any]) -> None:
    _client["sock"].sendall(json.dumps(message).encode() + b"\n")


# shape: run_playbook's arguments, keyword-only
def call(playbook: str, *, project_dir: Path, inventory: Path, host: str, extravars: dict[str, Any], log: Path,
         data: dict[str, Any] | None = None, start_tag: str = "",
         on_started: Callable[[], None] | None = None) -> ansible.PlaybookResult:
    """:func:`~benchmatrix.execute.ansible.run_playbook` of ``playbook`` (a batch's call)
    through the broker, as part of a wave (when :func:`joins`).

    Raises:
        AnsibleError: as run_playbook's (the host's own failure in the wave); also when
            the broker closed before the wave ended.
        Interrupted: the wave was cancelled.
    """
    t0 = time.monotonic()
    _send({"request": _request(playbook, project_dir, inventory, host, extravars, log, data=data or {},
                               start_tag=start_tag)})
    return _answer(_client["lines"], t0, host, log, on_started)


# shape: run_playbook's arguments, then what the request adds
def _request(playbook: str, project_dir: Path, inventory: Path, host: str, extravars: dict[str, Any], log: Path,
             **more: Any) -> dict[str, Any]:
    """A request to the broker: run_playbook's arguments, its paths absolute (the broker's
    working directory is bmx run's)."""
    return {"playbook": playbook, "project_dir": str(Path(project_dir).resolve()),
            "inventory": str(Path(inventory).resolve()), "host": host, "extravars": extravars,
            "log": str(Path(log).resolve()), **more}


def _answer(lines: Any, t0: float, host: str, log: Path,
            on_started: Callable[[], None] | None = None) -> ansible.PlaybookResult:
    """The broker's answer to a request: the host's result, or its error raised."""
    for line in lines:
        message = json.loads(line)
        if "started" in message:
            if on_started is not None:
                on_started()
            continue
        if "result" in message:
            res = message["result"]
            return ansible.PlaybookResult(res["events"], time.monotonic() - t0, res["log"], playbook=res["playbook"],
                                          host=res["host"], payloads=res["payloads"])
        raise _error(message["error"])
    raise AnsibleError("bmx run's wave broker closed before the call ended", host=host, log=str(log))


# shape: run_playbook's arguments, keyword-only, the renewal's longest wait and its withdrawal
def renew(*, project_dir: Path, inventory: Path, host: str, extravars: dict[str, Any], log: Path, timeout: int,
          max_wait: float, withdraw: threading.Event | None = None) -> ansible.PlaybookResult | None:
    """A lease renewal (:data:`RENEW_PLAYBOOK`) through ``bmx run``'s broker: the renewals
    of the hosts whose batches run together are one call, within ``max_wait`` seconds of
    the first. Its own connection: the batch job's call may be in flight meanwhile.
    ``withdraw`` set before the answer came (the batch ended) closes the connection: the
    broker leaves out a renewal it has not started (a wave of finished batches' renewals
    cost a whole call, beside the campaign's collect job).

    Returns:
        The host's result, as :func:`~benchmatrix.execute.ansible.run_playbook`'s; None
        when there is no broker to reach (the caller makes its own call).

    Raises:
        AnsibleError: as run_playbook's, or the renewal was withdrawn.
    """
    path = broker_path()
    if path:
        t0 = time.monotonic()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            try:
                sock.connect(path)
            except OSError:
                pass  # no broker to reach: a call of its own
            else:
                sock.sendall(json.dumps({"renew": _request(RENEW_PLAYBOOK, project_dir, inventory, host, extravars, log,
                                                           timeout=timeout, max_wait=max_wait)}).encode() + b"\n")
                while withdraw is not None and not select.select([sock], [], [], WITHDRAW_POLL_S)[0]:
                    if withdraw.is_set():
                        raise AnsibleError(f"host {host}: the lease renewal was withdrawn (the batch ended)",
                                           host=host, log=str(log))
                return _answer(sock.makefile("rb"), t0, host, log)
        finally:
            sock.close()
    return None


def _error(err: dict[str, Any]) -> BaseException:
    """The error a job's part of a wave ended with, as the job's own call would have raised it."""
    cls: type[BaseException] = Interrupted if err["kind"] == "Interrupted" else _ERRORS.get(err["kind"], AnsibleError)
    exc = cls.__new__(cls)
    Exception.__init__(exc, err["text"])  # the text as the wave made it (host, task, log named)
    for name in ("host", "task", "log"):
        setattr(exc, name, err.get(name, ""))
    exc.payloads = err.get("payloads") or {}  # type: ignore[attr-defined]
    return exc
