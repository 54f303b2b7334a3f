"""Matrix expansion and stable cell ids."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from benchmatrix.spec.matrix import Cell, cell_id_of, expand, level_key, matches


def values(cells: list[Cell]) -> list[dict]:
    return [c.factors for c in cells]


# ---------------------------------------------------------------- cross product

def test_cross_product_size_and_order():
    cells = expand({"a": [1, 2], "b": ["x", "y", "z"], "c": [True, False]})
    assert len(cells) == 12
    expected = [{"a": a, "b": b, "c": c}
                for a in [1, 2] for b in ["x", "y", "z"] for c in [True, False]]
    assert values(cells) == expected
    # Factor order inside every cell follows the declaration order.
    assert all(list(c.factors) == ["a", "b", "c"] for c in cells)
    assert not any(c.included for c in cells)


def test_first_factor_varies_slowest():
    cells = expand({"slow": ["s1", "s2"], "fast": [1, 2, 3]})
    assert [c.factors["slow"] for c in cells] == ["s1"] * 3 + ["s2"] * 3
    assert [c.factors["fast"] for c in cells] == [1, 2, 3, 1, 2, 3]


def test_declaration_order_sets_matrix_order():
    cells = expand({"fast": [1, 2, 3], "slow": ["s1", "s2"]})
    assert [c.factors["fast"] for c in cells] == [1, 1, 2, 2, 3, 3]


def test_single_factor():
    cells = expand({"a": ["only"]})
    assert values(cells) == [{"a": "only"}]


def test_cell_ids_are_unique_and_well_formed():
    cells = expand({"a": [1, 2, 3], "b": ["x", "y"], "c": [0.5, 1.5]})
    ids = [c.cell_id for c in cells]
    assert len(set(ids)) == len(ids) == 12
    assert all(re.fullmatch(r"c[0-9a-f]{10}", i) for i in ids)
    assert all(c.cell_id == cell_id_of(c.factors) for c in cells)


# ---------------------------------------------------------------- zip

def test_zip_pairs_by_index():
    cells = expand({"cores": [1, 2, 4], "threads": [2, 4, 8], "mode": ["a", "b"]},
                   zip_groups=[["cores", "threads"]])
    assert len(cells) == 6
    assert values(cells) == [
        {"cores": c, "threads": t, "mode": m}
        for c, t in [(1, 2), (2, 4), (4, 8)] for m in ["a", "b"]]


def test_zip_group_sits_at_its_first_member():
    cells = expand({"mode": ["a", "b"], "cores": [1, 2], "x": [0, 1], "threads": [2, 4]},
                   zip_groups=[["cores", "threads"]])
    assert len(cells) == 8
    # mode slowest, then the (cores, threads) pair, then x.
    assert [(c.factors["mode"], c.factors["cores"], c.factors["threads"], c.factors["x"])
            for c in cells] == [
        (m, c, t, x) for m in ["a", "b"] for c, t in [(1, 2), (2, 4)] for x in [0, 1]]
    assert all(list(c.factors) == ["mode", "cores", "x", "threads"] for c in cells)


def test_two_zip_groups():
    cells = expand({"a": [1, 2], "b": [10, 20], "c": ["x", "y", "z"], "d": ["X", "Y", "Z"]},
                   zip_groups=[["a", "b"], ["c", "d"]])
    assert len(cells) == 6
    for c in cells:
        assert c.factors["b"] == c.factors["a"] * 10
        assert c.factors["d"] == c.factors["c"].upper()


# ---------------------------------------------------------------- exclude

def test_exclude_scalar_value():
    cells = expand({"layout": ["contig", "frag"], "bs": ["8k", "64k"]},
                   exclude=[{"layout": "frag", "bs": "8k"}])
    assert values(cells) == [{"layout": "contig", "bs": "8k"}, {"layout": "contig", "bs": "64k"},
                             {"layout": "frag", "bs": "64k"}]


def test_exclude_single_key_drops_every_match():
    cells = expand({"a": [1, 2], "b": ["x", "y"]}, exclude=[{"a": 1}])
    assert values(cells) == [{"a": 2, "b": "x"}, {"a": 2, "b": "y"}]


def test_exclude_list_value_means_any_of():
    cells = expand({"a": [1, 2, 3], "b": ["x", "y"]}, exclude=[{"a": [1, 3], "b": "x"}])
    assert values(cells) == [{"a": 1, "b": "y"}, {"a": 2, "b": "x"}, {"a": 2, "b": "y"},
                             {"a": 3, "b": "y"}]


def test_exclude_several_entries():
    cells = expand({"a": [1, 2], "b": ["x", "y"]}, exclude=[{"a": 1, "b": "x"}, {"a": 2, "b": "y"}])
    assert values(cells) == [{"a": 1, "b": "y"}, {"a": 2, "b": "x"}]


def test_exclude_bool_does_not_match_int():
    cells = expand({"n": [0, 1, 2]}, exclude=[{"n": True}])
    assert values(cells) == [{"n": 0}, {"n": 1}, {"n": 2}]
    cells = expand({"n": [0, 1, 2]}, exclude=[{"n": False}])
    assert len(cells) == 3


def test_exclude_int_does_not_match_bool():
    cells = expand({"ht": [True, False]}, exclude=[{"ht": 1}])
    assert values(cells) == [{"ht": True}, {"ht": False}]
    cells = expand({"ht": [True, False]}, exclude=[{"ht": True}])
    assert values(cells) == [{"ht": False}]


def test_exclude_mixed_bool_and_int_levels():
    cells = expand({"v": [1, True, 0, False]}, exclude=[{"v": 1}])
    assert values(cells) == [{"v": True}, {"v": 0}, {"v": False}]
    cells = expand({"v": [1, True, 0, False]}, exclude=[{"v": [True, 0]}])
    assert values(cells) == [{"v": 1}, {"v": False}]


def test_exclude_int_matches_equal_float():
    assert matches({"a": 4}, {"a": 4.0})
    assert not matches({"a": 4}, {"a": "4"})


def test_exclude_string_does_not_match_number():
    cells = expand({"bs": ["4", 4]}, exclude=[{"bs": "4"}])
    assert values(cells) == [{"bs": 4}]


def test_exclude_with_zip():
    cells = expand({"a": [1, 2], "b": [10, 20], "c": ["x", "y"]}, zip_groups=[["a", "b"]],
                   exclude=[{"b": 20, "c": "y"}])
    assert values(cells) == [{"a": 1, "b": 10, "c": "x"}, {"a": 1, "b": 10, "c": "y"},
                             {"a": 2, "b": 20, "c": "x"}]


# ---------------------------------------------------------------- include

def test_include_adds_cell_with_out_of_list_level():
    cells = expand({"a": [1, 2], "b": ["x", "y"]}, include=[{"b": "z", "a": 128}])
    assert len(cells) == 5
    extra = cells[-1]
    assert extra.included
    assert extra.factors == {"a": 128, "b": "z"}
    assert list(extra.factors) == ["a", "b"]  # spec factor order, not the entry's
    assert extra.cell_id == cell_id_of({"a": 128, "b": "z"})
    assert not any(c.included for c in cells[:-1])


def test_include_duplicating_existing_cell_is_not_added_twice():
    cells = expand({"a": [1, 2], "b": ["x", "y"]}, include=[{"b": "x", "a": 1}])
    assert len(cells) == 4
    assert not any(c.included for c in cells)
    assert len({c.cell_id for c in cells}) == 4


def test_include_twice_the_same_new_cell_added_once():
    cells = expand({"a": [1, 2]}, include=[{"a": 3}, {"a": 3}])
    assert values(cells) == [{"a": 1}, {"a": 2}, {"a": 3}]


def test_include_bool_is_not_a_duplicate_of_int():
    cells = expand({"a": [1, 2]}, include=[{"a": True}])
    assert values(cells) == [{"a": 1}, {"a": 2}, {"a": True}]
    assert cells[-1].included


def test_include_brings_back_an_excluded_cell():
    cells = expand({"a": [1, 2]}, exclude=[{"a": 2}], include=[{"a": 2}])
    assert values(cells) == [{"a": 1}, {"a": 2}]
    assert cells[-1].included


# ---------------------------------------------------------------- cell ids

def test_cell_id_independent_of_key_order():
    assert cell_id_of({"a": 1, "b": "x", "c": True}) == cell_id_of({"c": True, "b": "x", "a": 1})
    one = expand({"a": [1, 2], "b": ["x", "y"]})
    two = expand({"b": ["x", "y"], "a": [1, 2]})
    assert {c.cell_id for c in one} == {c.cell_id for c in two}
    by_values = {tuple(sorted(c.factors.items())): c.cell_id for c in one}
    for c in two:
        assert by_values[tuple(sorted(c.factors.items()))] == c.cell_id


def test_cell_id_independent_of_other_cells():
    small = {tuple(c.factors.items()): c.cell_id for c in expand({"a": [1, 2], "b": ["x", "y"]})}
    big = {tuple(c.factors.items()): c.cell_id
           for c in expand({"a": [1, 2, 3], "b": ["w", "x", "y"]}, exclude=[{"a": 3, "b": "w"}])}
    for key, cid in small.items():
        assert big[key] == cid


def test_cell_id_same_for_included_and_matrix_cell():
    included = expand({"a": [1]}, include=[{"a": 2}])[-1]
    regular = expand({"a": [1, 2]})[-1]
    assert included.cell_id == regular.cell_id


def test_cell_id_changes_when_a_value_changes():
    base = cell_id_of({"a": 1, "b": "x"})
    assert cell_id_of({"a": 2, "b": "x"}) != base
    assert cell_id_of({"a": 1, "b": "y"}) != base
    assert cell_id_of({"a": 1, "b": "x", "c": 0}) != base
    assert cell_id_of({"a": 1}) != base


def test_cell_id_distinguishes_types():
    assert cell_id_of({"n": 4}) != cell_id_of({"n": "4"})
    assert cell_id_of({"n": 1}) != cell_id_of({"n": True})
    assert cell_id_of({"n": 0}) != cell_id_of({"n": False})
    assert cell_id_of({"n": "true"}) != cell_id_of({"n": True})


def test_cell_id_is_deterministic_across_processes():
    # A fixed value pins the canonical form: ids must never change between releases,
    # or finished results lose their cell.
    import hashlib
    import json
    canonical = json.dumps({"a": 1, "b": "x"}, sort_keys=True, separators=(",", ":"))
    assert cell_id_of({"b": "x", "a": 1}) == "c" + hashlib.sha256(canonical.encode()).hexdigest()[:10]


# ---------------------------------------------------------------- same level, same cell (issue 12 item 12)

def test_whole_float_level_has_the_cell_id_of_the_int():
    assert cell_id_of({"bs": 4096.0, "rw": "read"}) == cell_id_of({"bs": 4096, "rw": "read"})
    assert cell_id_of({"n": -0.0}) == cell_id_of({"n": 0})


def test_plain_level_ids_are_unchanged():
    # Pinned values of the canonical form before numeric normalisation: ints, strings,
    # bools and fractional floats keep their ids (finished results keep their cell).
    import hashlib
    import json
    for factors in ({"a": 1, "b": "x"}, {"f": 0.5, "t": True}, {"big": 10**20, "s": "4096.0"}):
        canonical = json.dumps(factors, sort_keys=True, separators=(",", ":"))
        assert cell_id_of(factors) == "c" + hashlib.sha256(canonical.encode()).hexdigest()[:10]


def test_fractional_and_bool_levels_stay_distinct():
    assert cell_id_of({"n": 1.5}) != cell_id_of({"n": 1})
    assert cell_id_of({"n": 1.0}) != cell_id_of({"n": True})
    assert cell_id_of({"n": 4096.0}) != cell_id_of({"n": "4096"})


def test_include_of_whole_float_does_not_duplicate_the_int_cell():
    cells = expand({"a": [1, 2], "b": ["x"]}, include=[{"a": 1.0, "b": "x"}])
    assert len(cells) == 2
    assert not any(c.included for c in cells)


def test_included_cell_carries_the_declared_level():
    cells = expand({"a": [1, 2], "b": ["x"]}, include=[{"a": 1.0, "b": "z"}])
    assert cells[-1].included and cells[-1].factors == {"a": 1, "b": "z"}
    assert type(cells[-1].factors["a"]) is int  # plan.csv and knob settings see one spelling


def test_level_key_makes_equal_numbers_collide():
    assert level_key(4096) == level_key(4096.0)
    assert level_key(1) != level_key(True)
    assert level_key(4) != level_key("4")


level = st.one_of(st.integers(-5, 5), st.booleans(), st.sampled_from(["a", "b", "4", "true"]))


@given(st.dictionaries(st.sampled_from(["f1", "f2", "f3"]), st.lists(level, min_size=1, max_size=3,
                                                                       unique_by=lambda v: (type(v), v)),
                       min_size=1, max_size=3))
def test_expand_property(factors):
    cells = expand(factors)
    n = 1
    for levels in factors.values():
        n *= len(levels)
    assert len(cells) == n
    assert len({c.cell_id for c in cells}) == n
    for c in cells:
        assert c.cell_id == cell_id_of(dict(reversed(list(c.factors.items()))))
