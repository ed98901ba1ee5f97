"""Two results directories compared configuration by configuration, as ``pyperf compare_to`` and Google Benchmark's
``compare.py`` compare two runs of a benchmark suite: :func:`directories`.

A configuration is a combination of the grid parameters the two directories share (the values of ``meta.json``'s
``grid``), or the whole directory when neither is a sweep over a grid. For each one the repeats of A and of B are two
samples of the metric: their medians and IQRs, the ratio B/A, its bootstrap confidence interval
(:func:`scipy.stats.bootstrap`), and the Mann-Whitney U test and finding of :func:`alloclab.stats.compare` (which
drops flagged runs and refuses timings from two hosts unless told).
Leaves out: pairing the repeats of A and B (they ran at different times; the samples are independent).
"""

from __future__ import annotations

import inspect
import os
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from . import results, stats

__all__ = ["directories", "differing_parameters"]


def directories(
    dir_a: str | os.PathLike,
    dir_b: str | os.PathLike,
    *,
    metric: str = "elapsed_s",
    by: Sequence[str] | None = None,
    alpha: float = 0.05,
    confidence: float = 0.95,
    across_hosts: bool = False,
    seed: int = 0,
) -> pd.DataFrame:
    """Compare the results in ``dir_b`` with those in ``dir_a``, per configuration.

    Args:
        dir_a: the baseline: a directory written by ``alloclab run/sweep/reproduce --out`` (or :func:`alloclab.
            results.save`).
        dir_b: the contender, likewise.
        metric: the column compared (default ``elapsed_s``: lower is better).
        by: the columns that name a configuration (default: the grid parameters of either directory that both
            tables have, except ``seed``: runs that differ by seed alone are samples of one configuration, and for
            a deterministic virtual run the only samples there are).
        alpha: the significance level of the U test.
        confidence: the confidence level of the ratio's interval.
        across_hosts: compare timings taken on two different hosts (refused by default: see
            :func:`alloclab.stats.compare`).
        seed: the seed of the bootstrap's resampling (the interval is reproducible).

    Returns:
        One row per configuration, in A's order then B's: the ``by`` columns, ``n_a``, ``median_a``, ``q1_a``,
        ``q3_a``, ``n_b``, ``median_b``, ``q1_b``, ``q3_b``, ``ratio`` (median B / median A), ``change`` (ratio - 1),
        ``ci_low``/``ci_high`` (the ratio's percentile-bootstrap interval; NaN with fewer than 2 runs a side),
        ``p_value``, ``significant`` and ``finding`` (from :func:`alloclab.stats.compare`; ``"only in A"``/``"only
        in B"`` for a configuration one side lacks).

    Raises:
        ValueError: ``metric`` or a ``by`` column is missing from a table, ``confidence`` is not in (0, 1), or the
            timings come from two hosts without ``across_hosts``.
        FileNotFoundError, alloclab.results.DamagedResult: a directory holds no result or a damaged one.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence: expected a level between 0 and 1, got {confidence!r}")
    loaded = [results.load(dir_a), results.load(dir_b)]
    tables = [x.data for x in loaded]
    for name, table in zip(("dir_a", "dir_b"), tables, strict=True):
        if metric not in table.columns:
            raise ValueError(f"metric: {metric!r} is not a column of {name} (columns: {', '.join(table.columns)})")
    if by is None:
        grid = [*(loaded[0].meta.get("grid") or {}), *(loaded[1].meta.get("grid") or {})]
        by = [c for c in dict.fromkeys(grid) if c != "seed" and all(c in t.columns for t in tables)]
    by = list(by)
    for col in by:
        for name, table in zip(("dir_a", "dir_b"), tables, strict=True):
            if col not in table.columns:
                raise ValueError(f"by: {col!r} is not a column of {name}")
    both = pd.concat([t.assign(_side=s) for t, s in zip(tables, ("A", "B"), strict=True)], ignore_index=True)
    both = both.drop(columns=[c for c in stats.FLAG_COLUMNS if c in both.columns and both[c].isna().all()])
    cmp = stats.compare(both, by="_side", metric=metric, baseline="A", within=by or None, alpha=alpha,
                        across_hosts=across_hosts)  # fmt: skip
    rows = []
    for key, part in cmp.groupby(by, sort=False) if by else [((), cmp)]:
        key = key if isinstance(key, tuple) else (key,)
        a, b = part[part["_side"] == "A"].iloc[0], part[part["_side"] == "B"]
        row: dict[str, Any] = dict(zip(by, key, strict=True))
        row.update(n_a=int(a["n"]), median_a=a["median"], q1_a=a["q1"], q3_a=a["q3"])
        if not len(b) or int(a["n"]) == 0:
            only = "A" if not len(b) else "B"
            b_n = 0 if not len(b) else int(b.iloc[0]["n"])
            row.update(n_b=b_n, median_b=np.nan if not len(b) else b.iloc[0]["median"], q1_b=np.nan, q3_b=np.nan)
            row.update(ratio=np.nan, change=np.nan, ci_low=np.nan, ci_high=np.nan, p_value=np.nan,
                       significant=False, finding=f"only in {only}")  # fmt: skip
            rows.append(row)
            continue
        b = b.iloc[0]
        row.update(n_b=int(b["n"]), median_b=b["median"], q1_b=b["q1"], q3_b=b["q3"])
        low, high = _ratio_interval(_sample(both, by, key, "A", metric), _sample(both, by, key, "B", metric),
                                    confidence, seed)  # fmt: skip
        row.update(ratio=b["ratio"], change=b["ratio"] - 1, ci_low=low, ci_high=high, p_value=b["p_value"],
                   significant=bool(b["significant"]), finding=b["finding"])  # fmt: skip
        rows.append(row)
    return pd.DataFrame(rows)


def differing_parameters(dir_a: str | os.PathLike, dir_b: str | os.PathLike) -> dict[str, tuple[Any, Any]]:
    """The fixed parameters (``meta.json``'s ``fixed``) whose values differ between two results directories.

    Args:
        dir_a: the baseline directory.
        dir_b: the contender directory.

    Returns:
        name -> (value in A, value in B); a parameter one side does not fix has ``None`` there.
    """
    fixed = [results.load(d).meta.get("fixed") or {} for d in (dir_a, dir_b)]
    names = dict.fromkeys([*fixed[0], *fixed[1]])
    return {n: (fixed[0].get(n), fixed[1].get(n)) for n in names if fixed[0].get(n) != fixed[1].get(n)}


def _sample(both: pd.DataFrame, by: list[str], key: tuple, side: str, metric: str) -> np.ndarray:
    """The sample of one side of one configuration that stats.compare rests on (:func:`alloclab.stats.sample`)."""
    mask = (both["_side"] == side).to_numpy(copy=True)
    for col, val in zip(by, key, strict=True):
        mask &= (both[col] == val).to_numpy()
    return stats.sample(both[mask], metric)


def _ratio_interval(a: np.ndarray, b: np.ndarray, confidence: float, seed: int) -> tuple[float, float]:
    """The percentile-bootstrap interval of median(b) / median(a) (scipy.stats.bootstrap, independent samples)."""
    from scipy.stats import bootstrap

    if len(a) < 2 or len(b) < 2 or np.median(a) == 0:
        return float("nan"), float("nan")

    def ratio(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.median(y, axis=axis) / np.median(x, axis=axis)

    # scipy >= 1.15 names the generator `rng`; older ones `random_state`.
    name = "rng" if "rng" in inspect.signature(bootstrap).parameters else "random_state"
    seeded = {name: np.random.default_rng(seed)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # identical repeats (virtual time) make a degenerate distribution: fine
        res = bootstrap((a, b), ratio, paired=False, vectorized=True, confidence_level=confidence,
                        method="percentile", n_resamples=2000, **seeded)  # fmt: skip
    ci = res.confidence_interval
    return float(ci.low), float(ci.high)
