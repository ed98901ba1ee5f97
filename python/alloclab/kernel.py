"""Real kernel lock statistics beside the model's: ``/proc/lock_stat`` and ``perf lock contention`` read into the
schema of :attr:`alloclab.RunResult.lockstat`, the model's table printed in perf's format, and a clear / run /
snapshot of ``/proc/lock_stat`` around a command.

Models the two text formats as the kernel prints them:

* ``/proc/lock_stat`` (CONFIG_LOCK_STAT; Documentation/locking/lockstat.rst): kernel/locking/lockdep_proc.c
  ``seq_header`` (``lock_stat version 0.4``, the twelve columns) and ``seq_stats``: one row per class
  (``%40s:``), or a ``-W`` and a ``-R`` row for a class taken both for write and for read (a class taken only
  for read has its ``-R`` row alone); times are printed by ``seq_time`` in microseconds with two decimals; under a
  contended class, after a short dash line, up to four *contention points* (the callers that waited) and, after a
  second one, up to four *contending points* (where the holder took the lock), each ``name count [<ip>] symbol``.
* ``perf lock contention`` (tools/perf/builtin-lock.c, ``print_header_stdio``/``print_lock_stat_stdio``, the
  same text with and without ``-b``): the columns of ``contention_keys`` that were asked for (``contended``,
  ``total wait``, ``max wait``, ``min wait``, ``avg wait``), then ``type`` and ``caller`` (default) or ``address``
  and ``symbol`` (``-l``); ``lock_stat_key_print_time`` prints a time as ``%.2f`` with ``us``/``ms``/``s``/``m``/
  ``h`` or as integer ``ns``.

Leaves out: the per-task (``-t``) and per-cgroup (``-g``) aggregations of perf lock (no lock class to name a row
by), perf's CSV output (``-x``) and its ``-v`` call stacks, ``/proc/lock_stat`` formats other than version 0.4.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd

from . import _tables

__all__ = [
    "LOCKSTAT_SCHEMA",
    "LockStatUnavailable",
    "Snapshot",
    "format_perf_lock",
    "lockstat_around",
    "read_lockstat",
    "read_lockstat_points",
    "read_perf_lock",
]


def _string_dtype() -> str:
    """The dtype pandas gives a column of strings: ``str`` when it infers strings (pandas 3), else ``object``. Read
    from the option, not from a Series: building one at import time loads pandas' string arrays, after which an
    uncaught Ctrl-C ends the interpreter by SIGINT instead of with status 1 (test_measurement's Ctrl-C tests)."""
    if int(pd.__version__.split(".")[0]) >= 3:
        return "str"  # the default since pandas 3 (whose option to turn it off is deprecated)
    try:
        return "str" if pd.get_option("future.infer_string") else "object"
    except KeyError:  # pandas < 2.1 has no such option and infers object
        return "object"


#: The dtype pandas gives a column of strings (``str`` from pandas 3, ``object`` before).
_STR = _string_dtype()

#: The columns of :attr:`alloclab.RunResult.lockstat` and their dtypes, in order (times in ns). A table read from
#: the kernel has exactly these columns; an integer column the source does not give is NA, in pandas' nullable
#: ``Int64`` (numpy's int64 cannot hold NA); a float or string column it does not give is NaN/NA.
LOCKSTAT_SCHEMA: Mapping[str, str] = {
    "class": _STR,
    "kind": _STR,
    "con_bounces": "int64",
    "contentions": "int64",
    "waittime_min_ns": "float64",
    "waittime_max_ns": "float64",
    "waittime_total_ns": "float64",
    "waittime_avg_ns": "float64",
    "acq_bounces": "int64",
    "acquisitions": "int64",
    "holdtime_min_ns": "float64",
    "holdtime_max_ns": "float64",
    "holdtime_total_ns": "float64",
    "holdtime_avg_ns": "float64",
    "handoffs_local": "int64",
    "handoffs_remote": "int64",
}

#: /proc/lock_stat's twelve numbers per row, in seq_stats' order, as LOCKSTAT_SCHEMA columns.
_PROC_COLUMNS = (
    "con_bounces",
    "contentions",
    "waittime_min_ns",
    "waittime_max_ns",
    "waittime_total_ns",
    "waittime_avg_ns",
    "acq_bounces",
    "acquisitions",
    "holdtime_min_ns",
    "holdtime_max_ns",
    "holdtime_total_ns",
    "holdtime_avg_ns",
)
_PROC_VERSION = "lock_stat version 0.4"
_NUMBER = r"\d+(?:\.\d+)?"
_PROC_ROW = re.compile(rf"^\s*(?P<name>\S.*?)(?:-(?P<rw>[RW]))?:\s+(?P<nums>(?:{_NUMBER}\s+){{11}}{_NUMBER})\s*$")
_PROC_POINT = re.compile(r"^\s*(?P<name>\S.*?)\s+(?P<count>\d+)\s+\[<(?P<ip>[0-9a-fA-Fx]+)>\]\s*(?P<symbol>.*?)\s*$")
_PROC_DASHES = re.compile(r"^\s*-+\s*$")
_PROC_DOTS = re.compile(r"^\.+\s*$")

#: perf lock contention's column headers (contention_keys in builtin-lock.c) -> LOCKSTAT_SCHEMA columns.
_PERF_KEYS: Mapping[str, str] = {
    "contended": "contentions",
    "total wait": "waittime_total_ns",
    "max wait": "waittime_max_ns",
    "min wait": "waittime_min_ns",
    "avg wait": "waittime_avg_ns",
}
#: lock_stat_key_print_time's units, in ns.
_PERF_UNITS: Mapping[str, int] = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
_PERF_TIME = re.compile(r"(?P<value>\d+(?:\.\d+)?) (?P<unit>ns|us|ms|s|m|h)\b")
#: The default output: its keys in perf's order (the perf-lock.txt example), then type and caller.
_PERF_DEFAULT_KEYS = ("contended", "total wait", "max wait", "avg wait")


class LockStatUnavailable(ValueError):
    """``/proc/lock_stat`` cannot be cleared or read here; the message says why (no CONFIG_LOCK_STAT, not root,
    collection off and not switchable, ...)."""


# --- /proc/lock_stat ----------------------------------------------------------------------------------------


def read_lockstat(path_or_text: str | os.PathLike) -> pd.DataFrame:
    """Parse ``/proc/lock_stat`` into the schema of :attr:`alloclab.RunResult.lockstat`.

    Args:
        path_or_text: the file (a path, e.g. ``"/proc/lock_stat"`` or a saved copy) or its text (any string with
            a line break is taken as the text).

    Returns:
        One row per row of the file, in its order (most contended first): ``class`` is the class name as the
        kernel prints it without lockdep's leading ``&`` (``&zone->lock`` is the model's ``zone->lock``), with
        ``#N``/``/N`` name versions and subclasses kept and ``-W``/``-R`` kept for a class taken for write and
        for read (two rows, as the kernel prints them); times converted from the kernel's µs to ns; ``kind``
        (NA: lock_stat does not say which primitive) and ``handoffs_local``/``handoffs_remote`` (NA) are the
        model's only (see :data:`LOCKSTAT_SCHEMA`). The contention points are in :func:`read_lockstat_points`.

    Raises:
        ValueError: the text is not lock_stat version 0.4 (the message names ``path_or_text`` and what it found),
            or a class row does not have the twelve numbers.
        FileNotFoundError: the path does not exist.
    """
    rows, _ = _parse_proc(_text(path_or_text))
    return _frame(rows)


def read_lockstat_points(path_or_text: str | os.PathLike) -> pd.DataFrame:
    """The contention and contending points of ``/proc/lock_stat`` as a table.

    Args:
        path_or_text: as for :func:`read_lockstat`.

    Returns:
        One row per point line: ``class`` (as in :func:`read_lockstat`, without ``-R``/``-W``: points are per
        class), ``point`` (``"contention"``: a caller that waited for the lock; ``"contending"``: where the holder
        it waited for took it), ``rank`` (0-3, the kernel's order), ``count`` (int64), ``ip`` (the address as
        printed; hashed or zero when kptr_restrict hides it) and ``symbol`` (``symbol+off/size``, or "").

    Raises:
        ValueError, FileNotFoundError: as :func:`read_lockstat`.
    """
    _, points = _parse_proc(_text(path_or_text))
    table = pd.DataFrame(points, columns=["class", "point", "rank", "count", "ip", "symbol"])
    return table.astype({"rank": "int64", "count": "int64"})


def _parse_proc(text: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The class rows and point rows of a /proc/lock_stat text (see the module's description)."""
    lines = text.splitlines()
    first = next((line.strip() for line in lines if line.strip()), "")
    if first != _PROC_VERSION:
        raise ValueError(
            f"path_or_text: expected /proc/lock_stat text starting with {_PROC_VERSION!r}, got {first[:60]!r}"
        )
    rows: list[dict[str, Any]] = []
    points: list[dict[str, Any]] = []
    group = -1  # 0: contention points of the last class, 1: its contending points; -1: before any separator
    rank = 0
    in_header = True
    for number, line in enumerate(lines[1:], start=2):
        if in_header:
            in_header = "class name" not in line
            continue
        if not line.strip() or _PROC_DOTS.match(line):
            continue
        if _PROC_DASHES.match(line):
            group, rank = group + 1, 0
            continue
        row = _PROC_ROW.match(line)
        if row:
            name = _class_name(row["name"])
            values = row["nums"].split()
            out: dict[str, Any] = {"class": name + (f"-{row['rw']}" if row["rw"] else ""), "kind": None}
            for col, raw in zip(_PROC_COLUMNS, values, strict=True):
                out[col] = int(raw) if LOCKSTAT_SCHEMA[col] == "int64" else _us_to_ns(raw)
            rows.append(out)
            group, rank = -1, 0
            continue
        point = _PROC_POINT.match(line)
        if point and rows and group in (0, 1):
            kind = "contention" if group == 0 else "contending"
            points.append({"class": _class_name(point["name"]), "point": kind, "rank": rank,
                           "count": int(point["count"]), "ip": point["ip"], "symbol": point["symbol"]})  # fmt: skip
            rank += 1
            continue
        if line.lstrip().startswith("*WARNING*"):
            continue  # seq_header's "lock debugging disabled" line: the figures are still printed
        raise ValueError(f"path_or_text: line {number} is no lock_stat row or contention point: {line.strip()!r}")
    return rows, points


def _class_name(printed: str) -> str:
    """The model's name of a class as lock_stat prints it: lockdep's leading '&' (the address-of of the lock
    expression a class is named after) dropped."""
    name = printed.strip()
    return name[1:] if name.startswith("&") else name


def _us_to_ns(text: str) -> float:
    """seq_time's microseconds with two decimals, exactly in ns."""
    return float(Decimal(text) * 1000)


# --- perf lock contention -----------------------------------------------------------------------------------


def read_perf_lock(path_or_text: str | os.PathLike) -> pd.DataFrame:
    """Parse the text output of ``perf lock contention`` (with or without ``-b``) into the schema of
    :attr:`alloclab.RunResult.lockstat`.

    Args:
        path_or_text: a file holding the output, or the output itself (any string with a line break). The
            default aggregation (``type``, ``caller``) and ``-l`` (``address``, ``symbol``) are read; any subset
            of the time columns (``-F``) in any order.

    Returns:
        One row per lock entry, in perf's order: ``class`` is the caller (``queue_work_on+0x20``) or, with
        ``-l``, the lock's symbol; ``kind`` perf's lock type (``spinlock``, ``rwsem:R``, ``mutex``, ...);
        ``contentions`` and the ``waittime_*_ns`` columns perf printed, converted to ns (perf rounds a time to
        two decimals of its unit: ``1.23 ms`` is 1 230 000 ns); the columns perf does not have (bounces,
        acquisitions, hold times, hand-offs) NA. perf's debug footer (``=== output for debug ===``) is skipped.

    Raises:
        ValueError: no header line, a per-task or per-cgroup aggregation, or a line that does not fit the
            header (the message names ``path_or_text`` and the line).
        FileNotFoundError: the path does not exist.
    """
    lines = _text(path_or_text).splitlines()
    at = next((i for i, line in enumerate(lines) if line.strip().startswith(tuple(_PERF_KEYS))), None)
    if at is None:
        raise ValueError("path_or_text: no header line of perf lock contention ('contended   total wait ...') found")
    header = lines[at]
    keys = [k for k in _PERF_KEYS if k in header]
    keys.sort(key=header.index)
    tail = header[max(header.index(k) + len(k) for k in keys) :].split()
    if tail == ["type", "caller"]:
        mode = "caller"
    elif tail == ["address", "symbol"]:
        mode = "address"
    else:
        raise ValueError(
            f"path_or_text: perf lock contention aggregated by {' '.join(tail) or 'nothing'!r}; only the default "
            "(type caller) and -l (address symbol) name a lock to compare"
        )
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(lines[at + 1 :], start=at + 2):
        if not line.strip():
            continue
        if line.startswith("==="):
            break  # print_footer_stdio's debug output
        rows.append(_perf_row(line, keys, mode, number))
    return _frame(rows)


def _perf_row(line: str, keys: Sequence[str], mode: str, number: int) -> dict[str, Any]:
    """One entry of perf lock contention's stdio output."""
    rest = line.strip()
    out: dict[str, Any] = {}
    for key in keys:
        if key == "contended":
            value, _, rest = rest.partition(" ")
            if not value.isdigit():
                raise ValueError(f"path_or_text: line {number}: expected a count under 'contended', got {line!r}")
            out[_PERF_KEYS[key]] = int(value)
        else:
            m = _PERF_TIME.match(rest)
            if not m:
                raise ValueError(f"path_or_text: line {number}: expected a time under {key!r}, got {line!r}")
            out[_PERF_KEYS[key]] = float(Decimal(m["value"]) * _PERF_UNITS[m["unit"]])
            rest = rest[m.end() :]
        rest = rest.lstrip()
    first, _, name = rest.partition(" ")
    name = name.strip()
    if not first or not name:
        raise ValueError(f"path_or_text: line {number}: expected the {mode} columns after the figures: {line!r}")
    if mode == "caller":
        out["class"], out["kind"] = name, first
    else:
        m = re.fullmatch(r"(?P<symbol>.*?) \((?P<type>[^()]*)\)", name)
        out["class"], out["kind"] = (m["symbol"], m["type"]) if m else (name, None)
    return out


def format_perf_lock(lockstat: pd.DataFrame) -> str:
    """A lock_stat table in the default text format of ``perf lock contention``.

    Args:
        lockstat: a table of :data:`LOCKSTAT_SCHEMA` (a run's ``r.lockstat``, or one read by this module).

    Returns:
        perf's header (``contended``, ``total wait``, ``max wait``, ``avg wait``, ``type``, ``caller``) and one
        line per class that waited, sorted by total wait as perf sorts by default; the lock class stands where
        perf names the caller, its ``kind`` where perf names the lock type. Times are printed as perf prints
        them (``lock_stat_key_print_time``: two decimals of us/ms/s, integer ns). Classes without contention
        are left out, as perf leaves out entries without wait time.
    """
    widths = {"contended": 10, "total wait": 12, "max wait": 12, "avg wait": 12}
    text = "".join(f"{key:>{widths[key]}} " for key in _PERF_DEFAULT_KEYS) + f"  {'type':>10}   caller\n\n"
    table = lockstat[lockstat["waittime_total_ns"].fillna(0) > 0]
    table = table.sort_values("waittime_total_ns", ascending=False, kind="stable")
    for _, row in table.iterrows():
        line = f"{int(row['contentions']):>10} "
        for key in _PERF_DEFAULT_KEYS[1:]:
            line += _perf_time(float(row[_PERF_KEYS[key]]), widths[key]) + " "
        kind = row["kind"] if isinstance(row["kind"], str) else "unknown"
        text += f"{line}  {kind:>10}   {row['class']}\n"
    return text


def _perf_time(ns: float, width: int) -> str:
    """lock_stat_key_print_time: the largest unit the time reaches, two decimals; integer ns below 1 us."""
    for unit in ("h", "m", "s", "ms", "us"):
        base = _PERF_UNITS[unit]
        if ns >= base:
            return f"{ns / base:>{width - 3}.2f} {unit:<2}"
    return f"{int(ns):>{width - 3}d} ns"


# --- clear, run, snapshot -----------------------------------------------------------------------------------


@dataclass
class Snapshot:
    """What :func:`lockstat_around` hands back.

    Attributes:
        text: /proc/lock_stat as read after the command.
        lockstat: its class rows (:func:`read_lockstat`).
        points: its contention points (:func:`read_lockstat_points`).
        returncode: the command's exit status.
        files: the files written to ``out`` (empty without ``out``).
        meta: the command, its start and end (UTC), its exit status, the kernel release, the paths used.
    """

    text: str
    lockstat: pd.DataFrame
    points: pd.DataFrame
    returncode: int
    files: list[Path] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


def lockstat_around(
    cmd: Sequence[str],
    out: str | os.PathLike | None = None,
    *,
    proc_path: str | os.PathLike = "/proc/lock_stat",
    enable_path: str | os.PathLike = "/proc/sys/kernel/lock_stat",
    csv: bool = False,
) -> Snapshot:
    """Clear ``/proc/lock_stat``, run a command, and snapshot ``/proc/lock_stat`` after it.

    The statistics are cleared by writing ``0`` to ``proc_path`` (lockdep_proc.c ``lock_stat_write``). Collection
    is switched on through ``enable_path`` (the ``kernel.lock_stat`` sysctl, off at boot unless ``lock_stat=1``
    is on the command line) for the command's duration when it is off, and switched off again after it.

    Args:
        cmd: the command and its arguments, run without a shell; it inherits stdin, stdout and stderr.
        out: a directory to write ``lock_stat.txt`` (the snapshot as read), ``lockstat.parquet``,
            ``points.parquet`` and ``meta.json`` to; it must not exist or be empty (an earlier snapshot is never
            replaced). None: write nothing.
        proc_path: the lock_stat file (a parameter so that it can be another file, e.g. in a test).
        enable_path: the sysctl file that switches collection.
        csv: with ``out``, also write CSV copies of the two tables to ``out/csv/``.

    Returns:
        A :class:`Snapshot`.

    Raises:
        LockStatUnavailable: ``proc_path`` does not exist (the kernel was built without CONFIG_LOCK_STAT) or
            cannot be written (not root) or read, or collection is off and ``enable_path`` cannot switch it on;
            the message says which, before the command runs.
        ValueError: ``cmd`` is empty or cannot be started, ``out`` holds files or is a file.
    """
    if not cmd:
        raise ValueError("cmd: no command given (alloclab kernel lockstat -- CMD ...)")
    out_dir = _fresh_dir(out)
    proc, enable = Path(proc_path), Path(enable_path)
    _check_lockstat(proc)
    was_on = _collection_on(enable)
    meta: dict[str, Any] = {"command": list(cmd), "proc_path": str(proc), "enable_path": str(enable),
                            "kernel": platform.release(), "collection_was_on": was_on}  # fmt: skip
    try:
        if not was_on:
            _write(enable, "1", "switch lock_stat collection on")
        _write(proc, "0", "clear the statistics")
        meta["started"] = _utc()
        try:
            returncode = subprocess.run(list(cmd), check=False).returncode
        except OSError as exc:
            raise ValueError(f"cmd: cannot run {cmd[0]!r} ({exc.strerror or exc})") from None
        meta["ended"] = _utc()
        text = proc.read_text()
    finally:
        if not was_on:
            _write(enable, "0", "switch lock_stat collection off again")
    meta["returncode"] = returncode
    snap = Snapshot(text, read_lockstat(text), read_lockstat_points(text), returncode, meta=meta)
    if out_dir is not None:
        snap.files = _save_snapshot(snap, out_dir, csv)
    return snap


def _check_lockstat(proc: Path) -> None:
    """Raises LockStatUnavailable with the reason when ``proc`` cannot be cleared and read."""
    if not proc.exists():
        config = _kernel_config("CONFIG_LOCK_STAT")
        raise LockStatUnavailable(
            f"{proc} does not exist: this kernel ({platform.release()}) was built without CONFIG_LOCK_STAT"
            f"{f' ({config})' if config else ''}; lock statistics need a kernel built with CONFIG_LOCK_STAT=y "
            "(which selects CONFIG_LOCKDEP), see Documentation/locking/lockstat.rst"
        )
    if not os.access(proc, os.R_OK | os.W_OK):
        who = f"uid {os.geteuid()}" if hasattr(os, "geteuid") else "this user"
        raise LockStatUnavailable(
            f"{proc} exists but cannot be {'written' if os.access(proc, os.R_OK) else 'read'} by {who}: clearing "
            "and reading lock statistics needs root (the file is mode 0600); run as root or with sudo"
        )


def _collection_on(enable: Path) -> bool:
    """Whether the kernel.lock_stat sysctl is on (True when it cannot be read: the kernel then collects always)."""
    try:
        return enable.read_text().strip() != "0"
    except FileNotFoundError:
        return True
    except OSError as exc:
        raise LockStatUnavailable(
            f"{enable}: cannot read whether lock_stat collection is on ({exc.strerror})"
        ) from None


def _write(path: Path, value: str, why: str) -> None:
    try:
        with open(path, "w") as f:
            f.write(value)
    except OSError as exc:
        raise LockStatUnavailable(f"{path}: cannot {why} ({exc.strerror or exc}); root is needed") from None


def _kernel_config(option: str) -> str:
    """How the running kernel's config sets ``option`` ("CONFIG_X is not set", "CONFIG_X=y"), or "" unknown."""
    path = Path("/boot") / f"config-{platform.release()}"
    try:
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith(f"{option}=") or line == f"# {option} is not set":
                return f"{path}: {line.lstrip('# ')}"
    except OSError:
        pass
    return ""


def _fresh_dir(out: str | os.PathLike | None) -> Path | None:
    if out is None:
        return None
    path = Path(out)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        what = "a file" if not path.is_dir() else "not empty"
        raise ValueError(f"out: {path} is {what}; a snapshot goes to a new or empty directory (never over another)")
    return path


def _save_snapshot(snap: Snapshot, out_dir: Path, csv: bool) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    files = [out_dir / "lock_stat.txt"]
    files[0].write_text(snap.text)
    tables = (("lockstat", snap.lockstat), ("points", snap.points))
    for name, table in tables:
        files.append(out_dir / f"{name}.parquet")
        _tables.write(table, files[-1])
    meta = out_dir / "meta.json"
    meta.write_text(json.dumps(snap.meta, indent=2) + "\n")
    return [*files, meta, *(_tables.export_csv(tables, out_dir) if csv else [])]


# --- helpers ------------------------------------------------------------------------------------------------


def _text(path_or_text: str | os.PathLike) -> str:
    if isinstance(path_or_text, str) and "\n" in path_or_text:
        return path_or_text
    if not isinstance(path_or_text, (str, os.PathLike)):
        raise ValueError(f"path_or_text: expected a path or the text, got {type(path_or_text).__name__}")
    return Path(path_or_text).read_text(errors="replace")


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows as a table of LOCKSTAT_SCHEMA: the model's dtype for every column (nullable Int64 where an integer
    column has NA)."""
    table = pd.DataFrame(rows, columns=list(LOCKSTAT_SCHEMA))
    for col, dtype in LOCKSTAT_SCHEMA.items():
        if dtype == "int64":
            table[col] = table[col].astype("Int64" if table[col].isna().any() else "int64")
        elif dtype == "float64":
            table[col] = table[col].astype("float64")
        else:
            table[col] = table[col].astype(object).where(table[col].notna(), None).astype(dtype)
    return table


def _utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
