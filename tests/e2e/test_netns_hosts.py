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
