"""Sweeps on executors (alloclab.cluster): a Dask LocalCluster of 2 worker processes on loopback and submitit's local
executor give the rows a local sweep gives (virtual clock, costs="table": identical virtual times and digests); a
worker killed (by its pid) in the middle of a task leaves retried or error rows and loses no finished row, and a
resume finishes only what is missing; the placement rules refuse what could run two host-timed runs on one host;
every row names its host, and stats.compare refuses timings from two hosts unless told to.

The kill happens at a known point without any timing: the chosen task writes its pid to a file and waits for a
file that never comes; the test waits for the pid file and kills that pid."""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import alloclab as al
from alloclab import cluster

distributed = pytest.importorskip("distributed")
submitit = pytest.importorskip("submitit")

#: A small virtual-clock sweep: lock_zoo over two kinds and two CPU counts, 2 repeats (8 runs), on a profile.
SWEEP = dict(
    scenario="lock_zoo",
    grid={"lock": ["spin", "mutex"], "threads": [2, 4]},
    repeats=2,
    clock="virtual",
    machine="xeon-8380-2s",
    costs="table",
    iterations=200,
    progress=False,
)
#: Columns that say when or where a run happened, not what it computed.
NOT_RESULTS = {"host", "host_cpu", "host_topology", "host_kernel"}


def _pool(workers: int) -> cf.ProcessPoolExecutor:
    """A process pool whose workers start fresh (this process has the Dask client's threads: no fork)."""
    return cf.ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))


def _sweep(**kw):
    return al.sweep(**{**SWEEP, **kw})


def _results(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=[c for c in df.columns if c in NOT_RESULTS]).sort_values("run").reset_index(drop=True)


@pytest.fixture(scope="module")
def local() -> pd.DataFrame:
    return _sweep()


@pytest.fixture(scope="module")
def dask_client():
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address="127.0.0.1:0"
        ) as lc,
        distributed.Client(lc) as client,
    ):
        yield client


def test_local_rows_name_their_host(local):
    here = cluster.host()
    assert (local["status"] == "ok").all()
    for col in ("host", "host_cpu", "host_topology", "host_kernel"):
        assert set(local[col]) == {here[col]}
    assert local["host_independent"].all()  # virtual clock, table costs


def test_local_pool_runs_packed_sweeps_and_host_timed_ones_here(local):
    # Before the Dask tests: the pool forks this process, which then has no client threads yet.
    with cluster.local(workers=2) as ex:
        pool = cluster.pick(ex, host_timed=False)
        assert isinstance(pool, cf.ProcessPoolExecutor)
        assert cluster.pick(ex, host_timed=False) is pool  # one pool for every packed sweep
        assert cluster.pick(ex, host_timed=True) is None  # host-timed: here, one run at a time
        pids = {pool.submit(os.getpid).result() for _ in range(4)}
        on_pool = _sweep(executor=ex)
        real = al.sweep("lock_zoo", {"threads": [1]}, progress=False, executor=ex, iterations=200)
    assert pids and os.getpid() not in pids
    pd.testing.assert_frame_equal(_results(on_pool), _results(local))
    assert list(real["status"]) == ["ok"] and not real["host_independent"].iloc[0]
    with pytest.raises(RuntimeError, match="after shutdown"):
        pool.submit(os.getpid)  # closed with the block


def test_local_pool_size_is_checked():
    with pytest.raises(ValueError, match=r"workers: value out of range: 0 \(allowed: >= 1\)"):
        cluster.local(workers=0)


def test_dask_local_cluster_gives_the_local_rows(local, dask_client):
    pids = set(dask_client.run(os.getpid).values())
    assert len(pids) == 2 and os.getpid() not in pids  # two worker processes, not this one
    on_dask = _sweep(executor=dask_client.get_executor())
    pd.testing.assert_frame_equal(_results(on_dask), _results(local))
    assert (on_dask["run"] == sorted(on_dask["run"])).all()  # the table is in sweep order, however tasks finished


def test_dask_detail_has_the_same_digests(dask_client):
    params = dict(scenario="page_alloc", grid={"threads": [1, 2]}, repeats=1, detail=True, clock="virtual",
                  machine="xeon-8380-2s", costs="table", progress=False)  # fmt: skip
    here = al.sweep(**params)
    there = al.sweep(**params, executor=dask_client.get_executor())
    assert "alloc_digest" in here.workers.columns
    pd.testing.assert_frame_equal(_results(there.runs), _results(here.runs))
    pd.testing.assert_frame_equal(there.workers, here.workers)
    pd.testing.assert_frame_equal(there.lockstat, here.lockstat)


def test_submitit_local_executor_gives_the_local_rows(local, tmp_path):
    ex = submitit.AutoExecutor(folder=tmp_path / "jobs", cluster="local")
    ex.update_parameters(timeout_min=10)
    out = tmp_path / "out"
    there = _sweep(executor=ex, out=out)
    pd.testing.assert_frame_equal(_results(there), _results(local))
    saved, meta = al.results.load(out)
    assert meta["complete"] and len(saved) == len(local)


# --- a worker killed in the middle of a task --------------------------------------------------------------------


def _wait_then_execute(task, pid_file: str, kill_index: int, index: int):
    """Runs ``task``; the first time task ``kill_index`` starts, writes this process's pid to ``pid_file`` and
    waits to be killed instead (a later try of it, once the pid file exists, runs)."""
    if index == kill_index and not os.path.exists(pid_file):
        Path(pid_file + ".tmp").write_text(str(os.getpid()))
        os.replace(pid_file + ".tmp", pid_file)
        while True:
            time.sleep(0.05)
    return cluster.execute(task)


class _KillOne(cf.Executor):
    """Delegates to ``inner``; the ``kill_index``-th task submitted waits to be killed (see above)."""

    def __init__(self, inner, pid_file: Path, kill_index: int):
        self.inner, self.pid_file, self.kill_index, self.submitted = inner, str(pid_file), kill_index, 0

    def submit(self, fn, task):
        assert fn is cluster.execute
        index, self.submitted = self.submitted, self.submitted + 1
        return self.inner.submit(_wait_then_execute, task, self.pid_file, self.kill_index, index)


def _killer(pid_file: Path) -> threading.Thread:
    """Kills the pid written to ``pid_file`` as soon as it appears (the give-up bound only ends a broken test)."""

    def kill():
        deadline = time.monotonic() + 300
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread


def test_killed_process_pool_worker_gives_error_rows_and_resume_finishes(local, tmp_path):
    out, pid_file = tmp_path / "out", tmp_path / "victim.pid"
    killer = _killer(pid_file)
    with _pool(2) as pool:
        first = _sweep(executor=_KillOne(pool, pid_file, kill_index=3), out=out)
    killer.join()
    assert pid_file.exists()
    lost = first[first["status"] == "error"]
    assert len(lost) >= 1 and lost["error"].str.startswith("worker lost: BrokenProcessPool").all()
    assert lost["host"].isna().all()
    # every finished row is kept, with the figures of the local sweep
    ok = first[first["status"] == "ok"]
    assert len(ok) + len(lost) == len(local)
    pd.testing.assert_frame_equal(  # the error rows make integer columns float
        _results(ok), _results(local[local["run"].isin(ok["run"])]), check_dtype=False
    )
    saved, meta = al.results.load(out)
    assert list(saved["status"]) == list(first["status"]) and meta["status_counts"].get("ok", 0) == len(ok)

    with _pool(2) as pool:
        done = _sweep(executor=pool, out=out, resume=True)
    assert done.attrs["alloclab"]["reused_runs"] == len(ok)  # only the lost runs ran again
    assert done.attrs["alloclab"]["complete"]
    # the same figures (reused rows come back from the saved table, where the error rows made integers floats)
    pd.testing.assert_frame_equal(_results(done), _results(local), check_dtype=False)


def test_killed_dask_worker_is_retried_and_no_row_is_lost(local, dask_client, tmp_path):
    out, pid_file = tmp_path / "out", tmp_path / "victim.pid"
    killer = _killer(pid_file)
    rows = _sweep(executor=_KillOne(dask_client.get_executor(), pid_file, kill_index=2), out=out)
    killer.join()
    victim = int(pid_file.read_text())
    assert victim not in set(
        dask_client.run(os.getpid).values()
    )  # that worker process is gone (the nanny restarted one)
    # Dask ran the lost task again on a live worker: every row is there, ok or an error naming the lost worker
    assert len(rows) == len(local)
    bad = rows[rows["status"] != "ok"]
    assert bad["error"].str.startswith("worker lost").all()
    ok = rows[rows["status"] == "ok"]
    pd.testing.assert_frame_equal(  # the error rows make integer columns float
        _results(ok), _results(local[local["run"].isin(ok["run"])]), check_dtype=False
    )
    done = _sweep(executor=dask_client.get_executor(), out=out, resume=True)
    assert done.attrs["alloclab"]["reused_runs"] == len(ok)
    pd.testing.assert_frame_equal(_results(done), _results(local), check_dtype=not len(bad))


# --- placement ---------------------------------------------------------------------------------------------------


def test_real_clock_on_a_local_pool_is_refused(tmp_path):
    with _pool(2) as pool:
        with pytest.raises(ValueError, match=r"executor: a local pool of 2 workers .* machine to itself"):
            al.sweep("lock_zoo", {"threads": [1]}, progress=False, executor=pool, out=tmp_path / "o")
    assert not (tmp_path / "o").exists()  # refused before anything was written
    # a virtual axis with one measured-cost value is host-timed too
    with _pool(2) as pool:
        with pytest.raises(ValueError, match="local pool of 2 workers"):
            _sweep(executor=pool, grid={"costs": ["table", "measured"]})


def test_real_clock_on_one_worker_pool_runs_and_records_the_host():
    with _pool(1) as pool:
        df = al.sweep("lock_zoo", {"threads": [1]}, progress=False, executor=pool, iterations=200)
    assert list(df["status"]) == ["ok"] and df["host"].iloc[0] == cluster.host()["host"]
    assert not df["host_independent"].iloc[0]


def test_real_clock_on_submitit_local_is_refused(tmp_path):
    ex = submitit.AutoExecutor(folder=tmp_path / "jobs", cluster="local")
    with pytest.raises(ValueError, match="submitit's 'local' executor runs its jobs side by side"):
        al.sweep("lock_zoo", {"threads": [1]}, progress=False, executor=ex)


def test_real_clock_on_dask_needs_the_machine_resource(dask_client):
    with pytest.raises(ValueError, match=r"resources=\{'machine': 1\}"):
        al.sweep("lock_zoo", {"threads": [1]}, progress=False, executor=dask_client.get_executor())
    # asked for, but no worker of this cluster offers it
    with pytest.raises(ValueError, match="no Dask worker offers the resource 'machine'"):
        al.sweep("lock_zoo", {"threads": [1]}, progress=False,
                 executor=dask_client.get_executor(resources={"machine": 1}))  # fmt: skip


def test_dask_workers_sharing_a_host_cannot_both_offer_a_machine():
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=False,
            dashboard_address="127.0.0.1:0",
            resources={"machine": 1},
        ) as lc,
        distributed.Client(lc) as client,
    ):
        with pytest.raises(ValueError, match="offer 'machine' on one host"):
            al.sweep("lock_zoo", {"threads": [1]}, progress=False,
                     executor=client.get_executor(resources={"machine": 1}))  # fmt: skip


def test_one_dask_worker_with_the_machine_resource_runs_real_clock():
    with (
        distributed.LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=False,
            dashboard_address="127.0.0.1:0",
            resources={"machine": 1},
        ) as lc,
        cluster.dask(lc.scheduler_address) as target,
    ):
        df = al.sweep("lock_zoo", {"threads": [1, 2]}, progress=False, iterations=200, executor=target)
    assert list(df["status"]) == ["ok", "ok"]


def test_slurm_asks_for_whole_nodes_for_host_timed_sweeps(tmp_path, monkeypatch):
    # submitit builds a SLURM executor where it finds srun; the sbatch script it would submit is checked, not run
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "srun").write_text("#!/bin/sh\nexit 0\n")
    (fake / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    make = cluster.slurm(folder=tmp_path / "jobs", partition="cpu", time=10, array_parallelism=4)
    timed, packed = make(True), make(False)
    assert timed.cluster == "slurm"
    script = timed._executor._make_submission_file_text("cmd", "uid")
    assert "#SBATCH --exclusive" in script and "#SBATCH --partition=cpu" in script and "#SBATCH --time=10" in script
    assert "--exclusive" not in packed._executor._make_submission_file_text("cmd", "uid")
    cluster.check_placement(timed, host_timed=True)
    with pytest.raises(ValueError, match="a SLURM executor without exclusive=True may share a node"):
        cluster.check_placement(packed, host_timed=True)
    cluster.check_placement(packed, host_timed=False)


def test_not_an_executor_is_refused():
    with pytest.raises(ValueError, match="executor: expected a concurrent.futures.Executor"):
        _sweep(executor=object())


def test_slurm_keys_are_checked():
    with pytest.raises(ValueError, match=r"slurm: unknown key\(s\) \['nodes'\] \(allowed: partition, time"):
        cluster.slurm(nodes=2)


# --- comparisons across hosts ------------------------------------------------------------------------------------


def _two_hosts(independent: bool) -> pd.DataFrame:
    rows = []
    for i in range(12):
        rows.append({"status": "ok", "lock": ["a", "b"][i % 2], "elapsed_s": 1.0 + (i % 2) + i * 1e-3,
                     "host": f"n{i // 6}", "host_cpu": "cpu", "host_topology": "t", "host_kernel": "k",
                     "host_independent": independent})  # fmt: skip
    return pd.DataFrame(rows)


def test_compare_refuses_timings_from_two_hosts():
    df = _two_hosts(independent=False)
    with pytest.raises(ValueError, match=r"across_hosts: the rows compared were timed on 2 hosts \(n0 / cpu"):
        al.stats.compare(df, "lock", "elapsed_s")
    assert len(al.stats.compare(df, "lock", "elapsed_s", across_hosts=True)) == 2
    assert len(al.stats.compare(df, "lock", "elapsed_s", within="host")) == 4


def test_compare_pools_host_independent_rows():
    assert len(al.stats.compare(_two_hosts(independent=True), "lock", "elapsed_s")) == 2


# --- the command line --------------------------------------------------------------------------------------------

CLI = ["sweep", "lock_zoo", "lock=spin,mutex", "threads=2", "iterations=200", "--repeats", "1", "--clock", "virtual",
       "--machine", "xeon-8380-2s", "--no-progress"]  # fmt: skip


def test_cli_sweep_on_slurm_falls_back_to_local_processes(tmp_path, capsys):
    from alloclab.cli import main

    out = tmp_path / "out"
    assert main([*CLI, "--out", str(out), "--slurm", f"folder={tmp_path / 'jobs'},time=10"]) == 0
    saved, meta = al.results.load(out)
    assert list(saved["status"]) == ["ok", "ok"] and meta["complete"]
    assert (tmp_path / "jobs").is_dir()  # submitit kept its jobs there


def test_cli_sweep_on_dask(dask_client, tmp_path):
    from alloclab.cli import main

    out = tmp_path / "out"
    assert main([*CLI, "--out", str(out), "--dask", dask_client.scheduler.address]) == 0
    saved, _ = al.results.load(out)
    assert list(saved["status"]) == ["ok", "ok"]


def test_cli_bad_slurm_option(capsys):
    from alloclab.cli import main

    assert main([*CLI, "--slurm", "partition"]) == 1
    assert "--slurm: expected key=value" in capsys.readouterr().err
