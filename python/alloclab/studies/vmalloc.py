"""vmalloc lock-once: busy_lock twice vs once in the v6.7 and the v6.9+ (vmap_node) busy-tree shapes.

Seed: "mm/vmalloc: lock contention optimization under multi-threading" (rulinhuang, v1-v8; merged as
aaab830ad887). Before it, ``alloc_vmap_area()`` inserted a new area into the busy tree under the busy lock and
``setup_vmalloc_vm()`` took the same lock again to fill in ``vm->flags/addr/size/caller`` and ``va->vm``; the patch
sets those fields before the single insert. On v6.7 (one global ``vmap_area_lock``) it gave +5.5 % on
``stress-ng --pthread`` at 160 vCPUs; rebased on mm-unstable, where the busy tree had been split into per-node
``vmap_node`` trees (``vn->busy.lock``, up to 128 of them, chosen by address) and allocations mostly come from
per-node pools without ``free_vmap_area_lock``, only +0.6 % at 160 vCPUs and +4 % at 224.

The study runs ``vmalloc_stress`` with the seed's operation, ``pattern="stress_ng_pthread"`` (the default here):
one thread created by stress-ng's pthread stressor, its 16 KiB kernel stack from kernel/fork.c's per-CPU cache of
two stacks or from ``__vmalloc_node_range()`` (area, 4 zeroed pages, mapping), plus a stated cost for the rest of
the thread's life; and, as a separate pattern, the bare ``get_vm_area`` + ``vfree`` loop (``thread_stack``). It
runs on a model of the seed's 160-CPU machine (``node:2 core:80 pu:1``: 160 model CPUs, so ``vmap_nodes`` resolves
to 128 and ``lazy_max_pages`` to fls(160) x 32 MiB, as on that machine), with workers only on this host's PUs.
Grid: pattern x shape (``vmap_nodes`` 1 = v6.7, 0 = v6.9+ with 128 nodes) x ``busy_lock`` (twice, once) x threads x
``bounce_ns`` (0, and a big-machine handoff cost charged when a vmalloc lock's data was last touched by another
CPU), interleaved repeats. The table puts ours beside the seed's two figures (v6.7: patched/original throughput in
%; v6.9+: the gain in %), keyed by shape, only on the rows of the seed's operation (stress_ng_pthread): the bare
loop is not what the seed measured.

Virtual part: the seed's operation at its points (:data:`VIRTUAL_POINTS`: v6.7 at 40-160 vCPUs of the 160-vCPU Ice
Lake, v6.9+ at 160 there and at 224 on Sapphire Rapids), busy lock twice and once, ``costs="table"``, one run per
seed of :data:`~alloclab.studies.VIRTUAL_SEEDS`. A virtual run is deterministic, but the seed draws the workers'
start order at the gate and so the run's interleaving, and the gain of a few percent the seed reports is as small as
the difference two interleavings make (at 2,000 operations per worker the seeds' once/twice spread over 3.5 points at
160 vCPUs, 5 at 224). So a point's gain is a finding only when the U-test over the seeds says so, as for real repeats;
``projected["once_over_twice"]`` puts it between the seed's figures and the real runs.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .. import plot, stats
from ..config import sized
from ..sweep import SweepResult
from . import (
    SOURCE_COLUMNS,
    VIRTUAL_RUNS,
    StudyResult,
    against_claim,
    beside,
    counted,
    lockstat_cost,
    measure,
    measurement_notes,
    projected,
    timed,
    virtual,
)

NAME = "vmalloc_lock_once"
TITLE = "vmalloc busy lock twice -> once, v6.7 vs v6.9+ vmap_nodes: ops/s and busy-lock acquisitions"
SCENARIOS = ("vmalloc_stress",)
SEED = "vmalloc-busy-lock-once"
#: Wall time of `alloclab reproduce` (see the package docstring, ``ESTIMATED_S``): measured on the project's Zen 4 VM
#: (AMD EPYC, family 25 model 17), quiet, on 2026-12-07, once the virtual part ran five seeds per point.
ESTIMATED_S = {"quick": 8.6, "full": 557}

#: The seed thread's figures: stress-ng --pthread bogo ops/s. v6.7 on Ice Lake (Huang Rulin, 2024-02-09): patched /
#: original in percent; mm-unstable with vmap_nodes (2024-02-22): the gain in percent, 160 vCPUs Ice Lake and 224
#: vCPUs Sapphire Rapids. Nothing else was published as a figure. The quotes are whitespace-collapsed seed lines.
_SOURCE = "vmalloc-busy-lock-once.thread.txt"
PUBLISHED = pd.DataFrame(
    {
        "shape": ["v6.7", "v6.9+"],
        "pct_40_vcpus": [100.5, np.nan],
        "pct_80_vcpus": [100.8, np.nan],
        "pct_120_vcpus": [105.2, np.nan],
        "pct_160_vcpus": [105.5, np.nan],
        "gain_pct_160_vcpus": [np.nan, 0.6],
        "gain_pct_224_vcpus": [np.nan, 4.0],
        "machine": ["Ice Lake, v6.7", "Ice Lake (160) / Sapphire Rapids (224), mm-unstable"],
        "source": [_SOURCE] * 2,
        "source_quote": [
            "vcpu number 40 80 120 160 patched/original 100.5% 100.8% 105.2% 105.5%",
            "Compared to the previous result at kernel v6.7 with a 5% performance gain on intel icelake(160 vcpu), "
            "we only had a 0.6% with this commit base. But we think our modification still has some significance. "
            "On the one hand, this does reduce a critical section. On the other hand, we have a 4% performance gain "
            "on intel sapphire rapids(224 vcpu),",
        ],
    }
)

#: The model machine: the seed's 160-vCPU Ice Lake (2 sockets x 80). Workers run on host PUs 0..threads-1.
MODEL = "node:2 core:80 pu:1"
SHAPES = {1: "v6.7", 0: "v6.9+"}  # vmap_nodes -> shape
#: The seed's operation first (the default), then the bare get_vm_area + vfree loop.
SEED_PATTERN = "stress_ng_pthread"
DEFAULT_PATTERN = "thread_stack"  # the scenario's default: the bare loop
PATTERNS = (SEED_PATTERN, DEFAULT_PATTERN)
BOUNCE_NS = (0, 400)
#: Operations per worker of the quick virtual part (a 224-CPU run of 100 takes about a second of host time).
VIRTUAL_OPS_QUICK = 100
#: The seed's points in virtual time: (shape, online vCPUs, machine). v6.7 on the 160-vCPU Ice Lake
#: (``profiles/xeon-8380-2s.toml``) with 40-160 of its CPUs online, as the seed's scaling runs; v6.9+ on it at 160
#: and on the 224-vCPU Sapphire Rapids (``profiles/xeon-8480-2s.toml``). Workers run on CPUs 0..vCPUs-1.
VIRTUAL_POINTS = (
    ("v6.7", 40, "xeon-8380-2s"),
    ("v6.7", 80, "xeon-8380-2s"),
    ("v6.7", 120, "xeon-8380-2s"),
    ("v6.7", 160, "xeon-8380-2s"),
    ("v6.9+", 160, "xeon-8380-2s"),
    ("v6.9+", 224, "xeon-8480-2s"),
)


def threads_axis() -> list[int]:
    """1, 2 and the host's PU count (capped at 8): never more workers than host PUs (no oversubscription)."""
    host = os.cpu_count() or 1
    return sorted({t for t in (1, 2, min(host, 8)) if t <= host})


def run(quick: bool, out_dir: Path, progress: bool) -> StudyResult:
    """The seed's points in virtual time, then pattern x shape x busy_lock x threads x bounce_ns on this host, and
    the study's plots.

    Args:
        quick: virtual: ``VIRTUAL_OPS_QUICK`` operations per worker instead of 2,000; real: 1,000 operations per
            worker, 5 repeats, bounce 0 only and a purge every 2,000 lazy pages, instead of 200,000, 7, both bounces
            and the kernel's lazy_max_pages().
        out_dir: where the PNG plots go.
        progress: show the sweep's progress bar.
    """
    virtual_ops = sized(2_000, VIRTUAL_OPS_QUICK, quick_mode=quick)
    virtual = virtual_runs(virtual_ops, progress)
    gain = once_over_twice(virtual)
    ops = sized(200_000, 1_000, quick_mode=quick)
    repeats = sized(7, stats.MIN_REPEATS, quick_mode=quick)
    # The kernel's lazy_max_pages() for 160 CPUs is 65536 pages; quick runs are too short to reach it, so they
    # purge every 2000 pages to still exercise the pools.
    lazy_max_pages = sized(0, 2_000, quick_mode=quick)
    bounces = list(sized(BOUNCE_NS, BOUNCE_NS[:1], quick_mode=quick))
    grid = {"pattern": list(PATTERNS), "vmap_nodes": list(SHAPES), "busy_lock": ["twice", "once"],
            "threads": threads_axis(), "bounce_ns": bounces}  # fmt: skip
    result = measure("vmalloc_stress", grid=grid, repeats=repeats, topology=MODEL, progress=progress, quick=quick,
                     ops=ops, lazy_max_pages=lazy_max_pages)  # fmt: skip
    assert isinstance(result, SweepResult)
    table = summarize(result.runs)
    plots = draw(result, out_dir, quick=quick)
    notes = [
        f"virtual: {virtual_ops} {SEED_PATTERN} operations per worker, {VIRTUAL_RUNS}: "
        + ", ".join(f"{s} {v} vCPUs on {m}" for s, v, m in VIRTUAL_POINTS),
        *virtual_reading(virtual, gain),
        f"real: {ops} operations per worker (16 KiB + guard at 16 KiB; stress_ng_pthread: thread creations, 1024 per "
        f"round, stacks from fork.c's 2-stack cache or vmalloc), {repeats} timed repeats, interleaved, model {MODEL}.",
        lockstat_cost(),
        *reading(table),
        *claim(table, quick),
    ]
    notes += measurement_notes(result)
    return StudyResult(table=table, plots=plots, data=result, notes=notes, meta={"model_topology": MODEL},
                       projected={"once_over_twice": projection(gain, table)})  # fmt: skip


def virtual_runs(ops: int, progress: bool = False) -> pd.DataFrame:
    """The seed's operation at each of :data:`VIRTUAL_POINTS`, busy lock twice and once, one virtual run
    (``costs="table"``) per seed of :data:`~alloclab.studies.VIRTUAL_SEEDS` (:func:`~alloclab.studies.virtual`):
    the seed draws the start order, so each is another interleaving.

    Args:
        ops: operations per worker.
        progress: show the sweeps' progress bars.

    Returns:
        The sweep rows of every point (``busy_lock``, ``seed``, ``ops_per_s``, ``nr_vmap_nodes``,
        ``lock_counts_exact``, ...) with ``shape, vcpus, machine``.
    """
    nodes = {shape: n for n, shape in SHAPES.items()}
    return pd.concat([virtual("vmalloc_stress", grid={"busy_lock": ["twice", "once"]}, machine=machine,
                              progress=progress, threads=vcpus, ops=ops, pattern=SEED_PATTERN,
                              vmap_nodes=nodes[shape]).runs.assign(shape=shape, vcpus=vcpus, machine=machine)
                      for shape, vcpus, machine in VIRTUAL_POINTS], ignore_index=True)  # fmt: skip


def once_over_twice(runs: pd.DataFrame) -> pd.DataFrame:
    """Ops/s once over twice per point, over the seeds of :func:`virtual_runs`.

    Returns:
        ``shape, vcpus, once_over_twice`` (median over median), ``p_value`` (U-test, once vs twice),
        ``significant`` and ``finding`` (the ratio to 4 digits with its p-value, or ``n.s.`` and why), in
        :data:`VIRTUAL_POINTS` order.
    """
    cmp = stats.compare(runs, by="busy_lock", metric="ops_per_s", within=["shape", "vcpus"], baseline="twice",
                        digits=4)  # fmt: skip
    once = cmp[cmp["busy_lock"] == "once"].rename(columns={"ratio": "once_over_twice"})
    return once[["shape", "vcpus", "once_over_twice", "p_value", "significant", "finding"]].reset_index(drop=True)


def virtual_reading(runs: pd.DataFrame, gain: pd.DataFrame) -> list[str]:
    """One line per virtual point: the gain over the seeds (median, and each seed's), and whether it is a finding.

    Args:
        runs: :func:`virtual_runs`' rows.
        gain: :func:`once_over_twice` of them.
    """
    lines = []
    for _, r in gain.iterrows():
        part = runs[(runs["shape"] == r["shape"]) & (runs["vcpus"] == r["vcpus"])]
        wide = part.pivot_table(index="seed", columns="busy_lock", values="ops_per_s")
        per_seed = ", ".join(f"{g:+.2f}" for g in 100 * (wide["once"] / wide["twice"] - 1))
        lines.append(f"virtual {r['shape']} at {int(r['vcpus'])} vCPUs: once/twice - 1 = "
                     f"{100 * (r['once_over_twice'] - 1):+.2f} % (per seed: {per_seed} %): {r['finding']}")  # fmt: skip
    return lines


def published_points() -> pd.DataFrame:
    """The seed's figures as ``shape, vcpus, once_over_twice``: v6.7's patched/original % and v6.9+'s gain %."""
    rows = []
    for _, r in PUBLISHED.iterrows():
        for col in PUBLISHED.columns:
            if col.endswith("_vcpus") and pd.notna(r[col]):
                vcpus = int(col.split("_")[-2])
                ratio = r[col] / 100 if col.startswith("pct_") else 1 + r[col] / 100
                rows.append({"shape": r["shape"], "vcpus": vcpus, "once_over_twice": ratio})
    return pd.DataFrame(rows)


def projection(gain: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """Published | virtual | real per (shape, vCPUs): ops/s once over twice (the virtual one over the seeds,
    :func:`once_over_twice`'s ``gain``; the real one over the repeats of the seed's operation at bounce 0, from the
    :func:`summarize` ``table``: each a finding, a ratio only when significant)."""
    real = table[(table["pattern"] == SEED_PATTERN) & (table["bounce_ns"] == 0)]
    real = real.rename(columns={"threads": "vcpus", "once_vs_twice": "once_over_twice"})
    real = real[["shape", "vcpus", "once_over_twice"]]
    virtual = gain[["shape", "vcpus", "finding"]].rename(columns={"finding": "once_over_twice"})
    return projected(["shape", "vcpus"], published=published_points(), virtual=virtual, real=real,
                     workers=lambda row: int(row["vcpus"]))  # fmt: skip


def with_shape(df: pd.DataFrame) -> pd.DataFrame:
    """The table with ``shape`` ("v6.7" / "v6.9+") and ``variant`` ("v6.7 twice", ...) columns added."""
    out = df.copy()
    out["shape"] = out["vmap_nodes"].map(SHAPES)
    out["variant"] = out["shape"] + " " + out["busy_lock"].astype(str)
    return out


def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (pattern, shape, bounce_ns, threads): twice and once side by side, once/twice in %, and the counts.

    Args:
        runs: the sweep table (``pattern`` x ``vmap_nodes`` x ``busy_lock`` x ``threads`` x ``bounce_ns``; without
            a ``pattern`` column, the scenario's default ``thread_stack``).

    Returns:
        ``pattern, shape, nr_vmap_nodes, bounce_ns, threads, runs, ops_per_s_twice, ops_per_s_once`` (medians of
        the timed runs), ``once_vs_twice`` (the finding: median ratio with its U-test p-value, or ``n.s.`` and why),
        ``busy_lock_per_alloc_twice/_once`` (exactly 2 and 1), ``busy_contentions_per_kalloc_twice/_once``
        (busy-lock contentions per 1000 allocations, the lock_stat run), ``free_lock_per_alloc`` and
        ``pool_hit_ratio`` (once), then the seed's figures for that shape (``published_pct_<n>_vcpus`` for
        v6.7, ``published_gain_pct_<n>_vcpus`` for v6.9+, ``published_machine``; empty on the rows of other
        patterns than the seed's operation).
    """
    if "pattern" not in runs:  # a sweep that left the pattern at the scenario's default
        runs = runs.assign(pattern=DEFAULT_PATTERN)
    data = with_shape(timed(runs))
    counts = with_shape(counted(runs))
    counts = counts.assign(busy_contentions_per_kalloc=1000.0 * counts["busy_lock_contentions"].astype(float)
                           / counts["allocs"])  # fmt: skip
    keys = ["pattern", "shape", "bounce_ns", "threads"]
    cmp = stats.compare(data, by="busy_lock", metric="ops_per_s", within=keys, baseline="twice")
    once = cmp[cmp["busy_lock"] == "once"].set_index(keys)
    twice = cmp[cmp["busy_lock"] == "twice"].set_index(keys)
    med = data.groupby([*keys, "busy_lock"]).agg(
        nr_vmap_nodes=("nr_vmap_nodes", "median"),
        busy_lock_per_alloc=("busy_lock_per_alloc", "median"),
        free_lock_per_alloc=("free_lock_per_alloc", "median"),
        pool_hit_ratio=("pool_hit_ratio", "median"),
    )
    med = med.join(counts.groupby([*keys, "busy_lock"])["busy_contentions_per_kalloc"].median())
    rows = []
    for key in once.index:
        m_twice, m_once = med.loc[(*key, "twice")], med.loc[(*key, "once")]
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "nr_vmap_nodes": int(m_once["nr_vmap_nodes"]),
                "runs": int(once.loc[key, "n"] + twice.loc[key, "n"]),
                "ops_per_s_twice": twice.loc[key, "median"],
                "ops_per_s_once": once.loc[key, "median"],
                "once_vs_twice": once.loc[key, "finding"],
                "oversubscribed": bool(once.loc[key].get("oversubscribed", False)),
                "busy_lock_per_alloc_twice": m_twice["busy_lock_per_alloc"],
                "busy_lock_per_alloc_once": m_once["busy_lock_per_alloc"],
                "busy_contentions_per_kalloc_twice": m_twice["busy_contentions_per_kalloc"],
                "busy_contentions_per_kalloc_once": m_once["busy_contentions_per_kalloc"],
                "free_lock_per_alloc": m_once["free_lock_per_alloc"],
                "pool_hit_ratio": m_once["pool_hit_ratio"],
            }
        )
    table = pd.DataFrame(rows)
    if len(table):
        order = {"v6.7": 0, "v6.9+": 1, **{p: i for i, p in enumerate(PATTERNS)}}
        table = table.sort_values(keys, key=lambda c: c.map(order) if c.name in ("shape", "pattern") else c)
        table = table.reset_index(drop=True)
    return with_published(table)


def with_published(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with the seed's figures of its shape beside every row of the seed's operation (``published_*``
    columns, as :func:`alloclab.studies.beside` names them, empty on the rows of other patterns; many of our rows
    share one published row, so the join is many-to-one rather than beside()'s one-to-one)."""
    figures = [c for c in PUBLISHED.columns if c != "shape" and c not in SOURCE_COLUMNS]
    if not len(table):
        return beside(table, PUBLISHED, on=["shape"])
    published = PUBLISHED[["shape", *figures]].rename(columns={c: f"published_{c}" for c in figures})
    out = table.merge(published, on="shape", how="left", validate="many_to_one")
    out.loc[out["pattern"] != SEED_PATTERN, [f"published_{c}" for c in figures]] = np.nan
    return out


def reading(table: pd.DataFrame) -> list[str]:
    """Plain sentences on which regime shows the gain and why, with this run's numbers in them."""
    if not len(table):
        return ["no successful runs to read"]
    top = table[table["threads"] == table["threads"].max()]
    lines = []
    for (pattern, shape), part in top.groupby(["pattern", "shape"], sort=False):
        for _, r in part.iterrows():
            lines.append(
                f"{pattern}, {shape}, {int(r.threads)} threads, bounce {int(r.bounce_ns)} ns: once/twice (ops/s) "
                f"{r.once_vs_twice}; busy-lock contentions per 1000 allocations "
                f"{r.busy_contentions_per_kalloc_twice:.1f} -> {r.busy_contentions_per_kalloc_once:.1f}; "
                f"free_vmap_area_lock per allocation {r.free_lock_per_alloc:.2f}, pool hits {r.pool_hit_ratio:.0%}."
            )
    lines += [
        "Why: in v6.7 every fresh thread stack takes the global free_vmap_area_lock once and the global "
        "vmap_area_lock three times (insert_vmap_area, setup_vmalloc_vm, and fork.c's find_vm_area(); two after the "
        "patch), and its vfree once more (find_unlink_vmap_area); every CPU meets every other on the same lock, so "
        "the extra acquisition is one more handoff of a contended line, and removing it pays in proportion to "
        "contention (the seed: +0.5 % at 40 vCPUs, +5.5 % at 160). It pays only while vmap_area_lock, not "
        "free_vmap_area_lock, is the lock the CPUs queue on: compare the two locks' contentions.",
        "In v6.9+ most allocations are served from the CPU's own vmap_node pool (no free_vmap_area_lock at all) "
        "and the busy lock is one of up to 128 chosen by address, so two CPUs rarely want the same one: the "
        "extra acquisition is mostly uncontended and cheap, and the gain shrinks (the seed: +0.6 % at 160 vCPUs) "
        "until enough CPUs collide again (+4 % at 224).",
        "On a 2-PU host the contention of a 160-CPU machine cannot be reproduced by thread count; bounce_ns "
        "charges the cross-CPU cache-line transfer a big machine pays per handoff, and busy_lock_per_alloc "
        "(exactly 2 -> 1 in both shapes) is the count the patch changes.",
    ]
    return lines


def claim(table: pd.DataFrame, quick: bool) -> list[str]:
    """The seed's claim for its operation in the v6.7 shape at the most threads here: once is not slower than
    twice."""
    if not len(table):
        return []
    top = table[(table["threads"] == table["threads"].max()) & (table["shape"] == "v6.7")
                & (table["pattern"] == SEED_PATTERN)]  # fmt: skip
    lines = []
    for _, r in top.iterrows():
        if r.threads >= 2:
            lines += against_claim(quick, r.ops_per_s_twice, r.ops_per_s_once, f"{SEED_PATTERN}, v6.7, "
                                   f"{int(r.threads)} threads, "
                                   f"bounce {int(r.bounce_ns)} ns: once does at least as many ops/s as twice",
                                   str(r.once_vs_twice))  # fmt: skip
    return lines


def draw(result: SweepResult, out_dir: Path, *, quick: bool) -> list[Path]:
    """``once_vs_twice.png`` (the ratio per shape, threads and bounce), ``scaling.png`` (ops/s per variant) and
    ``lockstat.png`` (busy and free locks at the most threads), the last two for the seed's operation; returns
    their paths. ``quick`` goes into their footers."""
    paths: list[Path] = []
    prov = {**result.meta, "quick": quick}
    runs = with_shape(timed(result.runs))
    table = summarize(result.runs)

    if len(table):
        ax = Figure(figsize=(7, 4.2), layout="constrained").subplots()
        groups = list(table.groupby(["pattern", "shape", "bounce_ns"], sort=False))
        threads = sorted(table["threads"].unique())
        width = 0.8 / max(1, len(groups))
        for i, ((pattern, shape, bounce), part) in enumerate(groups):
            part = part.set_index("threads").reindex(threads)
            xs = np.arange(len(threads)) + (i - (len(groups) - 1) / 2) * width
            pct = 100.0 * part["ops_per_s_once"] / part["ops_per_s_twice"]  # ratio of medians
            ax.bar(xs, pct - 100.0, width, bottom=100.0, label=f"{pattern}, {shape}, bounce {bounce} ns")
        ax.axhline(100.0, color="black", linewidth=0.8)
        ax.set_xticks(np.arange(len(threads)), [str(t) for t in threads])
        ax.set_xlabel("threads")
        ax.set_ylabel("ops/s once / twice (%, medians)")
        ax.set_title("vmalloc_stress: busy lock once vs twice (seed: v6.7 105.5 %, v6.9+ 100.6 % at 160 vCPUs)")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize="small", title="ratio of medians", title_fontsize="small")
        plot.footer(ax.figure, prov)
        paths.append(plot.savefig(ax, out_dir / "once_vs_twice.png"))

    ax = Figure(figsize=(7, 4.5), layout="constrained").subplots()
    plain = runs[(runs["bounce_ns"] == 0) & (runs["pattern"] == SEED_PATTERN)]
    plot.scaling(plain, x="threads", y="ops_per_s", hue="variant", ax=ax,
                 title=f"vmalloc_stress {SEED_PATTERN} ops/s, bounce 0 ns", provenance=prov)  # fmt: skip
    paths.append(plot.savefig(ax, out_dir / "scaling.png"))

    lock = result.lockstat
    if len(lock):
        lock = with_shape(lock)
        most = lock[(lock["threads"] == lock["threads"].max()) & (lock["bounce_ns"] == 0)
                    & (lock["pattern"] == SEED_PATTERN)]  # fmt: skip
        classes = ["vmap_area_lock", "vn->busy.lock", "free_vmap_area_lock", "vn->pool_lock", "purge_vmap_area_lock",
                   "vn->lazy.lock"]  # fmt: skip
        ax = Figure(figsize=(7, 4.5), layout="constrained").subplots()
        plot.lockstat(most, by="variant", classes=classes, ax=ax, title="lock_stat, most threads: wait vs hold",
                      provenance=prov)  # fmt: skip
        paths.append(plot.savefig(ax, out_dir / "lockstat.png"))
    return paths
