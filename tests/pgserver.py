"""A real PostgreSQL server for knob tests: initdb as the postgres user in a private
directory under /var/tmp, a private port, a Unix socket only (no TCP listener)."""

from __future__ import annotations

import glob
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def pg_bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3].split(".")[0]))
    return Path(found[-1]).parent if found else None


def free_port() -> int:
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
        self.port = free_port()
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
