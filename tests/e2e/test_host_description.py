"""A host's description in facts.json (CPU, memory, kernel, distribution, ...) is read by
the knob module itself (knobs.system_metadata, issue 34): the words must be those of
Ansible's setup module, which described hosts before, or a host seen before and after
would look changed (compare's environment facts). Real Ansible: setup on this machine,
beside the module's code run by the same interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmatrix.host import knobs

pytestmark = pytest.mark.slow

PYTHON = "/usr/bin/python3"
FIELDS = {"hostname": "hostname", "fqdn": "fqdn", "cpu_count": "processor_vcpus", "sockets": "processor_count",
          "cores": "processor_cores", "threads_per_core": "processor_threads_per_core", "memory_mb": "memtotal_mb",
          "kernel": "kernel", "architecture": "architecture", "python": "python_version"}


@pytest.mark.skipif(not Path(PYTHON).is_file(), reason=f"{PYTHON} is the interpreter both describe this host with")
def test_the_module_describes_this_host_as_ansibles_setup_did():
    ansible = Path(sys.executable).parent / "ansible"
    out = subprocess.run([str(ansible), "localhost", "-c", "local", "-i", "localhost,", "-e",
                          f"ansible_python_interpreter={PYTHON}", "-m", "ansible.builtin.setup", "-o"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    facts = {k.removeprefix("ansible_"): v for k, v in json.loads(out.split(" => ", 1)[1])["ansible_facts"].items()}
    code = ("import importlib.util, json, sys\n"
            f"spec = importlib.util.spec_from_file_location('k', {str(Path(knobs.__file__))!r})\n"
            "k = importlib.util.module_from_spec(spec); spec.loader.exec_module(k)\n"
            "print(json.dumps(k.system_metadata()))")
    ours = json.loads(subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=60,
                                     check=True).stdout)
    assert {k: ours[k] for k in FIELDS} == {k: facts[v] for k, v in FIELDS.items()}
    assert ours["cpu_model"] == (facts["processor"][2] if len(facts["processor"]) > 2 else "unknown")
    assert ours["distribution"] == f"{facts['distribution']} {facts['distribution_version']}"
