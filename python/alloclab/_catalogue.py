"""What the engine offers: scenarios with their parameters, lock kinds, lock classes."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from . import _core

__all__ = ["WORKER_PARAMS", "did_you_mean", "lock_classes", "lock_kinds", "scenarios"]

#: Parameters that set how many workers a run has: ``threads``; ``regions`` for cma_concurrent (one worker per
#: region); ``multiplier`` for hugetlb_boot (k x nodes helpers). Each scenario has exactly one.
WORKER_PARAMS = ("threads", "regions", "multiplier")


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """The tail of an error message about a mistyped ``name``: ``"; did you mean 'ticket'?"`` with the closest of
    ``candidates`` (the engine's own suggestion, the same as its errors about scenarios, parameters, lock kinds and
    lock classes carry), or ``""`` when none is close."""
    return _core.did_you_mean(str(name), [str(c) for c in candidates])


def scenarios() -> pd.DataFrame:
    """Every scenario and each of its parameters.

    Returns:
        A DataFrame with one row per (scenario, parameter): ``scenario, parameter, type, default, allowed, doc``
        and the scenario's own description in ``scenario_doc``, the kernel version whose code paths and rules it
        runs by default in ``kernel`` (also recorded in every result's ``provenance["kernel"]``), then the declared
        range as data: ``min`` and ``max`` (ints for ``int`` parameters, floats for ``float`` ones, ``None``
        otherwise), ``choices`` (the allowed values of a ``choice`` parameter, else ``None``) and ``small`` (the
        value of the scenario's declared smallest valid run — two workers, under a second — or ``None`` where that
        run keeps the default). Options common to every run (topology, placement, lockstat, locks, strict, seed,
        timeout_s, ...) are documented on :func:`alloclab.run`.
    """
    rows = []
    for s in _core.scenarios():
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
                }
            )
    table = pd.DataFrame(rows)
    for col in ("min", "max", "small"):  # keep ints exact (a float column would round 64-bit bounds)
        table[col] = pd.Series([r[col] for r in rows], dtype=object)
    return table


def _bound(param: dict, key: str) -> int | float | None:
    if param["type"] == "int":
        return int(param[key])
    if param["type"] == "float":
        return float(param[key])
    return None


def lock_kinds() -> pd.DataFrame:
    """The lock primitives a lock class can use: ``kind``, what it does (``doc``), whether waiters are served in
    arrival order (``fifo``), and whether it queues waiters by their node (``numa_aware``: on a model with one node
    such a kind degenerates to its base lock, and a run's ``provenance["lock_notes"]`` says so), and whether it has a
    shared read side (``read_side``: rwsem; on any other kind a down_read takes the lock exclusively)."""
    return pd.DataFrame(_core.lock_kinds(), columns=["kind", "doc", "fifo", "numa_aware", "read_side"])


def lock_classes() -> pd.DataFrame:
    """The lock classes of the models: ``class``, kernel ``nature``, ``default_kind``, and ``where`` it lives."""
    return pd.DataFrame(_core.lock_classes(), columns=["class", "nature", "default_kind", "where"])
