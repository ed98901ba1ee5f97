"""The ``alloclab kernel`` and ``alloclab compare`` commands (registered by :func:`add_commands`).

::

    alloclab kernel lockstat [--out DIR] [--csv] -- CMD [ARG ...]
    alloclab compare DIR_A DIR_B [--metric elapsed_s] [--by COL,...] [--alpha 0.05] [--across-hosts]

``kernel lockstat`` clears ``/proc/lock_stat``, runs CMD and snapshots it (:func:`alloclab.kernel.lockstat_around`);
where the kernel has no lock_stat or this user cannot write it, it says why and exits 1 without running CMD.
``compare`` prints, per configuration, B's change against A with its interval and significance
(:func:`alloclab.compare.directories`), as ``pyperf compare_to`` does.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

__all__ = ["add_commands"]


def add_commands(sub: Any, command: Callable[[Any, str, str], argparse.ArgumentParser]) -> None:
    """Add the ``kernel`` and ``compare`` commands to the ``alloclab`` parser.

    Args:
        sub: the parser's subparsers (what ``ArgumentParser.add_subparsers`` returned); each command sets ``func``
            to the function that runs it and returns the exit status.
        command: makes one subcommand's parser from ``(sub, name, help)``, with the examples its ``--help`` ends
            with (``cli._command``).
    """
    p = command(sub, "kernel", "real kernel lock statistics beside the model's")
    kernel_sub = p.add_subparsers(dest="kernel_command", metavar="KERNEL_COMMAND")
    p.set_defaults(func=lambda args: _help(p))
    q = kernel_sub.add_parser(
        "lockstat",
        help="clear /proc/lock_stat, run CMD, snapshot /proc/lock_stat",
        description="Clear /proc/lock_stat (write 0), switch collection on if it is off, run CMD, read "
        "/proc/lock_stat; write it and its parsed tables to --out. Needs a kernel with CONFIG_LOCK_STAT and root. "
        "Exits with CMD's status.",
        epilog="example: sudo alloclab kernel lockstat --out results/ls-stress -- stress-ng --vm 4 --timeout 10",
    )
    q.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD", help="the command to run, after --")
    q.add_argument("--out", metavar="DIR", help="a new or empty directory for lock_stat.txt, the tables, meta.json")
    q.add_argument("--csv", action="store_true", help="with --out: also CSV copies of the tables in DIR/csv/")
    q.add_argument("--lock-stat-path", default="/proc/lock_stat", metavar="PATH", help="default /proc/lock_stat")
    q.add_argument("--sysctl-path", default="/proc/sys/kernel/lock_stat", metavar="PATH",
                   help="the switch of collection (default /proc/sys/kernel/lock_stat)")  # fmt: skip
    q.set_defaults(func=_cmd_kernel_lockstat)

    p = command(sub, "compare", "compare two results directories per configuration (change, interval, significance)")
    p.description = (
        "Compare the runs in DIR_B with those in DIR_A per configuration: medians, the change B/A - 1 with its "
        "bootstrap interval, the Mann-Whitney U p-value and whether it is a finding."
    )
    p.add_argument("dir_a", metavar="DIR_A", help="the baseline (written by alloclab run/sweep/reproduce --out)")
    p.add_argument("dir_b", metavar="DIR_B", help="the contender")
    p.add_argument("--metric", default="elapsed_s", help="the column to compare (default elapsed_s)")
    p.add_argument("--by", metavar="COL,...", help="the columns naming a configuration (default: the grid)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    p.add_argument("--across-hosts", action="store_true", help="allow timings from two different hosts")
    p.set_defaults(func=_cmd_compare)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _cmd_kernel_lockstat(args: argparse.Namespace) -> int:
    from .kernel import lockstat_around

    cmd = list(args.cmd)
    if cmd[:1] == ["--"]:
        cmd = cmd[1:]
    snap = lockstat_around(cmd, args.out, proc_path=args.lock_stat_path, enable_path=args.sysctl_path,
                           csv=args.csv)  # fmt: skip
    contended = snap.lockstat[snap.lockstat["contentions"] > 0]
    print(f"{' '.join(cmd)}: exit status {snap.returncode}; {len(snap.lockstat)} lock classes, "
          f"{len(contended)} contended")  # fmt: skip
    if len(contended):
        cols = ["class", "contentions", "waittime_total_ns", "acquisitions", "holdtime_total_ns"]
        print(contended[cols].head(10).to_string(index=False))
    for path in snap.files:
        print(f"wrote {path}")
    return snap.returncode


def _cmd_compare(args: argparse.Namespace) -> int:
    from .compare import differing_parameters, directories

    by = None if args.by is None else [c.strip() for c in args.by.split(",") if c.strip()]
    table = directories(args.dir_a, args.dir_b, metric=args.metric, by=by, alpha=args.alpha,
                        across_hosts=args.across_hosts)  # fmt: skip
    differ = differing_parameters(args.dir_a, args.dir_b)
    print(f"A: {args.dir_a}\nB: {args.dir_b}")
    if differ:
        print("B differs from A in: " + ", ".join(f"{k}={a} -> {b}" for k, (a, b) in differ.items()))
    keys = [c for c in table.columns if c not in _FIGURES]
    lines = []
    for _, row in table.iterrows():
        name = " ".join(f"{k}={row[k]}" for k in keys) or "all"
        change = "-" if row["ratio"] != row["ratio"] else f"{row['change']:+.1%}"
        ci = "-" if row["ci_low"] != row["ci_low"] else f"[{row['ci_low'] - 1:+.1%}, {row['ci_high'] - 1:+.1%}]"
        p = "-" if row["p_value"] != row["p_value"] else f"{row['p_value']:.2g}"
        lines.append({"configuration": name, f"A {args.metric}": _spread(row, "a"),
                      f"B {args.metric}": _spread(row, "b"), "change": change, "95% CI": ci, "p": p,
                      "finding": row["finding"]})  # fmt: skip
    import pandas as pd

    print(pd.DataFrame(lines).to_string(index=False))
    both = table["ratio"].dropna()
    both = both[both > 0]
    if len(both):
        from scipy.stats import gmean

        print(f"geometric mean of B/A over {len(both)} configuration(s): {gmean(both):.3f}x; "
              f"significant changes: {int(table['significant'].sum())} of {len(table)}")  # fmt: skip
    return 0


#: The figure columns of alloclab.compare.directories (the rest name a configuration).
_FIGURES = ("n_a", "median_a", "q1_a", "q3_a", "n_b", "median_b", "q1_b", "q3_b", "ratio", "change", "ci_low",
            "ci_high", "p_value", "significant", "finding")  # fmt: skip


def _spread(row: Any, side: str) -> str:
    """``median [q1, q3] (n=N)`` of one side."""
    median = row[f"median_{side}"]
    if median != median:
        return "-"
    return f"{median:.4g} [{row[f'q1_{side}']:.4g}, {row[f'q3_{side}']:.4g}] (n={row[f'n_{side}']})"
