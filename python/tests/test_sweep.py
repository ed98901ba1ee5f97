"""al.sweep: shape, columns, interleaving, error rows, detail tables, progress, meta data."""

from __future__ import annotations

import itertools

import pandas as pd
import pytest

import alloclab as al
from alloclab.sweep import KEY_COLUMNS, STATUS_COLUMNS, configurations

ITER = 300  # acquisitions per worker: enough to exercise the lock, short enough for a fast suite
GRID = {"lock": ["spin", "mcs"], "threads": [1, 2, 3]}


@pytest.fixture(scope="module")
def grid_sweep() -> al.SweepResult:
    return al.sweep("lock_zoo", grid=GRID, repeats=3, progress=False, detail=True, iterations=ITER)


def test_grid_2x3_with_3_repeats_gives_18_rows_with_the_right_columns(grid_sweep):
    df = grid_sweep.runs
    assert len(df) == 18
    summary_cols = list(al.run("lock_zoo", threads=1, iterations=10).summary.index)
    expected = [*KEY_COLUMNS, "lock", "threads", "iterations", *STATUS_COLUMNS, *summary_cols]
    assert list(df.columns) == expected
    assert (df["status"] == "ok").all()
    assert (df["error"] == "").all()
    assert (df["scenario"] == "lock_zoo").all()
    assert (df["iterations"] == ITER).all()
    assert df.groupby(["lock", "threads"]).size().tolist() == [3] * 6
    # every run did the work it was asked for: threads x iterations acquisitions
    assert (df["acquisitions"] == df["threads"] * ITER).all()
    assert (df["n_workers"] == df["threads"]).all()


def test_repeats_are_interleaved(grid_sweep):
    df = grid_sweep.runs
    assert df["run"].tolist() == list(range(18))
    assert df["repeat"].tolist() == [0] * 6 + [1] * 6 + [2] * 6
    assert df["config"].tolist() == list(range(6)) * 3
    order = list(itertools.product(GRID["lock"], GRID["threads"]))
    for r in range(3):
        part = df[df["repeat"] == r]
        assert list(zip(part["lock"], part["threads"], strict=True)) == order


def test_oversubscription_is_marked_per_row(grid_sweep):
    df = grid_sweep.runs
    host_pus = al.Topology.host().pus
    # More workers than host PUs is always oversubscribed; fewer may be too, when the host was busy meanwhile.
    assert df.loc[df["threads"] > host_pus, "oversubscribed"].all()


def test_detail_tables_are_keyed_by_run(grid_sweep):
    runs, workers, lockstat = grid_sweep.runs, grid_sweep.workers, grid_sweep.lockstat
    assert len(workers) == runs["threads"].sum()
    assert workers.groupby("run").size().tolist() == runs["threads"].tolist()
    merged = workers.merge(runs[["run", "lock", "threads"]], on="run", suffixes=("", "_runs"))
    assert (merged["lock"] == merged["lock_runs"]).all()
    assert (workers.groupby("run")["ops"].sum() == runs.set_index("run")["acquisitions"]).all()
    assert set(lockstat["run"]) == set(runs["run"])
    zoo = lockstat[lockstat["class"] == "lock_zoo"].set_index("run")
    assert (zoo["acquisitions"] == runs.set_index("run")["acquisitions"]).all()
    assert (zoo["kind"] == runs.set_index("run")["lock"]).all()


def test_meta_attrs_describe_the_sweep(grid_sweep):
    meta = grid_sweep.runs.attrs["alloclab"]
    assert meta is not None and meta == grid_sweep.meta
    assert meta["scenario"] == "lock_zoo"
    assert meta["grid"] == GRID
    assert meta["fixed"] == {"iterations": ITER}
    assert meta["repeats"] == 3 and meta["runs"] == 18 and meta["configs"] == 6
    assert meta["order"] == "interleaved"
    assert meta["status_counts"] == {"ok": 18}
    assert meta["provenance"]["host_pus"] == al.Topology.host().pus
    assert meta["provenance"]["model_description"] == "host"
    assert "started" not in meta["provenance"]
    assert sorted(meta["provenance_varying"]["workers"]) == [1, 2, 3]
    assert set(meta["defaults"]) == {"hold_ns", "think_ns", "locks_n", "lines"}
    assert meta["started"] <= meta["ended"]


def test_a_configuration_that_fails_in_its_run_becomes_an_error_row_and_the_others_run():
    # the placement lists two PUs: only the run, placing its workers, finds that 1 or 3 workers do not fit it
    df = al.sweep("lock_zoo", grid={"threads": [1, 2, 3], "lock": ["spin", "mcs"]}, progress=False, iterations=ITER,
                  placement=[0, 1])  # fmt: skip
    assert len(df) == 6
    bad = df["threads"] != 2
    assert df.loc[bad, "status"].tolist() == ["error"] * 4
    assert df.loc[~bad, "status"].tolist() == ["ok"] * 2
    assert df.loc[bad, "error"].str.startswith("ValueError: placement: the list has 2 PUs for").all()
    assert df.loc[bad, "acquisitions_per_s"].isna().all()
    assert (df.loc[~bad, "acquisitions"] == df.loc[~bad, "threads"] * ITER).all()
    assert df.loc[bad, "oversubscribed"].isna().all()
    # the row after an error ran: errors do not stop the sweep
    assert df["status"].tolist() == ["error", "error", "ok", "ok", "error", "error"]
    assert df.attrs["alloclab"]["status_counts"] == {"error": 4, "ok": 2}


@pytest.fixture()
def no_runs(monkeypatch):
    """Fails the test if a sweep starts a run."""

    def run(*args, **kwargs):
        raise AssertionError("a run started")

    monkeypatch.setattr("alloclab.cluster.run", run)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        # a grid value: the engine's message, naming the parameter, the value, the allowed ones and the closest
        (
            {"grid": {"lock": ["mcs", "tiket"]}},
            r"^lock: invalid value 'tiket' \(allowed: one of 'mutex', .*'shfllock'\); "
            r"did you mean 'ticket'\?$",
        ),
        ({"grid": {"threads": [1, 0]}}, r"^threads: value out of range: 0 \(allowed: 1\.\.1024\)$"),
        (
            {"grid": {"threds": [1, 2]}},
            r"^threds: unknown parameter of scenario 'lock_zoo' .*; did you mean 'threads'\?$",
        ),
        ({"iterations": 0}, r"^iterations: value out of range: 0"),  # a fixed parameter
        ({"grid": {"locks": [{"lock_zoo": "mcs"}, {"zone->lok": "mcs"}]}}, r"^locks: unknown lock class 'zone->lok'"),
        ({"grid": {"clock": ["real", "virtul"]}}, r"^clock: invalid value 'virtul'.*did you mean 'virtual'\?$"),
        ({"grid": {"seed": [1, -1]}}, r"^seed: value out of range: -1 \(allowed: 0\.\.9223372036854775807\)$"),
        ({"scenario": "lock_zo"}, r"^scenario: unknown scenario 'lock_zo' .*; did you mean 'lock_zoo'\?$"),
        # lock= and locks= naming two kinds for one class: a conflict, never a run relabelled
        (
            {"lock": "spin", "locks": {"lock_zoo": "ticket"}},
            r"^lock: 'spin' conflicts with locks\['lock_zoo'\]='ticket'",
        ),
        ({"grid": {"lock": ["ticket", "spin"]}, "locks": {"lock_zoo": "ticket"}}, r"^lock: 'spin' conflicts with"),
    ],
)
def test_every_value_is_checked_before_the_first_run(no_runs, kwargs, message):
    args = {"scenario": "lock_zoo", "progress": False, "iterations": ITER, **kwargs}
    with pytest.raises(ValueError, match=message):
        al.sweep(**args)


@pytest.mark.parametrize("values", [[1, 2], (1, 2), range(1, 3)])
def test_a_list_where_a_grid_belongs_is_told_to_use_grid(no_runs, values):
    with pytest.raises(
        ValueError, match=r"^threads: .* is several values, .*put it in the grid: grid=\{'threads': \[1, 2\]\}"
    ):
        al.sweep("lock_zoo", progress=False, threads=values)


def test_a_run_that_hits_its_timeout_is_a_stopped_row():
    df = al.sweep("lock_zoo", grid={"threads": [1]}, progress=False, iterations=10**9, timeout_s=0.05)
    assert df["status"].tolist() == ["stopped"]
    assert "timeout" in df["error"].iloc[0]
    assert 0 < df["acquisitions"].iloc[0] < 10**9


def test_run_options_can_be_grid_axes():
    df = al.sweep(
        "lock_zoo", grid={"topology": ["node:2 core:1 pu:1", "host"], "seed": [1, 2]}, progress=False, iterations=50
    )
    assert df["topology"].tolist() == ["node:2 core:1 pu:1"] * 2 + ["host"] * 2
    assert df["seed"].tolist() == [1, 2, 1, 2]
    assert (df["status"] == "ok").all()
    varying = df.attrs["alloclab"]["provenance_varying"]
    assert varying["model_description"] == ["node:2 core:1 pu:1", "host"]
    assert varying["seed"] == [1, 2]


def test_fixed_only_sweep_has_one_configuration():
    df = al.sweep("lock_zoo", repeats=2, progress=False, iterations=50, threads=1)
    assert df["config"].tolist() == [0, 0] and df["repeat"].tolist() == [0, 1]
    assert configurations(None) == [{}]
    assert configurations({"a": [1, 2], "b": "x"}) == [{"a": 1, "b": "x"}, {"a": 2, "b": "x"}]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scenario": "no_such_scenario"}, "unknown scenario"),
        ({"grid": {"threadz": [1, 2]}}, "threadz"),
        ({"grid": {"threads": []}}, "no values"),
        ({"repeats": 0}, "repeats"),
        ({"grid": {"threads": [1]}, "threads": 2}, "overlap"),
    ],
)
def test_mistakes_in_the_sweep_itself_raise(kwargs, message):
    args = {"scenario": "lock_zoo", "progress": False, **kwargs}
    with pytest.raises(ValueError, match=message):
        al.sweep(**args)


def test_progress_bar_shows_the_configuration_and_progress_false_is_silent(capsys):
    al.sweep("lock_zoo", grid={"threads": [1, 2]}, progress=True, iterations=50)
    err = capsys.readouterr().err
    assert "lock_zoo" in err and "threads=2" in err and "2/2" in err and "repeat 1/1" in err
    al.sweep("lock_zoo", grid={"threads": [1, 2]}, progress=False, iterations=50)
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


def test_quick_mode_reads_the_environment(monkeypatch):
    monkeypatch.delenv("ALLOCLAB_QUICK", raising=False)
    assert al.quick() is False and al.config.sized(10, 1) == 10
    monkeypatch.setenv("ALLOCLAB_QUICK", "1")
    assert al.quick() is True and al.config.sized(10, 1) == 1
    assert al.config.sized(10, 1, quick_mode=False) == 10
    monkeypatch.setenv("ALLOCLAB_QUICK", "0")
    assert al.quick() is False


def test_sweep_table_is_plain_dataframe():
    df = al.sweep("lock_zoo", progress=False, iterations=20, threads=1)
    assert type(df) is pd.DataFrame
