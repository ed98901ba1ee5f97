"""The virtual_vs_real study's verdicts: a real median is a reference only when enough clean, unshared runs back it."""

from __future__ import annotations

import pandas as pd

from alloclab.studies import virtual_vs_real as vvr


def runs(elapsed, **flags) -> pd.DataFrame:
    df = pd.DataFrame({"elapsed_s": elapsed})
    for name, values in flags.items():
        df[name] = values
    return df


def test_flagged_runs_leave_the_median_and_are_counted():
    df = runs([1.0, 1.0, 1.0, 1.0, 1.0, 9.0], short_run=[False] * 5 + [True], overlap_poor=False, oversubscribed=False)
    row = vvr._row("s", 2, {}, df, virtual_s=1.1)
    assert (row["real_runs"], row["real_flagged"], row["real_median_s"]) == (5, 1, 1.0)
    assert (row["verdict"], row["within"]) == ("within", True)


def test_a_ratio_outside_the_band_is_a_miss():
    row = vvr._row("s", 1, {}, runs([2.0] * 5, oversubscribed=False), virtual_s=1.0)
    assert (row["verdict"], row["within"], row["ratio"]) == ("miss", False, 0.5)


def test_oversubscribed_real_runs_make_the_row_not_significant():
    row = vvr._row("s", 2, {}, runs([1.0] * 6, oversubscribed=[True] + [False] * 5), virtual_s=1.0)
    assert (row["verdict"], row["within"]) == ("n.s.", None)
    assert row["why"] == "1 real runs oversubscribed"


def test_too_few_clean_runs_make_the_row_not_significant():
    row = vvr._row("s", 1, {}, runs([1.0] * 5, overlap_poor=[True, True, False, False, False]), virtual_s=1.0)
    assert row["verdict"] == "n.s."
    assert row["why"] == "3 clean real runs of 5, need 5"


def test_a_variant_row_names_its_settings():
    row = vvr._row("lock_zoo", 2, {"lines": 4}, runs([1.0] * 5, oversubscribed=False), 1.0, vvr._label({"lines": 4}))
    assert row["variant"] == "lines=4"
    assert vvr._case(pd.Series(row)) == "lock_zoo[lines=4]"
    assert vvr._case(pd.Series(vvr._row("pcp_refill", 1, {}, runs([1.0] * 5), 1.0))) == "pcp_refill"
