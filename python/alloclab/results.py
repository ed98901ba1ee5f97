"""Results on disk with their provenance: :func:`save` and :func:`load`.

A results directory holds the data (``data.parquet`` when pyarrow is installed, ``data.csv`` otherwise), the
detail tables when there are some (``workers.*``, ``lockstat.*``), and ``meta.json``: what was run (scenario,
grid, fixed parameters, options), on what (model and host topology, placement and binding outcome,
oversubscription, lock kinds), with what (alloclab version, git sha and dirty flag, Python/numpy/pandas
versions, hostname, CPU model, kernel), when (start and end time) and how (the command line).
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ._run import RunResult
from .sweep import SweepResult, _json

__all__ = ["PROVENANCE_KEYS", "LoadedResult", "environment", "load", "save"]

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

_TABLES = ("data", "workers", "lockstat")


@dataclass
class LoadedResult:
    """What :func:`load` gives back. Unpacks as ``data, meta = al.results.load(path)``.

    Attributes:
        data: the main table (a sweep's tidy table, a run's one-row summary, or whatever DataFrame was saved);
            its ``attrs["alloclab"]`` holds ``meta``.
        meta: the contents of ``meta.json``.
        workers: the per-worker detail table, or ``None`` when none was saved.
        lockstat: the lock_stat detail table, or ``None`` when none was saved.
        path: the results directory.
    """

    data: pd.DataFrame
    meta: dict[str, Any]
    workers: pd.DataFrame | None = None
    lockstat: pd.DataFrame | None = None
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
    from . import __version__

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
    format: str = "auto",
) -> Path:
    """Write a result and its provenance to a directory (created if needed; files in it are overwritten).

    Args:
        data: a sweep's table (its ``attrs["alloclab"]`` meta data is kept), a :class:`~alloclab.sweep.SweepResult`
            (the detail tables are written too), a :class:`~alloclab.RunResult` (a one-row table of parameters
            and summary, plus its workers and lock_stat tables), or any DataFrame.
        directory: the results directory, e.g. ``"results/lock_zoo/20240101T120000Z"``.
        meta: extra JSON-able entries for ``meta.json`` (merged at the top level; they win over computed ones).
        format: ``"parquet"``, ``"csv"`` or ``"auto"`` (Parquet when pyarrow is importable, else CSV). If
            Parquet cannot store a table (mixed-type columns), CSV is written instead and ``meta.json`` says why.

    Every file is written under a temporary name in ``directory`` and then renamed over the old one, tables
    first and ``meta.json`` last, so an interrupted save leaves the previous complete file of each name in place
    (this is what lets :func:`alloclab.sweep` save after every run).

    Returns:
        The directory.

    Raises:
        ValueError: an unknown ``format``, or ``data`` of an unsupported type.
    """
    return _save(data, directory, meta=meta, format=format, env=None)


def _save(
    data: pd.DataFrame | SweepResult | RunResult,
    directory: str | os.PathLike,
    *,
    meta: Mapping[str, Any] | None,
    format: str,
    env: Mapping[str, Any] | None,
) -> Path:
    """:func:`save` with the :func:`environment` given (a sweep saving after every run computes it once)."""
    if format not in ("auto", "parquet", "csv"):
        raise ValueError(f"format: expected 'auto', 'parquet' or 'csv', got {format!r}")
    tables, data_meta = _split(data)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if format == "auto":
        format = "parquet" if _has_pyarrow() else "csv"

    files: dict[str, str] = {}
    schema: dict[str, Any] = {}
    notes: list[str] = []
    stale: list[Path] = []
    for name, table in tables.items():
        if table is None:
            continue
        files[name], note, other = _write_table(table, directory / name, format)
        stale.append(other)
        schema[name] = _schema(table)
        if note:
            notes.append(note)

    out = _provenance(data_meta, tables["data"])
    out.update(environment() if env is None else env)
    out["saved"] = _utc_now()
    out["files"] = files
    out["schema"] = schema
    if notes:
        out["format_notes"] = notes
    if meta:
        out.update({str(k): _json(v) for k, v in meta.items()})
    _atomic(directory / "meta.json", lambda tmp: tmp.write_text(json.dumps(_json(out), indent=2) + "\n"))
    for path in stale:
        _remove(path)
    return directory


def load(directory: str | os.PathLike) -> LoadedResult:
    """Read a directory written by :func:`save`.

    Args:
        directory: the results directory.

    Returns:
        A :class:`LoadedResult` (``data, meta = al.results.load(path)`` also works). CSV tables get their
        saved column types back (integers, booleans, nullable types, empty strings).

    Raises:
        FileNotFoundError: the directory has no ``meta.json`` or its data file is missing.
    """
    directory = Path(directory)
    meta_path = directory / "meta.json"
    if not meta_path.is_file():
        raise FileNotFoundError(f"{meta_path}: no meta.json (not a results directory written by alloclab)")
    meta = json.loads(meta_path.read_text())
    files = meta.get("files") or {}
    schema = meta.get("schema") or {}
    loaded: dict[str, pd.DataFrame | None] = {}
    for name in _TABLES:
        fname = files.get(name)
        if fname is None:
            loaded[name] = None
            continue
        path = directory / fname
        if not path.is_file():
            raise FileNotFoundError(f"{path}: listed in meta.json but missing")
        loaded[name] = _read_table(path, schema.get(name))
    data = loaded["data"]
    if data is None:
        raise FileNotFoundError(f"{meta_path}: lists no data file")
    data.attrs = {"alloclab": meta}
    return LoadedResult(data=data, meta=meta, workers=loaded["workers"], lockstat=loaded["lockstat"], path=directory)


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
            "fixed": {k: _json(v) for k, v in data.params.items()},
            "provenance": {k: _json(v) for k, v in prov.items()},
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


def _schema(table: pd.DataFrame) -> dict[str, Any]:
    dtypes = {str(c): str(t) for c, t in table.dtypes.items()}
    strings = [
        str(c)
        for c in table.columns
        if (pd.api.types.is_string_dtype(table[c]) or table[c].dtype == object) and not table[c].isna().any()
    ]
    return {"dtypes": dtypes, "strings_without_na": strings}


def _write_table(table: pd.DataFrame, stem: Path, format: str) -> tuple[str, str, Path]:
    """Write one table; returns its file name, a note when Parquet fell back to CSV, and the file of the other
    format, which the caller removes once ``meta.json`` no longer lists it."""
    if format == "parquet":
        path = stem.with_suffix(".parquet")
        try:
            _atomic(path, lambda tmp: table.to_parquet(tmp, index=False))
            return path.name, "", stem.with_suffix(".csv")
        except Exception as exc:  # pyarrow refuses mixed-type object columns and the like
            note = f"{stem.name}: written as CSV because Parquet failed ({type(exc).__name__}: {exc})"
    else:
        note = ""
    path = stem.with_suffix(".csv")
    _atomic(path, lambda tmp: table.to_csv(tmp, index=False))
    return path.name, note, stem.with_suffix(".parquet")


def _read_table(path: Path, schema: Mapping[str, Any] | None) -> pd.DataFrame:
    if path.suffix == ".parquet":
        table = pd.read_parquet(path)
        table.attrs = {}
        return table
    strings = list((schema or {}).get("strings_without_na", []))
    header = pd.read_csv(path, nrows=0).columns
    table = pd.read_csv(path, dtype={c: str for c in strings if c in header})
    if not schema:
        return table
    for col in strings:
        if col in table.columns:
            table[col] = table[col].fillna("")
    for col, dtype in (schema.get("dtypes") or {}).items():
        if col in table.columns and str(table[col].dtype) != dtype:
            try:
                table[col] = table[col].astype(dtype)
            except (TypeError, ValueError):
                pass  # keep what read_csv inferred
    return table


def _atomic(path: Path, write: Callable[[Path], Any]) -> None:
    """Write ``path`` through ``write(tmp)`` on a temporary file in the same directory, then rename it over."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        _remove(tmp)


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


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


def _has_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def _utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
