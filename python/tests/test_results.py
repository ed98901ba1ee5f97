"""al.results: save/load round trips (Parquet keeps every column type) with every provenance key; CSV exports."""

from __future__ import annotations

import json
import platform
import shutil
import socket
import subprocess

import numpy as np
import pandas as pd
import pytest

import alloclab as al
from alloclab.results import PROVENANCE_KEYS, _git_state


@pytest.fixture(scope="module")
def sweep_with_error() -> al.SweepResult:
    return al.sweep(
        "lock_zoo", grid={"threads": [1, 2, 3], "lock": ["spin", "mcs"]}, repeats=2, progress=False, detail=True,
        iterations=200, hold_ns=10, placement=[0, 1, 0],  # 1 and 2 workers do not fit the placement: error rows
    )  # fmt: skip


def test_sweep_round_trip_keeps_data_detail_and_provenance(tmp_path, sweep_with_error):
    path = al.results.save(sweep_with_error, tmp_path / "out")
    assert path == tmp_path / "out"
    assert sorted(p.name for p in path.iterdir()) == sorted(
        [".alloclab.lock", "manifest.json", "meta.json", "data.parquet", "workers.parquet", "lockstat.parquet"]
    )
    loaded = al.results.load(path)
    pd.testing.assert_frame_equal(loaded.data, sweep_with_error.runs)
    pd.testing.assert_frame_equal(loaded.workers, sweep_with_error.workers)
    pd.testing.assert_frame_equal(loaded.lockstat, sweep_with_error.lockstat)
    data, meta = loaded  # unpacks as (data, meta)
    assert data is loaded.data and meta is loaded.meta
    assert data.attrs["alloclab"] == meta

    for key in PROVENANCE_KEYS:
        assert key in meta, key
    assert meta["kind"] == "sweep" and meta["scenario"] == "lock_zoo"
    assert meta["grid"] == {"threads": [1, 2, 3], "lock": ["spin", "mcs"]}
    assert meta["fixed"] == {"iterations": 200, "hold_ns": 10}
    assert meta["model_topology"] == "host"
    assert meta["host_topology"].startswith("Machine")
    assert meta["placement"] == "list"
    host_pus = al.Topology.host().pus
    ok = sweep_with_error.runs[sweep_with_error.runs["status"] == "ok"]
    assert meta["binding"]["workers"] == int(ok["threads"].sum())
    assert meta["binding"]["all_bound"] is True
    # Oversubscription is what happened: more workers than PUs always, fewer too when the host was busy.
    over = ok["oversubscribed"].astype(bool)
    assert over[ok["threads"] > host_pus].all()
    assert meta["oversubscribed"] is bool(over.any())
    assert meta["binding"]["oversubscribed_runs"] == int(over.sum())
    assert all("lock_zoo=" in kinds for kinds in meta["lock_kinds"])  # varies with the lock axis
    assert meta["alloclab_version"] == al.__version__
    assert meta["hostname"] == socket.gethostname()
    assert meta["python"] == platform.python_version()
    assert meta["numpy"] == np.__version__ and meta["pandas"] == pd.__version__
    assert platform.release() in meta["kernel"]
    assert isinstance(meta["cpu_model"], str) and meta["cpu_model"]
    assert meta["started"] <= meta["ended"] <= meta["saved"]
    assert isinstance(meta["command_line"], str) and meta["command_line"]
    assert meta["git_dirty"] in (True, False, None)
    assert meta["git_sha"] is None or len(meta["git_sha"]) == 40
    assert meta["status_counts"] == {"ok": 4, "error": 8}
    assert meta["files"]["data"] == "data.parquet"
    json.dumps(meta)  # plain JSON all the way down


def test_run_result_round_trip(tmp_path):
    r = al.run("lock_zoo", threads=2, iterations=100, lock="ticket")
    loaded = al.results.load(al.results.save(r, tmp_path))
    assert len(loaded.data) == 1
    row = loaded.data.iloc[0]
    assert row["lock"] == "ticket" and row["threads"] == 2 and row["status"] == "ok"
    assert row["acquisitions"] == 200
    pd.testing.assert_frame_equal(loaded.workers, r.workers)
    pd.testing.assert_frame_equal(loaded.lockstat, r.lockstat)
    meta = loaded.meta
    assert meta["kind"] == "run" and meta["fixed"]["lock"] == "ticket"
    assert meta["binding"] == {"workers": 2, "workers_bound": 2, "all_bound": True}
    assert meta["started"] == r.provenance["started"]
    assert "lock_zoo=ticket" in meta["lock_kinds"].split(", ")


def test_plain_dataframe_gets_environment_and_extra_meta(tmp_path):
    df = pd.DataFrame({"x": [1, 2], "name": ["a", ""]})
    loaded = al.results.load(al.results.save(df, tmp_path, meta={"note": "hand-made", "n": np.int64(3)}))
    pd.testing.assert_frame_equal(loaded.data, df)
    assert loaded.workers is None and loaded.lockstat is None
    meta = loaded.meta
    assert meta["kind"] == "table" and meta["note"] == "hand-made" and meta["n"] == 3
    assert meta["scenario"] is None and meta["grid"] == {}
    assert meta["hostname"] == socket.gethostname()


def test_a_column_of_mixed_types_is_saved_as_text_and_named(tmp_path):
    df = pd.DataFrame({"mixed": [1, "two", 3.0, None], "n": [1, 2, 3, 4]})
    loaded = al.results.load(al.results.save(df, tmp_path))
    assert loaded.meta["files"]["data"] == "data.parquet"
    assert loaded.meta["format_notes"] == ["data: column 'mixed' mixes float, int, str: written as text"]
    assert loaded.data["mixed"].tolist()[:3] == ["1", "two", "3.0"] and pd.isna(loaded.data["mixed"].iloc[3])
    assert loaded.data["n"].dtype == np.int64


def test_types_survive_the_round_trip_exactly(tmp_path):
    """What the hand-written CSV schema used to restore, Parquet keeps: nullable integers, booleans, empty strings,
    64-bit integers beyond a float's precision, None in a string column."""
    df = pd.DataFrame(
        {
            "count": pd.array([1, None, 3], dtype="Int64"),
            "flag": [True, False, True],
            "name": ["", "a", "b"],
            "error": [None, "boom", None],
            "digest": np.array([2**62 + 1, 0, 7], dtype=np.int64),
            "x": [0.5, float("nan"), float("inf")],
        }
    )
    pd.testing.assert_frame_equal(al.results.load(al.results.save(df, tmp_path)).data, df)


def test_export_csv_writes_a_copy_of_every_table(tmp_path, sweep_with_error):
    out = al.results.save(sweep_with_error, tmp_path / "out")
    files = al.results.export_csv(out)
    assert [f.relative_to(out).as_posix() for f in files] == ["csv/data.csv", "csv/workers.csv", "csv/lockstat.csv"]
    pd.testing.assert_frame_equal(
        pd.read_csv(files[2]), sweep_with_error.lockstat.reset_index(drop=True), check_dtype=False
    )
    assert len(pd.read_csv(files[0])) == len(sweep_with_error.runs)
    al.results.load(out)  # the copies are beside the result, not in it


def test_load_and_save_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="meta.json"):
        al.results.load(tmp_path)
    with pytest.raises(ValueError, match="data"):
        al.results.save([1, 2], tmp_path)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git executable")
def test_git_sha_and_dirty_flag(tmp_path):
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    assert _git_state(tmp_path) == (None, None, None)  # not a repository
    git("init", "-q")
    (tmp_path / "f.txt").write_text("one\n")
    sha, dirty, _ = _git_state(tmp_path)
    assert sha is None and dirty is True  # no commit yet, an untracked file
    git("add", "f.txt")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "one")
    sha, dirty, root = _git_state(tmp_path)
    assert sha is not None and len(sha) == 40 and dirty is False
    (tmp_path / "f.txt").write_text("two\n")
    assert _git_state(tmp_path)[1] is True
