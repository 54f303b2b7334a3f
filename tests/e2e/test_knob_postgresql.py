"""knob_postgresql_setting against a real PostgreSQL server the test starts (initdb
as the postgres user in a private directory, a private port, a Unix socket only)."""

from __future__ import annotations

import glob
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest
from knobkit import KnobRunner, knob

pytestmark = pytest.mark.slow


def _bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3].split(".")[0]))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, bindir: Path):
        self.bindir = bindir
        # /var/tmp, not pytest's tmp_path: the postgres user must be able to reach it.
        self.base = Path(tempfile.mkdtemp(prefix="bmx-pg-", dir="/var/tmp"))
        self.base.chmod(0o755)
        self.data = self.base / "data"
        self.socket = self.base / "socket"
        self.log = self.base / "postgresql.log"
        self.port = _free_port()
        shutil.chown(self.base, "postgres")
        self.socket.mkdir()
        shutil.chown(self.socket, "postgres")
        self.as_postgres(str(bindir / "initdb"), "--pgdata", str(self.data), "--username=postgres",
                         "--auth-local=trust", "--auth-host=reject", "--no-sync")
        with open(self.data / "postgresql.conf", "a") as fh:
            fh.write(f"port = {self.port}\nlisten_addresses = ''\nunix_socket_directories = '{self.socket}'\n")
        self.as_postgres(str(bindir / "pg_ctl"), "start", "--pgdata", str(self.data), "--log", str(self.log), "--wait")

    def as_postgres(self, *argv: str) -> str:
        return subprocess.run(["runuser", "-u", "postgres", "--", *argv], check=True, capture_output=True,
                              text=True, timeout=120).stdout

    def sql(self, query: str) -> str:
        return subprocess.run([str(self.bindir / "psql"), "--no-psqlrc", "-At", f"--host={self.socket}",
                               f"--port={self.port}", "--username=postgres", "--dbname=postgres", "-c", query],
                              check=True, capture_output=True, text=True, timeout=60).stdout.strip()

    def pid(self) -> str:
        return (self.data / "postmaster.pid").read_text().splitlines()[0]

    def stop(self) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", str(self.bindir / "pg_ctl"), "stop", "--pgdata",
                        str(self.data), "--mode", "immediate", "--wait"], capture_output=True, timeout=120)
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="module")
def server():
    bindir = _bindir()
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
    item["vars"]["knob_postgresql_setting_port"] = _free_port()
    err = runner.fail([item])
    assert "cannot query PostgreSQL" in str(err) and "localhost" in str(err), str(err)
