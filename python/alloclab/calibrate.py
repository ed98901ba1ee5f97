"""``alloclab calibrate``: measure the machine this process runs on and write a schema-1 machine profile.

The measurements are the engine's (``_core.calibration``; methods in ``cpp/include/alloclab/lab/calibrate.hpp``). This
module picks the PUs and sizes, converts the results to the profile's units, and gives every number a source that
says ``calibrated on <cpu model> with alloclab calibrate on <date>`` and how the number was measured. Measure on a
quiet machine: the load average before and after goes into the description.

One calibration runs the whole set of measurements ``repeats`` times, interleaved (run 1 of every kind, then run 2 of
every kind, ...), so that a slow spell of the host falls on all kinds alike; each number is the median of its runs,
and its source gives the interquartile range and the range. Numbers whose IQR exceeds 25 % of the median are named
in the description. What it leaves out: it does not detect or discard outlier runs, and it cannot tell a noisy host
from a bimodal one (both show as a wide spread).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import statistics
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from . import _core
from ._checks import check_int
from .machines import UNITS, profile_fields

__all__ = [
    "REPEATS",
    "REPEATS_RANGE",
    "WIDE_SPREAD",
    "Spread",
    "calibrate",
    "calibrate_with_spread",
    "host_transfers",
    "to_toml",
]

_MIB = 1 << 20

# Measurement sizes: (full, quick). Quick mode checks the tool, not the machine.
_SIZES = {
    "pairs_per_class": (4, 1),
    "transfer_samples": (1000, 20),
    "round_trips": (1000, 50),
    "futex_samples": (2000, 20),
    "futex_sleep_us": (200, 50),
    "bandwidth_trials": (5, 1),
    "mlp_trials": (5, 1),
    "mlp_misses": (100_000, 5_000),
    "clock_trials": (5, 1),
    "op_trials": (11, 2),
    "ops": (1_000_000, 10_000),
}

#: Runs of the whole set of measurements: (full, quick). One full run took 6.4 s on the 2-vCPU dev VM at load
#: average 8.6 (2026-12-01), so the default full calibration takes about a minute; quick mode runs twice, so that its
#: profile has a median and a spread like a full one.
REPEATS = (9, 2)
#: The allowed ``repeats``: one run (no spread) up to 50, about five minutes on the dev VM.
REPEATS_RANGE = (1, 50)
#: A number whose IQR exceeds this fraction of its median is named in the description: as wide as the +-25 % band
#: in which virtual_vs_real accepts a virtual time, so such a number cannot carry that claim.
WIDE_SPREAD = 0.25
#: A number's spread across the runs: its first quartile, median and third quartile.
Spread = tuple[float, float, float]
#: One round's measurements: ``{"section.field": (value, how it was measured)}``.
_Results = dict[str, tuple[float, str]]


def calibrate(
    *,
    quick: bool = False,
    repeats: int | None = None,
    name: str = "host",
    description: str | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Measure this host and return its profile as a TOML-ready dict (already validated by the engine).

    Args:
        quick: tiny measurements that finish in about a second. Their numbers are not meaningful, and the
            description says so.
        repeats: runs of the whole set of measurements, interleaved (``None``: :data:`REPEATS` of the mode). Each
            number is the median of its runs; its source names the runs and gives their IQR and range.
        name: the profile's name.
        description: what the machine is (e.g. ``"2-vCPU VM, ..."``). The CPU model, the load averages, the runs,
            the numbers with a wide spread and the mode are appended.
        log: called with one line per finished measurement (e.g. ``print``).

    Raises:
        ValueError: ``repeats`` is not an integer in :data:`REPEATS_RANGE`, the host cannot be measured (one PU
            only) or the result is not a valid profile.
        RuntimeError: a measurement thread could not be pinned to its PU.
    """
    return calibrate_with_spread(quick=quick, repeats=repeats, name=name, description=description, log=log)[0]


def calibrate_with_spread(
    *,
    quick: bool = False,
    repeats: int | None = None,
    name: str = "host",
    description: str | None = None,
    log: Callable[[str], None] | None = None,
) -> tuple[dict[str, Any], dict[str, Spread]]:
    """:func:`calibrate` (the same arguments, errors and profile), and the numbers whose IQR exceeds
    :data:`WIDE_SPREAD` of their median, ``{"section.field": (q1, median, q3)}``: what the description names, for
    a caller that must know which numbers cannot carry a claim (an empty dict with ``repeats=1``)."""
    runs = check_int("repeats", REPEATS[1 if quick else 0] if repeats is None else repeats, *REPEATS_RANGE)
    cpu = _cpu_model()
    when = dt.datetime.now(dt.UTC).date().isoformat()
    run = _Run(quick, f"calibrated on {cpu} with alloclab calibrate on {when}", log)
    load_before, busy_before = os.getloadavg()[0], _other_runnable()
    topology = _core.calibration.host_synthetic()
    pairs = _core.calibration.host_transfer_pairs(run.size("pairs_per_class"))
    if not pairs:
        raise ValueError("calibrate: this host has a single PU; transfers and wake-ups need two")
    pu0 = pairs[0][1][0][0]

    rounds = []
    for i in range(runs):  # interleaved: every kind once per round, so a slow spell hits all kinds alike
        run.round = f"run {i + 1}/{runs}: " if runs > 1 else ""
        rounds.append(_measure_all(run, pairs, pu0))
    doc, wide = _aggregate(run, rounds)
    load_after, busy_after = os.getloadavg()[0], _other_runnable()

    host = _core.Topology.host()
    about = f"{description}. " if description else ""
    header = {
        "schema": 1,
        "name": name,
        "description": (
            f"{about}Calibrated with alloclab calibrate on {when}: {cpu}, {host.pus} PUs, {host.cores} cores, "
            f"{host.nodes} NUMA node(s); 1-minute load average {load_before:.2f} before and {load_after:.2f} after, "
            f"other runnable tasks {busy_before} before and {busy_after} after; {_spread_summary(runs, wide)}"
            + (". QUICK MODE: the numbers check the tool, they do not describe the machine" if quick else "")
        ),
        "seeds": [],
        "topology": topology,
        "topology_source": f"hwloc's view of this host when calibrated on {when} ({cpu})",
    }
    doc = header | doc
    _core.MachineProfile(*profile_fields(doc))  # the engine's checks, before anything is written
    return doc, wide


def to_toml(doc: dict[str, Any]) -> str:
    """Write a profile dict (as :func:`calibrate` returns it) as schema-1 TOML.

    Strings are written as JSON strings, which are valid TOML basic strings. Each number is written as an inline
    table ``{ value = ..., source = "..." }`` under its section.
    """
    lines = []
    for key, value in doc.items():
        if not isinstance(value, dict):
            lines.append(f"{key} = {_toml_scalar(value)}")
    for section, table in doc.items():
        if isinstance(table, dict):
            lines += ["", f"[{section}]"]
            for field, entry in table.items():
                inner = ", ".join(f"{k} = {_toml_scalar(v)}" for k, v in entry.items())
                lines.append(f"{field} = {{ {inner} }}")
    return "\n".join(lines) + "\n"


class _Run:
    """One calibration: its mode, the prefix of every source string, and where progress lines go."""

    def __init__(self, quick: bool, stamp: str, log: Callable[[str], None] | None):
        self.quick = quick
        self.stamp = stamp + (" (QUICK MODE: not a measurement)" if quick else "")
        self.log = log
        self.round = ""  # "run i/N: " while the rounds run, prefixed to progress lines

    def size(self, key: str) -> int:
        """A measurement size of this mode (see ``_SIZES``)."""
        return _SIZES[key][1 if self.quick else 0]

    def result(self, value: float, how: str, shown: str) -> tuple[float, str]:
        """One measured number of one round and how it was measured; logs ``shown``."""
        if self.log:
            self.log(self.round + shown)
        return value, how


def _measure_all(run: _Run, pairs: list[tuple[str, list[tuple[int, int]]]], pu: int) -> _Results:
    """One round: every measurement once, in profile order; ``{"section.field": (value, how)}``. The op cycles use
    this round's clock."""
    out = _clock(run, pu)
    out |= _transfers(run, pairs)
    out |= _wakeup(run, *_wake_pair(pairs))
    out |= _bandwidth(run, pu)
    out |= _misses_in_flight(run, pu)
    out |= _page_ns(run, pu)
    out |= _op_cycles(run, pu, out["clock.ghz"][0])
    return out


def _aggregate(run: _Run, rounds: list[_Results]) -> tuple[dict[str, Any], dict[str, Spread]]:
    """The profile sections from the rounds: each number the median of its runs, its source ``how`` and the spread;
    also the numbers whose IQR exceeds :data:`WIDE_SPREAD` of the median, with their quartiles."""
    doc: dict[str, dict[str, Any]] = {}
    wide: dict[str, Spread] = {}
    for key, (_, how) in rounds[0].items():
        section, field = key.split(".")
        values = [r[key][0] for r in rounds]
        median = statistics.median(values)
        unit = UNITS[section]
        if len(values) == 1:
            spread = "one run (repeats=1: no spread measured)"
        else:
            q1, q3 = np.percentile(values, [25, 75])
            spread = (
                f"median of {len(values)} interleaved runs of the whole calibration, IQR {_num(q1)}-{_num(q3)} {unit}, "
                f"range {_num(min(values))}-{_num(max(values))} {unit}"
            )
            if median > 0 and (q3 - q1) / median > WIDE_SPREAD:
                wide[key] = (float(q1), float(median), float(q3))
        if run.log and len(values) > 1:
            run.log(f"{key}: {_num(median)} {unit} ({spread})")
        value = float(median if section in _REPORTED else _num(median))
        doc.setdefault(section, {})[field] = {"value": value, "source": f"{run.stamp}: {how}; {spread}"}
    return doc, wide


def _spread_summary(runs: int, wide: dict[str, Spread]) -> str:
    """The description's sentence on the runs and the numbers whose spread is wide."""
    if runs == 1:
        return "one run of every measurement (repeats=1), so no spread was measured"
    band = f"IQR above {100 * WIDE_SPREAD:.0f} % of the median"
    return f"each number the median of {runs} interleaved runs of every measurement; " + (
        f"WIDE SPREAD ({band}): {', '.join(f'{k} ({100 * (q3 - q1) / m:.0f} %)' for k, (q1, m, q3) in wide.items())}"
        if wide
        else f"no number has an {band}"
    )


#: Sections of sizes the host reports (hwloc), not measures: written whole (1024 KiB, not 1020).
_REPORTED = {"cache_kib", "cache_mib"}


def _num(value: float) -> str:
    """A number to 3 significant digits, without an exponent below 10^6 (15700, 53.8, 0.684)."""
    return f"{float(f'{value:.3g}'):g}"


def _clock(run: _Run, pu: int) -> _Results:
    trials = run.size("clock_trials")
    ghz = _core.calibration.core_ghz(pu, trials)
    mhz = _cpuinfo_mhz()
    if ghz > 0:
        how = f"a chain of dependent 64-bit register-to-register adds on PU {pu}, median of {trials} trials"
        how += f" (/proc/cpuinfo: {mhz:g} MHz)" if mhz else ""
    elif mhz:
        ghz, how = mhz / 1000, "/proc/cpuinfo 'cpu MHz' (no add-chain measurement on this architecture)"
    else:
        raise ValueError("calibrate: cannot tell this host's clock (no add-chain measurement, no /proc/cpuinfo MHz)")
    return {"clock.ghz": run.result(ghz, how, f"clock: {ghz:.3f} GHz")}


def host_transfers() -> dict[str, float]:
    """One measurement of this host's line-transfer latency per distance class, taken as a full :func:`calibrate`
    takes it (the same PU pairs, samples and round trips): ``{"transfer_ns.<class>": ns}``. For a caller that must
    know whether the host still matches its profile (a VM's vCPUs may change places between runs)."""
    run = _Run(False, "", None)
    pairs = _core.calibration.host_transfer_pairs(run.size("pairs_per_class"))
    return {key: ns for key, (ns, _) in _transfers(run, pairs).items()}


def _transfers(run: _Run, pairs: list[tuple[str, list[tuple[int, int]]]]) -> _Results:
    samples, trips = run.size("transfer_samples"), run.size("round_trips")
    out = {}
    for cls, cls_pairs in pairs:
        ns = statistics.median(_core.calibration.transfer_ns(a, b, samples, trips) for a, b in cls_pairs)
        where = ", ".join(f"{a}-{b}" for a, b in cls_pairs)
        how = (
            f"CAS ping-pong on one cache line between pinned PUs {where} (ccbench / core-to-core-latency method, "
            f"one way = round trip / 2), median of {samples} samples of {trips} round trips"
            + (f", median over {len(cls_pairs)} PU pairs" if len(cls_pairs) > 1 else "")
        )
        out[f"transfer_ns.{cls}"] = run.result(ns, how, f"transfer_ns.{cls}: {ns:.1f} ns (PUs {where})")
    return out


def _wakeup(run: _Run, waker: int, wakee: int) -> _Results:
    samples, sleep_us = run.size("futex_samples"), run.size("futex_sleep_us")
    ns = _core.calibration.futex_wake_ns(waker, wakee, samples, sleep_us)
    how = (
        f"FUTEX_WAKE on PU {waker} until the FUTEX_WAIT sleeper pinned on PU {wakee} runs again, median of "
        f"{samples} wake-ups {sleep_us} us apart"
    )
    return {"wakeup_ns.futex": run.result(ns, how, f"wakeup_ns.futex: {ns:.0f} ns")}


#: The stream patterns of ``bandwidth_gbs`` (its key suffix -> the engine's pattern, what it does, and how many
#: buffers of :func:`_buffer_bytes` each thread streams over): a copy reads one and writes the other, an update, a load
#: or a store streams over one of twice the size (the same memory in all).
_STREAMS = {
    "": ("copy", "memcpy of one buffer into another, bytes read + bytes written (as likwid-bench 'copy')", 2),
    "_update": (
        "update",
        "one add into every 64-byte line of one buffer (each line read, then written back in place, as a pass "
        "writing struct pages), bytes read + bytes written (as likwid-bench 'update')",
        1,
    ),
    "_load": (
        "load",
        "one load from every 64-byte line of one buffer (a read-only stream, as a pass reading struct pages), bytes "
        "read (as likwid-bench 'load')",
        1,
    ),
    "_store": (
        "store",
        "one store into every 64-byte line of one buffer, never read by the core (as a pass initialising struct "
        "pages), bytes read for ownership + bytes written (2 x the bytes stored, counted as a copy)",
        1,
    ),
}


def _bandwidth(run: _Run, pu: int) -> _Results:
    calib, trials = _core.calibration, run.size("bandwidth_trials")
    llc = calib.host_llc_bytes()
    llc_text = f"the LLC is {llc // _MIB} MiB" if llc else "no cache size reported"
    nodes = [p for p in map(calib.node_core_pus, range(1 if run.quick else _core.Topology.host().nodes)) if p]
    out: _Results = {}
    for suffix, (kind, what, buffers) in _STREAMS.items():
        # Each thread's buffers together: the two of a copy, one of twice the size for an update.
        per_node = []
        for pus in nodes:
            node_bytes = _buffer_bytes(llc, len(pus), run.quick) * 2 // buffers
            per_node.append(calib.bandwidth_gbs(kind, pus, node_bytes, trials))
        core_bytes = _buffer_bytes(llc, 1, run.quick) * 2 // buffers
        core = calib.bandwidth_gbs(kind, [pu], core_bytes, trials)
        node = statistics.median(per_node)
        how = f"{what}, best of {trials}"
        node_how = (
            f"{how}; one thread per core of the node ({len(nodes[-1])} threads), {buffers} x "
            f"{node_bytes // _MIB} MiB per thread ({llc_text})"
            + (f", median over the host's {len(per_node)} nodes" if len(per_node) > 1 else "")
        )
        core_how = f"{how}; one thread on PU {pu}, {buffers} x {core_bytes // _MIB} MiB ({llc_text})"
        node_key, core_key = f"bandwidth_gbs.node{suffix}", f"bandwidth_gbs.core{suffix}"
        out[node_key] = run.result(node, node_how, f"{node_key}: {node:.1f} GB/s")
        out[core_key] = run.result(core, core_how, f"{core_key}: {core:.1f} GB/s")
    return out


def _misses_in_flight(run: _Run, pu: int) -> _Results:
    trials, misses = run.size("mlp_trials"), run.size("mlp_misses")
    size = _buffer_bytes(_core.calibration.host_llc_bytes(), 1, run.quick)
    lines, latency, best_k = _core.calibration.misses_in_flight(pu, size, trials, misses)
    how = (
        f"K independent random pointer chases interleaved in one loop over {size // _MIB} MiB first touched on PU {pu} "
        f"(one random cycle through every 64-byte line, the K chases evenly spaced along it), {misses} misses per K; "
        f"misses in flight = K x latency / time per step (Little's law), max over K = 1..32 (in the first run: best "
        f"K = {best_k}, latency {latency:.0f} ns); median of {trials} trials on PU {pu}"
    )
    shown = f"misses_in_flight.core: {lines:.1f} lines (best K = {best_k}, latency {latency:.0f} ns)"
    out = {"misses_in_flight.core": run.result(lines, how, shown)}
    # The host's caches and the trip back of a line that has left each (cost_model.hpp, cache capacity).
    if llc := _core.calibration.host_llc_bytes():
        levels = _private_levels(llc)
        for level in levels:
            how = f"the size of one {level.name.upper()} cache of this host as hwloc reports it"
            out[level.size_field] = run.result(
                level.bytes / 1024, how, f"{level.size_field}: {level.bytes // 1024} KiB"
            )
        llc_how = f"the size of one last-level cache of this host as hwloc reports it ({llc // 1024} KiB)"
        out["cache_mib.llc"] = run.result(llc / _MIB, llc_how, f"cache_mib.llc: {llc / _MIB:g} MiB")
        # A line that has left a level is found in the next one: a chase that fits the next one and not this one.
        for level in levels:
            chase = _CHASE_OVER * level.bytes
            _, ns, _ = _core.calibration.misses_in_flight(pu, chase, trials, misses)
            how = (
                f"one random pointer chase (each load depends on the one before) over {chase // 1024} KiB "
                f"({_CHASE_OVER} x {level.size_field}) first touched on PU {pu}, {misses} loads: the time per step; "
                f"median of {trials} trials on PU {pu} (the K = 1 run of chases as misses_in_flight.core's)"
            )
            out[level.latency_field] = run.result(ns, how, f"{level.latency_field}: {ns:.1f} ns")
    dram_how = (
        f"one random pointer chase (each load depends on the one before) over {size // _MIB} MiB first touched on PU "
        f"{pu}, on huge pages where the host gives them, {misses} misses: the time per step; median of {trials} "
        f"trials on PU {pu} (the K = 1 run of misses_in_flight.core)"
    )
    out["dram_ns.local"] = run.result(latency, dram_how, f"dram_ns.local: {latency:.0f} ns")
    return out


#: The private levels' latencies are chases over this many times the level above: well out of it, well in the next.
_CHASE_OVER = 4


class _Level(NamedTuple):
    """A private cache level of the host: its name, its size, and the profile's fields for them."""

    name: str  # "l1d"
    bytes: int
    size_field: str  # "cache_kib.l1d"
    latency_field: str  # "cache_ns.l2": the latency of a line that has left it


def _private_levels(llc: int) -> list[_Level]:
    """The host's private cache levels (the engine's list, ``_core.private_cache_levels()``: L1D, L2), while each is a
    private level: a chase over :data:`_CHASE_OVER` times it fits in half of the level below (else that level and
    those after it are left out, as on a host whose L2 is its LLC)."""
    calib, out = _core.calibration, []
    for name, level, below, size_field, latency_field in _core.private_cache_levels():
        size = calib.host_cache_bytes(level)
        below_bytes = llc if below == "llc" else calib.host_cache_bytes(level + 1)
        if not size or _CHASE_OVER * size > below_bytes // 2:
            break
        out.append(_Level(name, size, size_field, latency_field))
    return out


def _page_ns(run: _Run, pu: int) -> _Results:
    trials = run.size("bandwidth_trials")
    size = _buffer_bytes(_core.calibration.host_llc_bytes(), 1, run.quick)
    out = {}
    orders = {
        "": "taken in a fixed random order, so each page is cold and no prefetcher runs into the next",
        "_ascending": "taken in ascending order, each the next page after the one before, on both sides of a copy",
    }
    for op, what in (("copy", "memcpy of one page to another"), ("clear", "memset of one page to zero")):
        for suffix, order in orders.items():
            ns = _core.calibration.page_op_ns(op, pu, size, trials, ascending=bool(suffix))
            how = (
                f"{what} (copy_page / clear_page), the 4 KiB pages of 2 x {size // _MIB} MiB first touched on PU "
                f"{pu} {order}; median of {trials} passes over every page"
            )
            out[f"page_ns.{op}{suffix}"] = run.result(ns, how, f"page_ns.{op}{suffix}: {ns:.0f} ns")
    return out


def _op_cycles(run: _Run, pu: int, ghz: float) -> _Results:
    trials, ops = run.size("op_trials"), run.size("ops")
    out = {}
    for op, ns in _core.calibration.op_ns(pu, trials, ops):
        how = f"ns x the same run's clock.ghz; {_OP_HOW[op]}, median of {trials} trials of {ops} operations on PU {pu}"
        out[f"op_cycles.{op}"] = run.result(ns * ghz, how, f"op_cycles.{op}: {ns * ghz:.3g} cycles ({ns:.3g} ns)")
    return out


# What each op_cycles microbenchmark does (calibrate.cpp has the details): one entry per op of the engine's list
# (_core.op_names(), ALLOCLAB_OPS in machine_profile.hpp); test_calibrate.py checks that they match.
_OP_HOW = {
    "atomic_rmw": "lock-prefixed fetch_add on an L1-resident line",
    "line_access": "dependent loads around a random cycle of 256 cache lines (16 KiB, L1)",
    "list_op": "list_move_tail on a 64-entry ListHead list (vmalloc/list.hpp), counted as list_del + list_add_tail",
    "tree_step": "per level of lookups of random keys in a 1024-node rbtree (vmalloc/rbtree.hpp RbNode)",
    "bitmap_word": "per word of find_next_bit over a 512-word bitmap with one bit every 64 words",
    "page_init": "__init_single_page (memset + flags + refcount + mapcount) on a 64-byte struct page in L1",
    "pause": "per PAUSE of back-to-back PAUSE instructions (cpu_pause(), the spin-wait hint of a spin loop)",
    "clock_read": "per read of back-to-back reads of the clock (RDTSC where the TSC is invariant, as clock_ticks())",
}


def _toml_scalar(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_scalar(v) for v in value) + "]"
    return repr(value)


def _buffer_bytes(llc: int, threads: int, quick: bool) -> int:
    """Bytes per buffer so that all threads' sources and destinations together cover at least 4 x the LLC."""
    if quick:
        return 4 * _MIB
    per_thread = max(4 * llc // (2 * threads), 32 * _MIB)
    return -(-per_thread // _MIB) * _MIB


def _wake_pair(pairs: list[tuple[str, list[tuple[int, int]]]]) -> tuple[int, int]:
    """The nearest pair of PUs on different cores (SMT siblings only when the host has nothing else)."""
    for cls, cls_pairs in pairs:
        if cls != "same_core":
            return cls_pairs[0]
    return pairs[0][1][0]


def _other_runnable() -> int | str:
    """Runnable tasks on the host besides this one (/proc/stat procs_running - 1), or "unknown"."""
    try:
        with open("/proc/stat", encoding="utf-8") as f:
            for line in f:
                if line.startswith("procs_running"):
                    return max(0, int(line.split()[1]) - 1)
    except OSError:
        pass
    return "unknown"


def _cpuinfo() -> list[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return f.read().splitlines()
    except OSError:
        return []


def _cpu_model() -> str:
    for line in _cpuinfo():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return os.uname().machine


def _cpuinfo_mhz() -> float | None:
    for line in _cpuinfo():
        if line.startswith("cpu MHz"):
            return float(line.split(":", 1)[1])
    return None
