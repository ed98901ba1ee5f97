"""The alloclab console script, through subprocess, plus its value parser in-process."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import interrupt_cli

import alloclab as al
from alloclab.cli import main, parse_assignments, parse_value


def console_script() -> list[str]:
    """The console script next to this interpreter (or ``python -m alloclab.cli`` if there is none)."""
    script = Path(sys.executable).with_name("alloclab")
    return [str(script)] if script.exists() else [sys.executable, "-m", "alloclab.cli"]


def alloclab(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the console script with ``args`` in quick mode."""
    env = {**os.environ, "ALLOCLAB_QUICK": "1"}
    return subprocess.run([*console_script(), *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=env)


def test_a_reader_that_goes_away_ends_it_quietly():
    # `alloclab metrics | head -1`, made certain: the pipe has no reader before the first line is written.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        out = subprocess.run([*console_script(), "metrics"], stdout=write_end, stderr=subprocess.PIPE, text=True,
                             timeout=300)  # fmt: skip
    finally:
        os.close(write_end)
    assert (out.returncode, out.stderr) == (141, "")


def test_topology_host_and_synthetic(capsys):
    out = alloclab("topology", "--synthetic", "node:2 core:3 pu:1")
    assert out.returncode == 0, out.stderr
    assert "synthetic: 2 node(s), 6 core(s), 6 PU(s)" in out.stdout
    assert "NUMANode L#1" in out.stdout
    assert main(["topology"]) == 0
    assert f"host: {al.Topology.host().nodes} node(s)" in capsys.readouterr().out


def test_scenarios_lists_parameters(capsys):
    assert main(["scenarios", "lock_zoo"]) == 0
    out = capsys.readouterr().out
    for word in ("lock_zoo:", "threads", "iterations", "hold_ns", "'ticket'"):
        assert word in out
    assert main(["scenarios", "nope"]) == 1
    assert "unknown scenario" in capsys.readouterr().err


def test_run_prints_summary_and_lockstat(tmp_path):
    out = alloclab("run", "lock_zoo", "threads=2", "iterations=500", "lock=ticket", "--lockstat", "--workers",
                   "--out", str(tmp_path / "run"))  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "acquisitions_per_s" in out.stdout
    assert "lock_stat version" in out.stdout and "&lock_zoo" in out.stdout
    assert "lock=ticket" in out.stdout and "threads=2" in out.stdout
    loaded = al.results.load(tmp_path / "run")
    assert loaded.data["acquisitions"].item() == 1000


def test_run_in_virtual_time_names_the_machine(capsys):
    args = ["run", "lock_zoo", "threads=64", "iterations=50", "lock=mcs", "--clock", "virtual", "--machine",
            "xeon-8380-2s", "--placement", "scatter"]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "RunResult('lock_zoo', 64 workers)" in out and re.search(r"lock_counts_exact +True", out)
    assert f"virtual machine xeon-8380-2s ({al.machine('xeon-8380-2s').hash}, costs=table)" in out
    assert main(["run", "lock_zoo", "--clock", "virtual"]) == 1
    assert "machine: required with clock='virtual'" in capsys.readouterr().err
    assert main(["run", "lock_zoo", "--clock", "virtual", "--machine", "host", "--costs", "cheap"]) == 1
    assert "costs: " in capsys.readouterr().err


def test_machines_lists_profiles_and_shows_sources(capsys):
    assert main(["machines"]) == 0
    out = capsys.readouterr().out
    assert "xeon-8380-2s" in out and "host" in out
    assert main(["machines", "host"]) == 0
    out = capsys.readouterr().out
    assert "transfer_ns" in out and "calibrated on" in out
    assert main(["machines", "nope"]) == 1
    assert "machine: unknown profile 'nope'" in capsys.readouterr().err


def test_run_with_a_bad_parameter_fails_with_its_name(capsys):
    out = alloclab("run", "lock_zoo", "threads=0")
    assert out.returncode == 1
    assert "threads" in out.stderr and "Traceback" not in out.stderr
    assert main(["run", "lock_zoo", "threads=two"]) == 1
    assert "threads: expected an integer" in capsys.readouterr().err


@pytest.mark.parametrize("placement", ["0,x", "spread", "0,,1"])
def test_a_bad_placement_is_named(placement):
    out = alloclab("run", "lock_zoo", "threads=2", "iterations=10", "--placement", placement)
    assert out.returncode == 1
    assert (
        f"placement: expected 'compact', 'scatter' or model PUs separated by commas (0,2,1,3), got {placement!r}"
        in (out.stderr)
    )
    assert "Traceback" not in out.stderr


def test_a_single_pu_placement_works(capsys):
    assert main(["run", "lock_zoo", "threads=1", "iterations=10", "--topology", "node:2 pu:1", "--placement", "1",
                 "--workers"]) == 0  # fmt: skip
    rows = capsys.readouterr().out.splitlines()
    header = rows.index(next(r for r in rows if r.split()[:2] == ["worker", "model_pu"]))
    assert rows[header + 1].split()[:3] == ["0", "1", "1"]  # worker 0 on model PU 1, node 1
    assert main(["run", "lock_zoo", "threads=1", "iterations=10", "placement=0"]) == 0


@pytest.mark.parametrize("gap_s", [0.0, 0.01, 0.1])
def test_a_double_ctrl_c_exits_130(tmp_path, gap_s):
    """The second Ctrl-C lands while the first is handled (the run stopping, the finished rows being saved, the
    process exiting): the exit status is still 130 and no traceback is printed."""
    out = tmp_path / "sweep"
    args = ["sweep", "lock_zoo", "threads=1", "iterations=100,1000000000", "--repeats", "1", "--out", str(out)]
    returncode, err = interrupt_cli([*args, "--no-progress", "--timeout", "120"], out, gaps_s=[gap_s])
    assert returncode == 130, err
    assert "Traceback" not in err


def test_sweep_saves_a_grid_and_fails_when_a_run_failed_unless_keep_going(tmp_path):
    # two workers do not fit a placement of one PU: only the run finds that, and its rows are error rows
    args = ["sweep", "lock_zoo", "threads=1,2", "lock=spin,mcs,ticket", "iterations=200", "--repeats", "2",
            "--placement", "0", "--detail", "--no-progress"]  # fmt: skip
    failed = alloclab(*args, "--out", str(tmp_path / "failed"))
    assert failed.returncode == 1, failed.stderr
    assert "error: threads=2 lock=spin: ValueError: placement: the list has 1 PUs for 2 workers" in failed.stdout
    assert "alloclab sweep: 6 of 12 runs failed (above); --keep-going accepts error rows" in failed.stderr
    assert len(al.results.load(tmp_path / "failed").data) == 12  # saved all the same
    out = alloclab(*args, "--out", str(tmp_path / "sweep"), "--keep-going")
    assert out.returncode == 0, out.stderr
    assert "12 runs" in out.stdout
    assert "error: threads=2 lock=ticket" in out.stdout
    data, meta = al.results.load(tmp_path / "sweep")
    assert len(data) == 12
    assert data["repeat"].tolist() == [0] * 6 + [1] * 6
    assert (data["status"] == "error").sum() == 6
    assert meta["grid"] == {"threads": [1, 2], "lock": ["spin", "mcs", "ticket"]}
    assert meta["fixed"] == {"iterations": 200}
    assert "sweep" in meta["command_line"]
    assert (tmp_path / "sweep" / "workers.parquet").exists()


def test_reproduce_list_names_lock_zoo(capsys):
    assert main(["reproduce", "--list"]) == 0
    out = capsys.readouterr().out
    assert "lock_zoo" in out and "BROKEN" not in out


def test_reproduce_list_shows_each_studys_declared_time(capsys):
    from alloclab import studies

    found, _ = studies.discover()
    assert main(["reproduce", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for study in found.values():
        assert set(study.estimated_s) == {"quick", "full"}, study.name  # every study declares both
        (line,) = [line for line in lines if line.split()[:1] == [study.name]]
        assert study.estimate() in line and study.estimated_s["quick"] is not None  # quick: measured for each
    zoo = found["lock_zoo"]
    assert dataclasses.replace(zoo, estimated_s={"quick": 287, "full": None}).estimate() == "quick ~5 min, full ?"
    assert dataclasses.replace(zoo, estimated_s={"quick": 5.2, "full": 7200}).estimate() == "quick ~5 s, full ~2.0 h"
    assert dataclasses.replace(zoo, estimated_s={}).estimate() == "quick ?, full ?"
    assert [studies._duration(s) for s in (119, 120, 3599)] == ["~119 s", "~2 min", "~60 min"]


def test_a_mistyped_study_or_scenario_is_told_the_closest(capsys):
    assert main(["reproduce", "lock_zo", "--quick"]) == 1
    assert capsys.readouterr().err.rstrip().endswith("; did you mean 'lock_zoo'?")
    assert main(["reproduce", "vmaloc_lock_once"]) == 1
    assert capsys.readouterr().err.rstrip().endswith("; did you mean 'vmalloc_lock_once'?")
    assert main(["scenarios", "cma_concurent"]) == 1
    assert capsys.readouterr().err.rstrip().endswith("; did you mean 'cma_concurrent'?")
    assert main(["run", "lock_zoo", "--lock", "zone->lok=mcs"]) == 1
    assert capsys.readouterr().err.rstrip().endswith("; did you mean 'zone->lock'?")
    assert main(["run", "lock_zoo", "lock=tiket"]) == 1
    assert capsys.readouterr().err.rstrip().endswith("; did you mean 'ticket'?")
    assert main(["sweep", "lock_zoo", "lock=mcs,tiket", "theads=1,2"]) == 1
    assert capsys.readouterr().err.rstrip().endswith("; did you mean 'threads'?")


def test_a_sweep_with_a_typo_fails_before_its_first_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("alloclab.cluster.run", lambda *a, **k: pytest.fail("a run started"))
    out = tmp_path / "sweep"
    assert main(["sweep", "lock_zoo", "lock=mcs,tiket", "threads=1,2", "--out", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "lock: invalid value 'tiket' (allowed: one of 'mutex'" in err and err.rstrip().endswith("'ticket'?")
    assert not out.exists()  # refused before the directory was made
    assert main(["sweep", "lock_zoo", "lock=spin", "--lock", "lock_zoo=ticket", "--no-progress"]) == 1
    assert "lock: 'spin' conflicts with locks['lock_zoo']='ticket'" in capsys.readouterr().err


def test_every_help_ends_with_examples_that_parse_and_pass_the_engines_checks(capsys):
    from alloclab import cli
    from alloclab._run import check
    from alloclab.sweep import configurations

    parser = cli._parser()
    (subs,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    parsers = {"": parser, **subs.choices}
    assert set(cli.EXAMPLES) == set(parsers)
    for name, sub in parsers.items():
        lines = sub.epilog.splitlines()
        assert lines[0] == "examples:" and 2 <= len(lines) - 1 <= 3, name
        for line in lines[1:]:
            words = shlex.split(line)
            assert words[0] == "alloclab" and (not name or words[1] == name), line
            args = cli._parse(cli._parser(), words[1:])  # a usage error exits
            if args.command in ("run", "sweep"):
                fixed, grid = cli.parse_assignments(args.params, cli._types(args.scenario), lists=True)
                options = cli._options(args, fixed)
                for config in configurations(grid):
                    check(args.scenario, **options, **fixed, **config)
    with pytest.raises(SystemExit) as exit:
        main(["sweep", "--help"])
    assert exit.value.code == 0
    assert "examples:\n  alloclab sweep lock_zoo lock=spin,ticket,mcs" in capsys.readouterr().out


def test_csv_exports_copies_beside_the_parquet_result(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["run", "lock_zoo", "threads=2", "iterations=10", "--out", str(run), "--csv"]) == 0
    assert sorted(p.name for p in (run / "csv").iterdir()) == ["data.csv", "lockstat.csv", "workers.csv"]
    assert pd.read_csv(run / "csv" / "workers.csv")["ops"].tolist() == [10, 10]
    assert al.results.load(run).meta["files"]["workers"] == "workers.parquet"  # the result stays Parquet
    sweep = tmp_path / "sweep"
    args = ["sweep", "lock_zoo", "threads=1,2", "iterations=10", "--repeats", "1", "--out", str(sweep), "--csv"]
    assert main([*args, "--no-progress"]) == 0
    assert pd.read_csv(sweep / "csv" / "data.csv")["acquisitions"].tolist() == [10, 20]
    capsys.readouterr()
    assert main(["run", "lock_zoo", "threads=1", "iterations=10", "--csv"]) == 1
    assert "--csv needs --out DIR" in capsys.readouterr().err


def test_out_never_replaces_an_earlier_result(tmp_path, capsys):
    run = ["run", "lock_zoo", "threads=1", "iterations=10", "--out", str(tmp_path / "run")]
    assert main(run) == 0
    first = (tmp_path / "run" / "meta.json").read_bytes()
    assert main([*run[:-3], "iterations=20", *run[-2:]]) == 1
    err = capsys.readouterr().err
    assert "--out: " in err and "already holds a result" in err
    assert (tmp_path / "run" / "meta.json").read_bytes() == first
    assert main([*run[:-3], "iterations=20", *run[-2:], "--force"]) == 0
    assert al.results.load(tmp_path / "run").data["iterations"].item() == 20
    sweep = ["sweep", "lock_zoo", "threads=1", "iterations=10", "--repeats", "1", "--out", str(tmp_path / "sweep")]
    assert main([*sweep, "--no-progress"]) == 0
    first = (tmp_path / "sweep" / "meta.json").read_bytes()
    capsys.readouterr()
    assert main([*sweep, "--no-progress"]) == 1
    assert "already holds a result" in capsys.readouterr().err
    assert (tmp_path / "sweep" / "meta.json").read_bytes() == first
    profile = tmp_path / "host.toml"
    profile.write_text("# an earlier profile\n")
    assert main(["calibrate", "--quick", "--out", str(profile)]) == 1  # refused before measuring
    assert f"--out: {profile} already exists; replace it (--force)" in capsys.readouterr().err
    assert profile.read_text() == "# an earlier profile\n"


def test_reproduce_writes_each_run_to_a_new_folder(tmp_path):
    from alloclab import studies

    dirs = [studies.new_run_dir(tmp_path, "lock_zoo") for _ in range(3)]  # within one second: -1, -2
    assert len(set(dirs)) == 3 and all(d.parent == tmp_path / "lock_zoo" and d.is_dir() for d in dirs)


def test_reproduce_all_quick_writes_tables_and_plots(tmp_path):
    from alloclab import studies

    found, broken = studies.discover()
    assert not broken
    out = alloclab("reproduce", "all", "--quick", "--out", str(tmp_path), "--no-progress")
    assert out.returncode == 0, out.stdout + out.stderr
    for name in found:
        assert f"== {name}:" in out.stdout
        (stamp,) = list((tmp_path / name).iterdir())
        files = {p.name for p in stamp.iterdir()}
        assert {"table.parquet", "meta.json", "data.parquet"} <= files, files
        pngs = [p for p in stamp.glob("*.png")]
        assert pngs and all(p.stat().st_size > 1000 for p in pngs)
        meta = al.results.load(stamp).meta
        assert meta["study"]["name"] == name and meta["study"]["quick"] is True
        assert sorted(meta["study"]["plots"]) == sorted(p.name for p in pngs)
        if found[name].seed:  # a seed study: its claim as published | virtual | real, tables and figure first
            assert meta["study"]["projected"] and meta["study"]["plots"][0] == "projected.png"
            assert {f"projected_{t}.parquet" for t in meta["study"]["projected"]} <= files
    # lock_zoo: 5 kinds x 3 thread counts, 4 threads marked oversubscribed on a machine with fewer PUs
    assert "published_acquisitions_per_s" in out.stdout


def test_reproduce_unknown_study(capsys):
    assert main(["reproduce", "nope", "--quick"]) == 1
    assert "unknown study 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("3", None, 3),
        ("1_000", None, 1000),
        ("0x10", None, 16),
        ("2.5", None, 2.5),
        ("1e6", None, 1e6),
        ("1e6", "int", 1000000),
        ("true", None, True),
        ("off", None, False),
        ("1", "bool", True),
        ("spin", None, "spin"),
        ("1", "choice", "1"),
        ("7", "float", 7.0),
    ],
)
def test_parse_value(text, kind, value):
    got = parse_value(text, kind)
    assert got == value and type(got) is type(value)


def test_parse_assignments_splits_grid_and_fixed():
    fixed, grid = parse_assignments(["threads=1,2,4", "lock=spin", "hold_ns=0,100"], {"lock": "choice"}, lists=True)
    assert fixed == {"lock": "spin"}
    assert grid == {"threads": [1, 2, 4], "hold_ns": [0, 100]}
    with pytest.raises(ValueError, match="name=value"):
        parse_assignments(["threads"])
    with pytest.raises(ValueError, match="twice"):
        parse_assignments(["a=1", "a=2"])
    with pytest.raises(ValueError, match="threads: expected an integer"):
        parse_assignments(["threads=1.5"], {"threads": "int"})


def test_parameters_may_follow_options(capsys):
    argv = ["run", "lock_zoo", "--clock", "virtual", "--machine", "host", "iterations=100", "--workers", "threads=2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert re.search(r"^acquisitions\s+200$", out, re.M), out


def test_stray_arguments_are_named(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "lock_zoo", "--workers", "threads"])  # not k=v
    assert exc.value.code == 2
    assert "unrecognized arguments: threads" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["scenarios", "lock_zoo", "iterations=5"])  # scenarios takes no parameters


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"alloclab {al.__version__}"


def test_reproduce_without_a_name_lists_the_studies_and_runs_none(capsys, monkeypatch):
    from alloclab import studies

    monkeypatch.setattr(studies, "reproduce", lambda *a, **k: pytest.fail("a study ran"))
    assert main(["reproduce"]) == 2
    out = capsys.readouterr().out
    assert out.startswith("alloclab reproduce NAME") and "lock_zoo" in out
