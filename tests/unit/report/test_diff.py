"""Field-level differences for people (benchmatrix.report.diff)."""

from __future__ import annotations

from benchmatrix.report.diff import differences, flatten, grouped, short, without


def test_nested_values_flatten_to_dotted_paths_of_their_leaves():
    value = {"role": "w", "argv": ["fio", "--bs=8k"], "before_run": [{"action": "sync"}], "vars": {}, "x": None}
    assert flatten(value) == {("role",): "w", ("argv", "0"): "fio", ("argv", "1"): "--bs=8k",
                              ("before_run", "0", "action"): "sync", ("vars",): {}, ("x",): None}
    assert flatten(3) == {(): 3}


def test_only_the_leaves_that_differ_are_listed_with_their_dotted_path():
    a = {"vars": {"filename": "/a", "bs": "8k", "size": "256m"}, "before_run": ["drop_caches"]}
    b = {"vars": {"filename": "/b", "bs": "8k", "direct": 1}, "before_run": ["drop_caches", "sync"]}
    assert differences(a, b, "workload") == [
        ("workload.vars.filename", "/a", "/b"),
        ("workload.vars.size", "256m", "(absent)"),
        ("workload.vars.direct", "(absent)", "1"),
        ("workload.before_run.1", "(absent)", "sync"),
    ]
    assert differences(a, a) == []
    # Scalars are written as JSON (a number and its text differ; null is null).
    assert differences({"v": 1, "n": None}, {"v": "1", "n": False}) == [("v", "1", '"1"'), ("n", "null", "false")]


def test_each_side_may_hold_several_variants_and_only_differing_paths_count():
    a = [{"argv": ["x", "1"]}, {"argv": ["x", "2"]}]
    b = [{"argv": ["x", "2"]}, {"argv": ["x", "1"]}]
    assert differences(a, b, "workload", variants=True) == []
    c = [{"argv": ["y", "1"]}, {"argv": ["y", "2"]}]
    assert differences(a, c, "workload", variants=True) == [("workload.argv.0", "x", "y")]
    d = [{"argv": ["x", "1"]}, {"argv": ["x", "3"]}]
    assert differences(a, d, "workload", variants=True) == [("workload.argv.1", "1 | 2", "1 | 3")]


def test_long_values_are_cut_to_about_80_characters():
    text = "x" * 200
    assert short(text) == "x" * 79 + "…" and len(short(text)) == 80
    assert short("short") == "short"
    ((_, a, b),) = differences({"argv": "a" * 300}, {"argv": "b" * 300})
    assert len(a) == len(b) == 80


def test_without_drops_keys_wherever_they_occur():
    value = {"before_run": [{"action": "sync", "seconds": 0.1}], "seconds": 2, "argv": ["seconds"]}
    assert without(value, lambda k: k == "seconds") == {"before_run": [{"action": "sync"}], "argv": ["seconds"]}


def test_the_same_difference_in_many_cells_is_one_line():
    rows = [{"kind": "measurement", "scope": "spec", "host": "", "cell_id": "", "what": "workload.vars.bs",
             "a": "8k", "b": "64k"}]
    rows += [{"kind": "measurement", "scope": "cell", "host": "h1", "cell_id": f"c{i}", "what": "workload.argv.3",
              "a": "--bs=8k", "b": "--bs=64k"} for i in range(6)]
    rows.append({"kind": "measurement", "scope": "cell", "host": "h2", "cell_id": "c0", "what": "workload.argv.3",
                 "a": "--bs=8k", "b": "--bs=64k"})
    assert grouped(rows) == [
        {"where": "spec", "what": "workload.vars.bs", "a": "8k", "b": "64k"},
        {"where": "cells c0, c1, c2 and 3 more on h1", "what": "workload.argv.3", "a": "--bs=8k", "b": "--bs=64k"},
        {"where": "cell c0 on h2", "what": "workload.argv.3", "a": "--bs=8k", "b": "--bs=64k"},
    ]
    host = {"kind": "environment", "scope": "host", "host": "h1", "cell_id": "", "what": "kernel", "a": "6.1",
            "b": "6.6"}
    assert grouped([host]) == [{"where": "h1", "what": "kernel", "a": "6.1", "b": "6.6"}]
