"""vmalloc_stress end to end: exact busy-lock counts in both busy-tree shapes, exhaustion, bad input."""

import _thread
import os
import re
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
    # k per allocation, fork.c's find_vm_area() once per fresh stack, find_unlink_vmap_area() once per vfree.
    assert s["busy_lock_lookups"] == 2 * allocs
    assert rows.loc[busy].acquisitions == 2 * ((k + 1) * allocs + frees)
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


def test_the_catalogue_documents_the_stress_and_module_parameters():
    params = al.scenarios("vmalloc_stress").set_index("parameter")
    stress = ["threads", "ops", "size", "align", "busy_lock", "vmap_nodes", "pattern", "map_pages", "live"]
    stress += ["pthread_max", "clone_ns"]
    module = ["nr_threads", "test_loop_count", "test_repeat_count", "nr_pages", "run_test_mask"]
    module += ["sequential_test_order"]
    assert set(stress + module) <= set(params.index)
    assert (params.doc.str.len() > 0).all()
    assert params.loc["busy_lock", "default"] == "once"
    assert params.loc["test_loop_count", "default"] == 1000000
    assert params.loc["run_test_mask", "default"] == 127
    for bit, name in enumerate(KERNEL_TESTS):
        assert f"{1 << bit} {name}" in params.loc["run_test_mask", "doc"]
    assert "test_vmalloc" in params.loc["pattern", "choices"]


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


# --- pattern="test_vmalloc": lib/test_vmalloc.c as test_vmalloc.sh loads it ------------------------------------

#: test_case_array[] of lib/test_vmalloc.c, in its order (run_test_mask bit i = entry i).
KERNEL_TESTS = [
    "fix_size_alloc_test",
    "full_fit_alloc_test",
    "long_busy_list_alloc_test",
    "random_size_alloc_test",
    "fix_align_alloc_test",
    "random_size_align_alloc_test",
    "align_shift_alloc_test",
    "pcpu_alloc_test",
    "kvfree_rcu_1_arg_vmalloc_test",
    "kvfree_rcu_2_arg_vmalloc_test",
    "vm_map_ram_test",
]
SUMMARY = re.compile(r"^Summary: (\w+) passed: (\d+) failed: (\d+) repeat: (\d+) loops: (\d+) avg: (\d+) usec$")
J = 3 * 8192  # full_fit's junk_length on TOPO's 4 CPUs: fls(4) x 32 MiB / PAGE_SIZE
# align_shift_alloc_test: 1 << i fits [VMALLOC_START, + 32 TiB) (x86-64 4-level: 0xffffc90000000000) with its guard
# page for i = 0..45 (2^45 is the range's size, and one 2^45 multiple lies in it); 1 << 46 finds no room.
ALIGN_SHIFT_FITS = 46


def _allocs_per_call(test: str, loops: int) -> int:
    """The areas one call of the kernel's test function allocates (and frees), read off lib/test_vmalloc.c."""
    return {
        "full_fit_alloc_test": 2 + 2 * J + loops,  # ptr[], junk_ptr[], J pairs, the loops
        "long_busy_list_alloc_test": 1 + 15000 + 2 * loops,  # ptr[], 15000 pages, 100 + 1 pages per loop
        "align_shift_alloc_test": ALIGN_SHIFT_FITS,  # then the call fails
    }.get(test, loops)


def _test_vmalloc(clock="real", **params):
    return _run(clock, pattern="test_vmalloc", **params)


@pytest.mark.parametrize("busy_lock,k,vmap_nodes", [("twice", 2, 1), ("once", 1, 0)])
@pytest.mark.parametrize("bit", range(7))
def test_each_kernel_test_allocates_and_locks_exactly(bit, busy_lock, k, vmap_nodes, clock):
    test = KERNEL_TESTS[bit]
    workers = 1 if test == "align_shift_alloc_test" else 2  # two would race for the one 2^45-aligned place
    loops, repeat = 40, 2
    r = _test_vmalloc(clock, nr_threads=workers, run_test_mask=1 << bit, test_loop_count=loops,
                      test_repeat_count=repeat, busy_lock=busy_lock, vmap_nodes=vmap_nodes)  # fmt: skip
    s = r.summary
    calls = workers * repeat
    allocs = calls * _allocs_per_call(test, loops)
    failed = calls if test == "align_shift_alloc_test" else 0
    assert (s[f"{test}_passed"], s[f"{test}_failed"], s[f"{test}_allocs"]) == (calls - failed, failed, allocs)
    assert s["allocs"] == allocs and s["frees"] == allocs and s["freed_at_teardown"] == 0
    assert s["map_pages"] and s["page_alloc_failures"] == 0
    rows = r.lockstat.set_index("class")
    assert rows.loc["vmap_area_lock" if vmap_nodes == 1 else "vn->busy.lock"].acquisitions == (k + 1) * allocs
    assert s["busy_lock_expected"] == (k + 1) * allocs and test in s["busy_lock_formula"]
    # One loop is one operation (align_shift: one alignment tried).
    per_call_ops = ALIGN_SHIFT_FITS + 1 if test == "align_shift_alloc_test" else loops
    assert list(r.workers.ops) == [repeat * per_call_ops] * workers
    lines = r.summary_lines()
    assert len(lines) == workers
    for line in lines:
        m = SUMMARY.match(line)
        assert m, line
        assert m.groups()[:5] == (test, str(repeat - failed // workers), str(failed // workers), str(repeat), "40")
    assert [f"{test}_avg_usec"] == [c for c in r.workers.columns if c.endswith("_avg_usec")]


def test_run_test_mask_selects_the_tests_and_lines_follow_the_kernels_order(clock):
    r = _test_vmalloc(clock, nr_threads=2, run_test_mask=1 | 8 | 32, test_loop_count=30)
    lines = r.summary_lines()
    names = [SUMMARY.match(line).group(1) for line in lines]
    # do_concurrent_test(): worker by worker, each worker's selected tests in test_case_array[] order.
    assert names == ["fix_size_alloc_test", "random_size_alloc_test", "random_size_align_alloc_test"] * 2
    s = r.summary
    assert s["allocs"] == 2 * 3 * 30
    for name in set(KERNEL_TESTS) - set(names):
        assert f"{name}_passed" not in s.index


def test_nr_threads_takes_the_place_of_threads():
    r = _test_vmalloc(nr_threads=3, run_test_mask=1, test_loop_count=10)
    assert len(r.workers) == 3 and len(r.summary_lines()) == 3
    assert len(_test_vmalloc(threads=3, run_test_mask=1, test_loop_count=10).workers) == 3
    with pytest.raises(ValueError, match=r"^nr_threads: 4 and threads 3 disagree"):
        _test_vmalloc(threads=3, nr_threads=4)


def test_nr_pages_sizes_fix_size_alloc_test():
    one = _test_vmalloc(threads=1, run_test_mask=1, test_loop_count=10, nr_pages=0)
    many = _test_vmalloc(threads=1, run_test_mask=1, test_loop_count=10, nr_pages=64)
    # One area per loop either way; its pages come from the buddy allocator, bulk, so 64 pages take refills.
    assert one.summary["allocs"] == many.summary["allocs"] == 10
    zone = many.lockstat.set_index("class")
    assert zone.loc["pcp->lock"].acquisitions > one.lockstat.set_index("class").loc["pcp->lock"].acquisitions


def test_virtual_summary_lines_are_deterministic_and_in_virtual_microseconds():
    params = dict(nr_threads=2, run_test_mask=127, test_loop_count=20, test_repeat_count=2)
    a = _test_vmalloc("virtual", **params)
    b = _test_vmalloc("virtual", **params)
    assert a.summary_lines() == b.summary_lines()
    assert len(a.summary_lines()) == 2 * 7
    avgs = [int(SUMMARY.match(line).group(6)) for line in a.summary_lines()]
    # full_fit's call maps 2 x 24576 pages: whole virtual milliseconds, not zero.
    full_fit = [int(SUMMARY.match(x).group(6)) for x in a.summary_lines() if "full_fit" in x]
    assert min(full_fit) >= 1000 and all(v >= 0 for v in avgs)
    assert (a.workers[[f"{t}_avg_usec" for t in KERNEL_TESTS[:7]]].to_numpy() >= 0).all()


def test_summary_lines_of_a_run_without_a_kernel_test_are_refused():
    r = _run(threads=1, ops=10)
    with pytest.raises(ValueError, match=r"^summary_lines: .*pattern='test_vmalloc'"):
        r.summary_lines()


@pytest.mark.parametrize(
    "params,message",
    [
        ({"run_test_mask": 2048}, r"^run_test_mask: 2048 sets bits beyond lib/test_vmalloc.c's 11 tests"),
        (
            {"run_test_mask": 2147483647},
            r"^run_test_mask: 2147483647 sets bits beyond .* \(allowed: a sum of 1 "
            r"fix_size_alloc_test, 2 full_fit_alloc_test, .*64 align_shift_alloc_test: "
            r"1\.\.127\)",
        ),
        (
            {"run_test_mask": 128},
            r"^run_test_mask: 128 selects pcpu_alloc_test \(128\), which the model cannot run: "
            r".*mm/percpu\.c",
        ),
        ({"run_test_mask": 1 | 256}, r"^run_test_mask: 257 selects kvfree_rcu_1_arg_vmalloc_test .*RCU"),
        ({"run_test_mask": 1024}, r"^run_test_mask: 1024 selects vm_map_ram_test .*vm_map_ram"),
        ({"run_test_mask": 0}, r"^run_test_mask: value out of range: 0 \(allowed: 1\.\.2147483647\)"),
        ({"test_loop_count": 0}, r"^test_loop_count: value out of range: 0 \(allowed: 1\.\.2147483647\)"),
        ({"test_repeat_count": 0}, r"^test_repeat_count: value out of range: 0"),
        ({"nr_pages": -1}, r"^nr_pages: value out of range: -1"),
        ({"nr_pages": 16, "vmalloc_size": 65536}, r"^nr_pages: 65536 bytes plus the guard page exceed vmalloc_size"),
        ({"pattern": "fix_size_alloc_test"}, r"^pattern: invalid value 'fix_size_alloc_test' .*'test_vmalloc'"),
    ],
)
def test_bad_test_vmalloc_input_names_the_parameter_and_what_is_allowed(params, message):
    with pytest.raises(ValueError, match=message):
        al.run("vmalloc_stress", **{"pattern": "test_vmalloc", **params})


def test_cli_prints_the_summary_lines(capsys):
    from alloclab.cli import main

    args = ["run", "vmalloc_stress", "pattern=test_vmalloc", "nr_threads=1", "run_test_mask=9", "test_loop_count=10"]
    assert main([*args, "--summary-lines"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [SUMMARY.match(line).group(1) for line in out if SUMMARY.match(line)] == [
        "fix_size_alloc_test",
        "random_size_alloc_test",
    ]
    assert main(["run", "vmalloc_stress", "ops=10", "--summary-lines"]) == 1
    assert "summary_lines: the vmalloc_stress run printed none" in capsys.readouterr().err
