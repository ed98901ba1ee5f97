"""Grids of runs: :func:`sweep` and its :class:`SweepResult`.

A sweep runs every configuration of a grid ``repeats`` times, *interleaved* (all configurations for repeat 0,
then all for repeat 1, ...) so that machine drift spreads over every configuration instead of biasing one, and
returns a tidy (long-format) table with one row per run. A configuration that fails becomes a row with
``status="error"`` and the message; the sweep goes on.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import pandas as pd

from ._catalogue import scenarios as _scenarios
from ._run import RunResult, run
from .topology import Topology

__all__ = ["RUN_OPTIONS", "SweepResult", "configurations", "sweep"]

#: Options of :func:`alloclab.run` that may also appear as grid axes or fixed values of a sweep.
RUN_OPTIONS = ("topology", "placement", "lockstat", "locks", "strict", "seed", "timeout_s")

#: Columns every sweep table starts with (then the grid and fixed parameters, then these status columns,
#: then the scenario's summary figures).
KEY_COLUMNS = ("run", "config", "repeat", "scenario")
STATUS_COLUMNS = ("status", "error", "oversubscribed", "n_workers", "workers_bound")

# Provenance keys that differ from run to run by nature and so never count as a "varying" setting.
_PER_RUN_KEYS = {"started", "ended"}


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


def configurations(grid: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The configurations of a grid, in sweep order (the last axis varies fastest).

    Args:
        grid: axis name -> list of values; a scalar or a string counts as a one-value axis.

    Returns:
        One dict per configuration. An empty or ``None`` grid has exactly one (empty) configuration.
    """
    axes = {k: _as_values(k, v) for k, v in (grid or {}).items()}
    return [dict(zip(axes, combo, strict=True)) for combo in itertools.product(*axes.values())]


def sweep(
    scenario: str,
    grid: Mapping[str, Any] | None = None,
    repeats: int = 1,
    topology: Topology | str | None = None,
    *,
    progress: bool = True,
    detail: bool = False,
    placement: str | Sequence[int] = "compact",
    lockstat: bool = True,
    locks: Mapping[str, str] | None = None,
    strict: bool = False,
    seed: int = 1,
    timeout_s: float = 0.0,
    **fixed: Any,
) -> pd.DataFrame | SweepResult:
    """Run a scenario over a grid of configurations, ``repeats`` times each, interleaved.

    Args:
        scenario: a scenario name (:func:`alloclab.scenarios`).
        grid: parameter -> list of values; the sweep runs the Cartesian product. Axes may be scenario
            parameters or run options (``topology`` as a synthetic string or :class:`Topology`, ``placement``,
            ``locks``, ``seed``, ...). ``None`` or ``{}``: one configuration.
        repeats: how many times each configuration runs (>= 1). Run ``i`` of the sweep is configuration
            ``i % n_configs`` of repeat ``i // n_configs``: A B A B ..., never A A B B.
        topology: the model machine for every run (``Topology``, a synthetic description such as
            ``"node:2 core:2 pu:1"``, ``"host"`` or ``None`` for the host).
        progress: show a ``tqdm.auto`` bar (terminal or notebook) with the current configuration and an ETA.
        detail: ``False`` returns the tidy table; ``True`` returns a :class:`SweepResult` that also holds the
            per-worker and lock_stat tables of every run.
        placement: worker placement for every run (see :func:`alloclab.run`).
        lockstat: collect lock statistics.
        locks: lock class -> lock kind overrides for every run.
        strict: make binding failures errors (they then show up as error rows).
        seed: the seed of every run (the same for all repeats, so repeats differ only by timing).
        timeout_s: per-run time limit (0: none); a run that hits it becomes a ``status="stopped"`` row.
        **fixed: scenario parameters held constant over the sweep (each becomes a column too).

    Returns:
        A DataFrame with one row per run, in the order the runs happened: ``run, config, repeat, scenario``,
        one column per grid axis and fixed parameter, ``status`` (``"ok"``, ``"error"`` or ``"stopped"``),
        ``error`` (the message, ``""`` when ok), ``oversubscribed``, ``n_workers``, ``workers_bound``, then the
        scenario's summary figures (NaN on error rows). Its ``attrs["alloclab"]`` holds the sweep's meta data
        (scenario, grid, fixed, options, start and end time, the runs' common provenance); :func:`alloclab.results.save`
        writes it to ``meta.json``. With ``detail=True``, a :class:`SweepResult` instead.

    Raises:
        ValueError: the scenario does not exist, a grid/fixed name is neither one of its parameters nor a run
            option, an axis is empty, or ``repeats < 1``. (A *value* the engine rejects only makes error rows.)
        KeyboardInterrupt: Ctrl-C stops the sweep (the current run is stopped and joined first).
    """
    grid = dict(grid or {})
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise ValueError(f"repeats: must be an integer >= 1, got {repeats!r}")
    _check_names(scenario, grid, fixed)
    overlap = set(grid) & set(fixed)
    if overlap:
        raise ValueError(f"grid and fixed parameters overlap: {sorted(overlap)}")
    configs = configurations(grid)
    options = {
        "topology": topology,
        "placement": placement,
        "lockstat": lockstat,
        "locks": locks,
        "strict": strict,
        "seed": seed,
        "timeout_s": timeout_s,
    }
    plan = [(r, c) for r in range(repeats) for c in range(len(configs))]

    started = _utc_now()
    rows: list[dict[str, Any]] = []
    worker_tables: list[pd.DataFrame] = []
    lockstat_tables: list[pd.DataFrame] = []
    provenances: list[dict[str, Any]] = []
    first_params: dict[str, Any] | None = None

    bar = _progress_bar(len(plan), scenario, enabled=progress)
    topo_cache: dict[str, Topology | None] = {}
    try:
        for run_index, (repeat, config_index) in enumerate(plan):
            config = configs[config_index]
            if bar is not None:
                bar.set_postfix_str(_config_label(config, repeat, repeats))
            keys = {"run": run_index, "config": config_index, "repeat": repeat, "scenario": scenario}
            params = {k: _label(v) for k, v in {**config, **fixed}.items()}
            row: dict[str, Any] = {**keys, **params}
            try:
                call = {**options, **{k: v for k, v in config.items() if k in RUN_OPTIONS}}
                call["topology"] = _topology(call["topology"], topo_cache)
                scen_params = {k: v for k, v in {**fixed, **config}.items() if k not in RUN_OPTIONS}
                result = run(scenario, **call, **scen_params)
            except (KeyboardInterrupt, SystemExit):
                raise
            except Exception as exc:  # an invalid configuration, out of memory, a binding failure with strict
                row.update(status="error", error=f"{type(exc).__name__}: {exc}")
                rows.append(row)
            else:
                if first_params is None:
                    first_params = dict(result.params)
                rows.append(_ok_row(row, result))
                provenances.append(result.provenance)
                if detail:
                    worker_tables.append(_keyed(result.workers, keys, params))
                    lockstat_tables.append(_keyed(result.lockstat, keys, params))
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    ended = _utc_now()

    table = _tidy(rows, grid, fixed)
    meta = _meta(scenario, grid, fixed, repeats, options, configs, table, provenances, first_params)
    meta.update(started=started, ended=ended)
    table.attrs["alloclab"] = meta
    if not detail:
        return table
    return SweepResult(
        runs=table,
        workers=_concat(worker_tables),
        lockstat=_concat(lockstat_tables),
        meta=meta,
    )


# --- helpers -----------------------------------------------------------------------------------------------


def _as_values(name: str, values: Any) -> list[Any]:
    if isinstance(values, (str, bytes, Mapping, Topology)) or not isinstance(values, Iterable):
        return [values]
    out = list(values)
    if not out:
        raise ValueError(f"grid axis {name!r} has no values")
    return out


def _check_names(scenario: str, grid: Mapping[str, Any], fixed: Mapping[str, Any]) -> None:
    table = _scenarios()
    if scenario not in set(table["scenario"]):
        names = ", ".join(sorted(set(table["scenario"])))
        raise ValueError(f"scenario: unknown scenario {scenario!r} (available: {names})")
    known = table.loc[table["scenario"] == scenario, "parameter"].tolist()
    for name in [*grid, *fixed]:
        if name not in known and name not in RUN_OPTIONS:
            raise ValueError(
                f"{name}: not a parameter of scenario {scenario!r} (parameters: {', '.join(known)}; "
                f"run options: {', '.join(RUN_OPTIONS)})"
            )


def _topology(value: Any, cache: dict[str, Topology | None]) -> Topology | None:
    if value is None or isinstance(value, Topology):
        return value
    if isinstance(value, str):
        if value not in cache:
            cache[value] = None if value == "host" else Topology.synthetic(value)
        return cache[value]
    raise ValueError(f"topology: expected a Topology, a synthetic description or 'host', got {value!r}")


def _label(value: Any) -> Any:
    """A table-friendly form of a parameter value (Topology, dict and list values become strings)."""
    if isinstance(value, Topology):
        return value.description
    if isinstance(value, Mapping):
        return ",".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return value


def _config_label(config: Mapping[str, Any], repeat: int, repeats: int) -> str:
    parts = [f"{k}={_label(v)}" for k, v in config.items()]
    parts.append(f"repeat {repeat + 1}/{repeats}")
    return " ".join(parts)


def _ok_row(row: dict[str, Any], result: RunResult) -> dict[str, Any]:
    prov = result.provenance
    row.update(
        status="stopped" if result.stopped else "ok",
        error=result.stop_reason if result.stopped else "",
        oversubscribed=bool(prov.get("oversubscribed", False)),
        n_workers=prov.get("workers", len(result.workers)),
        workers_bound=prov.get("workers_bound"),
    )
    for key, value in result.summary.items():
        row[key if key not in row else f"{key}_result"] = value
    return row


def _keyed(table: pd.DataFrame, keys: Mapping[str, Any], params: Mapping[str, Any]) -> pd.DataFrame:
    front = {k: v for k, v in {**keys, **params}.items() if k not in table.columns}
    out = table.copy()
    for i, (k, v) in enumerate(front.items()):
        out.insert(i, k, [v] * len(out))
    return out


def _concat(tables: list[pd.DataFrame]) -> pd.DataFrame:
    tables = [t for t in tables if len(t)]
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()


def _tidy(rows: list[dict[str, Any]], grid: Mapping[str, Any], fixed: Mapping[str, Any]) -> pd.DataFrame:
    front = [*KEY_COLUMNS, *grid, *fixed, *STATUS_COLUMNS]
    rest: list[str] = []
    for row in rows:
        rest.extend(k for k in row if k not in front and k not in rest)
    table = pd.DataFrame(rows, columns=[*front, *rest])
    table["error"] = table["error"].fillna("").astype(str)
    table["oversubscribed"] = table["oversubscribed"].astype("boolean")
    for col in ("n_workers", "workers_bound"):
        table[col] = pd.to_numeric(table[col]).astype("Int64")
    return table


def _meta(
    scenario: str,
    grid: Mapping[str, Any],
    fixed: Mapping[str, Any],
    repeats: int,
    options: Mapping[str, Any],
    configs: list[dict[str, Any]],
    table: pd.DataFrame,
    provenances: list[dict[str, Any]],
    first_params: dict[str, Any] | None,
) -> dict[str, Any]:
    constant: dict[str, Any] = {}
    varying: dict[str, list[Any]] = {}
    if provenances:
        for key in provenances[0]:
            values = [p.get(key) for p in provenances]
            if key in _PER_RUN_KEYS:
                continue
            if all(v == values[0] for v in values):
                constant[key] = values[0]
            else:
                distinct: list[Any] = []
                for v in values:
                    if v not in distinct:
                        distinct.append(v)
                varying[key] = distinct
    defaults = {
        k: v for k, v in (first_params or {}).items() if k not in grid and k not in fixed and k not in RUN_OPTIONS
    }
    return {
        "kind": "sweep",
        "scenario": scenario,
        "grid": {k: [_json(_label(v)) for v in _as_values(k, vs)] for k, vs in grid.items()},
        "fixed": {k: _json(_label(v)) for k, v in fixed.items()},
        "defaults": {k: _json(v) for k, v in defaults.items()},
        "repeats": repeats,
        "configs": len(configs),
        "runs": len(table),
        "order": "interleaved",
        "options": {k: _json(_label(v)) for k, v in options.items()},
        "status_counts": {str(k): int(v) for k, v in table["status"].value_counts().items()},
        "provenance": {k: _json(v) for k, v in constant.items()},
        "provenance_varying": {k: [_json(x) for x in v] for k, v in varying.items()},
    }


def _json(value: Any) -> Any:
    """Make a value JSON-friendly (numpy scalars -> Python, unknown objects -> str)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "item"):
        try:
            return value.item()
        except (TypeError, ValueError):
            pass
    if isinstance(value, Mapping):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    if isinstance(value, Topology):
        return value.description
    return str(value)


def _progress_bar(total: int, scenario: str, *, enabled: bool):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=scenario, unit="run", dynamic_ncols=True, leave=True)


def _utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
