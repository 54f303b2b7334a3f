"""The controller renews a batch's lease from its runner's start (issue 23): a call that
still waits for a start slot, or prepares the host in its first batch, costs no renewal
playbook (with many hosts on a small controller, one ansible-playbook per host more)."""

from __future__ import annotations

import time

from benchmatrix.execute import lease as lease_mod
from benchmatrix.spec.load import load_spec

SPEC = """name: lc_t
hosts: h1
inventory: inv.yml
factors: {word: [a]}
workload:
  role: workload_command
  vars: {argv: [echo, "{{ word }}"]}
"""


def lease_project(tmp_path):
    """A one-host project in ``tmp_path`` whose runner lease is 0.2 s (a renewal due
    every 0.05 s); its spec, loaded."""
    (tmp_path / "inv.yml").write_text("all:\n  hosts:\n    h1:\n      ansible_connection: local\n")
    (tmp_path / "s.yaml").write_text(SPEC)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text("runner_lease_seconds: 0.2\n")
    return load_spec(tmp_path / "s.yaml")


def test_no_renewal_before_the_runner_starts_then_every_quarter_lease(tmp_path, monkeypatch):
    spec = lease_project(tmp_path)
    calls: list[str] = []

    def renewal(playbook, **kwargs):
        calls.append(playbook)
        raise lease_mod.BenchmatrixError("no host here")  # a failed renewal is retried

    monkeypatch.setattr(lease_mod, "run_playbook", renewal)
    with lease_mod.lease(spec, tmp_path, "h1", "h1-b0001-aa") as runner_started:
        time.sleep(0.6)  # a dozen quarter leases of waiting for a start slot, or preparing
        assert calls == [], "renewed before the runner started"
        runner_started.set()
        deadline = time.monotonic() + 30
        while not calls and time.monotonic() < deadline:
            time.sleep(0.05)
    assert calls and set(calls) == {"renew_lease.yml"}
