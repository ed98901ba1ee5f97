"""Results on disk with their provenance: :func:`save` and :func:`load`.

A results directory holds the data (``data.parquet``: Parquet keeps every column's type), the detail tables when
there are some (``workers.parquet``, ``lockstat.parquet``), the rows of earlier sweeps into the same directory that its
latest sweep did not use (``kept.parquet``, with ``kept_workers.parquet`` and ``kept_lockstat.parquet``), ``meta.json``:
what was run (scenario, grid, fixed parameters, options), on what (model and host topology, placement and binding
outcome, oversubscription, lock kinds), with what (alloclab version, git sha and dirty flag, Python/numpy/pandas
versions, hostname, CPU model, kernel), when (start and end time) and how (the command line); and ``manifest.json``,
written last, with the size, row count and sha256 of every other file. :func:`export_csv` writes CSV copies of the
tables to ``csv/`` beside them (``--csv`` on the command line); directories of older alloclab versions that hold CSV
tables are not read (:class:`DamagedResult` says so).

A save is atomic as a whole (a crash leaves the previous set of files or the new one, never a mix) and has the
directory to itself (an exclusive lock; a second writer gets :class:`DirectoryLocked`); it never replaces an earlier
result unless told to (``overwrite=True``). :func:`load` verifies every file against the manifest and raises
:class:`DamagedResult`, naming the file, the problem and the runs whose rows are lost, for anything that is not what
was saved.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import socket
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import _resultdir, _tables
from ._resultdir import DamagedResult, DirectoryLocked
from ._run import RunResult
from .topology import Topology


@dataclass
class SweepResult:
    """A sweep with its detail tables (what ``al.sweep(..., detail=True)`` returns).

    Attributes:
        runs: the tidy table, one row per run; exactly what ``al.sweep(..., detail=False)`` returns.
        workers: one row per (run, worker): the ``run``, ``config`` and ``repeat`` keys, the grid and fixed
            parameters (unless a worker column has the same name), then :attr:`alloclab.RunResult.workers`'
            columns. Join it to :attr:`runs` on ``run``.
        lockstat: one row per (run, lock class), keyed the same way, with ``/proc/lock_stat``'s columns.
        meta: the sweep's description and the runs' provenance (also in ``runs.attrs["alloclab"]``).
    """

    runs: pd.DataFrame
    workers: pd.DataFrame
    lockstat: pd.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        counts = self.runs["status"].value_counts().to_dict() if "status" in self.runs else {}
        return (
            f"SweepResult({self.meta.get('scenario')!r}, {len(self.runs)} runs {counts}, "
            f"{len(self.workers)} worker rows, {len(self.lockstat)} lock_stat rows)"
        )


def jsonable(value: Any) -> Any:
    """Make a value JSON-friendly (numpy scalars -> Python, unknown objects -> str)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "item"):
        try:
            return value.item()
        except (TypeError, ValueError):
            pass
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, Topology):
        return value.description
    return str(value)


__all__ = [
    "PROVENANCE_KEYS",
    "DamagedResult",
    "DirectoryLocked",
    "LoadedResult",
    "environment",
    "export_csv",
    "load",
    "save",
]

#: Keys that every ``meta.json`` written by :func:`save` has (``None`` when unknown for that data).
PROVENANCE_KEYS = (
    "kind",
    "scenario",
    "grid",
    "fixed",
    "model_topology",
    "host_topology",
    "placement",
    "binding",
    "oversubscribed",
    "lock_kinds",
    "alloclab_version",
    "git_sha",
    "git_dirty",
    "hostname",
    "cpu_model",
    "kernel",
    "python",
    "numpy",
    "pandas",
    "started",
    "ended",
    "command_line",
)

#: The tables a results directory may hold.
_TABLES = ("data", "workers", "lockstat", "kept", "kept_workers", "kept_lockstat")


@dataclass
class LoadedResult:
    """What :func:`load` gives back. Unpacks as ``data, meta = al.results.load(path)``.

    Attributes:
        data: the main table (a sweep's tidy table, a run's one-row summary, or whatever DataFrame was saved);
            its ``attrs["alloclab"]`` holds ``meta``.
        meta: the contents of ``meta.json``.
        workers: the per-worker detail table, or ``None`` when none was saved.
        lockstat: the lock_stat detail table, or ``None`` when none was saved.
        kept: rows that earlier sweeps into this directory saved and its latest sweep did not use (another grid,
            fewer repeats), kept rather than deleted; ``None`` when there are none. A resume reuses them when its
            runs match them again.
        kept_workers: their per-worker rows (keyed by the ``run`` numbers of ``kept``), or ``None``.
        kept_lockstat: their lock_stat rows, or ``None``.
        path: the results directory.
    """

    data: pd.DataFrame
    meta: dict[str, Any]
    workers: pd.DataFrame | None = None
    lockstat: pd.DataFrame | None = None
    kept: pd.DataFrame | None = None
    kept_workers: pd.DataFrame | None = None
    kept_lockstat: pd.DataFrame | None = None
    path: Path = field(default_factory=Path)

    def __iter__(self) -> Iterator[Any]:
        return iter((self.data, self.meta))


def environment() -> dict[str, Any]:
    """Where and with what this process runs: versions, git state of the alloclab source tree, machine, command.

    Returns:
        ``alloclab_version, git_sha, git_dirty, git_root, hostname, cpu_model, kernel, platform, python,
        numpy, pandas, scipy, matplotlib, command_line, cwd``. ``git_sha``/``git_dirty`` are ``None`` when the
        package is not inside a git work tree (an installed wheel) or git is missing; ``git_sha`` is ``None``
        when the repository has no commit yet.
    """
    from ._core import __version__

    sha, dirty, root = _git_state(Path(__file__).resolve().parent)
    env: dict[str, Any] = {
        "alloclab_version": __version__,
        "git_sha": sha,
        "git_dirty": dirty,
        "git_root": root,
        "hostname": socket.gethostname(),
        "cpu_model": _cpu_model(),
        "kernel": f"{platform.system()} {platform.release()} {platform.version()}".strip(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pandas": pd.__version__,
        "scipy": _version_of("scipy"),
        "matplotlib": _version_of("matplotlib"),
        "command_line": shlex.join(getattr(sys, "orig_argv", sys.argv)),
        "cwd": os.getcwd(),
    }
    return env


def save(
    data: pd.DataFrame | SweepResult | RunResult,
    directory: str | os.PathLike,
    *,
    meta: Mapping[str, Any] | None = None,
    overwrite: bool = False,
) -> Path:
    """Write a result and its provenance to a directory (created if needed).

    Args:
        data: a sweep's table (its ``attrs["alloclab"]`` meta data is kept), a :class:`~alloclab.sweep.SweepResult`
            (the detail tables are written too), a :class:`~alloclab.RunResult` (a one-row table of parameters
            and summary, plus its workers and lock_stat tables), or any DataFrame.
        directory: the results directory, e.g. ``"results/lock_zoo/20240101T120000Z"``.
        meta: extra JSON-able entries for ``meta.json`` (merged at the top level; they win over computed ones).
        overwrite: replace the result the directory already holds (otherwise that is refused).

    Every table is written as Parquet (a column of mixed Python types, which Parquet cannot hold, as text, and
    ``meta.json``'s ``format_notes`` names it). The files are committed as one set (``manifest.json`` last; see the
    module's description): an interrupted save leaves the previous complete set in place. The directory is locked
    while it is written.

    Returns:
        The directory.

    Raises:
        ValueError: ``data`` of an unsupported type; ``directory`` a file, not writable, or
            holding a result already (without ``overwrite``); the message starts with the argument's name.
        DirectoryLocked: another sweep or save is writing the directory.
    """
    _split(data)  # refuse an unsupported type before touching the directory
    with _resultdir.Writer(directory, _TABLES, param="directory", overwrite=overwrite) as writer:
        return _save(writer, data, meta=meta, env=None)


def _save(
    writer: _resultdir.Writer,
    data: pd.DataFrame | SweepResult | RunResult,
    *,
    meta: Mapping[str, Any] | None,
    env: Mapping[str, Any] | None,
    extra: Mapping[str, pd.DataFrame | None] | None = None,
) -> Path:
    """:func:`save` through a writer that holds the directory (a sweep holds it from its first run to its last
    save), with the :func:`environment` given (a sweep computes it once) and extra tables (a sweep's kept rows)."""
    tables, data_meta = _split(data)
    tables.update(extra or {})

    names: dict[str, str] = {}
    notes: list[str] = []

    def table_file(name: str, table: pd.DataFrame) -> Callable[[Path], tuple[str, int]]:
        def write(path: Path) -> tuple[str, int]:
            notes.extend(f"{name}: {note}" for note in _tables.write(table, path))
            names[name] = f"{name}.parquet"
            return names[name], len(table)

        return write

    files = {name: table_file(name, table) for name, table in tables.items() if table is not None}
    out = _provenance(data_meta, tables["data"])
    out.update(environment() if env is None else env)

    def meta_file(path: Path) -> tuple[str, None]:
        out["saved"] = _resultdir.utc_now()
        out["files"] = dict(names)
        if notes:
            out["format_notes"] = notes
        if meta:
            out.update({str(k): jsonable(v) for k, v in meta.items()})
        path.write_text(json.dumps(jsonable(out), indent=2) + "\n")
        return _resultdir.META, None

    writer.commit({**files, "meta": meta_file})
    return writer.directory


def load(directory: str | os.PathLike) -> LoadedResult:
    """Read a directory written by :func:`save` (or by a sweep with ``out=``), verifying every file.

    Args:
        directory: the results directory.

    Returns:
        A :class:`LoadedResult` (``data, meta = al.results.load(path)`` also works). CSV tables get their
        saved column types back (integers, booleans, nullable types, empty strings).

    Raises:
        FileNotFoundError: the directory holds no saved result (no manifest.json or meta.json).
        DamagedResult: a file is missing, changed since it was saved, cut short or unreadable, a manifest or
            meta.json is not what alloclab writes, or names a file outside the directory; the exception names the
            file, the problem and the runs whose rows are lost; a CSV table (written by an alloclab before
            Parquet was the one format) is named as not read. (A directory written before manifests is read without
            verification, with a warning.)
    """
    loaded, damaged = _load(Path(directory))
    if damaged:
        raise damaged[0]
    return loaded


def export_csv(directory: str | os.PathLike) -> list[Path]:
    """CSV copies of every table of a saved result, in ``directory/csv/<table>.csv`` (what ``--csv`` does).

    The Parquet files stay the result (:func:`load` reads them, the manifest covers them); the copies are for tools
    that read CSV, and are replaced by the next export. Returns the files written.

    Raises:
        FileNotFoundError, DamagedResult: as :func:`load`.
    """
    loaded = load(directory)
    tables = {name: getattr(loaded, name) for name in _TABLES}
    return _tables.export_csv(((n, t) for n, t in tables.items() if t is not None), directory)


def _load(directory: Path) -> tuple[LoadedResult, list[DamagedResult]]:
    """The tables that could be read, and the problem of every one that could not (a resume runs their runs
    again). Raises DamagedResult when meta.json or the manifest itself is unusable or the data table is damaged."""
    files = _resultdir.read_files(directory, _TABLES)
    meta_path, meta_raw = files.files["meta"]
    meta = _resultdir.json_object(meta_path, meta_raw)
    if files.manifest is None:
        warnings.warn(
            f"{directory}: written by an alloclab without manifests: its files are read but cannot be verified",
            stacklevel=3,
        )
    entries = (files.manifest or {}).get("files", {})
    tables: dict[str, pd.DataFrame | None] = dict.fromkeys(_TABLES)
    damaged: dict[str, DamagedResult] = dict(files.damaged)
    for name, (path, raw) in files.files.items():
        if name == "meta":
            continue
        if path.suffix != ".parquet":
            damaged[name] = DamagedResult(path, "a CSV table of an older alloclab: results are read from Parquet only")
            continue
        try:
            table = _tables.read(raw)
        except Exception as exc:  # pyarrow, pandas and numpy each raise their own kinds of errors
            damaged[name] = DamagedResult(path, f"cannot be read as a table ({type(exc).__name__}: {exc})"[:400])
            continue
        rows = (entries.get(name) or {}).get("rows")
        if rows is not None and rows != len(table):
            damaged[name] = DamagedResult(path, f"holds {len(table)} rows, {rows} were saved")
            continue
        tables[name] = table
    data = tables["data"]
    if data is None:
        problem = damaged.get("data") or DamagedResult(meta_path, "names no data table")
        raise DamagedResult(problem.path, problem.problem)  # every run's rows
    # A damaged detail table loses the detail rows of the data's ok runs; kept tables lose no run of this sweep.
    runs = _ok_runs(data)
    lost = [
        DamagedResult(d.path, d.problem + (" (rows of earlier sweeps, kept)" if n.startswith("kept") else ""),
                      [] if n.startswith("kept") else runs)
        for n, d in damaged.items()
    ]  # fmt: skip
    data.attrs = {"alloclab": meta}
    return (
        LoadedResult(
            data=data,
            meta=meta,
            workers=tables["workers"],
            lockstat=tables["lockstat"],
            kept=tables["kept"],
            kept_workers=tables["kept_workers"],
            kept_lockstat=tables["kept_lockstat"],
            path=directory,
        ),
        lost,
    )


def _ok_runs(data: pd.DataFrame) -> list[int] | None:
    """The runs whose detail rows a damaged detail table held (None when the table has no run numbers)."""
    if "run" not in data.columns or "status" not in data.columns:
        return None
    try:
        return [int(r) for r in data.loc[data["status"] == "ok", "run"]]
    except (TypeError, ValueError):
        return None


# --- helpers -----------------------------------------------------------------------------------------------


def _split(data: Any) -> tuple[dict[str, pd.DataFrame | None], dict[str, Any]]:
    if isinstance(data, SweepResult):
        return {"data": data.runs, "workers": data.workers, "lockstat": data.lockstat}, dict(data.meta)
    if isinstance(data, RunResult):
        row = {"scenario": data.scenario, **data.params}
        row.update(status="stopped" if data.stopped else "ok", error=data.stop_reason)
        row["seed"] = data.provenance.get("seed")
        row.update({k: v for k, v in data.summary.items() if k not in row})
        prov = data.provenance
        meta = {
            "kind": "run",
            "scenario": data.scenario,
            "grid": {},
            "fixed": {k: jsonable(v) for k, v in data.params.items()},
            "provenance": {k: jsonable(v) for k, v in prov.items()},
            "provenance_varying": {},
            "started": prov.get("started"),
            "ended": prov.get("ended"),
        }
        return {"data": pd.DataFrame([row]), "workers": data.workers, "lockstat": data.lockstat}, meta
    if isinstance(data, pd.DataFrame):
        meta = dict(data.attrs.get("alloclab") or {})
        meta.setdefault("kind", "table")
        return {"data": data, "workers": None, "lockstat": None}, meta
    raise ValueError(f"data: expected a DataFrame, SweepResult or RunResult, got {type(data).__name__}")


def _provenance(meta: dict[str, Any], table: pd.DataFrame) -> dict[str, Any]:
    """The sweep/run meta data plus the provenance keys promoted to the top level."""
    prov = meta.get("provenance") or {}
    varying = meta.get("provenance_varying") or {}

    def pick(key: str) -> Any:
        if key in prov:
            return prov[key]
        return varying.get(key)

    ok = table[table["status"] != "error"] if "status" in table.columns else table.iloc[0:0]
    binding: dict[str, Any] = {"workers": None, "workers_bound": None, "all_bound": None}
    oversubscribed: Any = pick("oversubscribed")
    if {"n_workers", "workers_bound"} <= set(ok.columns) and len(ok):
        workers, bound = int(ok["n_workers"].sum()), int(ok["workers_bound"].sum())
        binding = {"workers": workers, "workers_bound": bound, "all_bound": workers == bound}
    elif "workers" in prov and "workers_bound" in prov:
        w, b = int(prov["workers"]), int(prov["workers_bound"])
        binding = {"workers": w, "workers_bound": b, "all_bound": w == b}
    if "oversubscribed" in ok.columns and len(ok):
        oversubscribed = bool(ok["oversubscribed"].fillna(False).astype(bool).any())
        binding["oversubscribed_runs"] = int(ok["oversubscribed"].fillna(False).astype(bool).sum())
    out: dict[str, Any] = {k: None for k in PROVENANCE_KEYS}
    out.update(meta)
    out.update(
        model_topology=pick("model_description"),
        host_topology=pick("host_topology"),
        placement=pick("placement"),
        binding=binding,
        oversubscribed=oversubscribed,
        lock_kinds=pick("lock_kinds"),
    )
    for key in ("grid", "fixed"):
        if out.get(key) is None:
            out[key] = {}
    return out


def _git_state(where: Path) -> tuple[str | None, bool | None, str | None]:
    def git(*args: str) -> subprocess.CompletedProcess[str] | None:
        try:
            return subprocess.run(
                ["git", "-C", str(where), *args], capture_output=True, text=True, timeout=10, check=False
            )
        except (OSError, subprocess.SubprocessError):
            return None

    top = git("rev-parse", "--show-toplevel")
    if top is None or top.returncode != 0:
        return None, None, None
    head = git("rev-parse", "--verify", "--quiet", "HEAD")
    sha = head.stdout.strip() if head is not None and head.returncode == 0 and head.stdout.strip() else None
    status = git("status", "--porcelain")
    dirty = bool(status.stdout.strip()) if status is not None and status.returncode == 0 else None
    return sha, dirty, top.stdout.strip()


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version_of(module: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(module)
    except PackageNotFoundError:
        return None
