"""Lock kinds on NUMA machines, in virtual time: throughput, fairness and local hand-offs by CPUs and nodes.

The experiment people run on NUMA-aware locks (CNA, cohort, HMCS, ShflLock against MCS, qspinlock and the rest):
one lock hammered by 1 .. all CPUs of a machine, each critical section writing the lock's protected lines, the
workers packed onto as few nodes as they fit (``compact``) or spread over every node (``scatter``). Real scaling
stops at this host's 2 CPUs, so every run is virtual (``costs="table"``) on two shipped profiles with more than
one node. A virtual run repeats exactly, but its seed draws the workers' start order and so the interleaving, and a
FIFO lock keeps the order it starts with: each configuration runs once per seed of
:data:`~alloclab.studies.VIRTUAL_SEEDS` (:func:`~alloclab.studies.virtual`), the table holds medians over the seeds,
and a kind's throughput over MCS's, or a kind named fastest, rests on the U-test over them. lock_stat is free in
virtual time, so the same runs give the hand-off shares. No seed publishes these figures: ``PUBLISHED`` is empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib
import pandas as pd
from matplotlib.figure import Figure

from .. import plot, stats
from .._catalogue import lock_kinds
from ..config import sized
from ..machines import machine
from ..sweep import SweepResult
from . import VIRTUAL_RUNS, StudyResult, join, virtual

NAME = "lock_numa"
TITLE = "lock kinds x CPUs x nodes in virtual time on a 2-node and a 4-node machine (no seed patch)"
SCENARIOS = ()
SEED = None
#: Wall time of `alloclab reproduce` (see the package docstring, ``ESTIMATED_S``).
ESTIMATED_S = {"quick": 11.4, "full": 32.8}
#: No publication: the lab's own projection.
PUBLISHED = pd.DataFrame({"lock": pd.Series(dtype=str), "threads": pd.Series(dtype="int64")})

#: The two shipped profiles with more than one node: Ice Lake-SP 2 sockets (2 nodes) and Zen 3 in NPS2 (4 nodes).
PROFILES = ("xeon-8380-2s", "assumed-epyc7763-2s-nps2")
PLACEMENTS = ("compact", "scatter")
HOLD_NS = 100  # the critical section beyond its lines, as lock_zoo's study
THINK_NS = 200
LINES = 2  # protected lines each critical section writes: the lock's data moves with the lock
TIE = 0.01  # kinds within 1 % of the best median throughput at a point share the "fastest" line


def run(quick: bool, out_dir: Path, progress: bool) -> StudyResult:
    """Sweep every lock kind over CPU counts (powers of two up to the machine's CPUs) and both placements on each
    profile, and draw throughput and fairness.

    Args:
        quick: CPU counts 1, 4, 16, 64 and 100 acquisitions per worker (seconds) instead of 1, 2, 4, ..., all CPUs
            and 400.
        out_dir: where ``throughput.png`` and ``fairness.png`` go.
        progress: show the sweeps' progress bars.
    """
    kinds = lock_kinds()["kind"].tolist()
    iterations = sized(400, 100, quick_mode=quick)
    parts = []
    for name in PROFILES:
        cpus = machine(name).topology.pus
        threads = [t for t in (1, 4, 16, 64) if t <= cpus] if quick else _powers_of_two(cpus)
        parts.append(project(name, kinds, threads, iterations, progress))
    data = join(parts)
    table = summarize(data.runs, data.workers)
    notes = [
        f"virtual time, {VIRTUAL_RUNS}; {iterations} acquisitions per worker of one lock_zoo lock, hold {HOLD_NS} ns "
        f"after writing {LINES} protected lines, think {THINK_NS} ns",
        *winners(data.runs),
    ]
    prov = {**data.meta, "quick": quick, "machine": ", ".join(PROFILES)}
    return StudyResult(table=table, plots=draw(table, out_dir, provenance=prov), data=data, notes=notes)


def project(name: str, kinds: list[str], threads: list[int], iterations: int, progress: bool) -> SweepResult:
    """The study's sweep on one profile: ``kinds`` x ``threads`` x :data:`PLACEMENTS`, virtual time, table costs, one
    run per seed (:func:`~alloclab.studies.virtual`).

    Args:
        name: a shipped profile (:func:`alloclab.machines`).
        kinds: lock kinds (:func:`alloclab.lock_kinds`).
        threads: virtual CPU counts, each at most the profile's CPUs.
        iterations: acquisitions per worker.
        progress: show the sweep's progress bar.

    Returns:
        The sweep with its detail tables, its runs table led by a ``machine`` column.
    """
    part = virtual("lock_zoo", grid={"lock": kinds, "threads": threads, "placement": list(PLACEMENTS)}, machine=name,
                   progress=progress, iterations=iterations, hold_ns=HOLD_NS, think_ns=THINK_NS,
                   lines=LINES)  # fmt: skip
    part.runs.insert(0, "machine", name)
    return part


def summarize(runs: pd.DataFrame, workers: pd.DataFrame) -> pd.DataFrame:
    """One row per (machine, placement, threads, lock): medians over the seeds of its virtual throughput, fairness and
    local hand-off share, and its throughput over MCS's.

    Args:
        runs: the sweep table with a ``machine`` column (:func:`alloclab.studies.join` of the per-profile sweeps).
        workers: the sweeps' per-worker table (``run``, ``model_node``): how many nodes each run's workers sat on.

    Returns:
        ``machine, placement, threads, nodes_used, lock, seeds, acquisitions_per_s, fairness_jain,
        fairness_max_min, handoff_local_share`` (medians), ``vs_mcs`` (median throughput over MCS's at the same
        point) and ``vs_mcs_finding`` (that ratio as the U-test's finding over the seeds, or ``n.s.`` and why).
    """
    point = ["machine", "placement", "threads"]
    keys = [*point, "lock"]
    ok = runs[runs["status"] == "ok"]
    ok = ok.assign(nodes_used=ok["run"].map(workers.groupby("run")["model_node"].nunique()))
    table = ok.groupby(keys).agg(
        nodes_used=("nodes_used", "max"),
        seeds=("seed", "nunique"),
        acquisitions_per_s=("acquisitions_per_s", "median"),
        fairness_jain=("fairness_jain", "median"),
        fairness_max_min=("fairness_max_min", "median"),
        handoff_local_share=("handoff_local_share", "median"),
    )
    cmp = stats.compare(ok, by="lock", metric="acquisitions_per_s", within=point, baseline="mcs").set_index(keys)
    table = table.join(cmp[["ratio", "finding"]].rename(columns={"ratio": "vs_mcs", "finding": "vs_mcs_finding"}))
    table = table.reset_index()
    return table[[*point, "nodes_used", "lock", *table.columns.drop([*keys, "nodes_used"])]]


def winners(runs: pd.DataFrame) -> list[str]:
    """One line per (machine, placement): which kind has the highest median throughput over which CPU counts.

    Kinds share the lead ("a = b") when their median is within :data:`TIE` of the best one's (a 0.1 % difference
    between two kinds is no reason to name one) or the U-test over the seeds cannot tell them from it (n.s.).

    Args:
        runs: the sweep table with a ``machine`` column, one row per run (seeds as repeats).
    """
    lines = []
    for (name, placement), part in runs.groupby(["machine", "placement"], sort=False):
        spans: list[list] = []  # [winners, first threads, last threads]
        for threads, point in part.groupby("threads", sort=True):
            median = point.groupby("lock")["acquisitions_per_s"].median()
            best = median.idxmax()
            cmp = stats.compare(point, by="lock", metric="acquisitions_per_s", baseline=best).set_index("lock")
            tied = [k for k in median.index
                    if k == best or median[k] >= median[best] * (1 - TIE) or not cmp.loc[k, "significant"]]  # fmt: skip
            top = "every kind" if len(tied) == len(median) else " = ".join(tied)
            if spans and spans[-1][0] == top:
                spans[-1][2] = threads
            else:
                spans.append([top, threads, threads])
        said = ", ".join(f"{k} at {a}" if a == b else f"{k} at {a}-{b}" for k, a, b in spans)
        lines.append(f"fastest on {name} ({placement}): {said} CPUs")
    return lines


def draw(table: pd.DataFrame, out_dir: Path, *, provenance: Mapping[str, Any] | None = None) -> list[Path]:
    """Throughput and fairness (Jain) against CPUs, one panel per (machine, placement), a line per kind (the medians
    over the seeds), one legend for the figure, the footer of ``provenance``."""
    kinds = list(dict.fromkeys(table["lock"]))
    colours = dict(zip(kinds, matplotlib.colormaps["tab20"].colors[::2] + matplotlib.colormaps["tab20"].colors[1::2],
                       strict=False))  # fmt: skip
    markers = dict(zip(kinds, "osD^v<>phX*P", strict=False))
    paths = []
    for value, scale, label, logy, fname in (
        ("acquisitions_per_s", 1e6, "acquisitions per second (M/s, virtual time)", True, "throughput.png"),
        ("fairness_jain", 1.0, "Jain's fairness index (1 = fair)", False, "fairness.png"),
    ):
        panels = list(table.groupby(["machine", "placement"], sort=False))
        fig = Figure(figsize=(5.2 * len(PLACEMENTS) + 1.6, 3.6 * len(PROFILES)), layout="constrained")
        axes = fig.subplots(len(PROFILES), len(PLACEMENTS), squeeze=False).ravel()
        for ax, ((name, placement), part) in zip(axes, panels, strict=False):
            for kind, line in part.groupby("lock", sort=False):
                line = line.sort_values("threads")
                ax.plot(line["threads"], line[value] / scale, marker=markers[kind], color=colours[kind], label=kind)
            ax.set_xscale("log", base=2)
            if logy:
                ax.set_yscale("log")
            ax.set(title=f"{name}, {placement}", xlabel="virtual CPUs (threads)", ylabel=label)
            ax.grid(alpha=0.3)
        handles, labels = axes[0].get_legend_handles_labels()
        seeds = int(table["seeds"].max())
        fig.legend(handles, labels, loc="outside right center", title=f"lock (median of {seeds} seeds)")
        plot.footer(fig, provenance)
        path = out_dir / fname
        fig.savefig(path, dpi=120)
        paths.append(path)
    return paths


def _powers_of_two(n: int) -> list[int]:
    out, t = [], 1
    while t < n:
        out.append(t)
        t *= 2
    return [*out, n]
