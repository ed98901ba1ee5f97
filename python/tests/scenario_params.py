"""Small, valid parameter sets for any scenario, from its declaration (the scenario's own ``small`` set, the same
one the C++ sweep over every scenario runs), shared by the property, reproducibility and memory-limit tests, so
that a new scenario is covered without editing them."""

from __future__ import annotations

from typing import Any

import alloclab as al
from alloclab._catalogue import WORKER_PARAMS

__all__ = ["WORKER_PARAMS", "catalogue", "names", "small_params", "specs"]


def catalogue() -> Any:
    return al.scenarios()


def names() -> list[str]:
    return list(dict.fromkeys(catalogue()["scenario"]))


def specs(scenario: str) -> list[dict[str, Any]]:
    table = catalogue()
    return table[table["scenario"] == scenario].to_dict("records")


def small_params(scenario: str, workers: int | None = None) -> dict[str, Any]:
    """The scenario's declared small parameter set; with ``workers``, every worker-count parameter
    (:data:`WORKER_PARAMS`) it has set to that number (within its range)."""
    params = {}
    for spec in specs(scenario):
        name = spec["parameter"]
        if workers is not None and name in WORKER_PARAMS:
            params[name] = min(max(spec["min"], workers), spec["max"])
        elif spec["small"] is not None:
            params[name] = spec["small"]
    return params
