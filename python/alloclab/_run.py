"""One run of one scenario: :func:`run` and its :class:`RunResult`."""

from __future__ import annotations

import inspect
import operator
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from . import _core
from ._checks import check_int, is_integer
from .kernel import format_perf_lock
from .machines import Machine
from .machines import machine as load_machine
from .topology import Topology

__all__ = ["RUN_OPTIONS", "MeasurementWarning", "RunResult", "check", "run"]


@dataclass(frozen=True)
class RunResult:
    """What one run hands back.

    Attributes:
        scenario: the scenario's name.
        workers: one row per worker: ``worker, model_pu, model_node, host_pu, host_node, cpu_used, bind_ok,
            bind_error, ops, elapsed_s`` and latency percentiles (``lat_*_ns``); for scenarios that allocate,
            ``allocs_recorded`` and ``alloc_digest`` (an order-sensitive hash of every pfn or vmalloc address the
            worker got: equal digests, same addresses in the same order); then the scenario's own
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

    def lockstat_text(self, format: str = "lock_stat") -> str:
        """The lock statistics as text in a kernel tool's format.

        Args:
            format: ``"lock_stat"``: ``/proc/lock_stat``'s (times in microseconds, as the kernel prints them;
                :func:`alloclab.kernel.read_lockstat` reads it back); ``"perf-lock"``: the default output of
                ``perf lock contention`` (:func:`alloclab.kernel.format_perf_lock`: the lock class where perf names
                the caller, its kind where perf names the lock type).

        Raises:
            ValueError: an unknown ``format``.
        """
        formatters = {"lock_stat": lambda: self._lockstat_text, "perf-lock": lambda: format_perf_lock(self.lockstat)}
        if format not in formatters:
            raise ValueError(f"format: expected one of {', '.join(map(repr, formatters))}, got {format!r}")
        return formatters[format]()

    def summary_lines(self) -> list[str]:
        """The summary lines the kernel's own test prints for the run, in its format.

        For ``vmalloc_stress`` with ``pattern="test_vmalloc"``: what ``lib/test_vmalloc.c`` writes to the kernel log
        when ``test_vmalloc.sh`` loads it, one line per worker and selected test (workers in order, tests in
        ``test_case_array[]`` order), ``Summary: fix_size_alloc_test passed: 1 failed: 0 repeat: 1 loops: 1000000
        avg: 1234 usec``; ``avg`` is the test's time over its repeats divided by ``test_repeat_count`` (the time of
        one call of the test function, not of one loop), in whole microseconds of the run's clock (virtual
        microseconds in a virtual run).

        Raises:
            ValueError: the run's scenario and parameters run no kernel test (its summary has no ``kernel_summary``).
        """
        text = self.summary.get("kernel_summary")
        if not isinstance(text, str):
            raise ValueError(
                f"summary_lines: the {self.scenario} run printed none (allowed: a run of a kernel test's own driver, "
                "vmalloc_stress with pattern='test_vmalloc')"
            )
        return text.splitlines()

    def __repr__(self) -> str:
        head = f"RunResult({self.scenario!r}, {len(self.workers)} workers"
        if self.provenance.get("oversubscribed"):
            head += ", oversubscribed"
        if self.stopped:
            head += f", stopped: {self.stop_reason}"
        return head + ")\n" + self.summary.drop("kernel_summary", errors="ignore").to_string()


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
    min_time_s: float = 0.02,
    grow: bool = False,
    grow_fit: Mapping[str, Any] | None = None,
    exclusive: bool = True,
    clock: str = "real",
    machine: str | os.PathLike | Machine | None = None,
    costs: str | None = None,
    **params: Any,
) -> RunResult:
    """Run one scenario once and return its :class:`RunResult`.

    Args:
        scenario: a scenario name; :func:`alloclab.scenarios` lists them with their parameters.
        topology: the model machine (``Topology.synthetic("node:4 core:2 pu:1")``, ``Topology.from_xml(path)``,
            or a synthetic description string); None or ``"host"`` means the host. Model PUs run on host PUs modulo
            the host's count; a run with more workers than host PUs is *oversubscribed* and says so in
            ``provenance``.
        placement: ``"compact"`` (fill model PUs in order), ``"scatter"`` (round-robin over model nodes), or an
            explicit list with one model PU per worker.
        lockstat: collect ``/proc/lock_stat``-style statistics (``True`` or ``False`` only; ``False`` makes the
            hooks free, and every figure taken from lock_stat is then NaN or None: not measured). In a real-clock
            run timings that compare variants should come from runs without it: its two clock reads sit inside every
            critical section. In a virtual-clock run it costs nothing (it reads the simulator's clock for free): a
            run gives the same virtual times and digests with it as without.
        locks: lock class -> lock kind overrides, e.g. ``{"zone->lock": "ticket"}``; see :func:`lock_classes`
            and :func:`lock_kinds`. A class whose kind a scenario parameter picks (lock_zoo's ``lock``) records the
            override as that parameter's value; the parameter given too, with another kind, is a ``ValueError``
            (``lock="spin", locks={"lock_zoo": "ticket"}``), never a run labelled with one kind that ran the other.
        strict: make a failure to bind a worker to its CPU an error instead of a recorded ``bind_ok=False``.
        seed: seed of every random choice of the run (each worker draws its own stream from it); in a virtual-clock
            run it also draws the workers' start order at the gate, so another seed is another interleaving.
        timeout_s: stop the run after this many seconds (0: no limit), counted from the start of its set-up; a
            stopped run returns normally with ``stopped=True`` and ``stop_reason="timeout after ..."``, its figures
            covering the part that ran (a stop during set-up: no worker figures, ``"..., during set-up (no worker
            ran)"``). The checks and teardown after the workers always complete.
        min_time_s: a run whose elapsed time (the span from the workers' common release to the last worker's end)
            is shorter is flagged ``short_run`` in its summary, with a warning: too short to measure.
        grow: repeat a short run with the scenario's size parameter grown (as Google Benchmark grows iterations
            to reach its ``min_time``) until it lasts ``min_time_s``; ``provenance`` records ``grow_param``,
            ``grown_from``, ``grow_steps`` and ``grow_stopped`` (why it stopped short of ``min_time_s``, or "").
        grow_fit: with ``grow``, parameters over the run's own that the grown size must also fit the host's memory
            with, e.g. ``{"threads": 8}``: the most workers the caller will run at the size this run finds (a pilot
            at one worker sizes a sweep up to eight). A grown size whose run with them would need more than the
            memory available, with a quarter to spare, is cut back a quarter of its step at a time; growth stops
            where no larger size fits (``grow_stopped`` then starts ``grow_fit: memory:``). Parameters that could
            not run at all (more workers than the model's PUs) are a ``ValueError`` before anything runs.
        exclusive: wait until no other run of this process is in flight, and keep others from starting while this
            one runs (the default: two runs on one host disturb each other's timings). ``False`` lets runs from
            several Python threads overlap; each then counts the others' workers towards oversubscription.
        clock: ``"real"`` (the workers are pinned threads timed by the host) or ``"virtual"``: the workers are the
            virtual CPUs of ``machine``, run as fibers on this thread in virtual time (see the README's "Virtual
            time"). A virtual run has the same shape: ``elapsed_s`` and lock_stat times are virtual, every count and
            check is the same, and with ``costs="table"`` it is a pure function of (scenario, parameters, seed,
            machine): identical on every host. It takes no ``topology`` (the profile's is used) and no ``strict``.
        machine: the machine profile of a virtual run: a name from :func:`machines`, a TOML path or a
            :class:`Machine` (required with ``clock="virtual"``, refused otherwise).
        costs: how a virtual run charges the work between sync points: ``"table"`` (default; the profile's
            per-operation costs, deterministic) or ``"measured"`` (the host time the model code took, scaled by the
            clock ratio; not reproducible).
        **params: the scenario's parameters (unknown names or out-of-range values raise ``ValueError``).

    The result's ``summary`` always ends with the measurement's own figures: ``elapsed_s`` (first), and after the
    scenario's figures ``overlap`` (share of the run during which every worker was running), ``start_lag`` (share
    of the run before the last worker started), ``overlap_poor`` (the workers ran together for less than 90 % of
    the run *because of the scheduler*: the last one started more than 10 % into the run, or one waited more than
    10 % of it for a CPU; workers that end apart by design, as behind one mutex, are a result, not a flag),
    ``short_run`` and ``runq_wait_share`` (the largest share of the run a worker spent runnable but waiting for a
    CPU). ``provenance["oversubscribed"]`` says what happened:
    several workers on one host PU, other runs' workers, other runnable tasks on the host, or a worker that waited
    more than 5 % of the run for a CPU (``oversubscribed_why``); the host's load and clock at the start and end
    are there too. A run that is flagged in any of these ways warns (:class:`MeasurementWarning`).

    Raises:
        ValueError: a parameter or option is unknown, of the wrong type or out of range (the message starts with
            its name), or the run needs more memory than is available (the message starts with ``memory:`` and
            gives both figures; nothing was allocated).
        KeyboardInterrupt: Ctrl-C; the run is stopped within a second and every worker thread is joined. Ctrl-C in
            the main thread also stops the runs that other Python threads started (they return ``stopped``).
    """
    raw = _core.run(*_core_args(locals()))  # the first statement: locals() are the arguments, nothing else
    summary = pd.Series(dict(raw["summary"]), name=scenario, dtype=object)
    summary = summary.infer_objects()
    _warn_measurement(scenario, summary, dict(raw["provenance"]), raw["stopped"])
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


#: :func:`run`'s signature, the one declaration of the options and their defaults that :func:`check` takes too.
_RUN_SIGNATURE = inspect.signature(run)

#: The options of :func:`run` (and :func:`check`), as opposed to the scenario's parameters: its arguments after
#: ``scenario``, but for ``**params``.
RUN_OPTIONS = tuple(
    name for name, p in _RUN_SIGNATURE.parameters.items() if name != "scenario" and p.kind is not p.VAR_KEYWORD
)


def check(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """What :func:`run` checks before it builds anything, done by the engine without running: the scenario exists,
    every parameter is declared and fits its type and range, every option is valid (a lock class or kind that does
    not exist, a clock, a machine), and no lock override contradicts the parameter that picks that class's kind
    (``lock="spin"`` with ``locks={"lock_zoo": "ticket"}``). What only building and placing the run finds (memory,
    combinations a scenario refuses, more workers than a virtual machine's CPUs) is left to the run.

    Args: :func:`run`'s, with its defaults (bound to its signature; the same ``TypeError`` for a call that does not
        fit it).

    Returns:
        Every parameter of the scenario, given or defaulted, as the run would record it.

    Raises:
        ValueError: as :func:`run` does for the same arguments (the message names the parameter, the value, what is
            allowed and, for a mistyped name, the closest valid ones).
    """
    call = _RUN_SIGNATURE.bind(*args, **kwargs)
    call.apply_defaults()
    return dict(_core.check_run(*_core_args(call.arguments)))


check.__signature__ = _RUN_SIGNATURE.replace(return_annotation="dict[str, Any]")


def _core_args(arguments: Mapping[str, Any]) -> tuple[Any, ...]:
    """The positional arguments of ``_core.run`` and ``_core.check_run`` (they take the same) from :func:`run`'s
    arguments bound to its signature: ``scenario``, ``params`` and every name of :data:`RUN_OPTIONS`, no other."""
    if arguments.keys() != _RUN_SIGNATURE.parameters.keys():
        raise AssertionError(f"_core_args: {sorted(arguments)} are not run()'s arguments")
    scenario, params = arguments["scenario"], arguments["params"]
    grow_fit = _mapping("grow_fit", arguments["grow_fit"], "parameter -> value, e.g. {'threads': 8}")
    for name, value in params.items():
        _check_int_width(name, value, scenario)
    for name, value in grow_fit.items():
        try:
            _check_int_width(name, value, scenario)
        except ValueError as e:
            raise ValueError(f"grow_fit: {e}") from None
    clock = arguments["clock"]
    return (
        scenario,
        dict(params),
        _core_topology(arguments["topology"]),
        _placement(arguments["placement"]),
        _flag("lockstat", arguments["lockstat"]),
        _mapping("locks", arguments["locks"], "lock class -> lock kind"),
        _flag("strict", arguments["strict"]),
        check_int("seed", arguments["seed"], 0, _INT64[1]),  # the binding takes an int64
        _seconds("timeout_s", arguments["timeout_s"]),
        _seconds("min_time_s", arguments["min_time_s"]),
        _flag("grow", arguments["grow"]),
        grow_fit,
        _flag("exclusive", arguments["exclusive"]),
        clock if isinstance(clock, str) else _bad_choice("clock", clock, "'real' or 'virtual'"),
        _core_machine(arguments["machine"]),
        arguments["costs"],
    )


# --- argument checks the binding cannot word well ------------------------------------------------------------

_INT64 = (-(2**63), 2**63 - 1)


def _check_int_width(name: str, value: Any, scenario: str) -> None:
    """Integers wider than 64 bits would fail inside pybind11 with a RuntimeError; name the parameter instead."""
    if not is_integer(value):
        return
    v = operator.index(value)
    if _INT64[0] <= v <= _INT64[1]:
        return
    allowed = "a 64-bit integer"
    for s in _core.scenarios():
        if s["name"] == scenario:
            allowed = next((p["allowed"] for p in s["params"] if p["name"] == name), allowed)
    raise ValueError(f"{name}: value out of range: {v} (allowed: {allowed})")


def _core_topology(topology: Any) -> Any:
    if topology is None or (isinstance(topology, str) and topology == "host"):
        return None
    if isinstance(topology, str):
        return Topology.synthetic(topology)._core
    if isinstance(topology, Topology):
        return topology._core
    raise ValueError(f"topology: expected a Topology, a synthetic description or None, got {topology!r}")


def _core_machine(machine: Any) -> Any:
    if machine is None:
        return None
    if isinstance(machine, Machine):
        return machine._core
    if isinstance(machine, (str, os.PathLike)):
        return load_machine(machine)._core
    raise ValueError(f"machine: expected a profile name, a TOML path or a Machine, got {machine!r}")


def _bad_choice(name: str, value: Any, allowed: str) -> Any:
    raise ValueError(f"{name}: invalid value {value!r} (allowed: one of {allowed})")


def _placement(placement: Any) -> Any:
    if isinstance(placement, str):
        return placement
    items = None if isinstance(placement, (bytes, Mapping)) or not isinstance(placement, Iterable) else list(placement)
    if items is None or not all(is_integer(p) for p in items):
        raise ValueError(f"placement: expected 'compact', 'scatter' or a list of model PU numbers, got {placement!r}")
    return [operator.index(p) for p in items]


def _mapping(name: str, value: Any, of: str) -> dict[Any, Any]:
    """An optional mapping option (``locks``, ``grow_fit``) as a dict: {} for None; ``of`` says what it maps."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{name}: expected a mapping of {of}, got {value!r}")
    return dict(value)


def _seconds(name: str, value: Any) -> float:
    """A number of seconds as a float (its range is the engine's to check)."""
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name}: expected a number of seconds, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a number of seconds, got {value!r}") from None


def _flag(name: str, value: Any) -> bool:
    """Only a real boolean switches an option: ``lockstat="no"`` is an error, not True."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ValueError(f"{name}: expected True or False, got {value!r}")


class MeasurementWarning(UserWarning):
    """A run's timing cannot be trusted as it stands: its workers did not start together, it was too short to
    measure, or it was oversubscribed (see :func:`run` for each flag)."""


def _warn_measurement(scenario: str, summary: pd.Series, provenance: Mapping[str, Any], stopped: bool) -> None:
    problems = []
    if summary.get("overlap_poor") is True:
        problems.append(
            f"its workers did not run together (overlap {summary['overlap']:.2f}, start_lag {summary['start_lag']:.2f}"
            f", runq_wait_share {summary['runq_wait_share']:.2f})"
        )
    if summary.get("short_run") is True and not stopped:
        problems.append(
            f"it lasted {summary['elapsed_s'] * 1e3:.3g} ms, below min_time_s={provenance.get('min_time_s')}"
        )
    if provenance.get("oversubscribed"):
        problems.append(f"it was oversubscribed ({provenance.get('oversubscribed_why')})")
    if problems:
        warnings.warn(f"{scenario}: " + "; ".join(problems), MeasurementWarning, stacklevel=3)
