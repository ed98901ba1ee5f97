"""The seeds' claims as shapes (issue 19, item 3): each study's virtual part at its quick size on the seed's machine.

Virtual runs with ``costs="table"`` are a pure function of their inputs, so these cannot flake: a shape either
comes out of the mechanism or it does not. The bounds are the issue's, taken from the seeds' published figures; a
shape that does not come out with the shipped profiles is marked ``xfail(strict=True)`` with the figure measured,
never tuned (the profiles and the cost model are not this file's to change).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from alloclab.studies import VIRTUAL_SEEDS, cma, hugetlb, pcp_refill, shmem, vmalloc

#: The shapes that do not come out with the shipped profiles, each with what was measured (see the module docstring).
HUGETLB_4NODE_MISS = (
    "measured (simulator version 17: private L1D and L2 in every seed profile, medians over seeds 1-5, each a finding "
    "at p = 0.0079): 81.84 % at 1/1024 of the pool (serial 3997 ms, parallel 726 ms with 8 works), 80.32 % at 1/16 "
    "(4103 ms, 808 ms); the 2-node machine 72.16 % and 70.98 %. Version 16 (medians over seeds 1-5, each saved "
    "share a finding at p = 0.0079): 82.03 % at "
    "1/1024 of the pool (serial 3958 ms, parallel 711 ms with 8 works), 80.17 % at 1/16 (4082 ms, 810 ms), against "
    "the seed's 68.52 %; the 2-node machine 72.23 % and 70.94 % (seed 63.15 %, within the band). Earlier, "
    "measured (simulator version 10): saved 82.2 % against the seed's 68.5 % (serial 4004 ms, parallel 712 ms with 8 "
    "works, scaled from 1/1024 of the pool; 82.8 % at 1/16): the model's padata works do not slow each other down as "
    "the seed's did (thread time per folio 3.82 us serial -> 5.26 us with 8 works at 1/16; the seed's 3.18 -> 8.02 "
    "us). Version 9, whose prep_compound_page streamed at the update bandwidth (the tails are never read: a store "
    "stream), gave 78.3 %, within by 0.2 points, from a serial time 30 % short of the seed's (2337 ms). Same cause as"
    " MULTIPLIER_MISS. Simulator version 13 (LLC capacity) leaves the quick sizes as they were (a work's folios fit "
    "its LLC there); at 1/16 it gives 80.4 % (serial 4128 ms, parallel 807 ms). Version 15 (lock_stat free in virtual"
    " time, the streamer's page rule on node memory only): 82.2 % at 1/1024 (serial 3958 ms, parallel 704 ms), 80.4 %"
    " at 1/16 (4082 ms, 801 ms). Version 16 (the start order drawn from the seed): 82.2 % at 1/1024 (3958 ms, 706 ms),"
    " 80.1 % at 1/16 (4082 ms, 813 ms)"
)
MULTIPLIER_MISS = (
    "measured over seeds 1-5 (simulator version 17: private L1D and L2 in every seed profile; medians, every speedup "
    "a finding at p = 0.0079): at 4,096 folios of each pool the speedup over k = 1 at k = 2..5 is 1.97 / 2.84 / 3.68 "
    "/ 4.47 (256G and 50G alike), 2.00 / 2.86 / 3.53 / 4.05 (2T); at the full study's sizes 1.92 / 2.70 / 3.44 / "
    "4.11 (256G), 1.93 / 2.72 / 3.47 / 4.15 (50G), 1.88 / 2.58 / 3.04 / 3.37 (2T). Version 16 (medians, every "
    "speedup a finding at p = 0.0079): at 4,096 folios "
    "of each pool (MULTIPLIER_FOLIOS_QUICK) the speedup over k = 1 at k = 2..5 is 1.98 / 2.87 / 3.76 / 4.58 (256G and "
    "50G alike), 2.01 / 2.87 / 3.60 / 4.19 (2T); at the full study's sizes 1.92 / 2.71 / 3.47 / 4.13 (256G; seed 1.67"
    " / 2.28 / 2.67 / 2.84), 1.93 / 2.73 / 3.50 / 4.15 (50G; seed 1.61 / 1.92 / 2.37 / 2.29), 1.87 / 2.57 / 3.04 / "
    "3.38 (2T; seed 1.44 / 1.80 / 2.00 / 2.04). Seed 1 alone, "
    "measured at 4,096 folios of each pool (MULTIPLIER_FOLIOS_QUICK; simulator version 16, the start order drawn "
    "from the seed): speedup over k = 1 at k = 2..5 is 1.96 / 2.88 / 3.77 / 4.58 (256G and 50G alike), 2.03 / 3.02 / "
    "3.78 / 4.19 (2T; seed 1.44 / 1.80 / 2.00 / 2.04); at the full study's sizes 1.90 / 2.72 / 3.47 / 4.13 (256G; "
    "seed 1.67 / 2.28 / 2.67 / 2.84), 1.91 / 2.73 / 3.50 / 4.13 (50G; seed 1.61 / 1.92 / 2.37 / 2.29), 1.86 / 2.64 "
    "/ 3.03 / 3.40 (2T): against version 15 the 2T steps moved by up to 0.17 with the start order alone. "
    "Measured at 4,096 folios of each pool (MULTIPLIER_FOLIOS_QUICK; simulator version 15): speedup over k = 1 at "
    "k = 2..5 is 1.96 / 2.88 / 3.76 / 4.57 (256G and 50G alike), 2.03 / 2.84 / 3.85 / 4.33 (2T); at the full study's "
    "sizes 1.90 / 2.72 / 3.43 / 4.11 (256G), 1.91 / 2.73 / 3.47 / 4.16 (50G), 1.89 / 2.55 / 3.20 / 3.49 (2T). "
    "Measured at 4,096 folios of each pool (MULTIPLIER_FOLIOS_QUICK; simulator version 13): speedup over k = 1 at "
    "k = 2..5 is 1.96 / 2.88 / 3.74 / 4.56 (256G and 50G alike: the same machine and folios; seed 1.67 / 2.28 / 2.67 "
    "/ 2.84 and 1.61 / 1.92 / 2.37 / 2.29), 2.06 / 2.91 / 3.91 / 4.44 (2T; seed 1.44 / 1.80 / 2.00 / 2.04). Version "
    "13 models LLC capacity (cache_mib.llc): at the full study's sizes (65,536 folios, the 50G pool whole) each "
    "work's folios are cold when hugetlb_lock's walk enqueues them, and the speedups are 1.90 / 2.72 / 3.43 / 4.11 "
    "(256G; version 12 at 1/16: 1.98 / 2.92 / 3.84 / 4.75), 1.91 / 2.73 / 3.46 / 4.17 (50G; 1.98 / 2.94 / 3.83 / "
    "4.77), 1.92 / 2.64 / 3.25 / 3.56 (2T; 2.08 / 3.06 / 4.00 / 4.52): the serial walk is one DRAM miss per folio "
    "(2T: hugetlb_lock held 130 ns a folio, 8.5 ms in all, against 1.1 ms), a third of the seed's implied serial "
    "part (see below). "
    "Earlier: measured at 1/256 of each pool (simulator version 10): speedup over k = 1 at "
    "k = 2..5 is 1.96 / 2.87 / 3.77 / "
    "4.58 (256G; seed 1.67 / 2.28 / 2.67 / 2.84), 2.06 / 2.91 / 3.91 / 4.44 (2T; seed 1.44 / 1.80 / 2.00 / 2.04), "
    "1.89 / 2.59 / 3.24 / 3.93 (50G; seed 1.61 / 1.92 / 2.37 / 2.29): within 20 % at k = 2 only for 256G and 50G; the"
    " k = 1 times 336 / 1428 / 67 ms (seed 358 / 979 / 71). Version 9 (prep_compound_page's tails at the update "
    "bandwidth, roofline) gave 1.95 / 2.81 / 3.69 / 4.34, 1.96 / 2.49 / 2.89 / 3.02, 1.84 / 2.65 / 3.29 / 3.45; "
    "version 8 (line accesses plus the stream) 1.96 / 2.89 / 3.81 / 4.65, 2.03 / 2.90 / 3.78 / 4.62, 1.91 / 2.57 / "
    "3.22 / 4.07. The analysis below was made at version 8. The seed's thread time per folio grows linearly with its "
    "threads (2T: 3.73 -> 9.17 us from 4 to 20; 256G: 5.46 -> 9.61 us from 2 to 10), as if part of each folio were "
    "serialised: its times fit N (a / n + b), n threads (least squares over k = 1..5), with b = 0.48 us (256G), 0.33 "
    "us (2T), 0.74 us (50G); per node that is 1.8-1.9 us per folio on both machines at k = 5: 34-36 GB/s of struct-"
    "page traffic per node (511 tails x 128 B, write-allocate) or a zone->lock held 3.7-3.8 us per refill. The model "
    "has neither: zone->lock holds 1.2-1.5 us per refill on 2T (at most 49 % busy per node at k = 5), 0.5-0.7 us on "
    "256G (27 %); 5 streams per node get 14.1 of the 17.9 GB/s a core streams (2T), the 256G node's 160 GB/s never "
    "binds; thread time per folio 6.41 -> 6.93 us from k = 1 to 5 (2T). Checked against v6.9 (issue 19), none gives "
    "the serial part: a first-touch DRAM rule (a struct page no access reached yet pays dram_ns of its node) adds one"
    " miss per folio inside zone->lock, 0.12 us, saved 83.27 %, speedups within 0.24 (and it moves shmem's quick "
    "prealloc ratio to 0.498, below its band, so it is not shipped); on top of it, one DRAM miss per folio in "
    "hugetlb_lock's walk of each work's list (the heads are evicted by then: cache capacity, modelled since version "
    "13) gives "
    "saved 81.5 % and k = 5 speedups 4.15 / 3.60 / 3.65, and the global vm_zone_stat[NR_FREE_PAGES] fold of every "
    "order-9 refill adds 1.5 % at 2T k = 5; HVO flushes the TLB twice per padata work (batched: flush_tlb_all after "
    "the splits and at the end), not per folio; works on distinct cores instead of SMT siblings move times by < 0.3 "
    "%. A node bandwidth of 35 GB/s (tried, not shipped; the profiles' are 70.5 and 160) flattens the curve, 1.98 / "
    "2.52 / 2.70 / 2.82 (256G) and 1.96 / 2.49 / 2.74 / 2.85 (2T), but not the seed's 2T step at k = 2, and no source"
    " gives it"
)
VMALLOC_MISS = (
    "measured at 100 stress_ng_pthread operations per worker (simulator version 17: private L1D and L2 in every seed "
    "profile), once / twice - 1 over seeds 1-5: v6.7 +1.58 / +1.67 / +2.18 / +3.32 % at 40 / 80 / 120 / 160 vCPUs, "
    "each p = 0.0079, growing (test_vmalloc_v67_gain_is_positive_and_grows_with_vcpus passes); with vmap nodes "
    "-0.46 % at 160 and +0.00 % at 224, both n.s. (p = 0.69), as in version 16. At the full 2,000 operations: v6.7 "
    "+0.68 % (p = 0.0079), +1.18 % (p = 0.0079), +1.56 % (n.s., p = 0.095; per seed -1.42 to +2.38), +1.24 % (n.s., "
    "p = 0.15; per seed -1.29 to +3.42); vmap nodes -0.14 % (n.s., p = 1) and +1.83 % (n.s., p = 0.15). "
    "Version 16: measured at 100 operations, once / twice - 1 over seeds 1-5 "
    "(each seed another start order, so another interleaving; U-test once vs twice): v6.7 +2.14 / +1.50 / +2.32 / "
    "+3.33 % at 40 / 80 / 120 / 160 vCPUs, each p = 0.0079 (the seed: +0.5 / +0.8 / +5.2 / +5.5 %, growing; ours "
    "dips at 80); with vmap nodes -0.46 % at 160 and +0.00 % at 224, both n.s. (p = 0.69; the seed +0.6 / +4 %): at "
    "224 free_vmap_area_lock is contended on 22,399 of 22,400 acquisitions, so the run queues on it and the busy "
    "lock's second acquisition is off the critical path (+0.00 % in every seed at 224, in three of five at 160). "
    "At the full 2,000 operations: v6.7 +1.08 % (p = 0.0079), +1.00 % (p = 0.0079), +0.99 % (n.s., p = 0.095; "
    "per seed -0.25 to +1.30), -1.20 % (n.s., p = 0.31; per seed -3.30 to +0.15); vmap nodes +2.29 % (n.s., p = "
    "0.22) and +1.62 % (n.s., p = 0.095). So the model gains about 1 % at 40 and 80 vCPUs and nothing it can tell "
    "from another interleaving at 120 and 160, where the seed gains 5 %. Version 15, one run per point, read +0.51 / "
    "+0.90 / +0.81 / +2.69 % and -3.30 / +9.29 % at full size: single interleavings, which moved by as much with the "
    "run's length as they differed from each other. Since the free tree's subtree_max_size stores up a path overlap "
    "(simulator version 6), the global vmap_area_lock is the lock the CPUs queue on at 40-80 vCPUs, and the patch "
    "saves one of its hand-offs per allocation while its total hold stays the same; the seed's step from 80 to 120 "
    "vCPUs is not in the model"
)


@pytest.fixture(scope="module")
def cma_runs() -> pd.DataFrame:
    runs = cma.virtual_runs(cma.sizes(quick=True)["virtual_pages_per_region"]).runs
    assert runs["lock_counts_exact"].all()
    assert len(runs) == len(cma.VIRTUAL_REGIONS) * len(cma.VARIANTS) * len(VIRTUAL_SEEDS)
    return runs[runs["regions"] == 3].set_index("alloc_mutex")


def test_cma_global_mutex_finishes_three_areas_one_after_another(cma_runs):
    # The seed: ~7 / 14 / 21 s with the global cma_mutex, 3 areas on 3 nodes, 3 allocations at once; in every seed.
    times = cma_runs.loc[["global"], ["completion_s_1", "completion_s_2", "completion_s_3"]].to_numpy()
    assert times / times[:, :1] == pytest.approx(np.tile([1, 2, 3], (len(VIRTUAL_SEEDS), 1)), rel=0.10)


def test_cma_per_area_mutex_finishes_three_areas_together(cma_runs):
    # The seed: ~7 / 8 / 7 s with one alloc_mutex per area: slowest / fastest <= 1.2, in every seed.
    assert (cma_runs.loc[["per_area"], "ratio_slowest_fastest"] <= 1.2).all()


@pytest.fixture(scope="module")
def pcp_table() -> pd.DataFrame:
    runs = pcp_refill.virtual_runs(pcp_refill.VIRTUAL_COUNTS_QUICK).runs
    assert runs["lock_counts_exact"].all()
    return pcp_refill.summarize(runs)


@pytest.fixture(scope="module")
def pcp_ratio(pcp_table) -> pd.DataFrame:
    return pcp_refill.claim_figures(pcp_table).set_index(["order", "threads"])


def test_pcp_order9_patch_cuts_latency_more_with_more_cores(pcp_table, pcp_ratio):
    # The seed: patched / default 0.52 at 2 cores and 0.097 at 24 (order 9), each a finding over the seeds.
    ratio = pcp_ratio.loc[9, "patch_over_default"]
    assert ratio[2] <= 0.6 and ratio[24] <= 0.2
    found = pcp_refill.claim_findings(pcp_table).set_index(["order", "threads"])["patch_over_default"]
    assert not found[9][[2, 24]].str.startswith("n.s.").any(), found[9].to_dict()


def test_pcp_order9_default_latency_grows_about_linearly_with_cores(pcp_ratio):
    # The seed's default column, 2790 ns at 1 core to 90226 at 24, lies on a line (R^2 0.998); ours must too.
    default = pcp_ratio.loc[9, "default_ns"]
    assert default.is_monotonic_increasing
    cores, ns = default.index.to_numpy(float), default.to_numpy()
    assert np.corrcoef(cores, ns)[0, 1] ** 2 >= 0.98


def test_pcp_order0_patch_changes_little(pcp_ratio):
    # The seed: order 0 patched / default 0.90-1.00 at every core count; the band is 0.85-1.05.
    ratio = pcp_ratio.loc[0, "patch_over_default"]
    assert ((ratio >= 0.85) & (ratio <= 1.05)).all(), ratio.to_dict()


@pytest.fixture(scope="module")
def hugetlb_headline() -> pd.DataFrame:
    runs = hugetlb.headline_runs(hugetlb.HEADLINE_FRACTIONS_QUICK)
    assert runs["lock_counts_exact"].all()
    assert len(runs) == len(hugetlb.HEADLINE_MACHINES) * len(hugetlb.HEADLINE_FRACTIONS_QUICK) * 2 * len(VIRTUAL_SEEDS)
    return hugetlb.headline(runs).set_index("machine")


@pytest.mark.parametrize(
    "machine",
    [
        pytest.param("256c2T(4 node)", marks=pytest.mark.xfail(strict=True, reason=HUGETLB_4NODE_MISS)),
        "128c1T(2 node)",
    ],
)  # fmt: skip
def test_hugetlb_padata_saves_the_seeds_share(hugetlb_headline, machine):
    # The seed: saved 68.52 % on 256 cores / 4 nodes and 63.15 % on 128 cores / 2 nodes; within +-10 points, and a
    # finding over the seeds.
    row = hugetlb_headline.loc[machine]
    assert not row["ours_saved"].startswith("n.s."), row["ours_saved"]
    assert abs(row["ours_saved_pct"] - row["published_saved_pct"]) <= 10


@pytest.fixture(scope="module")
def hugetlb_multiplier() -> pd.DataFrame:
    runs = hugetlb.multiplier_runs(hugetlb.MULTIPLIER_FOLIOS_QUICK)
    assert runs["lock_counts_exact"].all()
    return hugetlb.speedups(runs)


@pytest.mark.xfail(strict=True, reason=MULTIPLIER_MISS)
@pytest.mark.parametrize("case", ["256G", "2T", "50G"])
def test_hugetlb_multiplier_speedups_follow_the_seeds_table(hugetlb_multiplier, case):
    # The seed's speedup over k = 1 at k = 2..5, within +-20 % for each of its three machines.
    ours = hugetlb_multiplier[hugetlb_multiplier["case"] == case].set_index("multiplier")
    assert ours.loc[2:, "significant"].all(), ours["speedup_vs_1"].to_dict()
    ours = ours["speedup"]
    seed = hugetlb.with_speedup(hugetlb.published_multiplier()).query("case == @case")
    seed = seed.set_index("multiplier")["speedup_vs_1"]
    assert (ours[2:] / seed[2:]).between(0.8, 1.2).all(), (ours / seed).round(3).to_dict()


@pytest.mark.parametrize("case", ["256G", "2T", "50G"])
def test_hugetlb_multiplier_biggest_step_is_one_to_two(hugetlb_multiplier, case):
    # The seed's table: the largest gain of any step is the first (k = 1 -> 2), as for every one of its machines.
    ours = hugetlb_multiplier[hugetlb_multiplier["case"] == case].set_index("multiplier")["ms"]
    steps = ours.shift(1) - ours
    assert steps.idxmax() == 2, steps.to_dict()


@pytest.fixture(scope="module")
def vmalloc_gain() -> pd.DataFrame:
    runs = vmalloc.virtual_runs(vmalloc.VIRTUAL_OPS_QUICK)
    assert runs["lock_counts_exact"].all()
    assert len(runs) == len(vmalloc.VIRTUAL_POINTS) * len(VIRTUAL_SEEDS) * 2
    return vmalloc.once_over_twice(runs).set_index(["shape", "vcpus"])


def test_vmalloc_v67_gain_is_positive_and_grows_with_vcpus(vmalloc_gain):
    # The seed: +0.5 %, +0.8 %, +5.2 %, +5.5 % at 40 / 80 / 120 / 160 vCPUs (v6.7, Ice Lake): a gain over the seeds'
    # interleavings at every point, growing.
    gain = vmalloc_gain.loc["v6.7"]
    assert gain["significant"].all(), gain["finding"].to_dict()
    assert (gain["once_over_twice"] > 1).all() and gain["once_over_twice"].is_monotonic_increasing, gain.to_dict()


@pytest.mark.xfail(strict=True, reason=VMALLOC_MISS)
def test_vmalloc_vmap_nodes_shrink_the_gain_until_224_vcpus(vmalloc_gain):
    # The seed: with vmap nodes +0.6 % at 160 vCPUs (v6.7 there: +5.5 %) and +4 % at 224: a gain at both points,
    # below v6.7's at 160 and larger at 224.
    v69, v67 = vmalloc_gain.loc["v6.9+"], vmalloc_gain.loc["v6.7"]
    assert v69["significant"].all() and (v69["once_over_twice"] > 1).all(), vmalloc_gain["finding"].to_dict()
    gain = v69["once_over_twice"]
    assert gain[160] < v67.loc[160, "once_over_twice"] and gain[224] > gain[160], vmalloc_gain.to_dict()


@pytest.fixture(scope="module")
def shmem_ratio() -> pd.Series:
    table = shmem.projection(quick=True).set_index("variant")
    found = table[f"vs_{shmem.BASELINE}"].drop(shmem.BASELINE)
    assert not found.str.startswith("n.s.").any(), found.to_dict()
    return table["elapsed_s"] / table.loc[shmem.BASELINE, "elapsed_s"]


def test_shmem_prealloc_takes_the_seeds_share_of_lock_twice(shmem_ratio):
    # The seed: ~12 s / ~20 s = 0.6 at 64 threads, disjoint; the band is 0.5-0.75.
    assert 0.5 <= shmem_ratio["prealloc"] <= 0.75


def test_shmem_ramfs_is_faster_than_prealloc(shmem_ratio):
    # The seed: ramfs ~10.5 s, below prealloc's ~12 s (0.525 vs 0.6 of lock_twice).
    assert shmem_ratio["ramfs"] < shmem_ratio["prealloc"]
