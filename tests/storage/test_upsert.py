"""Keyed upsert of a growing table (storage.artifacts.upsert_rows) against a brute-force reference."""

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.artifacts import upsert_rows

rows = st.lists(st.tuples(st.integers(0, 4), st.sampled_from(["a", "b"]), st.integers(0, 99)), max_size=12)


def _frame(rs):
    return pl.DataFrame(rs, schema={"k1": pl.Int64, "k2": pl.String, "v": pl.Int64}, orient="row")


@settings(max_examples=150, deadline=None)
@given(stored=rows, new=rows)
def test_upsert_matches_a_dictionary_merge(stored, new):
    ref: dict = {}
    for k1, k2, v in stored:
        ref.setdefault((k1, k2), v)  # a stored table has unique keys: keep the first
    stored_unique = [(k1, k2, v) for (k1, k2), v in ref.items()]
    new_keys = {(k1, k2) for k1, k2, _ in new}
    for k1, k2, v in new:
        ref[(k1, k2)] = v  # the last new row of a key wins
    out = upsert_rows(_frame(stored_unique), _frame(new), ("k1", "k2"))
    got = {(a, b): v for a, b, v in out.frame.iter_rows()}
    assert got == ref and out.frame.height == len(ref)
    assert out.kept == len([1 for k1, k2, _ in stored_unique if (k1, k2) not in new_keys])
    assert out.replaced == len([1 for k1, k2, _ in stored_unique if (k1, k2) in new_keys])
    assert out.added == len(new_keys) - out.replaced
    # stored rows the run did not touch are kept unchanged
    for k1, k2, v in stored_unique:
        if (k1, k2) not in new_keys:
            assert got[(k1, k2)] == v


def test_a_missing_key_column_is_an_error_not_a_silent_merge():
    with pytest.raises(KeyError, match="stored rows lack key"):
        upsert_rows(pl.DataFrame({"k1": [1]}), _frame([(1, "a", 2)]), ("k1", "k2"))
