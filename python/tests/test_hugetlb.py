"""hugetlb_boot end to end: padata's nworks/chunk_size, exact lock counts, placement, out of memory, bad input,
and the study's tables. Counts and invariants only (never a wall-clock threshold)."""

from __future__ import annotations

import pytest
from conftest import on

import alloclab as al
from alloclab.studies import VIRTUAL_SEEDS, measure
from alloclab.studies import hugetlb as study


def kernel_plan(pages: int, nodes: int, k: int) -> tuple[int, int, int, int]:
    """padata_do_multithreaded's arithmetic for hugetlb_pages_alloc_boot (C integer division, left to right)."""
    max_threads = nodes * k
    min_chunk = pages // nodes // k
    if pages == 0:
        return max_threads, min_chunk, 0, 0
    nworks = min(max(pages // max(min_chunk, 1), 1), max_threads)
    if nworks == 1:
        return max_threads, min_chunk, 1, pages
    chunk = max(pages // (nworks * 4), min_chunk, 1)
    return max_threads, min_chunk, nworks, chunk


def test_scenario_is_listed_with_its_parameters():
    table = al.scenarios()
    params = set(table.loc[table["scenario"] == "hugetlb_boot", "parameter"])
    assert {"pages", "parallel", "multiplier", "numa_aware", "hugetlb_lock", "gigantic", "next_nid", "hvo_ns"} <= params


@pytest.mark.parametrize(
    ("topo", "nodes", "pages", "k"),
    [
        ("node:1 core:2 pu:1", 1, 512, 1),
        ("node:1 core:2 pu:1", 1, 512, 2),
        ("node:2 core:2 pu:1", 2, 301, 2),
        ("node:2 core:1 pu:1", 2, 17, 3),
        ("node:4 core:1 pu:1", 4, 400, 2),
    ],
)
def test_nworks_and_chunk_size_match_the_kernel(topo, nodes, pages, k):
    r = al.run("hugetlb_boot", topology=al.Topology.synthetic(topo), pages=pages, multiplier=k)
    max_threads, min_chunk, nworks, chunk = kernel_plan(pages, nodes, k)
    s = r.summary
    assert (s["max_threads"], s["min_chunk"], s["nworks"], s["chunk_size"]) == (max_threads, min_chunk, nworks, chunk)
    assert s["allocated"] == pages and not s["exhausted"]
    assert len(r.workers) == nworks
    assert r.workers["folios"].sum() == pages
    assert r.workers["chunks"].sum() == s["chunks"] == -(-pages // chunk)


@pytest.mark.parametrize("mode", ["per_worker", "per_folio"])
def test_hugetlb_lock_counts_are_exact(mode, clock):
    r = al.run("hugetlb_boot", **on(clock, "node:2 core:2 pu:1"), pages=400, multiplier=2, hugetlb_lock=mode)
    row = r.lockstat.set_index("class").loc["hugetlb_lock"]
    want = r.summary["nworks"] if mode == "per_worker" else 400  # 400 divides by 2 x 2: one chunk per worker
    assert r.summary["nworks"] == 4
    assert row.acquisitions == want == r.summary["hugetlb_lock_expected"]
    padata = r.lockstat.set_index("class").loc["padata_work_lock"]
    assert padata.acquisitions == r.summary["nworks"] + r.summary["chunks"]


@pytest.mark.parametrize(
    ("pages", "parallel", "want"),
    [
        (400, True, 4 * 2 * 25),  # 4 chunks of 100: 50 folios per (worker, node), 2 per refill
        (402, True, 3 * 2 * 25 + 2 * 26),  # a fifth chunk of 2: whichever worker runs it takes 51 per node
        (101, False, 26 + 25),  # serial: 51 on node 0, 50 on node 1
    ],
)
def test_zone_lock_is_exact_per_folio(pages, parallel, want, clock):
    r = al.run("hugetlb_boot", **on(clock, "node:2 core:2 pu:1"), pages=pages, multiplier=2, parallel=parallel)
    s = r.summary
    assert r.lockstat.set_index("class").loc["zone->lock"].acquisitions == want == s["zone_lock_expected"]
    assert s["zone_lock_acquisitions"] == want and s["lock_counts_exact"]
    assert s["zone_lock_per_folio"] == pytest.approx(want / pages)
    assert "ceil(folios / blocks)" in s["zone_lock_formula"]


def test_zone_lock_has_no_formula_for_a_racy_shared_cursor():
    r = al.run("hugetlb_boot", topology=al.Topology.synthetic("node:2 core:2 pu:1"), pages=400, next_nid="shared")
    s = r.summary
    assert s["zone_lock_expected"] is None and s["zone_lock_acquisitions"] > 0 and s["lock_counts_exact"]
    assert (
        s["zone_lock_formula"]
        == "no formula: the workers share h->next_nid_to_alloc, whose racy round-robin decides the nodes"
    )


def test_four_node_model_places_helpers_on_every_node_and_records_oversubscription():
    r = al.run("hugetlb_boot", topology=al.Topology.synthetic("node:4 core:2 pu:1"), pages=256, multiplier=2)
    assert len(r.workers) == 8
    assert set(r.workers["model_node"]) == {0, 1, 2, 3}
    assert r.provenance["oversubscribed"] or 8 <= r.provenance["host_pus"]
    assert "oversubscribed" in r.provenance and r.provenance["workers"] == 8
    off = al.run("hugetlb_boot", topology=al.Topology.synthetic("node:4 core:2 pu:1"), pages=256, numa_aware=False)
    assert set(off.workers["model_node"]) == {0}


def test_serial_is_one_worker():
    r = al.run("hugetlb_boot", topology=al.Topology.synthetic("node:2 core:1 pu:1"), pages=64, parallel=False)
    assert len(r.workers) == 1 and r.summary["nworks"] == 1 and r.summary["allocated"] == 64


def test_running_out_of_memory_is_a_smaller_pool():
    r = al.run("hugetlb_boot", topology=al.Topology.synthetic("node:2 core:1 pu:1"), pages=200, node_mib=64)
    assert r.summary["exhausted"] and 0 < r.summary["allocated"] < 200
    assert "Only allocated" in r.summary["warning"]


def test_gigantic_path(clock):
    r = al.run("hugetlb_boot", **on(clock, "node:2 core:1 pu:1"), pages=3, gigantic=True)
    s = r.summary
    assert s["allocated"] == 3 and s["nworks"] == 2 and s["folio_order"] == 18 and s["folio_kib"] == 1 << 20
    assert s["tails_written"] == 3 * ((1 << 18) - 1)  # every tail struct page of a 1 GiB folio, without HVO
    assert s["per_node_folios"] == "2,1"
    assert s["model_mib"] == (3 + 2) * 1024  # node 0: 2 GiB of folios + 1 GiB of headroom; node 1: 1 + 1 GiB
    locks = r.lockstat.set_index("class")
    assert locks.loc["hugetlb_lock"].acquisitions == 3 == s["hugetlb_lock_expected"]  # per folio, as patch 8
    assert "zone->lock" not in locks.index and s["zone_lock_expected"] == 0 and s["lock_counts_exact"]


@pytest.mark.parametrize(
    ("params", "name"),
    [({"multiplier": 0}, "multiplier"), ({"pages": -1}, "pages"), ({"nodes": 3}, "nodes"),
     ({"hugetlb_lock": "global"}, "hugetlb_lock")],
)  # fmt: skip
def test_bad_input_is_a_value_error_naming_the_parameter(params, name):
    with pytest.raises(ValueError, match=name):
        al.run("hugetlb_boot", topology=al.Topology.synthetic("node:2 core:1 pu:1"), **params)


def test_sweep_over_multiplier():
    df = al.sweep("hugetlb_boot", grid={"multiplier": [1, 2, 3]}, topology="node:1 core:3 pu:1", pages=300,
                  progress=False)  # fmt: skip
    assert (df["status"] == "ok").all()
    assert df["nworks"].tolist() == [1, 2, 3]


def test_study_is_registered_with_its_seed():
    assert study.SEED == "hugetlb-padata-parallel-init" and study.SCENARIOS == ("hugetlb_boot",)


def test_study_summary_and_answer_from_a_small_sweep():
    result = measure("hugetlb_boot", grid={"topology": ["node:2 core:3 pu:1"], "multiplier": [1, 2, 3]}, repeats=2,
                     pages=120, progress=False)  # fmt: skip
    table = study.summarize(result.runs)
    assert list(table["multiplier"]) == [1, 2, 3]
    assert {"elapsed_ms", "vs_1", "nworks", "oversubscribed", "published_ms_256G"} <= set(table.columns)
    assert table.loc[table["multiplier"] == 1, "vs_1"].iloc[0] == "baseline"
    # hugetlb_lock comes from the lock_stat run: one per thread_fn call (per chunk).
    assert table["hugetlb_lock"].tolist() == table["hugetlb_lock"].astype(int).tolist()
    assert (table["hugetlb_lock"] >= 1).all()
    answer = study.answer(table, host_pus=2)
    assert len(answer) == 2  # one line for the 2-node model, one on the seed's machines
    assert answer[0].startswith("2 node(s): ")


def test_headline_table_is_virtual_deterministic_and_beside_the_seed():
    runs = study.headline_runs((1 / 16384,))  # 64 and 32 folios, one run per seed
    seeds = len(VIRTUAL_SEEDS)
    assert runs["pages"].tolist() == [64] * 2 * seeds + [32] * 2 * seeds
    assert runs["lock_counts_exact"].all()
    nworks = runs[runs["parallel"]].groupby("machine", sort=False)["nworks"].unique().map(list).to_dict()
    assert nworks == {"256c2T(4 node)": [8], "128c1T(2 node)": [4]}  # max_threads = 2 x nodes
    assert (runs.loc[~runs["parallel"], "nworks"] == 1).all()
    again = study.headline_runs((1 / 16384,))
    assert again["elapsed_ms"].tolist() == runs["elapsed_ms"].tolist()
    table = study.headline(runs)
    assert table["machine"].tolist() == ["256c2T(4 node)", "128c1T(2 node)"]
    assert table["published_serial_ms"].tolist() == [3336.0, 1943.0]
    assert table["published_parallel_ms"].tolist() == [1051.0, 716.0]
    assert (table["ours_serial_ms"] == table["serial_ms"] * 16384).all()
    assert (table["linearity"] == 1.0).all()
    # Every seed's parallel run beats the serial one, so the saved share is a finding (5 vs 5: p = 0.0079).
    assert table["parallel_vs_serial"].str.endswith("(p=0.0079)").all(), table["parallel_vs_serial"].tolist()
    assert table["ours_saved"].tolist() == [f"{v:.2f} % (p=0.0079)" for v in table["ours_saved_pct"]]
    assert study.headline_notes(table)[0].startswith("256c2T(4 node) on assumed-epyc7763-2s-nps2 (256 CPUs, 4 nodes")
