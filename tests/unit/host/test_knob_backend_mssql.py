"""knob_mssql_setting's backend in the bmx_knob module (playbooks/library/bmx_knob.py).

No SQL Server and no sqlcmd can exist on this machine, so the server is played by a
small stand-in "sqlcmd" (a Python script the test writes): it answers the backend's
own queries from a JSON file, the way sqlcmd prints them with ``-h -1 -W`` (one line
``value|value_in_use|is_dynamic``), and logs every argv and SQLCMDPASSWORD. What is
tested is the backend's part: argv and SQL text, parsing, the refusals and their
messages, read / set if different / restart / read back. The real refusal without
sqlcmd runs through Ansible in tests/e2e/test_knob_unavailable.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from unit.host.test_knob_module import bmx_knob

ROOT = Path(__file__).resolve().parents[3]

FAKE_SQLCMD = """\
import json, os, sys
state_file, argv = {state!r}, sys.argv[1:]
state = json.load(open(state_file))
state.setdefault("calls", []).append({{"argv": argv, "password": os.environ.get("SQLCMDPASSWORD")}})
query = argv[argv.index("-Q") + 1]
var = dict(a.split("=", 1) for a in argv[1:] if "=" in a and argv[argv.index(a) - 1] == "-v")
out, rc = "", 0
if state.get("down"):
    out, rc = "Sqlcmd: Error: Login timeout expired.", 1
elif "sys.configurations" in query:
    row = state["options"].get(var["name"])
    out = "|".join(str(row[k]) for k in ("value", "value_in_use", "is_dynamic")) + "\\n" if row else ""
elif "sp_configure N'$(name)', $(value)" in query:
    row = state["options"][var["name"]]
    row["value"] = int(var["value"])
    if row["is_dynamic"]:
        row["value_in_use"] = row["value"]
json.dump(state, open(state_file, "w"))
print(out, end="")
sys.exit(rc)
"""

FAKE_RESTART = """\
import json, sys
state = json.load(open({state!r}))
for row in state["options"].values():
    row["value_in_use"] = row["value"]
state["restarts"] = state.get("restarts", 0) + 1
json.dump(state, open({state!r}, "w"))
"""


class FakeServer:
    """The stand-in sqlcmd and restart command, and the options they serve."""

    def __init__(self, tmp_path: Path, **options):
        self.state = tmp_path / "server.json"
        self.state.write_text(json.dumps({"options": options}))
        self.sqlcmd = tmp_path / "sqlcmd"
        self.sqlcmd.write_text(f"#!{sys.executable}\n" + FAKE_SQLCMD.format(state=str(self.state)))
        self.sqlcmd.chmod(0o755)
        self.restart = tmp_path / "restart"
        self.restart.write_text(f"#!{sys.executable}\n" + FAKE_RESTART.format(state=str(self.state)))
        self.restart.chmod(0o755)

    def read(self) -> dict:
        return json.loads(self.state.read_text())

    def knob(self, value, cost="none", **more) -> dict:
        return {"factor": "fiber", "role": "knob_mssql_setting", "value": value, "cost": cost,
                "vars": {"knob_mssql_setting_name": "lightweight pooling",
                         "knob_mssql_setting_sqlcmd": str(self.sqlcmd),
                         "knob_mssql_setting_restart_argv": [str(self.restart)], "knob_mssql_setting_password": "pw",
                         "knob_mssql_setting_timeout": 4, **more}}


def role_default(role: str, name: str):
    """The literal default of a role variable in defaults/main.yml: the value itself, or
    the ``default(...)`` inside its template."""
    import ast
    import re

    value = yaml.safe_load((ROOT / "playbooks" / "roles" / role / "defaults" / "main.yml").read_text())[name]
    if isinstance(value, str) and "default(" in value:
        text = re.search(r"default\((.*)\) *\}\}$", value, re.S).group(1).replace("\n", "\\n")
        value = {"true": True, "false": False}[text] if text in ("true", "false") else ast.literal_eval(text)
    return value


def test_backend_defaults_are_the_roles_defaults():
    backend = bmx_knob.BACKENDS["knob_mssql_setting"]
    assert backend.defaults, "no defaults"
    for name, value in backend.defaults.items():
        assert role_default("knob_mssql_setting", name) == value, name


def test_sqlcmd_argv_and_sql_text(tmp_path):
    server = FakeServer(tmp_path)
    b = bmx_knob.backend(server.knob(1), {}, "h1")
    argv = b.argv("-Q", b.READ_SQL)
    assert argv == [str(server.sqlcmd), "-S", "localhost", "-U", "sa", "-C", "-b", "-h", "-1", "-W", "-l", "4",
                    "-v", "name=lightweight pooling", "-Q",
                    "SET NOCOUNT ON; SELECT CONCAT(CONVERT(varchar(30), value), '|', "
                    "CONVERT(varchar(30), value_in_use), '|', CONVERT(int, is_dynamic)) "
                    "FROM sys.configurations WHERE name = N'$(name)'"]
    assert b.SET_SQL == ("EXEC sp_configure 'show advanced options', 1; RECONFIGURE; "
                         "EXEC sp_configure N'$(name)', $(value); RECONFIGURE;")
    # An empty login is a trusted connection (-E), not the default sa.
    trusted = bmx_knob.backend(server.knob(1, knob_mssql_setting_user=""), {}, "h1")
    assert "-E" in trusted.argv() and "-U" not in trusted.argv()
    # The host's own setting (inventory) wins over the knob's vars.
    other = bmx_knob.backend(server.knob(1), {"knob_mssql_setting_server": "db1,1433"}, "h1")
    assert other.argv()[1:3] == ["-S", "db1,1433"]


def test_parsing_recorded_sqlcmd_output(tmp_path):
    b = bmx_knob.backend(FakeServer(tmp_path).knob(1), {}, "h1")
    # Recorded shapes of sqlcmd -h -1 -W output of the read query.
    assert b.parse("1", 0, "1|1|0\n", "") == {"actual": "1", "baseline": "1", "restart": True,
                                                "row": {"value": "1", "value_in_use": "1", "is_dynamic": "0"}}
    assert b.parse("1", 0, "1|0|0\n", "")["actual"] == "0 (restart pending: 1)"
    assert b.parse("8", 0, "8|8|1\r\n", "")["restart"] is False
    with pytest.raises(bmx_knob.KnobError, match="SQL Server localhost has no sp_configure option 'lightweight poo"):
        b.parse("1", 0, "\n", "")
    with pytest.raises(bmx_knob.KnobError, match="cannot query SQL Server localhost from h1: Sqlcmd: Error: Login"):
        b.parse("1", 1, "", "Sqlcmd: Error: Login failed for user 'sa'.\n")


def test_inputs_are_checked_before_sqlcmd_sees_them(tmp_path):
    server = FakeServer(tmp_path)
    for name, value in (("x'; DROP TABLE t; --", 1), ("lightweight pooling", "1; SHUTDOWN")):
        with pytest.raises(bmx_knob.KnobError, match=r"knob_mssql_setting: option .* and value .* \(a whole number\)"):
            bmx_knob.apply([server.knob(value, knob_mssql_setting_name=name)], host="h1")
    assert "calls" not in server.read()


def test_no_sqlcmd_is_refused_naming_the_places(tmp_path):
    knob = {"factor": "fiber", "role": "knob_mssql_setting", "value": 1,
            "vars": {"knob_mssql_setting_name": "lightweight pooling"}}
    b = bmx_knob.backend(knob, {"knob_mssql_setting_sqlcmd_candidates": [str(tmp_path / "no" / "sqlcmd")]}, "h1")
    with pytest.raises(bmx_knob.KnobError) as err:
        b.check(1)
    assert str(err.value) == (f"knob_mssql_setting: sqlcmd not found on h1 (looked for {tmp_path}/no/sqlcmd); "
                              "install Microsoft's mssql-tools18 or set knob_mssql_setting_sqlcmd")


def test_dynamic_option_is_set_with_reconfigure_and_read_back(tmp_path):
    server = FakeServer(tmp_path, **{"max degree of parallelism": {"value": 0, "value_in_use": 0, "is_dynamic": 1}})
    knob = server.knob(4, knob_mssql_setting_name="max degree of parallelism")
    state = bmx_knob.apply([knob], host="h1")["fiber"]
    assert state == {**state, "intended": "4", "actual": "4", "changed": True, "baseline": "0", "ok": True}
    calls = server.read()["calls"]
    assert [c["argv"][c["argv"].index("-Q") + 1][:20] for c in calls] == [
        "SET NOCOUNT ON; SELE", "EXEC sp_configure 's", "SET NOCOUNT ON; SELE"]
    assert "value=4" in calls[1]["argv"] and all(c["password"] == "pw" for c in calls)
    assert "pw" not in json.dumps([c["argv"] for c in calls]), "the password went on the command line"
    assert "restarts" not in server.read()
    # Again: one read, nothing written.
    again = bmx_knob.apply([knob], host="h1")["fiber"]
    assert again["changed"] is False and again["ok"] and len(server.read()["calls"]) == 4


def test_static_option_restarts_only_with_cost_restart(tmp_path):
    server = FakeServer(tmp_path, **{"lightweight pooling": {"value": 0, "value_in_use": 0, "is_dynamic": 0}})
    with pytest.raises(bmx_knob.KnobError) as err:
        bmx_knob.apply([server.knob(1)], host="h1")
    assert str(err.value) == ("knob_mssql_setting: 'lightweight pooling' takes effect on h1 only after a restart of "
                              "SQL Server; declare the knob with cost: restart to allow it")
    assert server.read()["options"]["lightweight pooling"]["value"] == 0, "refused, yet written"
    state = bmx_knob.apply([server.knob(1, cost="restart")], host="h1")["fiber"]
    assert state == {**state, "actual": "1", "changed": True, "baseline": "0", "ok": True}
    assert server.read()["restarts"] == 1
    back = bmx_knob.apply([server.knob(0, cost="restart")], host="h1")["fiber"]  # the restore
    assert back == {**back, "actual": "0", "baseline": "1", "ok": True} and server.read()["restarts"] == 2


def test_a_pending_value_reads_as_such_and_the_check_says_why(tmp_path):
    server = FakeServer(tmp_path, **{"lightweight pooling": {"value": 1, "value_in_use": 0, "is_dynamic": 0}})
    read = bmx_knob.apply([server.knob(1, cost="restart")], mode="read", host="h1")["fiber"]
    assert read["actual"] == "0 (restart pending: 1)" and not read["ok"] and "restarts" not in server.read()
    # As the role did: a pending value differs from either level, and so needs a restart.
    found = bmx_knob.inspect([server.knob(0)], {"fiber": ["0", "1"]}, host="h1")["fiber"]
    assert found["current"] == "0" and "restart" in found["levels"]["0"]
    server = FakeServer(tmp_path, **{"lightweight pooling": {"value": 0, "value_in_use": 0, "is_dynamic": 0}})
    found = bmx_knob.inspect([server.knob(0)], {"fiber": ["0", "1"]}, host="h1")["fiber"]
    assert found["current"] == "0" and found["levels"]["0"] == ""
    assert "only after a restart of SQL Server" in found["levels"]["1"] and "blocker" not in found


def test_bmx_check_says_a_missing_client_once(tmp_path):
    knob = {"factor": "fiber", "role": "knob_mssql_setting", "value": 0,
            "vars": {"knob_mssql_setting_name": "lightweight pooling",
                     "knob_mssql_setting_sqlcmd": str(tmp_path / "sqlcmd")}}
    found = bmx_knob.inspect([knob], {"fiber": ["0", "1"]}, host="h1")["fiber"]
    assert found["blocker"].startswith("knob_mssql_setting: sqlcmd not found on h1")
    assert found["levels"] == {"0": found["blocker"], "1": found["blocker"]}
