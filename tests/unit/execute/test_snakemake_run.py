"""``bmx run`` starts the workflow through ``snakemake.api`` (execute/snakemake_run.py, issue
34 item 4) with the ``snakemake`` command's options: the same jobs, exit status and output
lines (which bmx reads for its progress), without the command line's cost.

Real Snakemake on small workflows written here, each run both ways.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmatrix.execute import snakemake_run

ROOT = Path(__file__).resolve().parents[3]

SNAKEFILE = """
rule all:
    input: "b.txt"

rule a:
    output: "a.txt"
    log: "logs/a.log"
    params: number=config["number"], word=config["word"]
    resources: slots=1
    shell: "echo {params.number} {params.word} $(( {params.number} + 1 )) > {output} 2> {log}"

rule b:
    input: "a.txt"
    output: "b.txt"
    log: "logs/b.log"
    shell: "cat {input} > {output}; test {config[fail]} = no 2> {log}"
"""

#: What differs between two runs of the same workflow: times, ids, the command line, log names.
_VOLATILE = re.compile(r"Date:|Workflow ID:|Command:|Complete log|Elapsed time|^\[\w{3} \w{3} ")


def _run(tmp_path: Path, how: str, *config: str, forcerun: tuple[str, ...] = ()) -> tuple[int, list[str]]:
    prog = ["-m", "snakemake"] if how == "command" else ["-m", "benchmatrix.execute.snakemake_run"]
    argv = [sys.executable, *prog, "b.txt", "--snakefile", str(tmp_path / "Snakefile"), "--directory", str(tmp_path),
            "--cores", "2", "--nolock", "--resources", "slots=1",
            *(["--forcerun", *forcerun] if forcerun else []), "--config", *config]
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    lines = [ln.replace(str(tmp_path), "DIR") for ln in (proc.stdout + proc.stderr).splitlines()
             if not _VOLATILE.search(ln)]
    return proc.returncode, lines


def _fresh(tmp_path: Path, name: str) -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "Snakefile").write_text(SNAKEFILE)
    return d


def test_the_api_run_does_what_the_snakemake_command_does(tmp_path):
    runs = {}
    for how in ("command", "api"):
        d = _fresh(tmp_path, how)
        first = _run(d, how, "number=41", "word=x/y.yaml", "fail=no")
        again = _run(d, how, "number=41", "word=x/y.yaml", "fail=no", forcerun=("a",))
        failed = _run(d, how, "number=41", "word=x/y.yaml", "fail=yes", forcerun=("b",))
        runs[how] = (first, again, failed, (d / "a.txt").read_text())
    command, api = runs["command"], runs["api"]
    assert [rc for rc, _ in command[:3]] == [rc for rc, _ in api[:3]] == [0, 0, 1]
    # --config values read as snakemake reads them (an int where it is one), --forcerun, --resources.
    assert api[3] == command[3] == "41 x/y.yaml 42\n"
    for (_, want), (_, got) in zip(command[:3], api[:3]):
        assert got == want
    assert any(line.startswith("Error in rule b:") for line in api[2][1])


def test_a_malformed_option_is_refused_with_its_name():
    with pytest.raises(SystemExit, match="--config takes KEY=VALUE, not 'spec'"):
        snakemake_run.main(["t", "--snakefile", "S", "--directory", ".", "--cores", "1", "--config", "spec"])


def test_the_process_ends_with_its_status_after_its_exit_handlers(tmp_path):
    # exit_now skips only the interpreter's teardown: exit handlers run and buffered output is kept.
    code = ("import atexit, sys\nfrom benchmatrix.execute.snakemake_run import exit_now\n"
            f"atexit.register(lambda: open({str(tmp_path / 'handler')!r}, 'w').write('ran'))\n"
            "sys.stdout.write('buffered, no newline')\nexit_now(3)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 3
    assert proc.stdout == "buffered, no newline"
    assert (tmp_path / "handler").read_text() == "ran"
