"""Grids of runs: :func:`sweep` and its :class:`SweepResult`.

A sweep runs every configuration of a grid ``repeats`` times, *interleaved* (all configurations for repeat 0,
then all for repeat 1, ...) so that machine drift spreads over every configuration instead of biasing one, and
returns a tidy (long-format) table with one row per run. Every configuration passes the engine's checks before the
first run (a typo is an error at once, not an error row after minutes); a configuration that still fails in its run
becomes a row with ``status="error"`` and the message; a run that hits ``timeout_s`` becomes a row with
``status="stopped"``; the sweep goes on.

Measurements are checked as they come: a run the host disturbed (its workers did not run together, or it was
oversubscribed with no more workers than host PUs: :func:`alloclab.cluster.disturbed`) can be run again, up to
``retries`` times (the studies do), and the runs still flagged (poor overlap, too short,
oversubscribed) are counted in one warning at the end and in the meta data. Timings are best taken with
``lockstat=False`` (in a real-clock run lock_stat's clock reads sit inside every critical section; in a
virtual-clock run they are free); ``lockstat_repeats`` adds
lock_stat runs of every configuration for the counts, as extra repeats whose rows say ``lockstat=True``.

Long sweeps survive interruption: with ``out=DIR`` the finished rows are saved (as one atomic set of files, see
:mod:`alloclab.results`) after every run, and the sweep holds DIR to itself from before its first run to its end;
Ctrl-C stops the current run within a second and raises :class:`SweepInterrupted`, a ``KeyboardInterrupt`` that
carries the finished rows; ``resume=DIR`` runs only the runs that DIR does not already hold with ``status="ok"``
(matched on what they ran, see :mod:`alloclab._resume`), and never deletes a saved row.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import os
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import _resultdir, _resume, cluster, results
from ._checks import check_int
from ._run import RUN_OPTIONS, MeasurementWarning, RunResult, check  # RUN_OPTIONS: may also be grid axes
from .machines import Machine
from .machines import machine as load_machine
from .results import SweepResult, jsonable
from .topology import Topology

__all__ = ["RUN_OPTIONS", "SweepInterrupted", "SweepResult", "configurations", "sweep"]


#: Columns every sweep table starts with (then the grid and fixed parameters, then these status columns,
#: then the scenario's summary figures).
KEY_COLUMNS = ("run", "config", "repeat", "scenario")
STATUS_COLUMNS = (
    "status", "error", "seed", "lockstat", "attempts", "oversubscribed", "n_workers", "workers_bound",
    *cluster.HOST_COLUMNS,
)  # fmt: skip

# Provenance keys that differ from run to run by nature and so never count as a "varying" setting.
_PER_RUN_KEYS = {"started", "ended"}


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a sweep; the exception carries the rows that finished.

    It is a ``KeyboardInterrupt``, so a script stops and a notebook cell shows as interrupted (a "Run All" does
    not go on to plot half a sweep as if it were whole). The finished rows are not lost:

    * ``exc.result``: what the sweep would have returned (the tidy table, or a :class:`SweepResult` with
      ``detail=True``) holding only the finished runs; its meta data (``attrs["alloclab"]``) says
      ``interrupted: True`` and ``complete: False``. In Jupyter, right after the interrupt:
      ``df = sys.last_value.result``.
    * ``exc.saved``: the ``out`` directory, where the same rows were saved, or ``None``. Run the same call with
      ``resume=that directory`` (or ``resume=True``) to do only what is missing.

    Attributes:
        result: the partial table or :class:`SweepResult`.
        saved: the directory the partial result was saved to, or ``None`` without ``out``.
        done: runs in ``result`` (finished now or reused from a resumed directory).
        total: runs the sweep planned.
    """

    def __init__(self, result: pd.DataFrame | SweepResult, saved: Path | None, done: int, total: int):
        where = f"; saved to {saved} (resume=... continues it)" if saved is not None else ""
        super().__init__(
            f"sweep interrupted after {done} of {total} runs; the finished rows are in this exception's .result"
            f" (Jupyter: sys.last_value.result){where}"
        )
        self.result = result
        self.saved = saved
        self.done = done
        self.total = total

    def __reduce__(self):  # copy and pickle with the constructor's arguments, not the message
        return (type(self), (self.result, self.saved, self.done, self.total))


def configurations(grid: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The configurations of a grid, in sweep order (the last axis varies fastest).

    Args:
        grid: axis name -> list of values; a scalar or a string counts as a one-value axis.

    Returns:
        One dict per configuration. An empty or ``None`` grid has exactly one (empty) configuration.
    """
    axes = {k: _as_values(k, v) for k, v in (grid or {}).items()}
    return [dict(zip(axes, combo, strict=True)) for combo in itertools.product(*axes.values())]


def sweep(
    scenario: str,
    grid: Mapping[str, Any] | None = None,
    repeats: int = 1,
    topology: Topology | str | None = None,
    *,
    progress: bool = True,
    detail: bool = False,
    out: str | os.PathLike | None = None,
    resume: bool | str | os.PathLike | None = None,
    overwrite: bool = False,
    placement: str | Sequence[int] = "compact",
    lockstat: bool = True,
    locks: Mapping[str, str] | None = None,
    strict: bool = False,
    seed: int = 1,
    timeout_s: float = 0.0,
    min_time_s: float = 0.02,
    grow: bool = False,
    grow_fit: Mapping[str, Any] | None = None,
    exclusive: bool = True,
    clock: str = "real",
    machine: str | os.PathLike | Any = None,
    costs: str | None = None,
    retries: int = 0,
    lockstat_repeats: int = 0,
    executor: Any = None,
    **fixed: Any,
) -> pd.DataFrame | SweepResult:
    """Run a scenario over a grid of configurations, ``repeats`` times each, interleaved.

    Args:
        scenario: a scenario name (:func:`alloclab.scenarios`).
        grid: parameter -> list of values; the sweep runs the Cartesian product. Axes may be scenario
            parameters or run options (``topology`` as a synthetic string or :class:`Topology`, ``placement``,
            ``locks``, ``seed``, ...). ``None`` or ``{}``: one configuration.
        repeats: how many times each configuration runs (>= 1). Run ``i`` of the sweep is configuration
            ``i % n_configs`` of repeat ``i // n_configs``: A B A B ..., never A A B B.
        retries: how many more times a run the host disturbed (its workers did not run together, or it was
            oversubscribed with no more workers than host PUs: :func:`alloclab.cluster.disturbed`) is tried before
            its row is kept as it is (``attempts`` counts the tries; 0: never, the row is kept and flagged).
        lockstat_repeats: lock_stat runs of every configuration after the timed repeats (repeats ``repeats`` ...
            ``repeats + lockstat_repeats - 1``), for the counts when ``lockstat=False`` times the rest.
        topology: the model machine for every run (``Topology``, a synthetic description such as
            ``"node:2 core:2 pu:1"``, ``"host"`` or ``None`` for the host).
        progress: show a ``tqdm.auto`` bar (terminal or notebook) with the current configuration and an ETA.
        detail: ``False`` returns the tidy table; ``True`` returns a :class:`SweepResult` that also holds the
            per-worker and lock_stat tables of every run.
        out: a results directory: the finished rows (and with ``detail=True`` the detail tables) are saved there
            with :func:`alloclab.results.save` after every run and at the end, each save one atomic set of files,
            so a crash or Ctrl-C at any moment leaves the last complete save. ``meta.json`` says ``complete``
            (every planned run has a row) and ``interrupted``. The sweep locks the directory before its first run
            (a second writer gets :class:`~alloclab.results.DirectoryLocked`); a directory that is a file, is not
            writable, or already holds a result (unless it is resumed, or ``overwrite=True``) is refused before any
            run.
        resume: a directory saved by an earlier sweep of the same scenario (or ``True``: the ``out``
            directory). Its rows with ``status="ok"`` that ran what a run of this sweep runs (every parameter,
            given or defaulted; the run options, the topology by its structure; the repeat) are reused, not run
            again, one per run; everything else (missing, ``error`` and ``stopped`` rows, ``ok`` rows whose
            headline figure ``elapsed_s`` is NaN or missing and, with ``detail=True``, rows without their per-worker
            rows) runs. The result holds
            both, in sweep order, as if the sweep had run at once; meta data ``reused_runs`` counts the reused
            ones. A directory that does not exist yet, or holds no saved result, starts a fresh sweep, so
            ``al.sweep(..., out=d, resume=d)`` can be repeated until complete. Saved rows that match no run of
            this sweep stay in the directory (``kept``, out of the returned table). Damaged files (see
            :func:`alloclab.results.load`) are reported as warnings naming the runs that run again.
        overwrite: replace a result that ``out`` already holds (without ``resume``).
        placement: worker placement for every run (see :func:`alloclab.run`).
        lockstat: collect lock statistics in the timed repeats (``True`` or ``False``).
        locks: lock class -> lock kind overrides for every run.
        strict: make binding failures errors (they then show up as error rows).
        seed: the seed of every run (the same for all repeats, so repeats differ only by timing; a virtual-clock run
            with ``costs="table"`` repeats exactly: put ``seed`` in the grid for other interleavings).
        timeout_s: per-run time limit (0: none); a run that hits it becomes a ``status="stopped"`` row whose
            ``error`` column gives the reason (``"timeout after ..."``) and whose figures cover the part that ran.
        min_time_s, grow, grow_fit, exclusive: as :func:`alloclab.run`.
        clock, machine, costs: as :func:`alloclab.run`: ``clock="virtual", machine="xeon-8380-2s"`` runs every
            configuration on that simulated machine (``machine`` may also be a grid axis, to compare machines).
        executor: where the runs run (default: here, one after the other; or the executor of an enclosing
            :func:`alloclab.cluster.using` block; or a function of ``host_timed`` returning one, see
            :func:`alloclab.cluster.pick`). Any :class:`concurrent.futures.Executor` (a Dask client's
            ``client.get_executor()``, a ``ProcessPoolExecutor``) or a ``submitit`` executor (one SLURM job array):
            each configuration x repeat is one task, the rows arrive as tasks finish (progress bar, ``out`` and
            ``resume`` as without it), and a task whose worker dies becomes an ``error`` row whose ``error`` starts
            with ``"worker lost"``. Runs timed by their host (``clock="real"``, or ``costs="measured"``) need a
            machine each: the executor must place one task per host at a time (see
            :func:`alloclab.cluster.check_placement`); virtual-clock runs with ``costs="table"`` may share hosts.
        **fixed: scenario parameters held constant over the sweep (each becomes a column too).

    Returns:
        A DataFrame with one row per run, in sweep order (by run index, however an executor's tasks finished):
        ``run, config, repeat, scenario``, one column per grid axis and fixed parameter, ``status`` (``"ok"``,
        ``"error"`` or ``"stopped"``), ``error`` (the message, ``""`` when ok), ``seed``, ``lockstat``,
        ``attempts``, ``oversubscribed``, ``n_workers``, ``workers_bound``, the host that ran it
        (:data:`alloclab.cluster.HOST_COLUMNS`: ``host``, ``host_cpu``, ``host_topology``, ``host_kernel``,
        ``host_independent``; ``None`` when its worker was lost), then the scenario's summary figures (NaN or NA on
        error rows; integer figures stay integers). Its ``attrs["alloclab"]`` holds the sweep's meta data
        (scenario, grid, fixed, options, start and end time, the runs' common provenance, ``complete``,
        ``interrupted``, ``resumed_from``, ``reused_runs``, ``retried_runs``, ``flagged_runs``);
        :func:`alloclab.results.save` writes it to ``meta.json``. With ``detail=True``, a :class:`SweepResult`
        instead.

    Raises:
        ValueError: before the first run: the scenario does not exist; a grid value, fixed parameter or option of
            any configuration fails the checks a run makes before it builds anything (:func:`alloclab._run.check`:
            an unknown name, with the closest valid ones; a value of the wrong type or out of range; a lock class or
            kind that does not exist; ``lock=`` and ``locks=`` naming two kinds for one class); a fixed parameter is
            given a list (``threads=[1, 2]``: the message says to use ``grid=``); an axis is empty;
            ``repeats < 1``; ``out`` cannot be written or already holds a result; ``resume`` names a saved result
            of another scenario or with other run options (seed, topology, placement, locks, lockstat, strict); or
            ``executor`` is no executor or could run two host-timed runs on one host at once. What only building and
            placing a run finds (memory, a combination the scenario refuses, workers that do not fit the
            placement) makes error rows.
        DirectoryLocked: another sweep or save is writing ``out``.
        SweepInterrupted: Ctrl-C. The current run is stopped and its threads joined, the finished rows are saved
            (with ``out``) and carried by the exception (``.result``); it is a ``KeyboardInterrupt``.
    """
    grid = dict(grid or {})
    repeats = check_int("repeats", repeats, 1)
    retries = check_int("retries", retries, 0)
    lockstat_repeats = check_int("lockstat_repeats", lockstat_repeats, 0)
    overlap = set(grid) & set(fixed)
    if overlap:
        raise ValueError(f"grid and fixed parameters overlap: {sorted(overlap)}")
    configs = configurations(grid)
    _check_fixed_values(fixed)
    options = {
        "topology": topology,
        "placement": placement,
        "lockstat": lockstat,
        "locks": locks,
        "strict": strict,
        "seed": seed,
        "timeout_s": timeout_s,
        "min_time_s": min_time_s,
        "grow": grow,
        "grow_fit": grow_fit,
        "exclusive": exclusive,
        "clock": clock,
        "machine": machine,
        "costs": costs,
    }
    _check_before_start(scenario, configs, fixed, options)
    executor = cluster.current() if executor is None else executor
    if executor is not None:
        timing = [{**options, **{k: v for k, v in c.items() if k in RUN_OPTIONS}} for c in configs]
        host_timed = any(o["clock"] != "virtual" or o["costs"] == "measured" for o in timing)
        executor = cluster.pick(executor, host_timed)
        if executor is not None:  # a function's None: here
            cluster.check_placement(executor, host_timed)
    out_dir = None if out is None else Path(out)
    resume_dir = _resume_dir(resume, out_dir)
    plan = [(r, c) for r in range(repeats + lockstat_repeats) for c in range(len(configs))]
    topo_cache: dict[str, Topology | None] = {}
    writer = None
    if out_dir is not None:
        resuming = resume_dir is not None and os.path.abspath(resume_dir) == os.path.abspath(out_dir)
        writer = _resultdir.Writer(out_dir, results._TABLES, param="out", overwrite=overwrite, resuming=resuming)
    try:
        return _sweep(scenario, grid, fixed, repeats, lockstat_repeats, retries, options, configs, plan, detail,
                      progress, writer, resume_dir, topo_cache, executor)  # fmt: skip
    finally:
        if writer is not None:
            writer.close()


def _sweep(
    scenario: str,
    grid: dict[str, Any],
    fixed: dict[str, Any],
    repeats: int,
    lockstat_repeats: int,
    retries: int,
    options: dict[str, Any],
    configs: list[dict[str, Any]],
    plan: list[tuple[int, int]],
    detail: bool,
    progress: bool,
    writer: _resultdir.Writer | None,
    resume_dir: Path | None,
    topo_cache: dict[str, Topology | None],
    executor: Any,
) -> pd.DataFrame | SweepResult:
    """The sweep itself, with ``out`` (when given) held by ``writer``; the runs here, or as tasks of ``executor``."""
    topology_key = functools.partial(_topology_key, cache={})
    previous = None
    if resume_dir is not None:
        set_aside = writer is not None and os.path.abspath(resume_dir) == os.path.abspath(writer.directory)
        previous = _resume.Saved.load(
            resume_dir, scenario, options, list(grid), (*KEY_COLUMNS, *STATUS_COLUMNS), topology_key, set_aside
        )
    state = _State(scenario, grid, fixed, repeats, options, configs, plan, detail, writer, previous, topology_key)
    state.lockstat_repeats = lockstat_repeats
    state.reuse()
    pending = [i for i in range(len(plan)) if i not in state.rows]
    out_dir = None if writer is None else writer.directory

    bar = None
    try:
        bar = _progress_bar(len(plan), scenario, enabled=progress, initial=len(plan) - len(pending))
        prepared = {i: _prepare(i, scenario, fixed, repeats, retries, options, configs, plan) for i in pending}
        if executor is None:
            finished = ((i, cluster.execute(prepared[i][3], topo_cache)) for i in pending)
        else:
            tasks = [(i, _portable(prepared[i][3])) for i in pending]
            finished = cluster.completed(executor, tasks)
        for run_index, outcome in finished:
            row, keys, params, _ = prepared.pop(run_index)
            _record(state, run_index, row, keys, params, outcome)
            if out_dir is not None:
                state.save()
            if bar is not None:
                repeat, config_index = plan[run_index]
                bar.set_postfix_str(_config_label(configs[config_index], repeat, repeats))
                bar.update(1)
    except KeyboardInterrupt as exc:
        if bar is not None:
            bar.close()
            bar = None
        partial = state.build(interrupted=True)
        saved = state.save(partial) if out_dir is not None else None
        raise SweepInterrupted(partial, saved, len(state.rows), len(plan)) from exc
    finally:
        if bar is not None:
            bar.close()

    result = state.build(interrupted=False)
    if out_dir is not None:
        state.save(result)
    if state.flagged:
        warnings.warn(
            f"{scenario}: {len(state.flagged)} of {len(state.rows)} runs are flagged as measurements "
            f"({_count_reasons(state.flagged)}); {state.retried} were run again. alloclab.stats.compare drops the "
            "poorly overlapped and short ones and calls no oversubscribed difference a finding.",
            MeasurementWarning,
            stacklevel=3,
        )
    return result


def _prepare(
    run_index: int,
    scenario: str,
    fixed: dict[str, Any],
    repeats: int,
    retries: int,
    options: dict[str, Any],
    configs: list[dict[str, Any]],
    plan: list[tuple[int, int]],
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], cluster.Task]:
    """Run ``run_index`` of the plan: its row so far (keys, parameters, seed, lockstat), its keys and parameters
    (for the detail tables), and its task."""
    repeat, config_index = plan[run_index]
    config = configs[config_index]
    keys = {"run": run_index, "config": config_index, "repeat": repeat, "scenario": scenario}
    params = {k: _label(v) for k, v in {**config, **fixed}.items()}
    row: dict[str, Any] = {**keys, **params}
    call = {**options, **{k: v for k, v in config.items() if k in RUN_OPTIONS}}
    if repeat >= repeats:  # a lock_stat run, for the counts
        call["lockstat"] = True
    row["seed"] = _label(call["seed"])
    row["lockstat"] = call["lockstat"]
    scen_params = {k: v for k, v in {**fixed, **config}.items() if k not in RUN_OPTIONS}
    return row, keys, params, cluster.Task(run_index, scenario, call, scen_params, retries)


def _portable(task: cluster.Task) -> cluster.Task:
    return dataclasses.replace(task, options=cluster.portable(task.options))


def _record(
    state: _State,
    run_index: int,
    row: dict[str, Any],
    keys: dict[str, Any],
    params: dict[str, Any],
    outcome: cluster.Outcome,
) -> None:
    """Adds a finished run's row to ``state``: an error row when it has no result, else its figures. Its
    measurement warnings are collected in ``state`` instead of shown; its other warnings are shown here."""
    row.update(outcome.host)
    state.retried += outcome.retried
    state.flagged.extend(outcome.flagged)
    for category, message in outcome.other_warnings:
        warnings.warn(message, category, stacklevel=4)
    if outcome.result is None:
        row.update(status="error", error=outcome.error, attempts=1)
        state.add(run_index, row)
    else:
        row["attempts"] = outcome.attempts
        state.add(run_index, _ok_row(row, outcome.result), outcome.result, keys, params)


def _count_reasons(messages: list[str]) -> str:
    reasons = {
        "did not run together": "poor overlap",
        "below min_time_s": "too short",
        "oversubscribed": "oversubscribed",
    }
    counts = {name: sum(key in m for m in messages) for key, name in reasons.items()}
    return ", ".join(f"{n} {name}" for name, n in counts.items() if n)


# --- sweep state: rows so far, reused rows, saving ----------------------------------------------------------


class _State:
    """What a sweep has so far, by run index; builds the (partial) result and saves it."""

    def __init__(
        self,
        scenario: str,
        grid: dict[str, Any],
        fixed: dict[str, Any],
        repeats: int,
        options: dict[str, Any],
        configs: list[dict[str, Any]],
        plan: list[tuple[int, int]],
        detail: bool,
        writer: _resultdir.Writer | None,
        previous: _resume.Saved | None,
        topology_key: Callable[[Any], str],
    ):
        self.scenario, self.grid, self.fixed, self.repeats = scenario, grid, fixed, repeats
        self.options, self.configs, self.plan, self.detail = options, configs, plan, detail
        self.writer, self.previous, self.topology_key = writer, previous, topology_key
        self.rows: dict[int, dict[str, Any]] = {}
        # Detail rows by run index: a run's own (with detail=True) and, always, those of the runs reused from the
        # directory, so that saving never loses a saved row.
        self.workers: dict[int, pd.DataFrame] = {}
        self.lockstat: dict[int, pd.DataFrame] = {}
        self.kept: dict[str, pd.DataFrame | None] = {}
        self.provenances: list[dict[str, Any]] = []
        self.first_params: dict[str, Any] | None = None
        self.reused: list[int] = []
        self.started = _resultdir.utc_now()
        self._env: dict[str, Any] | None = None
        self.lockstat_repeats = 0
        self.retried = 0  # runs tried again because the host disturbed them (cluster.disturbed)
        self.flagged: list[str] = []  # the measurement warnings of the rows kept

    def reuse(self) -> None:
        """Takes the saved rows of the runs it plans from the resumed directory; keeps the others aside."""
        if self.previous is None:
            return
        identities = _resume.Identities(self.scenario, self.topology_key)
        planned = []
        for repeat, config_index in self.plan:
            config = self.configs[config_index]
            params = {k: v for k, v in {**self.fixed, **config}.items() if k not in RUN_OPTIONS}
            run_options = {**self.options, **{k: v for k, v in config.items() if k in RUN_OPTIONS}}
            if repeat >= self.repeats:  # a lock_stat run, for the counts
                run_options["lockstat"] = True
            planned.append((identities.identity(params, run_options), repeat))
        reused, kept = self.previous.match(planned, self.detail)
        for run_index, saved in reused.items():
            repeat, config_index = self.plan[run_index]
            keys = {"run": run_index, "config": config_index, "repeat": repeat, "scenario": self.scenario}
            params = {k: _label(v) for k, v in {**self.configs[config_index], **self.fixed}.items()}
            self.rows[run_index] = {**keys, **params, **saved.figures(KEY_COLUMNS)}
            for target, part in ((self.workers, saved.workers), (self.lockstat, saved.lockstat)):
                if part is not None:
                    target[run_index] = part.assign(run=run_index, config=config_index)
            self.reused.append(run_index)
        self.kept = _resume.kept_tables(kept)

    def add(
        self,
        run_index: int,
        row: dict[str, Any],
        result: RunResult | None = None,
        keys: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        self.rows[run_index] = row
        if result is None:
            return
        if self.first_params is None:
            self.first_params = dict(result.params)
        self.provenances.append(result.provenance)
        if self.detail and keys is not None and params is not None:
            self.workers[run_index] = _keyed(result.workers, keys, params)
            self.lockstat[run_index] = _keyed(result.lockstat, keys, params)
        else:  # a run done again without detail: the detail rows of an earlier run of it are not its own
            self.workers.pop(run_index, None)
            self.lockstat.pop(run_index, None)

    def build(self, *, interrupted: bool) -> pd.DataFrame | SweepResult:
        order = sorted(self.rows)
        table = _tidy([self.rows[i] for i in order], self.grid, self.fixed)
        prev_meta = self.previous.meta if self.previous is not None and self.reused else None
        meta = _meta(self, table, prev_meta)
        meta.update(
            started=self.started,
            ended=_resultdir.utc_now(),
            planned_runs=len(self.plan),
            complete=len(self.rows) == len(self.plan),
            interrupted=interrupted,
            resumed_from=None if self.previous is None else str(self.previous.path),
            reused_runs=len(self.reused),
            lockstat_repeats=self.lockstat_repeats,
            retried_runs=self.retried,
            flagged_runs=len(self.flagged),
        )
        table.attrs["alloclab"] = meta
        whole = SweepResult(
            runs=table,
            workers=_concat([self.workers[i] for i in order if i in self.workers]),
            lockstat=_concat([self.lockstat[i] for i in order if i in self.lockstat]),
            meta=meta,
        )
        return whole if self.detail else table

    def save(self, result: pd.DataFrame | SweepResult | None = None) -> Path:
        """Saves the rows so far (``result``: what :meth:`build` made), with every detail row and kept row."""
        assert self.writer is not None
        if self._env is None:
            self._env = results.environment()
        if result is None:
            result = self.build(interrupted=False)
        runs = result.runs if isinstance(result, SweepResult) else result
        order = sorted(self.rows)
        detail = {
            name: _concat([parts[i] for i in order if i in parts])
            for name, parts in (("workers", self.workers), ("lockstat", self.lockstat))
        }
        tables = {n: t for n, t in detail.items() if self.detail or len(t)}  # detail=False: only carried rows
        return results._save(self.writer, runs, meta=None, env=self._env, extra={**tables, **self.kept})


def _resume_dir(resume: Any, out: Path | None) -> Path | None:
    if resume is None or resume is False:
        return None
    if resume is True:
        if out is None:
            raise ValueError("resume: True resumes from the out directory, but no out directory was given")
        return out
    if isinstance(resume, (str, os.PathLike)):
        return Path(resume)
    raise ValueError(f"resume: expected a directory, True or None, got {resume!r}")


# --- helpers -----------------------------------------------------------------------------------------------


def _as_values(name: str, values: Any) -> list[Any]:
    if isinstance(values, (str, bytes, Mapping, Topology)) or not isinstance(values, Iterable):
        return [values]
    out = list(values)
    if not out:
        raise ValueError(f"grid axis {name!r} has no values")
    return out


def _check_fixed_values(fixed: Mapping[str, Any]) -> None:
    """A list where one value belongs (``threads=[1, 2]``) is an axis given in the wrong place: say where it goes."""
    for name, value in fixed.items():
        if isinstance(value, (list, tuple, set, range, np.ndarray, pd.Series)):
            values = list(value)
            raise ValueError(
                f"{name}: {value!r} is several values, but a keyword of sweep() is one value held fixed; to sweep "
                f"{name} over them, put it in the grid: grid={{{name!r}: {values!r}}}"
            )


def _check_before_start(
    scenario: str, configs: list[dict[str, Any]], fixed: Mapping[str, Any], options: Mapping[str, Any]
) -> None:
    """Every configuration through the checks a run makes before it builds anything (:func:`alloclab._run.check`: the
    scenario, each parameter's name, type and range, every option, the lock classes and kinds, a lock override that
    contradicts a parameter), before the first run: a typo is an error at once, not an error row after minutes.
    What only building and placing a run finds (memory, combinations a scenario refuses) still makes error rows.

    Raises:
        ValueError: the engine's message for the first configuration that fails.
    """
    machines: dict[Any, Any] = {}  # a profile named by several configurations is loaded once
    for config in configs:
        call = {**options, **{k: v for k, v in config.items() if k in RUN_OPTIONS}}
        if isinstance(call["machine"], (str, os.PathLike)):
            call["machine"] = machines.setdefault(call["machine"], load_machine(call["machine"]))
        check(scenario, **call, **{k: v for k, v in {**fixed, **config}.items() if k not in RUN_OPTIONS})


def _topology_key(value: Any, cache: dict[str, Topology]) -> str:
    """What a run's topology is, for matching: "host", or the digest of the model's structure (a synthetic string,
    or the path of an XML file that a saved sweep recorded, is loaded for it); a value that is no topology stands
    for itself."""
    if isinstance(value, Topology):
        return value.digest
    if value is None or value == "host":
        return "host"
    if isinstance(value, str):
        try:
            if value not in cache:
                is_xml = value.endswith(".xml") or Path(value).is_file()
                cache[value] = Topology.from_xml(value) if is_xml else Topology.synthetic(value)
            return cache[value].digest
        except ValueError:
            pass
    return str(value)


def _label(value: Any) -> Any:
    """A table-friendly form of a parameter value (Topology, dict and list values become strings)."""
    if isinstance(value, Topology):
        return value.description
    if isinstance(value, Machine):
        return value.name
    if isinstance(value, Mapping):
        return ",".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return value


def _config_label(config: Mapping[str, Any], repeat: int, repeats: int) -> str:
    parts = [f"{k}={_label(v)}" for k, v in config.items()]
    parts.append(f"repeat {repeat + 1}/{repeats}")
    return " ".join(parts)


def _ok_row(row: dict[str, Any], result: RunResult) -> dict[str, Any]:
    prov = result.provenance
    row.update(
        status="stopped" if result.stopped else "ok",
        error=result.stop_reason if result.stopped else "",
        seed=prov.get("seed", row.get("seed")),
        oversubscribed=bool(prov.get("oversubscribed", False)),
        n_workers=prov.get("workers", len(result.workers)),
        workers_bound=prov.get("workers_bound"),
    )
    for key, value in result.summary.items():
        row[key if key not in row else f"{key}_result"] = value
    return row


def _keyed(table: pd.DataFrame, keys: Mapping[str, Any], params: Mapping[str, Any]) -> pd.DataFrame:
    front = {k: v for k, v in {**keys, **params}.items() if k not in table.columns}
    out = table.copy()
    for i, (k, v) in enumerate(front.items()):
        out.insert(i, k, [v] * len(out))
    return out


def _concat(tables: list[pd.DataFrame]) -> pd.DataFrame:
    tables = [t for t in tables if len(t)]
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()


def _tidy(rows: list[dict[str, Any]], grid: Mapping[str, Any], fixed: Mapping[str, Any]) -> pd.DataFrame:
    front = list(dict.fromkeys([*KEY_COLUMNS, *grid, *fixed, *STATUS_COLUMNS]))
    rest: list[str] = []
    for row in rows:
        rest.extend(k for k in row if k not in front and k not in rest)
    table = pd.DataFrame(rows, columns=[*front, *rest])
    table["error"] = table["error"].fillna("").astype(str)
    table["oversubscribed"] = table["oversubscribed"].astype("boolean")
    table["host_independent"] = table["host_independent"].astype("boolean")
    for col in ("n_workers", "workers_bound", "attempts"):
        table[col] = pd.to_numeric(table[col]).astype("Int64")
    for col in rest:  # integer and boolean figures keep their kind, with NA where a run has none (error rows)
        values = [v for v in table[col] if not _missing(v)]
        if values and all(isinstance(v, (bool, np.bool_)) for v in values):
            table[col] = pd.array([None if _missing(v) else bool(v) for v in table[col]], dtype="boolean")
        elif values and all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in values):
            table[col] = pd.array([None if _missing(v) else int(v) for v in table[col]], dtype="Int64")
    if "seed" not in grid and "seed" not in fixed:
        table["seed"] = pd.to_numeric(table["seed"]).astype("Int64")
    return table


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _meta(state: _State, table: pd.DataFrame, previous: Mapping[str, Any] | None) -> dict[str, Any]:
    """The sweep's meta data; ``previous`` is the meta data of a saved sweep whose rows were reused."""
    records = [{k: jsonable(v) for k, v in p.items()} for p in state.provenances]
    if previous is not None and previous.get("provenance"):
        records.append(dict(previous["provenance"]))  # what every reused run had in common
    constant: dict[str, Any] = {}
    varying: dict[str, list[Any]] = {}
    if records:
        for key in records[0]:
            values = [p.get(key) for p in records]
            if key in _PER_RUN_KEYS:
                continue
            if all(v == values[0] for v in values):
                constant[key] = values[0]
            else:
                distinct: list[Any] = []
                for v in values:
                    if v not in distinct:
                        distinct.append(v)
                varying[key] = distinct
    for key, values in ((previous or {}).get("provenance_varying") or {}).items():
        merged = varying.get(key) or ([constant.pop(key)] if key in constant else [])
        varying[key] = merged + [v for v in values if v not in merged]
    first_params = state.first_params
    if first_params is None and previous is not None:
        first_params = dict(previous.get("defaults") or {})
    grid, options = state.grid, state.options
    defaults = {
        k: v for k, v in (first_params or {}).items() if k not in grid and k not in state.fixed and k not in RUN_OPTIONS
    }
    topologies = [options.get("topology"), *(_as_values("topology", grid["topology"]) if "topology" in grid else [])]
    machines = [options.get("machine"), *(_as_values("machine", grid["machine"]) if "machine" in grid else [])]
    return {
        "kind": "sweep",
        "scenario": state.scenario,
        "grid": {k: [jsonable(_label(v)) for v in _as_values(k, vs)] for k, vs in grid.items()},
        "fixed": {k: jsonable(_label(v)) for k, v in state.fixed.items()},
        "defaults": {k: jsonable(v) for k, v in defaults.items()},
        "repeats": state.repeats,
        "configs": len(state.configs),
        "runs": len(table),
        "order": "interleaved",
        "options": {k: jsonable(_label(v)) for k, v in options.items()},
        # what each topology of the sweep (the option, the values of a topology axis) is, for a later resume
        "topologies": {"host" if t is None else str(_label(t)): state.topology_key(t) for t in topologies},
        # and each machine profile of a virtual-clock sweep, by the hash of its numbers
        "machines": {str(_label(m)): _resume.machine_key_of(m) for m in machines if m is not None},
        "status_counts": {str(k): int(v) for k, v in table["status"].value_counts().items()},
        "provenance": {k: jsonable(v) for k, v in constant.items()},
        "provenance_varying": {k: [jsonable(x) for x in v] for k, v in varying.items()},
    }


def _progress_bar(total: int, scenario: str, *, enabled: bool, initial: int = 0):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=scenario, unit="run", dynamic_ncols=True, leave=True)
