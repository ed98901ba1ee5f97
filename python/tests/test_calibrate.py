"""``alloclab calibrate``: a quick run writes a profile that loads back (only its structure is asserted); with the
engine's measurements replaced by fixed values per run, the repeats are interleaved, each number is their median and
its source and the description state the spread."""

from __future__ import annotations

import tomllib

import pytest
from test_cli import alloclab

import alloclab as al
from alloclab import _core
from alloclab.calibrate import _OP_HOW, _SIZES, REPEATS, _private_levels, calibrate, calibrate_with_spread, to_toml

OPS = set(_core.op_names())  # the engine's op list (ALLOCLAB_OPS); test_machines.py pins it

# A line transfer and a wake-up need two PUs: a single-PU host cannot be calibrated (and says so).
pytestmark = pytest.mark.skipif(al.Topology.host().pus < 2, reason="calibration needs at least two host PUs")


def test_calibrate_quick_writes_a_profile_that_loads_back(tmp_path):
    out = tmp_path / "x.toml"
    run = alloclab("calibrate", "--quick", "--out", str(out), "--name", "here", "--description", "a test box")
    assert run.returncode == 0, run.stderr
    assert f"wrote {out}" in run.stderr
    m = al.machine(out)
    host = al.Topology.host()
    assert m.name == "here"
    assert m.seeds == []
    assert m.description.startswith("a test box. Calibrated with alloclab calibrate on ")
    assert "QUICK MODE" in m.description and "load average" in m.description
    assert (m.topology.pus, m.topology.cores, m.topology.nodes) == (host.pus, host.cores, host.nodes)
    values = m.values
    assert {k.split(".")[1] for k in values if k.startswith("op_cycles.")} == OPS
    assert {k.split(".")[1] for k in values if k.startswith("transfer_ns.")} == set(m.classes)
    assert {"clock.ghz", "wakeup_ns.futex", "bandwidth_gbs.node", "bandwidth_gbs.core"} <= set(values)
    assert {"page_ns.copy", "page_ns.clear", "page_ns.copy_ascending", "page_ns.clear_ascending"} <= set(values)
    assert "misses_in_flight.core" in values
    assert values["misses_in_flight.core"] >= 1
    for source in m.fields["source"]:
        assert source.startswith("calibrated on ") and " with alloclab calibrate on " in source
        assert f"median of {REPEATS[1]} interleaved runs of the whole calibration, IQR " in source


def test_calibrate_prints_the_profile_without_out():
    run = alloclab("calibrate", "--quick")
    assert run.returncode == 0, run.stderr
    doc = tomllib.loads(run.stdout)
    assert doc["schema"] == 1 and doc["name"] == "host"
    assert set(doc["op_cycles"]) == OPS


def test_to_toml_round_trips_strings_that_need_escaping():
    doc = calibrate(quick=True, name="x", description='a "quoted" box\\ with\ttabs and ünïcode')
    assert tomllib.loads(to_toml(doc)) == doc


def test_calibration_refuses_bad_pus():
    n = al.Topology.host().pus
    with pytest.raises(ValueError, match=rf"pu: {n} is not a host PU \(allowed: 0..{n - 1}\)"):
        _core.calibration.op_ns(n, 1, 10)
    with pytest.raises(ValueError, match="pu: a transfer needs two different PUs"):
        _core.calibration.transfer_ns(0, 0, 1, 1)
    with pytest.raises(ValueError, match=rf"pu: {n} is not a host PU"):
        _core.calibration.page_op_ns("copy", n, 1 << 20, 1)


def test_page_ops_refuse_bad_input():
    with pytest.raises(ValueError, match=r"op: invalid value 'move' \(allowed: one of 'copy', 'clear'\)"):
        _core.calibration.page_op_ns("move", 0, 1 << 20, 1)
    with pytest.raises(ValueError, match=r"bytes: 4096 bytes, 1 trials \(allowed: at least 8192 bytes and one trial\)"):
        _core.calibration.page_op_ns("clear", 0, 4096, 1)


def test_misses_in_flight_measures_and_refuses_bad_input():
    lines, latency, best_k = _core.calibration.misses_in_flight(0, 1 << 20, 1, 1000)
    assert lines >= 1 and latency > 0 and best_k in (1, 2, 4, 6, 8, 10, 12, 14, 16, 20, 24, 32)
    n = al.Topology.host().pus
    with pytest.raises(ValueError, match=rf"pu: {n} is not a host PU"):
        _core.calibration.misses_in_flight(n, 1 << 20, 1, 1000)
    with pytest.raises(ValueError, match=r"bytes: 2048 bytes \(allowed: 4096 to \d+ bytes\)"):
        _core.calibration.misses_in_flight(0, 2048, 1, 1000)
    with pytest.raises(ValueError, match=r"trials: 0 trials of 1000 misses per chase count \(allowed: at least 1 of"):
        _core.calibration.misses_in_flight(0, 1 << 20, 0, 1000)
    with pytest.raises(ValueError, match=r"trials: 1 trials of 0 misses per chase count"):
        _core.calibration.misses_in_flight(0, 1 << 20, 1, 0)


def test_every_op_has_one_microbenchmark_and_one_description():
    measured = _core.calibration.op_ns(0, 1, 100)
    assert [op for op, _ in measured] == list(_core.op_names())  # every op, in list order
    assert all(ns > 0 for _, ns in measured)
    assert set(_OP_HOW) == OPS


# --- repeats, through fake measurements ------------------------------------------------------------------------

N = 5
# One value per run (index = run) of each measured number; every other number is the same in every run.
TRANSFER = [50.0, 70.0, 60.0, 100.0, 58.0]  # median 60, IQR 58-70 (20 % of the median: not wide)
FUTEX = [5000.0, 16000.0, 6000.0, 9000.0, 5500.0]  # median 6000, IQR 5500-9000 (58 %: wide)
GHZ = [3.0, 2.0, 3.0, 2.0, 3.0]  # op_cycles = ns x the same run's clock
OP_NS = [1.0, 1.5, 1.0, 1.5, 1.0]  # so every run's cycles are 3.0, though median(ns) x median(GHz) would be 3.0 x 1


@pytest.fixture
def fake(monkeypatch):
    """Replace the engine's measurements by the values above, indexed by the run (counted by the clock measurement,
    each run's first); ``calls`` records their order and arguments."""
    calls: list[tuple[str, tuple]] = []

    def run_index() -> int:
        return sum(name == "core_ghz" for name, _ in calls) - 1

    def measure(name, value):
        def f(*args, **kwargs):
            calls.append((name, args + tuple(kwargs.items())))
            return value(run_index(), **kwargs)

        monkeypatch.setattr(_core.calibration, name, f)

    measure("core_ghz", lambda i: GHZ[i % N])
    measure("transfer_ns", lambda i: TRANSFER[i % N])
    measure("futex_wake_ns", lambda i: FUTEX[i % N])
    measure("bandwidth_gbs", lambda i: 20.0)
    copy_gbs, by_kind = _core.calibration.bandwidth_gbs, {"copy": 1, "update": 1.75, "load": 1.5, "store": 0.75}
    monkeypatch.setattr(_core.calibration, "bandwidth_gbs", lambda kind, *a: copy_gbs(kind, *a) * by_kind[kind])
    measure("misses_in_flight", lambda i: (12.0, 240.0, 20))
    measure("page_op_ns", lambda i, ascending: 300.0 if ascending else 400.0)
    measure("op_ns", lambda i: [(op, OP_NS[i % N]) for op in _core.op_names()])
    return calls


def test_repeats_are_interleaved_and_each_number_is_their_median(fake):
    doc = calibrate(repeats=N)
    names = [name for name, _ in fake]
    one_run = names[: len(names) // N]
    assert one_run[0] == "core_ghz" and one_run[-1] == "op_ns"
    assert names == one_run * N  # run 1 of every kind, then run 2 of every kind, ...
    assert {e["value"] for e in doc["transfer_ns"].values()} == {60.0}
    assert doc["wakeup_ns"]["futex"]["value"] == 6000.0
    assert doc["clock"]["ghz"]["value"] == 3.0
    assert {e["value"] for e in doc["op_cycles"].values()} == {3.0}
    assert {k: v["value"] for k, v in doc["bandwidth_gbs"].items()} == {
        "node": 20.0, "core": 20.0, "node_update": 35.0, "core_update": 35.0, "node_load": 30.0, "core_load": 30.0,
        "node_store": 15.0, "core_store": 15.0,
    }  # fmt: skip
    assert doc["misses_in_flight"]["core"]["value"] == 12.0
    assert doc["dram_ns"]["local"]["value"] == 240.0  # the latency of the same chases' K = 1 run
    assert "K = 1 run of misses_in_flight.core" in doc["dram_ns"]["local"]["source"]
    llc = _core.calibration.host_llc_bytes()
    assert doc.get("cache_mib", {}).get("llc", {}).get("value") == (llc / 2**20 if llc else None)
    # The private levels this host has: their sizes from hwloc, their latencies from chases 4 x their size.
    levels = _private_levels(llc) if llc else []
    found = {f"{table}.{f}": e["value"] for table in ("cache_kib", "cache_ns") for f, e in doc.get(table, {}).items()}
    assert found == {lv.size_field: lv.bytes / 1024 for lv in levels} | {lv.latency_field: 240.0 for lv in levels}
    chased = [args[1] for name, args in fake if name == "misses_in_flight"][: 1 + len(levels)]
    assert chased[1:] == [4 * lv.bytes for lv in levels]
    assert {k: v["value"] for k, v in doc["page_ns"].items()} == {
        "copy": 400.0, "copy_ascending": 300.0, "clear": 400.0, "clear_ascending": 300.0
    }  # fmt: skip
    assert "taken in ascending order" in doc["page_ns"]["copy_ascending"]["source"]
    assert "fixed random order" in doc["page_ns"]["copy"]["source"]
    order = "clock transfer_ns wakeup_ns bandwidth_gbs misses_in_flight cache_kib cache_mib cache_ns dram_ns page_ns"
    order = (order + " op_cycles").split()
    for absent in ([] if levels else ["cache_kib", "cache_ns"]) + ([] if llc else ["cache_mib"]):
        order.remove(absent)
    assert [k for k, v in doc.items() if isinstance(v, dict)] == order  # the profile's section order


def test_sources_name_the_runs_and_their_spread(fake):
    doc = calibrate(repeats=N)
    for entry in doc["transfer_ns"].values():
        assert entry["source"].endswith(
            "; median of 5 interleaved runs of the whole calibration, IQR 58-70 ns, range 50-100 ns"
        )
    assert doc["wakeup_ns"]["futex"]["source"].endswith(", IQR 5500-9000 ns, range 5000-16000 ns")
    assert doc["op_cycles"]["list_op"]["source"].endswith(", IQR 3-3 cycles, range 3-3 cycles")
    assert doc["clock"]["ghz"]["source"].endswith(", IQR 2-3 GHz, range 2-3 GHz")
    assert doc["bandwidth_gbs"]["core"]["source"].endswith(", IQR 20-20 GB/s, range 20-20 GB/s")
    assert doc["description"].endswith(
        "each number the median of 5 interleaved runs of every measurement; "
        "WIDE SPREAD (IQR above 25 % of the median): clock.ghz (33 %), wakeup_ns.futex (58 %)"
    )
    assert tomllib.loads(to_toml(doc)) == doc


def test_the_numbers_of_wide_spread_come_with_their_quartiles(fake):
    doc, wide = calibrate_with_spread(repeats=N)
    assert wide == {"clock.ghz": (2.0, 3.0, 3.0), "wakeup_ns.futex": (5500.0, 6000.0, 9000.0)}
    assert doc == calibrate(repeats=N) | {"description": doc["description"]}  # the same profile as calibrate()'s
    assert calibrate_with_spread(repeats=1)[1] == {}


def test_one_run_says_that_no_spread_was_measured(fake):
    doc = calibrate(repeats=1)
    assert [name for name, _ in fake].count("core_ghz") == 1
    assert doc["wakeup_ns"]["futex"]["value"] == 5000.0
    assert doc["wakeup_ns"]["futex"]["source"].endswith(" 200 us apart; one run (repeats=1: no spread measured)")
    assert "one run of every measurement (repeats=1), so no spread was measured" in doc["description"]


def test_quick_mode_runs_the_quick_sizes_twice(fake):
    doc = calibrate(quick=True)
    assert [name for name, _ in fake].count("core_ghz") == REPEATS[1] <= 2
    samples, trips = _SIZES["transfer_samples"][1], _SIZES["round_trips"][1]
    assert {args[2:] for name, args in fake if name == "transfer_ns"} == {(samples, trips)}
    assert {args[1:] for name, args in fake if name == "op_ns"} == {(_SIZES["op_trials"][1], _SIZES["ops"][1])}
    mlp = {(_SIZES["mlp_trials"][1], _SIZES["mlp_misses"][1])}
    assert {args[2:] for name, args in fake if name == "misses_in_flight"} == mlp
    assert "QUICK MODE" in doc["description"]


@pytest.mark.parametrize(
    ("repeats", "message"),
    [
        (0, "repeats: value out of range: 0 (allowed: 1..50)"),
        (51, "repeats: value out of range: 51 (allowed: 1..50)"),
        (2.0, "repeats: expected an integer, got 2.0 (allowed: 1..50)"),
        (True, "repeats: expected an integer, got True (allowed: 1..50)"),
    ],
)
def test_bad_repeats_are_refused_before_any_measurement(fake, repeats, message):
    with pytest.raises(ValueError) as err:
        calibrate(repeats=repeats)
    assert str(err.value) == message
    assert fake == []


def test_cli_refuses_bad_repeats():
    run = alloclab("calibrate", "--repeats", "0")
    assert run.returncode == 1
    assert "repeats: value out of range: 0 (allowed: 1..50)" in run.stderr


_L1D = ("l1d", 32 << 10, "cache_kib.l1d", "cache_ns.l2")  # a 32 KiB L1D, its misses found in the L2


@pytest.mark.parametrize(
    ("sizes", "expected"),
    [
        ({1: 32 << 10, 2: 1 << 20, 3: 32 << 20}, [_L1D, ("l2", 1 << 20, "cache_kib.l2", "cache_ns.llc")]),  # Zen 4
        ({1: 32 << 10, 2: 1 << 20, 3: 0}, [_L1D]),  # L2 is the LLC: only L1D is private
        ({1: 32 << 10, 2: 0, 3: 0}, []),  # no L2 reported: no level to find an L1D miss in
        ({1: 0, 2: 1 << 20, 3: 32 << 20}, []),  # no L1D reported
        ({1: 32 << 10, 2: 6 << 20, 3: 8 << 20}, [_L1D]),  # 4 x L2 does not fit half the LLC
    ],
)
def test_private_levels_are_the_levels_a_chase_can_tell_apart(monkeypatch, sizes, expected):
    monkeypatch.setattr(_core.calibration, "host_cache_bytes", lambda level: sizes.get(level, 0))
    llc = max(sizes.values())
    assert _private_levels(llc) == expected
