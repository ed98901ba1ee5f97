"""The shmem prealloc seed: ``info->lock`` twice per page fault (2.6.35), once (the patch), never (ramfs).

Seed: Shaohua Li, "[PATCH] shmem: reduce one time of locking in pagefault" (2010-07-07). Its test program maps
16 GiB ``MAP_SHARED|MAP_ANON`` and lets 64 threads read one byte per page of disjoint 256 MiB slices (4,194,304
read faults) on a 64-CPU machine. Published: 2.6.35-rc3 ~20 s, with the patch ~12 s, the same test on a ramfs file
~10.5 s. ``PUBLISHED`` holds exactly those three figures, each with the seed's line it comes from, nothing else
(the table adds their ratios to the "before" time, which are what a 2-CPU machine can compare). The seed has no
figures for the overlap pattern, so it has none published.

Ours: the ``shmem_fault`` scenario, ``variant`` x ``pattern`` (disjoint, overlap) x threads (1, 2 and the host's
PUs when more), interleaved repeats, real 4 KiB clears. The table gives our median total time beside the seed's
seconds and, more usefully, both as ratios to ``lock_twice``; ``info_lock_per_fault`` and
``tree_lock_per_fault`` show the count the patch changed (2 -> 1, 0 for ramfs, 1 beside the xa_lock today) and
the lock_stat plot shows where the waiting went: ``info->lock`` against ``mapping->tree_lock`` (the author's
"next wall"). The issue's check — with 2 threads ``prealloc`` is not slower than ``lock_twice`` in the median of
interleaved repeats — is one line of the notes.

The plan (fixed before any result of it was looked at, issue 17 item 5; ``PLAN`` holds it as data):

* Real clock, this host: ``variant`` x ``pattern`` x threads (1, 2, the host's PUs up to 8), 131,072 pages per
  thread, 7 timed repeats of each configuration, interleaved, lock_stat off (counts from one more run of each).
  The test: ``al.stats.compare`` on ``elapsed_s``, each variant against ``lock_twice`` at the same pattern and
  threads, two-sided Mann-Whitney U, alpha 0.05, at least 5 unflagged repeats on each side; anything else is
  ``n.s.`` with its reasons. The primary comparison is the seed's: ``prealloc`` vs ``lock_twice``, disjoint,
  2 threads. Every p-value is reported as it comes out, whichever way it points.
* Virtual clock, the seed's machine: profile ``nehalem-ex-4s-64t`` (4 x Nehalem-EX, 64 CPUs; the shipped profile
  built for this seed), 64 threads, disjoint, 4,096 pages per thread (the seed: 65,536; the swap vector stays in
  its single-indirect half), real backing, ``costs="table"``, one run per variant and seed of
  :data:`~alloclab.studies.VIRTUAL_SEEDS` (a virtual run repeats exactly; the seed draws the start order, so each
  is another interleaving), tabulated as the real runs are (:func:`summarize`, the same test over the seeds). Its
  ratios to ``lock_twice`` are printed beside the seed's 20 s -> 12 s (0.60) and ramfs 10.5 s (0.525), untuned.

The lock kinds are the seed kernel's, declared by the ``shmem_fault`` scenario with its kernel (not here): in 2.6.35
on x86 every ``spinlock_t`` is a ticket spinlock, so ``lock_twice``, ``prealloc`` and ``ramfs`` run ``info->lock``,
``mapping->tree_lock``, ``lru_lock`` and ``zone->lock`` as ``ticket`` (``modern`` keeps qspinlock); a ``locks=``
entry overrides them. With 63 CPUs waiting, a ticket hand-off (the line serving every waiter's re-read, about
7.2 us on this profile) dwarfs the holds (0.5-0.9 us), so the virtual ratios come out near the ratio of
acquisitions (prealloc 0.51, ramfs 0.49 at the quick size). The absolute time per fault is about three times the
seed's (14.5 us against 4.8 us): the model charges each re-read a whole line transfer at its distance, where the
seed's Nehalem-EX serves a socket's waiters from its inclusive L3 after one cross-socket fill; that per-socket
serving, for which the profile has no sourced figure, is what the model lacks.

``projected["vs_lock_twice"]`` puts the seed's figures, the virtual projection and the real disjoint runs side by side
per thread count.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
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
    counted,
    load_average,
    lockstat_cost,
    measure,
    measurement_notes,
    projected,
    timed,
    virtual,
)

NAME = "shmem_prealloc"
TITLE = "shmem fault: info->lock twice (2.6.35) vs once (prealloc) vs ramfs vs modern (the 20/12/10.5 s table)"
SCENARIOS = ("shmem_fault",)
SEED = "shmem-prealloc-fault"
#: Wall time of `alloclab reproduce` (see the package docstring, ``ESTIMATED_S``).
ESTIMATED_S = {"quick": 3.5, "full": 42.3}

VARIANTS = ("lock_twice", "prealloc", "ramfs", "modern")
PATTERNS = ("disjoint", "overlap")
BASELINE = "lock_twice"

#: The seed's figures (seconds, "~" in the mail), 64 threads on a 64-CPU machine, disjoint slices.
_SOURCE = "shmem-prealloc-fault.mbox.txt (Shaohua Li, the patch mail)"
_QUOTE_PATCH = "The result of the test case: 2.6.35-rc3: ~20s 2.6.35-rc3 + patch: ~12s so this is 40% improvement."
_QUOTE_RAMFS = "I did a similar pagefault test against a ramfs file, the test result is ~10.5s."
PUBLISHED = pd.DataFrame(
    {
        "pattern": ["disjoint"] * 3,
        "variant": ["lock_twice", "prealloc", "ramfs"],
        "threads": [64] * 3,
        "elapsed_s": [20.0, 12.0, 10.5],
        "source": [_SOURCE] * 3,
        "source_quote": [_QUOTE_PATCH, _QUOTE_PATCH, _QUOTE_RAMFS],
    }
)


def published_ratios() -> pd.DataFrame:
    """``PUBLISHED``'s ``pattern, variant`` with ``ratio_vs_lock_twice``: each time over its pattern's "before"."""
    before = PUBLISHED[PUBLISHED["variant"] == BASELINE].set_index("pattern")["elapsed_s"]
    ratio = PUBLISHED["elapsed_s"] / PUBLISHED["pattern"].map(before)
    return PUBLISHED[["pattern", "variant"]].assign(**{f"ratio_vs_{BASELINE}": ratio})


#: The classes of the lock_stat picture.
LOCK_CLASSES = ("info->lock", "mapping->tree_lock", "mapping->i_pages", "lru_lock", "zone->lock")


#: The study's sizes, repeats and test, fixed before looking at the result (see the module docstring).
PLAN = {
    "real": {"pages_per_thread": 131_072, "repeats": 7, "quick_pages_per_thread": 1_024, "quick_repeats": 5},
    "test": {"function": "al.stats.compare", "metric": "elapsed_s", "test": "Mann-Whitney U, two-sided",
             "alpha": 0.05, "min_repeats": 5, "primary": ("disjoint", 2, "prealloc", BASELINE)},
    "virtual": {"machine": "nehalem-ex-4s-64t", "threads": 64, "pattern": "disjoint", "pages_per_thread": 4_096,
                "quick_pages_per_thread": 64, "backing": "real", "variants": ("lock_twice", "prealloc", "ramfs")},
}  # fmt: skip


def threads_for_host() -> list[int]:
    """1, 2 and the host's PU count (capped at 8), never more than the host's PUs (at least 1)."""
    pus = Topology.host().pus
    return sorted({t for t in (1, 2, min(pus, 8)) if t <= pus} or {1})


def sizes(quick: bool) -> dict[str, int]:
    """Pages per thread and repeats: 131,072 pages (512 MiB per thread, about 0.2 s per disjoint run: shorter runs
    drown in this host's noise) and 7 repeats, or 1,024 pages and 5 repeats (the fewest a comparison accepts) in quick
    mode."""
    real = PLAN["real"]
    return {
        "pages_per_thread": sized(real["pages_per_thread"], real["quick_pages_per_thread"], quick_mode=quick),
        "repeats": sized(real["repeats"], real["quick_repeats"], quick_mode=quick),
    }


def run(quick: bool, out_dir: Path, progress: bool) -> StudyResult:
    """Sweep variant x pattern x threads with interleaved repeats; tabulate beside the seed and draw the plots.

    Args:
        quick: 1,024 pages per thread and 5 repeats (seconds) instead of 131,072 and 7.
        out_dir: where the PNG plots go.
        progress: show the sweep's progress bar.
    """
    size = sizes(quick)
    threads = threads_for_host()
    result = measure("shmem_fault", grid={"pattern": list(PATTERNS), "threads": threads, "variant": list(VARIANTS)},
                     repeats=size["repeats"], progress=progress, quick=quick,
                     pages_per_thread=size["pages_per_thread"])  # fmt: skip
    assert isinstance(result, SweepResult)
    table = summarize(result.runs)
    plots = draw(result, table, out_dir, quick=quick)
    projected = projection(quick, progress)
    notes = [
        f"host of {Topology.host().pus} PUs; {size['pages_per_thread']} pages per thread (the seed: 65,536 per "
        f"thread, 64 threads); {size['repeats']} timed repeats, interleaved; real 4 KiB clears; load average at the "
        f"end: {load_average()}",
        lockstat_cost(),
        *reading(table),
        *claim(table, quick),
        *projection_notes(projected),
    ]
    notes += measurement_notes(result)
    meta = {"threads": threads, "plan": PLAN, "projection": projected.to_dict(orient="records")}
    return StudyResult(table=table, plots=plots, data=result, notes=notes, meta=meta,
                       projected={"vs_lock_twice": side_by_side(projected, table)})  # fmt: skip


#: The variants of the seed's claim, each as a ratio of its time to lock_twice's.
CLAIM_VARIANTS = ("prealloc", "ramfs")


def side_by_side(virtual: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """Published | virtual | real per thread count (disjoint): lock_twice's seconds and each claim variant's time
    over lock_twice's (the virtual and the real ratios are the comparisons' findings, a ratio only when significant);
    ``virtual`` and ``table`` are :func:`summarize` tables."""
    seed = claim_columns(PUBLISHED.merge(published_ratios(), on=["pattern", "variant"]), "elapsed_s",
                         f"ratio_vs_{BASELINE}")  # fmt: skip
    virtual = claim_columns(virtual, "elapsed_s", f"vs_{BASELINE}")
    real = claim_columns(table[table["pattern"] == PLAN["virtual"]["pattern"]], "elapsed_s", f"vs_{BASELINE}")
    return projected(["threads"], published=seed, virtual=virtual, real=real, workers=lambda row: int(row["threads"]))


def claim_columns(df: pd.DataFrame, seconds: str, ratio: str) -> pd.DataFrame:
    """One row per thread count of ``df`` (one row per threads x variant): ``threads, lock_twice_s`` (from
    ``seconds``) and ``<variant>_over_lock_twice`` for each of :data:`CLAIM_VARIANTS` (from ``ratio``)."""
    by = df.set_index(["threads", "variant"])
    return pd.DataFrame([{"threads": int(t), f"{BASELINE}_s": by.loc[(t, BASELINE), seconds],
                          **{f"{v}_over_{BASELINE}": by.loc[(t, v), ratio] for v in CLAIM_VARIANTS}}
                         for t in sorted(set(df["threads"]))])  # fmt: skip


def projection(quick: bool, progress: bool = False) -> pd.DataFrame:
    """The virtual-clock projection of ``PLAN["virtual"]`` on the seed's 64-CPU profile: one run per variant and
    seed (:func:`~alloclab.studies.virtual`), tabulated by :func:`summarize`.

    Args:
        quick: ``quick_pages_per_thread`` pages per thread instead of ``pages_per_thread``.
        progress: show the sweep's progress bar.

    Returns:
        The :func:`summarize` table of the runs (``elapsed_s``: the median over the seeds of the slowest worker's
        virtual time; ``vs_lock_twice``: the finding; lock_stat's waits; the seed's ``published_*`` figures).
    """
    plan = PLAN["virtual"]
    pages = sized(plan["pages_per_thread"], plan["quick_pages_per_thread"], quick_mode=quick)
    runs = virtual("shmem_fault", grid={"variant": list(plan["variants"])}, machine=plan["machine"],
                   progress=progress, threads=plan["threads"], pattern=plan["pattern"], pages_per_thread=pages,
                   backing=plan["backing"]).runs  # fmt: skip
    return summarize(runs)


def projection_notes(projected: pd.DataFrame) -> list[str]:
    """One line per variant of the virtual projection, beside the seed's ratio, and what it is not."""
    plan = PLAN["virtual"]
    lines = [f"virtual projection: machine {plan['machine']}, {plan['threads']} threads, {plan['pattern']}, "
             f"{VIRTUAL_RUNS}; untuned"]  # fmt: skip
    for _, row in projected.iterrows():
        seed = row[f"published_ratio_vs_{BASELINE}"]
        seed_txt = f"seed {seed:.3f}" if pd.notna(seed) else "seed: none"
        lines.append(
            f"  {row['variant']}: {row['elapsed_s'] * 1e3:.3f} ms virtual, / lock_twice {row[f'vs_{BASELINE}']}"
            f" ({seed_txt}); info->lock wait {row['info_lock_wait_ms']:.3f} ms, tree_lock wait "
            f"{row['tree_lock_wait_ms']:.3f} ms"
        )
    return lines


def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (pattern, threads, variant): our medians beside the seed's figures.

    Args:
        runs: the sweep table (``pattern`` x ``threads`` x ``variant``).

    Returns:
        ``pattern, threads, variant, runs, elapsed_s`` (median total time of the timed runs) and its IQR,
        ``vs_lock_twice`` (the finding: median / lock_twice's median at the same pattern and threads with its
        U-test p-value, or ``n.s.`` and why), medians of ``ns_per_fault``, ``faults_per_s``,
        ``info_lock_per_fault``, ``tree_lock_per_fault``, ``eexist_races``, ``cache_hits``, ``oversubscribed``;
        from the lock_stat run ``info_lock_wait_ms``, ``tree_lock_wait_ms`` and ``lock_counts_exact``; then the seed's
        ``published_*`` figures (by pattern and variant; NaN where it published none).
    """
    ok = timed(runs)
    keys = ["pattern", "threads", "variant"]
    table = (
        ok.groupby(keys, sort=False)
        .agg(
            runs=("elapsed_s", "size"),
            elapsed_s=("elapsed_s", "median"),
            elapsed_s_iqr=("elapsed_s", lambda s: s.quantile(0.75) - s.quantile(0.25)),
            ns_per_fault=("ns_per_fault", "median"),
            faults_per_s=("faults_per_s", "median"),
            info_lock_per_fault=("info_lock_per_fault", "median"),
            tree_lock_per_fault=("tree_lock_per_fault", "median"),
            eexist_races=("eexist_races", "median"),
            cache_hits=("cache_hits", "median"),
            oversubscribed=("oversubscribed", lambda s: bool(s.astype(bool).any())),
        )
        .reset_index()
    )
    counts = (
        counted(runs)
        .groupby(keys, sort=False)
        .agg(
            info_lock_wait_ms=("info_lock_wait_ns", lambda s: s.median() / 1e6),
            tree_lock_wait_ms=("tree_lock_wait_ns", lambda s: s.median() / 1e6),
            lock_counts_exact=("lock_counts_exact", lambda s: bool(s.fillna(False).astype(bool).all())),
        )
    )
    table = table.join(counts, on=keys)
    if len(ok) and BASELINE in set(ok["variant"]):
        test = PLAN["test"]
        cmp = stats.compare(ok, by="variant", metric=test["metric"], within=["pattern", "threads"], baseline=BASELINE,
                            alpha=test["alpha"], alternative="two-sided", min_repeats=test["min_repeats"])  # fmt: skip
        cmp = cmp.rename(columns={"finding": f"vs_{BASELINE}"})
        table = table.merge(cmp[[*keys, f"vs_{BASELINE}"]], on=keys, how="left")
    published = PUBLISHED[["pattern", "variant", "elapsed_s"]].merge(published_ratios(), on=["pattern", "variant"])
    published = published.rename(columns={c: f"published_{c}" for c in published.columns[2:]})
    out = table.merge(published, on=["pattern", "variant"], how="left", validate="many_to_one")
    order = {v: i for i, v in enumerate(VARIANTS)}
    out = out.sort_values(["pattern", "threads", "variant"], key=lambda c: c.map(order) if c.name == "variant" else c)
    return out.reset_index(drop=True)


def issue_check(table: pd.DataFrame, threads: int = 2) -> str:
    """With ``threads`` threads (disjoint): prealloc's and lock_twice's medians and the comparison's finding."""
    part = table[(table["pattern"] == "disjoint") & (table["threads"] == threads)].set_index("variant")
    if not {"prealloc", BASELINE} <= set(part.index):
        return f"no disjoint runs at {threads} threads"
    pre, base = part.loc["prealloc", "elapsed_s"], part.loc[BASELINE, "elapsed_s"]
    return (
        f"{threads} threads, disjoint: prealloc median {pre * 1e3:.2f} ms vs lock_twice {base * 1e3:.2f} ms: "
        f"{part.loc['prealloc', f'vs_{BASELINE}']}"
    )


def claim(table: pd.DataFrame, quick: bool, threads: int = 2) -> list[str]:
    """The seed's claim at ``threads`` threads (disjoint): prealloc takes less time than lock_twice."""
    part = table[(table["pattern"] == "disjoint") & (table["threads"] == threads)].set_index("variant")
    if not {"prealloc", BASELINE} <= set(part.index):
        return []
    return against_claim(quick, part.loc["prealloc", "elapsed_s"], part.loc[BASELINE, "elapsed_s"],
                         f"prealloc is faster than lock_twice at {threads} threads, disjoint",
                         str(part.loc["prealloc", f"vs_{BASELINE}"]))  # fmt: skip


def reading(table: pd.DataFrame) -> list[str]:
    """One line per (pattern, threads): our ratios to lock_twice beside the seed's, and the issue's check."""
    lines = []
    for (pattern, threads), g in table.groupby(["pattern", "threads"], sort=False):
        parts = []
        for _, row in g.iterrows():
            if row["variant"] == BASELINE:
                continue
            seed = row.get(f"published_ratio_vs_{BASELINE}")
            seed_txt = f" (seed {seed:.2f})" if pd.notna(seed) else ""
            parts.append(f"{row['variant']} {row[f'vs_{BASELINE}']}{seed_txt}")
        over = ", oversubscribed" if g["oversubscribed"].any() else ""
        per_fault = ", ".join(f"{r['variant']} {r['info_lock_per_fault']:.3f}" for _, r in g.iterrows())
        lines.append(
            f"{pattern}, {threads} thread(s){over}: time / lock_twice: "
            + "; ".join(parts)
            + f" | info->lock per fault: {per_fault}"
        )
    lines.append(issue_check(table))
    return lines


def draw(result: SweepResult, table: pd.DataFrame, out_dir: Path, *, quick: bool) -> list[Path]:
    """The study's plots, written as PNGs into ``out_dir``; returns their paths.

    ``ratios.png`` (ours vs the seed: time over lock_twice's, disjoint and overlap, at the most threads that are not
    oversubscribed), ``lockstat.png`` (wait vs hold of info->lock, the page-cache lock, lru_lock and zone->lock by
    variant, disjoint), ``overlap.png`` (total time vs threads, overlap) and ``scaling.png`` (faults/s vs threads,
    disjoint); ``quick`` goes into their footers.
    """
    paths: list[Path] = []
    prov = {**result.meta, "quick": quick}
    ok = timed(result.runs)
    if not len(ok):
        return paths
    fit = ok[~ok["oversubscribed"].astype(bool)]
    threads = int(fit["threads"].max()) if len(fit) else int(ok["threads"].max())

    fig = Figure(figsize=(9, 4), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    for ax, pattern in zip(axes, PATTERNS, strict=True):
        ours = table[(table["pattern"] == pattern) & (table["threads"] == threads)].set_index("variant")["elapsed_s"]
        ours = ours / ours.get(BASELINE, np.nan)  # ratio of medians (the table says which differences are findings)
        seed = published_ratios().query("pattern == @pattern").set_index("variant")[f"ratio_vs_{BASELINE}"]
        x = np.arange(len(VARIANTS), dtype=float)
        ax.bar(x - 0.2, [ours.get(v, np.nan) for v in VARIANTS], 0.4, label=f"ours, {threads} threads (medians)")
        ax.bar(x + 0.2, [seed.get(v, np.nan) for v in VARIANTS], 0.4,
               label="published (64 CPUs)", color="tab:gray")  # fmt: skip
        ax.axhline(1.0, color="black", lw=0.8, ls=":")
        ax.set_xticks(x, list(VARIANTS))
        ax.set_title(f"{pattern}: total time / lock_twice")
        ax.grid(True, axis="y", alpha=0.3)
        ax.set_ylabel("total time / lock_twice's (ratio)")
        ax.legend(fontsize="small", title="ratio of medians; published: single figures", title_fontsize="small")
    plot.footer(fig, prov)
    paths.append(plot.savefig(axes[0], out_dir / "ratios.png"))

    lock = result.lockstat
    if len(lock):
        part = lock[(lock["pattern"] == "disjoint") & (lock["threads"] == threads) & lock["class"].isin(LOCK_CLASSES)]
        if len(part):
            ax = Figure(figsize=(7.5, 5), layout="constrained").subplots()
            plot.lockstat(part, by="variant", ax=ax, log=True, provenance=prov,
                          title=f"lock_stat, disjoint, {threads} threads: wait vs hold (total)")  # fmt: skip
            paths.append(plot.savefig(ax, out_dir / "lockstat.png"))

    over = ok[ok["pattern"] == "overlap"]
    if len(over):
        ax = Figure(figsize=(7, 4.5), layout="constrained").subplots()
        plot.scaling(over, x="threads", y="elapsed_s", hue="variant", ax=ax, reference=None,
                     title="overlap (every thread reads the whole file): total time", provenance=prov)  # fmt: skip
        paths.append(plot.savefig(ax, out_dir / "overlap.png"))

    disjoint = ok[ok["pattern"] == "disjoint"]
    if len(disjoint):
        ax = Figure(figsize=(7, 4.5), layout="constrained").subplots()
        plot.scaling(disjoint, x="threads", y="faults_per_s", hue="variant", ax=ax,
                     title="disjoint (the seed's test): faults/s", provenance=prov)  # fmt: skip
        paths.append(plot.savefig(ax, out_dir / "scaling.png"))
    return paths
