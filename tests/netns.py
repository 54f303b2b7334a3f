"""Test hosts in network namespaces: a controller namespace, N host namespaces joined
by veth pairs on a bridge inside the controller namespace, and an sshd per host.

Nothing touches the machine's own namespace: the veth pairs are created directly
inside the test's namespaces, and every address comes from 198.51.100.0/24
(TEST-NET-2), checked first to be on no interface of the machine. Processes are
stopped and namespaces deleted on teardown, even when a test fails.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

SUBNET = "198.51.100"
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def available() -> str:
    """Empty when namespace hosts can be built here, else the reason they cannot."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if not shutil.which("ip"):
        return "iproute2 (ip) is missing"
    if not os.path.exists(SSHD):
        return "sshd (openssh-server) is missing"
    if f"{SUBNET}." in _ip("-4", "addr").stdout:
        return f"{SUBNET}.0/24 is in use on this machine"
    return ""


def has_cgroup2() -> bool:
    """Whether this machine has a cgroup v2 hierarchy mounted (pure or hybrid)."""
    try:
        return any(" - cgroup2 " in line for line in Path("/proc/self/mountinfo").read_text().splitlines())
    except OSError:
        return False


class NamespaceHosts:
    """N sshd hosts reachable from a controller namespace.

    Attributes:
        ctl: Name of the controller namespace (run the controller with :meth:`ctl_cmd`).
        hosts: Host names (``h1``...), each with an address ``SUBNET.1X``.
        key: Private key the hosts accept for root.
    """

    def __init__(self, workdir: Path, n: int):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        tag = f"bmx{os.getpid() % 10000}"
        self.ctl = f"{tag}c"
        self.hosts = [f"h{i}" for i in range(1, n + 1)]
        self.ns = {h: f"{tag}{h}" for h in self.hosts}
        self.addr = {h: f"{SUBNET}.{10 + i}" for i, h in enumerate(self.hosts, start=1)}
        self.key = self.workdir / "id_ed25519"
        self._created: list[str] = []

    # ------------------------------------------------------------ lifecycle
    def __enter__(self) -> NamespaceHosts:
        try:
            self._build()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()

    def _build(self) -> None:
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.key)], check=True)
        (self.workdir / "authorized_keys").write_text((self.workdir / "id_ed25519.pub").read_text())
        Path("/run/sshd").mkdir(exist_ok=True)
        _ip("netns", "add", self.ctl)
        self._created.append(self.ctl)
        _ip("-n", self.ctl, "link", "set", "lo", "up")
        _ip("-n", self.ctl, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.ctl, "addr", "add", f"{SUBNET}.1/24", "dev", "br0")
        _ip("-n", self.ctl, "link", "set", "br0", "up")
        for i, h in enumerate(self.hosts, start=1):
            ns = self.ns[h]
            _ip("netns", "add", ns)
            self._created.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            # Both ends are born inside the test's namespaces.
            _ip("-n", self.ctl, "link", "add", f"v{i}", "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("-n", self.ctl, "link", "set", f"v{i}", "master", "br0")
            _ip("-n", self.ctl, "link", "set", f"v{i}", "up")
            _ip("-n", ns, "addr", "add", f"{self.addr[h]}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                            str(self.workdir / f"hostkey_{h}")], check=True)
            (self.workdir / f"sshd_{h}.conf").write_text(
                f"ListenAddress {self.addr[h]}\nPort 22\nHostKey {self.workdir}/hostkey_{h}\n"
                f"PidFile {self.workdir}/sshd_{h}.pid\nUsePAM no\nStrictModes no\n"
                f"PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                f"AuthorizedKeysFile {self.workdir}/authorized_keys\nSubsystem sftp internal-sftp\n"
                f"MaxStartups 50\nMaxSessions 50\n"
                # A test host shares this machine's files, root's ~/.bashrc among them, which
                # Debian's bash reads for every command sshd starts (here `pyenv init`: 0.4 s a
                # command, and a lock a killed session leaves makes later ones wait 60 s). A
                # session that starts at shell level 2 skips it, as a clean remote host would
                # have nothing there (tests/e2e/test_netns_hosts.py).
                f"SetEnv SHLVL=1\n")
            self.start_sshd(h)
        for h in self.hosts:
            self._wait_port(h)

    def teardown(self) -> None:
        for ns in reversed(self._created):
            pids = _ip("netns", "pids", ns, check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            _ip("netns", "del", ns, check=False)
        self._created.clear()

    # ------------------------------------------------------------ hosts
    def start_sshd(self, host: str) -> None:
        # `ip netns exec` gives the command a mount namespace of its own with a fresh
        # /sys, which hides the cgroup v2 hierarchy: the batch runner on the host then
        # fell back to process-tree containment (about 1 ms a run more), unlike on a
        # real host. Mounting cgroup2 again there, inside that private mount namespace
        # (nothing changes in the machine's own), gives sshd's sessions the hierarchy.
        sshd = [SSHD, "-f", str(self.workdir / f"sshd_{host}.conf"), "-E", str(self.workdir / f"sshd_{host}.log")]
        if has_cgroup2():
            sshd = ["sh", "-c", 'mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null; exec "$@"', "sh", *sshd]
        subprocess.run(["ip", "netns", "exec", self.ns[host], *sshd], check=True)

    def stop_sshd(self, host: str) -> None:
        """The host stops answering: its sshd and every session it serves end."""
        for pid in _ip("netns", "pids", self.ns[host], check=False).stdout.split():
            try:
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            if comm == "sshd":
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def _wait_port(self, host: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            probe = subprocess.run(["ip", "netns", "exec", self.ctl, "bash", "-c",
                                    f"exec 3<>/dev/tcp/{self.addr[host]}/22"], capture_output=True)
            if probe.returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError(f"sshd of {host} did not come up: {(self.workdir / f'sshd_{host}.log').read_text()}")

    def ctl_cmd(self, argv: list[str]) -> list[str]:
        """``argv`` run inside the controller namespace."""
        return ["ip", "netns", "exec", self.ctl, *argv]

    def inventory(self, per_host: dict[str, dict[str, str]] | None = None, group_vars: str = "") -> str:
        """An inventory (YAML) of the hosts, reached over SSH as root with the test key.

        The SSH master sockets go to a directory of these hosts' own: they are named
        after the address, and other tests' namespace hosts (parallel workers, other
        sessions) use the same addresses; a shared one sends a test's commands to
        another test's host (seen: a fake reboot of one broke the other's batch)."""
        lines = ["all:", "  vars:",
                 "    ansible_user: root",
                 f"    ansible_control_path_dir: {self.workdir / 'cp'}",
                 f"    ansible_ssh_private_key_file: {self.key}",
                 "    ansible_ssh_common_args: >-",
                 "      -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
                 "      -o ServerAliveInterval=2 -o ServerAliveCountMax=3 -o ConnectTimeout=5",
                 "    ansible_python_interpreter: /usr/bin/python3"]
        lines += ["    " + ln for ln in group_vars.splitlines() if ln.strip()]
        lines.append("  hosts:")
        for h in self.hosts:
            lines += [f"    {h}:", f"      ansible_host: {self.addr[h]}"]
            for k, v in (per_host or {}).get(h, {}).items():
                lines.append(f"      {k}: {v}")
        return "\n".join(lines) + "\n"
