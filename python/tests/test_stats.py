"""al.stats.compare on constructed data: medians, IQR, ratios, scipy's U-test p-values, too-few-repeats flag."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import mannwhitneyu

import alloclab as al
from alloclab.stats import min_p_value


def _table(samples: dict[str, list[float]], **extra) -> pd.DataFrame:
    rows = [{"variant": k, "t": v, "status": "ok", **extra} for k, vs in samples.items() for v in vs]
    return pd.DataFrame(rows)


def test_medians_ratios_and_p_values():
    base, fast = [10.0, 11.0, 12.0, 13.0, 14.0], [1.0, 2.0, 3.0, 4.0, 5.0]
    df = _table({"before": base, "after": fast})
    # rows that must be ignored: an error row and a NaN figure
    df = pd.concat(
        [df, pd.DataFrame([{"variant": "after", "t": 1000.0, "status": "error"}, {"variant": "after", "t": np.nan}])]
    )
    out = al.stats.compare(df, by="variant", metric="t")
    assert out["variant"].tolist() == ["before", "after"]
    b, a = out.iloc[0], out.iloc[1]
    assert b["n"] == 5 and a["n"] == 5
    assert b["median"] == 12.0 and a["median"] == 3.0
    assert (b["q1"], b["q3"], b["iqr"]) == (11.0, 13.0, 2.0)
    assert a["baseline"] == "before" and a["baseline_median"] == 12.0
    assert a["ratio"] == pytest.approx(0.25) and b["ratio"] == 1.0
    assert np.isnan(b["p_value"])
    assert a["p_value"] == pytest.approx(mannwhitneyu(fast, base, alternative="two-sided").pvalue)
    assert a["p_value"] == pytest.approx(2 / 252)  # exact: the samples do not overlap
    assert bool(a["significant"]) and not bool(a["too_few_repeats"])
    assert a["finding"] == "0.25x (p=0.0079)" and b["finding"] == "baseline"


def test_too_few_repeats_are_flagged():
    df = _table({"A": [1.0, 2.0, 3.0], "B": [7.0, 8.0, 9.0]})
    out = al.stats.compare(df, by="variant", metric="t")
    row = out.iloc[1]
    assert row["p_value"] == pytest.approx(0.1)  # the best a 3-vs-3 U test can do
    assert bool(row["too_few_repeats"]) and not bool(row["significant"])
    assert min_p_value(3, 3) == pytest.approx(0.1)
    assert min_p_value(4, 4) == pytest.approx(2 / 70)
    assert min_p_value(3, 3, "less") == pytest.approx(0.05)
    assert min_p_value(0, 5) == 1.0


def test_baseline_within_and_multi_column_by():
    rows = []
    for threads, scale in ((1, 1.0), (2, 10.0)):
        for kind, vals in (("spin", [1, 2, 3, 4]), ("mcs", [2, 4, 6, 8])):
            rows += [{"lock": kind, "threads": threads, "hold": 0, "x": scale * v} for v in vals]
    df = pd.DataFrame(rows)
    out = al.stats.compare(df, by="lock", metric="x", within="threads", baseline="mcs")
    assert out[["threads", "lock"]].values.tolist() == [[1, "spin"], [1, "mcs"], [2, "spin"], [2, "mcs"]]
    assert out["median"].tolist() == [2.5, 5.0, 25.0, 50.0]
    assert out["ratio"].tolist() == [0.5, 1.0, 0.5, 1.0]
    assert (out["baseline"] == "mcs").all()
    multi = al.stats.compare(df, by=["lock", "hold"], metric="x", baseline=("mcs", 0))
    assert multi["n"].tolist() == [8, 8]
    assert multi.loc[multi["lock"] == "mcs", "ratio"].item() == 1.0


def test_errors_name_the_problem():
    df = _table({"A": [1.0], "B": [2.0]})
    with pytest.raises(ValueError, match="nope"):
        al.stats.compare(df, by="nope", metric="t")
    with pytest.raises(ValueError, match="baseline"):
        al.stats.compare(df, by="variant", metric="t", baseline="C")
    with pytest.raises(ValueError, match="alternative"):
        al.stats.compare(df, by="variant", metric="t", alternative="sideways")


def test_compare_on_a_real_sweep_counts_only_ok_runs():
    # one worker does not fit a placement of two PUs: error rows
    df = al.sweep("lock_zoo", grid={"lock": ["spin", "mcs"], "threads": [1, 2]}, repeats=2, progress=False,
                  iterations=100, placement=[0, 1])  # fmt: skip
    out = al.stats.compare(df, by="lock", metric="acquisitions_per_s", within="threads")
    assert out.loc[out["threads"] == 1, "n"].tolist() == [0, 0]
    # Every ok run is compared or dropped as no measurement (its workers did not run together, or it was short).
    two = out[out["threads"] == 2]
    assert (two["n"] + two["dropped"]).tolist() == [2, 2]
    assert two["dropped"].tolist() == [
        int(df[(df["threads"] == 2) & (df["lock"] == k)][["overlap_poor", "short_run"]].any(axis=1).sum())
        for k in ("spin", "mcs")
    ]
    assert out["finding"].str.startswith("n.s.").sum() == 2  # the mcs rows: at most 2 runs each, never a finding
    assert two["finding"].tolist()[0] == "baseline"


def _flagged(**flags) -> pd.DataFrame:
    rows = [{"variant": "before", "t": 10.0 + i, "status": "ok"} for i in range(6)]
    rows += [{"variant": "after", "t": 1.0 + i, "status": "ok"} for i in range(6)]
    for i, (name, value) in enumerate(flags.items()):
        rows[6 + i][name] = value
    return pd.DataFrame(rows)


def test_a_finding_needs_significance_repeats_and_clean_runs():
    clean = al.stats.compare(_flagged(), by="variant", metric="t")
    after = clean.iloc[1]
    assert bool(after["significant"]) and after["finding"] == f"{after['ratio']:.3g}x (p={after['p_value']:.2g})"
    # A run whose workers did not run together is no measurement: dropped, counted, and the finding says so.
    poor = al.stats.compare(_flagged(overlap_poor=True), by="variant", metric="t").iloc[1]
    assert poor["n"] == 5 and poor["dropped"] == 1
    assert poor["finding"] == "n.s. (1 run(s) dropped: workers did not run together or too short)"
    # Too short to measure: the same.
    assert al.stats.compare(_flagged(short_run=True), by="variant", metric="t").iloc[1]["dropped"] == 1
    # An oversubscribed run anywhere in the comparison: never a finding, however small p is.
    over = al.stats.compare(_flagged(oversubscribed=True), by="variant", metric="t").iloc[1]
    assert over["p_value"] < 0.05 and not over["significant"] and over["finding"] == "n.s. (oversubscribed)"
    # Four repeats can reach p < 0.05 (2/70) but are fewer than five: n.s., with both numbers.
    few = _table({"A": [1.0, 2.0, 3.0, 4.0], "B": [7.0, 8.0, 9.0, 10.0]})
    row = al.stats.compare(few, by="variant", metric="t").iloc[1]
    assert row["p_value"] < 0.05 and row["finding"] == "n.s. (4 repeats < 5)"
    # Not significant: the p-value is the reason.
    same = al.stats.compare(_table({"A": [1.0, 3.0, 5.0, 7.0, 9.0], "B": [2.0, 4.0, 6.0, 8.0, 10.0]}), by="variant",
                            metric="t").iloc[1]  # fmt: skip
    assert same["finding"] == f"n.s. (p={same['p_value']:.2g})"


def test_repeats_of_a_deterministic_virtual_run_are_one_sample():
    # Five repeats of one seed in virtual time (costs="table") are five copies of one run: never a finding, however
    # far apart the variants are; five seeds are five interleavings, and the U-test decides.
    grid = {"lock": ["ticket", "mcs"]}
    options = dict(clock="virtual", machine="xeon-8380-2s", costs="table", threads=16, iterations=100, progress=False)
    copies = al.sweep("lock_zoo", grid=grid, repeats=5, **options)
    row = al.stats.compare(copies, by="lock", metric="acquisitions_per_s", baseline="ticket").iloc[1]
    assert (row["n"], row["copies"]) == (1, 8)
    assert row["finding"] == "n.s. (p=1; 1 repeats < 5; 8 repeat(s) of a deterministic run counted once: vary the seed)"
    seeds = al.sweep("lock_zoo", grid={**grid, "seed": [1, 2, 3, 4, 5]}, **options)
    row = al.stats.compare(seeds, by="lock", metric="acquisitions_per_s", baseline="ticket", digits=4).iloc[1]
    assert (row["n"], row["copies"]) == (5, 0) and row["significant"]
    assert row["finding"] == f"{row['ratio']:.4g}x (p={row['p_value']:.2g})"


def test_digits_is_checked():
    with pytest.raises(ValueError, match=r"digits: value out of range: 0 \(allowed: 1\.\.17\)"):
        al.stats.compare(_flagged(), by="variant", metric="t", digits=0)
