"""A run is judged the same from the bytes its batch job kept as from its files
(issue 34: the batch job no longer reads stdout, stderr and counters.json back)."""

from __future__ import annotations

from pathlib import Path

import pytest
from campaign_factory import SPEC, project_root

from benchmatrix.results.judge import judge, run_file_text
from benchmatrix.spec.load import load_spec
from benchmatrix.workloads import WORKLOADS

ROOT = Path(__file__).resolve().parents[3]

FIXTURES = ROOT / "tests" / "fixtures" / "counters"


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    root = tmp_path_factory.mktemp("project")
    project_root(root)
    path = root / "config" / "experiments" / "synth.yaml"
    # success criteria on stderr too: judging reads it
    path.write_text(SPEC.format(name="synth").replace("  timeout: 60\n",
                                                      "  timeout: 60\n  success: {forbidden_line: '^fatal'}\n"))
    return load_spec(path)


def files(tmp_path: Path, stdout: bytes, stderr: bytes, counters: bytes | None) -> dict[str, bytes]:
    kept = {"stdout": stdout, "stderr": stderr}
    if counters is not None:
        kept["counters.json"] = counters
    for name, data in kept.items():
        (tmp_path / name).write_bytes(data)
    return kept


@pytest.mark.parametrize(("stdout", "stderr", "counters", "status"), [
    (b"v=12.5\r\nrest\n", b"warning: \xff odd byte\n", (FIXTURES / "dd_short.json").read_bytes(), "ok"),
    (b"v=3\n", b"", None, "ok"),
    (b"v=3\n", b"fatal: it broke\r\n", None, "failed"),
    (b"nothing to parse\n", b"", (FIXTURES / "truncated.json").read_bytes(), "failed"),
])
def test_judged_from_kept_bytes_as_from_files(spec, tmp_path, stdout, stderr, counters, status):
    kept = files(tmp_path, stdout, stderr, counters)
    res = {"outcome": "exited", "exit_code": 0}
    parse = WORKLOADS[spec.workload["role"]].parse
    text = run_file_text(None, "stdout", tmp_path / "stdout")
    assert run_file_text(kept, "stdout", tmp_path / "nowhere") == text
    from_files = judge(spec, res, text, tmp_path / "stderr", parse)
    from_kept = judge(spec, res, text, tmp_path / "stderr", parse, kept)
    assert from_kept == from_files and from_kept[0] == status


def test_a_file_not_kept_is_read_and_one_absent_is_none(tmp_path):
    (tmp_path / "stdout").write_bytes(b"big\r\n")
    assert run_file_text({"stdout": None}, "stdout", tmp_path / "stdout") == "big\n"
    assert run_file_text({}, "stdout", tmp_path / "stdout") is None  # the archive had no such file
    assert run_file_text(None, "stderr", tmp_path / "stderr") is None
