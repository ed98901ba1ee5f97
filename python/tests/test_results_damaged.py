"""Damaged or hostile results directories: every problem is a DamagedResult naming the file and the problem (and the
runs whose rows are lost), never an AttributeError, TypeError, KeyError, RecursionError or OverflowError; nothing
outside the directory is read; a FIFO is not waited on. Each case is a directory a real sweep wrote, then damaged; a
resume of a damaged or hostile directory warns or refuses by name, and never deletes a saved row."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

import alloclab as al
from alloclab.results import DamagedResult
from alloclab.sweep import KEY_COLUMNS, STATUS_COLUMNS


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    """A detail sweep of three runs, the middle one an error (one worker does not fit a placement of two PUs)."""
    out = tmp_path_factory.mktemp("saved") / "sweep"
    result = al.sweep("lock_zoo", grid={"threads": [2, 1, 2]}, progress=False, detail=True, iterations=50,
                      placement=[0, 1])  # fmt: skip
    al.results.save(result, out)
    return out


def _copy(saved: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(saved, target)
    return target


def _manifest(d: Path) -> dict:
    return json.loads((d / "manifest.json").read_text())


def _name(d: Path, role: str) -> str:
    return _manifest(d)["files"][role]["name"]


def _data_named(name: str) -> Callable[[Path], None]:
    """Damage: the manifest names the data file ``name`` (its size and digest kept)."""

    def damage(d: Path) -> None:
        manifest = _manifest(d)
        manifest["files"]["data"]["name"] = name
        (d / "manifest.json").write_text(json.dumps(manifest))

    return damage


def _edit_json(d: Path, name: str, edit: Callable[[dict], object]) -> None:
    """Changes a JSON file and re-signs it in the manifest (a hostile directory, not a damaged one)."""
    value = json.loads((d / name).read_text())
    value = edit(value) or value
    (d / name).write_text(json.dumps(value))
    if name == "meta.json" and (d / "manifest.json").exists():
        _resign(d, "meta")


def _resign(d: Path, role: str) -> None:
    import hashlib

    manifest = _manifest(d)
    data = (d / manifest["files"][role]["name"]).read_bytes()
    manifest["files"][role].update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    (d / "manifest.json").write_text(json.dumps(manifest))


def _flip_last_byte(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF
    path.write_bytes(bytes(raw))


def _meta(d: Path) -> dict:
    return json.loads((d / "meta.json").read_text())


# Each case damages a copy of the saved directory and names the file the error must name and a word of the problem.
CASES: dict[str, tuple[Callable[[Path], None], str, str]] = {
    "meta.json empty": (lambda d: (d / "meta.json").write_text(""), "meta.json", "differs"),
    "meta.json not JSON, re-signed": (
        lambda d: ((d / "meta.json").write_text("{"), _resign(d, "meta")),
        "meta.json",
        "not JSON",
    ),
    "meta.json a list": (lambda d: _edit_json(d, "meta.json", lambda m: [1, 2]), "meta.json", "not an object"),
    "meta.json a string": (lambda d: _edit_json(d, "meta.json", lambda m: "x"), "meta.json", "not an object"),
    "meta.json deeply nested": (
        lambda d: ((d / "meta.json").write_text("[" * 100_000 + "]" * 100_000), _resign(d, "meta")),
        "meta.json",
        "not JSON",
    ),
    "meta.json invalid UTF-8": (
        lambda d: ((d / "meta.json").write_bytes(b'{"a": "\xff"}'), _resign(d, "meta")),
        "meta.json",
        "not JSON",
    ),
    "meta.json a directory": (
        lambda d: ((d / "meta.json").unlink(), (d / "meta.json").mkdir()),
        "meta.json",
        "directory",
    ),
    "meta.json a FIFO": (
        lambda d: ((d / "meta.json").unlink(), os.mkfifo(d / "meta.json")),
        "meta.json",
        "not a regular file",
    ),
    "manifest not JSON": (lambda d: (d / "manifest.json").write_text("{{"), "manifest.json", "not JSON"),
    "manifest a list": (lambda d: (d / "manifest.json").write_text("[]"), "manifest.json", "not an object"),
    "manifest of another format": (
        lambda d: (d / "manifest.json").write_text('{"format": 2}'),
        "manifest.json",
        "format",
    ),
    "manifest files not a mapping": (
        lambda d: (d / "manifest.json").write_text(json.dumps({**_manifest(d), "files": ["data.csv"]})),
        "manifest.json",
        "mappings",
    ),
    "manifest entry not a mapping": (
        lambda d: (d / "manifest.json").write_text(
            json.dumps({**_manifest(d), "files": {**_manifest(d)["files"], "data": "data.csv"}})
        ),
        "manifest.json",
        "'data'",
    ),
    "manifest names ../outside.csv": (_data_named("../outside.csv"), "manifest.json", "'data'"),
    "manifest names /etc/passwd": (_data_named("/etc/passwd"), "manifest.json", "'data'"),
    "manifest stages from outside": (
        lambda d: (d / "manifest.json").write_text(
            json.dumps({**_manifest(d), "staged": {_name(d, "data"): "../x.tmp"}})
        ),
        "manifest.json",
        "stages",
    ),
    "manifest names an unknown role": (
        lambda d: (d / "manifest.json").write_text(
            json.dumps({**_manifest(d), "files": {**_manifest(d)["files"], "evil": _manifest(d)["files"]["data"]}})
        ),
        "manifest.json",
        "unknown role",
    ),
    "manifest rows a string": (
        lambda d: (d / "manifest.json").write_text(
            json.dumps(
                {
                    **_manifest(d),
                    "files": {**_manifest(d)["files"], "data": {**_manifest(d)["files"]["data"], "rows": "3"}},
                }
            )
        ),
        "manifest.json",
        "'data'",
    ),
    "manifest without meta": (
        lambda d: (d / "manifest.json").write_text(
            json.dumps({**_manifest(d), "files": {k: v for k, v in _manifest(d)["files"].items() if k != "meta"}})
        ),
        "manifest.json",
        "'meta'",
    ),
    "manifest huge": (lambda d: (d / "manifest.json").write_bytes(b" " * (65 << 20)), "manifest.json", "at most"),
    "data missing": (lambda d: (d / _name(d, "data")).unlink(), "data.parquet", "missing"),
    "data cut short": (
        lambda d: (d / _name(d, "data")).write_bytes((d / _name(d, "data")).read_bytes()[:40]),
        "data.parquet",
        "differs",
    ),
    "data edited": (lambda d: _flip_last_byte(d / _name(d, "data")), "data.parquet", "differs"),
    "data a directory": (
        lambda d: ((d / _name(d, "data")).unlink(), (d / _name(d, "data")).mkdir()),
        "data.parquet",
        "directory",
    ),
    "data garbage, re-signed": (
        lambda d: ((d / _name(d, "data")).write_bytes(b"\x00\xff" * 100), _resign(d, "data")),
        "data.parquet",
        "cannot be read as a table",
    ),
    "data empty, re-signed": (
        lambda d: ((d / _name(d, "data")).write_text(""), _resign(d, "data")),
        "data.parquet",
        "cannot be read as a table",
    ),
    "data with other rows, re-signed": (
        lambda d: (pd.DataFrame({"run": [0], "status": ["ok"]}).to_parquet(d / _name(d, "data")), _resign(d, "data")),
        "data.parquet",
        "rows",
    ),
    "workers cut short": (lambda d: (d / _name(d, "workers")).write_bytes(b"PAR1"), "workers.parquet", "differs"),
    "lockstat missing": (lambda d: (d / _name(d, "lockstat")).unlink(), "lockstat.parquet", "missing"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_damaged_directory_is_a_damaged_result_naming_the_file(saved, tmp_path, case):
    damage, file, word = CASES[case]
    d = _copy(saved, tmp_path)
    damage(d)
    with pytest.raises(DamagedResult) as info:
        al.results.load(d)
    exc = info.value
    assert isinstance(exc, ValueError)
    assert exc.path.name == file or exc.path.name.startswith(f".{file}"), str(exc)
    assert word in exc.problem, str(exc)
    assert str(exc).startswith(f"{exc.path}: {exc.problem}; ")


def test_a_damaged_detail_table_names_the_runs_whose_rows_it_held(saved, tmp_path):
    d = _copy(saved, tmp_path)
    (d / _name(d, "workers")).write_text("garbage")
    with pytest.raises(DamagedResult, match=r"the rows of run\(s\) 0, 2 are lost \(a resume runs them again\)"):
        al.results.load(d)


def test_the_data_table_lost_means_every_run(saved, tmp_path):
    d = _copy(saved, tmp_path)
    (d / _name(d, "data")).unlink()
    with pytest.raises(DamagedResult, match=r"no row of it can be trusted"):
        al.results.load(d)


def test_files_of_an_older_alloclab_are_checked_the_same_way(saved, tmp_path):
    """A directory without a manifest (written before it existed) loads with a warning; its meta.json's file names
    cannot point outside the directory."""
    d = _copy(saved, tmp_path)
    (d / "manifest.json").unlink()
    with pytest.warns(UserWarning, match="without manifests"):
        assert len(al.results.load(d).data) == 3
    for evil in ("../outside.csv", "/etc/passwd", "sub/data.csv", ".."):
        _edit_json(d, "meta.json", lambda m, evil=evil: m["files"].update(data=evil))
        with pytest.raises(DamagedResult, match="not a file name inside the directory"):
            al.results.load(d)
    _edit_json(d, "meta.json", lambda m: m.update(files="data.csv"))
    with pytest.raises(DamagedResult, match="'files' is not a mapping"):
        al.results.load(d)


def test_a_csv_table_of_an_older_alloclab_is_named_as_not_read(saved, tmp_path):
    """Parquet is the one format: a directory whose manifest names a CSV table (written before) is not read as
    half a result; the error names the table and why."""
    d = _copy(saved, tmp_path)
    csv = d / "data.csv"
    csv.write_text("run,status\n0,ok\n")
    _data_named("data.csv")(d)
    _resign(d, "data")
    with pytest.raises(DamagedResult, match=r"data.csv: a CSV table of an older alloclab: results are read from Parq"):
        al.results.load(d)


def test_a_fifo_as_a_table_is_not_waited_on(saved, tmp_path):
    d = _copy(saved, tmp_path)
    (d / _name(d, "data")).unlink()
    os.mkfifo(d / _name(d, "data"))
    code = f"""
        import alloclab as al
        try:
            al.results.load({str(d)!r})
        except al.results.DamagedResult as exc:
            print(exc.problem)
    """
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "not a regular file: a FIFO", out.stderr


def test_ok_rows_with_lost_figures_are_not_reused(tmp_path, monkeypatch):
    """An ok row whose headline figure (elapsed_s) is NaN, alone or with every other figure, is run again by a resume,
    not taken as a result; a figure missing by design (fairness without a window, lock_stat off) is not a loss."""
    import importlib

    runs_module = importlib.import_module("alloclab.cluster")  # where a sweep makes its runs
    al.sweep("lock_zoo", grid={"threads": [1, 2]}, repeats=2, progress=False, out=tmp_path, iterations=50,
             hold_ns=0)  # fmt: skip
    loaded = al.results.load(tmp_path)
    data = loaded.data.copy()
    params = ("threads", "iterations", "hold_ns")
    figures = [c for c in data.columns if c not in (*KEY_COLUMNS, *STATUS_COLUMNS, *params)]
    for c in figures:  # run 0: every figure lost (NaN, or NA in the integer and boolean figures)
        data[c] = data[c].astype(object)
        data.loc[0, c] = float("nan") if pd.api.types.is_float_dtype(loaded.data[c]) else pd.NA
    data.loc[3, "elapsed_s"] = float("nan")  # run 3: its headline figure lost
    data.loc[1, ["fairness_jain", "wait_per_hold"]] = float("nan")  # run 1: figures that may be NaN by design
    al.results.save(data, tmp_path, overwrite=True)
    ran: list[int] = []
    real = runs_module.run

    def counting(scenario, **kwargs):
        ran.append(kwargs["threads"])
        return real(scenario, **kwargs)

    monkeypatch.setattr(runs_module, "run", counting)
    df = al.sweep("lock_zoo", grid={"threads": [1, 2]}, repeats=2, progress=False, resume=tmp_path, iterations=50,
                  hold_ns=0)  # fmt: skip
    assert ran == [1, 2]  # runs 0 (threads=1, repeat 0) and 3 (threads=2, repeat 1)
    assert df.attrs["alloclab"]["reused_runs"] == 2
    assert df["elapsed_s"].notna().all()


def test_a_resume_of_a_damaged_directory_runs_the_lost_runs_again_and_says_so(saved, tmp_path):
    d = _copy(saved, tmp_path)
    (d / _name(d, "workers")).write_text("garbage")
    with pytest.warns(UserWarning, match=r"workers.parquet: .* the rows of run\(s\) 0, 2 are lost"):
        result = al.sweep("lock_zoo", grid={"threads": [2, 1, 2]}, progress=False, detail=True, out=d, resume=True,
                          iterations=50, placement=[0, 1])  # fmt: skip
    assert result.meta["reused_runs"] == 0  # without their worker rows the ok runs ran again
    assert result.workers["run"].unique().tolist() == [0, 2]
    loaded = al.results.load(d)
    pd.testing.assert_frame_equal(loaded.workers, result.workers)
    assert (d / "workers.parquet.damaged").read_text() == "garbage"  # set aside, not deleted


def _resume(d: Path) -> al.SweepResult:
    return al.sweep("lock_zoo", grid={"threads": [2, 1, 2]}, progress=False, detail=True, out=d, resume=True,
                    iterations=50, placement=[0, 1])  # fmt: skip


# meta.json entries a resume reads, given JSON of another kind: the directory's result cannot be used, so the resume
# says which entry is wrong, sets every file aside (nothing is deleted) and runs every run again.
HOSTILE_ENTRIES = {
    "options": [1],
    "grid": [1],
    "fixed": "threads",
    "defaults": [1],
    "topologies": [1],
    "machines": 5,
    "provenance": [1],
    "provenance_varying": [1],
}


@pytest.mark.parametrize("entry", sorted(HOSTILE_ENTRIES))
def test_a_meta_entry_of_another_kind_is_named_and_the_resume_runs_afresh(saved, tmp_path, entry):
    d = _copy(saved, tmp_path)
    data = _name(d, "data")
    _edit_json(d, "meta.json", lambda m: m.update({entry: HOSTILE_ENTRIES[entry]}))
    with pytest.warns(UserWarning, match=rf"^resume: {d}/meta.json: its '{entry}' is a JSON \w+, not a mapping"):
        result = _resume(d)
    assert result.meta["reused_runs"] == 0 and len(result.runs) == 3
    assert (d / f"{data}.damaged").exists() and (d / "meta.json.damaged").exists()  # set aside, not deleted


@pytest.mark.parametrize("entry", ["grid", "provenance_varying"])
def test_an_axis_or_varying_key_that_is_not_a_list_is_named(saved, tmp_path, entry):
    d = _copy(saved, tmp_path)
    _edit_json(d, "meta.json", lambda m: m.update({entry: {"threads": 5}}))
    with pytest.warns(UserWarning, match=rf"its '{entry}' gives 'threads' a JSON number, not a list"):
        assert _resume(d).meta["reused_runs"] == 0


# Saved run options that are no valid option (placement 5, locks as a list, ...): the resume compares them with its
# own and refuses the directory by name, as for any other options; it never fails on them.
HOSTILE_OPTIONS = {
    "placement": [5, [[1]], ["a"]],
    "locks": [5, [1, 2]],
    "topology": [[1], {"a": 1}, "100 100 100"],
    "machine": [["x"], "no-such-profile"],
    "lockstat": [[True]],
}


@pytest.mark.parametrize(
    ("option", "value"), [(o, v) for o, values in HOSTILE_OPTIONS.items() for v in values], ids=str
)
def test_a_saved_option_that_is_no_option_refuses_the_resume_by_name(saved, tmp_path, option, value):
    d = _copy(saved, tmp_path)
    _edit_json(d, "meta.json", lambda m: m["options"].update({option: value}))
    with pytest.raises(ValueError, match=rf"^resume: {d} was swept with {option}="):
        _resume(d)


@pytest.mark.parametrize(("option", "fifo"), [("topology", "m.xml"), ("machine", "m.toml")])
def test_a_saved_topology_or_machine_path_to_a_fifo_is_not_read(saved, tmp_path, option, fifo):
    """A saved label that names a FIFO (as an hwloc XML or a TOML profile) is compared as text, never opened (in a
    child process: a regression would block on the FIFO)."""
    d = _copy(saved, tmp_path)
    os.mkfifo(tmp_path / fifo)
    _edit_json(d, "meta.json", lambda m: m["options"].update({option: str(tmp_path / fifo)}))
    code = f"""
        import alloclab as al
        try:
            al.sweep("lock_zoo", grid={{"threads": [2, 1, 2]}}, progress=False, out={str(d)!r}, resume=True,
                     iterations=50, placement=[0, 1])
        except ValueError as exc:
            print(exc)
    """
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert f"was swept with {option}={str(tmp_path / fifo)!r}," in out.stdout, out.stderr
