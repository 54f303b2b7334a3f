"""Host facts are kept per host across campaigns behind a cheap fingerprint (issue 15):
full gathering and the tool's install check only for a new or changed host.

Real Snakemake, ansible-runner and localhost; campaigns of two experiments, as a user
runs them one after the other.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow

SPEC = """\
name: {name}
inventory: config/inventory/test.yml
factors:
  word: [alpha]
workload:
  role: workload_command
  vars:
    argv: [echo, "n 1"]
  metrics:
    count: {{regex: 'n (?P<value>[0-9]+)', unit: x}}
replicates: 1
warmup: 0
"""


def _campaign(project, name: str) -> dict:
    spec = project.write_spec(name, SPEC.format(name=name))
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    log = (project.exp(name) / "logs" / "ansible" / "prepare-localhost.log").read_text()
    return {"facts": json.loads((project.exp(name) / "hosts" / "localhost" / "facts.json").read_text()), "log": log}


def test_a_known_host_keeps_its_facts_and_a_changed_one_is_gathered_again(project):
    with project.inventory.open("a") as fh:
        fh.write("      workload_command_version_argv: [echo, 'tool 1.2']\n")
    first = _campaign(project, "facts_a")
    assert first["facts"]["facts_from"] == "gathered" and first["facts"]["tool_version"] == "tool 1.2"
    cache = project.root / "results" / ".hosts" / "localhost" / "workload_command.json"
    kept = json.loads(cache.read_text())
    assert "boot_id" in kept["fingerprint"] and kept["facts"]["hostname"] == first["facts"]["hostname"]

    second = _campaign(project, "facts_b")
    assert second["facts"]["facts_from"] == "cache"
    same = {k: v for k, v in first["facts"].items() if k not in ("facts_from", "gathered_at")}
    assert {k: second["facts"].get(k) for k in same} == same  # state fields read again, equal here
    # Neither full gathering nor the install check ran (their tasks were skipped).
    assert "Read the command's version" not in second["log"]
    assert "ok: [localhost]" not in second["log"].split("TASK [Gather the facts of a new or changed host]")[1] \
        .split("TASK [")[0]

    kept["fingerprint"] = kept["fingerprint"].replace("boot_id", "boot_id changed")
    cache.write_text(json.dumps(kept))
    third = _campaign(project, "facts_c")
    assert third["facts"]["facts_from"] == "gathered"
    assert "Read the command's version" in third["log"]
    assert "boot_id changed" not in json.loads(cache.read_text())["fingerprint"]
