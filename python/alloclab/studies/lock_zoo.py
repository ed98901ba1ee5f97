"""Lock primitives under contention: throughput, fairness and wait/hold by lock kind and thread count.

No seed patch: this is the lab's own baseline, so ``PUBLISHED`` is empty (nothing is compared with a
publication). On a machine with fewer PUs than threads the runs are *oversubscribed*; the table says so, and
spinning kinds then back off to ``sched_yield`` (their figures measure the scheduler as much as the lock).
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from .. import plot, stats
from .._catalogue import scenarios
from ..config import sized
from ..sweep import SweepResult, sweep
from . import StudyResult, beside, failure_notes

NAME = "lock_zoo"
TITLE = "lock kinds x threads: acquisitions/s, fairness, wait/hold (no seed patch)"
SCENARIOS = ("lock_zoo",)
SEED = None
#: No seed patch publishes lock_zoo figures: the column exists so the table has the usual shape, and stays empty.
PUBLISHED = pd.DataFrame({"lock": pd.Series(dtype=str), "threads": pd.Series(dtype="int64"),
                          "acquisitions_per_s": pd.Series(dtype=float)})  # fmt: skip

THREADS = (1, 2, 4)
HOLD_NS = 100
BASELINE = "spin"


def lock_kinds_of_scenario() -> list[str]:
    """The lock kinds the ``lock_zoo`` scenario accepts, in the engine's order."""
    table = scenarios()
    allowed = table.loc[(table["scenario"] == "lock_zoo") & (table["parameter"] == "lock"), "allowed"]
    kinds = re.findall(r"'([^']+)'", str(allowed.iloc[0])) if len(allowed) else []
    return kinds or ["mutex", "pthread", "spin", "ticket", "mcs"]


def run(quick: bool, out_dir: Path, progress: bool) -> StudyResult:
    """Sweep every lock kind over 1, 2 and 4 threads and draw the four standard plots.

    Args:
        quick: 2,000 acquisitions per worker and 3 repeats (about a second) instead of 100,000 and 5.
        out_dir: where the PNG plots go.
        progress: show the sweep's progress bar.
    """
    kinds = lock_kinds_of_scenario()
    iterations = sized(100_000, 2_000, quick_mode=quick)
    repeats = sized(5, 3, quick_mode=quick)
    result = sweep(
        "lock_zoo",
        grid={"lock": kinds, "threads": list(THREADS)},
        repeats=repeats,
        progress=progress,
        detail=True,
        iterations=iterations,
        hold_ns=HOLD_NS,
    )
    assert isinstance(result, SweepResult)
    table = summarize(result.runs, kinds)
    plots = draw(result, out_dir)
    over = sorted(table.loc[table["oversubscribed"].fillna(False).astype(bool), "threads"].unique().tolist())
    notes = [f"{iterations} acquisitions per worker, hold {HOLD_NS} ns, {repeats} repeats (interleaved)."]
    if over:
        notes.append(f"threads {over}: oversubscribed (more workers than host PUs): spinners yield to the scheduler")
    notes += failure_notes(result.runs)
    return StudyResult(table=table, plots=plots, data=result, notes=notes)


def summarize(runs: pd.DataFrame, kinds: list[str]) -> pd.DataFrame:
    """One row per (lock, threads): medians, ratio to the spinlock at the same thread count, U-test p-value.

    Args:
        runs: the sweep table (``lock`` x ``threads`` grid).
        kinds: the lock kinds in display order (the first is the baseline when ``spin`` is missing).

    Returns:
        ``threads, lock, runs, acquisitions_per_s`` (median), its IQR, ``ratio_vs_spin``, ``p_value``,
        ``too_few_repeats``, ``oversubscribed``, median ``fairness_max_min`` and ``wait_per_hold``, and the
        (empty) ``published_acquisitions_per_s``.
    """
    baseline = BASELINE if BASELINE in kinds else kinds[0]
    cmp = stats.compare(runs, by="lock", metric="acquisitions_per_s", within="threads", baseline=baseline)
    ok = runs[runs["status"] == "ok"]
    extra = (
        ok.groupby(["lock", "threads"], sort=False)
        .agg(
            oversubscribed=("oversubscribed", "max"),
            fairness_max_min=("fairness_max_min", "median"),
            wait_per_hold=("wait_per_hold", "median"),
        )
        .reset_index()
    )
    table = cmp.rename(
        columns={
            "n": "runs",
            "median": "acquisitions_per_s",
            "iqr": "acquisitions_per_s_iqr",
            "ratio": f"ratio_vs_{baseline}",
        }
    )
    table = table[
        ["threads", "lock", "runs", "acquisitions_per_s", "acquisitions_per_s_iqr", f"ratio_vs_{baseline}",
         "p_value", "too_few_repeats"]
    ]  # fmt: skip
    table = table.merge(extra, on=["lock", "threads"], how="left")
    table = table.sort_values(["threads", "lock"], key=_kind_order(kinds), kind="stable").reset_index(drop=True)
    return beside(table, PUBLISHED, on=["lock", "threads"])


def draw(result: SweepResult, out_dir: Path) -> list[Path]:
    """The study's four plots, written as PNGs into ``out_dir``; returns their paths.

    Args:
        result: the sweep with its detail tables.
        out_dir: the folder to write ``scaling.png``, ``fairness_heatmap.png``, ``workers.png`` and
            ``lockstat.png`` into.
    """
    runs, paths = result.runs, []

    ax = Figure(figsize=(7, 4.5), layout="constrained").subplots()
    plot.scaling(runs, x="threads", y="acquisitions_per_s", hue="lock", ax=ax, logy=True)
    paths.append(plot.savefig(ax, out_dir / "scaling.png"))

    ax = Figure(figsize=(6.4, 4.2), layout="constrained").subplots()
    plot.heatmap(runs, x="threads", y="lock", value="fairness_max_min", ax=ax)
    paths.append(plot.savefig(ax, out_dir / "fairness_heatmap.png"))

    most = int(runs["threads"].max())
    ax = Figure(figsize=(7, 4.2), layout="constrained").subplots()
    workers = result.workers[result.workers["threads"] == most] if len(result.workers) else result.workers
    if len(workers):
        title = f"completion time per worker, {most} threads"
        plot.workers(workers, y="elapsed_s", by="lock", ax=ax, annotate=False, title=title)
        paths.append(plot.savefig(ax, out_dir / "workers.png"))

    lock = result.lockstat
    two = lock[lock["threads"] == 2] if len(lock) and "threads" in lock else lock
    if len(two):
        ax = Figure(figsize=(7, 3.5), layout="constrained").subplots()
        plot.lockstat(two, by="lock", ax=ax, title="lock_stat at 2 threads: wait vs hold (total)")
        paths.append(plot.savefig(ax, out_dir / "lockstat.png"))
    return paths


def _kind_order(kinds: list[str]):
    rank = {k: i for i, k in enumerate(kinds)}

    def key(col: pd.Series) -> pd.Series:
        return col.map(rank) if col.name == "lock" else col

    return key
