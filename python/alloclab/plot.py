"""Plots of sweeps and runs. Every function draws on an Axes (a new figure when ``ax`` is None), returns it,
and never calls ``show()``; save with ``ax.figure.savefig(path)`` or :func:`savefig`.

* :func:`scaling` — a metric against a scaling axis with the ideal linear reference (will-it-scale style);
* :func:`workers` — per-worker completion bars (the CMA patch's 7/14/21 s vs 7/8/7 s picture);
* :func:`heatmap` — a metric over two axes (threads x multiplier);
* :func:`lockstat` — lock_stat wait time beside hold time, per lock class;
* :func:`lockstat_compare` — the model's lock_stat beside a real kernel's (contentions, wait time);
* :func:`projected` — a seed study's claim: published and virtual as lines, real as points (a Figure).

Only rows with ``status == "ok"`` are drawn when a ``status`` column exists; repeated runs are reduced to their
median, with the interquartile range as error bars.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ._run import RunResult
from .sweep import SweepResult

__all__ = ["heatmap", "lockstat", "lockstat_compare", "projected", "savefig", "scaling", "workers"]

_OVERSUB_LABEL = "oversubscribed (workers > host PUs)"


def scaling(
    df: pd.DataFrame,
    x: str = "threads",
    y: str = "acquisitions_per_s",
    hue: str | None = None,
    *,
    ax: Any = None,
    reference: str | None = "linear",
    logy: bool = False,
    mark_oversubscribed: bool = True,
    title: str | None = None,
) -> Any:
    """Scaling curve: median of ``y`` against ``x`` per ``hue``, IQR error bars, and the ideal reference.

    Args:
        df: a sweep table (one row per run).
        x: the numeric scaling axis, e.g. ``"threads"`` or ``"multiplier"``.
        y: the figure to plot.
        hue: a column whose values get one line each (e.g. ``"lock"``); None: one line.
        ax: the Axes to draw on (None: a new figure).
        reference: ``"linear"`` draws ``y(x0) * x / x0`` per line (throughput-like figures: ideal scaling
            grows with ``x``), ``"inverse"`` draws ``y(x0) * x0 / x`` (time-like figures: ideal time shrinks),
            ``None`` draws none. ``x0`` is the line's smallest ``x``.
        logy: logarithmic y axis.
        mark_oversubscribed: shade the ``x`` range whose runs were oversubscribed (needs an ``oversubscribed``
            column, as sweep tables have).
        title: the title (default: ``"<scenario>: <y> vs <x>"``).

    Returns:
        The Axes.

    Raises:
        ValueError: a column is missing, ``x`` is not numeric, or ``reference`` is unknown.
    """
    if reference not in ("linear", "inverse", None):
        raise ValueError(f"reference: expected 'linear', 'inverse' or None, got {reference!r}")
    data = _ok(df, [x, y] + ([hue] if hue else []))
    if not pd.api.types.is_numeric_dtype(data[x]):
        raise ValueError(f"{x}: a scaling axis must be numeric (got dtype {data[x].dtype})")
    ax = _axes(ax, (6.4, 4.2))
    series = [(None, data)] if hue is None else [(v, data[data[hue] == v]) for v in _unique(data[hue])]
    ref_labelled = False
    for value, part in series:
        stats = part.groupby(x)[y].describe(percentiles=[0.25, 0.5, 0.75]).sort_index()
        xs = stats.index.to_numpy(dtype=float)
        med = stats["50%"].to_numpy()
        err = np.vstack([med - stats["25%"].to_numpy(), stats["75%"].to_numpy() - med])
        label = y if hue is None else f"{hue}={value}"
        line = ax.errorbar(xs, med, yerr=err, marker="o", capsize=3, label=label)
        if reference and len(xs) and xs[0] > 0 and np.isfinite(med[0]):
            ref = med[0] * xs / xs[0] if reference == "linear" else med[0] * xs[0] / xs
            ax.plot(
                xs,
                ref,
                linestyle="--",
                color=line[0].get_color(),
                alpha=0.5,
                label=None if ref_labelled else f"ideal ({reference})",
            )
            ref_labelled = True
    distinct = np.unique(data[x].to_numpy(dtype=float))
    if 0 < len(distinct) <= 12:
        ax.set_xticks(distinct, [f"{v:g}" for v in distinct])
    if mark_oversubscribed:
        _shade_oversubscribed(ax, data, x)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title if title is not None else f"{_scenario(df)}{y} vs {x}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
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
) -> Any:
    """Per-worker completion bars: one bar per worker, grouped by ``by`` (e.g. the variant).

    Args:
        data: a :class:`~alloclab.RunResult`, a :class:`~alloclab.sweep.SweepResult` (its ``workers`` table) or
            a per-worker DataFrame (one row per run and worker).
        y: the per-worker figure, e.g. ``"elapsed_s"`` (completion time) or ``"ops"``.
        by: a column whose values get a bar each within every worker's group (e.g. ``"alloc_mutex"``); None:
            one bar per worker.
        worker: the column that identifies a worker.
        ax: the Axes to draw on (None: a new figure).
        annotate: write each bar's value on top of it.
        title: the title.

    Returns:
        The Axes. Several runs of the same (``by``, worker) are reduced to their median, IQR as error bars.

    Raises:
        ValueError: a column is missing.
    """
    table = data.workers if isinstance(data, (RunResult, SweepResult)) else data
    table = _ok(table, [worker, y] + ([by] if by else []))
    ax = _axes(ax, (6.4, 4.2))
    ids = sorted(_unique(table[worker]))
    groups = [(None, table)] if by is None else [(v, table[table[by] == v]) for v in _unique(table[by])]
    width = 0.8 / len(groups)
    positions = np.arange(len(ids), dtype=float)
    for i, (value, part) in enumerate(groups):
        q = part.groupby(worker)[y].quantile([0.25, 0.5, 0.75]).unstack().reindex(ids)
        med = q[0.5].to_numpy()
        err = np.vstack([med - q[0.25].to_numpy(), q[0.75].to_numpy() - med])
        offset = (i - (len(groups) - 1) / 2) * width
        label = y if by is None else f"{by}={value}"
        bars = ax.bar(positions + offset, med, width, yerr=err, capsize=2, label=label)
        if annotate:
            ax.bar_label(bars, fmt="%.3g", fontsize="x-small", padding=2)
    ax.set_xticks(positions, [str(w) for w in ids])
    ax.set_xlabel(worker)
    ax.set_ylabel(y)
    ax.set_title(title if title is not None else f"{y} per {worker}")
    ax.grid(True, axis="y", alpha=0.3)
    if by is not None:
        ax.legend(fontsize="small")
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
) -> Any:
    """Heatmap of ``value`` over two axes (e.g. threads x multiplier), one cell per (x, y) configuration.

    Args:
        df: a sweep table.
        x: the column along the horizontal axis.
        y: the column along the vertical axis.
        value: the figure shown by colour.
        agg: how repeats are reduced (any pandas aggregation name: ``"median"``, ``"mean"``, ``"max"``...).
        ax: the Axes to draw on (None: a new figure).
        annotate: write the value in each cell; oversubscribed cells get a ``*``.
        fmt: format of the annotations.
        cmap: the matplotlib colour map.
        log: logarithmic colour scale.
        title: the title.

    Returns:
        The Axes (the colour bar is added to its figure).

    Raises:
        ValueError: a column is missing.
    """
    from matplotlib.colors import LogNorm

    data = _ok(df, [x, y, value])
    grid = data.pivot_table(index=y, columns=x, values=value, aggfunc=agg, sort=True)
    over = None
    if "oversubscribed" in data.columns:
        flags = data.assign(_o=data["oversubscribed"].fillna(False).astype(bool))
        over = flags.pivot_table(index=y, columns=x, values="_o", aggfunc="max", sort=True)
        over = over.reindex(index=grid.index, columns=grid.columns).fillna(False).astype(bool)
    ax = _axes(ax, (6.4, 4.8))
    values = grid.to_numpy(dtype=float)
    norm = LogNorm() if log else None
    image = ax.imshow(values, origin="lower", aspect="auto", cmap=cmap, norm=norm)
    ax.figure.colorbar(image, ax=ax, label=f"{value} ({agg})")
    ax.set_xticks(range(len(grid.columns)), [str(c) for c in grid.columns])
    ax.set_yticks(range(len(grid.index)), [str(i) for i in grid.index])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    if annotate and values.size:
        finite = values[np.isfinite(values)]
        mid = (finite.min() + finite.max()) / 2 if finite.size else 0.0
        for (r, c), v in np.ndenumerate(values):
            if not np.isfinite(v):
                continue
            mark = "*" if over is not None and bool(over.iat[r, c]) else ""
            color = "white" if (v < mid and not log) else "black"
            ax.text(c, r, f"{v:{fmt}}{mark}", ha="center", va="center", fontsize="small", color=color)
        if over is not None and bool(over.to_numpy().any()):
            ax.set_xlabel(f"{x}    (* = {_OVERSUB_LABEL})")
    ax.set_title(title if title is not None else f"{_scenario(df)}{value}")
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
) -> Any:
    """lock_stat bars: wait time beside hold time for each lock class (and each value of ``by``).

    A class whose wait bar dwarfs its hold bar is a contended lock: waiters spend longer queueing than the
    owner spends inside.

    Args:
        data: a :class:`~alloclab.RunResult`, a :class:`~alloclab.sweep.SweepResult` (its ``lockstat`` table)
            or a lock_stat DataFrame (``class``, ``waittime_*_ns``, ``holdtime_*_ns`` columns).
        by: a column of a long lock_stat table (e.g. ``"lock"`` or ``"variant"``) whose values get a bar
            pair each within a class; None: all runs of a class together.
        stat: ``"total"``, ``"avg"`` or ``"max"`` (which lock_stat column pair to draw).
        classes: only these lock classes (default: every class that was acquired).
        ax: the Axes to draw on (None: a new figure).
        log: logarithmic time axis.
        title: the title.

    Returns:
        The Axes. Times are shown in the unit (ns, µs, ms, s) that suits the largest bar; several runs of the
        same bar are reduced to their median.

    Raises:
        ValueError: an unknown ``stat`` or a missing column.
    """
    if stat not in ("total", "avg", "max", "min"):
        raise ValueError(f"stat: expected 'total', 'avg', 'max' or 'min', got {stat!r}")
    table = data.lockstat if isinstance(data, (RunResult, SweepResult)) else data
    wait, hold = f"waittime_{stat}_ns", f"holdtime_{stat}_ns"
    table = _ok(table, ["class", wait, hold] + ([by] if by else []))
    if classes is not None:
        table = table[table["class"].isin(list(classes))]
    keys = ["class"] if by is None else ["class", by]
    agg = table.groupby(keys, sort=False)[[wait, hold]].median().reset_index()
    labels = [str(r["class"]) if by is None else f"{r['class']} [{by}={r[by]}]" for _, r in agg.iterrows()]
    scale, unit = _time_unit(float(np.nanmax(agg[[wait, hold]].to_numpy())) if len(agg) else 0.0)
    ax = _axes(ax, (6.4, max(2.5, 0.45 * len(labels) + 1.2)))
    pos = np.arange(len(labels), dtype=float)
    ax.barh(pos - 0.2, agg[wait].to_numpy() / scale, 0.4, label=f"wait ({stat})", color="tab:red")
    ax.barh(pos + 0.2, agg[hold].to_numpy() / scale, 0.4, label=f"hold ({stat})", color="tab:blue")
    ax.set_yticks(pos, labels)
    ax.invert_yaxis()
    if log:
        ax.set_xscale("log")
    ax.set_xlabel(f"time ({unit})")
    ax.set_title(title if title is not None else f"lock_stat: wait vs hold ({stat})")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize="small")
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
) -> tuple[Any, Any]:
    """The model's lock_stat beside a real kernel's: contentions and total wait time per lock class, one bar each.

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

    Returns:
        The two Axes (contentions, total wait time). A class one side does not have is drawn at 0 there and
        marked ``(model only)``/``(kernel only)``; wait times are in the unit (ns, µs, ms, s) that suits the
        largest bar, named on the axis.

    Raises:
        ValueError: a table lacks ``class``, ``contentions`` or ``waittime_total_ns``, or ``top`` < 1.
    """
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise ValueError(f"top: expected an integer >= 1, got {top!r}")
    cols = ["class", "contentions", "waittime_total_ns"]
    sides = [_ok(model.lockstat if isinstance(model, RunResult) else model, cols), _ok(kernel, cols)]
    sums = [side.groupby("class", sort=False)[cols[1:]].sum(min_count=1) for side in sides]
    if classes is None:
        by_contention = sums[1]["contentions"].astype(float).sort_values(ascending=False, kind="stable")
        classes = list(dict.fromkeys([*sums[0].index, *by_contention.index]))[:top]
    classes = list(classes)
    if axes is None:
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(11, max(2.6, 0.5 * len(classes) + 1.4)), layout="constrained")
        fig.suptitle(title if title is not None else "lock_stat: model vs kernel")
    ax_n, ax_t = axes
    wait = [s["waittime_total_ns"].reindex(classes).astype(float).fillna(0.0).to_numpy() for s in sums]
    scale, unit = _time_unit(float(max((w.max() for w in wait if len(w)), default=0.0)))
    pos = np.arange(len(classes), dtype=float)
    names = []
    for c in classes:
        only = [labels[i] for i in (0, 1) if c in sums[i].index]
        names.append(c if len(only) == 2 else f"{c} ({only[0] if only else 'neither'} only)")
    for i, (label, color) in enumerate(zip(labels, ("tab:blue", "tab:orange"), strict=True)):
        count = sums[i]["contentions"].reindex(classes).astype(float).fillna(0.0).to_numpy()
        ax_n.barh(pos + (i - 0.5) * 0.4, count, 0.4, label=label, color=color)
        ax_t.barh(pos + (i - 0.5) * 0.4, wait[i] / scale, 0.4, label=label, color=color)
    for ax, xlabel in ((ax_n, "contentions (count)"), (ax_t, f"total wait time ({unit})")):
        ax.set_yticks(pos, names if ax is ax_n else [""] * len(names))
        ax.invert_yaxis()
        ax.set_xlabel(xlabel)
        ax.grid(True, axis="x", alpha=0.3)
    ax_n.legend(fontsize="small")
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


def _shade_oversubscribed(ax: Any, data: pd.DataFrame, x: str) -> None:
    if "oversubscribed" not in data.columns:
        return
    flags = data.groupby(x)["oversubscribed"].agg(lambda s: bool(s.fillna(False).astype(bool).any()))
    over = sorted(float(v) for v, f in flags.items() if f)
    if not over:
        return
    under = [float(v) for v, f in flags.items() if not f and float(v) < over[0]]
    lo, hi = ax.get_xlim()
    left = (max(under) + over[0]) / 2 if under else lo
    ax.axvspan(left, hi, color="gray", alpha=0.15, label=_OVERSUB_LABEL)
    ax.set_xlim(lo, hi)


def _time_unit(largest_ns: float) -> tuple[float, str]:
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if largest_ns >= scale:
            return scale, unit
    return 1.0, "ns"


def projected(
    study_result: Any,
    *,
    tables: Sequence[str] | None = None,
    x: str | dict[str, str] | None = None,
    title: str | None = None,
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
    return fig


#: How each source of a projected table is drawn: published and virtual as lines, real as points only.
_SOURCE_STYLE = {
    "published": {"linestyle": "-", "marker": "s", "markerfacecolor": "none"},
    "virtual": {"linestyle": "--", "marker": "o"},
    "real": {"linestyle": "none", "marker": "D", "markersize": 8},
}
#: Figure names that carry the seed's claim (a ratio or a share), drawn first.
_CLAIM_WORDS = ("_over_", "_vs_", "ratio", "speedup", "saved")
_FINDING = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?)x\b")


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
    """Numbers of a figure column; a finding's ratio (``"0.394x (p=...)"``) is its number, other text is NaN."""
    if pd.api.types.is_numeric_dtype(column):
        return column.astype(float)

    def one(v: Any) -> float:
        if isinstance(v, (int, float, np.number)) and not isinstance(v, bool):
            return float(v)
        m = _FINDING.match(v) if isinstance(v, str) else None
        return float(m.group(1)) if m else float("nan")

    return column.map(one).astype(float)


def _projected_panel(ax: Any, table: pd.DataFrame, name: str, x: str, hues: list[str], figure: str) -> None:
    """One figure of one projected table: a line per source and hue (real: points), then the real cells' tally."""
    categorical = not pd.api.types.is_numeric_dtype(table[x])
    cats = _unique(table[x]) if categorical else []
    groups = [((), table)] if not hues else list(table.groupby(hues, sort=True))
    colors = [f"C{i}" for i in range(len(groups))]
    for (value, part), color in zip(groups, colors, strict=True):
        value = value if isinstance(value, tuple) else (value,)
        hue = " ".join(f"{k}={v}" for k, v in zip(hues, value, strict=True))
        part = part.sort_values(x)
        xs = np.array([cats.index(v) for v in part[x]], dtype=float) if categorical else part[x].to_numpy(float)
        for source, style in _SOURCE_STYLE.items():
            ys = _as_numbers(part[f"{source}_{figure}"]).to_numpy()
            keep = np.isfinite(ys)
            if keep.any():
                style = {**style, "linestyle": "none"} if categorical else style
                ax.plot(xs[keep], ys[keep], color=color, label=f"{source} {hue}".strip(), **style)
    real = _as_numbers(table[f"real_{figure}"])
    text = table[f"real_{figure}"].astype(str)
    not_run = int(table["real_note"].astype(str).str.startswith("not run").sum()) if "real_note" in table else 0
    ns = int(text.str.startswith("n.s.").sum())
    ax.text(0.01, 0.01, f"real: {int(real.notna().sum())} drawn, {ns} n.s. (not drawn), {not_run} not run here",
            transform=ax.transAxes, fontsize="x-small", color="0.35", va="bottom")  # fmt: skip
    claim = any(w in figure for w in _CLAIM_WORDS)
    if claim and not figure.startswith("saved"):
        ax.axhline(1.0, color="black", linewidth=0.7, alpha=0.6)
    finite = pd.concat([_as_numbers(table[f"{s}_{figure}"]) for s in _SOURCE_STYLE]).dropna()
    if not claim and len(finite) and finite.min() > 0 and finite.max() / finite.min() > 30:
        ax.set_yscale("log")
    if categorical:
        ax.set_xticks(range(len(cats)), [str(c) for c in cats])
    else:
        distinct = np.unique(table[x].to_numpy(dtype=float))
        crowded = len(distinct) > 1 and np.diff(distinct).min() < 0.03 * (distinct[-1] - distinct[0])
        if 0 < len(distinct) <= 12 and not crowded:  # 1, 2 and 64 threads: the default ticks read better
            ax.set_xticks(distinct, [f"{v:g}" for v in distinct])
    ax.set_xlabel(x)
    ax.set_ylabel(figure)
    ax.set_title(f"{name}: {'claim: ' if claim else ''}{figure}", fontsize="medium")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small")
