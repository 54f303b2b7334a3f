"""knob_postgresql_setting's backend in the bmx_knob module (playbooks/library/bmx_knob.py)
as plain Python: the role's defaults, psql's command line, the value comparison, the
baseline and the refusals. The server side (reload, restart, wait, read back, inspect)
runs against a real PostgreSQL in tests/e2e/test_knob_postgresql.py; here psql is real
where it is cheap (a server that is not there)."""

from __future__ import annotations

import glob
import importlib.util
import shutil
from pathlib import Path

import pytest
import yaml
from jinja2.nativetypes import NativeEnvironment

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("bmx_knob_pg", ROOT / "playbooks" / "library" / "bmx_knob.py")
bmx_knob = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bmx_knob)
ROLE = "knob_postgresql_setting"
Backend = bmx_knob.BACKENDS[ROLE]
PSQL = sorted(glob.glob("/usr/lib/postgresql/*/bin/psql"))

# pg_settings rows as PG_QUERY returns them (PostgreSQL 15).
WORK_MEM = {"name": "work_mem", "setting": "4096", "unit": "kB", "vartype": "integer", "context": "user",
            "pending_restart": False, "show": "4MB", "in_auto_conf": False, "data_directory": "/srv/pg/data",
            "server_version_num": 150010, "conf_load_time": "2026-12-01 00:00:00+00"}
MAX_CONN = {**WORK_MEM, "name": "max_connections", "setting": "100", "unit": None, "context": "postmaster",
            "show": "100"}
BLOCK_SIZE = {**WORK_MEM, "name": "block_size", "setting": "8192", "unit": None, "context": "internal",
              "show": "8192"}


def backend(value="64MB", cost="none", settings=None, **role_vars):
    knob = {"factor": "f", "role": ROLE, "value": value, "cost": cost,
            "vars": {"knob_postgresql_setting_name": "work_mem", **role_vars}}
    return Backend(knob, settings or {}, "db1")


def render_role_defaults(knob: dict, conn: dict | None) -> dict:
    """The role's defaults/main.yml as Ansible templates them for ``knob`` (bmx_knob)."""
    env = NativeEnvironment()
    data = yaml.safe_load((ROOT / "playbooks" / "roles" / ROLE / "defaults" / "main.yml").read_text())
    context = {"bmx_knob": knob, **({"service_postgresql_conn": conn} if conn else {})}
    return {k: env.from_string(v).render(**context) if isinstance(v, str) else v for k, v in data.items()}


CONN = {"host": "/var/tmp/x/socket", "port": 55432, "user": "bench", "psql": "/usr/lib/postgresql/15/bin/psql",
        "bindir": "/usr/lib/postgresql/15/bin", "database": "bench"}


@pytest.mark.parametrize(("cost", "conn", "role_vars"), [
    ("none", None, {}),
    ("restart", CONN, {}),
    ("reboot", CONN, {"knob_postgresql_setting_host": "/run/pg", "knob_postgresql_setting_port": 6000,
                      "knob_postgresql_setting_user": "admin", "knob_postgresql_setting_database": "db",
                      "knob_postgresql_setting_psql": "/opt/psql",
                      "knob_postgresql_setting_runas": ["sudo", "-u", "pg"],
                      "knob_postgresql_setting_os_user": "pg", "knob_postgresql_setting_bindir": "/opt/bin",
                      "knob_postgresql_setting_logfile": "/log", "knob_postgresql_setting_timeout": 30,
                      "knob_postgresql_setting_restart_argv": ["pg_ctlcluster", "15", "main", "restart"],
                      "knob_postgresql_setting_provision": False}),
])
def test_defaults_are_the_roles(cost, conn, role_vars):
    knob = {"factor": "f", "role": ROLE, "value": "64MB", "cost": cost,
            "vars": {"knob_postgresql_setting_name": "work_mem", **role_vars}}
    role = render_role_defaults(knob, conn)
    b = Backend(knob, {"service_postgresql_conn": conn} if conn else {}, "db1")
    assert set(Backend.defaults) <= set(role)
    for name, value in role.items():
        if name == "knob_postgresql_setting_value":
            continue
        if name == "knob_postgresql_setting_allow_restart":
            assert b.allow_restart is value, name
        else:
            assert b.var(name) == value, name


def test_the_hosts_own_settings_win_and_allow_restart_ignores_the_knobs_vars():
    b = backend(settings={"knob_postgresql_setting_port": 7000}, knob_postgresql_setting_port=6000,
                knob_postgresql_setting_allow_restart=True)
    assert b.var("knob_postgresql_setting_port") == 7000
    assert b.allow_restart is False  # the role takes it from the cost class or the host, never the knob's vars
    assert backend(settings={"knob_postgresql_setting_allow_restart": "yes"}).allow_restart is True
    assert backend(cost="restart", settings={"knob_postgresql_setting_allow_restart": False}).allow_restart is False


def test_psql_argv_is_one_list_with_runas_and_the_name_as_a_variable():
    b = backend(settings={"service_postgresql_conn": CONN}, knob_postgresql_setting_runas=["runuser", "-u", "pg", "--"])
    assert b.psql_argv("--set=value=64MB") == [
        "runuser", "-u", "pg", "--", CONN["psql"], "--no-psqlrc", "--tuples-only", "--no-align",
        "--set=ON_ERROR_STOP=1", f"--host={CONN['host']}", "--port=55432", "--username=bench", "--dbname=postgres",
        "--set=name=work_mem", "--set=value=64MB"]


def test_one_query_returns_everything_a_knob_needs():
    for key in ("setting", "unit", "vartype", "context", "source", "pending_restart", "show", "in_auto_conf",
                "data_directory", "server_version_num", "conf_load_time"):
        assert f"'{key}'," in bmx_knob.PG_QUERY, key
    # The name is a psql variable, never pasted into the SQL.
    assert "lower(s.name) = lower(:'name')" in bmx_knob.PG_QUERY  # TimeZone, DateStyle: mixed case


@pytest.mark.parametrize(("row", "intended", "same"), [
    (WORK_MEM, "4MB", True), (WORK_MEM, "4096kB", True), (WORK_MEM, "4096", True), (WORK_MEM, "4194304B", True),
    (WORK_MEM, "4GB", False), (WORK_MEM, "4 MB", True), (WORK_MEM, "4ms", False), (WORK_MEM, "lots", False),
    ({**WORK_MEM, "setting": "8", "unit": "8kB"}, "64kB", True),  # a unit with a factor (8kB pages)
    ({**WORK_MEM, "setting": "200", "unit": "ms", "vartype": "integer"}, "0.2s", True),
    ({**WORK_MEM, "setting": "0.9", "unit": None, "vartype": "real"}, "0.90", True),
    ({**WORK_MEM, "setting": "on", "vartype": "bool"}, "true", True),
    ({**WORK_MEM, "setting": "on", "vartype": "bool"}, "y", True),
    ({**WORK_MEM, "setting": "off", "vartype": "bool"}, "of", True),
    ({**WORK_MEM, "setting": "off", "vartype": "bool"}, "maybe", False),
    ({**WORK_MEM, "setting": "replica", "vartype": "enum"}, "Replica", True),
    ({**WORK_MEM, "setting": "a, b", "vartype": "string"}, "a,b", False),
])
def test_values_compare_by_meaning_in_the_parameters_unit(row, intended, same):
    assert bmx_knob.pg_same_value(row, intended) is same


def test_actual_is_the_intended_spelling_when_the_same_else_what_show_prints():
    assert bmx_knob.pg_actual(WORK_MEM, "4096kB") == "4096kB"
    assert bmx_knob.pg_actual(WORK_MEM, "64MB") == "4MB"
    pending = {**MAX_CONN, "pending_restart": True, "in_auto_conf": True}
    assert bmx_knob.pg_actual(pending, 100) == "100 (restart pending)"
    assert bmx_knob.pg_actual(WORK_MEM, "DEFAULT") == "DEFAULT"
    assert bmx_knob.pg_actual({**WORK_MEM, "in_auto_conf": True}, "DEFAULT") == "4MB"
    assert bmx_knob.pg_actual({**WORK_MEM, "pending_restart": True}, "default") == "4MB"


def test_baseline_is_default_unless_alter_system_set_it():
    assert bmx_knob.pg_baseline(WORK_MEM) == "DEFAULT"
    assert bmx_knob.pg_baseline({**WORK_MEM, "in_auto_conf": True, "show": "64MB"}) == "64MB"


def test_refusals_come_from_the_row_and_the_cost_class():
    assert backend().refusal(BLOCK_SIZE, 4096) == (
        "knob_postgresql_setting: work_mem is fixed when PostgreSQL is built or initialized (context internal)")
    assert backend().refusal(BLOCK_SIZE, 8192) == ""  # already so: nothing to refuse
    assert backend().refusal(MAX_CONN, 50) == (
        "knob_postgresql_setting: changing work_mem on db1 restarts PostgreSQL (context postmaster); "
        "declare the knob with cost: restart to allow it")
    assert backend(cost="restart").refusal(MAX_CONN, 50) == ""
    assert backend().refusal(MAX_CONN, "100") == ""
    assert backend().refusal(WORK_MEM, "64MB") == ""


def test_a_bad_parameter_name_is_refused_before_psql_runs():
    b = backend(knob_postgresql_setting_name="work_mem; DROP TABLE x", knob_postgresql_setting_psql="/nonexistent")
    with pytest.raises(bmx_knob.KnobError, match=r"^knob_postgresql_setting: 'work_mem; DROP TABLE x' is not a "
                       r"parameter name \(set knob_postgresql_setting_name in the knob's vars\)$"):
        bmx_knob.apply([b.knob], host="db1")


def test_missing_psql_and_no_server_say_where_they_looked(tmp_path):
    knob = backend(knob_postgresql_setting_psql=str(tmp_path / "psql"), knob_postgresql_setting_host=str(tmp_path),
                   knob_postgresql_setting_port=1).knob
    with pytest.raises(bmx_knob.KnobError, match=rf"cannot query PostgreSQL at {tmp_path}:1 as postgres on db1: "
                       r".*No such file"):
        bmx_knob.apply([knob], host="db1")
    if not PSQL:
        pytest.skip("psql is not installed (Debian package postgresql-client)")
    knob["vars"]["knob_postgresql_setting_psql"] = PSQL[-1]
    with pytest.raises(bmx_knob.KnobError, match=rf"cannot query PostgreSQL at {tmp_path}:1 as postgres on db1: "
                       r".*(No such file|connection)"):
        bmx_knob.apply([knob], host="db1")
    # bmx check: the level is blocked with the same reason, the current value unreadable.
    said = bmx_knob.inspect([{**knob, "vars": {**knob["vars"], "knob_postgresql_setting_provision": False}}],
                            {"f": ["64MB"]}, host="db1")["f"]
    assert said["current"].startswith("unreadable: knob_postgresql_setting: cannot query") and \
        "cannot query PostgreSQL" in said["levels"]["64MB"]
    # A provisioned server that is not running yet: service_postgresql starts it when the campaign runs.
    said = bmx_knob.inspect([knob], {"f": ["64MB"]}, host="db1")["f"]
    assert said["levels"] == {"64MB": ""}


def test_default_restart_is_pg_ctl_of_the_servers_data_directory():
    assert backend().restart_argv(MAX_CONN) == [
        "runuser", "-u", "postgres", "--", "/usr/lib/postgresql/15/bin/pg_ctl", "restart", "--pgdata", "/srv/pg/data",
        "--mode", "fast", "--wait", "--timeout", "120", "--log", "/srv/pg/postgresql.log"]
    b = backend(settings={"service_postgresql_conn": CONN}, knob_postgresql_setting_timeout=30)
    assert b.restart_argv(MAX_CONN)[4] == CONN["bindir"] + "/pg_ctl" and b.restart_argv(MAX_CONN)[12] == "30"
    own = backend(knob_postgresql_setting_restart_argv=["pg_ctlcluster", 15, "main", "restart"])
    assert own.restart_argv(MAX_CONN) == ["pg_ctlcluster", "15", "main", "restart"]
    own.row = MAX_CONN
    assert own.write_problem(50) == ("" if shutil.which("pg_ctlcluster") else
                                     "pg_ctlcluster (knob_postgresql_setting_restart_argv) is not on db1's PATH")
    own = backend(knob_postgresql_setting_restart_argv=["no-such-restart-command"])
    own.row = MAX_CONN
    assert own.write_problem(50) == \
        "no-such-restart-command (knob_postgresql_setting_restart_argv) is not on db1's PATH"
    missing = backend(knob_postgresql_setting_bindir="/nonexistent")
    missing.row = MAX_CONN
    assert missing.write_problem(50) == "/nonexistent/pg_ctl does not exist on db1 (set knob_postgresql_setting_bindir)"
    missing.row = WORK_MEM
    assert missing.write_problem("64MB") == ""  # a reload needs no restart command
