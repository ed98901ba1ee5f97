"""The pcp-refill seed: check_pcp_refill inside zone->lock (v6.2), after it (Halbuer's patch) or off (v6.4+).

Seed: Alexander Halbuer, "mm: reduce lock contention of pcp buffer refill" (2023-02-01). His kernel module ran T
threads pinned on one socket of a 2 x Xeon Gold 6252 (2.1 GHz fixed), each allocating pages of order 9 (and 0)
from one node with no frees in the timed loop; the figure is the average ns per allocation. ``PUBLISHED`` is his
table with the headings corrected (the mail had them swapped; the author confirmed), as in
``shared/reference/kernel-paths.md`` section 3.4, each row with the table's line it comes from.

Ours: the ``pcp_refill`` scenario on the host's own CPUs, one model CPU per worker on a one-node model with as many
CPUs as the host, threads 1..host PUs, both orders, the three check placements, interleaved repeats. Beside the
time per allocation the table carries what no clock can blur: zone->lock acquisitions (which the scenario checks
against its formula), the struct pages read under zone->lock, and lock_stat's wait and hold for zone->lock.

Virtual part: the seed's core counts (1-24, on socket 0 of ``xeon-gold-6252-2s``), orders 9 and 0, default and
patch, ``costs="table"``, one run per seed of :data:`~alloclab.studies.VIRTUAL_SEEDS` (each another interleaving),
tabulated as the real runs are (:func:`summarize`: medians, and patch / default a finding of the U-test over the
seeds); ``projected["patch_vs_default"]`` puts it between the seed's table and the real runs (no real cells above the
host's PUs).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from .. import plot, stats
from ..config import sized
from ..sweep import SweepResult
from ..topology import Topology
from . import (
    VIRTUAL_RUNS,
    StudyResult,
    against_claim,
    beside,
    counted,
    grown,
    join,
    load_average,
    lockstat_cost,
    measure,
    measurement_notes,
    projected,
    timed,
    virtual,
)

NAME = "pcp_refill"
TITLE = "pcp refill: check_pcp_refill in zone->lock vs after it vs off, orders 9 and 0, threads 1..host CPUs"
SCENARIOS = ("pcp_refill",)
SEED = "pcp-refill-check-outside-lock"
#: Wall time of `alloclab reproduce` (see the package docstring, ``ESTIMATED_S``).
ESTIMATED_S = {"quick": 3.6, "full": 282}

CHECKS = ("in_lock", "after_unlock", "off")
#: The pilot grows the block count until the fastest point lasts this long (not in quick mode).
MIN_TIME_S = 0.02
#: The seed's machine (``profiles/xeon-gold-6252-2s.toml``): its CPUs 0-23 are socket 0, where the seed pinned its
#: threads, and a virtual run's worker i runs on CPU i.
MACHINE = "xeon-gold-6252-2s"
#: Blocks per worker by order of the quick virtual part (the full one: the real part's 512 and 32,768).
VIRTUAL_COUNTS_QUICK = {9: 16, 0: 1_024}
#: The placements the seed's claim compares: the default (v6.2) and the patch.
CLAIM_CHECKS = ("in_lock", "after_unlock")
#: The seed's words for our check placements.
SEED_NAMES = {"in_lock": "default", "after_unlock": "patch", "off": "no-check"}

_CORES = (1, 2, 4, 8, 16, 24)
_TABLE = {  # order -> check -> ns per allocation at _CORES (Halbuer's table, headings corrected)
    9: {
        "in_lock": (2790, 6685, 14264, 29563, 60118, 90226),
        "after_unlock": (2767, 3484, 3635, 3570, 5785, 8712),
        "off": (171, 519, 1139, 2268, 4604, 7061),
    },
    0: {
        "in_lock": (127, 140, 178, 363, 735, 1105),
        "after_unlock": (124, 140, 159, 321, 660, 992),
        "off": (118, 134, 156, 319, 653, 982),
    },
}
#: Where the table comes from, and its rows as quoted there, whitespace collapsed (columns: cores, then order-9
#: default, patch, no-check, then order-0 default, patch, no-check).
_SOURCE = (
    "the seed thread's corrected table (pcp-refill-check-outside-lock: the mail's headings were swapped, the author "
    "confirmed), as tabulated in shared/reference/kernel-paths.md section 3.4"
)
_QUOTES = {  # cores -> the table's row
    1: "| 1 | 2790 | 2767 | 171 | 127 | 124 | 118 |",
    2: "| 2 | 6685 | 3484 | 519 | 140 | 140 | 134 |",
    4: "| 4 | 14264 | 3635 | 1139 | 178 | 159 | 156 |",
    8: "| 8 | 29563 | 3570 | 2268 | 363 | 321 | 319 |",
    16: "| 16 | 60118 | 5785 | 4604 | 735 | 660 | 653 |",
    24: "| 24 | 90226 | 8712 | 7061 | 1105 | 992 | 982 |",
}
#: Average ns per allocation published by the seed (2 x Xeon Gold 6252 at 2.1 GHz, threads on one socket).
PUBLISHED = pd.DataFrame(
    [
        {
            "order": order,
            "check": check,
            "threads": cores,
            "ns_per_alloc": float(ns),
            "source": _SOURCE,
            "source_quote": _QUOTES[cores],
        }
        for order, by_check in _TABLE.items()
        for check, row in by_check.items()
        for cores, ns in zip(_CORES, row, strict=True)
    ]
)


def host_threads() -> list[int]:
    """1, 2, 4, ... up to the host's PU count, and the count itself."""
    n = max(1, Topology.host().pus)
    out = [t for t in (1, 2, 4, 8, 16, 24, 32, 48, 64) if t < n]
    return [*out, n]


def run(quick: bool, out_dir: Path, progress: bool) -> StudyResult:
    """The seed's table projected onto its machine (virtual), then threads x check for order 9 and order 0 on this
    host (real); tabulate published | virtual | real and draw the plots.

    Args:
        quick: virtual: 16 order-9 / 1,024 order-0 blocks per worker instead of 512 / 32,768; real: 32 / 2,048
            blocks, not grown, instead of 512 / 32,768 grown by :func:`pilot_count`; 5 repeats.
        out_dir: where the PNG plots go.
        progress: show the sweeps' progress bars.
    """
    threads = host_threads()
    topology = f"node:1 core:{max(threads)} pu:1"  # one model CPU (and pcp) per worker, the same for every point
    repeats = sized(5, stats.MIN_REPEATS, quick_mode=quick)
    counts = {9: sized(512, 32, quick_mode=quick), 0: sized(32_768, 2_048, quick_mode=quick)}
    virtual_count = sized({9: 512, 0: 32_768}, VIRTUAL_COUNTS_QUICK, quick_mode=quick)
    virtual = summarize(virtual_runs(virtual_count, progress).runs)
    result = sweep_orders(counts, threads, repeats, topology, progress, grow=not quick)
    table = summarize(result.runs)
    plots = draw(result, out_dir, quick=quick)
    sizing = (
        f" (quick: not grown, so runs shorter than {MIN_TIME_S} s are flagged and compare n.s.)"
        if quick
        else f" at first, grown by a pilot run until one worker without the check lasts {MIN_TIME_S} s (the counts "
        "run are in data.parquet)"
    )
    notes = [
        f"virtual: machine {MACHINE}, {VIRTUAL_RUNS}; blocks per worker: order 9: {virtual_count[9]}, order 0: "
        f"{virtual_count[0]}",
        f"real: host {Topology.host().pus} PUs; model '{topology}'; {repeats} interleaved repeats; blocks per worker: "
        f"order 9: {counts[9]}, order 0: {counts[0]}{sizing}",
        lockstat_cost(),
        *reading(table),
        *claim(table, quick),
    ]
    notes += measurement_notes(result)
    return StudyResult(table=table, plots=plots, data=result, notes=notes, meta={"topology": topology},
                       projected={"patch_vs_default": projection(virtual, table)})  # fmt: skip


def virtual_runs(counts: dict[int, int], progress: bool = False) -> SweepResult:
    """The seed's claim in virtual time: check placements default and patch at the seed's core counts on
    :data:`MACHINE`, one sweep per order (:func:`~alloclab.studies.virtual`: one run per seed), joined.

    Args:
        counts: blocks per worker by order.
        progress: show the sweeps' progress bars.
    """
    return join([virtual("pcp_refill", grid={"check": list(CLAIM_CHECKS), "threads": list(_CORES)}, machine=MACHINE,
                         progress=progress, order=order, count=count)
                 for order, count in counts.items()])  # fmt: skip


def claim_figures(runs: pd.DataFrame) -> pd.DataFrame:
    """``order, threads, default_ns, patch_ns, patch_over_default`` from one ``ns_per_alloc`` per (order, check,
    threads), such as :data:`PUBLISHED` or a :func:`summarize` table (whose ratio is then median over median): the
    columns of the seed's claim."""
    wide = runs.set_index(["order", "threads", "check"])["ns_per_alloc"].unstack("check")
    wide = wide.reindex(columns=list(CLAIM_CHECKS)).reset_index()  # a check whose runs were all dropped: NaN
    return pd.DataFrame({"order": wide["order"], "threads": wide["threads"], "default_ns": wide["in_lock"],
                         "patch_ns": wide["after_unlock"],
                         "patch_over_default": wide["after_unlock"] / wide["in_lock"]})  # fmt: skip


def claim_findings(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`claim_figures` of a :func:`summarize` table with ``patch_over_default`` the comparison's finding (a
    ratio only when the U-test finds one, else ``n.s.`` and why)."""
    ratio = table[table["check"] == "after_unlock"].set_index(["order", "threads"])["vs_in_lock"]
    figures = claim_figures(table[table["check"].isin(CLAIM_CHECKS)]).drop(columns="patch_over_default")
    return figures.join(ratio.rename("patch_over_default"), on=["order", "threads"])


def projection(virtual: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """Published | virtual | real per (order, cores): default and patch ns per allocation and patch / default (the
    virtual and the real ratio each a comparison's finding, a ratio only when significant); ``virtual`` and
    ``table`` are :func:`summarize` tables."""
    return projected(["order", "threads"], published=claim_figures(PUBLISHED[PUBLISHED["check"].isin(CLAIM_CHECKS)]),
                     virtual=claim_findings(virtual), real=claim_findings(table),
                     workers=lambda row: int(row["threads"]))  # fmt: skip


def sweep_orders(
    counts: dict[int, int], threads: list[int], repeats: int, topology: str, progress: bool, grow: bool = True
) -> SweepResult:
    """One sweep per order (their block counts differ), joined into one :class:`SweepResult`. ns per allocation
    is a rate: with ``grow`` each order's block count is first grown by :func:`pilot_count` so that its fastest
    point lasts ``MIN_TIME_S`` (and its largest point fits the host's memory), and every run of the sweep takes that
    count (one pilot instead of growing every run); without it (quick mode) the runs keep ``counts``, are flagged
    too short and compare n.s. (on a loaded 2-PU host, grown 2-thread runs spend seconds each waiting for a
    preempted lock holder)."""
    return join([measure("pcp_refill", grid={"check": list(CHECKS), "threads": threads}, repeats=repeats,
                         topology=topology, progress=progress, quick=not grow, order=order,
                         count=pilot_count(order, count, topology, max(threads)) if grow else count,
                         min_time_s=MIN_TIME_S)
                 for order, count in counts.items()])  # fmt: skip


def pilot_count(order: int, count: int, topology: str, most_threads: int = 1) -> int:
    """Blocks per worker at which the sweep's fastest point (one worker, no check) lasts ``MIN_TIME_S``: ``count``
    :func:`grown` for sweeps of 1 to ``most_threads`` workers."""
    params = grown("pcp_refill", workers_param="threads", workers=[1, most_threads], min_time_s=MIN_TIME_S,
                   topology=topology, order=order, count=count, check="off")  # fmt: skip
    return int(params["count"])


def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (order, check, threads): our median ns per allocation beside the seed's, and the exact counts.

    Args:
        runs: the sweep table (``order`` x ``check`` x ``threads``).

    Returns:
        ``order, check, seed_name, threads, runs, ns_per_alloc`` (median of the timed runs), ``ns_per_alloc_iqr``,
        ``vs_in_lock`` (the finding: our median / the in_lock median at the same order and threads with its U-test
        p-value, or ``n.s.`` and why), ``oversubscribed``, median ``refill_hold_ns``; from the lock_stat run
        ``zone_lock_acquisitions`` and ``zone_lock_expected`` (exact), ``pages_checked_under_lock``,
        ``zone_lock_wait_avg_ns``, ``zone_lock_contentions``; then ``published_ns_per_alloc`` and
        ``published_ratio_vs_in_lock`` (NaN where the seed has no such thread count).
    """
    keys = ["order", "check", "threads"]
    cmp = stats.compare(timed(runs), by="check", metric="ns_per_alloc", within=["order", "threads"],
                        baseline="in_lock")  # fmt: skip
    cmp = cmp.rename(columns={"n": "runs", "median": "ns_per_alloc", "iqr": "ns_per_alloc_iqr",
                              "finding": "vs_in_lock"})  # fmt: skip
    cmp = cmp[["order", "threads", "check", "runs", "ns_per_alloc", "ns_per_alloc_iqr", "vs_in_lock",
               "oversubscribed"]]  # fmt: skip
    hold = timed(runs).groupby(keys, sort=False)["refill_hold_ns"].median().rename("refill_hold_ns")
    extra = (
        counted(runs)
        .groupby(keys, sort=False)
        .agg(
            zone_lock_acquisitions=("zone_lock_acquisitions", "max"),
            zone_lock_expected=("zone_lock_expected", "max"),
            lock_counts_exact=("lock_counts_exact", "all"),
            pages_checked_under_lock=("pages_checked_under_lock", "max"),
            zone_lock_wait_avg_ns=("zone_lock_wait_avg_ns", "median"),
            zone_lock_contentions=("zone_lock_contentions", "median"),
        )
        .reset_index()
    )
    table = cmp.join(hold, on=keys).merge(extra, on=keys, how="left")
    table.insert(2, "seed_name", table["check"].map(SEED_NAMES))
    order_rank = {9: 0, 0: 1}
    check_rank = {c: i for i, c in enumerate(CHECKS)}
    table = table.sort_values(
        ["order", "check", "threads"],
        key=lambda c: c.map(order_rank) if c.name == "order" else c.map(check_rank) if c.name == "check" else c,
    ).reset_index(drop=True)
    table = beside(table, PUBLISHED, on=["order", "check", "threads"])
    base = PUBLISHED[PUBLISHED["check"] == "in_lock"].set_index(["order", "threads"])["ns_per_alloc"]
    keys = list(zip(table["order"], table["threads"], strict=True))
    table["published_ratio_vs_in_lock"] = [
        p / base.get(k, float("nan")) for p, k in zip(table["published_ns_per_alloc"], keys, strict=True)
    ]
    return table


def reading(table: pd.DataFrame) -> list[str]:
    """Plain-words lines on what matches the seed and what cannot on this machine, computed from the table."""
    lines: list[str] = []
    if table.empty:
        return lines
    exact = bool(table["lock_counts_exact"].fillna(False).all())
    lines.append(
        "zone->lock acquisitions equal the documented formula (threads x (refills + bulk frees)) in every run: "
        + ("yes" if exact else "NO, see lock_counts_exact")
    )
    o9 = table[table["order"] == 9]
    under = o9.groupby("check")["pages_checked_under_lock"].max()
    if {"in_lock", "after_unlock", "off"} <= set(under.index):
        lines.append(
            f"struct pages read under zone->lock at order 9: in_lock {int(under['in_lock'])} (512 per block pulled), "
            f"after_unlock {int(under['after_unlock'])}, off {int(under['off'])}: the patch empties the critical "
            "section of the check, as the seed says"
        )
    top = int(table["threads"].max())
    for order in (9, 0):
        rows = table[(table["order"] == order) & (table["threads"] == top)].set_index("check")
        one = table[(table["order"] == order) & (table["threads"] == 1)].set_index("check")
        if not {"in_lock", "after_unlock"} <= set(rows.index):
            continue
        ours = rows.loc["after_unlock", "vs_in_lock"]
        seed = rows.loc["after_unlock", "published_ratio_vs_in_lock"]
        seed_txt = f"the seed {seed:.2f} at {top} cores" if pd.notna(seed) else f"the seed has no {top}-core line"
        lines.append(
            f"order {order}, {top} threads: patch / default here {ours}, {seed_txt}; at 1 thread here "
            f"{one.loc['after_unlock', 'vs_in_lock']}, "
            f"{one.loc['after_unlock', 'published_ratio_vs_in_lock']:.2f} in the seed (the patch cannot help "
            "without a second CPU waiting for the lock)"
        )
        if {"off"} <= set(rows.index):
            lines.append(
                f"order {order}: ns per allocation here {rows.loc['in_lock', 'ns_per_alloc']:.0f} / "
                f"{rows.loc['after_unlock', 'ns_per_alloc']:.0f} / {rows.loc['off', 'ns_per_alloc']:.0f} "
                f"(default / patch / no check) at {top} threads"
            )
    lines.append(
        "what cannot match: absolute nanoseconds (another CPU and memory system, a user-space MCS lock for the "
        "qspinlock, no interrupts disabled, descriptors streamed from this host's DRAM); thread counts above "
        f"{top} (this host has {top} PUs, the seed went to 24 cores); and on a small or shared VM, other "
        f"processes' load (load average now: {load_average()}) widens every spread"
    )
    return lines


def claim(table: pd.DataFrame, quick: bool) -> list[str]:
    """The seed's claim at the most threads here (2 or more): order 9 allocations are faster with the check after
    the unlock."""
    top = int(table["threads"].max()) if len(table) else 0
    rows = table[(table["order"] == 9) & (table["threads"] == top)].set_index("check")
    if top < 2 or not {"in_lock", "after_unlock"} <= set(rows.index):
        return []
    return against_claim(quick, rows.loc["after_unlock", "ns_per_alloc"], rows.loc["in_lock", "ns_per_alloc"],
                         f"order 9 is faster with the check after the unlock at {top} threads",
                         str(rows.loc["after_unlock", "vs_in_lock"]))  # fmt: skip


def draw(result: SweepResult, out_dir: Path, *, quick: bool) -> list[Path]:
    """ns per allocation against threads per order (ours as lines, the seed's as crosses) and zone->lock lock_stat.

    Args:
        result: the joined sweep with its detail tables.
        out_dir: the folder to write ``order9.png``, ``order0.png`` and ``zone_lock.png`` into.
        quick: the study ran in quick mode (the plots' footers say so).
    """
    runs, paths = timed(result.runs), []
    prov = {**result.meta, "quick": quick}
    for order in (9, 0):
        part = runs[runs["order"] == order]
        if not len(part):
            continue
        ax = Figure(figsize=(7, 4.5), layout="constrained").subplots()
        seed = PUBLISHED[(PUBLISHED["order"] == order) & (PUBLISHED["threads"] <= max(int(part["threads"].max()), 2))]
        plot.scaling(part, x="threads", y="ns_per_alloc", hue="check", ax=ax, reference=None, logy=True,
                     published=seed, provenance=prov,
                     title=f"pcp_refill order {order}: time per allocation (lines: ours; x: the seed)")  # fmt: skip
        paths.append(plot.savefig(ax, out_dir / f"order{order}.png"))
    lock = result.lockstat
    if len(lock):
        top = int(lock["threads"].max())
        part = lock[(lock["threads"] == top) & (lock["order"] == 9)]
        if len(part):
            ax = Figure(figsize=(7, 3.5), layout="constrained").subplots()
            plot.lockstat(part, by="check", classes=["zone->lock"], stat="avg", ax=ax, provenance=prov,
                          title=f"zone->lock at {top} threads, order 9: average wait vs hold")  # fmt: skip
            paths.append(plot.savefig(ax, out_dir / "zone_lock.png"))
    return paths
