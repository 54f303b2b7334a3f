"""A vault-encrypted inventory variable used by a workload never lands in results/.

Real ansible-vault, real Ansible, real batch runner: the secret reaches the workload
(its length is the run's metric) and no file under results/ contains it. On the host
(issue 13.10), an unprivileged user cannot read the batch manifest that carried it or
the run directories, and nothing of the campaign on the host holds it afterwards. A
knob's password (SQL Server) reaches its client and no Ansible output, even at -vvvv.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SPEC = """\
name: secret_case
inventory: config/inventory/test.yml
factors:
  k: [1, 2]
workload:
  role: workload_command
  vars:
    argv: [python3, -c, "{script}", "{{{{ k }}}}"]
  metrics:
    token_len: {{regex: 'len=(?P<value>[0-9]+)', unit: chars}}
    nobody_manifest_rc: {{regex: 'manifest_rc=(?P<value>[0-9]+)', unit: rc}}
    nobody_runs_rc: {{regex: 'runs_rc=(?P<value>[0-9]+)', unit: rc}}
replicates: 1
"""

# The workload, on the host while the batch runs: its parent is the runner, started as
# `python batch_runner.py -` with the manifest on its stdin; an unprivileged user tries
# to read that stdin and list the runs directory (its own stdout is the file
# runs/RUN_ID.ATTEMPT.stdout).
PROBE = ("import os, subprocess, sys; "
         "manifest = '/proc/%d/fd/0' % os.getppid(); "
         "runs = os.path.dirname(os.readlink('/proc/self/fd/1')); "
         "nobody = lambda *a: subprocess.run(['runuser', '-u', 'nobody', '--', *a], capture_output=True).returncode; "
         "print('len=%d k=%s manifest_rc=%d runs_rc=%d' % (len(os.environ['BMX_TOKEN']), sys.argv[1], "
         "nobody('cat', manifest), nobody('ls', runs)))")


@pytest.fixture
def host_root():
    """A batch_runner_root as on a real host: under /var/tmp, every user may reach it."""
    root = Path("/var/tmp") / f"bmx-test-{uuid.uuid4().hex[:8]}"
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_vault_variable_used_by_a_workload_is_absent_from_results(project, tmp_path, host_root):
    if shutil.which("runuser") is None or os.geteuid() != 0:
        pytest.skip("needs root and runuser to try the host's files as the user nobody")
    secret = "s3cr3t-" + uuid.uuid4().hex
    password = tmp_path / "vault-pass"
    password.write_text("benchmatrix-test-vault\n")
    enc = subprocess.run([str(Path(sys.executable).parent / "ansible-vault"), "encrypt_string",
                          "--vault-password-file", str(password), "--name", "vault_token", secret],
                         capture_output=True, text=True, check=True).stdout
    assert secret not in enc
    indented = "".join(f"      {line}\n" for line in enc.strip().splitlines())
    project.inventory.write_text(project.inventory.read_text().replace(str(project.hostwork), str(host_root))
                                 + indented
                                 + "      workload_command_env: {BMX_TOKEN: \"{{ vault_token }}\"}\n")
    assert secret not in project.inventory.read_text()
    spec = project.write_spec("secret_case", SPEC.format(script=PROBE))
    env = project.env()
    env["ANSIBLE_VAULT_PASSWORD_FILE"] = str(password)
    res = subprocess.run([sys.executable, "-m", "benchmatrix.cli", "run", str(spec), "--cores", "1"],
                         cwd=project.root, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    exp = project.exp("secret_case")
    import json
    recs = [json.loads(p.read_text()) for p in exp.glob("runs/*/*/record.json")]
    assert len(recs) == 2
    # The workload really saw the decrypted secret ...
    assert all(r["metrics"]["token_len"]["value"] == len(secret) for r in recs)
    # ... the user nobody could read neither the manifest nor the run directories ...
    assert all(r["metrics"]["nobody_manifest_rc"]["value"] != 0 for r in recs), recs[0]["metrics"]
    assert all(r["metrics"]["nobody_runs_rc"]["value"] != 0 for r in recs), recs[0]["metrics"]
    (workdir,) = [p for p in host_root.iterdir() if p.is_dir()]
    assert stat.S_IMODE(workdir.stat().st_mode) == 0o700
    # ... and once the results are back, the host keeps no manifest and no copy of the secret.
    assert list(workdir.glob("batches/*.json")) == []
    host_leaks = [str(p) for p in host_root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    assert host_leaks == []
    # ... and no file the campaign kept has it.
    leaks = [str(p) for p in exp.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    assert leaks == []
    assert secret not in res.stdout + res.stderr
    # A re-run on the host the campaign knows is one module call (run_known_batch.yml,
    # issue 34) whose arguments and result are hidden: the host's environment is merged
    # on the host, the secret reaches the workload and still lands in no file.
    res = subprocess.run([sys.executable, "-m", "benchmatrix.cli", "rerun", str(spec), "--where", "k == 2",
                          "--cores", "1"], cwd=project.root, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    (again,) = [json.loads(p.read_text()) for p in exp.glob("runs/*/2/record.json")]
    assert again["status"] == "ok" and again["metrics"]["token_len"]["value"] == len(secret)
    logs = [p.read_text() for p in (exp / "logs" / "ansible").glob("localhost-b*.log")]
    assert sum("PLAY [Run one batch of benchmark runs in one call]" in text for text in logs) == 1
    assert [str(p) for p in list(exp.rglob("*")) + list(host_root.rglob("*"))
            if p.is_file() and secret.encode() in p.read_bytes()] == []
    assert secret not in res.stdout + res.stderr


def test_levels_are_data_never_templates(project, tmp_path):
    # A level that looks like Jinja must reach the workload as text: Ansible gets it
    # tagged !unsafe, so nothing on the controller evaluates it.
    marker = tmp_path / "evaluated"
    spec = project.write_spec("levels_as_data", f"""\
name: levels_as_data
inventory: config/inventory/test.yml
factors:
  word: ["{{{{ lookup('pipe', 'touch {marker}') }}}}", "{{# not a comment #}}"]
workload:
  role: workload_command
  vars:
    argv: [printf, "%s\\\\n", "{{{{ word }}}}"]
replicates: 1
""")
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    assert not marker.exists(), "a factor level was evaluated as a template"
    outs = sorted(p.read_text() for p in project.exp("levels_as_data").glob("runs/*/1/stdout"))
    assert outs == sorted([f"{{{{ lookup('pipe', 'touch {marker}') }}}}\n", "{# not a comment #}\n"])


def test_a_knob_password_reaches_the_client_and_no_ansible_output(tmp_path):
    """The SQL Server password of a knob (an inventory variable of the host) travels to
    the bmx_knob module in its arguments file: the client gets it in its environment,
    and Ansible prints it nowhere, not even at -vvvv (the module returns no
    ``invocation``). No SQL Server can exist here: the stand-in sqlcmd of the backend's
    unit test plays it and logs the password it was given."""
    import json

    import yaml
    from unit.host.test_knob_backend_mssql import FakeServer

    root = Path(__file__).resolve().parents[2]
    server = FakeServer(tmp_path, **{"lightweight pooling": {"value": 0, "value_in_use": 0, "is_dynamic": 1}})
    secret = f"S3cret-{uuid.uuid4().hex[:12]}"
    knob = server.knob(1)
    del knob["vars"]["knob_mssql_setting_password"]
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "knob_mssql_setting_password": secret}}}}))
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{
        "name": "Set one knob", "hosts": "localhost", "gather_facts": False,
        "tasks": [{"name": "The knob loop",
                   "ansible.builtin.include_tasks": str(root / "playbooks/tasks/knobs.yml")}]}]))
    # The play lives outside playbooks/: the module, the roles and the filter tasks/knobs.yml
    # uses (playbooks/filter_plugins) are found through Ansible's settings.
    env = dict(os.environ, ANSIBLE_LIBRARY=str(root / "playbooks/library"),
               ANSIBLE_FILTER_PLUGINS=str(root / "playbooks/filter_plugins"),
               ANSIBLE_ROLES_PATH=str(root / "playbooks/roles"), ANSIBLE_NOCOLOR="1")
    res = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-vvvv", "-i",
                          str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml"),
                          "-e", json.dumps({"bmx_knobs": [knob]})],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    state = server.read()
    assert state["options"]["lightweight pooling"]["value"] == 1  # the knob was set
    assert state["calls"] and {c["password"] for c in state["calls"]} == {secret}
    assert secret not in res.stdout + res.stderr
