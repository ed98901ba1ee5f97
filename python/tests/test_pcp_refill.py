"""pcp_refill and page_alloc through ``al.run``: exact lock counts, the seed's check placement, bad input."""

from __future__ import annotations

import math

import pytest
from conftest import on

import alloclab as al

# Four model CPUs on one node: pcp->high = low watermark / 4 < 512, so every order-9 free returns one block.
FOUR_CPUS = "node:1 core:4 pu:1"


def acquisitions(r: al.RunResult, cls: str) -> int:
    rows = r.lockstat[r.lockstat["class"] == cls]
    return int(rows["acquisitions"].sum()) if len(rows) else 0


def v62_bulk_frees(batch: int, high: int, order: int, count: int) -> tuple[int, int]:
    """mm/page_alloc.c v6.2, written out independently of the engine: refills and free_pcppages_bulk calls of
    one pcp that allocates ``count`` blocks of ``order`` (a pcp order), then frees them all."""
    nr = 1 << order
    per_refill = max(batch >> order, 2) if batch > 1 else batch
    refills = math.ceil(count / per_refill)
    blocks = refills * per_refill - count  # left on the list
    pages = blocks * nr
    free_factor = 0  # halved by every allocation: still 0 after them
    bulk = 0
    for _ in range(count):
        blocks += 1
        pages += nr
        free_high = bool(free_factor) and 0 < order <= 3
        h = 0 if free_high else high
        if pages >= h:
            if free_high:
                n = pages
            else:
                b = batch << free_factor
                if b < h - batch:
                    free_factor += 1
                n = min(max(b, batch), h - batch)
            c = min(pages, n)
            while c > 0 and blocks > 0:
                blocks -= 1
                c -= nr
                pages -= nr
            bulk += 1
    return refills, bulk


@pytest.mark.parametrize("check", ["in_lock", "after_unlock", "off"])
def test_order9_two_threads_exact_counts(check: str, clock: str) -> None:
    r = al.run("pcp_refill", **on(clock, FOUR_CPUS), threads=2, order=9, count=32, check=check)
    s = r.summary
    assert s["pcp_high"] < 512
    # Per worker: ceil(32 / 2) refills + 32 bulk returns.
    assert acquisitions(r, "zone->lock") == 2 * (16 + 32) == s["zone_lock_expected"]
    assert acquisitions(r, "pcp->lock") == 2 * 2 * 32
    assert s["pages_pulled"] == 64
    assert s["pages_checked_under_lock"] == (512 * 64 if check == "in_lock" else 0)
    assert s["pages_checked_after_unlock"] == (512 * 64 if check == "after_unlock" else 0)
    assert bool(s["lock_counts_exact"])
    assert s["check"].startswith("ok:")
    assert list(r.workers["ops"]) == [32, 32]
    assert list(r.workers["refills"]) == [16, 16]
    assert (r.workers["ns_per_alloc"] > 0).all()


@pytest.mark.parametrize("count", [1, 63, 64, 1000, 4321])
def test_order0_counts_match_an_independent_v62_model(count: int, clock: str) -> None:
    r = al.run("pcp_refill", **on(clock, "node:1 core:2 pu:1"), threads=2, order=0, count=count)
    s = r.summary
    threads = len(r.workers)
    refills, bulk = v62_bulk_frees(int(s["pcp_batch"]), int(s["pcp_high"]), 0, count)
    assert s["refills"] == threads * refills
    assert acquisitions(r, "zone->lock") == threads * (refills + bulk) == s["zone_lock_expected"]
    assert s["pages_checked_under_lock"] == threads * refills * 63


@pytest.mark.parametrize("order", [0, 2, 9])
def test_v67_batch_rule_counts_are_exact(order: int, clock: str) -> None:
    r = al.run("pcp_refill", **on(clock, "node:1 core:2 pu:1"), threads=2, order=order, count=2000 >> order | 32,
               batch_rule="v6.7")  # fmt: skip
    assert acquisitions(r, "zone->lock") == r.summary["zone_lock_expected"]
    assert bool(r.summary["lock_counts_exact"])


def test_orders_off_the_pcp_take_zone_lock_per_call() -> None:
    r = al.run("pcp_refill", topology=al.Topology.synthetic("node:1 core:2 pu:1"), threads=2, order=4, count=50)
    assert acquisitions(r, "zone->lock") == 2 * 2 * 50
    assert acquisitions(r, "pcp->lock") == 0


@pytest.mark.parametrize(
    ("params", "name"),
    [
        ({"order": 11}, "order"),
        ({"count": -1}, "count"),
        ({"count": 0}, "count"),
        ({"check": "sometimes"}, "check"),
        ({"batch_rule": "v5.10"}, "batch_rule"),
        ({"node_pages": 1000}, "node_pages"),
        ({"order": 9, "count": 1 << 20, "node_pages": 1 << 18}, "count"),  # more pages than the node holds
        ({"threads": 3}, "threads"),  # two workers would share a model CPU's pcp
        ({"node": 2}, "node"),
    ],
)
def test_bad_input_is_a_value_error_naming_the_parameter(params: dict, name: str) -> None:
    with pytest.raises(ValueError, match=rf"^{name}: "):
        al.run("pcp_refill", topology=al.Topology.synthetic("node:1 core:2 pu:1"), **params)


def test_more_memory_than_the_host_has_is_refused() -> None:
    with pytest.raises(
        ValueError, match=r"^memory: this run needs .* \(2 node\(s\) of 4294966272 pages .*\) but only "
    ):
        al.run("page_alloc", topology=al.Topology.synthetic("node:2 core:1 pu:1"), node_pages=(1 << 32) - 1024)


@pytest.mark.parametrize("pattern", ["bulk", "repeat", "rand"])
@pytest.mark.parametrize("order", [0, 9])
def test_page_alloc_patterns_run_and_return_every_page(pattern: str, order: int) -> None:
    r = al.run("page_alloc", topology=al.Topology.synthetic("node:2 core:1 pu:1"), threads=2, pattern=pattern,
               order=order, node_pages=1 << 15, iterations=500, share=0.25)  # fmt: skip
    s = r.summary
    assert s["alloc_failed"] == 0
    assert s["allocations"] == (2 * s["blocks_per_worker"] if pattern == "bulk" else 2 * 500)
    assert s["check"].startswith("ok:")
    assert s["alloc_ns"] > 0 and s["free_ns"] > 0
    assert set(r.workers["model_node"]) == {0, 1}


def test_page_alloc_repeat_stays_on_the_pcp() -> None:
    r = al.run("page_alloc", topology=al.Topology.synthetic("node:1 core:1 pu:1"), threads=1, pattern="repeat",
               iterations=5000, node_pages=1 << 15)  # fmt: skip
    assert r.summary["refills"] == 1
    assert acquisitions(r, "zone->lock") == 1
    assert r.summary["pcp_hit_share"] == 1.0


def test_study_is_registered_with_the_seed_table() -> None:
    from alloclab import studies

    study = studies.find("pcp_refill")
    assert study.seed == "pcp-refill-check-outside-lock" and study.scenarios == ("pcp_refill",)
    assert len(study.published.drop_duplicates(["order", "check", "threads"])) == 2 * 3 * 6


def test_study_table_puts_ours_beside_the_seed() -> None:
    from alloclab.studies import pcp_refill as study

    result = study.sweep_orders({9: 8, 0: 256}, [1, 2], 1, "node:1 core:2 pu:1", progress=False)
    table = study.summarize(result.runs)
    assert len(table) == 2 * 3 * 2 and bool(table["lock_counts_exact"].all())
    row = table[(table["order"] == 9) & (table["check"] == "after_unlock") & (table["threads"] == 2)].iloc[0]
    assert row["published_ns_per_alloc"] == 3484
    assert row["published_ratio_vs_in_lock"] == pytest.approx(3484 / 6685)
    assert row["pages_checked_under_lock"] == 0
    lines = study.reading(table)
    assert any("equal the documented formula" in line and line.endswith("yes") for line in lines)
