"""Fast tests of the workload roles' filters (argv building) and of the batch runner's
counters, inputs and CPU affinity. The roles run for real in tests/e2e/test_workloads_e2e.py."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import host_layout
import pytest
from ansible.errors import AnsibleError

from benchmatrix.host import batch_runner
from benchmatrix.workloads import load_counters
from benchmatrix.workloads.cpulist import manifest_cpus, parse_cpu_list

ROLES = Path(__file__).resolve().parents[3] / "playbooks" / "roles"


def plugin(role: str) -> SimpleNamespace:
    """The filters of a role's filter plugin, with their commands decoded (:func:`_decoded`)."""
    return SimpleNamespace(**{name: _decoded(f) for name, f in raw_plugin(role).items()})


def _decoded(func):
    """``func`` with its commands decoded: the builders hand them to the batch runner as
    JSON text (test_runs_travel_as_json_text checks that form)."""
    def call(*args, **kwargs):
        out = func(*args, **kwargs)
        if isinstance(out, str) and out.startswith("["):
            return json.loads(out)
        if isinstance(out, dict) and isinstance(out.get("commands"), str):
            return {**out, "commands": json.loads(out["commands"])}
        return out
    return call


def raw_plugin(role: str):
    """The filters of a role's filter plugin, as Ansible gets them (``FilterModule().filters()``)."""
    path = ROLES / role / "filter_plugins" / f"{role}.py"
    spec = importlib.util.spec_from_file_location(f"bmx_test_{role}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FilterModule().filters()


def test_runs_travel_as_json_text():
    """run_batch.yml passes a batch's runs as one JSON text and gets the commands back as
    one: Ansible then never checks or templates the runs one by one (issue 15 row a)."""
    runs = [run("r1", argv=["echo", "{{ not a template }}", 1]), run("r2", argv=["true"], cpus="0")]
    cmd = raw_plugin("workload_command")["workload_command_argv"]
    text = cmd(json.dumps(runs))
    assert isinstance(text, str)
    assert json.loads(text) == json.loads(cmd(runs))  # a list is still taken as it is
    assert [c["argv"] for c in json.loads(text)] == [["echo", "{{ not a template }}", "1"], ["true"]]
    fio = raw_plugin("workload_fio")["workload_fio_plan"](json.dumps([run("r1", bs="4k")]), "fio", "f.dat", "/s", ".")
    assert isinstance(fio["commands"], str) and fio["files"] == []
    assert json.loads(fio["commands"])[0]["argv"][-1] == "--bs=4k"
    sysbench = raw_plugin("workload_sysbench")
    assert sysbench["workload_sysbench_needs"](json.dumps([run("r1", test="cpu")]), "/s") == {"fileio": [], "db": None}
    assert raw_plugin("workload_pgbench")["workload_pgbench_scales"](json.dumps([run("r1", scale=3)]), 1) == [3]
    with pytest.raises(AnsibleError, match=r"workload_command_argv: the batch's runs are not JSON"):
        cmd("[{")


def run(run_id="r1", **variables):
    return {"run_id": run_id, "attempt": 1, "seq": 1, "timeout": 30, "before_run": [], "vars": variables,
            "factors": {"users": 4}, "collect": ["cpu"]}


CONN = {"host": "/srv/pg/socket", "port": 55432, "user": "postgres", "database": "bench",
        "pidfile": "/srv/pg/data/postmaster.pid"}


# --- workload_command ----------------------------------------------------------------


def test_command_argv_is_passed_as_data():
    cmd = plugin("workload_command")
    out = cmd.workload_command_argv([run(argv=["sh", "-c", "echo $HOME; rm -rf /", 4, True],
                                         env={"LC_ALL": "C"}, cwd="/tmp", cpus="0-1,3")])
    assert out[0]["argv"] == ["sh", "-c", "echo $HOME; rm -rf /", "4", "true"]
    # The controller expands the CPU list: the runner on the host gets the CPU numbers.
    assert out[0]["env"] == {"LC_ALL": "C"} and out[0]["cwd"] == "/tmp" and out[0]["cpus"] == [0, 1, 3]
    assert "vars" not in out[0] and "factors" not in out[0] and out[0]["collect"] == ["cpu"]


@pytest.mark.parametrize("variables,message", [
    ({}, "vars.argv must be a non-empty list"),
    ({"argv": "pgbench -c 4"}, "vars.argv must be a non-empty list"),
    ({"argv": ["x", {"a": 1}]}, "argv[1] must be a string or number"),
    ({"argv": ["x"], "shell": True}, "unknown variable(s) shell"),
    ({"argv": ["x"], "env": {"A B": 1}}, "'A B' is not an environment variable name"),
    ({"argv": ["x"], "cpus": "0-x"}, "run r1: cpus: '0-x' is not a CPU list"),
    ({"argv": ["x"], "cpus": ","}, "run r1: cpus: ',' names no CPU"),
])
def test_command_refuses(variables, message):
    with pytest.raises(AnsibleError, match=re.escape(message)):
        plugin("workload_command").workload_command_argv([run(**variables)])


# --- workload_fio job files ------------------------------------------------------------


def test_fio_job_file_is_rendered_once_per_content(tmp_path):
    fio = plugin("workload_fio")
    (tmp_path / "job.fio").write_text("[global]\nbs={{ bs }}\n[scan]\nrw=read\nnumjobs={{ users }}\n")
    runs = [run("r1", job_file="job.fio", bs="8k"), run("r2", job_file="job.fio", bs="8k"),
            run("r3", job_file=str(tmp_path / "job.fio"), bs="64k"), run("r4", rw="read", bs="4k")]
    out = fio.workload_fio_plan(runs, "fio", "/scratch/f.dat", "/scratch", str(tmp_path))
    assert len(out["files"]) == 2
    assert sorted(f["content"] for f in out["files"]) == [
        "[global]\nbs=64k\n[scan]\nrw=read\nnumjobs=4\n", "[global]\nbs=8k\n[scan]\nrw=read\nnumjobs=4\n"]
    c1, c2, c3, c4 = out["commands"]
    assert c1["argv"][:3] == ["fio", "--output-format=json", "--eta=never"] and c1["argv"] == c2["argv"]
    assert c1["argv"][3].startswith("/scratch/jobs/job-") and c1["cwd"] == "/scratch"
    assert c1["inputs"] == {"job.fio": c1["argv"][3]} and c3["argv"][3] != c1["argv"][3]
    assert c4["argv"][-2:] == ["--rw=read", "--bs=4k"] and "inputs" not in c4


def test_fio_job_file_refuses_a_value_that_would_add_a_line(tmp_path):
    (tmp_path / "job.fio").write_text("[scan]\nbs={{ bs }}\n")
    with pytest.raises(AnsibleError, match="line break"):
        plugin("workload_fio").workload_fio_plan([run(job_file="job.fio", bs="4k\nexec_prerun=touch /x")],
                                                 "fio", "f", "/s", str(tmp_path))
    with pytest.raises(AnsibleError, match="cannot read job file"):
        plugin("workload_fio").workload_fio_plan([run(job_file="missing.fio")], "fio", "f", "/s", str(tmp_path))


def test_job_files_and_scripts_render_in_the_bounded_sandbox(tmp_path):
    # The same sandbox as the spec's workload variables: bounded in size, no macros.
    (tmp_path / "big.fio").write_text("[scan]\nbs={{ 'x' * 10**8 }}\n")
    with pytest.raises(AnsibleError, match="job file big.fio: template error: .*repetition"):
        plugin("workload_fio").workload_fio_plan([run(job_file="big.fio")], "fio", "f", "/s", str(tmp_path))
    script = {"name": "m", "text": "{% macro q() %}SELECT 1;{% endmacro %}{{ q() }}"}
    with pytest.raises(AnsibleError, match=r"scripts\[1\] \(m\): template error: macros are not allowed"):
        plugin("workload_pgbench").workload_pgbench_plan([run(scripts=[script])], CONN, "pgbench", "/w", "/p", {}, 1)


# --- workload_pgbench ------------------------------------------------------------------


def test_pgbench_builtin_argv():
    pg = plugin("workload_pgbench")
    out = pg.workload_pgbench_plan([run(builtin="select-only", clients=8, threads=2, duration=5)],
                                   CONN, "/usr/lib/postgresql/15/bin/pgbench", "/w", "/p", {}, 1)
    assert out["files"] == []
    assert out["commands"][0]["argv"] == [
        "/usr/lib/postgresql/15/bin/pgbench", "--client", "8", "--jobs", "2", "--time", "5", "--progress", "1",
        "--report-per-command", "--builtin", "select-only", "--host", "/srv/pg/socket", "--port", "55432",
        "--username", "postgres", "--", "bench"]
    assert "cpus" not in out["commands"][0]
    # The provisioned server follows whatever CPUs the run gets (none given: all of them).
    assert out["commands"][0]["pin_pidfiles"] == [CONN["pidfile"]]


def test_pgbench_think_time_scripts_and_affinity():
    pg = plugin("workload_pgbench")
    texts = {"select-only": "\\set aid random(1, 100000 * :scale)\nSELECT 1;\n"}
    runs = [run("r1", builtin="select-only@3", think_ms=20, clients=2, cpus="0"),
            run("r2", scripts=[{"name": "range", "text": "SELECT {{ users }};", "weight": 1}], transactions=10,
                think_ms=5, vacuum=True)]
    out = pg.workload_pgbench_plan(runs, CONN, "pgbench", "/w", "/p", texts, 0)
    c1, c2 = out["commands"]
    assert "--file" in c1["argv"] and "select-only.sql@3" in c1["argv"] and "--progress" not in c1["argv"]
    assert c1["cpus"] == [0] and c2["cpus"] == "all"  # once one run pins the server, every run sets it
    assert c1["pin_pidfiles"] == [CONN["pidfile"]]
    files = {f["path"].rsplit("/", 1)[1]: f["content"] for f in out["files"]}
    assert files["select-only.sql"].endswith("SELECT 1;\n\\sleep 20 ms\n")
    assert files["range.sql"] == "SELECT 4;\n\\sleep 5 ms\n"
    assert c2["argv"][c2["argv"].index("--transactions") + 1] == "10" and "--no-vacuum" not in c2["argv"]
    assert c2["inputs"] == {"range.sql": c2["cwd"] + "/range.sql"}
    assert pg.workload_pgbench_builtins(runs) == ["select-only"]
    assert pg.workload_pgbench_scales(runs + [run("r3", scale=10)], 1) == [1, 10]


@pytest.mark.parametrize("variables,message", [
    ({"builtin": "tpcc"}, "builtin 'tpcc' is not one of"),
    ({"clients": 0}, "'clients' must be a number >= 1"),
    ({"duration": 5, "transactions": 3}, "either duration or transactions"),
    ({"options": {"host": "evil"}}, "'host' is set by benchmatrix"),
    ({"scripts": [{"text": "{{ v }}"}], "define": {"v": 1}}, "template error"),
    ({"scripts": [{"text": "x", "file": "y"}]}, "exactly one of text and file"),
    ({"clients": 1, "user": "x"}, "unknown variable"),
])
def test_pgbench_refuses(variables, message):
    with pytest.raises(AnsibleError, match=message):
        plugin("workload_pgbench").workload_pgbench_plan([run(**variables)], CONN, "pgbench", "/w", "/p", {}, 1)


def test_pgbench_template_value_cannot_smuggle_a_meta_command():
    r = run(scripts=[{"text": "SELECT 1;\n{{ stmt }}"}])
    r["factors"] = {"stmt": "\\shell touch /tmp/pwned"}
    with pytest.raises(AnsibleError, match="backslash"):
        plugin("workload_pgbench").workload_pgbench_plan([r], CONN, "pgbench", "/w", "/p", {}, 1)


# --- workload_sysbench -----------------------------------------------------------------


def test_sysbench_argv_and_needs():
    sb = plugin("workload_sysbench")
    runs = [run("r1", test="oltp_read_only", threads=4, time=2, options={"tables": 2, "table_size": 1000}),
            run("r2", test="fileio", options={"file-total-size": "8M", "file_num": 2, "file-test-mode": "rndrd"}),
            run("r3", test="cpu", percentile=99)]
    needs = sb.workload_sysbench_needs(runs, "/sb")
    assert needs["db"] == {"tables": "2", "table_size": "1000", "test": "oltp_read_only"}
    assert [(f["size"], f["num"]) for f in needs["fileio"]] == [("8M", "2")]
    c1, c2, c3 = sb.workload_sysbench_plan(runs, "sysbench", "/sb", CONN)
    assert c1["argv"] == ["sysbench", "oltp_read_only", "--threads=4", "--time=2", "--table-size=1000", "--tables=2",
                          "--db-driver=pgsql", "--pgsql-host=/srv/pg/socket", "--pgsql-port=55432",
                          "--pgsql-user=postgres", "--pgsql-db=bench", "run"]
    assert c2["cwd"] == needs["fileio"][0]["dir"] and c2["argv"][-1] == "run"
    assert c3["argv"] == ["sysbench", "cpu", "--threads=1", "--time=10", "--percentile=99", "run"]


def test_sysbench_refuses_mixed_table_sets_and_owned_options():
    sb = plugin("workload_sysbench")
    with pytest.raises(AnsibleError, match="holds one table set at a time"):
        sb.workload_sysbench_needs([run("a", test="oltp_read_only", options={"tables": 1}),
                                    run("b", test="oltp_read_only", options={"tables": 2})], "/sb")
    with pytest.raises(AnsibleError, match="'pgsql-host' is set by benchmatrix"):
        sb.workload_sysbench_plan([run(test="oltp_read_only", options={"pgsql_host": "x"})], "sysbench", "/sb", CONN)
    with pytest.raises(AnsibleError, match="test 'tpcc' is not one of"):
        sb.workload_sysbench_needs([run(test="tpcc")], "/sb")


# --- service_postgresql ----------------------------------------------------------------


def test_postgresql_conf_quotes_every_value():
    sp = plugin("service_postgresql")
    text = sp.service_postgresql_conf({"work_mem": "it's", "jit": False, "shared_buffers": "64MB"}, 55432, "",
                                      "/srv/pg/socket")
    assert text.splitlines()[1:] == ["port = 55432", "listen_addresses = ''",
                                     "unix_socket_directories = '/srv/pg/socket'", "jit = 'off'",
                                     "shared_buffers = '64MB'", "work_mem = 'it''s'"]
    for bad, message in [({"port": 1}, "role's own variable"), ({"a b": 1}, "not a PostgreSQL parameter"),
                         ({"work_mem": "1\nfsync = off"}, "line break")]:
        with pytest.raises(AnsibleError, match=message):
            sp.service_postgresql_conf(bad, 1, "", "/s")
    assert sp.service_postgresql_bindir(["/usr/lib/postgresql/9.6", "/usr/lib/postgresql/15",
                                         "/usr/lib/postgresql/13"]) == "/usr/lib/postgresql/15/bin"
    with pytest.raises(AnsibleError, match="PostgreSQL 16 is not installed"):
        sp.service_postgresql_bindir(["/usr/lib/postgresql/15"], "16")


# --- batch runner: counters, inputs, affinity ---------------------------------------


def test_cpu_lists_are_expanded_on_the_controller():
    assert parse_cpu_list("0-2,5") == [0, 1, 2, 5] and parse_cpu_list(" 3 , 1 ") == [1, 3]
    assert parse_cpu_list("") == [] and parse_cpu_list(None) == []
    assert manifest_cpus("0-2,5") == [0, 1, 2, 5] and manifest_cpus([1, "3-4"]) == [1, 3, 4]
    assert manifest_cpus(2) == [2] and manifest_cpus("all") == "all"
    for bad in ("x", "3-1", "-1", "1-", [True], [1.5], {"a": 1}):
        with pytest.raises(ValueError, match="is not a CPU list"):
            manifest_cpus(bad)
    for empty in (",", "", []):
        with pytest.raises(ValueError, match="names no CPU"):
            manifest_cpus(empty)


def test_runner_takes_explicit_cpu_numbers_only():
    allowed = sorted(os.sched_getaffinity(0))
    assert batch_runner.run_cpus([3, 1, 3]) == [1, 3]
    assert batch_runner.run_cpus("all") == allowed and batch_runner.run_cpus(None) == allowed
    for bad in ("0-1", "0", [], ["1"], [-1], [True], 1):
        with pytest.raises(ValueError, match="list of CPU numbers"):
            batch_runner.run_cpus(bad)


def test_runner_collects_counters_copies_inputs_and_pins(tmp_path):
    cpu0 = min(os.sched_getaffinity(0))
    (tmp_path / "job.txt").write_text("the job\n")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    (tmp_path / "server.pid").write_text(f"{sleeper.pid}\n/var/lib/whatever\n")
    probe = ("import os, time; t = time.time()\nwhile time.time() - t < 1.2: pass\n"
             "print(sorted(os.sched_getaffinity(0)))")
    manifest = {"experiment": "t", "batch": "b1", "workdir": str(tmp_path / "wd"),
                "archive": str(tmp_path / "wd" / "b1.tar.gz"),
                "runs": [{"run_id": "r1", "attempt": 1, "seq": 1, "timeout": 20, "before_run": [],
                          "argv": [sys.executable, "-c", probe], "collect": ["cpu", "disk"],
                          "collect_interval_s": 0.5, "inputs": {"job.fio": str(tmp_path / "job.txt")},
                          "cpus": [cpu0], "pin_pidfiles": [str(tmp_path / "server.pid")]},
                         {"run_id": "r2", "attempt": 1, "seq": 2, "timeout": 20, "before_run": [],
                          "argv": ["true"], "cpus": [4096]},
                         {"run_id": "r3", "attempt": 1, "seq": 3, "timeout": 20, "before_run": [],
                          "argv": ["true"], "inputs": {"../x": str(tmp_path / "job.txt")}}]}
    (tmp_path / "m.json").write_text(json.dumps(manifest))
    try:
        done = subprocess.run([sys.executable, batch_runner.__file__, str(tmp_path / "m.json")],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert os.sched_getaffinity(sleeper.pid) == {cpu0}
    finally:
        sleeper.kill()
        sleeper.wait()
    r1 = host_layout.run_dir(tmp_path / "wd", "r1")
    result = json.loads((r1 / "result.json").read_text())
    assert (r1 / "stdout").read_text().strip() == f"[{cpu0}]"
    assert result["affinity"] == {"cpus": [cpu0], "pinned": {str(tmp_path / "server.pid"): 1}}
    assert (r1 / "inputs" / "job.fio").read_text() == "the job\n"
    counters = json.loads((r1 / "counters.json").read_text())
    assert counters["collect"] == ["cpu", "disk"] and len(counters["samples"]) >= 3
    assert result["counters"]["samples"] == len(counters["samples"])
    metrics = load_counters(r1).metrics
    assert metrics["cpu_user_pct"][0] > 0 and "cpu_iowait_pct" in metrics
    r2 = host_layout.result(tmp_path / "wd", "r2")
    assert r2["outcome"] == "before_run_failed" and "not available to the runner" in r2["error"]
    r3 = host_layout.result(tmp_path / "wd", "r3")
    assert r3["outcome"] == "before_run_failed" and "not a plain file name" in r3["error"]
    assert not host_layout.file(tmp_path / "wd", "r2", "counters.json").exists()
