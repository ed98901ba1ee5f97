"""A results directory is written as a whole: a sweep killed at any moment of a save leaves the previous complete set
of files or the next one, never a run's row without its detail rows, and a resume completes it.

The reproducer: 2 of 6 random SIGKILLs during a ``detail=True`` sweep left ``complete: True`` with a run's worker
and lock_stat rows missing, and resume made it permanent. Here a child process dies (``os._exit``, as SIGKILL: no
clean-up) at the k-th rename of its saves, for k across every step of a save, each child resuming the directory
the previous one left; then six real SIGKILLs at staggered moments.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import alloclab as al

GRID = {"threads": [1, 2, 1, 2, 1, 2]}  # six runs, two of them duplicates of each other's configuration
SWEEP = f"""
    import alloclab as al
    al.sweep("lock_zoo", grid={GRID!r}, repeats=2, progress=False, detail=True, out=OUT, resume=True,
             iterations=200)
"""
DIE_AT_RENAME = """
    import os
    real_replace, renames = os.replace, [0]
    def replace(src, dst):
        renames[0] += 1
        if renames[0] == DIE_AT:
            os._exit(9)  # like SIGKILL: nothing is cleaned up, nothing is flushed
        return real_replace(src, dst)
    os.replace = replace
"""


def _check_consistent(out: Path) -> int:
    """The directory holds a complete save: every ok run has its worker and lock_stat rows, ``complete`` says
    whether every planned run has a row. Returns the number of rows (0: nothing saved yet)."""
    try:
        loaded = al.results.load(out)
    except FileNotFoundError:
        return 0
    data, meta = loaded.data, loaded.meta
    ok = set(data.loc[data["status"] == "ok", "run"])
    assert ok <= set(loaded.workers["run"]), "an ok run lost its worker rows"
    assert ok <= set(loaded.lockstat["run"]), "an ok run lost its lock_stat rows"
    assert meta["complete"] is (len(data) == meta["planned_runs"])
    assert meta["runs"] == len(data)
    return len(data)


def _child(code: str, out: Path, **values) -> subprocess.Popen[str]:
    prelude = "".join(f"{k} = {v!r}\n" for k, v in {"OUT": str(out), **values}.items())
    return subprocess.Popen([sys.executable, "-c", prelude + textwrap.dedent(code)], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def test_a_crash_at_any_rename_of_a_save_leaves_a_whole_set(tmp_path):
    out = tmp_path / "sweep"
    # A save renames each file into its temporary name, then the manifest (the commit), then each staged file,
    # then the manifest once more: these values of k land on every one of those steps over the first saves.
    rows = []
    for die_at in (2, 5, 6, 7, 8, 9, 10, 11, 14, 19, 23, 31):
        proc = _child(DIE_AT_RENAME + SWEEP, out, DIE_AT=die_at)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode in (0, 9), err
        rows.append(_check_consistent(out))
    assert rows == sorted(rows)  # each child resumed what the last one saved; nothing went backwards
    proc = _child(SWEEP, out)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert _check_consistent(out) == 12
    data, meta = al.results.load(out)
    assert meta["complete"] is True and (data["status"] == "ok").all()
    assert data["run"].tolist() == list(range(12))


def test_six_sigkills_at_staggered_moments(tmp_path):
    out = tmp_path / "sweep"
    for delay in (0.6, 0.9, 1.2, 1.5, 1.8, 2.1):
        proc = _child(SWEEP, out)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=300)
        _check_consistent(out)
    proc = _child(SWEEP, out)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert _check_consistent(out) == 12


def test_the_manifest_lists_every_file_with_rows_and_sha256(tmp_path):
    import hashlib
    import json

    result = al.sweep("lock_zoo", grid={"threads": [1, 2]}, progress=False, detail=True, iterations=50)
    al.results.save(result, tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert set(manifest["files"]) == {"data", "workers", "lockstat", "meta"} and manifest["staged"] == {}
    for role, rows in (("data", 2), ("workers", 3), ("lockstat", 2), ("meta", None)):
        entry = manifest["files"][role]
        raw = (tmp_path / entry["name"]).read_bytes()
        assert entry["rows"] == rows and entry["bytes"] == len(raw)
        assert entry["sha256"] == hashlib.sha256(raw).hexdigest()
