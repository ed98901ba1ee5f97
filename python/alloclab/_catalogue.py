"""What the engine offers: scenarios with their parameters, what each scenario reports (:func:`metrics`), lock kinds,
lock classes."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from . import _core, _units

__all__ = ["WORKER_PARAMS", "did_you_mean", "human_size", "lock_classes", "lock_kinds", "metrics", "scenarios"]

#: Parameters that set how many workers a run has: ``threads``; ``regions`` for cma_concurrent (one worker per
#: region); ``multiplier`` for hugetlb_boot (k x nodes helpers). Each scenario has exactly one.
WORKER_PARAMS = ("threads", "regions", "multiplier")


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """The tail of an error message about a mistyped ``name``: ``"; did you mean 'ticket'?"`` with the closest of
    ``candidates`` (the engine's own suggestion, the same as its errors about scenarios, parameters, lock kinds and
    lock classes carry), or ``""`` when none is close."""
    return _core.did_you_mean(str(name), [str(c) for c in candidates])


def scenarios(names: str | Iterable[str] | None = None) -> pd.DataFrame:
    """Every scenario (or the ones named) and each of its parameters.

    Args:
        names: a scenario name or a list of them (``al.scenarios("lock_zoo")``); None: every scenario.

    Returns:
        A DataFrame with one row per (scenario, parameter): ``scenario, parameter, type, default, allowed, doc``
        and the scenario's own description in ``scenario_doc``, the kernel version whose code paths and rules it
        runs by default in ``kernel`` (also recorded in every result's ``provenance["kernel"]``), then the declared
        range as data: ``min`` and ``max`` (ints for ``int`` parameters, floats for ``float`` ones, ``None``
        otherwise), ``choices`` (the allowed values of a ``choice`` parameter, else ``None``), ``small`` (the
        value of the scenario's declared smallest valid run — two workers, under a second — or ``None`` where that
        run keeps the default) and ``size_unit`` (``"bytes"``, ``"KiB"``, ``"MiB"`` or ``"pages"`` for a parameter
        that is a size, else ``None``; :func:`human_size` reads it). Options common to every run (topology,
        placement, lockstat, locks, strict, seed, timeout_s, ...) are documented on :func:`alloclab.run`.

    Raises:
        ValueError: a name that is no scenario (the message lists them and names the closest).
    """
    rows = []
    for s in _selected(names):
        for p in s["params"]:
            rows.append(
                {
                    "scenario": s["name"],
                    "parameter": p["name"],
                    "type": p["type"],
                    "default": p["default"],
                    "allowed": p["allowed"],
                    "doc": p["doc"],
                    "scenario_doc": s["doc"],
                    "kernel": s["kernel"],
                    "min": _bound(p, "min"),
                    "max": _bound(p, "max"),
                    "choices": list(p["choices"]) if p["type"] == "choice" else None,
                    "small": s["small"].get(p["name"]),
                    "size_unit": _units.PARAMETER_SIZES.get((s["name"], p["name"])),
                }
            )
    table = pd.DataFrame(rows)
    # Keep ints exact (a float column would round 64-bit bounds) and None as None (not NaN).
    for col in ("min", "max", "small", "size_unit"):
        table[col] = pd.Series([r[col] for r in rows], dtype=object)
    return table


def _selected(names: str | Iterable[str] | None) -> list[dict]:
    """The engine's scenario declarations named by ``names`` (all for None), in the order asked."""
    every = {s["name"]: s for s in _core.scenarios()}
    if names is None:
        return list(every.values())
    asked = [names] if isinstance(names, str) else list(names)
    for name in asked:
        if name not in every:
            raise ValueError(
                f"names: unknown scenario {name!r} (available: {', '.join(every)})" + did_you_mean(name, every)
            )
    return [every[n] for n in dict.fromkeys(asked)]


def metrics(names: str | Iterable[str] | None = None) -> pd.DataFrame:
    """What each scenario (or the ones named) reports: every summary figure and every per-worker figure.

    Args:
        names: a scenario name or a list of them (``al.metrics("lock_zoo")``); None: every scenario.

    Returns:
        A DataFrame with one row per (scenario, level, metric): ``scenario``,
        ``level`` (``"summary"``: a key of :attr:`alloclab.RunResult.summary` and a column of a sweep's table;
        ``"worker"``: a column of :attr:`alloclab.RunResult.workers`), ``metric`` (``completion_s_<i>`` stands for
        ``completion_s_1``, ``completion_s_2``, ...), ``unit`` (``s``, ``ns``, ``count``, ``pages``, ``1/s``,
        ``ratio``, ``share``, ``bool``, ``text``, ...) and ``meaning`` (e.g. ``fairness_max_min``, ``ratio``: max/min
        of the per-worker acquisitions while all were running, 1 = fair). Some figures appear only in some runs (the
        meaning says when: ``gigantic=True``, ``stress_ng_pthread``, a pool that ran out).

    Raises:
        ValueError: a name that is no scenario (the message lists them and names the closest).
    """
    columns = dict(_core.worker_columns())
    counters = {k: list(v) for k, v in _core.counters().items()}
    rows = []
    for s in _selected(names):
        name = s["name"]
        summary = [*_units.RUN_FIRST, *_units.SUMMARY[name]]
        worker = [(c, _units.WORKER_COLUMN_UNITS[c], doc) for c, doc in columns.items()]
        if name in _units.RECORDS_NO_ALLOCS:
            worker = [w for w in worker if w[0] not in _units.ALLOC_COLUMNS]
        own = {m[0] for m in _units.WORKER[name]}  # a figure of the scenario's own replaces a column of that name
        worker = [w for w in worker if w[0] not in own] + list(_units.WORKER[name])
        struct, where = _units.COUNTERS.get(name, ("", ()))
        emitted = [(c, "count", doc) for c, doc in counters.get(struct, [])]
        summary += emitted if "summary" in where else []
        worker += emitted if "worker" in where else []
        summary += [*_units.lock_count_metrics(name), *_units.RUN_LAST]
        rows += [(name, "summary", *m) for m in summary] + [(name, "worker", *m) for m in worker]
    return pd.DataFrame(rows, columns=["scenario", "level", "metric", "unit", "meaning"])


def human_size(value: int | float, unit: str) -> str:
    """A size given in ``unit`` (a key of the size units: ``"bytes"``, ``"KiB"``, ``"MiB"``, ``"pages"`` of 4 KiB)
    in binary units with at most four significant digits: ``human_size(2**45, "bytes") == "32 TiB"``,
    ``human_size(131072, "pages") == "512 MiB"``.

    Raises:
        ValueError: an unknown ``unit``.
    """
    if unit not in _units.SIZE_UNITS:
        raise ValueError(f"unit: expected one of {', '.join(map(repr, _units.SIZE_UNITS))}, got {unit!r}")
    size = float(value) * _units.SIZE_UNITS[unit]
    for prefix in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024:
            return f"{size:.4g} {prefix}"
        size /= 1024
    return f"{size:.4g} PiB"


def _bound(param: dict, key: str) -> int | float | None:
    if param["type"] == "int":
        return int(param[key])
    if param["type"] == "float":
        return float(param[key])
    return None


def lock_kinds() -> pd.DataFrame:
    """The lock primitives a lock class can use: ``kind``, what it does (``doc``), whether waiters are served in
    arrival order (``fifo``), and whether it queues waiters by their node (``numa_aware``: on a model with one node
    such a kind degenerates to its ``base`` lock, the kind named there, empty for the others, and a run's
    ``provenance["lock_notes"]`` says so), whether it has a shared read side (``read_side``: rwsem; on any other
    kind a down_read takes the lock exclusively), and what its uncontended acquisition and release do to memory,
    counted from its code: locked read-modify-writes (``lock_rmws``, ``unlock_rmws``) and plain loads and stores of
    the lines it owns (``lock_accesses``, ``unlock_accesses``). Virtual time charges each side its RMWs at the
    profile's ``atomic_rmw``, or its accesses at ``line_access`` where those take longer: the accesses run in the
    RMWs' shadow."""
    return pd.DataFrame(
        _core.lock_kinds(),
        columns=[
            "kind",
            "doc",
            "fifo",
            "numa_aware",
            "base",
            "read_side",
            "lock_rmws",
            "lock_accesses",
            "unlock_rmws",
            "unlock_accesses",
        ],
    )


def lock_classes() -> pd.DataFrame:
    """The lock classes of the models: ``class``, kernel ``nature``, ``default_kind``, and ``where`` it lives."""
    return pd.DataFrame(_core.lock_classes(), columns=["class", "nature", "default_kind", "where"])
