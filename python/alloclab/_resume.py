"""What a resumed sweep reuses: the identity of a run, the runs a results directory saved, and the rows it keeps.

A run's identity is what it ran, normalized: every parameter of its scenario (given or defaulted, in its declared
type: ``hold_ns=0`` given explicitly is the default), every run option but the time limit (its topology by the
digest of its structure, not its path; a virtual run's machine profile by its hash; its lock overrides in any order;
its placement; whether lock_stat was on, as the row says), and its repeat. A resumed
sweep reuses a saved ``ok`` row for each planned run with the same identity, one row per run (so duplicate grid
values find their rows), unless the row has lost its headline figure (``elapsed_s`` NaN or missing) or, for
``detail=True``, its per-worker rows. Saved
rows that no planned run takes are kept in the directory (``kept.*``), out of the returned table; a later resume
that plans their runs again reuses them.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import warnings
from collections import defaultdict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from . import _resultdir, results
from ._catalogue import scenarios as _scenarios
from ._resultdir import DamagedResult
from ._run import check
from .machines import Machine, machine
from .topology import Topology

__all__ = ["Identities", "Saved", "SavedRun", "check_sweep_meta", "kept_tables", "machine_key_of"]

# Run options that do not change what a run measures (they may differ between a saved sweep and its resume).
RESUMABLE_OPTIONS = {"timeout_s", "exclusive"}
# The figure every ok run has: a saved ok row without it (NaN, missing) has lost its figures and runs again.
HEADLINE = "elapsed_s"
# The column of a kept row that records its identity (kept rows come from sweeps whose meta data is gone).
RUN_KEY = "run_key"


class Identities:
    """Normalizes parameters and options of one scenario into run identities (JSON text)."""

    def __init__(
        self, scenario: str, topology_key: Callable[[Any], str], machine_key: Callable[[Any], Any] | None = None
    ):
        table = _scenarios()
        part = table[table["scenario"] == scenario]
        self.types: dict[str, str] = dict(zip(part["parameter"], part["type"], strict=True))
        self.defaults: dict[str, Any] = dict(zip(part["parameter"], part["default"], strict=True))
        self.scenario = scenario
        self.topology_key = topology_key
        self.machine_key = machine_key or machine_key_of

    def identity(self, params: Mapping[str, Any], options: Mapping[str, Any]) -> str:
        """The identity of a run with these parameters (missing ones take the values the engine gives them: their
        defaults, or the kind a lock override sets, as lock_zoo's ``lock``) and run options."""
        given = {k: self._param(k, v) for k, v in params.items() if k in self.types}
        try:
            full = check(self.scenario, locks=dict(self.option("locks", options.get("locks"))), **given)
        except (ValueError, TypeError):  # a run the engine refuses (an error row): its values as given
            full = {**self.defaults, **given}
        norm_params = {k: _text(self._param(k, v)) for k, v in full.items()}
        norm_options = {k: self.option(k, v) for k, v in options.items() if k not in RESUMABLE_OPTIONS}
        return json.dumps({"params": norm_params, "options": norm_options}, sort_keys=True, default=str)

    def option(self, name: str, value: Any) -> Any:
        """A run option normalized for comparison (also what the options check compares)."""
        value = _plain(value)
        if name == "topology":
            return self.topology_key(value)
        if name == "machine":
            return self.machine_key(value)
        if name == "locks":
            if isinstance(value, str):  # a saved label "class=kind,class=kind"
                value = dict(item.partition("=")[::2] for item in value.split(",") if item)
            return sorted((str(k), str(v)) for k, v in (value or {}).items()) if isinstance(value, Mapping) else value
        if name == "placement":
            items = value.split(",") if isinstance(value, str) and value not in ("compact", "scatter") else value
            if isinstance(items, (list, tuple)):  # a list of PUs, or its saved label "0,2,1"
                try:
                    return [int(p) for p in items]
                except (TypeError, ValueError, OverflowError):
                    pass
            return value  # a policy name, or a value that is no placement (a mismatch, never an error here)
        if name in ("lockstat", "strict") and isinstance(value, str):
            return value == "True"
        return value

    def _param(self, name: str, value: Any) -> Any:
        value = _plain(value)
        kind = self.types[name]
        try:
            if kind == "int" and not isinstance(value, bool) and float(value).is_integer():
                return int(value)
            if kind == "float" and not isinstance(value, bool):
                return float(value)
            if kind == "bool" and isinstance(value, str):
                return {"True": True, "False": False}.get(value, value)
            if kind == "bool":
                return bool(value)
        except (TypeError, ValueError, OverflowError):
            pass  # a value the scenario refuses: its own identity
        return value


@dataclass
class SavedRun:
    """One saved row and its detail rows.

    Attributes:
        row: the row as saved.
        workers, lockstat: its per-worker and lock_stat rows (``None``: none saved).
        identity: what it ran (``None``: unknown, it matches no run).
        repeat: its repeat.
        columns: its parameter columns (the rest after the key and status columns are its figures).
        usable: an ``ok`` row that still has its figures.
    """

    row: dict[str, Any]
    workers: pd.DataFrame | None
    lockstat: pd.DataFrame | None
    identity: str | None
    repeat: int | None
    columns: list[str]
    usable: bool

    def figures(self, key_columns: Sequence[str]) -> dict[str, Any]:
        """The row's status columns and figures, without its key and parameter columns."""
        skip = {*key_columns, *self.columns, RUN_KEY}
        return {k: v for k, v in self.row.items() if k not in skip}


class Saved:
    """The runs a results directory holds, for a sweep that resumes it."""

    def __init__(self, path: Path, meta: dict[str, Any], runs: list[SavedRun]):
        self.path = path
        self.meta = meta
        self.runs = runs

    @classmethod
    def load(
        cls,
        path: Path,
        scenario: str,
        options: Mapping[str, Any],
        axes: Sequence[str],
        front_columns: Sequence[str],
        topology_key: Callable[[Any], str],
        set_aside: bool,
    ) -> Saved | None:
        """The saved runs of ``path`` (``None`` when it holds no result); ``front_columns`` are a sweep table's key
        and status columns (the others, after the parameters, are figures). Damaged files are reported as warnings
        naming the runs that run again, and, with ``set_aside`` (the sweep saves into ``path``), renamed to
        ``<name>.damaged`` so that the new save does not replace them; the rest is reused. A directory whose meta.json
        or data table cannot be used has no run to reuse: with ``set_aside`` every file of it is set aside.

        Raises:
            ValueError: ``path`` holds a result of another kind or scenario, or of other run options.
        """
        try:
            loaded, damaged = results._load(path)
            check_sweep_meta(path / _resultdir.META, loaded.meta)
        except FileNotFoundError:
            return None
        except DamagedResult as exc:
            damaged, loaded = [exc], None
        for problem in damaged:
            warnings.warn(f"resume: {problem}", stacklevel=4)
            if set_aside and problem.path.parent == path:
                _set_aside(problem.path)
        if loaded is None:
            if set_aside:
                for file in path.iterdir():
                    if file.name == _resultdir.META or _resultdir.table_file(file.name):
                        _set_aside(file)
            return cls(path, {}, [])
        meta = loaded.meta
        if meta.get("kind") != "sweep" or meta.get("scenario") != scenario:
            what = f"a {meta.get('kind')} of {meta.get('scenario')!r}"
            raise ValueError(f"resume: {path} holds {what}, not a sweep of {scenario!r}; use another directory")
        saved_topologies = meta.get("topologies") or {}
        saved_machines = meta.get("machines") or {}

        def saved_topology_key(label: Any) -> str:
            known = isinstance(label, str) and label in saved_topologies
            return str(saved_topologies[label]) if known else topology_key(label)

        def saved_machine_key(label: Any) -> Any:
            known = isinstance(label, str) and label in saved_machines
            return str(saved_machines[label]) if known else machine_key_of(label)

        saved_ids = Identities(scenario, saved_topology_key, saved_machine_key)
        now_ids = Identities(scenario, topology_key)
        saved_grid = list(meta.get("grid") or {})
        saved_fixed = list(meta.get("fixed") or {})
        saved_options = meta.get("options") or {}
        for name, value in options.items():
            if name in RESUMABLE_OPTIONS or name not in saved_options or name in axes or name in saved_grid:
                continue
            if saved_ids.option(name, saved_options[name]) != now_ids.option(name, value):
                raise ValueError(
                    f"resume: {path} was swept with {name}={saved_options[name]!r}, this sweep has {name}="
                    f"{_display(value)!r}; resume with the same options or save to another directory"
                )
        defaults = meta.get("defaults") or {}
        columns = [c for c in [*saved_grid, *saved_fixed] if c in loaded.data.columns]

        def identity(row: dict[str, Any]) -> tuple[str, list[str]]:
            params = {**defaults, **{c: row[c] for c in columns}}
            run_options = {**saved_options, **{c: row[c] for c in columns if c in options}}
            if not _is_nan(row.get("lockstat")):  # the row says whether lock_stat was on (lockstat_repeats)
                run_options["lockstat"] = row["lockstat"]
            return saved_ids.identity(params, run_options), columns

        runs = _runs_of(loaded.data, loaded.workers, loaded.lockstat, identity, [*front_columns, *columns])
        if loaded.kept is not None:
            kept_front = [*front_columns, RUN_KEY]
            runs += _runs_of(loaded.kept, loaded.kept_workers, loaded.kept_lockstat, _kept_identity, kept_front)
        return cls(path, meta, runs)

    def match(self, plan: Sequence[tuple[str, int]], detail: bool) -> tuple[dict[int, SavedRun], list[SavedRun]]:
        """Pairs planned runs ``(identity, repeat)`` with saved runs.

        Returns:
            ``(reused, kept)``: run index -> the saved run it reuses; the saved runs no planned run takes (kept in
            the directory). A planned run that finds only saved runs it cannot reuse (an error, a stopped run, lost
            figures or, with ``detail``, lost worker rows) runs again and its new row replaces one of them.
        """
        by_key: dict[tuple[str | None, int | None], deque[SavedRun]] = defaultdict(deque)
        for saved in self.runs:
            by_key[(saved.identity, saved.repeat)].append(saved)
        reused: dict[int, SavedRun] = {}
        for index, key in enumerate(plan):
            queue = by_key.get(key)
            if not queue:
                continue
            good = next((s for s in queue if s.usable and (not detail or s.workers is not None)), None)
            if good is not None:
                queue.remove(good)
                reused[index] = good
            else:
                queue.popleft()  # replaced by the run's new row
        kept = [s for queue in by_key.values() for s in queue]
        return reused, kept


# The entries of a sweep's meta.json that a resume reads, and the JSON kind each must be when present: "mapping", or
# "mapping of lists" (an axis or a varying provenance key lists its values).
_META_ENTRIES = {
    "grid": "mapping of lists",
    "fixed": "mapping",
    "defaults": "mapping",
    "options": "mapping",
    "topologies": "mapping",
    "machines": "mapping",
    "provenance": "mapping",
    "provenance_varying": "mapping of lists",
}


def check_sweep_meta(path: Path, meta: Mapping[str, Any]) -> None:
    """Raises DamagedResult naming ``path`` (the meta.json) and the entry when an entry a resume reads is not of the
    kind alloclab writes (see ``_META_ENTRIES``); absent entries are fine (an older alloclab wrote fewer)."""
    for name, kind in _META_ENTRIES.items():
        value = meta.get(name)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise DamagedResult(path, f"its {name!r} is a JSON {_json_kind(value)}, not a {kind}")
        if kind == "mapping of lists":
            for key, values in value.items():
                if not isinstance(values, list):
                    raise DamagedResult(path, f"its {name!r} gives {key!r} a JSON {_json_kind(values)}, not a list")


def _json_kind(value: Any) -> str:
    kinds = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return kinds.get(type(value), type(value).__name__)


def _set_aside(file: Path) -> None:
    """Renames a file of a results directory to ``<name>.damaged`` (``.damaged.1``, ... when taken) so that a save
    does not replace it: a damaged file is kept, never deleted."""
    if not file.exists():
        return
    target = file.with_name(f"{file.name}.damaged")
    n = 0
    while target.exists():
        n += 1
        target = file.with_name(f"{file.name}.damaged.{n}")
    file.rename(target)


def _runs_of(
    table: pd.DataFrame,
    workers: pd.DataFrame | None,
    lockstat: pd.DataFrame | None,
    identity: Callable[[dict[str, Any]], tuple[str | None, list[str]]],
    front: list[str],
) -> list[SavedRun]:
    """The saved runs of a table: ``identity(row)`` gives each row's identity and parameter columns; the columns
    that are not in ``front`` and not a row's parameters are its figures."""
    detail = {name: _by_run(t) for name, t in (("workers", workers), ("lockstat", lockstat))}
    runs: list[SavedRun] = []
    for row in table.to_dict("records"):
        ident, columns = identity(row)
        figures = [c for c in row if c not in front and c not in columns]
        run = row.get("run")
        runs.append(
            SavedRun(
                row=row,
                workers=detail["workers"].get(run),
                lockstat=detail["lockstat"].get(run),
                identity=ident,
                repeat=_int_or_none(row.get("repeat")),
                columns=columns,
                usable=row.get("status") == "ok" and _has_figures(row, figures),
            )
        )
    return runs


def _has_figures(row: Mapping[str, Any], figure_columns: Sequence[str]) -> bool:
    """The row still has its headline figure: ``elapsed_s``, which every run measures (a finite number of seconds),
    or, in a table without that column (an alloclab from before it), at least one numeric figure that is not
    missing. Other figures may be missing by design (lock_stat off, no window in which every worker ran)."""
    if HEADLINE in figure_columns:
        value = _plain(row.get(HEADLINE))
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    numbers = [row.get(c) for c in figure_columns if isinstance(_plain(row.get(c)), (int, float))]
    return any(not _is_nan(v) for v in numbers)


def _kept_identity(row: Mapping[str, Any]) -> tuple[str | None, list[str]]:
    """A kept row's identity and parameter columns, from its ``run_key``."""
    try:
        value = json.loads(row.get(RUN_KEY))
        identity = None if value["identity"] is None else json.dumps(value["identity"], sort_keys=True)
        return identity, [str(c) for c in value["columns"]]
    except (TypeError, ValueError, KeyError, RecursionError):
        return None, []


def kept_tables(kept: list[SavedRun]) -> dict[str, pd.DataFrame | None]:
    """The kept tables of a directory: every kept row, numbered 0.. in ``run``, with its identity in ``run_key``,
    and their detail rows renumbered with them."""
    rows, workers, lockstat = [], [], []
    for number, saved in enumerate(kept):
        key = {"identity": json.loads(saved.identity) if saved.identity else None, "columns": saved.columns}
        rows.append({**saved.row, "run": number, RUN_KEY: json.dumps(key, sort_keys=True)})
        for part, into in ((saved.workers, workers), (saved.lockstat, lockstat)):
            if part is not None:
                into.append(part.assign(run=number))
    return {
        "kept": pd.DataFrame(rows) if rows else None,
        "kept_workers": pd.concat(workers, ignore_index=True) if workers else None,
        "kept_lockstat": pd.concat(lockstat, ignore_index=True) if lockstat else None,
    }


def _by_run(table: pd.DataFrame | None) -> dict[Any, pd.DataFrame]:
    if table is None or "run" not in table.columns:
        return {}
    return {run: part.reset_index(drop=True) for run, part in table.groupby("run", sort=False)}


def _plain(value: Any) -> Any:
    """numpy scalars as Python values."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            return value.item()
        except (TypeError, ValueError):
            pass
    return value


def _text(value: Any) -> str:
    value = _plain(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    return str(value)


def machine_key_of(value: Any) -> Any:
    """What a machine profile is, for matching: the hash of its topology and numbers (a shipped profile's name, or
    the path of a regular TOML file, is loaded for it); ``None`` (a real-clock run) and a value that loads no
    profile stand for themselves (a FIFO or device is never read)."""
    if isinstance(value, Machine):
        return value.hash
    if isinstance(value, (str, os.PathLike)):
        with contextlib.suppress(ValueError, OSError):
            if not str(value).endswith(".toml") or stat.S_ISREG(os.stat(value).st_mode):
                return machine(value).hash
    return value


def _display(value: Any) -> Any:
    return value.description if isinstance(value, Topology) else value


def _is_nan(value: Any) -> bool:
    """A missing value: None, NaN or pandas' NA (an integer or boolean figure a run does not have)."""
    value = _plain(value)
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _int_or_none(value: Any) -> int | None:
    try:
        return int(_plain(value))
    except (TypeError, ValueError, OverflowError):
        return None
