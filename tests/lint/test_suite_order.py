"""The suite's file order comes from measured seconds (tests/conftest.py)."""

from __future__ import annotations

import json

from conftest import FILE_SECONDS_JSON, ROOT, file_seconds


def test_the_committed_seconds_name_only_test_files_that_exist():
    # A file that moved keeps its weight only if its new path is measured again.
    named = json.loads(FILE_SECONDS_JSON.read_text())
    assert named, "tests/file_seconds.json is empty"
    missing = [path for path in named if not (ROOT / path).is_file()]
    assert missing == [], f"tests/file_seconds.json names files that do not exist: {missing}"


def test_the_last_run_overrides_the_committed_seconds(tmp_path, monkeypatch):
    import conftest

    committed, last = tmp_path / "committed.json", tmp_path / "last.json"
    committed.write_text(json.dumps({"tests/a.py": 10, "tests/b.py": 5}))
    last.write_text(json.dumps({"tests/b.py": 50}))
    monkeypatch.setattr(conftest, "FILE_SECONDS_JSON", committed)
    monkeypatch.setattr(conftest, "LAST_SECONDS", last)
    assert file_seconds() == {"tests/a.py": 10.0, "tests/b.py": 50.0}
    last.write_text("not json")
    assert file_seconds() == {"tests/a.py": 10.0, "tests/b.py": 5.0}


def test_every_end_to_end_file_has_committed_seconds():
    # A clean clone orders by the committed seconds alone: an end-to-end file missing from
    # them came after every measured file, and its minutes of campaigns ran last on one
    # worker while the other idled (test_across_time_e2e.py's 49 s set-up did).
    named = json.loads(FILE_SECONDS_JSON.read_text())
    e2e = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "e2e").glob("test_*.py"))
    missing = [path for path in e2e if path not in named]
    assert missing == [], f"tests/file_seconds.json lacks these end-to-end files (measure them): {missing}"


def test_a_measured_run_rewrites_the_committed_seconds(tmp_path, monkeypatch):
    # What `make test PYTEST_ARGS=--update-file-seconds` writes: this run's files replace
    # theirs, files it did not run keep theirs, files that no longer exist go; slowest first.
    import conftest

    committed = tmp_path / "file_seconds.json"
    committed.write_text(json.dumps({"tests/conftest.py": 3, "tests/moved_away.py": 9,
                                     "tests/lint/test_suite_order.py": 1}))
    monkeypatch.setattr(conftest, "FILE_SECONDS_JSON", committed)
    conftest.write_committed_seconds({"tests/lint/test_suite_order.py": 2.04, "tests/e2e/test_progress.py": 100.0})
    written = json.loads(committed.read_text())
    assert list(written.items()) == [("tests/e2e/test_progress.py", 100.0), ("tests/conftest.py", 3.0),
                                     ("tests/lint/test_suite_order.py", 2.0)]
