"""lock_zoo end to end: exact lock_stat counts for every kind, result tables, bad input."""

import _thread
import os
import threading

import numpy as np
import pytest
from conftest import on

import alloclab as al

KINDS = list(al.lock_kinds().kind)
LOCKSTAT_COLUMNS = [
    "class",
    "con_bounces",
    "contentions",
    "waittime_min_ns",
    "waittime_max_ns",
    "waittime_total_ns",
    "waittime_avg_ns",
    "acq_bounces",
    "acquisitions",
    "holdtime_min_ns",
    "holdtime_max_ns",
    "holdtime_total_ns",
    "holdtime_avg_ns",
    "handoffs_local",
    "handoffs_remote",
]


def test_every_kind_is_offered():
    assert set(KINDS) >= {"mutex", "spin", "ticket", "mcs"}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("threads", [1, 3])
def test_acquisitions_are_exact(kind, threads, clock):
    r = al.run("lock_zoo", **on(clock, "node:2 core:2 pu:1"), threads=threads, lock=kind, iterations=3000, hold_ns=50)
    row = r.lockstat.set_index("class").loc["lock_zoo"]
    assert row.acquisitions == threads * 3000
    assert row.kind == kind
    assert 0 <= row.contentions <= row.acquisitions
    assert row.con_bounces <= row.contentions
    assert row.handoffs_local + row.handoffs_remote == row.contentions
    assert row.holdtime_total_ns >= row.acquisitions * 40  # each hold spins >= hold_ns (tick rounding aside)
    assert list(r.workers.ops) == [3000] * threads
    assert r.summary["acquisitions"] == threads * 3000


@pytest.mark.parametrize(
    ("iterations", "samples"),
    [(100, 100), (4096, 4096), (4097, 4097), (8192, 4096), (10_000, 5000), (12_289, 4097)],
)
def test_acquire_latency_is_sampled_at_most_4096_times_per_worker_evenly(iterations, samples, clock):
    # Every acquisition up to 4096, then every (iterations // 4096)-th: 10_000 -> every 2nd, 12_289 -> every 3rd.
    r = al.run("lock_zoo", **on(clock, "node:1 core:2 pu:1"), threads=2, iterations=iterations, lockstat=False)
    assert list(r.workers.lat_count) == [samples, samples]
    assert list(r.workers.ops) == [iterations, iterations]


def test_several_locks_split_the_acquisitions():
    r = al.run("lock_zoo", threads=2, locks_n=8, iterations=2000, seed=3)
    assert r.lockstat.set_index("class").loc["lock_zoo"].acquisitions == 4000
    assert r.params["locks_n"] == 8
    assert r.provenance["seed"] == 3


def test_tables_have_the_promised_columns():
    r = al.run("lock_zoo", threads=2, iterations=500)
    for col in ["worker", "model_pu", "model_node", "host_pu", "bind_ok", "ops", "elapsed_s"]:
        assert col in r.workers.columns
    for col in ["lat_p50_ns", "lat_p99_ns", "lat_max_ns"]:
        assert (r.workers[col] > 0).all()
    assert list(r.lockstat.columns[:1]) == ["class"]
    assert all(c in r.lockstat.columns for c in LOCKSTAT_COLUMNS)
    for key in ["acquisitions_per_s", "fairness_jain", "fairness_max_min"]:
        assert key in r.summary.index
    # Jain's index over the acquisitions each worker made while both ran; undefined (NaN) when none made any then.
    if r.workers["ops_window"].sum() > 0:
        assert 0 < r.summary["fairness_jain"] <= 1.0 + 1e-12
    else:
        assert r.summary["fairness_jain"] != r.summary["fairness_jain"]
    text = r.lockstat_text()
    assert text.startswith("lock_stat version 0.4\n")
    assert "&lock_zoo:" in text
    assert {"model_topology", "host_topology", "placement", "lock_kinds", "clock", "alloclab_version"} <= set(
        r.provenance
    )


def test_lockstat_off_has_no_rows():
    r = al.run("lock_zoo", threads=2, iterations=500, lockstat=False)
    assert r.lockstat.empty
    assert r.summary["acquisitions"] == 1000


def test_a_locks_override_sets_the_kind_the_run_records_and_a_contradicting_parameter_is_an_error():
    r = al.run("lock_zoo", threads=1, iterations=10, locks={"lock_zoo": "ticket"})
    assert r.lockstat.kind.iloc[0] == "ticket" and r.params["lock"] == "ticket"  # never labelled with the default
    r = al.run("lock_zoo", threads=1, iterations=10, lock="ticket", locks={"lock_zoo": "ticket"})
    assert r.lockstat.kind.iloc[0] == "ticket" and r.params["lock"] == "ticket"
    with pytest.raises(ValueError, match=r"^lock: 'spin' conflicts with locks\['lock_zoo'\]='ticket' \(scenario"):
        al.run("lock_zoo", threads=1, iterations=10, lock="spin", locks={"lock_zoo": "ticket"})


@pytest.mark.parametrize(
    "scenario, kwargs, suggestion",
    [
        ("lock_zo", {}, "; did you mean 'lock_zoo'?"),
        ("lock_zoo", dict(lock="tiket"), "; did you mean 'ticket'?"),
        ("lock_zoo", dict(itrations=10), "; did you mean 'iterations'?"),
        ("lock_zoo", dict(locks={"zone->lok": "mcs"}), "; did you mean 'zone->lock'?"),
        ("lock_zoo", dict(locks={"zone->lock": "qspinlok"}), "; did you mean 'qspinlock'?"),
        ("lock_zoo", dict(clock="virtul"), "; did you mean 'virtual'?"),
        ("lock_zoo", dict(clock="virtual", machine="xeon-8380"), "; did you mean 'xeon-8380-2s' or 'xeon-8480-2s'?"),
    ],
)
def test_a_mistyped_name_is_told_the_closest_valid_ones(scenario, kwargs, suggestion):
    with pytest.raises(ValueError) as e:
        al.run(scenario, **kwargs)
    assert str(e.value).endswith(suggestion), str(e.value)


def test_a_name_far_from_every_valid_one_gets_no_suggestion():
    with pytest.raises(ValueError) as e:
        al.run("lock_zoo", lock="rcu")
    assert "did you mean" not in str(e.value)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(threads=0), r"^threads: value out of range: 0 \(allowed: 1\.\.1024\)"),
        (dict(lock="rcu"), r"^lock: invalid value 'rcu' \(allowed: one of 'mutex'"),
        (dict(hold_ns=-1), r"^hold_ns: value out of range: -1"),
        (dict(iterations=1.5), r"^iterations: expected an integer"),
        (dict(threads=True), r"^threads: expected an integer, got True"),
        (dict(thread=2), r"^thread: unknown parameter of scenario 'lock_zoo'"),
        (dict(locks={"zone->lok": "mcs"}), r"^locks: unknown lock class 'zone->lok'"),
        (dict(locks={"zone->lock": "rcu"}), r"^locks\['zone->lock'\]: unknown lock kind 'rcu'"),
        (dict(seed=-1), r"^seed: value out of range: -1 \(allowed: 0\.\.9223372036854775807\)$"),
        (dict(iterations=1e30), r"^iterations: value out of range: 1e\+30 \(allowed: 1\.\."),
        (dict(iterations=-1e30), r"^iterations: value out of range: -1e\+30"),
        (dict(hold_ns=np.array([1, 2])), r"^hold_ns: unsupported value array\(\[1, 2\]\)"),
        (dict(hold_ns=np.uint64(2**64 - 1)), r"^hold_ns: value out of range: 18446744073709551615"),
    ],
)
def test_bad_input_names_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        al.run("lock_zoo", **{"iterations": 10, **kwargs})


def test_numpy_values_count_as_their_python_kinds():
    """np.bool_, np.int64, np.float32 (what a DataFrame or an array hands out) are bools, ints and floats."""
    r = al.run("hugetlb_boot", pages=np.int64(8), parallel=np.bool_(False), hvo_ns=np.float32(2.0))
    assert (r.params["pages"], r.params["parallel"], r.params["hvo_ns"]) == (8, False, 2)
    assert type(r.params["parallel"]) is bool
    r = al.run("lock_zoo", threads=np.uint8(1), iterations=np.array(10), hold_ns=np.float64(0.0))
    assert r.summary["acquisitions"] == 10
    with pytest.raises(ValueError, match=r"^hold_ns: expected an integer, got 2\.5"):
        al.run("lock_zoo", iterations=10, hold_ns=np.float32(2.5))


@pytest.mark.parametrize("kwargs", [dict(lock="rcu"), dict(locks={"zone->lock": "rcu"})])
def test_an_unknown_kind_is_told_every_kind(kwargs):
    with pytest.raises(ValueError) as e:
        al.run("lock_zoo", iterations=10, **kwargs)
    assert all(f"{kind}" in str(e.value) for kind in KINDS), str(e.value)
    assert {"qspinlock", "kmutex", "cna", "cohort", "hmcs", "shfllock"} <= set(KINDS)


def test_unknown_scenario():
    with pytest.raises(ValueError, match="scenario: unknown scenario 'lock_zo'"):
        al.run("lock_zo")


def test_scenarios_document_every_parameter():
    s = al.scenarios()
    zoo = s[s.scenario == "lock_zoo"].set_index("parameter")
    assert set(zoo.index) == {"threads", "lock", "iterations", "hold_ns", "think_ns", "locks_n", "lines"}
    assert (zoo.doc.str.len() > 0).all()
    assert zoo.loc["threads", "allowed"] == "1..1024"
    assert zoo.loc["iterations", "default"] == 100000


def _task_count():
    return len(os.listdir("/proc/self/task"))


def test_timeout_stops_the_run_and_keeps_counts_consistent():
    before = _task_count()
    r = al.run("lock_zoo", threads=2, iterations=10**9, timeout_s=0.2)
    assert r.stopped and r.stop_reason.startswith("timeout")
    assert r.lockstat.acquisitions.iloc[0] == r.workers.ops.sum() == r.summary["acquisitions"]
    assert _task_count() == before


def test_ctrl_c_raises_keyboard_interrupt_and_leaves_no_thread():
    before = _task_count()
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        al.run("lock_zoo", threads=2, iterations=10**9)
    timer.join()
    assert _task_count() == before


def test_protected_lines_move_with_the_lock_across_nodes():
    """In virtual time each line the critical section writes comes from the last holder's CPU. The lines are
    independent, so their misses overlap: up to the core's misses in flight (12 on this profile) they cost one
    transfer, and each group beyond costs one more, so less throughput when the workers sit on two nodes."""

    def rate(lines: int) -> float:
        r = al.run("lock_zoo", clock="virtual", machine="xeon-8380-2s", placement="scatter", threads=4,
                   iterations=200, lines=lines, lock="mcs")  # fmt: skip
        assert r.lockstat.set_index("class").loc["lock_zoo", "acquisitions"] == 4 * 200
        return float(r.summary["acquisitions_per_s"])

    assert rate(1) == rate(4) == rate(12) > rate(13) == rate(24) > rate(25)


def test_numa_aware_kinds_are_listed_and_say_when_they_degenerate():
    kinds = al.lock_kinds()
    assert set(kinds.loc[kinds["numa_aware"], "kind"]) == {"cna", "cohort", "hmcs", "shfllock"}
    # Each names the kind it is on one node; no other kind names one.
    bases = {"cna": "qspinlock", "shfllock": "qspinlock", "cohort": "mcs", "hmcs": "mcs"}
    assert kinds.set_index("kind")["base"].to_dict() == {k: bases.get(k, "") for k in kinds["kind"]}
    one = al.run("lock_zoo", topology="node:1 core:2 pu:1", threads=2, iterations=100, lock="cna")
    assert one.provenance["lock_notes"] == (
        "lock_zoo: cna on a 1-node model degenerates to its base lock, qspinlock (every hand-off is local)"
    )
    assert (
        al.run("lock_zoo", topology="node:2 core:1 pu:1", threads=2, iterations=100, lock="cna").provenance[
            "lock_notes"
        ]
        == ""
    )
    assert (
        al.run("lock_zoo", topology="node:1 core:2 pu:1", threads=2, iterations=100, lock="mcs").provenance[
            "lock_notes"
        ]
        == ""
    )


def test_a_kinds_uncontended_cost_is_what_its_code_does_to_memory():
    # One virtual CPU: no hand-off, so two kinds differ by their uncontended acquisition and release alone, the
    # counts al.lock_kinds() gives: each side its RMWs at the profile's atomic_rmw, or its accesses at line_access
    # where those take longer (they run in the RMWs' shadow).
    ops = al.lock_kinds().set_index("kind")
    m = al.machine("xeon-8380-2s")
    ghz = m.values["clock.ghz"]
    rmw_s, access_s = (round(m.values[f"op_cycles.{op}"] / ghz * 1000) * 1e-12 for op in ("atomic_rmw", "line_access"))

    def cost_s(kind: str) -> float:
        k = ops.loc[kind]
        return sum(max(rmws * rmw_s, accesses * access_s) for rmws, accesses in
                   ((k.lock_rmws, k.lock_accesses), (k.unlock_rmws, k.unlock_accesses)))  # fmt: skip

    def elapsed(kind: str) -> float:
        r = al.run("lock_zoo", clock="virtual", machine=m, threads=1, iterations=1000, lock=kind, lockstat=False)
        return float(r.summary["elapsed_s"])

    assert (ops.loc["mcs", ["lock_rmws", "lock_accesses", "unlock_rmws", "unlock_accesses"]] == [1, 2, 1, 1]).all()
    for kind in ("mcs", "cohort", "kmutex"):
        assert elapsed(kind) - elapsed("qspinlock") == pytest.approx(1000 * (cost_s(kind) - cost_s("qspinlock")))
