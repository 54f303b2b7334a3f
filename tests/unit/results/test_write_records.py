"""A batch's records are written with one sync and still appear complete or not at all."""

from __future__ import annotations

import json

import pytest

from benchmatrix.layout import record_path
from benchmatrix.results.records import write_record, write_records


def _rec(run_id: str) -> dict:
    return {"run_id": run_id, "attempt": 1, "status": "ok", "metrics": {"x": {"value": 1.0, "unit": "s"}}}


def test_every_record_of_a_batch_is_in_place_and_no_temporary_file_is_left(tmp_path):
    paths = write_records(tmp_path, [_rec("a"), _rec("b")])
    assert paths == [record_path(tmp_path, "a", 1), record_path(tmp_path, "b", 1)]
    assert [json.loads(p.read_text())["run_id"] for p in paths] == ["a", "b"]
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["record.json", "record.json"]


def test_a_failure_half_way_leaves_no_record_of_the_batch_and_no_temporary_file(tmp_path):
    # The second run's directory cannot be made (a file stands where it would go).
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "b").write_text("in the way")
    with pytest.raises(OSError):
        write_records(tmp_path, [_rec("a"), _rec("b")])
    assert not record_path(tmp_path, "a", 1).exists()
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == ["b"]


def test_a_record_is_one_line_of_json_with_what_it_was_given(tmp_path):
    rec = {**_rec("a"), "started_at": "2026-12-04T04:00:00+00:00", "factors": {"io": "4k", "threads": 8}}
    write_record(tmp_path, rec)
    (path,) = write_records(tmp_path / "batch", [rec])
    for text in (record_path(tmp_path, "a", 1).read_text(), path.read_text()):
        assert text.endswith("}\n") and text.count("\n") == 1
        assert json.loads(text) == rec
