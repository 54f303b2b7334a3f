"""knob_oracle_parameter's backend in the bmx_knob module (playbooks/library/bmx_knob.py).

No Oracle database and no sqlplus can exist on this machine, so the instance is played
by a small stand-in "sqlplus" (a Python script the test writes): it reads the SQL*Plus
script from stdin as sqlplus -S would, answers the backend's v$parameter query the way
sqlplus prints it with HEADING OFF / PAGESIZE 0 (``BMX|value|issys_modifiable``) from a
JSON file, applies ALTER SYSTEM and a restart, and logs argv, environment and script.
What is tested is the backend's part: the argv, the SQL text, parsing, refusals and
their messages, read / set if different / restart / read back. The real refusal without
sqlplus runs through Ansible in tests/e2e/test_knob_unavailable.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from unit.host.test_knob_module import bmx_knob

ROOT = Path(__file__).resolve().parents[3]

FAKE_SQLPLUS = """\
import json, os, re, sys
state_file = {state!r}
state = json.load(open(state_file))
script = sys.stdin.read()
state.setdefault("calls", []).append({{"argv": sys.argv[1:], "script": script,
                                       "env": [os.environ.get("ORACLE_HOME"), os.environ.get("ORACLE_SID")]}})
out, rc = "", 0
query = re.search(r"FROM v\\$parameter WHERE name = '([^']*)'", script)
change = re.search(r"ALTER SYSTEM SET (\\w+) = '?([^' ]*)'? SCOPE=(\\w+);", script)
if query:
    p = state["parameters"].get(query.group(1))
    out = "BMX|%s|%s\\n" % (p["value"], p["issys_modifiable"]) if p else ""
elif change:
    p = state["parameters"][change.group(1)]
    p["spfile"] = change.group(2)
    if change.group(3) == "BOTH":
        p["value"] = change.group(2)
elif "STARTUP" in script:
    for p in state["parameters"].values():
        p["value"] = p.get("spfile", p["value"])
    state["restarts"] = state.get("restarts", 0) + 1
json.dump(state, open(state_file, "w"))
print(out, end="")
sys.exit(rc)
"""


class FakeInstance:
    def __init__(self, tmp_path: Path, **parameters):
        self.state = tmp_path / "instance.json"
        self.state.write_text(json.dumps({"parameters": parameters}))
        self.home = tmp_path / "home"
        (self.home / "bin").mkdir(parents=True)
        self.sqlplus = self.home / "bin" / "sqlplus"
        self.sqlplus.write_text(f"#!{sys.executable}\n" + FAKE_SQLPLUS.format(state=str(self.state)))
        self.sqlplus.chmod(0o755)

    def read(self) -> dict:
        return json.loads(self.state.read_text())

    def knob(self, value, cost="none", **more) -> dict:
        return {"factor": "mbrc", "role": "knob_oracle_parameter", "value": value, "cost": cost,
                "vars": {"knob_oracle_parameter_name": "db_file_multiblock_read_count",
                         "knob_oracle_parameter_oracle_home": str(self.home), "knob_oracle_parameter_runas": [],
                         **more}}


def test_backend_defaults_are_the_roles_defaults():
    from unit.host.test_knob_backend_mssql import role_default

    backend = bmx_knob.BACKENDS["knob_oracle_parameter"]
    for name, value in backend.defaults.items():
        assert role_default("knob_oracle_parameter", name) == value, name


def test_argv_and_sql_text(tmp_path):
    b = bmx_knob.backend({"factor": "mbrc", "role": "knob_oracle_parameter", "value": 128,
                          "vars": {"knob_oracle_parameter_name": "DB_File_Multiblock_Read_Count",
                                   "knob_oracle_parameter_sqlplus": "/bin/true"}}, {}, "h1")
    assert b.argv() == ["runuser", "-u", "oracle", "--", "/bin/true", "-S", "-L", "/ as sysdba"]
    assert b.read_sql() == ("SELECT 'BMX|' || value || '|' || issys_modifiable FROM v$parameter "
                            "WHERE name = 'db_file_multiblock_read_count';")
    assert b.set_sql(128, False) == "ALTER SYSTEM SET db_file_multiblock_read_count = 128 SCOPE=BOTH;"
    assert b.set_sql("TRUE", True) == "ALTER SYSTEM SET db_file_multiblock_read_count = TRUE SCOPE=SPFILE;"
    assert b.set_sql("SETALL", False).endswith("= 'SETALL' SCOPE=BOTH;")
    assert bmx_knob.ORACLE_HEADER.splitlines() == [
        "WHENEVER SQLERROR EXIT SQL.SQLCODE", "WHENEVER OSERROR EXIT FAILURE",
        "SET HEADING OFF FEEDBACK OFF PAGESIZE 0 LINESIZE 1000 TRIMOUT ON VERIFY OFF ECHO OFF"]


def test_parsing_recorded_sqlplus_output(tmp_path):
    b = bmx_knob.backend(FakeInstance(tmp_path).knob(128), {}, "h1")
    assert b.parse("128", 0, "BMX|128|IMMEDIATE\n", "") == {
        "actual": "128", "baseline": "128", "restart": False, "row": {"value": "128", "issys_modifiable": "IMMEDIATE"}}
    assert b.parse("true", 0, "\nBMX|TRUE|FALSE\n", "") == {
        "actual": "true", "baseline": "TRUE", "restart": True, "row": {"value": "TRUE", "issys_modifiable": "FALSE"}}
    assert b.parse("64", 0, "BMX|128|DEFERRED\n", "")["actual"] == "128"
    with pytest.raises(bmx_knob.KnobError, match="the instance on h1 has no parameter 'db_file_multiblock_read_count'"):
        b.parse("64", 0, "\n", "")
    recorded = "ERROR:\nORA-01034: ORACLE not available\nProcess ID: 0\n"
    with pytest.raises(bmx_knob.KnobError, match="cannot query the Oracle instance ORCLCDB on h1: ERROR: ORA-01034"):
        b.parse("64", 1, recorded, "")


def test_unsafe_inputs_are_refused_before_sqlplus_runs(tmp_path):
    inst = FakeInstance(tmp_path, db_file_multiblock_read_count={"value": "128", "issys_modifiable": "IMMEDIATE"})
    for more, value in (({"knob_oracle_parameter_name": "x; DROP"}, 1), ({}, "a'b"), ({}, "1\nSHUTDOWN")):
        with pytest.raises(bmx_knob.KnobError, match="is not a parameter name, or its value contains a quote"):
            bmx_knob.apply([inst.knob(value, **more)], host="h1")
    assert "calls" not in inst.read()


def test_no_sqlplus_is_refused_naming_oracle_home(tmp_path):
    knob = {"factor": "mbrc", "role": "knob_oracle_parameter", "value": 128,
            "vars": {"knob_oracle_parameter_name": "db_file_multiblock_read_count",
                     "knob_oracle_parameter_oracle_home": str(tmp_path)}}
    with pytest.raises(bmx_knob.KnobError) as err:
        bmx_knob.apply([knob], host="h1")
    assert str(err.value) == (f"knob_oracle_parameter: sqlplus not found on h1 ({tmp_path}/bin/sqlplus does not "
                              "exist); set knob_oracle_parameter_oracle_home to the database's ORACLE_HOME, "
                              "or knob_oracle_parameter_sqlplus")
    found = bmx_knob.inspect([knob], {"mbrc": ["8", "128"]}, host="h1")["mbrc"]
    assert found["blocker"] == str(err.value) and set(found["levels"].values()) == {str(err.value)}


def test_dynamic_parameter_scope_both_and_read_back(tmp_path):
    inst = FakeInstance(tmp_path, db_file_multiblock_read_count={"value": "128", "issys_modifiable": "IMMEDIATE"})
    state = bmx_knob.apply([inst.knob(8)], host="h1")["mbrc"]
    assert state == {**state, "intended": "8", "actual": "8", "changed": True, "baseline": "128", "ok": True}
    calls = inst.read()["calls"]
    assert len(calls) == 3 and all(c["env"] == [str(inst.home), "ORCLCDB"] for c in calls)
    assert calls[0]["argv"] == ["-S", "-L", "/ as sysdba"]
    assert calls[1]["script"] == (bmx_knob.ORACLE_HEADER
                                  + "ALTER SYSTEM SET db_file_multiblock_read_count = 8 SCOPE=BOTH;\nEXIT\n")
    assert bmx_knob.apply([inst.knob(8)], host="h1")["mbrc"]["changed"] is False
    assert len(inst.read()["calls"]) == 4, "a knob already set costs one query"


def test_static_parameter_restarts_only_with_cost_restart(tmp_path):
    inst = FakeInstance(tmp_path, sga_target={"value": "0", "issys_modifiable": "FALSE"})
    knob = inst.knob("2G", knob_oracle_parameter_name="sga_target")
    with pytest.raises(bmx_knob.KnobError) as err:
        bmx_knob.apply([knob], host="h1")
    assert str(err.value) == ("knob_oracle_parameter: sga_target takes effect on h1 only after a restart of the "
                              "instance; declare the knob with cost: restart to allow it")
    assert len(inst.read()["calls"]) == 1, "refused, yet written"
    state = bmx_knob.apply([{**knob, "cost": "restart"}], host="h1")["mbrc"]
    assert state == {**state, "actual": "2G", "baseline": "0", "changed": True, "ok": True}
    scripts = [c["script"] for c in inst.read()["calls"]]
    assert "SCOPE=SPFILE;" in scripts[2]
    assert scripts[3] == "WHENEVER OSERROR EXIT FAILURE\nSHUTDOWN IMMEDIATE\nSTARTUP\n\nEXIT\n"
    assert inst.read()["restarts"] == 1
