"""The ``alloclab`` command line.

::

    alloclab topology [--synthetic "node:2 core:2 pu:1" | --xml FILE]
    alloclab scenarios [SCENARIO]
    alloclab metrics [SCENARIO]
    alloclab run SCENARIO [k=v ...] [--lockstat] [--workers] [--topology T] [--lock CLASS=KIND] [--out DIR [--force]]
    alloclab sweep SCENARIO k=v1,v2 ... [--repeats N] [--out DIR [--resume|--force]] [--keep-going] [--timeout S] ...
    alloclab reproduce [NAME|all] [--quick] [--out results] [--list]
    alloclab report [DIR]
    alloclab calibrate [--out FILE [--force]] [--quick] [--repeats N] [--name NAME] [--description TEXT]

``k=v`` values are converted with the parameter's declared type (``alloclab scenarios`` lists them); a value
of an unknown parameter becomes a bool (``true``/``false``), an int, a float or stays a string, in that order.
In ``sweep``, a comma makes an axis of the grid (``threads=1,2,4``); a single value is a fixed parameter.
``sweep --out DIR`` saves the finished rows after every run; after Ctrl-C (exit status 130) or a crash, the same
command with ``--resume`` runs only the runs DIR does not hold with status ok. ``--out`` never replaces an earlier
result without ``--force`` (``run``, ``sweep`` and ``calibrate`` refuse it before they start, exit status 1;
``reproduce`` writes each run to a new ``OUT/NAME/<UTC stamp>/``), and one directory has one writer at a time (a second
one is refused, exit status 1). A sweep checks every value with the engine before its first run, and exits 1 when a
run failed unless ``--keep-going`` accepts error rows. Every ``--help`` ends with examples (:data:`EXAMPLES`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from . import _cli_kernel, cluster
from ._core import __version__
from .calibrate import REPEATS, REPEATS_RANGE

__all__ = ["EXAMPLES", "console", "main", "parse_assignments", "parse_value"]

#: The examples each ``--help`` ends with ("" is the top level), real commands that parse (a test checks it).
EXAMPLES: dict[str, tuple[str, ...]] = {
    "": (
        "alloclab scenarios lock_zoo",
        "alloclab run lock_zoo threads=2 lock=ticket --lockstat",
        "alloclab reproduce lock_zoo --quick",
    ),
    "topology": (
        "alloclab topology",
        'alloclab topology --synthetic "node:4 core:2 pu:1"',
        "alloclab topology --xml machine.xml",
    ),
    "scenarios": ("alloclab scenarios", "alloclab scenarios vmalloc_stress"),
    "metrics": ("alloclab metrics lock_zoo", "alloclab metrics"),
    "machines": ("alloclab machines", "alloclab machines xeon-8380-2s"),
    "run": (
        "alloclab run lock_zoo threads=2 lock=ticket iterations=10000 --lockstat",
        'alloclab run page_alloc --topology "node:2 core:2 pu:1" threads=4 --lock "zone->lock=mcs" --workers',
        "alloclab run vmalloc_stress pattern=test_vmalloc nr_threads=2 run_test_mask=3 test_loop_count=10000 "
        "--clock virtual --machine xeon-8380-2s --summary-lines",
    ),
    "sweep": (
        "alloclab sweep lock_zoo lock=spin,ticket,mcs threads=1,2 iterations=20000 --repeats 3",
        "alloclab sweep cma_concurrent regions=1,2,4 --clock virtual --machine xeon-8380-2s --out results/cma",
        "alloclab sweep lock_zoo lock=spin,mcs threads=1,2 --out results/zoo --resume",
    ),
    "reproduce": ("alloclab reproduce", "alloclab reproduce lock_zoo --quick", "alloclab reproduce all --quick"),
    "report": ("alloclab report", "alloclab report /tmp/results"),
    "kernel": (  # as root, on a kernel built with CONFIG_LOCK_STAT
        "alloclab kernel lockstat --out results/ls-stress -- stress-ng --vm 4 --timeout 10",
        "alloclab kernel lockstat --csv --out results/ls-build -- make -j8",
    ),
    "compare": (
        "alloclab compare results/spin results/mcs",
        "alloclab compare results/before results/after --metric elapsed_s --by threads",
    ),
    "calibrate": (
        "alloclab calibrate --quick",
        'alloclab calibrate --out host.toml --name laptop --description "4-core laptop"',
        "alloclab calibrate --repeats 15 --out host.toml",
    ),
}

_RUN_OPTION_TYPES: dict[str, type] = {
    "seed": int,
    "timeout_s": float,
    "lockstat": bool,
    "strict": bool,
    "placement": str,
    "topology": str,
}
_TRUE = {"true", "yes", "on"}
_FALSE = {"false", "no", "off"}


def parse_value(text: str, kind: str | type | None = None) -> Any:
    """Convert one command-line value.

    Args:
        text: the value as typed.
        kind: the declared type: ``"int"``, ``"float"``, ``"bool"``, ``"choice"``/``"str"`` (or the Python type);
            ``None`` guesses: bool words (``true/false/yes/no/on/off``), then int (``1_000``, ``0x10`` too), then
            float (``1e6``), else the string.

    Raises:
        ValueError: the text does not fit the declared type.
    """
    name = kind.__name__ if isinstance(kind, type) else kind
    if name in ("choice", "str", "string"):
        return text
    if name == "bool" or (name is None and text.lower() in _TRUE | _FALSE):
        low = text.lower()
        if low in _TRUE or low == "1":
            return True
        if low in _FALSE or low == "0":
            return False
        raise ValueError(f"expected a boolean (true/false), got {text!r}")
    if name in ("int", None):
        try:
            return int(text.replace("_", ""), 0)
        except ValueError:
            if name == "int":
                try:
                    as_float = float(text)
                except ValueError:
                    raise ValueError(f"expected an integer, got {text!r}") from None
                if as_float.is_integer():
                    return int(as_float)  # 1e6
                raise ValueError(f"expected an integer, got {text!r}") from None
    if name in ("float", None):
        try:
            return float(text)
        except ValueError:
            if name == "float":
                raise ValueError(f"expected a number, got {text!r}") from None
    return text


def parse_assignments(
    items: Sequence[str], types: dict[str, str] | None = None, *, lists: bool = False
) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """Split ``k=v`` words into fixed values and (with ``lists=True``) grid axes ``k=v1,v2``.

    Args:
        items: the words, e.g. ``["threads=1,2,4", "lock=spin"]``.
        types: parameter name -> declared type (from :func:`alloclab.scenarios`).
        lists: treat a comma-separated value as a list of values (an axis).

    Returns:
        ``(fixed, grid)``.

    Raises:
        ValueError: a word is not ``k=v``, a name is repeated, or a value does not fit its type.
    """
    types = dict(types or {})
    fixed: dict[str, Any] = {}
    grid: dict[str, list[Any]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"expected name=value, got {item!r}")
        if key in fixed or key in grid:
            raise ValueError(f"{key}: given twice")
        kind = types.get(key) or _RUN_OPTION_TYPES.get(key)
        try:
            if lists and "," in raw:
                values = [parse_value(v.strip(), kind) for v in raw.split(",") if v.strip() != ""]
                if not values:
                    raise ValueError("no values")
                grid[key] = values
            else:
                fixed[key] = parse_value(raw.strip(), kind)
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None
    return fixed, grid


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``alloclab`` console script; returns the exit status (0 ok, 1 failure, 2 usage)."""
    parser = _parser()
    args = _parse(parser, argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except ValueError as exc:
        print(f"alloclab {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("alloclab: interrupted", file=sys.stderr)
        return 130


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """The parsed command line; a usage error exits with status 2 (argparse's)."""
    # k=v pairs may stand anywhere among the options (`run lock_zoo --clock virtual iterations=1000`): argparse ends a
    # `nargs="*"` positional at the first option, so the pairs after it come back as extras and join the others.
    args, extra = parser.parse_known_args(argv)
    stray = [a for a in extra if a.startswith("-") or "=" not in a or not hasattr(args, "params")]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    if extra:
        args.params = [*args.params, *extra]
    return args


def console() -> None:
    """The ``alloclab`` console script: :func:`main` with Ctrl-C made final. The first Ctrl-C stops what runs (a sweep
    saves its finished rows) and the exit status is 130; later ones are ignored while that finishes and the process
    exits, so a double Ctrl-C also exits 130, never with a traceback or another status. A reader that goes away
    (``alloclab metrics | head``) ends it quietly with status 141, as SIGPIPE ends a C tool."""
    signal.signal(signal.SIGINT, _first_interrupt_only)
    try:
        status = main()
        sys.stdout.flush()  # here, not at exit, where a broken pipe could only be reported
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's own flush goes nowhere
        status = 128 + signal.SIGPIPE
    sys.exit(status)


def _first_interrupt_only(signum: int, frame: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


# --- commands ----------------------------------------------------------------------------------------------


def _cmd_topology(args: argparse.Namespace) -> int:
    from .topology import Topology

    if args.synthetic and args.xml:
        raise ValueError("give --synthetic or --xml, not both")
    topo = (
        Topology.synthetic(args.synthetic)
        if args.synthetic
        else Topology.from_xml(args.xml)
        if args.xml
        else Topology.host()
    )
    print(repr(topo))
    print(f"{topo.source}: {topo.nodes} node(s), {topo.cores} core(s), {topo.pus} PU(s)")
    if topo.source != "host":
        host = Topology.host()
        print(
            f"runs on the host's {host.pus} PU(s): model PU p -> host PU p % {host.pus}"
            + ("; more workers than that are oversubscribed" if topo.pus > host.pus else "")
        )
    return 0


def _cmd_scenarios(args: argparse.Namespace) -> int:
    from ._catalogue import scenarios

    table = scenarios(args.scenario)
    width = shutil.get_terminal_size().columns
    for name in _unique(table):
        part = table[table["scenario"] == name].copy()
        print("\n".join(_wrap(f"{name}: {part['scenario_doc'].iloc[0]}", width)))
        units = part["size_unit"].tolist()
        part["default"] = [_with_size(v, u) for v, u in zip(part["default"], units, strict=True)]
        part["allowed"] = [_with_size(v, u, m) for v, u, m in zip(part["allowed"], units, part["max"], strict=True)]
        print(_fit(part[["parameter", "type", "default", "allowed", "doc"]], ["default", "allowed", "doc"], width))
        print()
    options = "topology, placement, lockstat, locks, strict, seed, timeout_s, clock, machine, costs (see al.run)."
    print("\n".join(_wrap(f"Every run also takes: {options}", width)))
    return 0


def _cmd_metrics(args: argparse.Namespace) -> int:
    from ._catalogue import metrics

    table = metrics(args.scenario)
    width = shutil.get_terminal_size().columns
    for name in _unique(table):
        part = table[table["scenario"] == name]
        for level in ("summary", "worker"):
            rows = part[part["level"] == level]
            print(f"{name}: {'r.summary (one value per run)' if level == 'summary' else 'r.workers (per worker)'}")
            print(_fit(rows[["metric", "unit", "meaning"]], ["meaning"], width))
            print()
    return 0


def _cmd_machines(args: argparse.Namespace) -> int:
    from .machines import machine, machines

    if args.name:
        m = machine(args.name)
        print(repr(m))
        print(_indent(m.fields.to_string(index=False)))
        return 0
    print(machines().to_string(index=False))
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from . import _resultdir, results
    from ._run import run

    fixed, _ = parse_assignments(args.params, _types(args.scenario))
    _check_csv(args)
    options = _options(args, fixed)
    # --out is checked and held before the run (a file, a directory that cannot be written, another writer, an
    # earlier result without --force), not after it.
    with contextlib.ExitStack() as stack:
        writer = None
        if args.out:
            writer = stack.enter_context(
                _resultdir.Writer(args.out, results._TABLES, param="--out", overwrite=args.force)
            )
        result = run(args.scenario, **options, **fixed)
        _print_run(args, result)
        if writer is not None:
            path = results._save(writer, result, meta=None, env=None)
            print(f"\nsaved to {path}")
    if args.out:
        _export_csv(args)
    return 1 if result.stopped else 0


def _print_run(args: argparse.Namespace, result: Any) -> None:
    print(repr(result))
    print()
    print("parameters: " + " ".join(f"{k}={v}" for k, v in result.params.items()))
    prov = result.provenance
    where = (
        f"virtual machine {prov.get('machine')} ({prov.get('machine_hash')}, costs={prov.get('costs')})"
        if prov.get("clock") == "virtual"
        else f"host {prov.get('hostname')}"
    )
    print(
        f"topology: {prov.get('model_description')} on {where}; "
        f"workers bound {prov.get('workers_bound')}/{prov.get('workers')}"
        + (" (oversubscribed)" if prov.get("oversubscribed") else "")
    )
    if args.workers:
        print()
        print(result.workers.to_string(index=False))
    if args.lockstat:
        print()
        print(result.lockstat_text())
    if args.summary_lines:
        print()
        print("\n".join(result.summary_lines()))


def _cmd_sweep(args: argparse.Namespace) -> int:
    from .sweep import SweepInterrupted, sweep

    fixed, grid = parse_assignments(args.params, _types(args.scenario), lists=True)
    if args.resume and not args.out:
        raise ValueError("--resume needs --out DIR (the directory of the sweep to resume)")
    _check_csv(args)
    options = _options(args, fixed)
    progress = _progress(args)
    try:
        with _executor(args) as executor:
            out = sweep(
                args.scenario, grid=grid, repeats=args.repeats, progress=progress, detail=bool(args.detail),
                out=args.out, resume=bool(args.resume) or None, overwrite=bool(args.force), executor=executor,
                **options, **fixed,
            )  # fmt: skip
    except SweepInterrupted as exc:
        print(f"alloclab sweep: interrupted after {exc.done} of {exc.total} runs", file=sys.stderr)
        if exc.saved is not None:
            print(f"the finished runs are saved in {exc.saved}; add --resume to continue", file=sys.stderr)
        return 130
    runs = out.runs if args.detail else out
    meta = runs.attrs.get("alloclab") or {}
    if meta.get("reused_runs"):
        print(f"resumed from {meta.get('resumed_from')}: {meta['reused_runs']} runs reused, not run again")
    keys = list(grid) or ["config"]
    figures = [c for c in runs.columns[list(runs.columns).index(cluster.HOST_COLUMNS[-1]) + 1 :]]
    ok = runs[runs["status"] == "ok"]
    counts = runs.groupby(keys, sort=False)["status"].agg(runs="size", ok=lambda s: int((s == "ok").sum()))
    table = counts
    if len(ok) and figures:
        medians = ok.groupby(keys, sort=False)[figures].median(numeric_only=True)
        over = ok.groupby(keys, sort=False)["oversubscribed"].max().rename("oversubscribed")
        table = counts.join(over).join(medians)
    print(f"{args.scenario}: {len(runs)} runs ({args.repeats} repeats, interleaved); medians over ok runs:")
    print(_fmt(table.reset_index()))
    errors = runs[runs["status"] != "ok"].drop_duplicates(subset=[*keys, "error"])
    for _, row in errors.iterrows():
        where = " ".join(f"{k}={row[k]}" for k in keys)
        print(f"{row['status']}: {where}: {row['error']}")
    if args.out:
        print(f"saved to {args.out}")
        _export_csv(args)
    failed = int((runs["status"] == "error").sum())  # a "stopped" row ran until the --timeout it was given
    if failed and not args.keep_going:
        print(
            f"alloclab sweep: {failed} of {len(runs)} runs failed (above); --keep-going accepts error rows",
            file=sys.stderr,
        )
        return 1
    return 0 if len(ok) else 1


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from . import studies
    from .config import quick as quick_env

    found, broken = studies.discover()
    asked = args.list  # without a name: say what there is, never start every full study by accident
    if args.name is None and not asked:
        print("alloclab reproduce NAME [--quick]: NAME is a study below, one of its scenarios, or 'all'")
    if args.name is None or asked:
        for study in found.values():
            seed = study.seed or "no seed patch"
            print(f"{study.name:18s} {study.estimate():26s} {study.title}")
            print(f"{'':18s} [{seed}; scenarios: {', '.join(study.scenarios) or 'several'}]")
        for module, error in broken.items():
            print(f"{module}: BROKEN: {error}")
        return 0 if asked else 2
    if args.name == "all":
        selected = list(found.values())
    else:
        selected = [studies.find(args.name)]
    quick = bool(args.quick or quick_env())
    progress = _progress(args)
    with _executor(args) as executor, cluster.using(executor):  # every sweep of the studies goes there
        return _reproduce(args, selected, broken, quick, progress)


def _reproduce(
    args: argparse.Namespace, selected: list[Any], broken: dict[str, str], quick: bool, progress: bool
) -> int:
    """Runs the ``selected`` studies and prints their tables; returns the exit status."""
    from . import studies

    failures = 0
    for module, error in broken.items() if args.name == "all" else ():
        print(f"== {module}: cannot load: {error}", file=sys.stderr)
        failures += 1
    for study in selected:
        print(f"== {study.name}: {study.title}")
        print(f"   seed: {study.seed or 'none (nothing published to compare with)'}; quick={quick}")
        try:
            done = studies.reproduce(study, quick=quick, out=args.out, progress=progress, csv=args.csv)
        except Exception as exc:  # one failing study must not hide the others
            failures += 1
            print(f"   FAILED: {studies.format_error(exc)}", file=sys.stderr)
            continue
        print(_indent(_fmt(done.result.table)))
        for name, table in done.result.projected.items():
            print(f"   {name}: published | virtual | real")
            print(_indent(_fmt(table), 6))
        if len(study.published):
            print("   published by the seed:")
            print(_indent(_fmt(study.published), 6))
        for note in done.result.notes:
            print(f"   note: {note}")
        print(f"   wrote {len(done.files)} files to {done.out_dir} in {done.elapsed_s:.1f} s")
        for plot in done.result.plots:
            print(f"     plot: {plot}")
        print()
    if not selected and not broken:
        print("no studies registered", file=sys.stderr)
        return 1
    if failures < len(selected):
        from . import report

        print(f"report: {report.build(args.out)}")
    return 1 if failures else 0


def _check_csv(args: argparse.Namespace) -> None:
    if args.csv and not args.out:
        raise ValueError("--csv needs --out DIR (it exports copies of the tables saved there)")


def _export_csv(args: argparse.Namespace) -> None:
    """``--csv``: CSV copies of the tables saved in ``--out`` (the Parquet files stay the result)."""
    from . import results

    if args.csv:
        files = results.export_csv(args.out)
        print(f"CSV copies: {', '.join(str(f) for f in files)}")


def _cmd_report(args: argparse.Namespace) -> int:
    from . import report

    print(f"wrote {report.build(args.dir)}")
    return 0


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from .calibrate import calibrate, to_toml

    if args.out and Path(args.out).exists() and not args.force:
        raise ValueError(f"--out: {args.out} already exists; replace it (--force) or choose another file")

    def log(line: str) -> None:
        print(f"  {line}", file=sys.stderr)

    print(f"alloclab calibrate: measuring this host{' (quick mode)' if args.quick else ''} ...", file=sys.stderr)
    doc = calibrate(quick=args.quick, repeats=args.repeats, name=args.name, description=args.description, log=log)
    text = to_toml(doc)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    print(doc["description"], file=sys.stderr)
    return 0


# --- helpers -----------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="alloclab",
        description="Lock contention in Linux-style memory allocators: runs, sweeps, studies.",
        epilog=_epilog(""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"alloclab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = _command(sub, "topology", "show the host topology or a model one")
    p.add_argument("--synthetic", metavar="S", help='a synthetic description, e.g. "node:4 core:2 pu:1"')
    p.add_argument("--xml", metavar="FILE", help="an hwloc XML file (lstopo out.xml)")
    p.set_defaults(func=_cmd_topology)

    p = _command(sub, "scenarios", "list the scenarios and their parameters")
    p.add_argument("scenario", nargs="?", help="only this scenario")
    p.set_defaults(func=_cmd_scenarios)

    p = _command(sub, "metrics", "list what a scenario reports: every summary and per-worker figure, unit, meaning")
    p.add_argument("scenario", nargs="?", help="only this scenario")
    p.set_defaults(func=_cmd_metrics)

    p = _command(sub, "machines", "list the machine profiles of virtual-clock runs, or show one with its sources")
    p.add_argument("name", nargs="?", help="a profile name or TOML file: print every number with its source")
    p.set_defaults(func=_cmd_machines)

    p = _command(sub, "run", "run a scenario once; print its summary (and lock_stat)")
    p.add_argument("scenario")
    p.add_argument("params", nargs="*", metavar="k=v", help="scenario parameters")
    p.add_argument("--lockstat", action="store_true", help="print the lock statistics in /proc/lock_stat format")
    p.add_argument("--workers", action="store_true", help="print the per-worker table")
    p.add_argument(
        "--summary-lines",
        action="store_true",
        help="print the kernel test's own summary lines (vmalloc_stress pattern=test_vmalloc: lib/test_vmalloc.c's)",
    )
    p.add_argument("--out", metavar="DIR", help="save the result with its provenance to DIR")
    p.add_argument("--force", action="store_true", help="with --out: replace the result DIR already holds")
    _csv_option(p)
    _run_options(p)
    p.set_defaults(func=_cmd_run)

    p = _command(sub, "sweep", "run a grid of configurations with repeats; print medians, save")
    p.add_argument("scenario")
    p.add_argument("params", nargs="*", metavar="k=v1,v2", help="grid axes (with commas) and fixed parameters")
    p.add_argument("--repeats", type=int, default=3, help="runs per configuration, interleaved (default 3)")
    p.add_argument(
        "--out", metavar="DIR", help="save the table and meta.json (with provenance) to DIR, after every run"
    )
    p.add_argument("--resume", action="store_true", help="with --out: skip the runs DIR already holds with status ok")
    p.add_argument("--force", action="store_true", help="with --out: replace the result DIR already holds")
    p.add_argument("--detail", action="store_true", help="with --out: also save per-worker and lock_stat tables")
    _csv_option(p)
    p.add_argument(
        "--keep-going", action="store_true", help="exit 0 even when runs failed (their error rows are kept and shown)"
    )
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None, help="progress bar")
    _run_options(p)
    _cluster_options(p)
    p.set_defaults(func=_cmd_sweep)

    p = _command(sub, "reproduce", "run the seed studies; print ours beside the published figures")
    p.add_argument("name", nargs="?", help="a study (or scenario) name, or 'all'; none: list the studies")
    p.add_argument("--quick", action="store_true", help="small sizes (also: ALLOCLAB_QUICK=1)")
    p.add_argument("--out", default="results", metavar="DIR", help="results root (default: results)")
    p.add_argument("--list", action="store_true", help="list the studies and exit")
    _csv_option(p, "also CSV copies of each study's tables in its run directory's csv/")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None, help="progress bars")
    _cluster_options(p)
    p.set_defaults(func=_cmd_reproduce)

    p = _command(sub, "report", "rebuild DIR/index.html: every study's newest run on one offline page")
    p.add_argument("dir", nargs="?", default="results", metavar="DIR", help="results root (default: results)")
    p.set_defaults(func=_cmd_report)

    p = _command(sub, "calibrate", "measure this machine and write its machine profile (TOML)")
    p.add_argument("--out", metavar="FILE", help="write the profile to FILE (default: print it)")
    p.add_argument("--force", action="store_true", help="with --out: replace FILE if it exists")
    p.add_argument("--quick", action="store_true", help="tiny measurements: checks the tool, not the machine")
    p.add_argument(
        "--repeats",
        type=int,
        metavar="N",
        help=f"interleaved runs of every measurement; each number is their median, its source gives the spread "
        f"({REPEATS_RANGE[0]}..{REPEATS_RANGE[1]}; default {REPEATS[0]}, quick {REPEATS[1]})",
    )
    p.add_argument("--name", default="host", help="the profile's name (default: host)")
    p.add_argument("--description", metavar="TEXT", help='what the machine is, e.g. "2-vCPU VM, ..."')
    p.set_defaults(func=_cmd_calibrate)

    _cli_kernel.add_commands(sub, _command)  # alloclab kernel lockstat, alloclab compare
    return parser


def _command(sub: Any, name: str, help: str) -> argparse.ArgumentParser:
    """A subcommand whose ``--help`` ends with its :data:`EXAMPLES`."""
    return sub.add_parser(name, help=help, epilog=_epilog(name), formatter_class=argparse.RawDescriptionHelpFormatter)


def _epilog(command: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[command])


def _csv_option(p: argparse.ArgumentParser, help: str = "") -> None:
    default = "with --out: also CSV copies of the tables in DIR/csv/ (the result is DIR's Parquet files)"
    p.add_argument("--csv", action="store_true", help=help or default)


def _run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topology", metavar="T", help='"host" (default), a synthetic description, or an XML file')
    p.add_argument("--placement", default="compact", help="compact (default), scatter, or a PU list 0,2,1,3")
    p.add_argument("--lock", action="append", default=[], metavar="CLASS=KIND", help="lock kind override")
    p.add_argument(
        "--seed",
        type=int,
        default=1,
        help="seed of the run's random choices and, in virtual time, of the workers' start order (default 1)",
    )
    p.add_argument("--timeout", type=float, default=0.0, metavar="S", help="stop a run after S seconds")
    p.add_argument("--strict", action="store_true", help="binding failures are errors")
    p.add_argument("--clock", default="real", help="real (default) or virtual: simulate --machine in virtual time")
    p.add_argument("--machine", metavar="NAME", help="with --clock virtual: a profile (alloclab machines) or TOML file")
    p.add_argument("--costs", metavar="KIND", help="with --clock virtual: table (default; deterministic) or measured")


def _cluster_options(p: argparse.ArgumentParser) -> None:
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--dask",
        metavar="ADDRESS",
        help="run every run as a task on the Dask scheduler at ADDRESS (README 'On a cluster')",
    )
    where.add_argument(
        "--slurm",
        metavar="K=V,...",
        help="run the runs as a SLURM job array through submitit (local processes without SLURM); keys: folder, "
        + ", ".join(cluster.SLURM_KEYS),
    )


def _executor(args: argparse.Namespace) -> contextlib.AbstractContextManager[Any]:
    """What ``--dask``/``--slurm`` ask for (a function for :func:`alloclab.cluster.pick`; None: run here), as a
    context that disconnects from Dask at its end."""
    if args.dask is not None:
        return cluster.dask(args.dask)
    if args.slurm is None:
        return contextlib.nullcontext()
    params: dict[str, Any] = {}
    for item in args.slurm.split(","):
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--slurm: expected key=value,... got {item!r} in {args.slurm!r}")
        params[key.strip()] = raw.strip() if key.strip() in ("folder", "partition") else parse_value(raw.strip())
    return contextlib.nullcontext(cluster.slurm(**params))


def _options(args: argparse.Namespace, fixed: dict[str, Any]) -> dict[str, Any]:
    from .topology import Topology

    locks = {}
    for item in args.lock:
        cls, sep, kind = item.partition("=")
        if not sep or not cls or not kind:
            raise ValueError(f"--lock: expected CLASS=KIND, got {item!r}")
        locks[cls.strip()] = kind.strip()
    topology: Any = fixed.pop("topology", None) or args.topology
    if isinstance(topology, str):
        if topology == "host":
            topology = None
        elif topology.endswith(".xml") or Path(topology).is_file():
            topology = Topology.from_xml(topology)
        else:
            topology = Topology.synthetic(topology)
    placement = _placement(fixed.pop("placement", None) or args.placement)
    return {
        "topology": topology,
        "placement": placement,
        "locks": locks or None,
        "seed": fixed.pop("seed", args.seed),
        "timeout_s": fixed.pop("timeout_s", args.timeout),
        "strict": fixed.pop("strict", args.strict),
        "lockstat": fixed.pop("lockstat", True),
        "clock": fixed.pop("clock", args.clock),
        "machine": fixed.pop("machine", args.machine),
        "costs": fixed.pop("costs", args.costs),
    }


def _placement(text: Any) -> str | list[int]:
    """``compact``, ``scatter``, or model PUs separated by commas (``0,2,1,3``; a single ``0`` too)."""
    text = str(text).strip()
    if text in ("compact", "scatter"):
        return text
    try:
        return [int(p, 0) for p in text.split(",")]
    except ValueError:
        raise ValueError(
            f"placement: expected 'compact', 'scatter' or model PUs separated by commas (0,2,1,3), got {text!r}"
        ) from None


def _types(scenario: str) -> dict[str, str]:
    from ._catalogue import scenarios

    table = scenarios()
    part = table[table["scenario"] == scenario]
    return dict(zip(part["parameter"], part["type"], strict=True))


def _progress(args: argparse.Namespace) -> bool:
    return sys.stderr.isatty() if args.progress is None else bool(args.progress)


def _unique(table: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(table["scenario"]))


def _with_size(value: Any, unit: str | None, upper: Any = None) -> str:
    """A parameter's default (or its allowed range, with ``upper`` its maximum) with the size it stands for beside
    it when the catalogue declares a size unit: ``16384 (16 KiB)``, ``1..1073741824 (up to 1 GiB)``."""
    from ._catalogue import human_size

    if not unit:
        return str(value)
    if upper is None:
        return f"{value} ({human_size(value, unit)})" if value else str(value)
    return f"{value} (up to {human_size(upper, unit)})"


def _fit(table: pd.DataFrame, wrap: Sequence[str], width: int, indent: int = 3) -> str:
    """``table`` as text no wider than ``width``: the columns in ``wrap`` are wrapped (at spaces) into what the other
    columns, at their natural widths, leave. Each but the last gets an equal share of what is left for it and the
    last (of 3 columns: a quarter, a third, the rest), or its longest word if that takes at most half; the last gets
    the rest, and at least 12 characters, so a very narrow terminal still shows the table (wider than it)."""
    text = table.astype(str).replace({"None": "-", "nan": "-"})
    columns = list(text.columns)
    natural = {c: max([len(c), *(len(v) for v in text[c])]) for c in columns}
    room = width - indent - 2 * (len(columns) - 1) - sum(natural[c] for c in columns if c not in wrap)
    widths = dict(natural)
    for i, col in enumerate(wrap):
        if i == len(wrap) - 1:  # the last takes the rest
            widths[col] = max(12, room)
            break
        word = max(len(w) for v in text[col] for w in [*v.split(), ""])  # whole, unless it takes half the room
        widths[col] = min(natural[col], max(room // (len(wrap) - i + 1), min(word, room // 2)))
        room -= widths[col]
    lines = ["  ".join(c.ljust(widths[c]) for c in columns).rstrip()]
    for row in text.itertuples(index=False):
        cells = [_wrap(v, widths[c]) if c in wrap else [v] for c, v in zip(columns, row, strict=True)]
        for k in range(max(len(cell) for cell in cells)):
            cut = [(cell[k] if k < len(cell) else "").ljust(widths[c]) for cell, c in zip(cells, columns, strict=True)]
            lines.append("  ".join(cut).rstrip())
    return _indent("\n".join(lines), indent)


def _wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken at spaces (``zone->lock`` stays whole)."""
    return textwrap.wrap(text, width, break_on_hyphens=False) or [""]


def _fmt(table: pd.DataFrame) -> str:
    def number(v: float) -> str:
        return f"{v:.4g}"

    return table.to_string(index=False, float_format=number, na_rep="-")


def _indent(text: str, n: int = 3) -> str:
    pad = " " * n
    return "\n".join(pad + line for line in text.splitlines())


if __name__ == "__main__":
    console()
