"""alloclab: a lab for lock contention in Linux-style memory allocators.

A C++20 engine models the kernel's allocator paths on pinned threads, with switchable lock granularity and primitives
and ``/proc/lock_stat``-style statistics. Start with :func:`scenarios`, :func:`run` and :class:`Topology`
(:func:`metrics` says what each figure of a run means); walk a grid with :func:`sweep`, keep it with
:mod:`alloclab.results`, compare variants with :mod:`alloclab.stats` (two results directories with
:mod:`alloclab.compare`) and draw it with :mod:`alloclab.plot`; :mod:`alloclab.kernel` reads a real kernel's
``/proc/lock_stat`` and ``perf lock contention`` output beside the model's; :mod:`alloclab.cluster` sends a sweep's
runs to a Dask cluster or a SLURM job array. :func:`machines` lists the machine profiles (with :func:`machine` to load
one) and ``alloclab calibrate`` measures one for this host. ``ALLOCLAB_QUICK=1`` (see :func:`quick`) shrinks the sizes
of notebooks, studies and experiment scripts.
"""

from . import _lifecycle, cluster, compare, config, kernel, plot, results, stats
from ._catalogue import lock_classes, lock_kinds, metrics, scenarios
from ._core import __version__
from ._run import MeasurementWarning, RunResult, run
from .config import quick
from .machines import Machine, machine, machines
from .sweep import SweepInterrupted, SweepResult, sweep
from .topology import Topology

_lifecycle.install()

__all__ = [
    "Machine",
    "MeasurementWarning",
    "RunResult",
    "SweepInterrupted",
    "SweepResult",
    "Topology",
    "__version__",
    "cluster",
    "compare",
    "config",
    "kernel",
    "lock_classes",
    "lock_kinds",
    "machine",
    "machines",
    "metrics",
    "plot",
    "quick",
    "results",
    "run",
    "scenarios",
    "stats",
    "sweep",
]
