"""The CMA per-area-lock seed: one global ``cma_mutex`` around ``alloc_contig_range``, or one mutex per area.

Seed: Ge Yang, "mm/cma: using per-CMA locks to improve concurrent allocation performance" (v2, 2025-02-10). On a
3-node machine booted with ``hugetlb_cma=30G`` (a 10 GiB CMA area per node), filled with ``dd`` to one
``/dev/shm`` file, three terminals allocated 10 GiB each from their own area at once through debugfs. Published
(``time`` of each terminal): without the patch ~7 s / ~14 s / ~21 s, with it ~7 s / ~8 s / ~7 s. ``PUBLISHED``
holds exactly that, nothing else, each row with the seed's line it comes from.

Ours: the ``cma_concurrent`` scenario with its defaults (the seed's kernel, mm-unstable on v6.14-rc: v6.7's pcp
rules, no ``check_new_pages``; each migration copies its 4 KiB page for real) on a 4-node model (area *i* on node
*i*, its worker pinned there), 1-4 regions x both variants, interleaved repeats; then, with per-area mutexes,
``files="shared"`` (the seed's one file: one ``mapping->i_pages`` lock for every area) vs ``"per_area"`` files,
which tests the hypothesis that the shared page-cache lock explains the seed's 8 s outlier. Beside the times, every
run checks its lock counts against the documented formula (``lock_counts_exact``), and lock_stat's wait time on the
mutexes shows the staircase's cause. With more regions than host PUs a run is oversubscribed: the table says so.

Virtual part: the same scenario on the seed's machine (``generic-3node-zen1``: 3 nodes, one area and worker per
node), 1-3 regions x both variants, ``costs="table"``, one run per seed of :data:`~alloclab.studies.VIRTUAL_SEEDS`
(each another interleaving), tabulated as the real runs are (:func:`summarize`: median completion times, and the
slowest over global's a finding of the U-test over the seeds); ``projected["completion"]`` puts it between the
seed's table and the real runs (regions 3 has no real cells on a 2-PU host).
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
    fits_host,
    load_average,
    lockstat_cost,
    measure,
    measurement_notes,
    projected,
    timed,
    virtual,
)

NAME = "cma_per_area_lock"
TITLE = "CMA: global cma_mutex vs per-area cma->alloc_mutex, 1-4 regions (the 7/14/21 s vs 7/8/7 s table)"
SCENARIOS = ("cma_concurrent",)
SEED = "cma-per-area-lock"
#: Wall time of `alloclab reproduce` (see the package docstring, ``ESTIMATED_S``).
ESTIMATED_S = {"quick": 3.4, "full": 112}

#: Where the CMA figures come from: the seed's table of each terminal's ``time`` (seconds, "~" in the mail).
_SOURCE = "cma-per-area-lock.mbox.txt (Ge Yang, v2 cover letter)"
_QUOTE = "Without this patch With this patch > Terminal1 ~7s ~7s > Terminal2 ~14s ~8s > Terminal3 ~21s ~7s"
#: The seed's three terminals, in its order.
PUBLISHED_TERMINALS = pd.DataFrame(
    {
        "alloc_mutex": ["global"] * 3 + ["per_area"] * 3,
        "terminal": [1, 2, 3] * 2,
        "elapsed_s": [7.0, 14.0, 21.0, 7.0, 8.0, 7.0],
        "source": [_SOURCE] * 6,
        "source_quote": [_QUOTE] * 6,
    }
)
#: The same figures as our summary columns: 3 regions, completion times sorted, fastest, slowest.
PUBLISHED = pd.DataFrame(
    {
        "regions": [3, 3],
        "alloc_mutex": ["global", "per_area"],
        "completion_sorted_s": ["7 / 14 / 21", "7 / 7 / 8"],
        "fastest_s": [7.0, 7.0],
        "slowest_s": [21.0, 8.0],
        "source": [_SOURCE] * 2,
        "source_quote": [_QUOTE] * 2,
    }
)

VARIANTS = ("global", "per_area")
REGIONS = (1, 2, 3, 4)
TOPOLOGY = "node:4 core:1 pu:1"  # one node (and one model CPU) per area, for every region count
#: The seed's machine (``profiles/generic-3node-zen1.toml``): 3 nodes, area i and its worker on node i.
MACHINE = "generic-3node-zen1"
#: Region counts of the virtual part: up to the seed's 3 (one per node of its machine).
VIRTUAL_REGIONS = (1, 2, 3)


def sizes(quick: bool) -> dict[str, int]:
    """Pages per region and repeats: the scenario's default (about a second per run) or a quick few thousand, at
    the fewest repeats a comparison accepts; the virtual part's pages per region (the seed: 2,621,440)."""
    return {
        "pages_per_region": sized(131_072, 4_096, quick_mode=quick),
        "repeats": sized(5, stats.MIN_REPEATS, quick_mode=quick),
        "virtual_pages_per_region": sized(131_072, 1_024, quick_mode=quick),
    }


def run(quick: bool, out_dir: Path, progress: bool) -> StudyResult:
    """Sweep regions x alloc_mutex, then files shared vs per_area; tabulate beside the seed and draw the plots.

    Args:
        quick: 1,024 pages per region (virtual) and 4,096 (real) instead of 131,072, and only the region counts that
            fit the host's PUs.
        out_dir: where the PNG plots go.
        progress: show the sweeps' progress bars.
    """
    size = sizes(quick)
    virtual = summarize(virtual_runs(size["virtual_pages_per_region"], progress).runs)
    regions = [r for r in REGIONS if not quick or fits_host(r)]
    result = measure("cma_concurrent", grid={"regions": regions, "alloc_mutex": list(VARIANTS)},
                     repeats=size["repeats"], topology=TOPOLOGY, progress=progress, quick=quick,
                     pages_per_region=size["pages_per_region"])  # fmt: skip
    assert isinstance(result, SweepResult)
    files_regions = files_regions_for_host()
    files = measure("cma_concurrent", grid={"files": ["shared", "per_area"]}, repeats=size["repeats"], quick=quick,
                    topology=TOPOLOGY, progress=progress, regions=files_regions, alloc_mutex="per_area",
                    pages_per_region=size["pages_per_region"])  # fmt: skip
    assert isinstance(files, SweepResult)
    table = summarize(result.runs)
    plots = draw(result, files, out_dir, quick=quick)
    notes = [
        f"virtual: machine {MACHINE}, {VIRTUAL_RUNS}; {size['virtual_pages_per_region']} pages per region",
        f"real: model '{TOPOLOGY}' on a host of {Topology.host().pus} PUs; {size['pages_per_region']} pages per region "
        f"(the seed: 2,621,440); {size['repeats']} timed repeats, interleaved; load average at the end: "
        f"{load_average()}",
        lockstat_cost(),
        *reading(table),
        *claim(table, quick),
        *files_reading(files_table(files), files_regions),
    ]
    notes += measurement_notes(result, files)
    return StudyResult(
        table=table,
        plots=plots,
        data=result,
        notes=notes,
        meta={"topology": TOPOLOGY, "files_comparison": files_table(files).to_dict(orient="records")},
        projected={"completion": projection(virtual, table)},
    )


def virtual_runs(pages_per_region: int, progress: bool = False) -> SweepResult:
    """The seed's experiment in virtual time: 1-3 regions x both variants on :data:`MACHINE`, one run per seed
    (:func:`~alloclab.studies.virtual`); each run's ``completion_s_<rank>`` columns are its workers' times, sorted.

    Args:
        pages_per_region: pages each worker allocates from its area.
        progress: show the sweep's progress bar.
    """
    return virtual("cma_concurrent", grid={"regions": list(VIRTUAL_REGIONS), "alloc_mutex": list(VARIANTS)},
                   machine=MACHINE, progress=progress, pages_per_region=pages_per_region)  # fmt: skip


def projection(virtual: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """Published | virtual | real per (regions, alloc_mutex): completion times sorted, slowest / fastest, and the
    slowest over global's slowest (the virtual and the real one each a comparison's finding); ``virtual`` and
    ``table`` are :func:`summarize` tables."""
    keys = ["regions", "alloc_mutex"]
    seed_global = PUBLISHED.loc[PUBLISHED["alloc_mutex"] == "global", "slowest_s"].iloc[0]
    pub = PUBLISHED.assign(slowest_vs_global=PUBLISHED["slowest_s"] / seed_global,
                           ratio_slowest_fastest=PUBLISHED["slowest_s"] / PUBLISHED["fastest_s"])  # fmt: skip
    figures = ["completion_sorted_s", "ratio_slowest_fastest", "slowest_vs_global"]
    return projected(keys, published=pub[[*keys, *figures]], virtual=virtual[[*keys, *figures]],
                     real=table[[*keys, *figures]], workers=lambda row: int(row["regions"]))  # fmt: skip


def files_regions_for_host() -> int:
    """Regions for the files comparison: the seed's 3, but no more than the host has PUs (at least 2)."""
    return max(2, min(3, Topology.host().pus))


def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (regions, alloc_mutex): medians of our completion times beside the seed's.

    Args:
        runs: the sweep table (``regions`` x ``alloc_mutex``).

    Returns:
        ``regions, alloc_mutex, runs, completion_sorted_s`` (the median of each rank, ``"a / b / c"``),
        ``fastest_s``, ``slowest_s``, ``ratio_slowest_fastest`` (medians of the timed runs) and its IQR,
        ``slowest_vs_global`` (the finding: median slowest / the global median at the same regions with its U-test
        p-value, or ``n.s.`` and why), ``alloc_mutex_wait_s`` and ``lock_counts_exact`` (the lock_stat run),
        ``oversubscribed``, then the seed's figures as ``published_*`` (NaN except at 3 regions) and their
        ``published_ratio_slowest_fastest``.
    """
    ok = timed(runs).copy()
    counts = counted(runs).groupby(["regions", "alloc_mutex"])
    wait, exact = counts["alloc_mutex_wait_s"].median(), counts["lock_counts_exact"].all()
    rank_cols = sorted((c for c in ok.columns if c.startswith("completion_s_")), key=lambda c: int(c.rsplit("_", 1)[1]))
    rows = []
    for (regions, variant), g in ok.groupby(["regions", "alloc_mutex"], sort=True):
        ranks = [g[c].median() for c in rank_cols[: int(regions)]]
        rows.append(
            {
                "regions": int(regions),
                "alloc_mutex": variant,
                "runs": len(g),
                "completion_sorted_s": " / ".join(f"{t:.3g}" for t in ranks),
                "fastest_s": g["fastest_s"].median(),
                "slowest_s": g["slowest_s"].median(),
                "ratio_slowest_fastest": g["ratio_slowest_fastest"].median(),
                "ratio_slowest_fastest_iqr": g["ratio_slowest_fastest"].quantile(0.75)
                - g["ratio_slowest_fastest"].quantile(0.25),
                "alloc_mutex_wait_s": wait.get((regions, variant), float("nan")),
                "lock_counts_exact": bool(exact.get((regions, variant), False)),
                "oversubscribed": bool(g["oversubscribed"].astype(bool).any()),
            }
        )
    table = pd.DataFrame(rows)
    if len(ok) and ok["alloc_mutex"].nunique() > 1:
        cmp = stats.compare(ok, by="alloc_mutex", metric="slowest_s", within="regions", baseline="global")
        cmp = cmp.rename(columns={"finding": "slowest_vs_global"})
        table = table.merge(cmp[["regions", "alloc_mutex", "slowest_vs_global"]], on=["regions", "alloc_mutex"],
                            how="left")  # fmt: skip
    table = beside(table, PUBLISHED, on=["regions", "alloc_mutex"])
    table["published_ratio_slowest_fastest"] = table["published_slowest_s"] / table["published_fastest_s"]
    return table


def ranked_workers(workers: pd.DataFrame) -> pd.DataFrame:
    """The per-worker table with ``rank``: 1 for the first worker of its run to finish, 2 for the next, ...

    The global mutex is handed out in no fixed order, so worker ids do not line up across repeats; ranks do
    (the seed's terminals are, in effect, ranks).
    """
    out = workers.copy()
    out["rank"] = out.groupby("run")["elapsed_s"].rank(method="first").astype(int)
    return out


def files_table(files: SweepResult) -> pd.DataFrame:
    """Shared file vs one file per area (per-area mutexes): medians of the timed runs, and lock_stat of
    ``mapping->i_pages`` from the lock_stat runs."""
    ok = timed(files.runs)
    lock = files.lockstat
    lock = lock[lock["class"] == "mapping->i_pages"] if len(lock) else lock
    rows = []
    for variant, g in ok.groupby("files", sort=False):
        part = lock[lock["run"].isin(counted(files.runs).query("files == @variant")["run"])] if len(lock) else lock
        rows.append(
            {
                "files": variant,
                "runs": len(g),
                "fastest_s": g["fastest_s"].median(),
                "slowest_s": g["slowest_s"].median(),
                "ratio_slowest_fastest": g["ratio_slowest_fastest"].median(),
                "i_pages_contentions": float(part["contentions"].median()) if len(part) else 0.0,
                "i_pages_wait_ms": float(part["waittime_total_ns"].median()) / 1e6 if len(part) else 0.0,
                "i_pages_hold_ms": float(part["holdtime_total_ns"].median()) / 1e6 if len(part) else 0.0,
            }
        )
    return pd.DataFrame(rows)


def claim(table: pd.DataFrame, quick: bool) -> list[str]:
    """The seed's claim at each region count of 2 or more: per-area mutexes finish the slowest allocation sooner."""
    lines = []
    for regions, g in table[table["regions"] >= 2].groupby("regions"):
        by = g.set_index("alloc_mutex")
        if {"global", "per_area"} <= set(by.index):
            lines += against_claim(quick, by.loc["per_area", "slowest_s"], by.loc["global", "slowest_s"],
                                   f"per_area's slowest allocation ends before global's at {regions} "
                                   "regions", str(by.loc["per_area"].get("slowest_vs_global", "n.s.")))  # fmt: skip
    return lines


def reading(table: pd.DataFrame) -> list[str]:
    """One line per region count: our median ratio slowest/fastest within a run for each variant beside the seed's,
    and the comparison of the slowest allocations (a finding, or n.s.)."""
    lines = []
    for regions, g in table.groupby("regions"):
        parts = []
        for _, row in g.iterrows():
            seed = row.get("published_ratio_slowest_fastest")
            seed_txt = f" (seed {seed:.2f})" if pd.notna(seed) else ""
            over = ", oversubscribed" if row["oversubscribed"] else ""
            versus = "" if row["alloc_mutex"] == "global" else f", slowest vs global: {row['slowest_vs_global']}"
            parts.append(
                f"{row['alloc_mutex']}: {row['completion_sorted_s']} s, slowest/fastest within a run "
                f"{row['ratio_slowest_fastest']:.2f}{seed_txt}{over}{versus}"
            )
        lines.append(f"{regions} region(s): " + "; ".join(parts))
    return lines


def files_reading(ft: pd.DataFrame, regions: int) -> list[str]:
    """The files comparison in one line: does a shared mapping->i_pages slow the per-area variant?"""
    if not len(ft):
        return []
    by = ft.set_index("files")
    parts = [
        f"{f}: slowest {by.loc[f, 'slowest_s']:.3g} s, slowest/fastest {by.loc[f, 'ratio_slowest_fastest']:.2f}, "
        f"mapping->i_pages {by.loc[f, 'i_pages_contentions']:.0f} contentions, "
        f"{by.loc[f, 'i_pages_wait_ms']:.3g} ms wait"
        for f in by.index
    ]
    return [f"per_area, {regions} regions, files " + "; ".join(parts)]


def draw(result: SweepResult, files: SweepResult, out_dir: Path, *, quick: bool) -> list[Path]:
    """The study's plots, written as PNGs into ``out_dir``; returns their paths.

    ``workers.png`` (completion time per finishing rank, both variants, at the largest region count that is not
    oversubscribed — the 7/14/21 s picture), ``seed_workers.png`` (the seed's terminals), ``slowest.png`` (slowest
    completion vs regions), ``lockstat.png`` (wait vs hold of the mutexes and the page-cache lock) and
    ``files.png`` (shared vs per-area files); ``quick`` goes into their footers. The seed's terminals are single
    published figures: drawn without error bars.
    """
    paths: list[Path] = []
    prov = {**result.meta, "quick": quick}
    ok = timed(result.runs)
    fit = ok[~ok["oversubscribed"].astype(bool)]
    regions = int(fit["regions"].max()) if len(fit) else int(ok["regions"].max()) if len(ok) else 1
    workers = ranked_workers(result.workers[result.workers["run"].isin(ok["run"])])
    if len(workers):
        ax = Figure(figsize=(7, 4.2), layout="constrained").subplots()
        part = workers[workers["regions"] == regions]
        plot.workers(part, y="elapsed_s", by="alloc_mutex", worker="rank", ax=ax,
                     title=f"ours: completion time by finishing rank, {regions} regions", provenance=prov)  # fmt: skip
        paths.append(plot.savefig(ax, out_dir / "workers.png"))

    ax = Figure(figsize=(6, 4.2), layout="constrained").subplots()
    plot.workers(PUBLISHED_TERMINALS, y="elapsed_s", by="alloc_mutex", worker="terminal", ax=ax,
                 title="the seed: 3 terminals, 10 GiB each (published)")  # fmt: skip
    paths.append(plot.savefig(ax, out_dir / "seed_workers.png"))

    if len(ok):
        ax = Figure(figsize=(7, 4.5), layout="constrained").subplots()
        plot.scaling(ok, x="regions", y="slowest_s", hue="alloc_mutex", ax=ax, reference=None,
                     title="slowest completion vs regions", provenance=prov)  # fmt: skip
        paths.append(plot.savefig(ax, out_dir / "slowest.png"))

    lock = result.lockstat
    classes = ["cma_mutex", "cma->alloc_mutex", "pcpu_drain_mutex", "mapping->i_pages", "zone->lock"]
    if len(lock):
        part = lock[(lock["regions"] == regions) & lock["class"].isin(classes)]
        if len(part):
            ax = Figure(figsize=(7.5, 4), layout="constrained").subplots()
            plot.lockstat(part, by="alloc_mutex", ax=ax, log=True,
                          title=f"lock_stat at {regions} regions: wait vs hold (total)", provenance=prov)  # fmt: skip
            paths.append(plot.savefig(ax, out_dir / "lockstat.png"))

    files_workers = files.workers[files.workers["run"].isin(timed(files.runs)["run"])]
    if len(files_workers):
        ax = Figure(figsize=(6.4, 4.2), layout="constrained").subplots()
        plot.workers(ranked_workers(files_workers), y="elapsed_s", by="files", worker="rank", ax=ax,
                     title="per_area: one shared /dev/shm file vs one file per area",
                     provenance={**files.meta, "quick": quick})  # fmt: skip
        paths.append(plot.savefig(ax, out_dir / "files.png"))
    return paths
