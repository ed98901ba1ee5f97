"""Comparing variants: :func:`compare` (medians, IQR, ratio to a baseline, Mann-Whitney U, a finding or "n.s.").

In the spirit of Google Benchmark's ``compare.py``: a variant differs from the baseline when the two samples
of repeats differ by a two-sided Mann-Whitney U test. A ratio is a *finding* only when that test is significant
with at least :data:`MIN_REPEATS` repeats on each side, no run was oversubscribed, and the runs it rests on were
measurements (runs whose workers did not run together, or that were too short to measure, are dropped and
counted), each one sample (a deterministic virtual run repeated with one seed is one, however many rows it has).
Otherwise the comparison says ``n.s.`` and why (:func:`finding`).
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb
from typing import Any

import numpy as np
import pandas as pd

from ._checks import check_int

__all__ = ["FLAG_COLUMNS", "MIN_REPEATS", "compare", "finding", "min_p_value", "sample"]

#: Repeats each side needs before a difference can be called a finding.
MIN_REPEATS = 5
#: Per-run flags (summary columns of :func:`alloclab.run`) that make a run no measurement: it is dropped.
FLAG_COLUMNS = ("overlap_poor", "short_run")


def min_p_value(n1: int, n2: int, alternative: str = "two-sided") -> float:
    """The smallest p-value an exact Mann-Whitney U test can give for samples of sizes ``n1`` and ``n2``.

    Args:
        n1: size of the first sample.
        n2: size of the second sample.
        alternative: ``"two-sided"``, ``"less"`` or ``"greater"``.

    Returns:
        ``2 / C(n1 + n2, n1)`` for a two-sided test (at most 1), ``1 / C(n1 + n2, n1)`` for a one-sided one;
        1.0 when a sample is empty. With 3 repeats on each side this is 0.1: no result can reach 0.05.
    """
    if n1 < 1 or n2 < 1:
        return 1.0
    tails = 2 if alternative == "two-sided" else 1
    return min(1.0, tails / comb(n1 + n2, n1))


def compare(
    df: pd.DataFrame,
    by: str | Sequence[str],
    metric: str,
    *,
    baseline: Any = None,
    within: str | Sequence[str] | None = None,
    alpha: float = 0.05,
    alternative: str = "two-sided",
    min_repeats: int = MIN_REPEATS,
    across_hosts: bool = False,
    digits: int = 3,
) -> pd.DataFrame:
    """Compare the groups of ``by`` on ``metric``: median, IQR, ratio to a baseline, a U-test p-value and a finding.

    Rows whose ``status`` (when the column exists) is not ``"ok"`` and NaN values of ``metric`` are left out; so
    are runs flagged by a :data:`FLAG_COLUMNS` column (counted in ``dropped``). A deterministic run (virtual clock,
    ``costs="table"``: ``host_independent``) repeated with one seed is one sample, however many rows it has
    (counted in ``copies``): its repeats are copies, not evidence, and only other seeds (other interleavings) are.

    Args:
        df: a tidy table such as :func:`alloclab.sweep` returns (one row per run).
        by: the column (or columns) whose values are the variants, e.g. ``"lock"`` or ``"alloc_mutex"``.
        metric: the figure to compare, e.g. ``"acquisitions_per_s"`` or ``"elapsed_s"``.
        baseline: the ``by`` value (a tuple when ``by`` has several columns) the others are compared with;
            ``None`` means the first value in the table's order.
        within: columns that define separate comparisons, e.g. ``"threads"`` compares the variants at each
            thread count on its own. ``None``: one comparison over the whole table.
        alpha: significance level for the ``significant`` and ``too_few_repeats`` columns.
        alternative: passed to :func:`scipy.stats.mannwhitneyu` (``"two-sided"``, ``"less"``, ``"greater"``;
            one-sided alternatives are about the variant relative to the baseline).
        min_repeats: runs each side needs before a difference is a finding.
        across_hosts: compare host timings from different hosts. By default the rows compared (when the table
            has the ``host`` columns of :data:`alloclab.cluster.HOST_COLUMNS`) must all come from one host (same
            hostname, CPU model, topology digest and kernel), except rows whose figures do not depend on the host
            (``host_independent``: virtual clock with ``costs="table"``): a timing on one machine against a timing
            on another measures the machines, not the variants.
        digits: significant digits of the ratio in ``finding`` (3: ``"0.394x"``; a gain of a few percent needs 4).

    Returns:
        One row per (``within`` values, variant): the ``within`` and ``by`` columns, ``n``, ``median``, ``q1``,
        ``q3``, ``iqr``, ``baseline`` (the baseline's ``by`` value), ``baseline_median``, ``ratio`` (median /
        baseline median), ``p_value`` (Mann-Whitney U of variant vs baseline from scipy; NaN for the baseline
        itself or an empty group), ``significant`` (``p_value < alpha``) and ``too_few_repeats`` (True when the
        smallest p-value the test could give for these sample sizes is not below ``alpha``, see
        :func:`min_p_value`: the comparison cannot show a difference whatever the data; always False on the
        baseline's own row), ``dropped`` (runs of the group left out by a flag), ``copies`` (rows of the group
        and its baseline that repeat a deterministic run, counted once), ``oversubscribed`` (some run of
        the group or of its baseline was, when the table has that column), ``finding`` (the ratio with its
        p-value when it is one, else ``"n.s. (reasons)"``; ``"baseline"`` on the baseline's row) and
        ``significant`` (the finding holds: p < alpha, enough repeats, nothing oversubscribed).

    Raises:
        ValueError: a named column is missing, ``baseline`` is not among the values of ``by``, or the timed rows
            come from more than one host and ``across_hosts`` is False.
    """
    from scipy.stats import mannwhitneyu

    by_cols = [by] if isinstance(by, str) else list(by)
    within_cols = [] if within is None else ([within] if isinstance(within, str) else list(within))
    for col in [*by_cols, *within_cols, metric]:
        if col not in df.columns:
            raise ValueError(f"{col}: no such column (columns: {', '.join(map(str, df.columns))})")
    if alternative not in ("two-sided", "less", "greater"):
        raise ValueError(f"alternative: expected 'two-sided', 'less' or 'greater', got {alternative!r}")
    check_int("digits", digits, 1, 17)

    data = _ok(df, metric)
    if not across_hosts and "host" not in by_cols and "host" not in within_cols:
        _one_host(data)
    dropped_rows, data = _split_flagged(data)

    def key_of(row_values: Sequence[Any]) -> Any:
        return row_values[0] if len(by_cols) == 1 else tuple(row_values)

    all_variants = list(dict.fromkeys(key_of(v) for v in df[by_cols].itertuples(index=False, name=None)))
    if baseline is None:
        if not all_variants:
            raise ValueError(f"{metric}: no rows to compare")
        baseline = all_variants[0]
    elif baseline not in all_variants:
        raise ValueError(f"baseline: {baseline!r} is not a value of {by!r} (values: {all_variants})")

    def select(part: pd.DataFrame, variant: Any) -> pd.DataFrame:
        mask = np.ones(len(part), dtype=bool)
        values = (variant,) if len(by_cols) == 1 else variant
        for col, val in zip(by_cols, values, strict=True):
            mask &= (part[col] == val).to_numpy()
        return part[mask]

    def over(part: pd.DataFrame) -> bool:
        return "oversubscribed" in part.columns and bool(part["oversubscribed"].fillna(False).astype(bool).any())

    groups = [((), data, dropped_rows, df)] if not within_cols else _groups(data, within_cols, df, dropped_rows)
    rows = []
    for within_key, part, dropped_part, planned in groups:
        samples: dict[Any, np.ndarray] = {}
        oversubscribed: dict[Any, bool] = {}
        copies: dict[Any, int] = {}
        for variant in all_variants:
            chosen = select(part, variant)
            unique = _one_per_run(chosen, metric)
            copies[variant] = len(chosen) - len(unique)
            samples[variant] = unique[metric].astype(float).to_numpy()
            oversubscribed[variant] = over(chosen) or over(select(dropped_part, variant))
        base = samples[baseline]
        base_median = float(np.median(base)) if len(base) else float("nan")
        for variant in all_variants:
            if variant != baseline and not len(select(planned, variant)):
                continue  # this variant was never run in this group (another grid per group)
            x = samples[variant]
            row: dict[str, Any] = dict(zip(within_cols, within_key, strict=True))
            row.update(dict(zip(by_cols, (variant,) if len(by_cols) == 1 else variant, strict=True)))
            row.update(_describe(x))
            row["baseline"] = baseline
            row["baseline_median"] = base_median
            row["ratio"] = row["median"] / base_median if len(x) and base_median != 0 else float("nan")
            if variant == baseline or not len(x) or not len(base):
                p = float("nan")
            else:
                p = float(mannwhitneyu(x, base, alternative=alternative).pvalue)
            row["p_value"] = p
            row["too_few_repeats"] = (
                False if variant == baseline else min_p_value(len(x), len(base), alternative) >= alpha
            )
            row["dropped"] = len(select(dropped_part, variant))
            row["copies"] = copies[variant] + (0 if variant == baseline else copies[baseline])
            if "oversubscribed" in df.columns:
                row["oversubscribed"] = oversubscribed[variant] or oversubscribed[baseline]
            text, holds = finding(row, is_baseline=variant == baseline, alpha=alpha, min_repeats=min_repeats,
                                  base_n=len(base), digits=digits)  # fmt: skip
            row["finding"] = text
            row["significant"] = holds
            rows.append(row)
    return pd.DataFrame(rows)


def finding(
    row: dict[str, Any] | pd.Series,
    *,
    is_baseline: bool = False,
    alpha: float = 0.05,
    min_repeats: int = MIN_REPEATS,
    base_n: int | None = None,
    digits: int = 3,
) -> tuple[str, bool]:
    """How a comparison row may be reported: its ratio as a finding, or ``"n.s."`` with every reason.

    Args:
        row: a row of :func:`compare` (``ratio``, ``p_value``, ``n``, and ``dropped``/``oversubscribed`` when
            present).
        is_baseline: the row is the baseline itself.
        alpha: the significance level.
        min_repeats: runs each side needs.
        base_n: runs of the baseline (default: ``row["n"]``).
        digits: significant digits of the ratio.

    Returns:
        ``(text, holds)``: e.g. ``("0.394x (p=0.0079)", True)`` or ``("n.s. (p=0.33; 3 repeats < 5)", False)``.
    """
    if is_baseline:
        return "baseline", False
    n = int(row.get("n", 0))
    base_n = n if base_n is None else base_n
    p = row.get("p_value", float("nan"))
    reasons = []
    if n == 0 or base_n == 0:
        reasons.append("no runs to compare")
    elif np.isnan(p) or p >= alpha:
        reasons.append(f"p={p:.2g}" if not np.isnan(p) else "no p-value")
    if 0 < min(n, base_n) < min_repeats:
        reasons.append(f"{min(n, base_n)} repeats < {min_repeats}")
    if bool(row.get("oversubscribed", False)):
        reasons.append("oversubscribed")
    if int(row.get("dropped", 0) or 0):
        reasons.append(f"{int(row['dropped'])} run(s) dropped: workers did not run together or too short")
    if reasons and int(row.get("copies", 0) or 0):
        reasons.append(f"{int(row['copies'])} repeat(s) of a deterministic run counted once: vary the seed")
    if reasons:
        return "n.s. (" + "; ".join(reasons) + ")", False
    return f"{row['ratio']:.{digits}g}x (p={p:.2g})", True


#: The columns that name a row's host (the rest of :data:`alloclab.cluster.HOST_COLUMNS`).
_HOST_IDENTITY = ("host", "host_cpu", "host_topology", "host_kernel")


def _one_host(data: pd.DataFrame) -> None:
    """Raises ValueError when the rows timed by their host (not ``host_independent``) come from several hosts."""
    cols = [c for c in _HOST_IDENTITY if c in data.columns]
    if not cols:
        return
    timed = data
    if "host_independent" in data.columns:
        timed = data[~data["host_independent"].fillna(False).astype(bool).to_numpy()]
    hosts = list(dict.fromkeys(timed[cols].astype(str).itertuples(index=False, name=None)))
    if len(hosts) > 1:
        names = "; ".join(" / ".join(h) for h in hosts)
        raise ValueError(
            f"across_hosts: the rows compared were timed on {len(hosts)} hosts ({names}); timings from different "
            "machines are not samples of one variant. Compare per host (within='host'), or pass across_hosts=True"
        )


def sample(rows: pd.DataFrame, metric: str) -> np.ndarray:
    """The values of ``metric`` that :func:`compare` rests on for ``rows`` (one variant of one comparison): the ok
    runs with a value, without the flagged ones (:data:`FLAG_COLUMNS`), each deterministic run once."""
    _, kept = _split_flagged(_ok(rows, metric))
    return _one_per_run(kept, metric)[metric].astype(float).to_numpy()


def _ok(rows: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The rows whose ``status`` (when there is one) is ``"ok"`` and whose ``metric`` is a number."""
    if "status" in rows.columns:
        rows = rows[rows["status"] == "ok"]
    return rows[pd.to_numeric(rows[metric], errors="coerce").notna()]


def _split_flagged(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(flagged, kept)``: the rows a :data:`FLAG_COLUMNS` flag makes no measurement, and the others."""
    flagged = np.zeros(len(rows), dtype=bool)
    for col in FLAG_COLUMNS:
        if col in rows.columns:
            flagged |= rows[col].fillna(False).astype(bool).to_numpy()
    return rows[flagged], rows[~flagged]


def _one_per_run(rows: pd.DataFrame, metric: str) -> pd.DataFrame:
    """``rows`` with each deterministic run once: a virtual-clock run with ``costs="table"`` (``host_independent``)
    is a pure function of its inputs, so its repeats with one seed (the same seed and figure) are one sample."""
    if "host_independent" not in rows.columns or "seed" not in rows.columns:
        return rows
    fixed = rows["host_independent"].fillna(False).astype(bool).to_numpy()
    return rows[~(fixed & rows.duplicated(["seed", metric]).to_numpy())]


def _groups(
    data: pd.DataFrame, cols: list[str], order_from: pd.DataFrame, dropped: pd.DataFrame
) -> list[tuple[tuple, pd.DataFrame, pd.DataFrame, pd.DataFrame]]:
    def part(table: pd.DataFrame, key: tuple) -> pd.DataFrame:
        mask = np.ones(len(table), dtype=bool)
        for col, val in zip(cols, key, strict=True):
            mask &= (table[col] == val).to_numpy()
        return table[mask]

    keys = list(dict.fromkeys(order_from[cols].itertuples(index=False, name=None)))
    return [(key, part(data, key), part(dropped, key), part(order_from, key)) for key in keys]


def _describe(x: np.ndarray) -> dict[str, Any]:
    if not len(x):
        nan = float("nan")
        return {"n": 0, "median": nan, "q1": nan, "q3": nan, "iqr": nan}
    q1, med, q3 = np.percentile(x, [25, 50, 75])
    return {"n": len(x), "median": float(med), "q1": float(q1), "q3": float(q3), "iqr": float(q3 - q1)}
