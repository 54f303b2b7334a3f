"""knob_postgresql_setting against a real PostgreSQL server the test starts (initdb
as the postgres user in a private directory, a private port, a Unix socket only)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from knobkit import KnobRunner, knob
from pgserver import Server, free_port, pg_bindir

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server():
    bindir = pg_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed (Debian package postgresql)")
    srv = Server(bindir)
    yield srv
    srv.stop()


@pytest.fixture
def runner(tmp_path):
    return KnobRunner(tmp_path)


def pg(server: Server, name: str, value, cost: str = "none") -> dict:
    return knob(name, "knob_postgresql_setting", value, cost=cost, knob_postgresql_setting_name=name,
                knob_postgresql_setting_provision=False, knob_postgresql_setting_host=str(server.socket),
                knob_postgresql_setting_port=server.port, knob_postgresql_setting_psql=str(server.bindir / "psql"))


def in_auto_conf(server: Server, name: str) -> bool:
    return server.sql(f"SELECT count(*) FROM pg_file_settings WHERE name = '{name}' "
                      "AND sourcefile LIKE '%postgresql.auto.conf'") != "0"


def test_reload_parameter_apply_noop_reset(runner, server):
    default = server.sql("SHOW work_mem")
    states, _ = runner.run([pg(server, "work_mem", "64MB")])
    s = states["work_mem"]
    assert s["ok"] and s["changed"] and s["actual"] == "64MB" and s["baseline"] == "DEFAULT", s
    assert server.sql("SHOW work_mem") == "64MB" and in_auto_conf(server, "work_mem")

    # The same setting spelled differently is no change.
    states, _ = runner.run([pg(server, "work_mem", "65536kB")])
    assert states["work_mem"]["ok"] and not states["work_mem"]["changed"], states
    assert states["work_mem"]["actual"] == "65536kB"

    # The baseline DEFAULT removes the ALTER SYSTEM entry.
    states, _ = runner.run([pg(server, "work_mem", "DEFAULT")])
    assert states["work_mem"]["ok"] and states["work_mem"]["changed"], states
    assert server.sql("SHOW work_mem") == default and not in_auto_conf(server, "work_mem")


def test_postmaster_parameter_needs_cost_restart(runner, server):
    pid = server.pid()
    err = runner.fail([pg(server, "max_connections", 50)])
    assert "restarts PostgreSQL" in str(err) and "cost: restart" in str(err), str(err)
    assert server.pid() == pid and not in_auto_conf(server, "max_connections")

    states, _ = runner.run([pg(server, "max_connections", 50, cost="restart")])
    s = states["max_connections"]
    assert s["ok"] and s["changed"] and s["actual"] == "50", s
    assert server.sql("SHOW max_connections") == "50" and server.pid() != pid
    pid = server.pid()
    states, _ = runner.run([pg(server, "max_connections", 50, cost="restart")])
    assert states["max_connections"]["ok"] and not states["max_connections"]["changed"] and server.pid() == pid

    states, _ = runner.run([pg(server, "max_connections", s["baseline"], cost="restart")])
    assert states["max_connections"]["ok"], states
    assert server.sql("SHOW max_connections") == "100" and not in_auto_conf(server, "max_connections")


def test_unknown_parameter_and_unreachable_server(runner, server):
    err = runner.fail([pg(server, "no_such_parameter", 1)])
    assert "has no parameter 'no_such_parameter'" in str(err), str(err)
    item = pg(server, "work_mem", "8MB")
    item["vars"]["knob_postgresql_setting_port"] = free_port()
    err = runner.fail([item])
    assert "cannot query PostgreSQL" in str(err) and "localhost" in str(err), str(err)


def test_internal_parameter_is_refused(runner, server):
    err = runner.fail([pg(server, "block_size", 4096, cost="restart")])
    assert "block_size is fixed when PostgreSQL is built or initialized (context internal)" in str(err), str(err)


def test_a_baseline_set_by_alter_system_is_restored(runner, server):
    server.sql("ALTER SYSTEM SET work_mem = '8MB'")
    server.sql("SELECT pg_reload_conf()")
    try:
        states, _ = runner.run([pg(server, "work_mem", "64MB")])
        assert states["work_mem"]["baseline"] == "8MB" and states["work_mem"]["ok"], states
        states, _ = runner.run([pg(server, "work_mem", "8MB")])
        assert states["work_mem"]["ok"] and states["work_mem"]["changed"], states
        assert server.sql("SHOW work_mem") == "8MB" and in_auto_conf(server, "work_mem")
    finally:
        server.sql("ALTER SYSTEM RESET work_mem")
        server.sql("SELECT pg_reload_conf()")


def test_inspect_tells_the_current_value_and_which_levels_can_be_set(server):
    """`bmx check`'s call of the module (mode inspect) against the server: nothing written."""
    bmx_knob = load_knob_module()
    knobs = [pg(server, "work_mem", "64MB"), pg(server, "max_connections", 50),
             pg(server, "block_size", 8192, cost="restart")]
    said = bmx_knob.inspect(knobs, {"work_mem": ["64MB", "4MB"], "max_connections": ["50", "100"],
                                    "block_size": ["8192", "4096"]}, host="localhost")
    assert said["work_mem"]["current"] == server.sql("SHOW work_mem")
    assert said["work_mem"]["levels"] == {"64MB": "", "4MB": ""}
    assert said["max_connections"]["levels"]["100"] == ""
    assert "declare the knob with cost: restart" in said["max_connections"]["levels"]["50"]
    assert said["block_size"]["levels"]["8192"] == "" and "context internal" in said["block_size"]["levels"]["4096"]
    assert not in_auto_conf(server, "work_mem") and not in_auto_conf(server, "max_connections")


def test_provisioned_server_is_started_and_reached_through_its_connection(runner):
    """knob_postgresql_setting_provision (the default): tasks/knobs.yml runs service_postgresql
    first, and the module connects with the service_postgresql_conn it sets."""
    bindir = pg_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed (Debian package postgresql)")
    base = Path(tempfile.mkdtemp(prefix="bmx-pg-prov-", dir="/var/tmp"))
    base.chmod(0o755)
    extravars = {"service_postgresql_dir": str(base / "cluster"), "service_postgresql_port": free_port()}
    item = knob("work_mem", "knob_postgresql_setting", "48MB", knob_postgresql_setting_name="work_mem")
    try:
        states, _ = runner.run([item], extravars=extravars)
        s = states["work_mem"]
        assert s["ok"] and s["changed"] and s["actual"] == "48MB" and s["baseline"] == "DEFAULT", s
        assert "work_mem = '48MB'" in (base / "cluster" / "data" / "postgresql.auto.conf").read_text()
    finally:
        subprocess.run(["runuser", "-u", "postgres", "--", str(bindir / "pg_ctl"), "stop", "--pgdata",
                        str(base / "cluster" / "data"), "--mode", "immediate", "--wait"], capture_output=True,
                       timeout=120)
        shutil.rmtree(base, ignore_errors=True)


def test_a_value_that_reads_back_otherwise_ends_the_wait_once_the_server_reloaded(server):
    """TimeZone 'utc' shows as 'UTC' (a string parameter: compared exactly): the poll
    stops when new sessions show the reloaded configuration, not at the timeout."""
    bmx_knob = load_knob_module()
    item = pg(server, "TimeZone", "utc")
    item["vars"]["knob_postgresql_setting_timeout"] = 60
    try:
        t0 = time.monotonic()
        state = bmx_knob.apply([item], host="localhost")["TimeZone"]
        assert time.monotonic() - t0 < 20, "the wait ran to its timeout"
        assert state["changed"] and not state["ok"] and state["actual"] == "UTC", state
    finally:
        server.sql("ALTER SYSTEM RESET timezone")
        server.sql("SELECT pg_reload_conf()")


def load_knob_module():
    """playbooks/library/bmx_knob.py as a Python module (it runs on the host as plain Python)."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "playbooks" / "library" / "bmx_knob.py"
    spec = importlib.util.spec_from_file_location("bmx_knob_e2e", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
