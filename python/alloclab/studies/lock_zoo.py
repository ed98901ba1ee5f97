"""Lock primitives under contention: throughput, fairness and wait/hold by lock kind and thread count.

No seed patch: this is the lab's own baseline, so ``PUBLISHED`` is empty (nothing is compared with a
publication). On a machine with fewer PUs than threads the runs are *oversubscribed*; the table says so, and
spinning kinds then back off to ``sched_yield`` (their figures measure the scheduler as much as the lock).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from .. import plot, stats
from .._catalogue import lock_kinds
from ..config import sized
from ..sweep import SweepResult
from . import StudyResult, beside, counted, fits_host, lockstat_cost, measure, measurement_notes, timed

NAME = "lock_zoo"
TITLE = "lock kinds x threads: acquisitions/s, fairness, wait/hold (no seed patch)"
SCENARIOS = ("lock_zoo",)
SEED = None
#: Wall time of `alloclab reproduce` (see the package docstring, ``ESTIMATED_S``).
ESTIMATED_S = {"quick": 5.1, "full": 65.3}
#: No seed patch publishes lock_zoo figures: the column exists so the table has the usual shape, and stays empty.
PUBLISHED = pd.DataFrame({"lock": pd.Series(dtype=str), "threads": pd.Series(dtype="int64"),
                          "acquisitions_per_s": pd.Series(dtype=float)})  # fmt: skip

THREADS = (1, 2, 4)
#: A run grows until it lasts this long (quick: the shorter one).
MIN_TIME_S = 0.05
QUICK_MIN_TIME_S = 0.01
HOLD_NS = 100
BASELINE = "spin"


def run(quick: bool, out_dir: Path, progress: bool) -> StudyResult:
    """Sweep every lock kind over 1, 2 and 4 threads (quick: only the counts that fit the host's PUs) and draw
    the four standard plots.

    Args:
        quick: 2,000 acquisitions per worker at first, grown until a run lasts ``QUICK_MIN_TIME_S`` (a few seconds
            in all), instead of 100,000 grown to ``MIN_TIME_S``; the same 5 repeats (a comparison needs them).
        out_dir: where the PNG plots go.
        progress: show the sweep's progress bar.
    """
    kinds = lock_kinds()["kind"].tolist()
    iterations = sized(100_000, 2_000, quick_mode=quick)
    min_time_s = sized(MIN_TIME_S, QUICK_MIN_TIME_S, quick_mode=quick)
    repeats = stats.MIN_REPEATS
    threads = [t for t in THREADS if not quick or fits_host(t)]
    # A rate: each run may grow its iterations until it lasts min_time_s (Google Benchmark's rule).
    result = measure("lock_zoo", grid={"lock": kinds, "threads": threads}, repeats=repeats, progress=progress,
                     quick=quick, iterations=iterations, hold_ns=HOLD_NS, min_time_s=min_time_s, grow=True)  # fmt: skip
    assert isinstance(result, SweepResult)
    table = summarize(result.runs, kinds)
    plots = draw(result, out_dir, quick=quick)
    over = sorted(table.loc[table["oversubscribed"].fillna(False).astype(bool), "threads"].unique().tolist())
    notes = [f"{iterations} acquisitions per worker at first, grown until a run lasts {min_time_s} s; hold "
             f"{HOLD_NS} ns; {repeats} timed repeats (interleaved).",
             lockstat_cost()]  # fmt: skip
    if over:
        notes.append(f"threads {over}: oversubscribed (more workers than host PUs, or a busy host): no finding there")
    notes += measurement_notes(result)
    return StudyResult(table=table, plots=plots, data=result, notes=notes)


def summarize(runs: pd.DataFrame, kinds: list[str]) -> pd.DataFrame:
    """One row per (lock, threads): medians of the timed runs, the comparison with the spinlock as a finding, and
    fairness and wait/hold.

    Args:
        runs: the sweep table (``lock`` x ``threads`` grid) of :func:`alloclab.studies.measure`.
        kinds: the lock kinds in display order (the first is the baseline when ``spin`` is missing).

    Returns:
        ``threads, lock, runs, acquisitions_per_s`` (median of the timed runs) and its IQR, ``vs_spin`` (the
        finding: median ratio with its U-test p-value, or ``n.s.`` and why), ``oversubscribed``, median
        ``fairness_max_min`` (timed runs), median ``wait_per_hold`` (the lock_stat run), and the (empty)
        ``published_acquisitions_per_s``.
    """
    baseline = BASELINE if BASELINE in kinds else kinds[0]
    cmp = stats.compare(timed(runs), by="lock", metric="acquisitions_per_s", within="threads", baseline=baseline)
    table = cmp.rename(columns={"n": "runs", "median": "acquisitions_per_s", "iqr": "acquisitions_per_s_iqr",
                                "finding": f"vs_{baseline}"})  # fmt: skip
    table = table[["threads", "lock", "runs", "acquisitions_per_s", "acquisitions_per_s_iqr", f"vs_{baseline}",
                   "oversubscribed"]]  # fmt: skip
    fair = timed(runs).groupby(["lock", "threads"], sort=False)["fairness_max_min"].median().rename("fairness_max_min")
    wait = counted(runs).groupby(["lock", "threads"], sort=False)["wait_per_hold"].median().rename("wait_per_hold")
    table = table.join(fair, on=["lock", "threads"]).join(wait, on=["lock", "threads"])
    table = table.sort_values(["threads", "lock"], key=_kind_order(kinds), kind="stable").reset_index(drop=True)
    return beside(table, PUBLISHED, on=["lock", "threads"])


def draw(result: SweepResult, out_dir: Path, *, quick: bool) -> list[Path]:
    """The study's four plots, written as PNGs into ``out_dir``; returns their paths.

    Args:
        result: the sweep with its detail tables.
        out_dir: the folder to write ``scaling.png`` (with the one lock's ceiling 1/hold), ``fairness_heatmap.png``,
            ``workers.png`` and ``lockstat.png`` into.
        quick: the study ran in quick mode (the plots' footers say so).
    """
    runs, paths = timed(result.runs), []
    prov = {**result.meta, "quick": quick}

    ax = Figure(figsize=(7, 4.5), layout="constrained").subplots()
    plot.scaling(runs, x="threads", y="acquisitions_per_s", hue="lock", ax=ax, logy=True, reference="ceiling",
                 hold_ns=HOLD_NS, provenance=prov)  # fmt: skip
    paths.append(plot.savefig(ax, out_dir / "scaling.png"))

    ax = Figure(figsize=(6.4, 4.2), layout="constrained").subplots()
    plot.heatmap(runs, x="threads", y="lock", value="fairness_max_min", ax=ax, provenance=prov)
    paths.append(plot.savefig(ax, out_dir / "fairness_heatmap.png"))

    most = int(runs["threads"].max()) if len(runs) else 0
    ax = Figure(figsize=(7, 4.2), layout="constrained").subplots()
    workers = result.workers[result.workers["run"].isin(runs["run"]) & (result.workers["threads"] == most)]
    if len(workers):
        title = f"completion time per worker, {most} threads"
        plot.workers(workers, y="elapsed_s", by="lock", ax=ax, annotate=False, title=title, provenance=prov)
        paths.append(plot.savefig(ax, out_dir / "workers.png"))

    lock = result.lockstat
    two = lock[lock["threads"] == 2] if len(lock) and "threads" in lock else lock
    if len(two):
        ax = Figure(figsize=(7, 3.5), layout="constrained").subplots()
        plot.lockstat(two, by="lock", ax=ax, title="lock_stat at 2 threads: wait vs hold (total)",
                      provenance=prov)  # fmt: skip
        paths.append(plot.savefig(ax, out_dir / "lockstat.png"))
    return paths


def _kind_order(kinds: list[str]):
    rank = {k: i for i, k in enumerate(kinds)}

    def key(col: pd.Series) -> pd.Series:
        return col.map(rank) if col.name == "lock" else col

    return key
