"""Plots of sweeps and runs, drawn the way the field draws them. Every function draws on an Axes (a new figure
when ``ax`` is None), returns it, and never calls ``show()``; save with ``ax.figure.savefig(path)`` or
:func:`savefig`.

* :func:`scaling` — a metric against a scaling axis with the ideal reference (linear, inverse, or for one lock the
  ceiling 1/hold), will-it-scale style;
* :func:`workers` — per-worker completion bars (the CMA patch's 7/14/21 s vs 7/8/7 s picture);
* :func:`heatmap` — a metric over two axes (threads x multiplier), every cell annotated;
* :func:`lockstat` — lock_stat wait time beside hold time, per lock class;
* :func:`lockstat_compare` — the model's lock_stat beside a real kernel's (contentions, wait time);
* :func:`footer` — the provenance line every figure carries (host, model machine or topology, clock, repeats,
  quick or full, git sha).
* :func:`projected` — a seed study's claim: published and virtual as lines, real as points (a Figure).

seaborn does the statistics: repeated runs are reduced to their median with the interquartile range as the interval
(``estimator="median", errorbar=("pi", 50)``), and the legend names the interval and the number of runs per point;
a point with a single value (a published figure) is drawn without an interval. Axes are labelled with units chosen
from the data's magnitude (ns/µs/ms/s, k/M/G per second). Only rows with ``status == "ok"`` are drawn when a
``status`` column exists. Left out: significance marks (the study tables carry them) and kernel provenance beside a
real kernel's lock_stat (its reader records none).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import config
from ._checks import check_int
from ._run import RunResult
from .sweep import SweepResult

__all__ = ["footer", "heatmap", "lockstat", "lockstat_compare", "projected", "savefig", "scaling", "workers"]

_OVERSUB_LABEL = "oversubscribed (workers > host PUs)"
#: The interval every statistical plot draws around a median: seaborn's percentile interval of width 50 (the IQR).
_IQR = ("pi", 50)
#: The gid of the footer text, so that tests and a second call find it.
FOOTER_GID = "alloclab-footer"
#: Labels of dimensionless figures (no unit to scale).
_RATIOS = {
    "fairness_max_min": "fairness: max/min per-worker throughput (1 = fair)",
    "fairness_jain": "Jain's fairness index (1 = fair)",
    "wait_per_hold": "wait / hold (ratio)",
}
#: A magnitude of 1: what :func:`_unit` labels with the unit a column is stored in.
_AS_STORED = pd.Series([1.0])
#: Count columns (a unit of "count").
_COUNTS = ("ops", "acquisitions", "contentions", "contentions_count", "faults", "pages")


def scaling(
    df: pd.DataFrame,
    x: str = "threads",
    y: str = "acquisitions_per_s",
    hue: str | None = None,
    *,
    ax: Any = None,
    reference: str | None = "linear",
    hold_ns: float | None = None,
    published: pd.DataFrame | None = None,
    logy: bool = False,
    mark_oversubscribed: bool = True,
    title: str | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> Any:
    """Scaling curve: median of ``y`` against ``x`` per ``hue`` with IQR bars (seaborn), and the ideal reference.

    Args:
        df: a sweep table (one row per run).
        x: the numeric scaling axis, e.g. ``"threads"`` or ``"multiplier"``.
        y: the figure to plot; shown in the unit its magnitude suits (``*_per_s``: /s, k/s, M/s, G/s; ``*_ns``,
            ``*_ms``, ``*_s``, ``ns_per_*``: ns, µs, ms or s).
        hue: a column whose values get one line each (e.g. ``"lock"``); None: one line.
        ax: the Axes to draw on (None: a new figure).
        reference: ``"linear"`` draws ``y(x0) * x / x0`` per line (throughput-like figures: ideal scaling
            grows with ``x``), ``"inverse"`` draws ``y(x0) * x0 / x`` (time-like figures: ideal time shrinks),
            ``"ceiling"`` draws the most one lock can pass, ``1 / hold`` acquisitions per second (a per-second
            ``y`` of a run with one lock: only one worker holds it at a time, so no thread count goes above it),
            ``None`` draws none. ``x0`` is the line's smallest ``x``.
        hold_ns: the hold time of ``reference="ceiling"`` (default: the table's one ``hold_ns`` value).
        published: a seed's figures with the same ``x``, ``y`` (and ``hue``) columns, drawn as crosses in the
            line's colour and unit, without an interval (each is a single published figure).
        logy: logarithmic y axis.
        mark_oversubscribed: shade the ``x`` range whose runs were oversubscribed (needs an ``oversubscribed``
            column, as sweep tables have).
        title: the title (default: ``"<scenario>: <y> vs <x>"``).
        provenance: provenance to show in the footer over what ``df`` carries (its ``attrs["alloclab"]``), e.g.
            ``{"quick": True}`` or a sweep's ``meta``.

    Returns:
        The Axes; the legend names the interval and the runs per point (``median, IQR, n=5``).

    Raises:
        ValueError: a column is missing, ``x`` is not numeric, ``reference`` is unknown, or ``"ceiling"`` lacks
            a single positive hold time, a per-second ``y`` or a single lock (``locks_n`` = 1).
    """
    if reference not in ("linear", "inverse", "ceiling", None):
        raise ValueError(f"reference: expected 'linear', 'inverse', 'ceiling' or None, got {reference!r}")
    import seaborn as sns

    data = _ok(df, [x, y] + ([hue] if hue else []))
    if not pd.api.types.is_numeric_dtype(data[x]):
        raise ValueError(f"{x}: a scaling axis must be numeric (got dtype {data[x].dtype})")
    ceiling = _ceiling(data, y, hold_ns) if reference == "ceiling" else None
    scale, ylabel = _unit(y, data[y])
    xscale, xlabel = _unit(x, data[x])
    data = data.assign(**{y: data[y].astype(float) / scale, x: data[x].astype(float) / xscale})
    keys = [x] if hue is None else [hue, x]
    if hue is not None:
        data = data.assign(**{hue: data[hue].astype(str)})
    counts = data.groupby(keys)[y].count()
    interval = _interval(counts)
    ax = _axes(ax, (6.4, 4.2))
    levels = _unique(data[hue]) if hue else [None]
    colours = dict(zip(levels, sns.color_palette(n_colors=len(levels)), strict=True))
    sns.lineplot(data=data, x=x, y=y, hue=hue, hue_order=levels if hue else None,
                 palette=colours if hue else None, estimator="median",
                 errorbar=_IQR if counts.max() > 1 else None, err_style="bars", err_kws={"capsize": 3},
                 marker="o", ax=ax, legend=False)  # fmt: skip
    if hue is None:
        entries = [(ax.get_lines()[0], y)] if ax.get_lines() else []
    else:
        entries = [(_proxy(colours[v], marker="o"), v) for v in levels]
    extra: list[Any] = []
    if reference in ("linear", "inverse"):
        medians = data.groupby(keys)[y].median()  # each line's reference starts at its first median
        for value in levels:
            line = medians.loc[value] if hue else medians
            xs, med = line.index.to_numpy(dtype=float), line.to_numpy(dtype=float)
            if not len(xs) or xs[0] <= 0 or not np.isfinite(med[0]):
                continue
            ref = med[0] * xs / xs[0] if reference == "linear" else med[0] * xs[0] / xs
            label = f"_ideal ({reference}) {value}" if extra else f"ideal ({reference})"
            (drawn,) = ax.plot(xs, ref, linestyle="--", alpha=0.5, color=colours[value], label=label)
            if not extra:
                extra.append(drawn)
    elif ceiling is not None:
        extra.append(ax.axhline(ceiling[0] / scale, color="black", linestyle=":", linewidth=1.2,
                                label=f"ceiling 1/hold (hold {ceiling[1]:g} ns)"))  # fmt: skip
    if published is not None:
        seed = _ok(published, [x, y] + ([hue] if hue else []))
        crosses = [
            ax.scatter(part[x].astype(float) / xscale, part[y].astype(float) / scale, marker="x", s=60, zorder=3,
                       color=colours.get(value, "black"), label="published (single figures, no interval)")
            for value, part in (seed.groupby(seed[hue].astype(str), sort=False) if hue else [(None, seed)])
        ]  # fmt: skip
        extra += crosses[:1]
    distinct = np.unique(data[x].to_numpy(dtype=float))
    if 0 < len(distinct) <= 12:
        ax.set_xticks(distinct, [f"{v:g}" for v in distinct])
    if mark_oversubscribed:
        span = _shade_oversubscribed(ax, data, x)
        if span is not None:
            extra.append(span)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title if title is not None else f"{_scenario(df)}{y} vs {x}")
    ax.grid(True, alpha=0.3)
    _legend(ax, hue, interval, entries + [(a, a.get_label()) for a in extra])
    footer(ax.figure, _provenance(df, provenance), add=True)
    return ax


def workers(
    data: pd.DataFrame | RunResult | SweepResult,
    y: str = "elapsed_s",
    *,
    by: str | None = None,
    worker: str = "worker",
    ax: Any = None,
    annotate: bool = True,
    title: str | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> Any:
    """Per-worker completion bars (seaborn): one bar per worker, grouped by ``by`` (e.g. the variant).

    Args:
        data: a :class:`~alloclab.RunResult`, a :class:`~alloclab.sweep.SweepResult` (its ``workers`` table) or
            a per-worker DataFrame (one row per run and worker).
        y: the per-worker figure, e.g. ``"elapsed_s"`` (completion time, shown in the unit that suits it) or
            ``"ops"``.
        by: a column whose values get a bar each within every worker's group (e.g. ``"alloc_mutex"``); None:
            one bar per worker.
        worker: the column that identifies a worker.
        ax: the Axes to draw on (None: a new figure).
        annotate: write each bar's value on top of it.
        title: the title.
        provenance: provenance for the footer over what ``data`` carries.

    Returns:
        The Axes. Several runs of the same (``by``, worker) are reduced to their median with the IQR as error bars;
        a bar of one value (a published figure) has none. The legend names the interval and n.

    Raises:
        ValueError: a column is missing.
    """
    import seaborn as sns

    table = data.workers if isinstance(data, (RunResult, SweepResult)) else data
    table = _ok(table, [worker, y] + ([by] if by else []))
    scale, ylabel = _unit(y, table[y])
    table = table.assign(**{y: table[y].astype(float) / scale})
    if by is not None:
        table = table.assign(**{by: table[by].astype(str)})
    counts = table.groupby([worker] + ([by] if by else []))[y].count()
    ax = _axes(ax, (6.4, 4.2))
    levels = _unique(table[by]) if by else [y]
    sns.barplot(data=table, x=worker, y=y, hue=by, order=sorted(_unique(table[worker])),
                hue_order=levels if by else None, estimator="median",
                errorbar=_IQR if counts.max() > 1 else None, capsize=0.15, err_kws={"linewidth": 1}, ax=ax,
                legend=False)  # fmt: skip
    if annotate:
        for container in ax.containers:
            ax.bar_label(container, fmt="%.3g", fontsize="x-small", padding=2)
    ax.set_xlabel(worker)
    ax.set_ylabel(ylabel)
    ax.set_title(title if title is not None else f"{y} per {worker}")
    ax.grid(True, axis="y", alpha=0.3)
    _legend(ax, by, _interval(counts), list(zip(ax.containers, levels, strict=False)))
    footer(ax.figure, _provenance(data, provenance), add=True)
    return ax


def heatmap(
    df: pd.DataFrame,
    x: str,
    y: str,
    value: str,
    *,
    agg: str = "median",
    ax: Any = None,
    annotate: bool = True,
    fmt: str = ".3g",
    cmap: str = "viridis",
    log: bool = False,
    title: str | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> Any:
    """Annotated heatmap (seaborn) of ``value`` over two axes (e.g. threads x multiplier), one cell per (x, y).

    Args:
        df: a sweep table.
        x: the column along the horizontal axis.
        y: the column along the vertical axis (its smallest value at the bottom).
        value: the figure shown by colour, in the unit its magnitude suits (named on the colour bar).
        agg: how repeats are reduced (any pandas aggregation name: ``"median"``, ``"mean"``, ``"max"``...).
        ax: the Axes to draw on (None: a new figure).
        annotate: write the value in each cell; oversubscribed cells get a ``*``.
        fmt: format of the annotations.
        cmap: the matplotlib colour map.
        log: logarithmic colour scale.
        title: the title.
        provenance: provenance for the footer over what ``df`` carries.

    Returns:
        The Axes (the colour bar, labelled with the unit, ``agg`` and the runs per cell, is added to its figure).

    Raises:
        ValueError: a column is missing.
    """
    import seaborn as sns
    from matplotlib.colors import LogNorm

    data = _ok(df, [x, y, value])
    scale, label = _unit(value, data[value])
    data = data.assign(**{value: data[value].astype(float) / scale})
    grid = data.pivot_table(index=y, columns=x, values=value, aggfunc=agg, sort=True)
    counts = data.groupby([y, x])[value].count()
    counts = counts[counts > 0]  # a cell with no finite value is left blank, not counted
    marks = pd.DataFrame("", index=grid.index, columns=grid.columns)
    if "oversubscribed" in data.columns:
        flags = data.assign(_o=data["oversubscribed"].fillna(False).astype(bool))
        over = flags.pivot_table(index=y, columns=x, values="_o", aggfunc="max", sort=True)
        over = over.reindex(index=grid.index, columns=grid.columns).fillna(False).astype(bool)
        marks = marks.mask(over, "*")
    text = grid.apply(lambda col: col.map(lambda v: "" if not np.isfinite(v) else f"{v:{fmt}}")) + marks
    ax = _axes(ax, (6.4, 4.8))
    n = _interval(counts, statistic=agg, interval=None)
    sns.heatmap(grid, annot=text.to_numpy() if annotate else False, fmt="", cmap=cmap,
                norm=LogNorm() if log else None, cbar_kws={"label": f"{label}\n{n}"}, ax=ax)  # fmt: skip
    ax.invert_yaxis()
    ax.set_xlabel(_unit(x, _AS_STORED)[1])  # the tick labels are the values as stored
    ax.set_ylabel(_unit(y, _AS_STORED)[1])
    ax.tick_params(axis="y", rotation=0)
    if annotate and (marks == "*").to_numpy().any():
        ax.set_xlabel(f"{ax.get_xlabel()}    (* = {_OVERSUB_LABEL})")
    ax.set_title(title if title is not None else f"{_scenario(df)}{value}")
    footer(ax.figure, _provenance(df, provenance), add=True)
    return ax


def lockstat(
    data: pd.DataFrame | RunResult | SweepResult,
    *,
    by: str | None = None,
    stat: str = "total",
    classes: Sequence[str] | None = None,
    ax: Any = None,
    log: bool = False,
    title: str | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> Any:
    """lock_stat bars (seaborn): wait time beside hold time for each lock class (and each value of ``by``).

    A class whose wait bar dwarfs its hold bar is a contended lock: waiters spend longer queueing than the
    owner spends inside.

    Args:
        data: a :class:`~alloclab.RunResult`, a :class:`~alloclab.sweep.SweepResult` (its ``lockstat`` table)
            or a lock_stat DataFrame (``class``, ``waittime_*_ns``, ``holdtime_*_ns`` columns).
        by: a column of a long lock_stat table (e.g. ``"lock"`` or ``"variant"``) whose values get a bar
            pair each within a class; None: all runs of a class together.
        stat: ``"total"``, ``"avg"``, ``"min"`` or ``"max"`` (which lock_stat column pair to draw).
        classes: only these lock classes (default: every class that was acquired).
        ax: the Axes to draw on (None: a new figure).
        log: logarithmic time axis.
        title: the title.
        provenance: provenance for the footer over what ``data`` carries.

    Returns:
        The Axes. Times are shown in the unit (ns, µs, ms, s) that suits the largest value; several runs of the
        same bar are reduced to their median with the IQR as error bars, named in the legend with n.

    Raises:
        ValueError: an unknown ``stat`` or a missing column.
    """
    if stat not in ("total", "avg", "max", "min"):
        raise ValueError(f"stat: expected 'total', 'avg', 'max' or 'min', got {stat!r}")
    import seaborn as sns

    table = data.lockstat if isinstance(data, (RunResult, SweepResult)) else data
    wait, hold = f"waittime_{stat}_ns", f"holdtime_{stat}_ns"
    table = _ok(table, ["class", wait, hold] + ([by] if by else []))
    if classes is not None:
        table = table[table["class"].isin(list(classes))]
    label = (
        table["class"].astype(str)
        if by is None
        else table["class"].astype(str) + f" [{by}=" + table[by].astype(str) + "]"
    )
    long = table.assign(bar=label).melt(id_vars=["bar"], value_vars=[wait, hold], var_name="time", value_name="ns")
    long["time"] = long["time"].map({wait: f"wait ({stat})", hold: f"hold ({stat})"})
    scale, unit = _time_unit(float(np.nanmax(long["ns"].to_numpy(dtype=float))) if len(long) else 0.0)
    long["t"] = long["ns"].astype(float) / scale
    counts = long.groupby(["bar", "time"])["t"].count()
    bars = _unique(long["bar"])
    ax = _axes(ax, (6.4, max(2.5, 0.45 * len(bars) + 1.2)))
    sns.barplot(data=long, y="bar", x="t", hue="time", order=bars, orient="h", estimator="median",
                errorbar=_IQR if len(counts) and counts.max() > 1 else None, capsize=0.15, err_kws={"linewidth": 1},
                palette={f"wait ({stat})": "tab:red", f"hold ({stat})": "tab:blue"}, ax=ax, legend=False)  # fmt: skip
    if log:
        ax.set_xscale("log")
    ax.set_xlabel(f"{stat} time ({unit})")
    ax.set_ylabel("lock class")
    ax.set_title(title if title is not None else f"lock_stat: wait vs hold ({stat})")
    ax.grid(True, axis="x", alpha=0.3)
    kinds = [f"wait ({stat})", f"hold ({stat})"]
    _legend(ax, "lock_stat", _interval(counts), list(zip(ax.containers, kinds, strict=False)))
    footer(ax.figure, _provenance(data, provenance), add=True)
    return ax


def lockstat_compare(
    model: pd.DataFrame | RunResult,
    kernel: pd.DataFrame,
    *,
    classes: Sequence[str] | None = None,
    top: int = 10,
    labels: tuple[str, str] = ("model", "kernel"),
    axes: Sequence[Any] | None = None,
    title: str | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> tuple[Any, Any]:
    """The model's lock_stat beside a real kernel's (seaborn): contentions and total wait time per lock class.

    Args:
        model: a :class:`~alloclab.RunResult` or its ``lockstat`` table.
        kernel: a table read by :func:`alloclab.kernel.read_lockstat` or :func:`alloclab.kernel.read_perf_lock`
            (the same columns; a class is matched by its name: the model's ``zone->lock`` is lock_stat's
            ``&zone->lock``, whose ``&`` the reader drops; a ``-W``/``-R`` row stays a class of its own).
        classes: the classes to draw, in this order (default: the model's classes, then the kernel's most
            contended ones, ``top`` in all).
        top: how many classes to draw when ``classes`` is None.
        labels: the legend's names of the two sides.
        axes: two Axes to draw contentions and wait time on (None: a new figure with both side by side).
        title: the figure's title (default: ``"lock_stat: model vs kernel"``).
        provenance: provenance of the model side for the footer over what ``model`` carries.

    Returns:
        The two Axes (contentions, total wait time). Each bar is one side's total over its rows (one snapshot has
        no spread: no interval is drawn). A class one side does not have is drawn at 0 there and marked
        ``(model only)``/``(kernel only)``; wait times are in the unit (ns, µs, ms, s) that suits the largest bar,
        named on the axis.

    Raises:
        ValueError: a table lacks ``class``, ``contentions`` or ``waittime_total_ns``, or ``top`` < 1.
    """
    top = check_int("top", top, 1)
    import seaborn as sns

    cols = ["class", "contentions", "waittime_total_ns"]
    sides = [_ok(model.lockstat if isinstance(model, RunResult) else model, cols), _ok(kernel, cols)]
    sums = [side.groupby("class", sort=False)[cols[1:]].sum(min_count=1) for side in sides]
    if classes is None:
        by_contention = sums[1]["contentions"].astype(float).sort_values(ascending=False, kind="stable")
        classes = list(dict.fromkeys([*sums[0].index, *by_contention.index]))[:top]
    classes = list(classes)
    names = []
    for c in classes:
        only = [labels[i] for i in (0, 1) if c in sums[i].index]
        names.append(c if len(only) == 2 else f"{c} ({only[0] if only else 'neither'} only)")
    long = pd.concat(
        [
            s.reindex(classes).astype(float).fillna(0.0).assign(name=names, side=label)
            for s, label in zip(sums, labels, strict=True)
        ]
    )
    scale, unit = _time_unit(float(long["waittime_total_ns"].max()) if len(long) else 0.0)
    long["wait"] = long["waittime_total_ns"] / scale
    if axes is None:
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(11, max(2.6, 0.5 * len(classes) + 1.4)), layout="constrained")
        fig.suptitle(title if title is not None else "lock_stat: model vs kernel")
    ax_n, ax_t = axes
    palette = dict(zip(labels, ("tab:blue", "tab:orange"), strict=True))
    for ax, column, xlabel in (
        (ax_n, "contentions", "contentions (count)"),
        (ax_t, "wait", f"total wait time ({unit})"),
    ):
        sns.barplot(data=long, y="name", x=column, hue="side", order=names, hue_order=list(labels), orient="h",
                    errorbar=None, palette=palette, ax=ax, legend=False)  # fmt: skip
        ax.set_xlabel(xlabel)
        ax.set_ylabel("lock class" if ax is ax_n else "")
        if ax is ax_t:
            ax.set_yticks(ax.get_yticks(), [""] * len(names))
        ax.grid(True, axis="x", alpha=0.3)
    ax_n.legend(ax_n.containers, list(labels), title="totals, no interval (one snapshot)", fontsize="small",
                title_fontsize="small")  # fmt: skip
    footer(ax_n.figure, _provenance(model, provenance), add=True)
    return ax_n, ax_t


def savefig(ax: Any, path: str | os.PathLike, *, dpi: int = 120) -> Path:
    """Save the figure of ``ax`` as an image (format from the suffix, e.g. ``.png``) and return its path.

    Args:
        ax: an Axes returned by one of the plot functions.
        path: the file to write (parent directories are created).
        dpi: resolution.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ax.figure.savefig(path, dpi=dpi, bbox_inches="tight")
    return path


def footer(
    fig: Any, provenance: Mapping[str, Any] | RunResult | SweepResult | pd.DataFrame | None, *, add: bool = False
) -> Any:
    """Write the provenance line at the foot of ``fig`` (constrained layout makes room for it):
    ``host H · model machine M (costs=C) | model TOPOLOGY · clock K · repeats R · quick|full · git SHA``, or for a
    seed's table (a ``source`` column, no run provenance) ``published figures, not a run of this lab: SOURCE``.

    Every plot of this module calls it; a study's own figure calls it too, so a figure read alone says where its
    numbers come from. A fact the provenance lacks is shown as ``?``. A result made in this process (it has a
    ``clock`` and no ``git_sha``: every saved result has one) is shown with this process's git state and quick mode.

    Args:
        fig: the matplotlib Figure (``ax.figure``).
        provenance: a run's ``provenance``, a sweep's ``meta`` (``attrs["alloclab"]`` of its table), a loaded
            result's meta data, or a result or table that carries one; extra keys win (e.g. ``{"quick": True}``).
        add: keep the footer lines the figure has and add this one below them unless it is there already (what the
            plot functions do, so that panels from different sources each keep their line); False replaces them.

    Returns:
        The footer's Text (its gid is :data:`FOOTER_GID`).
    """
    own = isinstance(provenance, Mapping) or provenance is None
    text = _footer_text(_provenance(None, provenance) if own else _provenance(provenance, None))
    old = [t.get_text() for t in fig.texts if t.get_gid() == FOOTER_GID] if add else []
    lines = [line for t in old for line in t.split("\n") if line]
    if text not in lines:
        lines.append(text)
    label = fig.supxlabel("\n".join(lines), x=0.005, ha="left", fontsize="x-small", color="dimgray")
    label.set_gid(FOOTER_GID)
    return label


# --- helpers -----------------------------------------------------------------------------------------------


def _axes(ax: Any, figsize: tuple[float, float]) -> Any:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def _ok(df: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{missing[0]}: no such column (columns: {', '.join(map(str, df.columns))})")
    if "status" in df.columns:
        df = df[df["status"] == "ok"]
    return df


def _unique(series: pd.Series) -> list[Any]:
    return list(dict.fromkeys(series.tolist()))


def _scenario(df: pd.DataFrame) -> str:
    name = (df.attrs.get("alloclab") or {}).get("scenario")
    if name is None and "scenario" in df.columns and df["scenario"].nunique() == 1:
        name = df["scenario"].iloc[0]
    return f"{name}: " if name else ""


def _shade_oversubscribed(ax: Any, data: pd.DataFrame, x: str) -> Any:
    """Shade the ``x`` range of oversubscribed runs; returns the span (None: nothing to shade)."""
    if "oversubscribed" not in data.columns:
        return None
    flags = data.groupby(x)["oversubscribed"].agg(lambda s: bool(s.fillna(False).astype(bool).any()))
    over = sorted(float(v) for v, f in flags.items() if f)
    if not over:
        return None
    under = [float(v) for v, f in flags.items() if not f and float(v) < over[0]]
    lo, hi = ax.get_xlim()
    left = (max(under) + over[0]) / 2 if under else lo
    span = ax.axvspan(left, hi, color="gray", alpha=0.15, label=_OVERSUB_LABEL)
    ax.set_xlim(lo, hi)
    return span


def _ceiling(data: pd.DataFrame, y: str, hold_ns: float | None) -> tuple[float, float]:
    """The most one lock passes, ``1 / hold`` per second, and the hold (ns); ValueError when it does not apply."""
    if not y.endswith("_per_s"):
        raise ValueError(f"reference: 'ceiling' is a per-second rate (1/hold), got y={y!r}; use a *_per_s column")
    if "locks_n" in data.columns and set(data["locks_n"].dropna().unique()) - {1}:
        raise ValueError("reference: 'ceiling' is 1/hold of one lock; this table has locks_n != 1")
    if hold_ns is None:
        holds = data["hold_ns"].dropna().unique() if "hold_ns" in data.columns else []
        if len(holds) != 1:
            raise ValueError(f"hold_ns: reference='ceiling' needs one hold time, got {list(holds)!r} from the table")
        hold_ns = float(holds[0])
    if isinstance(hold_ns, bool) or not isinstance(hold_ns, (int, float, np.integer, np.floating)) or not hold_ns > 0:
        raise ValueError(f"hold_ns: expected a time > 0 in ns, got {hold_ns!r}")
    return 1e9 / float(hold_ns), float(hold_ns)


def _unit(column: str, values: pd.Series) -> tuple[float, str]:
    """How to show ``column``: the divisor that brings its values to the unit their magnitude suits, and the axis
    label naming that unit (``*_per_s``: /s, k/s, M/s, G/s; times: ns, µs, ms, s; ratios and counts by name)."""
    finite = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float) if len(values) else np.array([])
    finite = np.abs(finite[np.isfinite(finite)])
    largest = float(finite.max()) if finite.size else 0.0
    name = column.replace("_", " ")
    if column.endswith("_per_s"):
        stem = column[: -len("_per_s")]
        for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")):
            if largest >= scale or scale == 1.0:
                unit = f"{prefix}ops/s" if stem == "ops" else f"{prefix}/s"
                return scale, f"{stem.replace('_', ' ')} per second ({unit})"
    if column.startswith("ns_per_"):
        scale, unit = _time_unit(largest)
        return scale, f"time per {column[len('ns_per_') :].replace('_', ' ')} ({unit})"
    for suffix, ns in (("_ns", 1.0), ("_us", 1e3), ("_ms", 1e6), ("_s", 1e9)):
        if column.endswith(suffix):
            scale, unit = _time_unit(largest * ns)
            return scale / ns, f"{column[: -len(suffix)].replace('_', ' ')} ({unit})"
    if column in _RATIOS:
        return 1.0, _RATIOS[column]
    if column in _COUNTS:
        return 1.0, f"{name} (count)"
    return 1.0, name


def _time_unit(largest_ns: float) -> tuple[float, str]:
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if largest_ns >= scale:
            return scale, unit
    return 1.0, "ns"


def _interval(counts: pd.Series, *, statistic: str = "median", interval: str | None = "IQR") -> str:
    """What a point shows, for the legend: ``"median, IQR, n=5"`` (``n=3-5`` when it varies); a point of one value
    (a published figure, a deterministic virtual run) has no interval: ``"single value, n=1"``."""
    lo, hi = (int(counts.min()), int(counts.max())) if len(counts) else (0, 0)
    n = f"n={hi}" if lo == hi else f"n={lo}-{hi}"
    if hi <= 1:
        return f"single value, {n}"
    return ", ".join(p for p in (statistic, interval, n) if p)


def _legend(ax: Any, hue: str | None, interval: str, entries: list[tuple[Any, str]]) -> None:
    """The legend: ``entries`` (artist, label), titled with the hue and the interval (``lock (median, IQR, n=5)``)."""
    title = interval if hue is None else f"{hue} ({interval})"
    ax.legend([a for a, _ in entries], [str(label) for _, label in entries], title=title, fontsize="small",
              title_fontsize="small")  # fmt: skip


def _proxy(colour: Any, **style: Any) -> Any:
    """A legend handle of a line series that is not drawn on any Axes."""
    from matplotlib.lines import Line2D

    return Line2D([], [], color=colour, **style)


def _flat(meta: Mapping[str, Any]) -> dict[str, Any]:
    """A run's provenance, a sweep's meta (its ``provenance`` and ``provenance_varying``; the ``sweeps`` of joined
    ones) or a study's meta.json as one flat mapping; a value that varied across runs or sweeps becomes ``"a, b"``."""
    flat: dict[str, Any] = {}
    flat.update(meta.get("provenance") or {})
    flat.update({k: ", ".join(map(str, v)) for k, v in (meta.get("provenance_varying") or {}).items()})
    flat.update({k: v for k, v in meta.items() if not isinstance(v, (Mapping, list))})
    parts = [_flat(p) for p in meta.get("sweeps") or [] if isinstance(p, Mapping)]
    for key in dict.fromkeys(k for part in parts for k in part):
        values = list(dict.fromkeys(str(part[key]) for part in parts if part.get(key) is not None))
        if len(values) > 1:
            flat[key] = ", ".join(values)
    study = meta.get("study")
    if isinstance(study, Mapping) and "quick" in study:
        flat.setdefault("quick", study["quick"])
    return flat


def _provenance(data: Any, extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """The provenance a plotted object carries, with ``extra`` over it. A result made in this process (it has a
    ``clock``, and no ``git_sha``: every saved result has one) takes this process's git state and quick mode."""
    if isinstance(data, RunResult):
        own: Mapping[str, Any] = {**data.provenance, "repeats": 1}
    elif isinstance(data, SweepResult):
        own = data.meta
    elif isinstance(data, pd.DataFrame):
        own = data.attrs.get("alloclab") or {}
    else:
        own = {}
    flat = _flat(own)
    if isinstance(data, pd.DataFrame) and "source" in data.columns and not own:  # a seed's published table
        flat["source"] = "; ".join(map(str, _unique(data["source"].dropna())))
    flat.update(_flat(extra or {}))
    if flat.get("clock") and "git_sha" not in flat:
        flat.update({k: v for k, v in _environment().items() if k not in flat})
        flat.setdefault("quick", config.quick())
    return flat


@functools.cache
def _environment() -> dict[str, Any]:
    from .results import environment

    env = environment()
    return {"git_sha": env["git_sha"], "git_dirty": env["git_dirty"], "hostname": env["hostname"]}


def _footer_text(prov: Mapping[str, Any]) -> str:
    clock = prov.get("clock")
    if prov.get("source") and not clock:
        return f"published figures, not a run of this lab: {prov['source']}"
    if prov.get("machine"):
        model = f"model machine {prov.get('machine') or '?'} (costs={prov.get('costs') or '?'})"
    else:
        model = f"model {prov.get('model_description') or prov.get('model_topology') or '?'}"
    quick = prov.get("quick")
    sha = prov.get("git_sha")
    facts = [
        f"host {prov.get('hostname') or '?'}",
        model,
        f"clock {clock or '?'}",
        f"repeats {prov.get('repeats') if prov.get('repeats') is not None else '?'}",
        "quick" if quick is True else "full" if quick is False else "sizes ?",
        f"git {str(sha)[:10] if sha else '?'}{' (dirty)' if prov.get('git_dirty') else ''}",
    ]
    return " · ".join(facts)


def projected(
    study_result: Any,
    *,
    tables: Sequence[str] | None = None,
    x: str | dict[str, str] | None = None,
    title: str | None = None,
    provenance: Mapping[str, Any] | RunResult | SweepResult | None = None,
) -> Any:
    """A seed study's claim on one figure: published and virtual as lines over the study's x, real as points.

    One row of panels per projected table (see :func:`alloclab.studies.projected`), one panel per numeric figure of
    the table, the seed's ratio first (a figure named ``*_over_*``, ``*_vs_*``, ``ratio*``, ``speedup*`` or
    ``saved*`` is a claim panel: its title says ``claim:`` and a ratio gets a line at 1). A real cell that is a
    comparison's finding (``"0.394x (p=0.0079)"``) is drawn as its ratio; ``n.s.``, ``baseline`` and missing cells
    are not drawn, and each panel says how many real configurations it drew, left n.s. and could not run here.

    Args:
        study_result: a ``StudyResult`` or ``StudyRun`` (its ``projected`` tables), a dict name -> table, or one
            table.
        tables: the names of the tables to draw, in this order (default: all).
        x: the x column (every table), or a dict table name -> x column (default per table: its last numeric key
            column, e.g. ``threads``, ``vcpus``, ``multiplier``; a table without one gets its first key as
            categories, e.g. ``machine``). The other key columns give a colour each (e.g. ``order``).
        title: the figure's title (default: the study's name when ``study_result`` knows it).
        provenance: what the runs behind the virtual and real cells were (see :func:`footer`); their footer line
            (``?`` for every fact when None).

    Returns:
        A ``matplotlib.figure.Figure`` (not registered with pyplot: nothing to close). Its lines are labelled
        ``published``, ``virtual`` and ``real`` (with the colour's key, e.g. ``virtual order=9``).

    Raises:
        ValueError: no projected table, an unknown table name or x column, or a table without a numeric figure.
    """
    from matplotlib.figure import Figure

    named = _projected_tables(study_result)
    names = list(named) if tables is None else list(tables)
    unknown = [n for n in names if n not in named]
    if unknown or not names:
        raise ValueError(f"tables: {unknown or names!r} not among the projected tables ({', '.join(named) or 'none'})")
    rows = [_projected_layout(n, named[n], x.get(n) if isinstance(x, dict) else x) for n in names]
    cols = max(len(r[3]) for r in rows)
    fig = Figure(figsize=(max(7.0, 4.6 * cols), 3.9 * len(rows)), layout="constrained")  # wide enough for the title
    grid = fig.subplots(len(rows), cols, squeeze=False)
    for (name, table, (xcol, hues), figures), axes in zip(rows, grid, strict=True):
        for ax, figure in zip(axes, figures, strict=False):
            _projected_panel(ax, table, name, xcol, hues, figure)
        for ax in axes[len(figures) :]:
            ax.set_visible(False)
    study = getattr(getattr(study_result, "study", None), "name", None)
    fig.suptitle(title if title is not None else f"{study + ': ' if study else ''}published | virtual | real")
    footer(fig, provenance, add=True)
    return fig


#: How each source of a projected table is drawn: published and virtual as lines, real as points only.
_SOURCE_STYLE = {
    "published": {"linestyle": "-", "marker": "s", "markerfacecolor": "none"},
    "virtual": {"linestyle": "--", "marker": "o"},
    "real": {"linestyle": "none", "marker": "D", "markersize": 8},
}
#: Figure names that carry the seed's claim (a ratio or a share), drawn first.
_CLAIM_WORDS = ("_over_", "_vs_", "ratio", "speedup", "saved")
_FINDING = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?)(?:x\b|\s*%)")


def _projected_tables(obj: Any) -> dict[str, pd.DataFrame]:
    """The projected tables of a StudyRun, a StudyResult, a dict of tables or one table."""
    if isinstance(obj, pd.DataFrame):
        return {"projected": obj}
    if hasattr(obj, "result"):
        obj = obj.result
    tables = getattr(obj, "projected", obj)
    if not isinstance(tables, dict) or not all(isinstance(t, pd.DataFrame) for t in tables.values()):
        raise ValueError(f"study_result: expected a StudyResult, StudyRun or projected table(s), got {type(obj)}")
    return dict(tables)


def _projected_layout(name: str, table: pd.DataFrame, x: str | None) -> tuple:
    """``(name, table, (x, hue keys), figures)`` of one projected table; claim figures first."""
    sources = ("published", "virtual", "real")
    figures = [c[len("published_") :] for c in table.columns if c.startswith("published_")]
    figures = [f for f in figures if all(f"{s}_{f}" in table for s in sources)]
    keys = [c for c in table.columns if c != "real_note" and not any(c == f"{s}_{f}" for s in sources for f in figures)]
    numeric = [f for f in figures if any(_as_numbers(table[f"{s}_{f}"]).notna().any() for s in sources)]
    if not keys or not numeric:
        raise ValueError(f"{name}: a projected table needs key columns and a numeric figure (columns: "
                         f"{', '.join(map(str, table.columns))})")  # fmt: skip
    if x is None:
        numeric_keys = [k for k in keys if pd.api.types.is_numeric_dtype(table[k])]
        x = numeric_keys[-1] if numeric_keys else keys[0]
    if x not in keys:
        raise ValueError(f"x: {x!r} is not a key column of {name} (keys: {', '.join(keys)})")
    claims = [f for f in numeric if any(w in f for w in _CLAIM_WORDS)]
    return name, table, (x, [k for k in keys if k != x]), claims + [f for f in numeric if f not in claims]


def _as_numbers(column: pd.Series) -> pd.Series:
    """Numbers of a figure column; a finding's ratio (``"0.394x (p=...)"``) or share (``"80.17 % (p=...)"``) is its
    number, other text (``n.s.``, ``baseline``) is NaN."""
    if pd.api.types.is_numeric_dtype(column):
        return column.astype(float)

    def one(v: Any) -> float:
        if isinstance(v, (int, float, np.number)) and not isinstance(v, bool):
            return float(v)
        m = _FINDING.match(v) if isinstance(v, str) else None
        return float(m.group(1)) if m else float("nan")

    return column.map(one).astype(float)


def _projected_panel(ax: Any, table: pd.DataFrame, name: str, x: str, hues: list[str], figure: str) -> None:
    """One figure of one projected table: a line per source and hue (real: points), then the tally of the real cells
    and of the virtual cells that are no finding (``n.s.``, not drawn)."""
    categorical = not pd.api.types.is_numeric_dtype(table[x])
    cats = _unique(table[x]) if categorical else []
    groups = [((), table)] if not hues else list(table.groupby(hues, sort=True))
    colors = [f"C{i}" for i in range(len(groups))]
    finite = pd.concat([_as_numbers(table[f"{s}_{figure}"]) for s in _SOURCE_STYLE]).dropna()
    scale, ylabel = _unit(figure, finite)
    for (value, part), color in zip(groups, colors, strict=True):
        value = value if isinstance(value, tuple) else (value,)
        hue = " ".join(f"{k}={v}" for k, v in zip(hues, value, strict=True))
        part = part.sort_values(x)
        xs = np.array([cats.index(v) for v in part[x]], dtype=float) if categorical else part[x].to_numpy(float)
        for source, style in _SOURCE_STYLE.items():
            ys = _as_numbers(part[f"{source}_{figure}"]).to_numpy() / scale
            keep = np.isfinite(ys)
            if keep.any():
                style = {**style, "linestyle": "none"} if categorical else style
                ax.plot(xs[keep], ys[keep], color=color, label=f"{source} {hue}".strip(), **style)
    real = _as_numbers(table[f"real_{figure}"])
    text = table[f"real_{figure}"].astype(str)
    notes = table["real_note"].astype(str) if "real_note" in table else pd.Series(dtype=str)
    not_run, over = int(notes.str.startswith("not run").sum()), int(notes.str.startswith("oversubscribed").sum())
    ns = int(text.str.startswith("n.s.").sum())
    tally = f"real: {int(real.notna().sum())} drawn, {ns} n.s. (not drawn), {not_run} not run here"
    tally += f", {over} oversubscribed (no figure)" if over else ""
    virtual_ns = int(table[f"virtual_{figure}"].astype(str).str.startswith("n.s.").sum())
    tally += f"; virtual: {virtual_ns} n.s. (not drawn)" if virtual_ns else ""
    ax.text(0.01, 0.01, tally, transform=ax.transAxes, fontsize="x-small", color="0.35", va="bottom")
    claim = any(w in figure for w in _CLAIM_WORDS)
    if claim and not figure.startswith("saved"):
        ax.axhline(1.0, color="black", linewidth=0.7, alpha=0.6)
    if not claim and len(finite) and finite.min() > 0 and finite.max() / finite.min() > 30:
        ax.set_yscale("log")
    if categorical:
        ax.set_xticks(range(len(cats)), [str(c) for c in cats])
    else:
        distinct = np.unique(table[x].to_numpy(dtype=float))
        crowded = len(distinct) > 1 and np.diff(distinct).min() < 0.03 * (distinct[-1] - distinct[0])
        if 0 < len(distinct) <= 12 and not crowded:  # 1, 2 and 64 threads: the default ticks read better
            ax.set_xticks(distinct, [f"{v:g}" for v in distinct])
    ax.set_xlabel(_unit(x, _AS_STORED)[1])  # the ticks are the values as stored
    ax.set_ylabel(ylabel)
    ax.set_title(f"{name}: {'claim: ' if claim else ''}{figure}", fontsize="medium")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small")
