"""The host's noise settings (issue 24, item 5): what the batch runner records with each
run and bmx check prints, and how a busy or untuned host is told.

This machine has no cpufreq and one NUMA node, so the settings are read from a tree the
test builds under the runner's ``HOST_ROOT`` (as the knob tests build sysfs trees); the
last test reads this machine's own files.
"""

from __future__ import annotations

import pytest

from benchmatrix.host import batch_runner
from benchmatrix.results.host_env import busy_warning, untuned_warnings
from benchmatrix.results.notes import note_rows


@pytest.fixture
def noisy_root(tmp_path, monkeypatch):
    cpu = tmp_path / "sys" / "devices" / "system" / "cpu"
    for n, gov in enumerate(["powersave", "performance", "powersave", "powersave"]):
        (cpu / f"cpu{n}" / "cpufreq").mkdir(parents=True)
        (cpu / f"cpu{n}" / "cpufreq" / "scaling_governor").write_text(gov + "\n")
    (cpu / "online").write_text("0-3\n")
    (cpu / "intel_pstate").mkdir()
    (cpu / "intel_pstate" / "no_turbo").write_text("0\n")
    vul = cpu / "vulnerabilities"
    vul.mkdir()
    (vul / "meltdown").write_text("Not affected\n")
    (vul / "spectre_v2").write_text("Mitigation: Retpolines\n")
    (vul / "mds").write_text("Vulnerable: Clear CPU buffers attempted, no microcode\n")
    thp = tmp_path / "sys" / "kernel" / "mm" / "transparent_hugepage"
    thp.mkdir(parents=True)
    (thp / "enabled").write_text("[always] madvise never\n")
    for node, cpus in (("node0", "0-1"), ("node1", "2-3")):
        (tmp_path / "sys" / "devices" / "system" / "node" / node).mkdir(parents=True)
        (tmp_path / "sys" / "devices" / "system" / "node" / node / "cpulist").write_text(cpus + "\n")
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cmdline").write_text("BOOT_IMAGE=/vmlinuz ro quiet mitigations=off\n")
    (tmp_path / "proc" / "loadavg").write_text("3.50 2.00 1.00 2/300 4242\n")
    monkeypatch.setattr(batch_runner, "HOST_ROOT", str(tmp_path))
    return tmp_path


def test_host_environment_reads_governor_turbo_thp_mitigations_numa_and_load(noisy_root):
    env = batch_runner.host_environment()
    assert env == {"governor": "performance,powersave", "turbo": "on", "thp": "always",
                   "cmdline": "BOOT_IMAGE=/vmlinuz ro quiet mitigations=off",
                   "mitigations": "1 mitigated, 1 vulnerable, mitigations=off", "numa_nodes": 2,
                   "numa": "node0:0-1 node1:2-3", "cpus": 4, "load_1m": 3.5}
    (noisy_root / "sys" / "devices" / "system" / "cpu" / "intel_pstate" / "no_turbo").write_text("1\n")
    assert batch_runner.host_environment()["turbo"] == "off"


def test_busy_and_untuned_are_told_in_words(noisy_root):
    env = batch_runner.host_environment()
    assert busy_warning(env["load_1m"], 2, "now") == \
        "busy now: load average 3.5 is above the 2 CPU(s) the runs use"
    assert busy_warning(env["load_1m"], 4, "now") == ""
    assert untuned_warnings(env) == ["untuned: CPU frequency governor performance,powersave, not performance",
                                     "untuned: turbo/boost is on (the clock follows load and temperature)"]
    assert untuned_warnings({"governor": "performance", "turbo": "off"}) == []
    assert untuned_warnings({"governor": None, "turbo": None}) == []  # nothing to tell (a VM)


def test_records_of_a_busy_untuned_batch_give_report_notes(noisy_root):
    env = {**batch_runner.host_environment(), "load_before": 3.5, "load_after": 1.0}
    recs = [{"run_id": f"r{i}", "attempt": 1, "host": "h1", "batch": "b1", "started_at": f"t{i}",
             "host_env": env, "workload": {"affinity": [0, 1] if i == 0 else None}} for i in range(3)]
    notes = note_rows(recs, with_facts=False)
    busy = [n for n in notes if n["check"] == "host_busy"]
    untuned = [n for n in notes if n["check"] == "host_untuned"]
    # r0 ran on 2 CPUs (busy), r1 and r2 on all 4 (3.5 < 4: not busy); untuned once per batch.
    assert [n["run_id"] for n in busy] == ["r0"] and "above the 2 CPU(s)" in busy[0]["detail"]
    assert len(untuned) == 2 and {n["run_id"] for n in untuned} == {"r0"}
    # The report's warnings name them.
    import pandas as pd

    from benchmatrix.analyze.sanity import note_warnings
    from benchmatrix.layout import NOTE_COLUMNS

    titles = {w["check"]: w["title"] for w in note_warnings(pd.DataFrame(notes, columns=NOTE_COLUMNS))}
    assert titles == {"host_busy": "the host was busy", "host_untuned": "the host's CPU clock was not fixed"}


def test_this_machines_own_settings_are_read():
    env = batch_runner.host_environment()
    assert env["cpus"] and env["cmdline"] and env["load_1m"] is not None
    assert set(env) == {"governor", "turbo", "thp", "cmdline", "mitigations", "numa_nodes", "numa", "cpus", "load_1m"}
