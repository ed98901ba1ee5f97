"""One writer per results directory, and earlier results never overwritten without being told.

The reproducers: three threads sweeping into one directory (26 of 30 extra sweeps died with FileNotFoundError on a
temporary file, readers saw torn Parquet); two CLI sweeps into one --out both printed "saved to" while one grid's
rows survived; a fresh sweep into a results directory overwrote it silently; an ``out=`` that is a file or cannot be
written failed only after the first run.
"""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import alloclab as al
from alloclab import _resultdir
from alloclab.results import DirectoryLocked

runs_module = importlib.import_module("alloclab.cluster")  # where a sweep makes its runs


class HeldRun:
    """Replaces the sweep's ``run``: the first call waits until released, so a sweep holds its directory."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.real = runs_module.run
        self.started = threading.Event()
        self.release = threading.Event()
        self.calls = 0
        monkeypatch.setattr(runs_module, "run", self)

    def __call__(self, scenario, **kwargs):
        self.calls += 1
        if self.calls == 1:
            self.started.set()
            assert self.release.wait(60)
        return self.real(scenario, **kwargs)


def test_a_second_writer_is_refused_while_readers_never_see_a_torn_directory(tmp_path, monkeypatch):
    out = tmp_path / "sweep"
    other = al.sweep("lock_zoo", progress=False, iterations=10)
    held = HeldRun(monkeypatch)
    outcome: dict[str, object] = {}
    read_errors: list[BaseException] = []
    reads = [0]
    stop_reading = threading.Event()

    def first() -> None:
        outcome["first"] = al.sweep(
            "lock_zoo", grid={"threads": [1, 2, 1, 2]}, progress=False, detail=True, out=out, iterations=100
        )

    def reader() -> None:
        while not stop_reading.is_set():
            try:
                assert _resultdir.read_files(out, al.results._TABLES).manifest is not None  # never a half first save
                loaded = al.results.load(out)
                assert set(loaded.data["run"]) <= set(loaded.workers["run"])
                reads[0] += 1
            except FileNotFoundError:
                pass  # nothing saved yet
            except BaseException as exc:  # a torn or mixed set
                read_errors.append(exc)
                return

    writer = threading.Thread(target=first)
    writer.start()
    assert held.started.wait(60)  # the first sweep holds the directory, inside its first run
    readers = [threading.Thread(target=reader) for _ in range(2)]
    for t in readers:
        t.start()
    for _ in range(3):  # three more sweeps, in this process: each is refused at once, before any run
        with pytest.raises(DirectoryLocked, match=r"^out: .* is being written by another sweep or save \(pid \d+"):
            al.sweep("lock_zoo", grid={"threads": [3]}, progress=False, out=out, iterations=10)
    with pytest.raises(DirectoryLocked, match=r"^directory: "):
        al.results.save(other, out, overwrite=True)
    assert held.calls == 1
    held.release.set()
    writer.join(120)
    stop_reading.set()
    for t in readers:
        t.join(60)
    assert not read_errors, read_errors
    data, meta = al.results.load(out)
    assert data["threads"].tolist() == [1, 2, 1, 2] and meta["complete"] is True
    # Free again: a resume of it is a writer like any other.
    again = al.sweep("lock_zoo", grid={"threads": [1, 2, 1, 2]}, progress=False, out=out, resume=True, iterations=100)
    assert again.attrs["alloclab"]["reused_runs"] == 4


def _cli(*args: str) -> list[str]:
    script = Path(sys.executable).with_name("alloclab")
    return [str(script)] if script.exists() else [sys.executable, "-m", "alloclab.cli"]


def test_two_cli_sweeps_into_one_out(tmp_path):
    """The second is refused by name while the first runs (exit status 1, nothing run, nothing saved by it); the
    first's rows are the directory's."""
    out = tmp_path / "sweep"
    cmd = _cli()
    first = subprocess.Popen(
        [*cmd, "sweep", "lock_zoo", "threads=1", "iterations=100,1000000000", "--repeats", "1", "--out", str(out),
         "--no-progress", "--timeout", "120"],
        stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        for _ in range(6000):  # the first sweep saved its first run and is in its second (never asserted)
            if (out / "manifest.json").exists() or first.poll() is not None:
                break
            time.sleep(0.02)
        second = subprocess.run(
            [*cmd, "sweep", "lock_zoo", "threads=2,3", "iterations=10", "--out", str(out), "--no-progress"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert second.returncode == 1, second.stderr
        assert "is being written by another sweep or save" in second.stderr
        assert "saved to" not in second.stdout
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 130
    assert al.results.load(out).data["threads"].tolist() == [1]


def test_a_fresh_sweep_never_overwrites_an_earlier_result(tmp_path, monkeypatch):
    al.sweep("lock_zoo", grid={"threads": [1]}, progress=False, out=tmp_path, iterations=50)
    held = HeldRun(monkeypatch)
    held.release.set()
    with pytest.raises(ValueError, match=r"^out: .* already holds a result; resume it .* \(overwrite=True"):
        al.sweep("lock_zoo", grid={"threads": [2]}, progress=False, out=tmp_path, iterations=50)
    with pytest.raises(ValueError, match=r"^directory: .* already holds a result"):
        al.results.save(al.sweep("lock_zoo", progress=False, iterations=10), tmp_path)
    assert held.calls == 1  # the save's own sweep ran; the refused sweep ran nothing
    assert al.results.load(tmp_path).data["threads"].tolist() == [1]
    al.sweep("lock_zoo", grid={"threads": [2]}, progress=False, out=tmp_path, overwrite=True, iterations=50)
    assert al.results.load(tmp_path).data["threads"].tolist() == [2]


def test_the_cli_needs_force_to_replace_a_result(tmp_path):
    from alloclab.cli import main

    args = ["run", "lock_zoo", "threads=1", "iterations=10", "--out", str(tmp_path)]
    assert main(args) == 0
    assert main(args) == 1
    assert main([*args, "--force"]) == 0
    sweep = ["sweep", "lock_zoo", "threads=1,2", "iterations=10", "--repeats", "1", "--no-progress"]
    assert main([*sweep, "--out", str(tmp_path / "s")]) == 0
    assert main([*sweep, "--out", str(tmp_path / "s")]) == 1
    assert main([*sweep, "--out", str(tmp_path / "s"), "--force"]) == 0
    assert main([*sweep, "--out", str(tmp_path / "s"), "--resume"]) == 0


@pytest.mark.parametrize("where", ["a file", "below a file", "not writable"])
def test_an_out_that_cannot_be_written_is_refused_before_any_run(tmp_path, monkeypatch, where):
    held = HeldRun(monkeypatch)
    held.release.set()
    file = tmp_path / "file"
    file.write_text("not a directory")
    out = {"a file": file, "below a file": file / "sub", "not writable": Path("/proc/self/alloclab")}[where]
    with pytest.raises(ValueError, match=rf"^out: .*{'is a file' if where == 'a file' else 'cannot write to'}"):
        al.sweep("lock_zoo", grid={"threads": [1]}, progress=False, out=out, iterations=50)
    assert held.calls == 0
    assert file.read_text() == "not a directory"


def test_the_lock_file_stays_and_never_blocks_a_later_writer(tmp_path):
    al.results.save(al.sweep("lock_zoo", progress=False, iterations=10), tmp_path)
    assert (tmp_path / ".alloclab.lock").exists()
    held = (tmp_path / ".alloclab.lock").read_text()
    assert held.startswith(f"pid {os.getpid()} on ")
    al.results.save(al.sweep("lock_zoo", progress=False, iterations=10), tmp_path, overwrite=True)
