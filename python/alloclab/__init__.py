"""alloclab: a lab for lock contention in Linux-style memory allocators.

A C++20 engine models the kernel's allocator paths on pinned threads, with switchable lock granularity and
primitives and ``/proc/lock_stat``-style statistics. Start with :func:`scenarios`, :func:`run` and
:class:`Topology`.
"""

from ._catalogue import lock_classes, lock_kinds, scenarios
from ._core import __version__
from ._run import RunResult, run
from .topology import Topology

__all__ = ["RunResult", "Topology", "__version__", "lock_classes", "lock_kinds", "run", "scenarios"]
