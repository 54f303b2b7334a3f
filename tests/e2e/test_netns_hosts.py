"""The namespace test hosts (tests/netns.py) start sessions as a clean remote host does.

They share this machine's files, root's home among them: a session that ran root's
``~/.bashrc`` (here it runs ``pyenv init``, about 0.4 s and a lock file a killed session
leaves behind, after which every later session waited 60 s) would make each Ansible
command to a test host pay for the machine's own shell set-up, which no real host of a
campaign has.
"""

from __future__ import annotations

import subprocess

import netns
import pytest

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(bool(netns.available()), reason=netns.available() or "namespaces available")]


def test_a_session_on_a_test_host_does_not_run_roots_bashrc(tmp_path):
    # Debian's bash reads ~/.bashrc for a command sshd starts (SSH_CLIENT set): whatever
    # that file defines or exports would show here.
    with netns.NamespaceHosts(tmp_path / "net", 1) as net:
        out = subprocess.run(
            net.ctl_cmd(["ssh", "-i", str(net.key), "-o", "StrictHostKeyChecking=no",
                         "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
                         f"root@{net.addr['h1']}",
                         'echo "functions=[$(declare -F)] pyenv=[${PYENV_ROOT-}] shell=[$0]"']),
            capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "functions=[] pyenv=[] shell=[bash]", out.stdout


def test_the_test_hosts_ssh_masters_are_their_own(tmp_path):
    # Master sockets are named after the address; every test's namespace hosts use the same
    # addresses. In a shared directory a test's commands went to another test's host (two
    # reboot tests in parallel: one's fake reboot broke the other's batch).
    import sys
    from pathlib import Path

    with netns.NamespaceHosts(tmp_path / "net", 1) as net:
        inventory = tmp_path / "inv.yml"
        inventory.write_text(net.inventory())
        ansible = str(Path(sys.executable).parent / "ansible")
        out = subprocess.run(net.ctl_cmd([ansible, "h1", "-i", str(inventory), "-m", "ansible.builtin.ping"]),
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        sockets = [p for p in (net.workdir / "cp").iterdir() if p.is_socket()]
    assert sockets, "the call's master socket is not in the hosts' own directory"
