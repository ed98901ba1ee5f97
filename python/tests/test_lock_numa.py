"""The lock_numa study on a reduced grid: virtual runs are deterministic, so its figures are exact checks."""

from __future__ import annotations

import pandas as pd
import pytest

from alloclab.studies import lock_numa


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    part = lock_numa.project(
        "xeon-8380-2s", ["mcs", "cna", "cohort", "hmcs", "ticket"], [1, 16], iterations=100, progress=False
    )
    return lock_numa.summarize(part.runs, part.workers)


def test_nodes_used_come_from_where_the_workers_ran(table):
    used = table.groupby(["placement", "threads"])["nodes_used"].unique().map(list).to_dict()
    # 80 CPUs per node: compact keeps 16 workers on node 0, scatter deals them over both nodes.
    assert used == {("compact", 1): [1], ("compact", 16): [1], ("scatter", 1): [1], ("scatter", 16): [2]}


def test_cna_keeps_hand_offs_on_the_node_and_beats_mcs_when_scattered(table):
    at = table.set_index(["placement", "threads", "lock"])
    assert at.loc[("scatter", 16, "mcs"), "vs_mcs"] == 1.0
    assert (
        at.loc[("scatter", 16, "cna"), "handoff_local_share"]
        > 0.9
        > at.loc[("scatter", 16, "mcs"), "handoff_local_share"]
    )
    assert at.loc[("scatter", 16, "cna"), "vs_mcs"] > 1.0
    # On one node every hand-off is local, for every kind.
    assert (table.query("placement == 'compact' and threads == 16")["handoff_local_share"] == 1.0).all()


@pytest.mark.parametrize("kind", ["cohort", "hmcs"])
def test_cohort_kinds_keep_hand_offs_on_the_node_far_more_than_mcs_when_scattered(table, kind):
    # hmcs takes a free lock at the root alone (AHMCS's fast path) and releases it in root order: its share must
    # still stay far above MCS's, whose FIFO over a scattered queue hands off locally about half the time.
    at = table.set_index(["placement", "threads", "lock"])
    share = at.loc[("scatter", 16, kind), "handoff_local_share"]
    assert share > 0.9 > at.loc[("scatter", 16, "mcs"), "handoff_local_share"]
    assert share > at.loc[("scatter", 16, "mcs"), "handoff_local_share"] + 0.3


def test_winners_name_the_fastest_kind_per_span_and_ties():
    t = pd.DataFrame({
        "machine": "m", "placement": "scatter",
        "threads": [1, 1, 4, 4, 16, 16],
        "lock": ["a", "b"] * 3,
        "acquisitions_per_s": [100.0, 100.5, 300.0, 200.0, 310.0, 100.0],
    })  # fmt: skip
    assert lock_numa.winners(t) == ["fastest on m (scatter): every kind at 1, a at 4-16 CPUs"]
