"""Sweeps that survive interruption: out= saves after every run (atomically), Ctrl-C keeps the finished rows,
resume= runs only what is missing, and the CLI's --out DIR --resume."""

from __future__ import annotations

import _thread
import importlib
import os
import subprocess
import threading
from pathlib import Path

import pandas as pd
import pytest
from conftest import cli_command, interrupt_cli

import alloclab as al
from alloclab.cli import main

runs_module = importlib.import_module("alloclab.cluster")  # where a sweep makes its runs

NEVER_ENDS = 10**9  # iterations no test waits for: the run is interrupted (or stopped by its timeout)
GRID = {"iterations": [100, 200, NEVER_ENDS, 300]}
SAFETY_TIMEOUT_S = 120.0  # ends the "endless" run if the interrupt were lost, so a broken build fails, not hangs


class Runs:
    """Wraps the sweep's ``run`` to count calls and, optionally, press Ctrl-C during one of them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, interrupt_when=None, before_each=None):
        self.real = runs_module.run
        self.calls: list[dict] = []
        self.interrupt_when = interrupt_when
        self.before_each = before_each
        self.timers: list[threading.Timer] = []
        monkeypatch.setattr(runs_module, "run", self)

    def __call__(self, scenario, **kwargs):
        if self.before_each is not None:
            self.before_each(len(self.calls))
        self.calls.append(kwargs)
        if self.interrupt_when is not None and self.interrupt_when(kwargs):
            timer = threading.Timer(0.2, _thread.interrupt_main)  # lands inside the engine's run
            self.timers.append(timer)
            timer.start()
        return self.real(scenario, **kwargs)

    def join(self):
        for t in self.timers:
            t.join()


def _endless(kwargs) -> bool:
    return kwargs.get("iterations") == NEVER_ENDS


def _interrupted_sweep(monkeypatch, out, **extra) -> al.SweepInterrupted:
    runs = Runs(monkeypatch, interrupt_when=_endless)
    with pytest.raises(al.SweepInterrupted) as info:
        al.sweep(
            "lock_zoo", grid=GRID, repeats=2, progress=False, out=out, threads=1, timeout_s=SAFETY_TIMEOUT_S,
            **extra,
        )  # fmt: skip
    runs.join()
    monkeypatch.setattr(runs_module, "run", runs.real)
    return info.value


def _task_count() -> int:
    return len(os.listdir("/proc/self/task"))


def test_out_saves_the_finished_rows_after_every_run(tmp_path, monkeypatch):
    out = tmp_path / "sweep"
    seen: list[list[int]] = []

    def check_saved(n_done: int) -> None:  # called before each run: the directory holds every earlier run
        if n_done == 0:
            assert not (out / "meta.json").exists()
            return
        data, meta = al.results.load(out)
        seen.append(data["run"].tolist())
        assert meta["complete"] is False and meta["interrupted"] is False and meta["planned_runs"] == 4

    Runs(monkeypatch, before_each=check_saved)
    df = al.sweep("lock_zoo", grid={"threads": [1, 2]}, repeats=2, progress=False, out=out, iterations=50)
    assert seen == [[0], [0, 1], [0, 1, 2]]
    data, meta = al.results.load(out)
    pd.testing.assert_frame_equal(data, df)
    assert meta["complete"] is True and meta["interrupted"] is False
    assert sorted(p.stem for p in out.iterdir()) == [".alloclab", "data", "manifest", "meta"]  # no temporary file


def test_a_save_that_dies_half_way_leaves_the_previous_one(tmp_path, monkeypatch):
    first = al.sweep("lock_zoo", grid={"threads": [1, 2]}, progress=False, iterations=50)
    al.results.save(first, tmp_path)
    second = al.sweep("lock_zoo", grid={"threads": [1, 2, 3]}, progress=False, iterations=50)

    def dies_half_way(self, path, *args, **kwargs):
        Path(path).write_text("half a file")
        raise KeyboardInterrupt

    monkeypatch.setattr(pd.DataFrame, "to_parquet", dies_half_way)
    with pytest.raises(KeyboardInterrupt):
        al.results.save(second, tmp_path, overwrite=True)
    monkeypatch.undo()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [".alloclab.lock", "data.parquet", "manifest.json", "meta.json"]  # no temporary file left
    pd.testing.assert_frame_equal(al.results.load(tmp_path).data, first)


def test_ctrl_c_raises_sweep_interrupted_with_the_finished_rows_and_saves_them(tmp_path, monkeypatch):
    out = tmp_path / "sweep"
    exc = _interrupted_sweep(monkeypatch, out, detail=True)
    assert isinstance(exc, KeyboardInterrupt)  # scripts stop; a notebook cell shows as interrupted
    assert exc.done == 2 and exc.total == 8 and exc.saved == out
    assert "2 of 8 runs" in str(exc) and "sys.last_value.result" in str(exc)
    part = exc.result
    assert isinstance(part, al.SweepResult)
    assert part.runs["iterations"].tolist() == [100, 200]
    assert (part.runs["status"] == "ok").all()
    assert (part.runs["acquisitions"] == part.runs["iterations"]).all()
    assert part.workers["run"].tolist() == [0, 1]
    assert part.meta["interrupted"] is True and part.meta["complete"] is False and part.meta["planned_runs"] == 8
    loaded = al.results.load(out)
    pd.testing.assert_frame_equal(loaded.data, part.runs)
    pd.testing.assert_frame_equal(loaded.workers, part.workers)
    assert loaded.meta["interrupted"] is True and loaded.meta["complete"] is False


def test_ctrl_c_without_out_returns_the_rows_in_the_exception_and_leaves_no_thread(monkeypatch):
    before = _task_count()
    exc = _interrupted_sweep(monkeypatch, None)
    assert exc.saved is None
    assert isinstance(exc.result, pd.DataFrame)
    assert exc.result["iterations"].tolist() == [100, 200]
    assert exc.result.attrs["alloclab"]["interrupted"] is True
    assert _task_count() == before


def test_resume_runs_only_what_is_missing_and_returns_the_whole_sweep(tmp_path, monkeypatch):
    out = tmp_path / "sweep"
    _interrupted_sweep(monkeypatch, out, detail=True)
    runs = Runs(monkeypatch)
    # The endless configuration now ends by its (shorter) timeout: timeout_s may change on resume.
    done = al.sweep(
        "lock_zoo", grid=GRID, repeats=2, progress=False, out=out, resume=out, detail=True, threads=1,
        timeout_s=0.1,
    )  # fmt: skip
    assert [c["iterations"] for c in runs.calls] == [NEVER_ENDS, 300, 100, 200, NEVER_ENDS, 300]
    df = done.runs
    assert df["run"].tolist() == list(range(8))
    assert df["config"].tolist() == [0, 1, 2, 3] * 2 and df["repeat"].tolist() == [0] * 4 + [1] * 4
    assert df["iterations"].tolist() == GRID["iterations"] * 2
    assert df["status"].tolist() == ["ok", "ok", "stopped", "ok"] * 2
    assert df["error"].str.startswith("timeout").tolist() == [False, False, True, False] * 2
    ok = df[df["status"] == "ok"]
    assert (ok["acquisitions"] == ok["iterations"]).all()
    assert (df["seed"] == 1).all()
    assert done.meta["reused_runs"] == 2 and done.meta["complete"] is True and done.meta["interrupted"] is False
    assert done.meta["resumed_from"] == str(out)
    assert done.meta["status_counts"] == {"ok": 6, "stopped": 2}
    # detail rows of the reused runs came back from the directory, keyed by their run in this sweep
    assert done.workers["run"].tolist() == list(range(8))
    assert (done.workers.groupby("run")["ops"].sum() == df.set_index("run")["acquisitions"]).all()
    # same columns as a sweep that ran at once
    fresh = al.sweep("lock_zoo", grid={"iterations": [100]}, progress=False, threads=1)
    assert list(df.columns) == list(fresh.columns)
    pd.testing.assert_frame_equal(al.results.load(out).data, df)

    # resuming again runs only the stopped ones
    runs.calls.clear()
    again = al.sweep("lock_zoo", grid=GRID, repeats=2, progress=False, resume=out, threads=1, timeout_s=0.1)
    assert [c["iterations"] for c in runs.calls] == [NEVER_ENDS, NEVER_ENDS]
    assert again.attrs["alloclab"]["reused_runs"] == 6
    assert again["status"].tolist() == df["status"].tolist()


def test_resume_true_means_the_out_directory_and_a_new_directory_starts_fresh(tmp_path, monkeypatch):
    out = tmp_path / "new"
    runs = Runs(monkeypatch)
    first = al.sweep("lock_zoo", grid={"threads": [1, 2]}, progress=False, out=out, resume=True, iterations=50)
    assert len(runs.calls) == 2 and first.attrs["alloclab"]["reused_runs"] == 0
    second = al.sweep("lock_zoo", grid={"threads": [1, 2, 3]}, progress=False, out=out, resume=True, iterations=50)
    assert [c["threads"] for c in runs.calls] == [1, 2, 3]  # the grid grew: only the new configuration ran
    assert second["threads"].tolist() == [1, 2, 3] and (second["status"] == "ok").all()
    assert second.attrs["alloclab"]["reused_runs"] == 2


def test_resume_reruns_error_rows(tmp_path, monkeypatch):
    # two workers do not fit a placement of one PU: an error row
    df = al.sweep("lock_zoo", grid={"threads": [1, 2]}, progress=False, out=tmp_path, iterations=50, placement=[0])
    assert df["status"].tolist() == ["ok", "error"]
    runs = Runs(monkeypatch)
    again = al.sweep(
        "lock_zoo", grid={"threads": [1, 2]}, progress=False, resume=tmp_path, iterations=50, placement=[0]
    )
    assert [c["threads"] for c in runs.calls] == [2]
    assert again["status"].tolist() == ["ok", "error"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seed": 2}, "seed=1.*seed=2"),
        ({"placement": "scatter"}, "placement"),
        ({"scenario": "pcp_refill"}, "not a sweep of 'pcp_refill'"),
        ({"resume": True, "out": None}, "no out directory"),
        ({"resume": 3}, "expected a directory"),
    ],
)
def test_resume_refuses_a_directory_of_another_sweep(tmp_path, kwargs, message):
    al.sweep("lock_zoo", grid={"threads": [1]}, progress=False, out=tmp_path, iterations=50)
    args = {"scenario": "lock_zoo", "grid": {"threads": [1]}, "progress": False, "resume": tmp_path, **kwargs}
    if args["scenario"] == "lock_zoo":
        args["iterations"] = 50
    with pytest.raises(ValueError, match=f"^resume: .*{message}"):
        al.sweep(**args)


def test_resume_of_rows_from_another_grid_leaves_them_out_of_the_result_but_keeps_them(tmp_path):
    al.sweep("lock_zoo", grid={"threads": [1, 2]}, progress=False, out=tmp_path, iterations=50)
    df = al.sweep("lock_zoo", grid={"threads": [2, 3]}, progress=False, out=tmp_path, resume=True, iterations=50)
    assert df["threads"].tolist() == [2, 3] and df.attrs["alloclab"]["reused_runs"] == 1
    loaded = al.results.load(tmp_path)
    assert loaded.data["threads"].tolist() == [2, 3]
    assert loaded.kept["threads"].tolist() == [1] and loaded.kept["status"].tolist() == ["ok"]


def test_cli_sweep_out_then_resume(tmp_path, capsys):
    out = tmp_path / "cli"
    argv = ["sweep", "lock_zoo", "threads=1,2", "iterations=50", "--repeats", "2", "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    assert f"saved to {out}" in capsys.readouterr().out
    assert main([*argv, "--resume"]) == 0
    text = capsys.readouterr().out
    assert "4 runs reused" in text
    assert len(al.results.load(out).data) == 4
    assert main(["sweep", "lock_zoo", "threads=1", "--resume", "--no-progress"]) == 1
    assert "--resume needs --out" in capsys.readouterr().err


def test_cli_sweep_ctrl_c_saves_and_resume_finishes(tmp_path):
    out = tmp_path / "cli"
    args = ["sweep", "lock_zoo", "threads=1", f"iterations=100,{NEVER_ENDS}", "--repeats", "1"]
    args += ["--out", str(out), "--no-progress"]
    returncode, err = interrupt_cli([*args, "--timeout", str(SAFETY_TIMEOUT_S)], out)
    assert returncode == 130, err
    assert "interrupted after 1 of 2 runs" in err and "--resume" in err
    data, meta = al.results.load(out)
    assert data["iterations"].tolist() == [100] and meta["interrupted"] is True
    resume = [*cli_command(), *args, "--resume", "--timeout", "0.1"]
    done = subprocess.run(resume, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "1 runs reused" in done.stdout
    data, meta = al.results.load(out)
    assert data["status"].tolist() == ["ok", "stopped"] and meta["complete"] is True
