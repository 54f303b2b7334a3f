"""The wave broker (benchmatrix/execute/wave.py): batch jobs that ask together are one
ansible-playbook call, each job gets its own host's result or failure back.

Real parts: the broker on its unix socket, two job processes, ansible-runner and
ansible-playbook against two local-connection hosts. The playbook stands in for
run_known_batch.yml and run_batch.yml (the broker runs only those names): one task per
host, its result by the result channel.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from benchmatrix.execute.wave import SOCKET_ENV, WaveBroker

ROOT = Path(__file__).resolve().parents[3]

PLAYBOOK = """\
- name: A wave
  hosts: "{{ bmx_wave | default(bmx_host) }}"
  strategy: free
  gather_facts: false
  tasks:
    - name: Fail where asked
      ansible.builtin.fail:
        msg: "{{ inventory_hostname }} was told to fail"
      when: bmx_fail | bool
    - name: Say the word
      tags: [bmx_runner_start]
      ansible.builtin.set_stats:
        data: {bmx_progress: {content: "{{ word }}"}}
        per_host: true
        aggregate: false
"""

JOB = """\
import json, sys
from pathlib import Path
from benchmatrix.errors import AnsibleError
from benchmatrix.execute import wave
from benchmatrix.execute.ansible import run_playbook
host, project, fail = sys.argv[1], Path(sys.argv[2]), sys.argv[3] == "1"
playbook = sys.argv[4] if len(sys.argv) > 4 else "run_known_batch.yml"
more = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
wave.hello()
started = []
try:
    call = wave.call if wave.joins(playbook) else run_playbook
    res = call(playbook, project_dir=project / "playbooks", inventory=project / "inv.yml",
                    host=host, extravars={"bmx_host": host, "bmx_fail": fail, **more},
                    data={"word": "{{ 6 * 7 }} " + host}, log=project / f"{host}.log",
                    start_tag="bmx_runner_start", on_started=lambda: started.append(1))
    print(json.dumps({"payloads": res.payloads, "started": len(started)}))
except AnsibleError as exc:
    print(json.dumps({"error": type(exc).__name__, "host": exc.host, "text": str(exc)}))
"""


def _project(tmp_path: Path, hosts: tuple[str, ...]) -> Path:
    """A project of the stand-in playbook and an inventory of local-connection ``hosts``."""
    project = tmp_path / "project"
    (project / "playbooks").mkdir(parents=True)
    (project / "playbooks" / "run_known_batch.yml").write_text(PLAYBOOK)
    (project / "playbooks" / "ansible.cfg").write_text("[defaults]\ngathering = explicit\n")
    (project / "inv.yml").write_text("all:\n  hosts:\n" + "".join(
        f"    {h}: {{ansible_connection: local, ansible_python_interpreter: {sys.executable}}}\n" for h in hosts))
    return project


def test_jobs_that_ask_together_are_one_call_and_each_gets_its_own_host_back(tmp_path):
    project = _project(tmp_path, ("ha", "hb"))
    py = sys.executable
    with WaveBroker(project, window_s=60) as broker:
        broker.expect()  # as supervise does for each batch job Snakemake starts
        broker.expect()
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), SOCKET_ENV: broker.path}
        jobs = [subprocess.Popen([py, "-c", JOB, host, str(project), fail], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for host, fail in (("ha", "0"), ("hb", "1"))]
        out = [job.communicate(timeout=120) for job in jobs]
    got = {}
    for (stdout, stderr), host in zip(out, ("ha", "hb"), strict=True):
        assert stdout.strip(), stderr
        got[host] = json.loads(stdout)
    # ha's own payload, its user's text never templated; its start reported.
    assert got["ha"] == {"payloads": {"ha": {"bmx_progress": {"content": "{{ 6 * 7 }} ha"}}}, "started": 1}
    # hb's failure is hb's alone, named as its own call would name it.
    assert got["hb"]["error"] == "PlaybookFailedError" and got["hb"]["host"] == "hb"
    assert "hb was told to fail" in got["hb"]["text"] and "Fail where asked" in got["hb"]["text"]
    # One call: each job keeps the same log, naming both hosts.
    logs = [(project / f"{h}.log").read_text() for h in ("ha", "hb")]
    assert logs[0] == logs[1] and "[ha]" in logs[0] and "[hb]" in logs[0]


def test_without_a_broker_a_job_makes_its_own_call(tmp_path):
    project = _project(tmp_path, ("ha",))
    py = sys.executable
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), SOCKET_ENV: str(tmp_path / "no-broker")}
    res = subprocess.run([py, "-c", JOB, "ha", str(project), "0"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert json.loads(res.stdout) == {"payloads": {"ha": {"bmx_progress": {"content": "{{ 6 * 7 }} ha"}}},
                                      "started": 1}, res.stderr


def test_a_job_that_connects_before_bmx_reads_its_start_line_does_not_wait_the_window(tmp_path):
    # bmx counts a batch job as on its way when it reads the job's start line on Snakemake's
    # stream; a job can connect first (the stream is read late). Counted again then, it was
    # waited for until the window ran out: a whole window (1.5 s) on a 1-host campaign's batch.
    project = _project(tmp_path, ("ha",))
    with WaveBroker(project, window_s=60) as broker:
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), SOCKET_ENV: broker.path}
        # The job says hello, then takes a second (a batch job's spec, plan and manifest) to ask.
        slow = JOB.replace("wave.hello()\n", "wave.hello()\nimport time; time.sleep(1)\n")
        job = subprocess.Popen([sys.executable, "-c", slow, "ha", str(project), "0"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        while not broker.conns and job.poll() is None:  # the job has said hello
            time.sleep(0.01)
        broker.expect()  # its start line, read after it connected, before it asks
        try:
            stdout, stderr = job.communicate(timeout=45)  # far below the 60 s window
        except subprocess.TimeoutExpired:
            job.kill()
            raise AssertionError("the job's call waited for the job itself") from None
    assert json.loads(stdout)["payloads"] == {"ha": {"bmx_progress": {"content": "{{ 6 * 7 }} ha"}}}, stderr


MEET = """\
- name: A wave of {me}
  hosts: "{{{{ bmx_wave | default(bmx_host) }}}}"
  strategy: free
  gather_facts: false
  tasks:
    - name: Meet the other playbook's call
      ansible.builtin.shell: >-
        touch {dir}/{me}; for i in $(seq 600); do [ -e {dir}/{other} ] && exit 0; sleep 0.1; done; exit 1
      changed_when: false
    - name: Say the word
      tags: [bmx_runner_start]
      ansible.builtin.set_stats:
        data: {{bmx_progress: {{content: "{{{{ word }}}}"}}}}
        per_host: true
        aggregate: false
"""


def test_a_wave_of_two_playbooks_is_one_call_each_side_by_side(tmp_path):
    # New hosts (their first batch, run_batch.yml) and known hosts (run_known_batch.yml)
    # starting together: one call per playbook, both at once. Each playbook's task waits for
    # the other's to have started: calls one after the other would fail (after a minute).
    project = _project(tmp_path, ("ha", "hb", "hc"))
    for me, other in (("run_batch", "run_known_batch"), ("run_known_batch", "run_batch")):
        (project / "playbooks" / f"{me}.yml").write_text(MEET.format(me=me, other=other, dir=tmp_path))
    jobs_of = (("ha", "run_batch.yml"), ("hb", "run_batch.yml"), ("hc", "run_known_batch.yml"))
    with WaveBroker(project, window_s=60) as broker:
        for _ in jobs_of:
            broker.expect()
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), SOCKET_ENV: broker.path}
        jobs = [subprocess.Popen([sys.executable, "-c", JOB, host, str(project), "0", playbook], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for host, playbook in jobs_of]
        out = [job.communicate(timeout=180) for job in jobs]
    for (stdout, stderr), (host, _) in zip(out, jobs_of, strict=True):
        assert json.loads(stdout or "{}").get("payloads") == {
            host: {"bmx_progress": {"content": "{{ 6 * 7 }} " + host}}}, stdout + stderr
    logs = {h: (project / f"{h}.log").read_text() for h in ("ha", "hb", "hc")}
    # The two new hosts were one call; the known host's was the other.
    assert logs["ha"] == logs["hb"] and "[ha]" in logs["ha"] and "[hb]" in logs["ha"]
    assert "A wave of run_batch" in logs["ha"] and "[hc]" not in logs["ha"]
    assert "A wave of run_known_batch" in logs["hc"] and "[ha]" not in logs["hc"]


FIRST_PLAY = """\
- name: The new hosts first
  hosts: "{{ bmx_new_hosts | default('!all') }}"
  gather_facts: false
  tasks:
    - name: Mark the new host
      ansible.builtin.set_fact:
        word: "new {{ inventory_hostname }}"
"""


def _known_batch_jobs(project: Path, more: dict[str, dict[str, str]]) -> tuple[dict[str, str | None], dict]:
    """One job a host of ``more`` (its extra variables), asking run_known_batch.yml
    together: each host's word, and each job's output."""
    with WaveBroker(project, window_s=60) as broker:
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), SOCKET_ENV: broker.path}
        jobs = {}
        for host, extra in more.items():
            broker.expect()
            jobs[host] = subprocess.Popen([sys.executable, "-c", JOB, host, str(project), "0", "run_known_batch.yml",
                                           json.dumps(extra)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True)
        out = {host: job.communicate(timeout=120) for host, job in jobs.items()}
    words = {host: json.loads(stdout or "{}").get("payloads", {}).get(host, {}).get("bmx_progress", {}).get("content")
             for host, (stdout, _) in out.items()}
    return words, out


def test_a_play_for_the_new_hosts_of_a_wave_runs_on_those_alone(tmp_path):
    # run_known_batch.yml's first play is for the hosts new to the controller: each job
    # names its own host (bmx_new_hosts), the wave's call names every such host of the wave.
    project = _project(tmp_path, ("ha", "hb", "hc"))
    (project / "playbooks" / "run_known_batch.yml").write_text(FIRST_PLAY + PLAYBOOK)
    words, out = _known_batch_jobs(project, {h: {"bmx_new_hosts": h} if h != "hb" else {} for h in ("ha", "hb", "hc")})
    assert words == {"ha": "new ha", "hb": "{{ 6 * 7 }} hb", "hc": "new hc"}, out
    logs = {h: (project / f"{h}.log").read_text() for h in ("ha", "hb", "hc")}
    assert logs["ha"] == logs["hb"] == logs["hc"]  # one call


IMPORT_PLAY = """\
- name: A wave of one role's hosts
  hosts: "{{ bmx_wave | default(bmx_host) }}"
  strategy: free
  gather_facts: false
  tasks:
    - name: Import the role the call names
      ansible.builtin.import_role:
        name: "{{ bmx_workload_role }}"
        tasks_from: ensure
    - name: Say the word
      ansible.builtin.set_stats:
        data: {bmx_progress: {content: "{{ role_word }} {{ inventory_hostname }}"}}
        per_host: true
        aggregate: false
"""


def test_a_wave_passes_the_role_its_playbook_imports_as_an_extra_variable(tmp_path):
    # run_known_batch.yml imports the workload role's ensure tasks statically (an include
    # costs a worker fork per host and batch): the role's name must be an extra variable
    # when the playbook is read, and a wave is one call per role.
    project = _project(tmp_path, ("ha", "hb", "hc"))
    (project / "playbooks" / "run_known_batch.yml").write_text(IMPORT_PLAY)
    for role in ("ra", "rb"):
        (project / "playbooks" / "roles" / role / "tasks").mkdir(parents=True)
        (project / "playbooks" / "roles" / role / "tasks" / "ensure.yml").write_text(
            f"- name: Mark the role\n  ansible.builtin.set_fact:\n    role_word: {role}\n")
    roles = {"ha": "ra", "hb": "ra", "hc": "rb"}
    words, out = _known_batch_jobs(project, {h: {"bmx_workload_role": role} for h, role in roles.items()})
    assert words == {"ha": "ra ha", "hb": "ra hb", "hc": "rb hc"}, out
    logs = {h: (project / f"{h}.log").read_text() for h in roles}
    assert logs["ha"] == logs["hb"] and "[hc]" not in logs["ha"]  # one call per role
    assert "[ha]" not in logs["hc"]


def test_the_broker_refuses_a_playbook_it_does_not_run(tmp_path):
    project = _project(tmp_path, ("ha",))
    with WaveBroker(project, window_s=60) as broker:
        broker.expect()
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), SOCKET_ENV: broker.path}
        # A job that sends a request for another playbook (joins() sends only the wave's).
        job = JOB.replace("call = wave.call if wave.joins(playbook) else run_playbook", "call = wave.call")
        res = subprocess.run([sys.executable, "-c", job, "ha", str(project), "0", "restore_host.yml"], env=env,
                             capture_output=True, text=True, timeout=60)
    got = json.loads(res.stdout)
    assert got["error"] == "AnsibleError" and "runs only run_known_batch.yml, run_batch.yml" in got["text"], got


def test_jobs_that_ask_one_after_another_under_load_are_still_one_wave(tmp_path):
    # On a loaded controller the batch jobs of one wave reach their requests seconds apart
    # (16 jobs importing on 2 cores). Each request is within the window of the one before:
    # one call. (A window counted from the first request split 16 new hosts into 8 calls.)
    hosts = ("ha", "hb", "hc", "hd")
    project = _project(tmp_path, hosts)
    with WaveBroker(project, window_s=5) as broker:
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), SOCKET_ENV: broker.path}
        jobs = []
        t0 = time.time() + 1  # on a shared clock: a job that starts slowly asks closer to the next
        for i, host in enumerate(hosts):
            broker.expect()
            # Every job says hello as it starts, then asks 2 s after the one before it.
            slow = JOB.replace("wave.hello()\n", "wave.hello()\nimport time\n"
                                                 f"time.sleep(max(0.0, {t0 + 2 * i} - time.time()))\n")
            jobs.append(subprocess.Popen([sys.executable, "-c", slow, host, str(project), "0"], env=env,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        out = [job.communicate(timeout=180) for job in jobs]
    for (stdout, stderr), host in zip(out, hosts, strict=True):
        assert json.loads(stdout or "{}").get("payloads") == {
            host: {"bmx_progress": {"content": "{{ 6 * 7 }} " + host}}}, stdout + stderr
    logs = {(project / f"{h}.log").read_text() for h in hosts}
    assert len(logs) == 1 and all(f"[{h}]" in next(iter(logs)) for h in hosts)


RENEW_JOB = """\
import json, sys, time
from pathlib import Path
from benchmatrix.execute import wave
host, project, at = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])
wave.hello()  # the batch job's own connection, on its way to its batch call
time.sleep(max(0.0, at - time.time()))  # a time on a shared clock
res = wave.renew(project_dir=project / "playbooks", inventory=project / "inv.yml", host=host,
                 extravars={"bmx_host": host, "bmx_fail": False, "word": "renewed " + host},
                 log=project / f"lease-{host}.log",
                 timeout=60, max_wait=3)
print(json.dumps(res.payloads))
"""


def test_lease_renewals_of_hosts_running_together_are_one_call(tmp_path):
    # Each running batch renews its lease every 20 s: on 16 hosts, 16 ansible-playbooks every
    # 20 s (more than a core of a 2-core controller). Renewals within their longest wait of
    # each other go as one call, beside the batch calls of the same jobs (still to come here).
    hosts = ("ha", "hb")
    project = _project(tmp_path, hosts)
    (project / "playbooks" / "renew_lease.yml").write_text(PLAYBOOK)
    with WaveBroker(project, window_s=60) as broker:
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), SOCKET_ENV: broker.path}
        jobs = []
        t0 = time.time() + 1
        for i, host in enumerate(hosts):
            broker.expect()
            jobs.append(subprocess.Popen([sys.executable, "-c", RENEW_JOB, host, str(project), str(t0 + i)], env=env,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        out = [job.communicate(timeout=120) for job in jobs]
        # The jobs said hello and never asked for their batch call: no batch wave waited on them
        # to run the renewals.
    for (stdout, stderr), host in zip(out, hosts, strict=True):
        assert json.loads(stdout or "{}") == {host: {"bmx_progress": {"content": "renewed " + host}}}, stdout + stderr
    logs = {(project / f"lease-{h}.log").read_text() for h in hosts}
    assert len(logs) == 1 and "[ha]" in next(iter(logs)) and "[hb]" in next(iter(logs))


def test_without_a_broker_a_renewal_is_left_to_the_caller(tmp_path, monkeypatch):
    from benchmatrix.execute import wave

    monkeypatch.setenv(SOCKET_ENV, str(tmp_path / "no-broker"))
    assert wave.renew(project_dir=tmp_path, inventory=tmp_path / "inv.yml", host="ha", extravars={},
                      log=tmp_path / "log", timeout=5, max_wait=1) is None


def test_a_renewal_withdrawn_before_its_wave_starts_costs_no_call(tmp_path, monkeypatch):
    # A batch that ends while its renewal waits for the others' (at most 5 s) withdraws it:
    # 16 batches ending together renewed their leases in a whole call of their own, beside
    # the campaign's collect job. A renewal that waits alone here would start after 30 s.
    import threading

    from benchmatrix.errors import AnsibleError
    from benchmatrix.execute import wave

    project = _project(tmp_path, ("ha",))
    (project / "playbooks" / "renew_lease.yml").write_text(PLAYBOOK)
    withdraw = threading.Event()
    with WaveBroker(project, window_s=60) as broker:
        monkeypatch.setenv(SOCKET_ENV, broker.path)
        threading.Timer(0.5, withdraw.set).start()
        t0 = time.monotonic()
        try:
            wave.renew(project_dir=project / "playbooks", inventory=project / "inv.yml", host="ha",
                       extravars={"bmx_host": "ha", "bmx_fail": False, "word": "w"}, log=project / "lease-ha.log",
                       timeout=60, max_wait=30, withdraw=withdraw)
        except AnsibleError as exc:
            assert "the lease renewal was withdrawn (the batch ended)" in str(exc) and exc.host == "ha"
        else:
            raise AssertionError("a withdrawn renewal returned a result")
        assert time.monotonic() - t0 < 10
        deadline = time.monotonic() + 5
        while broker.conns and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not broker.conns  # the broker let go of it: no wave will run it
    assert not (project / "lease-ha.log").exists()


def test_a_wave_reads_its_events_once_whatever_its_hosts(tmp_path, monkeypatch):
    # ansible-runner parses every event file of the call on each look at runner.events: a
    # look per host made a wave of 16 hosts parse the 16 hosts' archives 16 times (about
    # 3 CPU-s of bmx run's). Real ansible-runner and ansible-playbook; the runner's
    # ``events`` counted.
    import ansible_runner.runner

    from benchmatrix.execute import wave

    project = _project(tmp_path, ("ha", "hb", "hc"))
    looks = []
    real = ansible_runner.runner.Runner.events

    def counted(self):
        looks.append(1)
        return real.fget(self)

    monkeypatch.setattr(ansible_runner.runner.Runner, "events", property(counted))
    calls = [wave.WaveCall(host=h, extravars={"bmx_host": h, "bmx_fail": False}, data={"word": h},
                           log=project / f"{h}.log") for h in ("ha", "hb", "hc")]
    outcomes = wave.run_wave("run_known_batch.yml", project_dir=project / "playbooks", inventory=project / "inv.yml",
                             calls=calls)
    assert {h: o.result.payloads for h, o in outcomes.items()} == {
        h: {h: {"bmx_progress": {"content": h}}} for h in ("ha", "hb", "hc")}
    assert len(looks) == 1
