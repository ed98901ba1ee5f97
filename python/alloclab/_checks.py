"""Checks of integer arguments that Python sees before the engine does, worded as the engine words its own: a
``ValueError`` whose message starts with the parameter's name and gives the value and the allowed range
(``repeats: value out of range: 0 (allowed: 1..50)``, ``repeats: expected an integer, got 2.0 (allowed: 1..50)``).
Leaves out: every other kind of argument (each is checked where it is used) and the scenarios' parameters, which the
engine checks against their declared ranges.
"""

from __future__ import annotations

import operator
from typing import Any

__all__ = ["check_int", "is_integer"]


def is_integer(value: Any) -> bool:
    """True for an int or anything that converts to one exactly (``__index__``: numpy's integers); False for a bool
    (a flag is not a count) and for a float, even an integral one."""
    if isinstance(value, (bool, float)):
        return False
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def check_int(name: str, value: Any, lo: int, hi: int | None = None) -> int:
    """``value`` as an int when it is an integer (:func:`is_integer`) in ``lo..hi`` (``hi`` None: no upper bound);
    otherwise a ``ValueError`` that names ``name``, the value and the allowed range (``lo..hi``, or ``>= lo``)."""
    allowed = f">= {lo}" if hi is None else f"{lo}..{hi}"
    if not is_integer(value):
        raise ValueError(f"{name}: expected an integer, got {value!r} (allowed: {allowed})")
    number = operator.index(value)
    if number < lo or (hi is not None and number > hi):
        raise ValueError(f"{name}: value out of range: {number} (allowed: {allowed})")
    return number
