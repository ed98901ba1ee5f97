"""Lock kinds on NUMA machines, in virtual time: throughput, fairness and local hand-offs by CPUs and nodes.

The experiment people run on NUMA-aware locks (CNA, cohort, HMCS, ShflLock against MCS, qspinlock and the rest):
one lock hammered by 1 .. all CPUs of a machine, each critical section writing the lock's protected lines, the
workers packed onto as few nodes as they fit (``compact``) or spread over every node (``scatter``). Real scaling
stops at this host's 2 CPUs, so every run is virtual (``costs="table"``) on two shipped profiles with more than
one node: a run is a pure function of its inputs, so one run per configuration is the figure (no repeats, no
significance test: there is no noise). lock_stat is free in virtual time, so the same run gives the hand-off shares.
No seed publishes these figures: ``PUBLISHED`` is empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib
import pandas as pd
from matplotlib.figure import Figure

from .. import plot
from .._catalogue import lock_kinds
from ..config import sized
from ..machines import machine
from ..sweep import SweepResult, sweep
from . import StudyResult, join

NAME = "lock_numa"
TITLE = "lock kinds x CPUs x nodes in virtual time on a 2-node and a 4-node machine (no seed patch)"
SCENARIOS = ()
SEED = None
#: Wall time of `alloclab reproduce` (see the package docstring, ``ESTIMATED_S``).
ESTIMATED_S = {"quick": 3.0, "full": 7.4}
#: No publication: the lab's own projection.
PUBLISHED = pd.DataFrame({"lock": pd.Series(dtype=str), "threads": pd.Series(dtype="int64")})

#: The two shipped profiles with more than one node: Ice Lake-SP 2 sockets (2 nodes) and Zen 3 in NPS2 (4 nodes).
PROFILES = ("xeon-8380-2s", "assumed-epyc7763-2s-nps2")
PLACEMENTS = ("compact", "scatter")
HOLD_NS = 100  # the critical section beyond its lines, as lock_zoo's study
THINK_NS = 200
LINES = 2  # protected lines each critical section writes: the lock's data moves with the lock
TIE = 0.01  # kinds within 1 % of the best throughput at a point share the "fastest" line


def run(quick: bool, out_dir: Path, progress: bool) -> StudyResult:
    """Sweep every lock kind over CPU counts (powers of two up to the machine's CPUs) and both placements on each
    profile, and draw throughput and fairness.

    Args:
        quick: CPU counts 1, 4, 16, 64 and 100 acquisitions per worker (deterministic, a few seconds per profile)
            instead of 1, 2, 4, ..., all CPUs and 400.
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
        f"virtual time, costs='table', one run per configuration (deterministic); {iterations} acquisitions per "
        f"worker of one lock_zoo lock, hold {HOLD_NS} ns after writing {LINES} protected lines, think {THINK_NS} ns",
        *winners(table),
    ]
    prov = {**data.meta, "quick": quick, "machine": ", ".join(PROFILES)}
    return StudyResult(table=table, plots=draw(table, out_dir, provenance=prov), data=data, notes=notes)


def project(name: str, kinds: list[str], threads: list[int], iterations: int, progress: bool) -> SweepResult:
    """The study's sweep on one profile: ``kinds`` x ``threads`` x :data:`PLACEMENTS`, virtual time, table costs.

    Args:
        name: a shipped profile (:func:`alloclab.machines`).
        kinds: lock kinds (:func:`alloclab.lock_kinds`).
        threads: virtual CPU counts, each at most the profile's CPUs.
        iterations: acquisitions per worker.
        progress: show the sweep's progress bar.

    Returns:
        The sweep with its detail tables, its runs table led by a ``machine`` column.
    """
    part = sweep("lock_zoo", grid={"lock": kinds, "threads": threads, "placement": list(PLACEMENTS)},
                 clock="virtual", machine=name, costs="table", detail=True, progress=progress,
                 iterations=iterations, hold_ns=HOLD_NS, think_ns=THINK_NS, lines=LINES)  # fmt: skip
    part.runs.insert(0, "machine", name)
    return part


def summarize(runs: pd.DataFrame, workers: pd.DataFrame) -> pd.DataFrame:
    """One row per (machine, placement, threads, lock): its virtual throughput, fairness and local hand-off share.

    Args:
        runs: the sweep table with a ``machine`` column (:func:`alloclab.studies.join` of the per-profile sweeps).
        workers: the sweeps' per-worker table (``run``, ``model_node``): how many nodes each run's workers sat on.

    Returns:
        ``machine, placement, threads, nodes_used, lock, acquisitions_per_s, vs_mcs`` (throughput over MCS's at the
        same point), ``fairness_jain``, ``fairness_max_min``, ``handoff_local_share``, ``status``.
    """
    ok = runs[runs["status"] == "ok"]
    cols = ["machine", "placement", "threads", "lock", "acquisitions_per_s", "fairness_jain", "fairness_max_min",
            "handoff_local_share", "status"]  # fmt: skip
    table = ok[cols].copy()
    table.insert(3, "nodes_used", ok["run"].map(workers.groupby("run")["model_node"].nunique()).to_numpy())
    mcs = table[table["lock"] == "mcs"].set_index(["machine", "placement", "threads"])["acquisitions_per_s"]
    table["vs_mcs"] = [
        r.acquisitions_per_s / mcs.get((r.machine, r.placement, r.threads), float("nan")) for r in table.itertuples()
    ]
    return table.sort_values(["machine", "placement", "threads", "lock"], kind="stable").reset_index(drop=True)


def winners(table: pd.DataFrame) -> list[str]:
    """One line per (machine, placement): which kind has the highest throughput over which CPU counts.

    Kinds within :data:`TIE` of the best at a point share it ("a = b"): virtual runs have no noise, but a 0.1 %
    difference between two kinds is no reason to name one.
    """
    lines = []
    for (name, placement), part in table.groupby(["machine", "placement"], sort=False):
        spans: list[list] = []  # [winners, first threads, last threads]
        for threads, point in part.groupby("threads", sort=True):
            best = point["acquisitions_per_s"].max()
            tied = point.loc[point["acquisitions_per_s"] >= best * (1 - TIE), "lock"]
            top = "every kind" if len(tied) == len(point) else " = ".join(tied)
            if spans and spans[-1][0] == top:
                spans[-1][2] = threads
            else:
                spans.append([top, threads, threads])
        said = ", ".join(f"{k} at {a}" if a == b else f"{k} at {a}-{b}" for k, a, b in spans)
        lines.append(f"fastest on {name} ({placement}): {said} CPUs")
    return lines


def draw(table: pd.DataFrame, out_dir: Path, *, provenance: Mapping[str, Any] | None = None) -> list[Path]:
    """Throughput and fairness (Jain) against CPUs, one panel per (machine, placement), a line per kind (one run
    per point: virtual runs have no spread to draw), one legend for the figure, the footer of ``provenance``."""
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
        fig.legend(handles, labels, loc="outside right center", title="lock (single value, n=1)")
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
