"""Sweeps on other machines: one run of a sweep as a task for an executor, where tasks may go, and what host ran them.

:func:`alloclab.sweep` with ``executor=EX`` sends every configuration x repeat as one task (:func:`execute` on a
:class:`Task`) to ``EX``: any :class:`concurrent.futures.Executor` (a ``dask.distributed`` client's
``client.get_executor()``, a ``ProcessPoolExecutor``) or a ``submitit`` executor (SLURM job arrays; local processes
where SLURM is absent). It does not schedule anything itself: the executor decides where and when a task runs, and
:func:`completed` hands the outcomes back as they finish; a task whose worker died becomes an outcome with the
reason (an error row), never a lost row.

Placement (:func:`check_placement`): a run whose figures are host time (``clock="real"``, or ``costs="measured"``)
needs a machine to itself, so the sweep refuses an executor that could run two such tasks on one host at once:
a local pool of more than one worker, submitit's local executor, a Dask executor without the worker resource
``{"machine": 1}`` (and workers that declare it must each be on a host of their own), a SLURM executor without
``exclusive``. Virtual-clock runs with ``costs="table"`` are a pure function of their inputs and may be packed.
Every row records its host (:func:`host`), and :func:`alloclab.stats.compare` refuses host timings from more
than one host unless told to.

Left out: choosing worker counts, retrying beyond what the executor does (Dask retries a task whose worker died;
a broken ``ProcessPoolExecutor`` fails every task still pending, and ``resume`` runs them again), sending
``Topology`` objects loaded from XML files (pass the file's path, which workers must see).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import contextvars
import functools
import multiprocessing
import os
import platform
import socket
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import results
from ._checks import check_int
from ._run import MeasurementWarning, RunResult, run
from .machines import Machine
from .topology import Topology

__all__ = [
    "HOST_COLUMNS", "SLURM_KEYS", "Outcome", "Task", "check_placement", "completed", "current", "dask", "disturbed",
    "execute", "host", "local", "pick", "portable", "slurm", "using",
]  # fmt: skip

#: Columns of every sweep row that say which host ran it: its hostname, CPU model, the digest of its hwloc
#: topology (:attr:`alloclab.Topology.digest` of the host), its kernel release, and whether the row's figures
#: are independent of the host (virtual clock, ``costs="table"``).
HOST_COLUMNS = ("host", "host_cpu", "host_topology", "host_kernel", "host_independent")

_executor: contextvars.ContextVar[Any] = contextvars.ContextVar("alloclab_executor", default=None)


@contextlib.contextmanager
def using(executor: Any) -> Iterator[Any]:
    """Within the block, :func:`alloclab.sweep` calls that name no ``executor`` use this one (the studies'
    sweeps too: ``with al.cluster.using(client.get_executor()): studies.reproduce("lock_numa")``).

    Args:
        executor: as the ``executor`` parameter of :func:`alloclab.sweep`; ``None`` runs locally.
    """
    token = _executor.set(executor)
    try:
        yield executor
    finally:
        _executor.reset(token)


def current() -> Any:
    """The executor of the innermost :func:`using` block, or ``None``."""
    return _executor.get()


def pick(executor: Any, host_timed: bool) -> Any:
    """The executor a sweep uses: ``executor`` itself, or, when it is a function (no ``submit``), what it returns
    for this sweep (``executor(host_timed)``: e.g. one that asks Dask for a whole machine only when runs are timed
    by their host; :func:`dask`, :func:`slurm` and :func:`local` make such functions). ``None``: the sweep runs
    here, one run after the other."""
    if executor is not None and not callable(getattr(executor, "submit", None)) and callable(executor):
        return executor(host_timed)
    return executor


class dask:  # lower case: it is used as a function, al.cluster.dask(address)
    """Executors on the Dask cluster at ``address``: host-timed sweeps get ``client.get_executor(resources=
    {"machine": 1})`` (start one worker per machine with ``dask worker ADDRESS --resources machine=1``), packed
    (virtual-clock, ``costs="table"``) sweeps a plain ``client.get_executor()``. Pass it where an executor goes
    (:func:`pick`); it connects at its first use; ``close()`` (or ``with``) disconnects.

    Args:
        address: the scheduler's address, e.g. ``tcp://10.0.0.1:8786``.

    Raises:
        ValueError: ``address`` is empty; ``distributed`` is not installed (``pip install 'alloclab[cluster]'``).
    """

    def __init__(self, address: str):
        if not address:
            raise ValueError("dask: expected a scheduler address such as tcp://10.0.0.1:8786, got ''")
        self.address = address
        self._distributed = _import("distributed")
        self._client: Any = None

    def __call__(self, host_timed: bool) -> Any:
        if self._client is None:
            self._client = self._distributed.Client(self.address, set_as_default=False)
        return self._client.get_executor(resources={"machine": 1}) if host_timed else self._client.get_executor()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> dask:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class local:  # lower case: it is used as a function, al.cluster.local()
    """Packed sweeps (virtual clock, ``costs="table"``) on a pool of processes of this host, one per host PU by
    default; host-timed sweeps here, one run at a time (:func:`pick` gets ``None`` for them). A packed run's figures
    do not depend on what else the host runs, so its runs may share the host; a host-timed run never does.
    :func:`alloclab.studies.reproduce` uses one unless an executor is in use already. Pass it where an executor goes
    (:func:`pick`, :func:`using`); the pool starts at the first packed sweep, its processes forked from this one
    (``fork``: they start in milliseconds with alloclab imported, and a script needs no ``__main__`` guard, as it
    would under ``spawn`` or ``forkserver``); ``close()`` (or ``with``) shuts it down.

    Args:
        workers: processes of the pool (default: the host's PU count).

    Raises:
        ValueError: ``workers`` is not a whole number >= 1.
    """

    def __init__(self, workers: int | None = None):
        self.workers = Topology.host().pus if workers is None else check_int("workers", workers, 1)
        self._pool: cf.ProcessPoolExecutor | None = None

    def __call__(self, host_timed: bool) -> cf.ProcessPoolExecutor | None:
        if host_timed:
            return None
        if self._pool is None:
            context = multiprocessing.get_context("fork")
            self._pool = cf.ProcessPoolExecutor(self.workers, mp_context=context)
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def __enter__(self) -> local:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: ``--slurm`` keys and the submitit parameter each sets.
SLURM_KEYS = {
    "partition": "slurm_partition",
    "time": "timeout_min",
    "array_parallelism": "slurm_array_parallelism",
    "cpus_per_task": "cpus_per_task",
    "mem_gb": "mem_gb",
    "exclusive": "slurm_exclusive",
}


def slurm(folder: str | os.PathLike = "slurm", **params: Any) -> Any:
    """submitit executors: one SLURM job array per sweep, or local processes where SLURM is absent
    (``submitit.AutoExecutor``). Host-timed sweeps ask for whole nodes (``--exclusive``, one job per node).

    Args:
        folder: where submitit keeps the jobs' pickles and logs (a directory the compute nodes see).
        **params: keys of :data:`SLURM_KEYS`: ``partition``, ``time`` (minutes), ``array_parallelism`` (jobs of
            the array running at once), ``cpus_per_task``, ``mem_gb``, ``exclusive`` (default: True for
            host-timed sweeps).

    Returns:
        A function for :func:`pick`/:func:`using`.

    Raises:
        ValueError: a key that is not in :data:`SLURM_KEYS`; ``submitit`` is not installed.
    """
    unknown = sorted(set(params) - set(SLURM_KEYS))
    if unknown:
        raise ValueError(f"slurm: unknown key(s) {unknown} (allowed: {', '.join(SLURM_KEYS)})")
    submitit = _import("submitit")

    def executor(host_timed: bool) -> Any:
        ex = submitit.AutoExecutor(folder=os.fspath(folder))
        chosen = {"exclusive": host_timed, **params}
        if not chosen["exclusive"]:
            del chosen["exclusive"]  # submitit would write --exclusive=False, which sbatch does not read as "no"
        if ex.cluster == "slurm":
            ex.update_parameters(**{SLURM_KEYS[k]: v for k, v in chosen.items()})
        elif "time" in params:
            ex.update_parameters(timeout_min=params["time"])
        return ex

    return executor


def _import(name: str) -> Any:
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        raise ValueError(f"{name}: not installed; pip install 'alloclab[cluster]'") from None


@functools.cache
def host() -> dict[str, Any]:
    """This process's host, as the :data:`HOST_COLUMNS` of a row (without ``host_independent``)."""
    return {
        "host": socket.gethostname(),
        "host_cpu": results._cpu_model(),
        "host_topology": Topology.host().digest,
        "host_kernel": platform.release(),
    }


@dataclass(frozen=True)
class Task:
    """One run of a sweep, as sent to a worker: ``run(scenario, **options, **params)``, tried again up to
    ``retries`` times while the host disturbed it (:func:`disturbed`). ``options["topology"]`` and
    ``options["machine"]`` are what a worker can rebuild (see :func:`portable`). ``run`` is the run's index in the
    sweep: two repeats of one configuration are two tasks (an executor that caches equal tasks, as Dask does for
    pure ones, runs both)."""

    run: int
    scenario: str
    options: dict[str, Any]
    params: dict[str, Any]
    retries: int


@dataclass
class Outcome:
    """What a task hands back.

    Attributes:
        result: the last try's result, or ``None`` when the run failed.
        error: ``"Type: message"`` when it failed (in the run, or its worker was lost), else ``""``.
        attempts: tries made (1 on failure).
        retried: tries made again because the host disturbed the run (:func:`disturbed`).
        flagged: the measurement warnings of the result kept.
        other_warnings: other warnings the run raised, as ``(category, message)``.
        host: the :data:`HOST_COLUMNS` of the host that ran it (``None`` values when its worker was lost).
    """

    result: RunResult | None
    error: str = ""
    attempts: int = 1
    retried: int = 0
    flagged: list[str] = field(default_factory=list)
    other_warnings: list[tuple[type[Warning], str]] = field(default_factory=list)
    host: dict[str, Any] = field(default_factory=lambda: dict.fromkeys(HOST_COLUMNS))


def execute(task: Task, topologies: dict[str, Topology | None] | None = None) -> Outcome:
    """Runs a task here (in the sweep's process, or on a worker). Returns its :class:`Outcome`; an exception of
    the run (an invalid configuration, out of memory, a binding failure with ``strict``) becomes its ``error``.
    Ctrl-C (``KeyboardInterrupt``) propagates.

    Args:
        task: what to run.
        topologies: a cache of topologies by description (the sweep's own; a worker keeps one per process).
    """
    here = {**host(), "host_independent": None}
    options = dict(task.options)
    try:
        options["topology"] = _topology(options["topology"], _worker_topologies if topologies is None else topologies)
        for attempt in range(1, task.retries + 2):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", MeasurementWarning)
                result = run(task.scenario, **options, **task.params)
            if not (disturbed(result) and attempt <= task.retries):
                break
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:
        return Outcome(None, error=f"{type(exc).__name__}: {exc}", host=here)
    prov = result.provenance
    here["host_independent"] = prov.get("clock") == "virtual" and prov.get("costs") == "table"
    flagged = [str(w.message) for w in caught if issubclass(w.category, MeasurementWarning)]
    others = [(w.category, str(w.message)) for w in caught if not issubclass(w.category, MeasurementWarning)]
    return Outcome(result, attempts=attempt, retried=attempt - 1, flagged=flagged, other_warnings=others, host=here)


def disturbed(result: RunResult) -> bool:
    """Whether the host, not the configuration, spoiled a finished run's timing, so that trying again may give a
    clean one: its workers did not run together (``overlap_poor``), or it was oversubscribed (a worker waited for a
    CPU, other tasks or runs were on the host) although it had no more workers than host PUs. A run with more
    workers than PUs is oversubscribed by design: every try would be."""
    if result.stopped:
        return False
    if result.summary.get("overlap_poor") is True:
        return True
    prov = result.provenance
    return bool(prov.get("oversubscribed")) and prov.get("workers", 0) <= prov.get("host_pus", 0)


_worker_topologies: dict[str, Topology | None] = {}


def _topology(value: Any, cache: dict[str, Topology | None]) -> Topology | None:
    if value is None or isinstance(value, Topology):
        return value
    if isinstance(value, str):
        if value not in cache:
            cache[value] = None if value == "host" else Topology.synthetic(value)
        return cache[value]
    raise ValueError(f"topology: expected a Topology, a synthetic description or 'host', got {value!r}")


def portable(options: dict[str, Any]) -> dict[str, Any]:
    """Run options a worker process can rebuild: a synthetic ``Topology`` as its description, the host's as
    ``None`` (the worker's host), a ``Machine`` as the path of its profile.

    Raises:
        ValueError: a ``Topology`` loaded from an XML file (its path is what workers can load).
    """
    out = dict(options)
    topo = out.get("topology")
    if isinstance(topo, Topology):
        if topo.source == "xml":
            raise ValueError(
                "topology: a Topology loaded from an XML file cannot be sent to workers; pass the file's path "
                "(a path every worker can read) instead"
            )
        out["topology"] = None if topo.source == "host" else topo.description
    if isinstance(out.get("machine"), Machine):
        out["machine"] = out["machine"].path
    return out


# --- executors ----------------------------------------------------------------------------------------------


def _is_submitit(executor: Any) -> bool:
    return type(executor).__module__.startswith("submitit")


def _is_dask(executor: Any) -> bool:
    return type(executor).__module__.startswith("distributed")


def check_placement(executor: Any, host_timed: bool) -> None:
    """Refuses an executor the sweep cannot use, or that could run two host-timed runs on one host at once.

    Args:
        executor: the ``executor`` given to the sweep.
        host_timed: some run of the sweep is timed by its host (``clock="real"``, or ``costs="measured"``).

    Raises:
        ValueError: ``executor`` has no ``submit``; or ``host_timed`` and the executor may place two tasks on one
            host: a local pool of more than one worker, submitit's local executor, a Dask executor made without
            ``resources={"machine": 1}`` or whose cluster has no worker with that resource, or two on one host,
            a SLURM executor without ``exclusive=True``, or an executor of an unknown kind.
    """
    if not callable(getattr(executor, "submit", None)):
        raise ValueError(
            f"executor: expected a concurrent.futures.Executor (client.get_executor(), ProcessPoolExecutor) or a "
            f"submitit executor, got {executor!r}"
        )
    if not host_timed:
        return
    why = "real-clock (or costs='measured') runs time the host, so each needs a machine to itself"
    if isinstance(executor, (cf.ProcessPoolExecutor, cf.ThreadPoolExecutor)):
        workers = getattr(executor, "_max_workers", None)
        if workers != 1:
            raise ValueError(
                f"executor: a local pool of {workers} workers would run host-timed runs side by side on this host; "
                f"{why}: use max_workers=1, or clock='virtual' with costs='table'"
            )
    elif _is_dask(executor):
        _check_dask(executor, why)
    elif _is_submitit(executor):
        cluster = getattr(executor, "cluster", None)
        params = getattr(getattr(executor, "_executor", None), "parameters", {}) or {}
        if cluster != "slurm":
            raise ValueError(
                f"executor: submitit's {cluster!r} executor runs its jobs side by side on this host; {why}: use it "
                "only for clock='virtual' with costs='table' sweeps, or submit to SLURM with exclusive=True"
            )
        if not params.get("exclusive"):
            raise ValueError(
                f"executor: a SLURM executor without exclusive=True may share a node between jobs; {why}: "
                "executor.update_parameters(slurm_exclusive=True) (--slurm sets it for host-timed sweeps)"
            )
    else:
        raise ValueError(
            f"executor: cannot tell where {type(executor).__name__} places its tasks; {why}: use a Dask executor "
            "with resources={'machine': 1}, SLURM with exclusive=True, a pool of max_workers=1, or a virtual clock"
        )


def _check_dask(executor: Any, why: str) -> None:
    """A Dask executor for host-timed runs: every task asks for the worker resource ``machine`` (1), and the
    workers that offer it do so once per host (``dask worker --resources machine=1``, one per machine)."""
    kwargs = getattr(executor, "_kwargs", {}) or {}
    if (kwargs.get("resources") or {}).get("machine") != 1:
        raise ValueError(
            f"executor: a Dask executor for host-timed runs must be client.get_executor(resources={{'machine': 1}}) "
            f"(got resources={kwargs.get('resources')!r}); {why}"
        )
    workers = executor._client.scheduler_info()["workers"]
    hosts: dict[str, list[str]] = {}
    for address, info in workers.items():
        amount = (info.get("resources") or {}).get("machine")
        if amount is None:
            continue
        if amount != 1:
            raise ValueError(f"executor: Dask worker {address} offers machine={amount}; one machine is 1 ({why})")
        hosts.setdefault(info.get("host") or address.rsplit(":", 1)[0], []).append(address)
    if not hosts:
        raise ValueError(
            f"executor: no Dask worker offers the resource 'machine' (start one per host with "
            f"`dask worker --resources machine=1`); {why}"
        )
    shared = {h: a for h, a in hosts.items() if len(a) > 1}
    if shared:
        raise ValueError(f"executor: Dask workers {shared} offer 'machine' on one host; {why}")


def completed(executor: Any, tasks: Sequence[tuple[int, Task]]) -> Iterator[tuple[int, Outcome]]:
    """Submits every task (a submitit executor gets them as one job array) and yields ``(run index, outcome)``
    as they finish. A task that failed outside the run (its worker died, the job was cancelled, its result could
    not be sent back) yields an :class:`Outcome` whose ``error`` says so. When the caller stops (Ctrl-C, an
    exception), the tasks not yet finished are cancelled."""
    if _is_submitit(executor):
        with executor.batch():
            jobs = [executor.submit(execute, task) for _, task in tasks]
        handles = dict(zip(jobs, (i for i, _ in tasks), strict=True))
        finished = _submitit_completed(list(handles))
    else:
        handles = {executor.submit(execute, task): i for i, task in tasks}
        finished = cf.as_completed(handles)
    try:
        for handle in finished:
            yield handles[handle], _outcome(handle)
    finally:
        for handle in handles:
            if not handle.done():
                handle.cancel(**({"check": False} if _is_submitit(executor) else {}))


def _submitit_completed(jobs: list[Any], poll_s: float = 0.2) -> Iterator[Any]:
    """submitit jobs as they finish (its jobs are no ``concurrent.futures.Future``: this is the one adapter)."""
    pending = list(jobs)
    while pending:
        done = [j for j in pending if j.done()]
        pending = [j for j in pending if all(j is not d for d in done)]
        yield from done
        if pending and not done:
            time.sleep(poll_s)


def _outcome(handle: Any) -> Outcome:
    try:
        outcome = handle.result()
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # the worker died, the job was cancelled or killed: the run has no result
        text = str(exc).strip().splitlines()
        reason = text[-1] if text else ""
        return Outcome(None, error=f"worker lost: {type(exc).__name__}: {reason}".rstrip(": "))
    if not isinstance(outcome, Outcome):
        return Outcome(None, error=f"worker lost: the task returned {type(outcome).__name__}, not an Outcome")
    return outcome
