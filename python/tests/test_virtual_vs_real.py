"""The virtual_vs_real study's verdicts: a real median is a reference only when enough clean, unshared runs back it."""

from __future__ import annotations

import pandas as pd

from alloclab.machines import machine
from alloclab.studies import virtual_vs_real as vvr


def runs(elapsed, **flags) -> pd.DataFrame:
    df = pd.DataFrame({"elapsed_s": elapsed})
    for name, values in flags.items():
        df[name] = values
    return df


def test_flagged_runs_leave_the_median_and_are_counted():
    df = runs([1.0] * 6 + [9.0], short_run=[False] * 6 + [True], overlap_poor=False, oversubscribed=False)
    row = vvr._row("s", 2, {}, df, virtual_s=1.1)
    assert (row["real_runs"], row["real_flagged"], row["real_median_s"]) == (6, 1, 1.0)
    assert (row["verdict"], row["within"]) == ("within", True)


def test_a_ratio_outside_the_band_is_a_miss():
    row = vvr._row("s", 1, {}, runs([2.0] * 6, oversubscribed=False), virtual_s=1.0)
    assert (row["verdict"], row["within"], row["ratio"]) == ("miss", False, 0.5)


def test_the_median_interval_is_the_order_statistics_of_95_percent():
    # Nine runs: the 2nd and 8th smallest bound the median with 96.1 % confidence (binomial, p = 1/2).
    times = pd.Series([9.0, 1.0, 8.0, 2.0, 7.0, 3.0, 6.0, 4.0, 5.0])
    assert vvr._median_interval(times) == (2.0, 8.0)


def test_a_spread_that_holds_both_verdicts_is_not_significant():
    # Median 1.0 puts virtual 0.7 outside the band (0.70), but the interval's upper end, 0.9 s, puts it inside.
    row = vvr._row("s", 2, {}, runs([0.5, 0.8, 0.9, 1.0, 1.0, 1.1, 1.2, 1.3, 3.0]), virtual_s=0.7)
    assert (row["verdict"], row["within"], row["ratio"]) == ("n.s.", None, 0.7)
    assert (row["real_ci_low_s"], row["real_ci_high_s"]) == (0.8, 1.3)
    assert row["why"] == (
        "the real median's 95% interval 0.8-1.3 s holds real times both within and outside +-25% of the virtual 0.7 s"
    )
    # The same spread around a virtual time far outside: every median in the interval calls it a miss.
    assert vvr._row("s", 2, {}, runs([0.5, 0.8, 0.9, 1.0, 1.0, 1.1, 1.2, 1.3, 3.0]), virtual_s=0.3)["verdict"] == "miss"


def test_seeds_that_hold_both_verdicts_are_not_significant():
    # Real median 1.0 with a tight interval; the seeds' virtual times 1.0-1.4 s lie both within the band (1.0) and
    # outside it (1.4): another interleaving would flip the verdict.
    real = runs([0.99, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.01])
    row = vvr._row("s", 2, {}, real, virtual_s=[1.0, 1.1, 1.2, 1.3, 1.4])
    assert (row["verdict"], row["virtual_s"], row["virtual_min_s"], row["virtual_max_s"]) == ("n.s.", 1.2, 1.0, 1.4)
    assert row["virtual_seeds"] == 5
    assert row["why"] == (
        "the real median's 95% interval 1-1 s holds real times both within and outside +-25% of the virtual 1-1.4 s "
        "(5 seeds)"
    )
    # The same seeds closer together: every pair is within the band.
    row = vvr._row("s", 2, {}, real, virtual_s=[1.0, 1.05, 1.1, 1.15, 1.2])
    assert (row["verdict"], row["within"], row["ratio"]) == ("within", True, 1.1)


def test_five_runs_cannot_bound_a_median_at_95_percent():
    row = vvr._row("s", 1, {}, runs([1.0] * 5), virtual_s=1.0)
    assert (row["verdict"], row["why"]) == ("n.s.", "5 clean real runs cannot bound the median at 95%")


def test_oversubscribed_real_runs_make_the_row_not_significant():
    row = vvr._row("s", 2, {}, runs([1.0] * 7, oversubscribed=[True] + [False] * 6), virtual_s=1.0)
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


def test_unsteady_shared_numbers_leave_only_the_1_worker_rows():
    # A 1-worker run never transfers a line or wakes a waiter, so only rows with more workers lose their reference.
    why = ["the host's transfer_ns.same_llc read 55-124 around the real runs, the profile's 53.8"]
    one = vvr._row("s", 1, {}, runs([1.0] * 6), virtual_s=1.0, unsteady=why)
    two = vvr._row("s", 2, {}, runs([1.0] * 6), virtual_s=1.0, unsteady=why)
    assert (one["verdict"], two["verdict"], two["why"]) == ("within", "n.s.", why[0])


def test_a_shared_number_of_wide_spread_is_unsteady():
    # The AMD VM of 2026-12-06: the CAS ping-pong between its two vCPUs read 23-27 ns in some calibration runs and
    # 124 ns in others. The clock is no shared number: its spread does not void a 2-worker row.
    wide = {"transfer_ns.same_llc": (26.7, 123.0, 124.0), "op_cycles.pause": (90.0, 99.0, 130.0)}
    assert vvr._unsteady(machine("host"), wide, []) == [
        "the host's transfer_ns.same_llc varied 26.7-124 (IQR, median 123) across the calibration's runs"
    ]


def test_a_line_transfer_that_moved_around_the_real_runs_is_unsteady():
    host = machine("host")
    assert host.value("transfer_ns.same_llc") == 53.8
    steady = [{"transfer_ns.same_llc": 55.0}, {"transfer_ns.same_llc": 60.0}]  # within 25 % of 53.8
    assert vvr._unsteady(host, {}, steady) == []
    moved = [{"transfer_ns.same_llc": 55.0, "transfer_ns.same_core": 9.0}, {"transfer_ns.same_llc": 124.0}]
    assert vvr._unsteady(host, {}, moved) == [  # a class the profile lacks is not compared
        "the host's transfer_ns.same_llc read 55-124 around the real runs, the profile's 53.8"
    ]
