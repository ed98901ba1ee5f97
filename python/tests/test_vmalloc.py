"""vmalloc_stress end to end: exact busy-lock counts in both busy-tree shapes, exhaustion, bad input."""

import _thread
import os
import threading

import pytest
from conftest import on

import alloclab as al

TOPO = "node:2 core:2 pu:1"  # 4 model CPUs: vmap_nodes=0 resolves to 4 busy trees


def _run(clock="real", **params):
    params.setdefault("tlb_flush_ns", 0)
    return al.run("vmalloc_stress", **on(clock, TOPO), **params)


@pytest.mark.parametrize("vmap_nodes", [1, 0])
@pytest.mark.parametrize("busy_lock,k", [("twice", 2), ("once", 1)])
def test_busy_lock_acquisitions_are_exact(vmap_nodes, busy_lock, k, clock):
    r = _run(clock, threads=2, ops=3000, vmap_nodes=vmap_nodes, busy_lock=busy_lock, lazy_max_pages=400)
    s = r.summary
    cls = "vmap_area_lock" if vmap_nodes == 1 else "vn->busy.lock"
    assert s["busy_lock_class"] == cls
    assert s["shape"] == ("v6.7" if vmap_nodes == 1 else "v6.9+")
    assert s["nr_vmap_nodes"] == (1 if vmap_nodes == 1 else 4)
    assert s["allocs"] == 6000 and s["frees"] == 6000 and s["alloc_failures"] == 0
    assert s["busy_lock_per_alloc"] == k
    assert s["busy_lock_per_free"] == 1
    rows = r.lockstat.set_index("class")
    # lock_stat's own count: k per allocation + 1 per free, and the other shape's class never appears.
    assert rows.loc[cls].acquisitions == (k + 1) * 6000
    assert ("vn->busy.lock" if vmap_nodes == 1 else "vmap_area_lock") not in rows.index
    assert s["busy_lock_acquisitions"] == (k + 1) * 6000
    assert s["drains"] > 0 and rows.loc["vmap_purge_lock"].acquisitions >= s["drains"]
    # The lazy-tree lock is a lock class lock_stat sees: 1 per vfree + the purges' detaches (v6.7: 1 per purge).
    lazy = rows.loc["purge_vmap_area_lock" if vmap_nodes == 1 else "vn->lazy.lock"].acquisitions
    assert lazy >= 6000 and s["lazy_lock_acquisitions"] == lazy
    if vmap_nodes == 1:
        assert lazy == 6000 + rows.loc["vmap_purge_lock"].acquisitions
    if vmap_nodes == 1:
        # v6.7: every allocation searches the free tree.
        assert s["free_lock_per_alloc"] == 1 and s["pool_hits"] == 0
    else:
        # v6.9+: thread stacks come back from the per-node pools, without free_vmap_area_lock. How many depends on
        # when the purges ran against the allocations, which real threads decide; a virtual run is one schedule.
        assert s["pool_hits"] > 0
        if clock == "virtual":
            assert s["pool_hit_ratio"] > 0.5 and s["free_lock_per_alloc"] < 0.5
        assert rows.loc["vn->pool_lock"].acquisitions >= s["pool_hits"]
    assert list(r.workers.ops) == [3000, 3000]
    assert (r.workers.allocs == 3000).all()


def test_counts_do_not_depend_on_lockstat_or_lock_kind():
    r = _run(threads=3, ops=1000, vmap_nodes=1, busy_lock="twice", lockstat=False, locks={"vmap_area_lock": "ticket"})
    assert r.summary["busy_lock_per_alloc"] == 2
    assert len(r.lockstat) == 0
    r = _run(threads=2, ops=1000, vmap_nodes=2, busy_lock="once", locks={"vn->busy.lock": "mutex"})
    row = r.lockstat.set_index("class").loc["vn->busy.lock"]
    assert row.kind == "mutex" and row.acquisitions == 2 * 2000


@pytest.mark.parametrize(
    "pattern", ["fix_size", "fix_align", "random_size", "random_size_align", "long_busy_list", "full_fit"]
)
def test_test_vmalloc_patterns_keep_the_invariants(pattern):
    r = _run(threads=2, ops=300, pattern=pattern, live=3)
    per_op = 2 if pattern == "long_busy_list" else 1
    assert r.summary["allocs"] == 2 * 300 * per_op
    assert r.summary["busy_lock_per_alloc"] == 1


@pytest.mark.parametrize("vmap_nodes", [1, 0])
@pytest.mark.parametrize("busy_lock,k", [("twice", 2), ("once", 1)])
def test_stress_ng_pthread_stack_cache_counts_are_exact(vmap_nodes, busy_lock, k, clock):
    # Rounds of P thread creations, then P joins (oldest first): the first round finds the 2-stack cache empty;
    # each join puts a stack back while a slot is free (2 per round), the rest are vfree()d; each later round
    # takes its first 2 stacks from the cache. 3 full rounds + 5 creations of a fourth, per worker:
    P, R, extra = 50, 3, 5
    ops = R * P + extra
    r = _run(clock, threads=2, ops=ops, pattern="stress_ng_pthread", pthread_max=P, vmap_nodes=vmap_nodes,
             busy_lock=busy_lock, lazy_max_pages=400)  # fmt: skip
    s = r.summary
    hits = 2 * R  # rounds 2..4 take 2 each
    allocs = ops - hits
    frees = R * (P - 2)
    assert s["stack_cache_hits"] == 2 * hits and s["stack_cache_puts"] == 2 * 2 * R
    assert s["allocs"] == 2 * allocs and s["frees"] == 2 * frees and s["alloc_failures"] == 0
    assert s["map_pages"] and s["page_alloc_failures"] == 0
    rows = r.lockstat.set_index("class")
    busy = "vmap_area_lock" if vmap_nodes == 1 else "vn->busy.lock"
    assert rows.loc[busy].acquisitions == 2 * (k * allocs + frees)
    lazy = "purge_vmap_area_lock" if vmap_nodes == 1 else "vn->lazy.lock"
    # 1 per vfree + the purges' detaches of the lazy tree (v6.7: one per vmap_purge_lock section).
    assert rows.loc[lazy].acquisitions >= 2 * frees
    if vmap_nodes == 1:
        assert rows.loc[lazy].acquisitions == 2 * frees + rows.loc["vmap_purge_lock"].acquisitions
    assert "zone->lock" in rows.index and "pcp->lock" in rows.index
    assert list(r.workers.ops) == [ops, ops]


def test_stress_ng_pthread_runs_the_seed_kernels_page_allocator_rules():
    r = _run(threads=1, ops=10, pattern="stress_ng_pthread", pthread_max=4)
    assert r.provenance["kernel"].startswith("v6.7")
    assert "BatchRule::v6_7" in r.provenance["kernel"] and "CheckMode::off" in r.provenance["kernel"]


def test_exhaustion_is_reported_not_fatal():
    r = _run(threads=2, ops=1000, live=100, vmalloc_size=1 << 20, vmap_nodes=1)
    s = r.summary
    assert s["alloc_failures"] > 0
    assert s["overflow_purges"] >= s["alloc_failures"]
    assert s["allocs"] + s["alloc_failures"] == 2000
    assert s["busy_lock_per_alloc"] == 1  # a failed allocation takes no busy lock


def test_map_pages_brings_the_page_allocator_in():
    r = _run(threads=2, ops=1000, map_pages=True, node_pages=8192, live=4)
    s = r.summary
    assert s["map_pages"] and s["page_alloc_failures"] == 0
    assert s["busy_lock_per_alloc"] == 1
    assert "pcp->lock" in set(r.lockstat["class"])


@pytest.mark.parametrize(
    "params,name",
    [
        ({"align": 12288}, "align"),
        ({"align": 0}, "align"),
        ({"size": 0}, "size"),
        ({"busy_lock": "thrice"}, "busy_lock"),
        ({"vmap_nodes": 129}, "vmap_nodes"),
        ({"pattern": "nope"}, "pattern"),
        ({"vmalloc_size": 65536, "size": 65536}, "size"),
        ({"map_pages": True, "node_pages": 1000}, "node_pages"),
        ({"pattern": "stress_ng_pthread", "pthread_max": 0}, "pthread_max"),
        ({"pattern": "stress_ng_pthread", "clone_ns": -1}, "clone_ns"),
    ],
)
def test_bad_input_names_the_parameter(params, name):
    with pytest.raises(ValueError, match=rf"^{name}: "):
        al.run("vmalloc_stress", **params)


def test_vmalloc_stress_is_listed_with_documented_parameters():
    table = al.scenarios()
    params = table[table.scenario == "vmalloc_stress"].set_index("parameter")
    for p in [
        "threads",
        "ops",
        "size",
        "align",
        "busy_lock",
        "vmap_nodes",
        "pattern",
        "map_pages",
        "live",
        "pthread_max",
        "clone_ns",
    ]:
        assert p in params.index and params.loc[p, "doc"]
    assert params.loc["busy_lock", "default"] == "once"


def test_reproduce_study_puts_the_seed_tables_beside_ours(tmp_path):
    from alloclab import studies

    run = studies.reproduce("vmalloc_stress", quick=True, out=tmp_path, progress=False)
    assert run.study.name == "vmalloc_lock_once" and run.study.seed == "vmalloc-busy-lock-once"
    table = run.result.table
    assert set(table["shape"]) == {"v6.7", "v6.9+"}
    assert (table["busy_lock_per_alloc_twice"] == 2).all() and (table["busy_lock_per_alloc_once"] == 1).all()
    assert set(table.loc[table["shape"] == "v6.9+", "nr_vmap_nodes"]) == {128}  # the 160-CPU model
    assert set(table["pattern"]) == {"stress_ng_pthread", "thread_stack"}
    seed_op = table[table["pattern"] == "stress_ng_pthread"]
    v67 = seed_op[seed_op["shape"] == "v6.7"].iloc[0]
    v69 = seed_op[seed_op["shape"] == "v6.9+"].iloc[0]
    assert v67["published_pct_160_vcpus"] == 105.5 and v67["published_pct_40_vcpus"] == 100.5
    assert v69["published_gain_pct_160_vcpus"] == 0.6 and v69["published_gain_pct_224_vcpus"] == 4.0
    # The seed measured thread creations: its figures stand beside that operation only, not the bare loop.
    bare = table[table["pattern"] == "thread_stack"]
    assert len(bare) and bare[[c for c in table.columns if c.startswith("published_")]].isna().all().all()
    names = {p.name for p in run.files}
    assert {"table.parquet", "published.parquet", "data.parquet", "lockstat.parquet", "meta.json"} <= names
    assert {"once_vs_twice.png", "scaling.png", "lockstat.png"} <= names
    assert any("v6.9+" in note and "pool hits" in note for note in run.result.notes)


def test_ctrl_c_during_a_long_set_up_raises_keyboard_interrupt_and_leaves_no_thread():
    # 256 workers x lazy_max_pages one-page pairs of full_fit: seconds of prepare(), which polls for Ctrl-C.
    before = len(os.listdir("/proc/self/task"))
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        al.run("vmalloc_stress", threads=256, pattern="full_fit", ops=10**9)
    timer.join()
    assert len(os.listdir("/proc/self/task")) == before
