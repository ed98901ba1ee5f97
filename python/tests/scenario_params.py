"""Small, valid parameter sets for any scenario, found from its declaration (shared by the property,
reproducibility and memory-limit tests, so that a new scenario is covered without editing them)."""

from __future__ import annotations

import functools
from typing import Any

import alloclab as al

#: Parameters that set how many workers a run has (``threads``; ``regions`` for cma_concurrent, one worker per
#: region; ``multiplier`` for hugetlb_boot, k x nodes helpers).
WORKER_PARAMS = ("threads", "regions", "multiplier")
#: Work amounts and sizes above this are shrunk to it (or to the parameter's minimum) for a quick run.
SMALL_WORK = 64


def catalogue() -> Any:
    return al.scenarios()


def names() -> list[str]:
    return list(dict.fromkeys(catalogue()["scenario"]))


def specs(scenario: str) -> list[dict[str, Any]]:
    table = catalogue()
    return table[table["scenario"] == scenario].to_dict("records")


@functools.cache
def _small(scenario: str, workers: int | None) -> tuple[tuple[str, Any], ...]:
    params: dict[str, Any] = {}
    for spec in specs(scenario):
        if spec["type"] != "int":
            continue
        name, lo, hi, default = spec["parameter"], spec["min"], spec["max"], spec["default"]
        if workers is not None and name in WORKER_PARAMS:
            params[name] = min(max(lo, workers), hi)
        elif default > SMALL_WORK:
            params[name] = min(max(lo, SMALL_WORK), hi)
    # Shrinking one size may make another invalid (a node too small for the blocks asked); give such a parameter
    # its default back, one at a time, until the scenario accepts the set.
    for _ in range(len(params) + 1):
        try:
            al.run(scenario, timeout_s=5.0, **params)
            break
        except ValueError as exc:
            culprit = str(exc).split(":", 1)[0]
            if culprit in params and not (workers is not None and culprit in WORKER_PARAMS):
                del params[culprit]
            elif params:
                shrunk = [n for n in params if not (workers is not None and n in WORKER_PARAMS)]
                if not shrunk:
                    raise
                del params[shrunk[-1]]
            else:
                raise
    return tuple(params.items())


def small_params(scenario: str, workers: int | None = None) -> dict[str, Any]:
    """The scenario's defaults with work amounts and sizes above ``SMALL_WORK`` shrunk (where the scenario accepts
    it) and, with ``workers``, every worker-count parameter (:data:`WORKER_PARAMS`) set to that number."""
    return dict(_small(scenario, workers))
