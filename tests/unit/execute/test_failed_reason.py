"""A failed run's reason names the tool's first error line, not only its last (issue 24).

fio with a misspelt option prints the error first and a hint after it; the reason in
runs.csv must carry the error. The stderr is real fio's (run here), not written by hand.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from benchmatrix.results.judge import judge as _judge
from benchmatrix.spec.load import load_spec

SPEC = """\
name: typo
factors:
  bs: [4k]
workload:
  role: workload_fio
  vars: {rw: read, bs: "{{ bs }}", size: 1m, iodeph: 4}
replicates: 1
"""


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_reason_shows_the_first_error_line_of_fio(tmp_path):
    spec_path = tmp_path / "typo.yaml"
    spec_path.write_text(SPEC)
    spec = load_spec(spec_path)
    stderr = tmp_path / "stderr"
    with stderr.open("w") as err:
        proc = subprocess.run(["fio", "--output-format=json", "--eta=never", "--name=x", "--iodeph=4",
                               "--size=1m", f"--filename={tmp_path / 'x.dat'}"],
                              stdout=subprocess.DEVNULL, stderr=err, timeout=60)
    assert proc.returncode != 0
    status, reason, _, _ = _judge(spec, {"outcome": "exited", "exit_code": proc.returncode}, "", stderr,
                                  lambda *a: None)
    assert status == "failed"
    assert "fio: unrecognized option '--iodeph=4'" in reason, reason
    # The hint after it stays too: it names the fix.
    assert "Did you mean iodepth?" in reason, reason
