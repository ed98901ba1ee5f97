"""One run of one scenario: :func:`run` and its :class:`RunResult`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from . import _core
from .topology import Topology

__all__ = ["RunResult", "run"]


@dataclass(frozen=True)
class RunResult:
    """What one run hands back.

    Attributes:
        scenario: the scenario's name.
        workers: one row per worker: ``worker, model_pu, model_node, host_pu, host_node, cpu_used, bind_ok,
            bind_error, ops, elapsed_s`` and latency percentiles (``lat_*_ns``), then the scenario's own
            per-worker figures.
        lockstat: one row per lock class that was acquired, with ``/proc/lock_stat``'s columns (times in ns).
        summary: the scenario's headline figures.
        params: every scenario parameter, given or defaulted.
        provenance: topology, placement, binding outcome, oversubscription, lock kinds, seed, clock, version,
            host and time of the run.
        stopped: True when the run was interrupted or timed out (the figures cover the part that ran).
        stop_reason: why it stopped, or "".
    """

    scenario: str
    workers: pd.DataFrame
    lockstat: pd.DataFrame
    summary: pd.Series
    params: dict[str, Any]
    provenance: dict[str, Any]
    stopped: bool = False
    stop_reason: str = ""
    _lockstat_text: str = field(default="", repr=False)

    def lockstat_text(self) -> str:
        """The lock statistics in ``/proc/lock_stat``'s text format (times in microseconds, as the kernel)."""
        return self._lockstat_text

    def __repr__(self) -> str:
        head = f"RunResult({self.scenario!r}, {len(self.workers)} workers"
        if self.provenance.get("oversubscribed"):
            head += ", oversubscribed"
        if self.stopped:
            head += f", stopped: {self.stop_reason}"
        return head + ")\n" + self.summary.to_string()


def run(
    scenario: str,
    topology: Topology | None = None,
    *,
    placement: str | Sequence[int] = "compact",
    lockstat: bool = True,
    locks: Mapping[str, str] | None = None,
    strict: bool = False,
    seed: int = 1,
    timeout_s: float = 0.0,
    **params: Any,
) -> RunResult:
    """Run one scenario once and return its :class:`RunResult`.

    Args:
        scenario: a scenario name; :func:`alloclab.scenarios` lists them with their parameters.
        topology: the model machine (``Topology.synthetic("node:4 core:2 pu:1")``, ``Topology.from_xml(path)``);
            None means the host. Model PUs run on host PUs modulo the host's count; a run with more workers than
            host PUs is *oversubscribed* and says so in ``provenance``.
        placement: ``"compact"`` (fill model PUs in order), ``"scatter"`` (round-robin over model nodes), or an
            explicit list with one model PU per worker.
        lockstat: collect ``/proc/lock_stat``-style statistics (``False`` makes the hooks free).
        locks: lock class -> lock kind overrides, e.g. ``{"zone->lock": "ticket"}``; see :func:`lock_classes`
            and :func:`lock_kinds`.
        strict: make a failure to bind a worker to its CPU an error instead of a recorded ``bind_ok=False``.
        seed: seed of every random choice of the run (each worker draws its own stream from it).
        timeout_s: stop the run after this many seconds (0: no limit); a stopped run says so.
        **params: the scenario's parameters (unknown names or out-of-range values raise ``ValueError``).

    Raises:
        ValueError: a parameter is unknown, of the wrong type or out of range (the message names it).
        KeyboardInterrupt: Ctrl-C; the run is stopped within a second and every worker thread is joined.
    """
    core_topo = None if topology is None else topology._core
    raw = _core.run(
        scenario,
        dict(params),
        core_topo,
        placement if isinstance(placement, str) else list(placement),
        bool(lockstat),
        dict(locks or {}),
        bool(strict),
        int(seed),
        float(timeout_s),
    )
    summary = pd.Series(dict(raw["summary"]), name=scenario, dtype=object)
    summary = summary.infer_objects()
    return RunResult(
        scenario=raw["scenario"],
        workers=pd.DataFrame(raw["workers"]),
        lockstat=pd.DataFrame(raw["lockstat"]),
        summary=summary,
        params=dict(raw["params"]),
        provenance=dict(raw["provenance"]),
        stopped=raw["stopped"],
        stop_reason=raw["stop_reason"],
        _lockstat_text=raw["lockstat_text"],
    )
