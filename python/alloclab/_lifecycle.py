"""Runs in other threads, Ctrl-C and interpreter exit.

Python delivers Ctrl-C to the main thread only, and each run polls for it from its own controlling thread, so a run
started by another Python thread would never see it. Importing alloclab therefore chains a small SIGINT handler in
front of the current one (only in the main thread, and only while that handler is Python's default or a Python
callable): it stops every run in flight in the process (a run in its set-up ends it), then calls the handler it
replaced, which raises ``KeyboardInterrupt`` as before. At interpreter exit an ``atexit`` hook stops every run and
waits (without the GIL) until their threads are back in Python, so that no worker thread is still running when
Python finalizes; a run still tearing down after ``EXIT_WAIT_S`` is abandoned (its teardown ends at its next
interruption point) and waited for again. Then it closes the GIL gate: a run's thread that comes back later never
takes the GIL (Python would end it with ``pthread_exit``, which aborts a thread inside C++), it waits for the
process to end instead.
"""

from __future__ import annotations

import atexit
import signal
import threading
import time
from typing import Any

from . import _core

__all__ = ["install"]

#: How long interpreter exit waits for stopped runs to end (each stops within about 50 ms, but its teardown may take
#: seconds), and then again for abandoned ones.
EXIT_WAIT_S = 10.0

_installed = False


def _stop_on_interrupt(previous: Any):
    def handler(signum: int, frame: Any) -> Any:
        _core.stop_all_runs("interrupted (Ctrl-C in the main thread)")
        if callable(previous):
            return previous(signum, frame)
        raise KeyboardInterrupt

    handler._alloclab_chained = previous  # type: ignore[attr-defined]
    return handler


def _stop_at_exit() -> None:
    """Stops every run, waits for their threads to come back to Python (abandoning the runs that take too long),
    then closes the GIL gate."""
    for abandon in (False, True):
        _core.stop_all_runs("interpreter exit", abandon)
        deadline = time.monotonic() + EXIT_WAIT_S
        while _core.runs_outside_python() and time.monotonic() < deadline:
            time.sleep(0.01)  # releases the GIL: the stopped runs' threads can return to Python
        if not _core.runs_outside_python():
            break
    _core.close_gil_gate()


def install() -> None:
    """Install the Ctrl-C chain and the exit hook (idempotent; the Ctrl-C part only from the main thread)."""
    global _installed
    if _installed:
        return
    _installed = True
    atexit.register(_stop_at_exit)
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.default_int_handler or (callable(previous) and not hasattr(previous, "_alloclab_chained")):
        signal.signal(signal.SIGINT, _stop_on_interrupt(previous))
