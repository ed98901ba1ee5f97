"""Resume matches what was really run, never deletes a saved row, and reruns nothing it holds.

The reproducers: a changed XML at the same path reused the old topology's rows; giving a default explicitly
(``hold_ns=0``) re-ran every row; a narrower grid deleted the other rows from disk; ``locks`` in another order or a
relative path to the same XML were refused; duplicate grid values re-ran a row on every resume.
"""

from __future__ import annotations

import importlib
import os

import pytest
from hwloc_xml import machine_xml

import alloclab as al

runs_module = importlib.import_module("alloclab.cluster")  # where a sweep makes its runs


@pytest.fixture
def runs(monkeypatch) -> list[dict]:
    """The keyword arguments of every run the sweeps of a test make."""
    calls: list[dict] = []
    real = runs_module.run

    def counting(scenario, **kwargs):
        calls.append(kwargs)
        return real(scenario, **kwargs)

    monkeypatch.setattr(runs_module, "run", counting)
    return calls


def test_a_default_given_explicitly_is_the_same_run(tmp_path, runs):
    al.sweep("lock_zoo", grid={"threads": [1, 2]}, progress=False, out=tmp_path, iterations=50)
    runs.clear()
    df = al.sweep("lock_zoo", grid={"threads": [1, 2]}, progress=False, out=tmp_path, resume=True, iterations=50,
                  hold_ns=0, lock="mcs")  # fmt: skip
    assert runs == [] and df.attrs["alloclab"]["reused_runs"] == 2
    # and the other way round, with a number written as a float
    df = al.sweep("lock_zoo", grid={"threads": [1.0, 2]}, progress=False, out=tmp_path, resume=True, iterations=50.0)
    assert runs == [] and df["threads"].tolist() == [1.0, 2]


def test_duplicate_grid_values_are_run_once_each_and_never_again(tmp_path, runs):
    al.sweep("lock_zoo", grid={"threads": [1, 1, 2]}, repeats=2, progress=False, out=tmp_path, iterations=50)
    assert len(runs) == 6
    for _ in range(2):
        runs.clear()
        df = al.sweep("lock_zoo", grid={"threads": [1, 1, 2]}, repeats=2, progress=False, out=tmp_path, resume=True,
                      iterations=50)  # fmt: skip
        assert runs == [] and df.attrs["alloclab"]["reused_runs"] == 6
        assert df["run"].tolist() == list(range(6))


def test_a_narrower_grid_keeps_the_other_rows_and_a_wider_one_reuses_them(tmp_path, runs):
    """Rows that no planned run takes stay in the directory (kept, with their detail rows), out of the result."""
    wide = al.sweep("lock_zoo", grid={"threads": [1, 2, 3]}, repeats=2, progress=False, detail=True, out=tmp_path,
                    iterations=50)  # fmt: skip
    runs.clear()
    narrow = al.sweep("lock_zoo", grid={"threads": [2]}, progress=False, detail=True, out=tmp_path, resume=True,
                      iterations=50)  # fmt: skip
    assert runs == [] and narrow.runs["threads"].tolist() == [2]
    loaded = al.results.load(tmp_path)
    assert loaded.data["threads"].tolist() == [2]
    assert sorted(loaded.kept["threads"].tolist()) == [1, 1, 2, 3, 3]  # repeat 1 of threads=2 too
    assert loaded.kept["run"].tolist() == list(range(5))
    assert sorted(loaded.kept_workers.groupby("run").size().tolist()) == [1, 1, 2, 3, 3]
    # The whole grid again: every row comes back from data and kept, with its worker rows; nothing runs.
    again = al.sweep("lock_zoo", grid={"threads": [1, 2, 3]}, repeats=2, progress=False, detail=True, out=tmp_path,
                     resume=True, iterations=50)  # fmt: skip
    assert runs == [] and again.meta["reused_runs"] == 6
    cols = ["threads", "repeat", "acquisitions"]
    assert again.runs[cols].values.tolist() == wide.runs[cols].values.tolist()
    assert again.workers["ops"].tolist() == wide.workers["ops"].tolist()
    assert al.results.load(tmp_path).kept is None


def test_locks_in_another_order_are_the_same_options(tmp_path, runs):
    locks = {"lock_zoo": "spin", "zone->lock": "ticket"}
    al.sweep("lock_zoo", grid={"threads": [1]}, progress=False, out=tmp_path, iterations=50, locks=locks)
    runs.clear()
    df = al.sweep("lock_zoo", grid={"threads": [1]}, progress=False, out=tmp_path, resume=True, iterations=50,
                  locks=dict(reversed(locks.items())))  # fmt: skip
    assert runs == [] and df.attrs["alloclab"]["reused_runs"] == 1
    with pytest.raises(ValueError, match="^resume: .* was swept with locks="):
        al.sweep("lock_zoo", grid={"threads": [1]}, progress=False, resume=tmp_path, iterations=50,
                 locks={"lock_zoo": "mcs"})  # fmt: skip


def test_a_topology_is_matched_by_what_it_is_not_by_its_path(tmp_path, runs, monkeypatch):
    xml = tmp_path / "machine.xml"
    xml.write_text(machine_xml([1, 1]))
    out = tmp_path / "sweep"
    al.sweep("lock_zoo", grid={"threads": [1, 2]}, progress=False, out=out, iterations=50,
             topology=al.Topology.from_xml(xml))  # fmt: skip
    runs.clear()
    # The same file by a relative path, and a synthetic description of the same machine: the same topology.
    monkeypatch.chdir(tmp_path)
    for same in (al.Topology.from_xml("machine.xml"), "node:2 pu:1"):
        df = al.sweep("lock_zoo", grid={"threads": [1, 2]}, progress=False, out=out, resume=True, iterations=50,
                      topology=same)  # fmt: skip
        assert runs == [] and df.attrs["alloclab"]["reused_runs"] == 2
    # The file changed at the same path: another machine, whose rows the resume does not take.
    xml.write_text(machine_xml([2, 2]))
    with pytest.raises(ValueError, match="^resume: .* was swept with topology="):
        al.sweep("lock_zoo", grid={"threads": [1, 2]}, progress=False, out=out, resume=True, iterations=50,
                 topology=al.Topology.from_xml(xml))  # fmt: skip
    assert runs == []


def test_a_topology_axis_is_matched_by_structure_too(tmp_path, runs):
    xml = tmp_path / "machine.xml"
    xml.write_text(machine_xml([1, 1]))
    out = tmp_path / "sweep"
    grid = {"topology": [al.Topology.from_xml(xml), "node:1 pu:2"]}
    al.sweep("lock_zoo", grid=grid, progress=False, out=out, iterations=50, threads=2)
    runs.clear()
    relative = al.Topology.from_xml(os.path.relpath(xml))
    al.sweep("lock_zoo", grid={"topology": [relative, "node:1 pu:2"]}, progress=False, out=out, resume=True,
             iterations=50, threads=2)  # fmt: skip
    assert runs == []
    xml.write_text(machine_xml([2, 2]))
    df = al.sweep("lock_zoo", grid={"topology": [al.Topology.from_xml(xml), "node:1 pu:2"]}, progress=False,
                  out=out, resume=True, iterations=50, threads=2)  # fmt: skip
    assert [r["topology"].pus for r in runs] == [4]  # the changed file's machine ran; the other row was reused
    assert df.attrs["alloclab"]["reused_runs"] == 1


def test_lock_stat_repeats_are_matched_with_lock_stat_on(tmp_path, runs):
    """The extra lock_stat repeats of a sweep that times without lock_stat are runs with lockstat=True, as their
    rows say: a resume finds them again."""
    al.sweep("lock_zoo", grid={"threads": [1, 2]}, progress=False, out=tmp_path, iterations=50, lockstat=False,
             lockstat_repeats=1)  # fmt: skip
    assert [r["lockstat"] for r in runs] == [False, False, True, True]
    runs.clear()
    df = al.sweep("lock_zoo", grid={"threads": [1, 2]}, progress=False, out=tmp_path, resume=True, iterations=50,
                  lockstat=False, lockstat_repeats=1)  # fmt: skip
    assert runs == [] and df.attrs["alloclab"]["reused_runs"] == 4


def test_a_machine_profile_is_matched_by_its_numbers(tmp_path, runs):
    """A virtual-clock sweep's machine, by name or as a loaded profile, is the same machine; another one is not."""
    al.sweep("lock_zoo", grid={"threads": [1, 2]}, progress=False, out=tmp_path, iterations=50, clock="virtual",
             machine="host")  # fmt: skip
    runs.clear()
    df = al.sweep("lock_zoo", grid={"threads": [1, 2]}, progress=False, out=tmp_path, resume=True, iterations=50,
                  clock="virtual", machine=al.machine("host"))  # fmt: skip
    assert runs == [] and df.attrs["alloclab"]["reused_runs"] == 2
    with pytest.raises(ValueError, match="^resume: .* was swept with machine='host'"):
        al.sweep("lock_zoo", grid={"threads": [1, 2]}, progress=False, out=tmp_path, resume=True, iterations=50,
                 clock="virtual", machine="xeon-8380-2s")  # fmt: skip
