"""knob_cpu_governor through real Ansible (the knob loop, tasks/knobs.yml, on localhost)
against a CPU directory the test builds: this machine has no cpufreq, and its governors
are not the tests' to change (a stand-in: the test plays the kernel's part)."""

from __future__ import annotations

from pathlib import Path

import pytest
from knobkit import KnobRunner, assert_cycle, knob

pytestmark = pytest.mark.slow


def cpu_tree(root: Path, cpus: int = 2) -> Path:
    root.mkdir(parents=True)
    (root / "online").write_text(f"0-{cpus - 1}\n")
    for cpu in range(cpus):
        (root / f"cpu{cpu}" / "cpufreq").mkdir(parents=True)
        (root / f"cpu{cpu}" / "cpufreq" / "scaling_governor").write_text("powersave\n")
        (root / f"cpu{cpu}" / "cpufreq" / "scaling_available_governors").write_text("performance powersave\n")
    return root


def test_cpu_governor_cycle_and_refusal(tmp_path):
    runner = KnobRunner(tmp_path)
    root = cpu_tree(tmp_path / "cpu")

    def governors():
        return [(root / f"cpu{c}" / "cpufreq" / "scaling_governor").read_text().strip() for c in (0, 1)]

    state = assert_cycle(runner, lambda v: knob("gov", "knob_cpu_governor", v, knob_cpu_governor_sysfs_root=str(root)),
                         "performance", governors)
    assert state["baseline"] == "powersave" and governors() == ["powersave", "powersave"]
    err = runner.fail([knob("gov", "knob_cpu_governor", "ondemand", knob_cpu_governor_sysfs_root=str(root))])
    assert "governor 'ondemand' is not available for CPU 0 on localhost" in str(err), str(err)
