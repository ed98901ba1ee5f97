"""Reproducibility: the seed is in every result, and single-worker runs of every scenario give the same counts.

Generic over ``al.scenarios()``: each scenario runs with its smallest sensible parameters (the worker-count
parameters ``threads``/``regions``/``multiplier`` set to 1, work amounts and sizes shrunk; see
``scenario_params.py``). Only integer figures and counts are compared (summary integers and booleans whose name
is not a time, lock_stat acquisitions per class, per-worker ops), never times.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from scenario_params import names, small_params

import alloclab as al

SCENARIOS = names()

#: Scenarios whose counts are not deterministic by design, with the reason. (None today.)
NOT_DETERMINISTIC: dict[str, str] = {}

# Per-worker columns that say where a worker ran, not what it did (the CPU actually used may change).
WORKER_NOT_COUNTS = {"cpu_used", "bind_ok", "bind_error"}
# Figures that are times or rates even when they happen to be whole numbers, and the flags of how the run was
# measured (whether its workers overlapped, whether it was long enough), which depend on the host, not the model.
TIME_LIKE = re.compile(r"(^|_)(ns|us|ms|s|elapsed|time|wait|hold|lat|per_s|p50|p99|rate|fairness|overlap|short)(_|$)")


def counts(r: al.RunResult) -> dict[Any, Any]:
    """The run's integer figures: summary ints and bools, lock_stat acquisitions per class, and the integer
    per-worker columns (ops, allocations, ...), leaving out times and where the worker ran."""
    out: dict[Any, Any] = {}
    for key, value in r.summary.items():
        if isinstance(value, (bool, int)) and not TIME_LIKE.search(str(key)):
            out[("summary", key)] = value
    for cls, acquisitions in zip(r.lockstat.get("class", []), r.lockstat.get("acquisitions", []), strict=True):
        out[("lockstat", cls, "acquisitions")] = int(acquisitions)
    for row in r.workers.to_dict("records"):  # ops and every other integer per-worker figure (allocs, digests...)
        for key, value in row.items():
            if key in WORKER_NOT_COUNTS or TIME_LIKE.search(str(key)) or isinstance(value, float):
                continue
            if isinstance(value, (bool, int)) or hasattr(value, "__index__"):
                out[("worker", int(row["worker"]), key)] = int(value)
    return out


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_single_worker_runs_give_identical_counts(scenario):
    if scenario in NOT_DETERMINISTIC:
        pytest.skip(f"{scenario}: counts are not deterministic by design: {NOT_DETERMINISTIC[scenario]}")
    params = small_params(scenario, workers=1)
    first = al.run(scenario, seed=12345, **params)
    second = al.run(scenario, seed=12345, **params)
    assert not first.stopped and not second.stopped
    assert len(first.workers) == 1, (
        f"{scenario} with {params} ran {len(first.workers)} workers; add its worker-count parameter to "
        "alloclab._catalogue.WORKER_PARAMS"
    )
    a, b = counts(first), counts(second)
    assert len(a) >= 2, f"{scenario}: too few integer figures to compare: {a}"
    assert a == b, {k: (a.get(k), b.get(k)) for k in a.keys() | b.keys() if a.get(k) != b.get(k)}


#: Where each allocating scenario reports the addresses it got: a per-worker ``alloc_digest`` (an order-sensitive
#: hash of every pfn or vmalloc address a worker allocated, with ``allocs_recorded``), or, for hugetlb_boot, whose
#: padata helpers fill one pool, the summary's ``pool_digest`` over the pool's free lists.
NO_ALLOCATIONS = {"lock_zoo"}
SUMMARY_DIGEST = {"hugetlb_boot": "pool_digest"}


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s not in NO_ALLOCATIONS])
def test_single_worker_runs_allocate_the_same_addresses_in_the_same_order(scenario):
    params = small_params(scenario, workers=1)
    first, second = (al.run(scenario, seed=99, **params) for _ in range(2))
    if scenario in SUMMARY_DIGEST:
        key = SUMMARY_DIGEST[scenario]
        assert first.summary["allocated"] > 0
        assert first.summary[key] == second.summary[key] != 0
        return
    assert (first.workers["allocs_recorded"] > 0).all(), first.workers
    assert first.workers["alloc_digest"].tolist() == second.workers["alloc_digest"].tolist()
    assert first.workers["allocs_recorded"].tolist() == second.workers["allocs_recorded"].tolist()


def test_the_digest_tells_different_allocation_sequences_apart():
    # page_alloc's "rand" pattern frees a random held block before each allocation: another seed, other addresses.
    params = {"threads": 1, "pattern": "rand", "iterations": 2000, "node_pages": 4096}

    def digest(seed: int) -> int:
        return int(al.run("page_alloc", seed=seed, **params).workers["alloc_digest"].iloc[0])

    assert digest(1) == digest(1) != digest(2)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_seed_is_in_every_result(scenario):
    params = small_params(scenario, workers=1)
    for seed in (0, 7, 2**63 - 1):
        assert al.run(scenario, seed=seed, **params).provenance["seed"] == seed


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_result_names_the_kernel_its_scenario_models(scenario):
    kernel = al.scenarios().query("scenario == @scenario")["kernel"].iloc[0]
    assert kernel.split(":")[0].startswith(("v", "none")), kernel  # a version ("v6.2", "v2.6.35") or "none: why"
    assert al.run(scenario, **small_params(scenario, workers=1)).provenance["kernel"] == kernel


def test_the_seed_is_in_every_sweep_row_and_saved_result(tmp_path):
    # two workers do not fit a placement of one PU: an error row
    df = al.sweep(
        "lock_zoo", grid={"threads": [1, 2]}, repeats=2, progress=False, seed=42, iterations=20, placement=[0]
    )
    assert df["status"].tolist() == ["ok", "error"] * 2
    assert df["seed"].tolist() == [42] * 4  # error rows too: the seed the run was asked for
    assert df.attrs["alloclab"]["options"]["seed"] == 42
    axis = al.sweep("lock_zoo", grid={"seed": [3, 4]}, progress=False, threads=1, iterations=20)
    assert axis["seed"].tolist() == [3, 4] and list(axis.columns).count("seed") == 1
    run = al.run("lock_zoo", seed=9, threads=1, iterations=20)
    data, meta = al.results.load(al.results.save(run, tmp_path))
    assert data["seed"].tolist() == [9] and meta["provenance"]["seed"] == 9
