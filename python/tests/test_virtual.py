"""Virtual-clock runs through ``al.run``: the result's shape and provenance, determinism, 512 virtual CPUs on 16
nodes, lock-kind physics on a seed machine, and bad input. Virtual runs with ``costs="table"`` are pure functions of
their inputs, so every figure here is exact."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import machine_like
from scenario_params import names, small_params

import alloclab as al

BIG = "package:16 numa:1 l3:1 core:16 pu:2"  # 512 virtual CPUs on 16 NUMA nodes


def fingerprint(r: al.RunResult) -> tuple:
    """Everything a virtual run computes from virtual time: per-worker figures, lock_stat, the summary."""
    workers = r.workers.drop(columns=[c for c in r.workers if c.startswith("host_")], errors="ignore")
    return (
        workers.to_csv(index=False),
        r.lockstat.to_csv(index=False),
        sorted((k, str(v)) for k, v in r.summary.items()),
    )


@pytest.mark.parametrize("scenario", names())
def test_every_scenario_is_a_pure_function_of_its_inputs(scenario):
    params = small_params(scenario, workers=2)
    a = al.run(scenario, clock="virtual", machine="host", seed=5, **params)
    b = al.run(scenario, clock="virtual", machine="host", seed=5, **params)
    assert not a.stopped, a.stop_reason
    assert fingerprint(a) == fingerprint(b)
    assert (a.workers["elapsed_s"] > 0).all()
    p = a.provenance
    assert (p["clock"], p["machine"], p["costs"]) == ("virtual", "host", "table")
    assert p["machine_hash"] == al.machine("host").hash and p["simulator_version"] >= 1
    assert not p["oversubscribed"]


def test_a_virtual_run_has_the_shape_of_a_real_one():
    real = al.run("lock_zoo", threads=2, iterations=500)
    virt = al.run("lock_zoo", clock="virtual", machine="xeon-8380-2s", threads=2, iterations=500, hold_ns=50)
    assert list(virt.workers.columns) == list(real.workers.columns)
    assert list(virt.lockstat.columns) == list(real.lockstat.columns)
    assert set(real.summary.index) <= set(virt.summary.index)
    row = virt.lockstat.set_index("class").loc["lock_zoo"]
    assert row.acquisitions == 1000 and row.holdtime_min_ns > 0 and row.holdtime_max_ns >= row.holdtime_avg_ns


def test_the_machine_changes_the_times_not_the_counts():
    machines = ("xeon-8380-2s", "nehalem-ex-4s-64t")
    runs = [al.run("vmalloc_stress", clock="virtual", machine=m, threads=4, ops=500) for m in machines]
    a, b = (r.lockstat.set_index("class")["acquisitions"] for r in runs)
    pd.testing.assert_series_equal(a.sort_index(), b.sort_index())
    assert runs[0].workers["elapsed_s"].tolist() != runs[1].workers["elapsed_s"].tolist()


def test_lock_stat_costs_a_virtual_run_nothing():
    # The instrument never picks the winner: lock_stat reads the simulator's clock for free, so a virtual run gives
    # the same virtual times to the picosecond with it as without, on a contended ticket lock (where a charged read
    # inside each hold would lengthen every hold and move every hand-off) and in a scenario whose model code reads
    # the clock itself (each vmalloc operation's latency). Counts come with it, and only with it.
    m = al.machine("xeon-8380-2s")
    cases = [
        ("lock_zoo", {"threads": 4, "iterations": 500, "lock": "ticket", "hold_ns": 50, "think_ns": 20}, "lock_zoo"),
        ("vmalloc_stress", {"threads": 8, "ops": 50}, "free_vmap_area_lock"),
    ]
    for scenario, params, cls in cases:
        runs = {on: al.run(scenario, lockstat=on, clock="virtual", machine=m.name, **params) for on in (True, False)}
        on, off = runs[True], runs[False]
        assert on.summary["elapsed_s"] == off.summary["elapsed_s"], scenario
        assert list(on.workers["elapsed_s"]) == list(off.workers["elapsed_s"]), scenario
        row = on.lockstat.set_index("class").loc[cls]
        assert row["acquisitions"] > 0 and row["contentions"] > 0, scenario
        assert off.lockstat.empty, scenario


def test_the_seed_draws_the_start_order():
    # The start gate: each worker sees it open at a phase of its spin loop that the seed draws, so the seed picks the
    # start order (and with it the interleaving); one seed repeats exactly, and the counts do not depend on it.
    def run(seed: int) -> al.RunResult:
        return al.run("lock_zoo", clock="virtual", machine="xeon-8380-2s", threads=8, iterations=200, lock="ticket",
                      hold_ns=50, seed=seed)  # fmt: skip

    first, again, other = run(1), run(1), run(2)
    assert list(first.workers["start_s"]) == list(again.workers["start_s"])
    assert first.summary["elapsed_s"] == again.summary["elapsed_s"]
    assert list(first.workers["start_s"].rank()) != list(other.workers["start_s"].rank())
    for r in (first, other):
        assert r.workers["start_s"].between(0, 1e-6).all()  # within one PAUSE and line access of the release
        assert r.workers["start_s"].nunique() == 8
        assert r.lockstat.set_index("class").loc["lock_zoo", "acquisitions"] == 8 * 200


@pytest.mark.parametrize("scenario", names())
def test_every_scenario_runs_on_512_virtual_cpus_on_16_nodes(scenario):
    m = machine_like(BIG)
    assert (m.topology.pus, m.topology.nodes) == (512, 16)
    params = small_params(scenario, workers=512)
    r = al.run(scenario, clock="virtual", machine=m, **params)
    assert not r.stopped, r.stop_reason
    assert not r.provenance["oversubscribed"]
    if "threads" in params:
        assert len(r.workers) == params["threads"] == 512


def test_ticket_collapses_below_mcs_as_waiters_grow():
    def rate(kind, cpus):
        r = al.run("lock_zoo", clock="virtual", machine="xeon-8380-2s", placement="scatter", threads=cpus, lock=kind,
                   iterations=200, hold_ns=100, think_ns=200)  # fmt: skip
        return r.summary["acquisitions_per_s"]

    assert rate("ticket", 2) > 0.9 * rate("mcs", 2)
    assert rate("ticket", 64) < 0.5 * rate("mcs", 64)


@pytest.mark.parametrize(
    "options,name",
    [
        ({"clock": "wall"}, "clock"),
        ({"clock": "virtual"}, "machine"),
        ({"clock": "virtual", "machine": "no-such-box"}, "machine"),
        ({"clock": "virtual", "machine": "host", "costs": "cheap"}, "costs"),
        ({"machine": "host"}, "machine"),
        ({"costs": "table"}, "costs"),
        ({"clock": "virtual", "machine": "host", "topology": al.Topology.synthetic("node:1 core:2 pu:1")}, "topology"),
        ({"clock": "virtual", "machine": "host", "strict": True}, "strict"),
        ({"clock": "virtual", "machine": "host", "threads": 3}, "placement"),
        ({"clock": "virtual", "machine": "host", "placement": [0, 7]}, "placement"),
    ],
)
def test_bad_virtual_options_name_the_option(options, name):
    params = {"iterations": 10, **options}
    params.setdefault("threads", 2)
    with pytest.raises(ValueError, match=rf"^{name}: "):
        al.run("lock_zoo", **params)


def test_a_machine_file_with_a_bad_number_is_refused_by_field(tmp_path):
    bad = tmp_path / "bad.toml"
    src = al.machine("host").path
    bad.write_text(open(src, encoding="utf-8").read().replace("value = 53.8", "value = -1"), encoding="utf-8")
    with pytest.raises(ValueError, match=r"transfer_ns\.same_llc: -1 is not allowed"):
        al.run("lock_zoo", clock="virtual", machine=bad, threads=2, iterations=10)
