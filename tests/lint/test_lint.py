"""The lint targets of `make lint`, as part of the suite: ruff on the Python code, snakefmt and
``snakemake --lint`` on the workflow, ansible-lint (production profile) on the playbooks and roles."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import copy_project

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# snakemake --lint asks every rule for a conda environment or a container. It does not
# apply here: the rules reconfigure and measure real hosts through Ansible with the
# project's own virtualenv, and a container or conda environment around them would
# change neither what runs on the hosts nor how it is measured. Any other lint fails.
ALLOWED_SNAKEMAKE_LINTS = {"Specify a conda environment or container for each rule."}


def tool(name: str) -> str:
    path = BIN / name
    assert path.exists(), f"{name} is missing: pip install -e '.[test]'"
    return str(path)


def run(argv: list[str], cwd: Path = ROOT, timeout: float = 600) -> tuple[int, str]:
    res = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    # Strip colour and hyperlink escapes so messages read plainly in a failure.
    return res.returncode, re.sub(r"\x1b\][^\x1b]*\x1b\\|\x1b\[[0-9;]*m", "", res.stdout + res.stderr)


def test_ruff_clean():
    rc, out = run([tool("ruff"), "check", "--no-cache", "benchmatrix", "tests", "bench", "scripts"])
    assert rc == 0, out[-6000:]


def test_snakefmt_clean():
    rc, out = run([tool("snakefmt"), "--check", "Snakefile", "workflow/"])
    assert rc == 0, out[-6000:]


def snakemake_lints(text: str) -> dict[str, set[str]]:
    """``snakemake --lint`` text output -> {lint title: {where it was found}}."""
    lints: dict[str, set[str]] = {}
    where = ""
    for line in text.splitlines():
        head = re.match(r"^Lints for (.+?):\s*$", line)
        item = re.match(r"^\s+\* (.+?):\s*$", line)
        if head:
            where = head.group(1)
        elif item:
            lints.setdefault(item.group(1), set()).add(where)
    return lints


def test_snakemake_lint_parser_reads_titles_and_places():
    text = ("Lints for rule plan (line 4, /p/workflow/rules/plan.smk):\n"
            "    * Specify a conda environment or container for each rule.:\n"
            "      This way, the used software ...\n"
            "Lints for snakefile /p/Snakefile:\n"
            "    * Absolute path \"/tmp\" in line 3:\n")
    assert snakemake_lints(text) == {
        "Specify a conda environment or container for each rule.": {"rule plan (line 4, /p/workflow/rules/plan.smk)"},
        'Absolute path "/tmp" in line 3': {"snakefile /p/Snakefile"}}


@pytest.mark.slow  # about 5-8 s: loads the whole workflow
def test_snakemake_lint_only_the_allowed_lint(tmp_path):
    project = copy_project(tmp_path)
    rc, out = run([tool("snakemake"), "--lint", "--config", "spec=config/experiments/quickstart.yaml"],
                  cwd=project.root, timeout=300)
    lints = snakemake_lints(out)
    if rc != 0:
        # A failing lint run must have been a lint report, not a workflow that did not load.
        assert lints, out[-6000:]
    other = {title: places for title, places in lints.items() if title not in ALLOWED_SNAKEMAKE_LINTS}
    assert not other, out[-6000:]


@pytest.mark.slow  # about 20 s
def test_ansible_lint_production_profile():
    rc, out = run([tool("ansible-lint"), "--profile", "production", "--nocolor", "playbooks/"])
    assert rc == 0, out[-6000:]
    assert "Profile 'production' was required, and it passed" in out, out[-2000:]
