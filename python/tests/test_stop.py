"""Stop means stop, in set-up and teardown too.

Every scenario's long set-up polls the run's stop (its interruption points: once per pageblock, area, folio or
lock): a timeout that expires there returns a stopped run that says so, without worker figures, and Ctrl-C there
raises KeyboardInterrupt through the same points. (The runner's side, and a Ctrl-C while the workers run ending the
teardown at its first interruption point, are tested in cpp/tests/test_lab.cpp without any clock.)
"""

from __future__ import annotations

import pytest
from scenario_params import names

import alloclab as al

# A set-up of thousands of interruption points for each scenario (a fraction of a second, a few MiB).
LONG_SET_UP = {
    "lock_zoo": {"locks_n": 4096},
    "pcp_refill": {},
    "page_alloc": {},
    "vmalloc_stress": {"pattern": "long_busy_list", "threads": 1},
    "hugetlb_boot": {},
    "shmem_fault": {},
    "cma_concurrent": {},
}


def test_every_scenario_is_covered():
    assert set(LONG_SET_UP) == set(names())


#: The run options of each clock (a virtual run's machine has a PU for every worker of these set-ups).
CLOCKS = {"real": {}, "virtual": {"clock": "virtual", "machine": "xeon-8380-2s"}}


@pytest.mark.parametrize("clock", sorted(CLOCKS))
@pytest.mark.parametrize("scenario", sorted(LONG_SET_UP))
def test_a_timeout_during_set_up_stops_it_and_says_so(scenario, clock):
    """The reproducers: shmem_fault ignored timeout_s=0.2 for 11.9 s of set-up, hugetlb_boot ran 3.15 s past it and
    said stopped=False. A timeout that expires during set-up now ends it at its next interruption point; the timeout
    is host time in either clock."""
    r = al.run(scenario, timeout_s=1e-6, **CLOCKS[clock], **LONG_SET_UP[scenario])
    assert r.stopped
    assert r.stop_reason == "timeout after 0.000001 s, during set-up (no worker ran)"
    assert r.workers.empty and r.lockstat.empty and r.summary.empty
    assert r.provenance["workers"] >= 1 and r.params
    assert r.scenario == scenario


def test_a_sweep_keeps_a_set_up_timeout_as_a_stopped_row():
    df = al.sweep("lock_zoo", grid={"locks_n": [4096]}, progress=False, timeout_s=1e-6)
    assert df["status"].tolist() == ["stopped"]
    assert df["error"].iloc[0].endswith("during set-up (no worker ran)")
