"""Real kernel lock statistics beside the model's: /proc/lock_stat and perf lock contention read into r.lockstat's
schema (fixtures written by hand in the formats of lockdep_proc.c and builtin-lock.c), the model printed in perf's
format, and the clear / run / snapshot of /proc/lock_stat around a command against a fake path."""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

import alloclab as al
from alloclab import kernel

DATA = Path(__file__).parent / "data"
PROC = DATA / "proc_lock_stat.txt"


@pytest.fixture(scope="module")
def model():
    return al.run("lock_zoo", threads=4, iterations=300, lock="ticket", clock="virtual", machine="xeon-8380-2s")


def test_schema_is_the_models(model):
    assert dict(model.lockstat.dtypes.astype(str)) == dict(kernel.LOCKSTAT_SCHEMA)


def _same_schema_or_na(table: pd.DataFrame) -> None:
    """The model's columns in its order; each column of the model's dtype, or all-NA in a nullable one."""
    assert list(table.columns) == list(kernel.LOCKSTAT_SCHEMA)
    for col, dtype in kernel.LOCKSTAT_SCHEMA.items():
        if str(table[col].dtype) != dtype:
            assert (dtype, str(table[col].dtype)) == ("int64", "Int64") and table[col].isna().all(), col


def test_read_lockstat_rows_units_and_rw():
    t = kernel.read_lockstat(PROC)
    _same_schema_or_na(t)
    assert t["class"].tolist() == ["zone->lock", "mm->mmap_lock-W", "mm->mmap_lock-R", "rq->__lock/1", "pcp->lock"]
    zone = t.iloc[0]
    assert (zone["con_bounces"], zone["contentions"], zone["acq_bounces"], zone["acquisitions"]) == (
        1183, 1412, 20114, 88211)  # fmt: skip
    # µs with two decimals -> ns, exactly
    assert zone["waittime_min_ns"] == 110.0 and zone["waittime_max_ns"] == 48230.0
    assert zone["waittime_total_ns"] == 2961770.0 and zone["holdtime_total_ns"] == 5146990.0
    assert t.loc[1, "holdtime_total_ns"] == 17464026916320.0  # the -W row of an rwsem: 17 464 s of hold
    assert t.loc[2, "contentions"] == 100 and t.loc[2, "waittime_max_ns"] == 299502610.0
    assert t["kind"].isna().all() and t["handoffs_local"].isna().all() and t["handoffs_remote"].isna().all()
    assert t.loc[4, "contentions"] == 0 and t.loc[4, "acquisitions"] == 120345
    # the text is read the same as the path
    pd.testing.assert_frame_equal(kernel.read_lockstat(PROC.read_text()), t)


def test_read_lockstat_points():
    p = kernel.read_lockstat_points(PROC)
    assert list(p.columns) == ["class", "point", "rank", "count", "ip", "symbol"]
    zone = p[p["class"] == "zone->lock"]
    assert zone[["point", "rank", "count"]].values.tolist() == [
        ["contention", 0, 901], ["contention", 1, 511], ["contending", 0, 780], ["contending", 1, 632]]  # fmt: skip
    assert zone["symbol"].iloc[0] == "rmqueue_bulk+0x54/0x8f0" and zone["ip"].iloc[0] == "ffffffff8127a3c4"
    mm = p[p["class"] == "mm->mmap_lock"]  # points of an rwsem are per class, without -R/-W
    assert mm["point"].tolist() == ["contention", "contention", "contending"]
    assert p[p["class"] == "rq->__lock/1"][["point", "count"]].values.tolist() == [["contention", 11526]]
    assert "pcp->lock" not in set(p["class"])


def test_read_lockstat_refuses_other_text():
    with pytest.raises(ValueError, match=r"path_or_text: expected /proc/lock_stat text starting with 'lock_stat "
                       r"version 0.4', got 'lock_stat version 0.3'"):  # fmt: skip
        kernel.read_lockstat("lock_stat version 0.3\n")
    broken = PROC.read_text().replace("1183           1412", "1183")
    with pytest.raises(ValueError, match=r"path_or_text: line 6 is no lock_stat row"):
        kernel.read_lockstat(broken)
    with pytest.raises(FileNotFoundError):
        kernel.read_lockstat(DATA / "no_such_file.txt")


def test_read_perf_lock_default():
    t = kernel.read_perf_lock(DATA / "perf_lock_contention.txt")
    _same_schema_or_na(t)
    assert t["class"].tolist() == ["do_mmap+0x3c4", "rmqueue_bulk+0x54", "free_pcppages_bulk+0x60", "cma_alloc+0x1b2"]
    assert t["kind"].tolist() == ["rwsem:W", "spinlock", "spinlock", "mutex"]
    assert t["contentions"].tolist() == [5, 42, 23, 3] and str(t["contentions"].dtype) == "int64"
    assert t["waittime_total_ns"].tolist() == [2.4e9, 192670.0, 85540.0, 612.0]
    assert t["waittime_max_ns"].tolist() == [1.1e9, 13640.0, 10280.0, 301.0]
    assert t["waittime_avg_ns"].tolist() == [480e6, 4590.0, 3720.0, 204.0]
    assert t["waittime_min_ns"].isna().all()  # this perf has no "min wait" column
    for col in ("con_bounces", "acq_bounces", "acquisitions", "holdtime_total_ns", "handoffs_local"):
        assert t[col].isna().all(), col


def test_read_perf_lock_bpf_and_by_address():
    b = kernel.read_perf_lock(DATA / "perf_lock_contention_b.txt")
    _same_schema_or_na(b)
    assert b["waittime_min_ns"].tolist() == [110.0, 1200.0]
    assert b["waittime_total_ns"].tolist() == [2.91e6, 1.18 * 60e9]  # "1.18 m": minutes
    assert b["kind"].tolist() == ["spinlock", "rwsem:R"]
    lock = kernel.read_perf_lock(DATA / "perf_lock_contention_l.txt")
    assert lock["class"].tolist() == ["zone->lock", "cma_mutex"] and lock["kind"].tolist() == ["spinlock", "mutex"]
    with pytest.raises(ValueError, match=r"aggregated by 'pid comm'"):
        kernel.read_perf_lock(" contended   total wait         pid   comm\n\n        3      1.00 us        12   a\n")
    with pytest.raises(ValueError, match=r"no header line of perf lock contention"):
        kernel.read_perf_lock(PROC)
    # -F picks and orders the columns
    picked = kernel.read_perf_lock(
        "    avg wait  contended         type   caller\n\n     4.59 us         42     spinlock   f+0x1\n"
    )
    assert (picked["waittime_avg_ns"].tolist(), picked["contentions"].tolist()) == ([4590.0], [42])
    assert picked["waittime_total_ns"].isna().all()
    with pytest.raises(ValueError, match=r"line 3: expected a time under 'total wait'"):
        kernel.read_perf_lock(" contended   total wait         type   caller\n\n        3      soon   spinlock   f\n")


def test_model_in_perf_format_reads_back(model):
    text = model.lockstat_text(format="perf-lock")
    assert text.splitlines()[0].split() == ["contended", "total", "wait", "max", "wait", "avg", "wait", "type",
                                            "caller"]  # fmt: skip
    back = kernel.read_perf_lock(text)
    contended = model.lockstat[model.lockstat["waittime_total_ns"] > 0]
    assert back["class"].tolist() == contended.sort_values("waittime_total_ns", ascending=False)["class"].tolist()
    assert back["contentions"].tolist() == [
        int(contended.set_index("class").loc[c, "contentions"]) for c in back["class"]]  # fmt: skip
    assert set(back["kind"]) == {"ticket"}
    assert model.lockstat_text() == model.lockstat_text(format="lock_stat")
    # the model's /proc/lock_stat text is the kernel's format: it reads back with the same counts
    proc = kernel.read_lockstat(model.lockstat_text())
    assert proc["class"].tolist() == model.lockstat["class"].tolist()
    assert proc["acquisitions"].tolist() == model.lockstat["acquisitions"].tolist()
    with pytest.raises(ValueError, match=r"format: expected one of 'lock_stat', 'perf-lock', got 'perf'"):
        model.lockstat_text(format="perf")


def test_perf_time_units():
    assert [kernel._perf_time(ns, 12) for ns in (999, 1000, 1_234_567, 3e9, 90e9, 7200e9)] == [
        "      999 ns", "     1.00 us", "     1.23 ms", "     3.00 s ", "     1.50 m ", "     2.00 h "]  # fmt: skip


# --- clear, run, snapshot -------------------------------------------------------------------------------------


def test_snapshot_says_why_not_here(tmp_path):
    missing = tmp_path / "proc_lock_stat"
    with pytest.raises(kernel.LockStatUnavailable, match=r"does not exist: this kernel .* without CONFIG_LOCK_STAT"):
        kernel.lockstat_around(["true"], proc_path=missing)
    if not Path("/proc/lock_stat").exists():  # this machine's kernel: the same sentence
        with pytest.raises(kernel.LockStatUnavailable, match="CONFIG_LOCK_STAT"):
            kernel.lockstat_around(["true"])
    readonly = tmp_path / "lock_stat_ro"
    readonly.write_text(PROC.read_text())
    readonly.chmod(0o400)
    if not kernel.os.access(readonly, kernel.os.W_OK):  # root can write anything
        with pytest.raises(kernel.LockStatUnavailable, match=r"cannot be written by uid \d+: .* needs root"):
            kernel.lockstat_around(["true"], proc_path=readonly, enable_path=tmp_path / "none")
    with pytest.raises(ValueError, match=r"cmd: no command given"):
        kernel.lockstat_around([], proc_path=readonly)


def test_snapshot_clears_runs_and_reads(tmp_path):
    proc, enable = tmp_path / "lock_stat", tmp_path / "lock_stat_sysctl"
    proc.write_text("stale statistics of an earlier run\n")
    enable.write_text("0\n")
    # The command checks that the statistics were cleared and collection switched on before it ran, then plays
    # the kernel: it fills the file with what the fixture holds.
    script = (
        "import pathlib, sys; p, e, f = map(pathlib.Path, sys.argv[1:4]); "
        "assert p.read_text() == '0', p.read_text(); assert e.read_text() == '1', e.read_text(); "
        "p.write_text(f.read_text()); sys.exit(3)"
    )
    out = tmp_path / "snap"
    snap = kernel.lockstat_around([sys.executable, "-c", script, str(proc), str(enable), str(PROC)], out,
                                  proc_path=proc, enable_path=enable, csv=True)  # fmt: skip
    assert snap.returncode == 3 and snap.meta["returncode"] == 3 and snap.meta["collection_was_on"] is False
    assert enable.read_text() == "0"  # switched off again, as it was
    pd.testing.assert_frame_equal(snap.lockstat, kernel.read_lockstat(PROC))
    assert [p.relative_to(out).as_posix() for p in snap.files] == [
        "lock_stat.txt", "lockstat.parquet", "points.parquet", "meta.json", "csv/lockstat.csv", "csv/points.csv"
    ]  # fmt: skip
    assert (out / "lock_stat.txt").read_text() == PROC.read_text()
    pd.testing.assert_frame_equal(pd.read_parquet(out / "lockstat.parquet"), snap.lockstat)  # every dtype kept
    assert pd.read_csv(out / "csv" / "lockstat.csv")["contentions"].tolist() == [1412, 84, 100, 11488, 0]
    with pytest.raises(ValueError, match=r"out: .* is not empty; a snapshot goes to a new or empty directory"):
        kernel.lockstat_around(["true"], out, proc_path=proc, enable_path=enable)


def test_cli_kernel_lockstat(tmp_path, capsys):
    from alloclab.cli import main

    if not Path("/proc/lock_stat").exists():  # this machine: says why, runs nothing
        marker = tmp_path / "ran"
        assert main(["kernel", "lockstat", "--", "touch", str(marker)]) == 1
        err = capsys.readouterr().err
        assert err.startswith("alloclab kernel: error: /proc/lock_stat does not exist") and "CONFIG_LOCK_STAT" in err
        assert not marker.exists()
    proc, enable = tmp_path / "lock_stat", tmp_path / "sysctl"
    proc.write_text("")
    enable.write_text("1\n")
    script = f"import pathlib; pathlib.Path({str(proc)!r}).write_text(pathlib.Path({str(PROC)!r}).read_text())"
    out = tmp_path / "snap"
    args = ["kernel", "lockstat", "--lock-stat-path", str(proc), "--sysctl-path", str(enable), "--out", str(out),
            "--csv", "--", sys.executable, "-c", script]  # fmt: skip
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "exit status 0; 5 lock classes, 4 contended" in printed and "zone->lock" in printed
    assert f"wrote {out / 'lockstat.parquet'}" in printed and f"wrote {out / 'csv' / 'lockstat.csv'}" in printed
    assert enable.read_text() == "1\n"  # collection was on: left alone
    assert main(["kernel"]) == 2


def test_plot_lockstat_compare(model, tmp_path):
    k = kernel.read_lockstat(PROC)
    ax_n, ax_t = al.plot.lockstat_compare(model, k, top=4)
    names = [t.get_text() for t in ax_n.get_yticklabels()]
    # the model's class first, then the kernel's most contended
    assert names == ["lock_zoo (model only)", "rq->__lock/1 (kernel only)", "zone->lock (kernel only)",
                     "mm->mmap_lock-R (kernel only)"]  # fmt: skip
    assert ax_n.get_xlabel() == "contentions (count)"
    assert ax_t.get_xlabel() == "total wait time (ms)"  # the largest bar: the rwsem's 325.63 ms of read waits
    model_bars, kernel_bars = ax_n.patches[:4], ax_n.patches[4:]
    assert [b.get_width() for b in kernel_bars] == [0.0, 11488.0, 1412.0, 100.0]
    assert model_bars[0].get_width() == float(model.lockstat["contentions"].sum())
    assert [t.get_text() for t in ax_n.get_legend().get_texts()] == ["model", "kernel"]
    assert al.plot.savefig(ax_n, tmp_path / "cmp.png").stat().st_size > 0
    with pytest.raises(ValueError, match=r"^top: value out of range: 0 \(allowed: >= 1\)$"):
        al.plot.lockstat_compare(model, k, top=0)
