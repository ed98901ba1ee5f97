"""shmem_fault end to end: exact info->lock / tree_lock counts per variant, the page cache after disjoint and
overlap, mmap_sem's read row (a real rwsem), bad input, and the study (quick)."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import on

import alloclab as al
from alloclab import studies
from alloclab.studies import shmem as shmem_study

VARIANTS = ["lock_twice", "prealloc", "ramfs", "modern"]
TREE_LOCK = {"modern": "mapping->i_pages"}  # the xa_lock today; mapping->tree_lock in 2.6.35


def info_lock_expected(variant: str, misses: int, index_allocs: int, new_pages: int) -> int:
    """The model's promise: info->lock per page-cache miss, plus one retake per index page shmem_swp_alloc made."""
    return {
        "lock_twice": 2 * misses + index_allocs,
        "prealloc": misses + index_allocs,
        "ramfs": 0,
        "modern": new_pages,
    }[variant]


def index_pages(n: int) -> int:
    """2.6.35's swap-vector index pages for indices [0, n): i_indirect + one leaf per 512 (single-indirect half)."""
    if n <= 16:
        return 0
    leaves = -(-(n - 16) // 512)
    assert leaves <= 256  # these tests stay in the single-indirect half
    return 1 + leaves


def acquisitions(r: al.RunResult, cls: str) -> int:
    rows = r.lockstat[r.lockstat["class"] == cls]
    return int(rows["acquisitions"].iloc[0]) if len(rows) else 0


def test_scenario_is_listed_with_its_parameters():
    table = al.scenarios()
    params = set(table.loc[table["scenario"] == "shmem_fault", "parameter"])
    assert {"threads", "variant", "pages_per_thread", "pattern", "backing", "clear_ns", "fault_ns"} <= params


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_disjoint_counts_are_exact(variant, threads, clock):
    per = 1500
    n = per * threads
    r = al.run("shmem_fault", **on(clock, "node:1 core:4 pu:1"), variant=variant, threads=threads,
               pages_per_thread=per, backing="none")  # fmt: skip
    s = r.summary
    assert s["faults"] == n and s["new_pages"] == n and s["pagecache_pages"] == n
    assert s["cache_hits"] == 0 and s["eexist_races"] == 0
    assert s["index_pages"] == (index_pages(n) if variant in ("lock_twice", "prealloc") else 0)
    assert s["index_page_allocs"] - s["index_pages_freed"] == s["index_pages"]
    info = info_lock_expected(variant, n, s["index_page_allocs"], n)
    assert s["info_lock_acquisitions"] == info
    assert acquisitions(r, "info->lock") == info
    assert s["info_lock_per_fault"] == pytest.approx(info / n)
    assert acquisitions(r, TREE_LOCK.get(variant, "mapping->tree_lock")) == n
    assert acquisitions(r, "lru_lock") == s["lru_lock_acquisitions"]
    rows = r.lockstat.set_index("class")
    mm = rows.loc["mmap_sem-R"]  # a real rwsem taken for read on every fault: only its read row, as lock_stat prints it
    assert "mmap_sem" not in rows.index and "mmap_sem-W" not in rows.index
    assert mm["kind"] == "rwsem" and mm["acquisitions"] == n and mm["contentions"] == 0
    assert s["mmap_sem_read_acquisitions"] == s["mmap_sem_read_expected"] == s["faults"]
    assert bool(s["lock_counts_exact"]) and s["check"].startswith("ok")
    assert list(r.workers["ops"]) == [per] * threads
    assert (r.workers["faults"] == per).all()


def test_mmap_sem_is_a_real_rwsem_and_any_kind_can_stand_in_for_it(clock):
    kinds = al.lock_kinds().set_index("kind")
    assert kinds.loc["rwsem", "read_side"] and not kinds.loc["mcs", "read_side"]
    classes = al.lock_classes().set_index("class")
    assert classes.loc["mmap_sem", "nature"] == "rwsem" and classes.loc["mmap_sem", "default_kind"] == "rwsem"
    # On a kind without a read side every fault takes mmap_sem exclusively: still one read acquisition per fault.
    r = al.run("shmem_fault", **on(clock, "node:1 core:4 pu:1"), variant="modern", threads=2, pages_per_thread=500,
               backing="none", locks={"mmap_sem": "mcs"})  # fmt: skip
    mm = r.lockstat.set_index("class").loc["mmap_sem-R"]
    assert mm["kind"] == "mcs" and mm["acquisitions"] == r.summary["faults"] == 1000
    assert bool(r.summary["lock_counts_exact"])


@pytest.mark.parametrize("variant", VARIANTS)
def test_each_variant_runs_the_page_allocator_of_its_kernel(variant, clock):
    r = al.run("shmem_fault", **on(clock, "node:1 core:4 pu:1"), variant=variant, threads=1, pages_per_thread=1500,
               backing="none")  # fmt: skip
    s = r.summary
    batch = s["pcp_batch"]
    data, index = s["page_allocs"], s["index_page_allocs"]
    # One thread, nothing freed: each pcp list (movable data pages, unmovable index pages) refills batch at a time.
    refills = -(-data // batch) + -(-index // batch)
    assert s["zone_lock_acquisitions"] == refills
    if variant == "modern":
        assert "modern: v6.19" in r.provenance["kernel"]
        assert s["pages_checked_at_prep"] == 0 and s["pages_checked_under_lock"] == refills * batch
    else:
        assert r.provenance["kernel"].startswith("v2.6.35")
        assert s["pcp_high"] == 6 * batch  # setup_pageset
        # check_new_page once per page handed out, outside zone->lock; nothing checked inside rmqueue_bulk
        assert s["pages_checked_at_prep"] == data + index and s["pages_checked_under_lock"] == 0
    assert bool(s["lock_counts_exact"])


def test_each_variant_runs_the_lock_kinds_of_its_kernel():
    # 2.6.35 on x86: every spinlock_t is a ticket spinlock; the modern variant keeps the lab's defaults (qspinlock).
    # The user's locks= wins over the scenario's kernel.
    def kinds(variant, **kw):
        r = al.run("shmem_fault", clock="virtual", machine="nehalem-ex-4s-64t", threads=2, variant=variant,
                   pages_per_thread=64, backing="none", **kw)  # fmt: skip
        return r.lockstat.set_index("class")["kind"].to_dict()

    spinlocks = ["info->lock", "mapping->tree_lock", "lru_lock", "zone->lock", "pcp->lock"]
    for variant in ("lock_twice", "prealloc"):
        assert {c: kinds(variant)[c] for c in spinlocks} == dict.fromkeys(spinlocks, "ticket")
        assert kinds(variant)["mmap_sem-R"] == "rwsem"  # another nature keeps the lab's default
    assert kinds("ramfs")["mapping->tree_lock"] == "ticket" and "info->lock" not in kinds("ramfs")
    modern = kinds("modern")
    assert modern["info->lock"] == modern["mapping->i_pages"] == modern["zone->lock"] == "qspinlock"
    assert kinds("prealloc", locks={"info->lock": "qspinlock"})["info->lock"] == "qspinlock"
    assert kinds("modern", locks={"info->lock": "ticket"})["info->lock"] == "ticket"


def test_virtual_lock_sections_pay_the_transfer_of_what_they_touch():
    # Two workers on the seed's 4-socket profile, same socket (PUs 0 and 2) or two sockets (0 and 16): each
    # info->lock section takes mapping->tree_lock and writes the radix tree's upper nodes and mapping->nrpages, which
    # the other CPU wrote last (the inode's own first line comes with info->lock), so the holds are longer when that
    # CPU is a socket away. Virtual runs are deterministic.
    def hold_ns(placement):
        r = al.run("shmem_fault", clock="virtual", machine="nehalem-ex-4s-64t", threads=2, placement=placement,
                   variant="lock_twice", pages_per_thread=600, backing="none")  # fmt: skip
        return r.lockstat.set_index("class").loc["info->lock", "holdtime_total_ns"]

    near, far = hold_ns([0, 2]), hold_ns([0, 16])
    assert far > near
    assert hold_ns([0, 16]) == far  # the same inputs, the same virtual times


def test_info_lock_per_fault_is_two_one_zero_one_with_one_thread():
    n = 16  # i_direct only: no index page, so the ratios are exactly 2 / 1 / 0 / 1
    got = {
        v: al.run("shmem_fault", variant=v, threads=1, pages_per_thread=n, backing="none").summary[
            "info_lock_per_fault"
        ]
        for v in VARIANTS
    }
    assert got == {"lock_twice": 2.0, "prealloc": 1.0, "ramfs": 0.0, "modern": 1.0}


@pytest.mark.parametrize("variant", VARIANTS)
def test_overlap_inserts_every_index_once_and_leaks_nothing(variant):
    threads, per = 2, 2000
    n = threads * per
    r = al.run("shmem_fault", variant=variant, threads=threads, pages_per_thread=per, pattern="overlap")
    s = r.summary
    assert s["file_pages"] == n and s["pagecache_pages"] == n and s["new_pages"] == n
    assert s["touches"] == threads * n
    misses = s["new_pages"] + s["eexist_races"]
    assert s["faults"] == misses + s["cache_hits"]
    assert s["page_allocs"] - s["page_allocs_unused"] == n  # every losing page went back
    assert s["info_lock_acquisitions"] == info_lock_expected(variant, misses, s["index_page_allocs"], n)
    assert acquisitions(r, "info->lock") == s["info_lock_acquisitions"]
    assert acquisitions(r, TREE_LOCK.get(variant, "mapping->tree_lock")) == misses
    assert bool(s["lock_counts_exact"]) and s["check"].startswith("ok")
    assert "after teardown ok" in s["check"]  # every page back in the allocator after munmap + truncate


def test_lockstat_off_keeps_the_counts():
    r = al.run("shmem_fault", variant="prealloc", threads=2, pages_per_thread=1000, backing="none",
               clear_ns=200, fault_ns=100, lockstat=False)  # fmt: skip
    assert len(r.lockstat) == 0
    # The formula's count is kept; lock_stat's is not measured, and nothing claims the counts were checked.
    assert r.summary["info_lock_expected"] == 2000 + r.summary["index_page_allocs"]
    assert r.summary["info_lock_acquisitions"] is None and r.summary["lock_counts_exact"] is None


def test_two_nodes_scatter():
    topo = al.Topology.synthetic("node:2 core:2 pu:1")
    r = al.run("shmem_fault", topology=topo, placement="scatter", threads=4, pages_per_thread=800,
               variant="modern", backing="none")  # fmt: skip
    assert sorted(r.workers["model_node"]) == [0, 0, 1, 1]
    assert r.summary["pagecache_pages"] == 3200 and bool(r.summary["lock_counts_exact"])


@pytest.mark.parametrize(
    ("params", "word"),
    [
        ({"variant": "lock_thrice"}, "variant"),
        ({"pattern": "random"}, "pattern"),
        ({"pages_per_thread": 0}, "pages_per_thread"),
        ({"threads": 64, "pages_per_thread": 2_000_000}, "pages_per_thread"),
        ({"backing": "real", "clear_ns": 300}, "clear_ns"),
        ({"backing": "maybe"}, "backing"),
        ({"fault_ns": -1}, "fault_ns"),
    ],
)
def test_bad_input_is_value_error(params, word):
    with pytest.raises(ValueError, match=word):
        al.run("shmem_fault", **params)


def test_more_memory_than_the_host_has_is_refused_before_allocating():
    with pytest.raises(ValueError, match=r"^memory: this run needs .* but only .* are available"):
        al.run("shmem_fault", threads=1, pages_per_thread=60_000_000)


def test_the_study_is_registered_with_the_seed_figures():
    study = studies.find("shmem_fault")
    assert study.name == shmem_study.NAME and study.seed == "shmem-prealloc-fault"
    assert set(study.published["pattern"]) == {"disjoint"}  # the seed published no overlap figures
    ratios = shmem_study.published_ratios().set_index("variant")["ratio_vs_lock_twice"]
    assert ratios.to_dict() == pytest.approx({"lock_twice": 1.0, "prealloc": 0.6, "ramfs": 0.525})


def test_the_study_runs_quick(tmp_path):
    run = studies.reproduce("shmem_fault", quick=True, out=tmp_path, progress=False)
    table = run.result.table
    names = {p.name for p in run.files}
    assert {"table.parquet", "published.parquet", "data.parquet", "meta.json", "ratios.png", "lockstat.png"} <= names
    assert set(table["variant"]) == set(VARIANTS) and set(table["pattern"]) == {"disjoint", "overlap"}
    assert table["lock_counts_exact"].all()
    base = table[table["variant"] == "lock_twice"]
    assert (base["vs_lock_twice"] == "baseline").all()
    # Three quick repeats are never a finding: every comparison says n.s. and why.
    assert table.loc[table["variant"] != "lock_twice", "vs_lock_twice"].str.startswith("n.s. (").all()
    seed = table[(table["pattern"] == "disjoint") & (table["variant"] == "prealloc")]
    assert (seed["published_elapsed_s"] == 12.0).all()
    one = table[(table["pattern"] == "disjoint") & (table["threads"] == 1)].set_index("variant")
    assert one.loc["lock_twice", "info_lock_per_fault"] > 2.0 > one.loc["prealloc", "info_lock_per_fault"] > 1.0
    assert one.loc["ramfs", "info_lock_per_fault"] == 0.0 and one.loc["modern", "info_lock_per_fault"] == 1.0
    if 2 <= al.Topology.host().pus:
        assert any(line.startswith("2 threads, disjoint: prealloc median") for line in run.result.notes)


def test_issue_check_and_the_claim_read_the_medians_and_the_finding():
    table = pd.DataFrame(
        {
            "pattern": ["disjoint", "disjoint"],
            "threads": [2, 2],
            "variant": ["lock_twice", "prealloc"],
            "elapsed_s": [0.2, 0.1],
            "vs_lock_twice": ["baseline", "0.5x (p=0.0079)"],
        }
    )
    assert shmem_study.issue_check(table) == (
        "2 threads, disjoint: prealloc median 100.00 ms vs lock_twice 200.00 ms: 0.5x (p=0.0079)"
    )
    assert shmem_study.claim(table, quick=True) == []
    table.loc[1, ["elapsed_s", "vs_lock_twice"]] = [0.3, "n.s. (p=0.4)"]
    assert shmem_study.claim(table, quick=True) == [
        "!! this quick run points AGAINST the seed's claim (prealloc is faster than lock_twice at 2 threads, "
        "disjoint): n.s. (p=0.4) -- not a result; see the flags above"
    ]
