"""The command line's own promises (issue 24, item 6): help on every option, and shell
completion generated from the parser (shtab), so neither lags behind a new option."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys

import pytest

from benchmatrix.cli import build_parser


def _actions(parser: argparse.ArgumentParser, path: str):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _actions(sub, f"{path} {name}")
        else:
            yield path, action


def test_every_option_and_argument_has_help():
    missing = [f"{path} {'/'.join(a.option_strings) or a.dest}" for path, a in _actions(build_parser(), "bmx")
               if not a.help or a.help == argparse.SUPPRESS]
    assert not missing, missing


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_completion_is_generated_from_the_parser_and_loads():
    script = subprocess.run([sys.executable, "-m", "benchmatrix.cli", "--print-completion", "bash"],
                            capture_output=True, text=True, timeout=60, check=True).stdout
    for word in ("validate", "check", "export", "--campaign", "--format", "--detect"):
        assert word in script, word
    # Loaded into bash, it completes bmx; "bmx ex<TAB>" offers export.
    probe = (script + "\ncomplete -p bmx\nCOMP_WORDS=(bmx ex); COMP_CWORD=1; COMP_LINE='bmx ex'; COMP_POINT=6\n"
             "_shtab_bmx; printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    res = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "complete " in res.stdout and "export" in res.stdout.split(), res.stdout + res.stderr
