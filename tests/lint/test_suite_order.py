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
