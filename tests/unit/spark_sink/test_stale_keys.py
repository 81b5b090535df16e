"""The keys a re-sync's chunk leaves out of the rows it removes: runs of keys as ranges, and a bound on them."""

from __future__ import annotations

from spark_sink.upsert import STALE_TERMS, _kept


def test_runs_of_noted_keys_are_left_out_as_ranges_and_single_keys_in_one_list():
    assert _kept("`id`", "", [2, 3, 4, 6, 9, 10]) == ["`id` NOT IN (6)", "`id` NOT BETWEEN 2 AND 4",
                                                      "`id` NOT BETWEEN 9 AND 10"]
    assert _kept("`id`", "BD", [5]) == ["`id` NOT IN (5BD)"]
    assert _kept("`id`", "", []) == []


def test_a_million_keys_in_one_run_cost_one_term_and_too_many_runs_leave_the_rows():
    assert _kept("`id`", "", list(range(1_000_000))) == ["`id` NOT BETWEEN 0 AND 999999"]
    assert _kept("`id`", "", list(range(0, 2 * STALE_TERMS, 2))) is not None
    assert _kept("`id`", "", list(range(0, 2 * STALE_TERMS + 2, 2))) is None
