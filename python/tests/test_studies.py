"""The study registry: discovery of one-file studies, lookup, the beside() helper, reproduce()'s output folder."""

from __future__ import annotations

import sys
import textwrap

import pandas as pd
import pytest

import alloclab as al
from alloclab import studies

FAKE = '''
"""A fake study for the registry tests."""
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

import alloclab as al
from alloclab.studies import StudyResult, beside

NAME = "fake_study"
TITLE = "fake: spin vs mcs at 1 thread"
SCENARIOS = ("fake_scenario",)
SEED = "fake-seed-patch"
PUBLISHED = pd.DataFrame({"lock": ["spin"], "acquisitions": [42]})


def run(quick: bool, out_dir: Path, progress: bool) -> StudyResult:
    sweep = al.sweep("lock_zoo", grid={"lock": ["spin", "mcs"]}, progress=progress, detail=True,
                     iterations=10 if quick else 1000, threads=1)
    ours = sweep.runs[["lock", "acquisitions"]]
    ax = Figure().subplots()
    ax.bar(ours["lock"], ours["acquisitions"])
    png = al.plot.savefig(ax, out_dir / "bars.png")
    return StudyResult(table=beside(ours, PUBLISHED, on=["lock"]), plots=[png], data=sweep, notes=["fake"])
'''


@pytest.fixture
def extra_studies(tmp_path, monkeypatch):
    """A second folder on the studies package path holding a new study file and a broken one."""
    (tmp_path / "fake_study.py").write_text(textwrap.dedent(FAKE))
    (tmp_path / "broken_study.py").write_text("raise RuntimeError('half-written')\n")
    (tmp_path / "_helper.py").write_text("raise RuntimeError('private modules are not studies')\n")
    monkeypatch.setattr(studies, "__path__", [*studies.__path__, str(tmp_path)])
    yield tmp_path
    for name in ("fake_study", "broken_study", "_helper"):
        sys.modules.pop(f"alloclab.studies.{name}", None)


def test_lock_zoo_is_registered():
    found, broken = studies.discover()
    assert "lock_zoo" in found and not broken
    study = found["lock_zoo"]
    assert study.scenarios == ("lock_zoo",) and study.seed is None
    assert len(study.published) == 0  # no seed patch: nothing published, nothing invented
    assert studies.find("lock_zoo") == study


def test_a_new_study_is_one_file_and_a_broken_one_hides_nothing(extra_studies):
    found, broken = studies.discover()
    assert "fake_study" in found and "lock_zoo" in found
    assert list(broken) == ["alloclab.studies.broken_study"]
    assert "half-written" in broken["alloclab.studies.broken_study"]
    assert studies.find("fake_scenario").name == "fake_study"  # found by the scenario it runs


def test_reproduce_writes_table_data_meta_and_plots(extra_studies, tmp_path):
    out = tmp_path / "results"
    done = studies.reproduce("fake_study", quick=True, out=out, progress=False, csv=True)
    assert done.out_dir.parent == out / "fake_study"
    names = {p.name for p in done.files}
    tables = {"table", "published", "data", "workers", "lockstat"}
    assert {f"{t}.parquet" for t in tables} | {"meta.json", "bars.png"} <= names
    assert {p.name for p in (done.out_dir / "csv").iterdir()} == {f"{t}.csv" for t in tables}  # --csv copies
    table = pd.read_parquet(done.out_dir / "table.parquet")
    pd.testing.assert_frame_equal(table, done.result.table.reset_index(drop=True))
    assert table.columns.tolist() == ["lock", "acquisitions", "published_acquisitions"]
    assert table["published_acquisitions"].tolist()[0] == 42 and pd.isna(table["published_acquisitions"][1])
    meta = al.results.load(done.out_dir).meta
    assert meta["study"]["seed"] == "fake-seed-patch" and meta["study"]["plots"] == ["bars.png"]
    assert meta["scenario"] == "lock_zoo" and meta["grid"] == {"lock": ["spin", "mcs"]}
    assert meta["study"]["notes"] == ["fake"]
    again = studies.reproduce("fake_study", quick=True, out=out, progress=False)
    assert again.out_dir != done.out_dir  # a second run in the same second gets its own folder


def test_find_unknown_lists_available():
    with pytest.raises(ValueError, match="lock_zoo"):
        studies.find("nope")


def test_beside_matches_on_keys():
    ours = pd.DataFrame({"regions": [1, 2, 3], "t": [7.0, 8.0, 9.0]})
    published = pd.DataFrame({"regions": [1, 3], "t": [7.1, 21.0]})
    out = studies.beside(ours, published, on=["regions"])
    assert out["regions"].tolist() == [1, 2, 3]
    assert out["published_t"].tolist()[0::2] == [7.1, 21.0] and pd.isna(out["published_t"][1])
    empty = studies.beside(ours, published.iloc[0:0], on=["regions"])
    assert empty["published_t"].isna().all() and len(empty) == 3


def test_lock_zoo_table_marks_oversubscription(tmp_path):
    from alloclab.studies import lock_zoo, measure

    result = measure("lock_zoo", grid={"lock": ["spin", "mcs"], "threads": [1, 2, 4]}, repeats=2, progress=False,
                     iterations=100, hold_ns=10)  # fmt: skip
    runs = result.runs
    # Two timed repeats without lock_stat, then one lock_stat run per configuration for the counts.
    assert runs.groupby("lockstat").size().to_dict() == {False: 12, True: 6}
    assert (runs.loc[runs["lockstat"], "repeat"] == 2).all()
    table = lock_zoo.summarize(runs, ["spin", "mcs"])
    assert table[["threads", "lock"]].values.tolist() == [
        [1, "spin"], [1, "mcs"], [2, "spin"], [2, "mcs"], [4, "spin"], [4, "mcs"]
    ]  # fmt: skip
    pus = al.Topology.host().pus
    over = table["oversubscribed"].fillna(False).astype(bool)
    assert over[table["threads"] > pus].all()
    assert table["published_acquisitions_per_s"].isna().all()
    assert table.loc[table["lock"] == "spin", "vs_spin"].tolist() == ["baseline"] * 3
    # Two repeats can never be a finding.
    assert table.loc[table["lock"] == "mcs", "vs_spin"].str.startswith("n.s.").all()
    # wait_per_hold comes from the lock_stat runs: measured even though the timed runs had lock_stat off.
    assert table["wait_per_hold"].notna().all()


def test_projected_puts_published_virtual_and_real_side_by_side():
    published = pd.DataFrame({"threads": [24], "ratio": [0.1]})
    virtual = pd.DataFrame({"threads": [1, 24], "ratio": [1.0, 0.2], "ns": [5.0, 9.0]})
    real = pd.DataFrame({"threads": [1], "ratio": ["n.s. (p=0.3)"]})
    table = studies.projected(["threads"], published=published, virtual=virtual, real=real,
                              workers=lambda row: int(row["threads"]))  # fmt: skip
    assert table.columns.tolist() == ["threads", "published_ratio", "virtual_ratio", "real_ratio", "published_ns",
                                      "virtual_ns", "real_ns", "real_note"]  # fmt: skip
    assert table["threads"].tolist() == [1, 24]
    assert table["real_ratio"].tolist()[0] == "n.s. (p=0.3)" and pd.isna(table["real_ratio"][1])
    pus = al.Topology.host().pus
    why = f"not run: 24 workers on {pus} host PUs would be oversubscribed" if pus < 24 else "not run on this host"
    assert table["real_note"].tolist() == ["", why]
    # A real sweep that ran an oversubscribed configuration (full sizes run it, flagged) still gives no figure there.
    ran = pd.DataFrame({"threads": [1, 24], "ratio": ["1.1x (p=0.008)", "0.5x (p=0.008)"]})
    table = studies.projected(["threads"], published=published, virtual=virtual, real=ran,
                              workers=lambda row: 1 if row["threads"] == 1 else pus + 1)  # fmt: skip
    assert table["real_ratio"].tolist()[0] == "1.1x (p=0.008)" and pd.isna(table["real_ratio"][1])
    assert table["real_note"].tolist() == [
        "",
        f"oversubscribed: {pus + 1} workers on {pus} host PUs, no figure (its runs are in data.parquet, flagged)",
    ]
    with pytest.raises(ValueError, match="real has several rows for one configuration"):
        studies.projected(["threads"], published=published, virtual=virtual, real=pd.concat([real, real]))


def test_virtual_part_refuses_a_failed_run(monkeypatch):
    # A virtual run with table costs repeats exactly: a failed one is an error of the study, never a missing point.
    def failing_sweep(scenario, *, grid, **kw):
        seeds = grid["seed"]
        return al.results.SweepResult(
            runs=pd.DataFrame({"seed": seeds, "status": ["ok"] * (len(seeds) - 1) + ["error"],
                               "error": [""] * (len(seeds) - 1) + ["ValueError: pages: too many"]}),
            workers=pd.DataFrame(), lockstat=pd.DataFrame(),
        )  # fmt: skip

    monkeypatch.setattr(sys.modules["alloclab.sweep"], "sweep", failing_sweep)
    with pytest.raises(RuntimeError, match=r"hugetlb_boot on m1: 1 virtual run\(s\) failed; first: ValueError: pages"):
        studies.virtual("hugetlb_boot", grid={}, machine="m1", progress=False)
