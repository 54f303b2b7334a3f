"""ansible-lint, production profile, over every playbook and role (settings: .ansible-lint)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # about 20 s

ROOT = Path(__file__).resolve().parents[2]


def test_ansible_lint_production_profile():
    lint = Path(sys.executable).parent / "ansible-lint"
    assert lint.exists(), "ansible-lint is missing: pip install -e '.[test]'"
    res = subprocess.run([str(lint), "--profile", "production", "--nocolor", "playbooks/"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    out = re.sub(r"\x1b\][^\x1b]*\x1b\\", "", res.stdout + res.stderr)
    assert res.returncode == 0, out[-6000:]
    assert "Profile 'production' was required, and it passed" in out, out[-2000:]
