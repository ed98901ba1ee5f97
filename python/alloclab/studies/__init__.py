"""Studies: the experiments ``alloclab reproduce`` runs, each beside the figures its seed patch published.

How to add a study (a one-file change)
--------------------------------------
Create ``python/alloclab/studies/<name>.py``. Every module of this package whose name does not start with
``_`` is discovered automatically (``pkgutil``); nothing else needs editing. The module defines:

``NAME``
    what ``alloclab reproduce NAME`` takes, also the folder ``results/<NAME>/<UTC stamp>/``.
``TITLE``
    one line for the listing.
``SCENARIOS``
    a tuple of the scenario names it runs (``alloclab reproduce <scenario>`` finds the study too).
``SEED``
    the seed patch, e.g. ``"cma-per-area-lock"`` (the file stem in ``shared/seeds/``), or ``None``.
``PUBLISHED``
    a DataFrame of the figures the seed published (empty when there are none; never invent any). Each row names
    where its figures come from in ``source`` (the seed file, or a public source) and quotes that source's line
    verbatim in ``source_quote``; every float figure of the row appears as a number in its quote.
``ESTIMATED_S``
    how long ``alloclab reproduce NAME`` takes, ``{"quick": seconds, "full": seconds}``: the ``elapsed_s`` a
    ``reproduce`` run recorded in its ``meta.json``, on the host the comment beside it names; ``None`` where it
    was not measured (the listing prints ``?`` then, and for a study without ``ESTIMATED_S``). The shipped studies'
    figures: the 2-vCPU dev VM (an AMD EPYC VM, family 25 model 17, Zen 4) on 2026-12-07, quiet, simulator version
    17: full from one ``reproduce all`` (15:34-16:01 UTC, 26 min 52 s in all), quick from one ``reproduce all
    --quick`` before it (15:31 UTC, 104 s in all), unless the comment beside them says otherwise.
``run(quick: bool, out_dir: Path, progress: bool) -> StudyResult``
    runs the sweep(s) (small sizes when ``quick``, see :func:`alloclab.config.sized`), writes its PNG plots
    into ``out_dir`` and returns a :class:`StudyResult`: ``table`` (ours beside published, :func:`beside`
    helps), ``plots`` (the paths it wrote), ``data`` (the sweep, ideally a ``SweepResult``) and, for a seed study,
    ``projected``: the seed's claim per configuration as published | virtual (the seed's machine) | real (this
    host), each table made by :func:`projected`.

How a study measures (the rules every study here follows)
---------------------------------------------------------
* :func:`measure` runs the sweep: timed repeats *without* lock_stat (its clock reads sit inside every critical
  section, so a variant that takes a lock less often would win by construction), then one lock_stat run per
  configuration for the counts; :func:`timed` and :func:`counted` split the rows.
* Comparisons go through :func:`alloclab.stats.compare`, and a table shows its ``finding`` column — the ratio
  only when it is significant with enough repeats and clean runs, else ``n.s.`` and why — never a bare ratio.
* A seed study's virtual part (the seed's machine, ``costs="table"``) goes through :func:`virtual`: one run per
  seed of :data:`VIRTUAL_SEEDS` and configuration. A virtual run repeats exactly, but each seed is another start
  order and so another interleaving, and a difference smaller than two interleavings make is no finding: the
  virtual columns are medians and findings over the seeds, as the real ones are over repeats. :func:`reproduce`
  runs them on a pool of this host's processes (:func:`alloclab.cluster.local`; they do not depend on the host).
* :func:`lockstat_cost` measures, once per process, what lock_stat adds per acquisition; every study notes it.
* Quick mode keeps the real-clock part to configurations that fit the host's PUs (:func:`fits_host`) and small
  sizes, but still takes the :data:`alloclab.stats.MIN_REPEATS` repeats a comparison needs; its virtual part runs
  at reduced size, with the same seeds. A quick result that points against the seed's claim says so loudly
  (:func:`against_claim`).

The framework (:func:`reproduce`) makes ``out_dir`` and shows a progress bar per study (:func:`study_bar`), then
writes ``table.parquet``, ``projected_<name>.parquet`` and their figure ``projected.png`` (:func:`draw_projected`,
the first plot), ``published.parquet``, the raw data (``data.parquet`` and, for a ``SweepResult``,
``workers.parquet``/``lockstat.parquet``) and ``meta.json`` with the full provenance (:func:`alloclab.results.save`)
plus the study's name, seed, quick flag and plot list; with ``csv=True``, CSV copies of every table in
``out_dir/csv/``.
``studies/lock_zoo.py`` is the model to copy.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd

from .. import cluster, stats
from .._catalogue import did_you_mean
from ..topology import Topology

__all__ = [
    "against_claim",
    "counted",
    "fits_host",
    "join",
    "lockstat_cost",
    "measure",
    "measurement_notes",
    "timed",
    "virtual",
    "Study",
    "StudyResult",
    "StudyRun",
    "beside",
    "discover",
    "find",
    "format_error",
    "new_run_dir",
    "draw_projected",
    "projected",
    "reproduce",
    "study_bar",
]


@dataclass
class StudyResult:
    """What a study's ``run`` returns.

    Attributes:
        table: the study's table, our figures beside the published ones (see :func:`beside`).
        plots: the image files the study wrote (inside the ``out_dir`` it was given).
        data: the raw runs (a ``SweepResult`` or a sweep table), saved as ``data.parquet`` (+ detail tables);
            None saves ``table`` as the data instead.
        notes: lines worth printing under the table (e.g. which points were oversubscribed).
        meta: extra JSON-able entries for ``meta.json``.
        projected: the seed's claim per configuration, published | virtual | real side by side (each made by
            :func:`projected`), by name; each is written as ``projected_<name>.parquet`` and printed.
    """

    table: pd.DataFrame
    plots: list[Path] = field(default_factory=list)
    data: Any = None
    notes: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    projected: dict[str, pd.DataFrame] = field(default_factory=dict)


@dataclass(frozen=True)
class Study:
    """A discovered study module (see the package docstring for what a module defines).

    Attributes:
        name: ``NAME``.
        title: ``TITLE`` (default: the module docstring's first line).
        scenarios: ``SCENARIOS``.
        seed: ``SEED``.
        published: ``PUBLISHED`` (an empty DataFrame when the module has none).
        run: the module's ``run(quick, out_dir, progress)``.
        module: the module's import name.
        estimated_s: ``ESTIMATED_S`` (``{"quick": s, "full": s}``; empty when the module has none).
    """

    name: str
    title: str
    scenarios: tuple[str, ...]
    seed: str | None
    published: pd.DataFrame
    run: Callable[[bool, Path, bool], StudyResult]
    module: str
    estimated_s: dict[str, float | None] = field(default_factory=dict)

    def estimate(self) -> str:
        """The estimated times for the listing, e.g. ``"quick ~5 min, full ~20 min"`` (``"full ?"`` where none is
        declared)."""
        return ", ".join(f"{mode} {_duration(self.estimated_s.get(mode))}" for mode in ("quick", "full"))


@dataclass
class StudyRun:
    """One execution of a study by :func:`reproduce`.

    Attributes:
        study: the study.
        result: what its ``run`` returned.
        out_dir: the folder everything was written to.
        files: every file written there (data, table, meta.json, plots).
        elapsed_s: wall time of the study.
    """

    study: Study
    result: StudyResult
    out_dir: Path
    files: list[Path]
    elapsed_s: float


def discover() -> tuple[dict[str, Study], dict[str, str]]:
    """Import every study module of this package.

    Returns:
        ``(studies, broken)``: name -> :class:`Study` in module order, and module -> error message for modules
        that failed to import or lack ``NAME``/``run`` (a broken study never hides the others).
    """
    studies: dict[str, Study] = {}
    broken: dict[str, str] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        modname = f"{__name__}.{info.name}"
        try:
            module = importlib.import_module(modname)
            study = _study_of(module)
        except Exception as exc:  # a half-written study must not break `reproduce all` for the others
            broken[modname] = f"{type(exc).__name__}: {exc}"
            continue
        if study.name in studies:
            broken[modname] = f"ValueError: study name {study.name!r} already used by {studies[study.name].module}"
            continue
        studies[study.name] = study
    return studies, broken


def find(name: str) -> Study:
    """The study called ``name``, or the one that runs scenario ``name``.

    Args:
        name: a study name or a scenario name.

    Raises:
        ValueError: no such study (the message lists the available ones).
    """
    studies, broken = discover()
    if name in studies:
        return studies[name]
    matches = [s for s in studies.values() if name in s.scenarios]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise ValueError(f"study: {name!r} is run by several studies: {', '.join(s.name for s in matches)}")
    hint = f"; broken modules: {', '.join(broken)}" if broken else ""
    names = dict.fromkeys([*studies, *(sc for s in studies.values() for sc in s.scenarios)])
    raise ValueError(
        f"study: unknown study {name!r} (available: {', '.join(studies) or 'none'}{hint})" + did_you_mean(name, names)
    )


def new_run_dir(root: str | Path, name: str) -> Path:
    """Create and return ``root/name/<UTC stamp>/`` (``YYYYmmddTHHMMSSZ``, with ``-1``, ``-2`` ... on a clash).

    Args:
        root: the results root, usually ``results``.
        name: the study name.
    """
    base = Path(root) / name
    base.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    for i in range(1000):
        path = base / (stamp if i == 0 else f"{stamp}-{i}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"{base}: could not make a fresh folder for stamp {stamp}")


#: The provenance columns of every ``PUBLISHED`` table: where the row's figures come from and its quoted line.
SOURCE_COLUMNS = ("source", "source_quote")


def beside(
    ours: pd.DataFrame, published: pd.DataFrame, on: Sequence[str], *, prefix: str = "published_"
) -> pd.DataFrame:
    """Our table with the published figures as extra columns, matched on the key columns ``on``.

    Args:
        ours: our figures, one row per key.
        published: the seed's figures with the same key columns (may be empty).
        on: the key columns, e.g. ``["regions", "variant"]``.
        prefix: prepended to every published figure's column name.

    Returns:
        ``ours`` (same rows, same order) plus one ``<prefix><column>`` column per published figure; NaN where the
        seed has no figure for that key. The provenance columns (:data:`SOURCE_COLUMNS`) stay in ``published.parquet``.
    """
    on = list(on)
    figures = [c for c in published.columns if c not in on and c not in SOURCE_COLUMNS]
    renamed = published[[*on, *figures]].rename(columns={c: f"{prefix}{c}" for c in figures})
    if not len(renamed):
        out = ours.copy()
        for c in figures:
            out[f"{prefix}{c}"] = float("nan")
        return out
    return ours.merge(renamed, on=on, how="left", validate="one_to_one" if len(on) else None)


#: The three sources of a projected table, in the order its columns show them.
SOURCES = ("published", "virtual", "real")


def projected(
    on: Sequence[str],
    *,
    published: pd.DataFrame,
    virtual: pd.DataFrame,
    real: pd.DataFrame,
    workers: Callable[[pd.Series], int] | None = None,
) -> pd.DataFrame:
    """The seed's claim per configuration: published | virtual | real side by side, one table shape for every study.

    Each frame holds the key columns ``on`` and figure columns named alike across the frames (e.g. ``ratio``); a
    frame may lack a figure (the seed published no such number, the host cannot measure it). A real figure that
    compares variants is the :func:`alloclab.stats.compare` finding (see :func:`real_finding`), never a bare ratio.

    Args:
        on: the configuration keys, e.g. ``["order", "threads"]``.
        published: the seed's figures (no provenance columns: those stay in ``published.parquet``).
        virtual: ours on the seed's machine, in virtual time (``costs="table"``).
        real: ours on this host; an optional ``note`` column says what a cell rests on.
        workers: the configuration's worker count from its key row; a configuration with more workers than the host
            has PUs gets no real figure, even where ``real`` has one (a full-size sweep may run it, flagged), and
            ``real_note`` says so (never an oversubscribed figure).

    Returns:
        One row per configuration of any frame (sorted by the keys), then per figure the columns ``published_<f>``,
        ``virtual_<f>``, ``real_<f>`` next to each other, then ``real_note``: empty where the real cells hold a
        figure, else why they are empty.
    """
    on = list(on)
    frames = dict(zip(SOURCES, (published, virtual, real), strict=True))
    figures: list[str] = []
    for frame in frames.values():
        figures += [c for c in frame.columns if c not in on and c != "note" and c not in figures]
    keys = pd.concat([f[on] for f in frames.values() if len(f)], ignore_index=True).drop_duplicates()
    out = keys.sort_values(on, kind="stable").reset_index(drop=True)
    for source, frame in frames.items():
        cols = [c for c in frame.columns if c not in on]
        if frame[on].duplicated().any():
            raise ValueError(f"projected: {source} has several rows for one configuration of {on}")
        if len(frame):  # an empty frame adds only NaN columns (below): its key columns may have any dtype
            out = out.merge(frame[[*on, *cols]].rename(columns={c: f"{source}_{c}" for c in cols}), on=on, how="left")
    columns = [*on, *(f"{s}_{f}" for f in figures for s in SOURCES)]
    for c in columns:
        if c not in out:
            out[c] = np.nan
    real_cols = [f"real_{f}" for f in figures]
    pus = Topology.host().pus
    need = [workers(row) if workers else 0 for _, row in out[on].iterrows()]
    over = pd.Series([w > pus for w in need], index=out.index)
    ran = out[real_cols].notna().any(axis=1)
    out.loc[over, real_cols] = np.nan  # never an oversubscribed figure, even where the real sweep ran one
    note = out["real_note"] if "real_note" in out else pd.Series("", index=out.index)
    why = [
        f"oversubscribed: {w} workers on {pus} host PUs, no figure (its runs are in data.parquet, flagged)" if o and r
        else f"not run: {w} workers on {pus} host PUs would be oversubscribed" if o
        else str(n) if isinstance(n, str) and n
        else "" if r
        else "not run on this host"
        for w, o, r, n in zip(need, over, ran, note, strict=True)
    ]  # fmt: skip
    return out[columns].assign(real_note=why)


def reproduce(
    study: str | Study, *, quick: bool = False, out: str | Path = "results", progress: bool = True, csv: bool = False
) -> StudyRun:
    """Run one study and write its results under ``out/<study>/<UTC stamp>/``.

    Args:
        study: a :class:`Study` or a name for :func:`find`.
        quick: small sizes (seconds instead of minutes).
        out: the results root.
        progress: show the sweeps' progress bars.
        csv: also write CSV copies of every table to ``out_dir/csv/`` (the Parquet files stay the result).

    Returns:
        A :class:`StudyRun` with the table, the plots and every file written.
    """
    from .. import _tables, results

    if not isinstance(study, Study):
        study = find(study)
    out_dir = new_run_dir(out, study.name)
    t0 = time.monotonic()
    packed = nullcontext(cluster.current()) if cluster.current() is not None else cluster.local()
    with study_bar(study, quick, enabled=progress), packed as executor, cluster.using(executor):
        result = study.run(quick, out_dir, progress)
    elapsed = time.monotonic() - t0
    if not isinstance(result, StudyResult):
        raise TypeError(f"study {study.name}: run() returned {type(result).__name__}, not StudyResult")
    tables = {"table": result.table, **{f"projected_{n}": t for n, t in result.projected.items()}}
    if result.projected:
        result.plots.insert(0, draw_projected(study, result, out_dir, quick=quick))
    if len(study.published):
        tables["published"] = study.published
    for name, table in tables.items():
        _tables.write(table, out_dir / f"{name}.parquet")
    plots = [Path(p) for p in result.plots]
    info = {
        "study": {
            "name": study.name,
            "title": study.title,
            "seed": study.seed,
            "scenarios": list(study.scenarios),
            "quick": bool(quick),
            "elapsed_s": round(elapsed, 3),
            "table": "table.parquet",
            "published": "published.parquet" if len(study.published) else None,
            "plots": [p.name if p.parent == out_dir else str(p) for p in plots],
            "projected": {name: f"projected_{name}.parquet" for name in result.projected},
            "notes": list(result.notes),
        },
        **result.meta,
    }
    data = result.data if result.data is not None else result.table
    results.save(data, out_dir, meta=info)
    if csv:  # every table the study and the save wrote (a study may write its own, e.g. hugetlb's headline)
        _tables.export_csv(((p.stem, _tables.read(p)) for p in sorted(out_dir.glob("*.parquet"))), out_dir)
    files = sorted(p for p in out_dir.iterdir() if p.is_file())
    return StudyRun(study=study, result=result, out_dir=out_dir, files=files, elapsed_s=elapsed)


#: The file :func:`reproduce` draws the projected tables into (:func:`alloclab.plot.projected`).
PROJECTED_PLOT = "projected.png"


def draw_projected(study: Study, result: StudyResult, out_dir: Path, *, quick: bool) -> Path:
    """Draw ``result.projected`` (published and virtual as lines, real as points) into ``out_dir``, with the footer
    of the study's runs; returns the path (:data:`PROJECTED_PLOT`)."""
    from .. import plot
    from ..sweep import SweepResult

    runs = result.data.meta if isinstance(result.data, SweepResult) else {}
    fig = plot.projected(result, title=f"{study.name}: the seed's claim, published | virtual | real",
                         provenance={**runs, "quick": bool(quick)})  # fmt: skip
    path = out_dir / PROJECTED_PLOT
    fig.savefig(path, dpi=110)
    return path


@contextmanager
def study_bar(study: Study, quick: bool, *, enabled: bool) -> Iterator[None]:
    """A progress bar for one study while the block runs: its wall time against the study's ``ESTIMATED_S`` for the
    mode (a time bar, not a count of runs: a study's runs differ in length by orders of magnitude; its sweeps show
    their own run bars beneath). Without an estimate the bar counts seconds. Nothing when not ``enabled``.

    Args:
        study: the study.
        quick: the mode whose estimate is the bar's total.
        enabled: draw the bar (``reproduce``'s ``progress``).
    """
    if not enabled:
        yield
        return
    from tqdm.auto import tqdm

    total = study.estimated_s.get("quick" if quick else "full")
    label = "estimated" if total else "no estimate"
    bar = tqdm(total=float(total) if total else None, desc=f"{study.name} ({label})", unit="s", dynamic_ncols=True,
               bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed} of ~{total:.0f} s" if total else None,
               leave=True)  # fmt: skip
    done = threading.Event()
    t0 = time.monotonic()

    def tick() -> None:
        while not done.wait(1.0):
            elapsed = time.monotonic() - t0
            bar.n = min(elapsed, 0.99 * total) if total else round(elapsed)
            bar.refresh()

    ticker = threading.Thread(target=tick, name=f"bar-{study.name}", daemon=True)
    ticker.start()
    try:
        yield
        bar.n = total if total else round(time.monotonic() - t0)
    finally:
        done.set()
        ticker.join()
        bar.close()


def _study_of(module: ModuleType) -> Study:
    missing = [a for a in ("NAME", "run") if not hasattr(module, a)]
    if missing:
        raise AttributeError(f"study module {module.__name__} lacks {', '.join(missing)}")
    published = getattr(module, "PUBLISHED", None)
    if published is None:
        published = pd.DataFrame()
    title = getattr(module, "TITLE", None)
    if title is None:
        doc = (module.__doc__ or "").strip()
        title = doc.splitlines()[0] if doc else str(module.NAME)
    return Study(
        name=str(module.NAME),
        title=str(title),
        scenarios=tuple(getattr(module, "SCENARIOS", ())),
        seed=getattr(module, "SEED", None),
        published=published,
        run=module.run,
        module=module.__name__,
        estimated_s=dict(getattr(module, "ESTIMATED_S", {})),
    )


def _duration(seconds: float | None) -> str:
    """``None`` -> ``"?"``; else ``~`` and seconds below two minutes, minutes below two hours, then hours."""
    if seconds is None:
        return "?"
    if seconds < 120:
        return f"~{seconds:.0f} s"
    if seconds < 7200:
        return f"~{seconds / 60:.0f} min"
    return f"~{seconds / 3600:.1f} h"


def format_error(exc: BaseException) -> str:
    """One study's failure as the last lines of its traceback (what ``alloclab reproduce`` prints)."""
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return "".join(lines[-3:]).rstrip()


def load_average() -> str:
    """The host's 1/5/15-minute load averages, for a study's notes (a loaded host widens every spread)."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def failure_notes(*runs: pd.DataFrame) -> list[str]:
    """One note when any run of the given sweep tables did not finish ok: how many, and the first error.

    Args:
        runs: sweep ``runs`` tables (with ``status`` and ``error`` columns).
    """
    failed = pd.concat(runs)
    failed = failed[failed["status"] != "ok"]
    return [f"{len(failed)} run(s) did not finish ok; first: {failed['error'].iloc[0]}"] if len(failed) else []


def measure(scenario: str, *, grid: dict[str, Any], repeats: int, progress: bool, quick: bool = False, **fixed: Any):
    """A study's sweep: ``repeats`` timed runs of every configuration without lock_stat, interleaved, then one
    lock_stat run of each for the counts (rows with ``lockstat=True``); a run the host disturbed (its workers did
    not run together, or a worker waited for a CPU: :func:`alloclab.cluster.disturbed`) is tried up to twice more,
    except in quick mode (on a loaded host nearly every 2-worker run is, and a retry mostly is too: quick runs keep
    their flags). Returns the ``SweepResult``.

    Args:
        scenario: the scenario.
        grid: the sweep's grid.
        repeats: timed repeats per configuration.
        progress: show the progress bar.
        quick: the study runs in quick mode (no retries).
        **fixed: fixed parameters and run options (e.g. ``topology``).
    """
    from ..sweep import sweep

    return sweep(scenario, grid=grid, repeats=repeats, progress=progress, detail=True, lockstat=False,
                 lockstat_repeats=1, retries=0 if quick else 2, **fixed)  # fmt: skip


#: The seeds of a study's virtual part (:func:`virtual`): each draws another start order at the gate, so another
#: interleaving; as many as a U-test needs to find a difference (:data:`alloclab.stats.MIN_REPEATS`).
VIRTUAL_SEEDS = tuple(range(1, stats.MIN_REPEATS + 1))
#: How a study's notes describe its virtual runs.
VIRTUAL_RUNS = (
    f"costs='table', seeds {VIRTUAL_SEEDS[0]}-{VIRTUAL_SEEDS[-1]} per configuration (each another start order, so "
    "another interleaving), medians over them, a ratio only where the U-test over them finds one"
)


def virtual(scenario: str, *, grid: dict[str, Any], machine: Any, progress: bool, **fixed: Any):
    """A study's virtual part: every configuration of ``grid`` on the seed's ``machine``, ``costs="table"``, one
    run per seed of :data:`VIRTUAL_SEEDS` (a grid axis), lock_stat on (it costs no virtual time, so every row is
    both :func:`timed` and :func:`counted`). The runs go to the executor of the enclosing
    :func:`alloclab.cluster.using` block, which :func:`reproduce` gives a local pool (:func:`alloclab.cluster.local`):
    they do not depend on the host, so they may share it. Figures are medians over the seeds, and comparisons go
    through :func:`alloclab.stats.compare` as the real repeats' do. Returns the ``SweepResult``.

    Args:
        scenario: the scenario.
        grid: the configurations (no ``seed`` axis: the seeds are this function's).
        machine: the machine profile (a name, a path or a ``Machine``).
        progress: show the sweep's progress bar.
        **fixed: fixed parameters.

    Raises:
        RuntimeError: a run did not finish ok (a virtual run with table costs repeats exactly, so trying again
            would fail alike); the message has the first error.
    """
    from ..sweep import sweep

    result = sweep(scenario, grid={**grid, "seed": list(VIRTUAL_SEEDS)}, clock="virtual", machine=machine,
                   costs="table", detail=True, progress=progress, **fixed)  # fmt: skip
    failed = result.runs[result.runs["status"] != "ok"]
    if len(failed):
        raise RuntimeError(f"{scenario} on {machine}: {len(failed)} virtual run(s) failed; first: "
                           f"{failed['error'].iloc[0]}")  # fmt: skip
    return result


def grown(scenario: str, *, workers_param: str, workers: Sequence[int], min_time_s: float, **params: Any) -> dict:
    """The parameters a study's sweep runs with: ``params`` with the scenario's size grown by one real pilot run at
    the fewest ``workers`` until that run lasts ``min_time_s`` (more workers only take longer, so no timed run is too
    short), and only as far as a run at the most workers still fits the host's memory (the runner's ``grow_fit``; a
    size cut for memory leaves the fastest points short: they are flagged and compare n.s., rather than the largest
    points failing). Returns the grown parameters without the worker count.

    Args:
        scenario: the scenario.
        workers_param: its worker-count parameter (``threads``, ``areas``, ...).
        workers: the worker counts the sweep will run.
        min_time_s: the shortest run the sweep may time.
        **params: the scenario's other parameters and run options (e.g. ``topology``).
    """
    from .._run import run

    pilot = run(scenario, lockstat=False, min_time_s=min_time_s, grow=True, grow_fit={workers_param: max(workers)},
                **params, **{workers_param: min(workers)})  # fmt: skip
    return {k: v for k, v in pilot.params.items() if k != workers_param}


def join(parts: Sequence[Any]):
    """Several ``SweepResult`` s as one: run and config numbers shifted so they stay unique, meta of the first with
    every part's meta under ``sweeps``."""
    from ..sweep import SweepResult

    runs, workers, lockstat = [], [], []
    offset_run = offset_config = 0
    for part in parts:
        for table, out in ((part.runs, runs), (part.workers, workers), (part.lockstat, lockstat)):
            t = table.copy()
            if "run" in t:
                t["run"] += offset_run
            if "config" in t:
                t["config"] += offset_config
            out.append(t)
        offset_run += len(part.runs)
        offset_config += int(part.runs["config"].max()) + 1 if len(part.runs) else 0
    meta = dict(parts[0].meta)
    meta["sweeps"] = [p.meta for p in parts]
    for key in ("retried_runs", "flagged_runs"):
        meta[key] = sum(int(p.meta.get(key, 0)) for p in parts)
    return SweepResult(runs=pd.concat(runs, ignore_index=True), workers=pd.concat(workers, ignore_index=True),
                       lockstat=pd.concat(lockstat, ignore_index=True), meta=meta)  # fmt: skip


def timed(runs: pd.DataFrame) -> pd.DataFrame:
    """The ``ok`` rows of a :func:`measure` or :func:`virtual` sweep whose times are the run's own: lock_stat off,
    or a host-independent run (virtual clock, ``costs="table"``: lock_stat costs no virtual time). The ones to
    compare."""
    free = runs["host_independent"].astype("boolean").fillna(False).astype(bool)
    return runs[(runs["status"] == "ok") & (~runs["lockstat"].astype(bool) | free)]


def counted(runs: pd.DataFrame) -> pd.DataFrame:
    """The ``ok`` rows of a :func:`measure` sweep that ran with lock_stat: the ones to take counts from."""
    return runs[(runs["status"] == "ok") & runs["lockstat"].astype(bool)]


def fits_host(workers: int) -> bool:
    """True when ``workers`` fit the host's PUs (a real-clock run of more is oversubscribed by construction)."""
    return workers <= Topology.host().pus


_lockstat_cost: str | None = None


def lockstat_cost() -> str:
    """One note: what lock_stat costs per acquisition on this host (measured once per process).

    ``lock_zoo``, one worker, an MCS lock, 1,000,000 uncontended acquisitions (20-50 ms: long enough to time, where
    200,000 made runs too short to time), lock_stat on and off in 5 interleaved pairs: the median difference of the
    pairs' times per acquisition.
    """
    global _lockstat_cost
    if _lockstat_cost is None:
        from .._run import run

        n, diffs = 1_000_000, []
        for _ in range(5):
            t = {on: run("lock_zoo", threads=1, iterations=n, lock="mcs", lockstat=on).summary["elapsed_s"]
                 for on in (True, False)}  # fmt: skip
            diffs.append((t[True] - t[False]) / n * 1e9)
        _lockstat_cost = (
            f"lock_stat costs {np.median(diffs):.1f} ns per acquisition on this host (median of 5 interleaved "
            "on/off pairs, uncontended MCS); every timing here ran without it, counts come from one lock_stat run "
            "per configuration"
        )
    return _lockstat_cost


def against_claim(quick: bool, ours: float, base: float, claim: str, finding: str) -> list[str]:
    """A note when a result points against the seed's claim that ``ours`` is below ``base``: loud, and never
    presented as a result.

    Args:
        quick: the study ran in quick mode.
        ours: the median the claim says is smaller (e.g. the patched variant's time).
        base: the median it is compared with; with either NaN there is nothing to say.
        claim: the claim, in words (e.g. "per_area is faster than global at 2 regions").
        finding: the comparison's finding text (a ratio only when significant).
    """
    if not (ours >= base):  # holds, or a NaN: nothing measured to point anywhere
        return []
    what = "this quick run" if quick else "this run"
    kind = "a finding" if not finding.startswith("n.s.") else "not a result"
    return [f"!! {what} points AGAINST the seed's claim ({claim}): {finding} -- {kind}; see the flags above"]


def measurement_notes(*results: Any) -> list[str]:
    """Notes on the sweeps' runs: failures, retried runs, and runs still flagged as measurements."""
    notes = failure_notes(*[r.runs for r in results])
    retried = sum(int(r.meta.get("retried_runs", 0)) for r in results)
    flagged = sum(int(r.meta.get("flagged_runs", 0)) for r in results)
    total = sum(len(r.runs) for r in results)
    if retried or flagged:
        notes.append(
            f"{retried} run(s) tried again because the host disturbed them (poor overlap, or oversubscribed with no "
            f"more workers than host PUs); {flagged} of {total} runs still flagged (poor overlap, too short or "
            "oversubscribed): comparisons drop the first two kinds and call nothing oversubscribed a finding"
        )
    return notes
