"""The batch runner is installed once per host per campaign (by the host's first batch call), a batch
replaces a copy on the host that is stale or missing, and each batch job writes its
runs rows beside its marker (issue 15).

Real Snakemake, ansible-runner and batch runner on localhost; each step is a real
`bmx run` / `bmx rerun` as a user would type it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from benchmatrix.host import batch_runner
from benchmatrix.results.batch_rows import read_batch_rows

pytestmark = pytest.mark.slow

SPEC = """\
name: install_case
inventory: config/inventory/test.yml
factors:
  word: [alpha, beta]
workload:
  role: workload_command
  vars:
    argv: [echo, "value {{ word }} 1"]
  metrics:
    count: {regex: 'value \\w+ (?P<value>[0-9]+)', unit: x}
replicates: 1
warmup: 0
"""


def _statuses(exp: Path) -> list[str]:
    return sorted(json.loads(p.read_text())["status"] for p in exp.glob("runs/*/*/record.json"))


def test_stale_and_missing_runners_are_reinstalled_by_the_batch(project):
    spec = project.write_spec("install_case", SPEC)
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    exp = project.exp("install_case")
    (installed,) = project.hostwork.glob("*/batch_runner.py")
    want = hashlib.sha256(Path(batch_runner.__file__).read_bytes()).hexdigest()
    assert hashlib.sha256(installed.read_bytes()).hexdigest() == want
    # Owner only: the runs' raw outputs may show their environments.
    assert [oct(p.stat().st_mode & 0o777) for p in (installed.parent, installed.parent / "batches", installed)] \
        == ["0o700", "0o700", "0o755"]
    # The batch's manifest never was a file on the host; the fetched archive stays until
    # the next batch's runner removes it.
    assert [p.name for p in (installed.parent / "batches").iterdir() if p.suffix == ".gz"] \
        == [f"{json.loads(m.read_text())['batch']}.tar.gz" for m in exp.glob("batches/*.done")]
    # A stale copy (another benchmatrix installed it): the batch installs the current one.
    installed.write_text(installed.read_text() + "\n# an older benchmatrix\n")
    res = project.bmx("rerun", str(spec), "--where", "word == 'alpha'", "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    assert hashlib.sha256(installed.read_bytes()).hexdigest() == want
    assert _statuses(exp) == ["ok", "ok", "ok"]
    # A missing one (someone cleaned the host): installed again as well.
    installed.unlink()
    res = project.bmx("rerun", str(spec), "--where", "word == 'beta'", "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    assert hashlib.sha256(installed.read_bytes()).hexdigest() == want
    assert _statuses(exp) == ["ok", "ok", "ok", "ok"]
    # No archive is left on the host: the next runner removed the first batch's, and the later
    # batches (one module call on the controller itself) packed none (issue 34: the batch job
    # copies the runs' files from the work directory).
    assert list((installed.parent / "batches").glob("*.tar.gz")) == []
    # Each batch job wrote its runs rows: concatenated, they are collect's runs.csv
    # (three batches, four attempts).
    got = read_batch_rows(exp)
    assert got.missing == [] and len(list(exp.glob("batches/*.runs.csv"))) == 3
    pd.testing.assert_frame_equal(got.rows, pd.read_csv(exp / "runs.csv"))
    # Issue 34: the first batch prepared the new host (run_batch.yml); the later ones, on a
    # host known to the campaign, were one module call each (run_known_batch.yml).
    logs = sorted((exp / "logs" / "ansible").glob("localhost-b*.log"))
    assert [_one_call(p) for p in logs] == [False, True, True]
    # A second campaign (another experiment) on the known host: its first batch is one call
    # too, which installs the runner in the campaign's new work directory and probes the host.
    spec2 = project.write_spec("install_again", SPEC.replace("name: install_case", "name: install_again"))
    res = project.bmx("run", str(spec2), "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    exp2 = project.exp("install_again")
    assert [_one_call(p) for p in (exp2 / "logs" / "ansible").glob("localhost-b*.log")] == [True]
    assert _statuses(exp2) == ["ok", "ok"]
    facts = json.loads((exp2 / "hosts" / "localhost" / "facts.json").read_text())
    assert facts["facts_from"] == "cache" and facts["online_cpus"] and facts["workload_cleanup"] is True
    assert len(list(project.hostwork.glob("*/batch_runner.py"))) == 2


def _one_call(log: Path) -> bool:
    """Whether a batch's Ansible log is run_known_batch.yml's: one module call, no install, fetch or facts."""
    text = log.read_text()
    one = "PLAY [Run one batch of benchmark runs in one call]" in text
    assert not one or not any(t in text for t in ("Gathering Facts", "Install", "Fetch", "Build the workload"))
    return one


#: A pipe holds 64 KiB (Linux's default): the re-run batch's manifest must be far larger.
PIPE_BYTES = 65536


def test_a_missing_runner_is_reinstalled_for_a_manifest_larger_than_the_pipe(project):
    """A batch whose manifest is far larger than a pipe holds (120 runs whose commands
    carry a 1200-character argument) meets a missing runner in run_batch.yml's run
    task: a python that cannot open the runner exits without reading its stdin, and the
    command module fails with a broken pipe instead of python's "can't open file"; the
    batch still installs the runner and runs. The controller has forgotten the host's
    role variables (its host cache), so the re-run takes run_batch.yml, not the one
    call (which finds a missing runner by its digest, before any pipe)."""
    from benchmatrix import layout

    text = SPEC.replace("replicates: 1", "replicates: 60").replace(
        '"value {{ word }} 1"]', '"value {{ word }} 1", "{{ \'x\' * 1200 }}"]')
    assert text.count("'x' * 1200") == 1
    spec = project.write_spec("install_case", text)
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    (installed,) = project.hostwork.glob("*/batch_runner.py")
    installed.unlink()
    layout.host_cache_path(project.root, "localhost", "workload_command").unlink()
    res = project.bmx("rerun", str(spec), "--where", "replicate > 0", "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    assert installed.is_file()
    exp = project.exp("install_case")
    assert _statuses(exp) == ["ok"] * 240
    # The premise: the re-run batch's runs alone carry over twice what a pipe holds, and
    # its run task found the runner missing, installed it and ran the batch again.
    rerun = [json.loads(p.read_text()) for p in exp.glob("runs/*/2/record.json")]
    assert len(rerun) == 120 and sum(len(json.dumps(r["workload"]["argv"])) for r in rerun) > 2 * PIPE_BYTES
    (log,) = [p for p in (exp / "logs" / "ansible").glob("localhost-b*.log") if rerun[0]["batch"] in p.name]
    tasks = dict(part.split("]", 1) for part in log.read_text().split("TASK [")[1:])
    assert not _one_call(log) and "included: " in tasks["batch_runner : Install the batch runner where it is "
                                                        "missing or stale"], log.read_text()[-3000:]
    assert "changed: [localhost]" in tasks["batch_runner : Run the batch with the runner just installed"]
