"""Settings read from the environment.

``ALLOCLAB_QUICK=1`` switches every notebook, study and experiment script to *quick mode*: the same code
paths with sizes shrunk so that they finish in seconds (the test suite executes the notebooks this way).
Read it through :func:`quick` at the moment sizes are chosen, so that setting the variable in a running
process (a test, a notebook cell) takes effect.
"""

from __future__ import annotations

import os
from typing import TypeVar

__all__ = ["QUICK_ENV", "quick", "sized"]

#: The one environment variable that selects quick mode.
QUICK_ENV = "ALLOCLAB_QUICK"

_TRUE = {"1", "true", "yes", "on"}

T = TypeVar("T")


def quick() -> bool:
    """True when quick mode is on, i.e. ``ALLOCLAB_QUICK`` is ``1``, ``true``, ``yes`` or ``on``."""
    return os.environ.get(QUICK_ENV, "").strip().lower() in _TRUE


def sized(full: T, small: T, *, quick_mode: bool | None = None) -> T:
    """Pick a size by mode: ``full`` normally, ``small`` in quick mode.

    Args:
        full: the value for a real measurement.
        small: the value for quick mode.
        quick_mode: force a mode (``None``: ask :func:`quick`).

    Example:
        ``iterations = al.config.sized(100_000, 2_000)``
    """
    use_quick = quick() if quick_mode is None else quick_mode
    return small if use_quick else full
