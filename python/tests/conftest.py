"""Shared fixtures: the two clocks an exact-count test runs under.

A test that takes ``clock`` runs twice: ``real`` (pinned host threads on the model topology) and ``virtual`` (the
same workers as virtual CPUs of a profile whose topology is the model topology). ``on(clock, topology)`` gives the
run options of either. The virtual machine has the host profile's costs; its extra distance classes get made-up
transfer figures, which is fine here: these tests check counts and invariants, which must not depend on timing.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

import alloclab as al
from alloclab.machines import Machine, _load

CLOCKS = ["real", "virtual"]
_machines: dict[str, Machine] = {}


def machine_like(topology: str) -> Machine:
    """The host profile moved onto the synthetic ``topology``: one transfer figure per distance class it has."""
    if topology in _machines:
        return _machines[topology]
    doc = tomllib.loads((resources.files("alloclab") / "profiles" / "host.toml").read_text(encoding="utf-8"))
    base = doc["transfer_ns"]["same_llc"]["value"]
    classes = ["same_core", "same_llc", "same_node", "remote", "remote_2hop"]
    transfer = {c: {"value": base * 2**i, "source": "a test"} for i, c in enumerate(classes)}
    dram = {k: v for k, v in doc.get("dram_ns", {}).items() if k != "remote"}
    while True:  # the engine names each class the topology lacks; drop it and load again
        text = _toml(doc | {"topology": topology, "transfer_ns": transfer, "dram_ns": dram})
        try:
            m = _load(text, f"test profile of {topology!r}")
            break
        except ValueError as exc:
            found = re.search(r"transfer_ns\.(\w+): not allowed", str(exc))
            if not found:
                raise
            del transfer[found.group(1)]
    _machines[topology] = m
    return m


def on(clock: str, topology: str | None = None) -> dict[str, Any]:
    """Run options for ``clock`` on the model ``topology`` (a synthetic string; None: the host's)."""
    if clock == "real":
        return {"topology": al.Topology.synthetic(topology)} if topology else {}
    return {"clock": "virtual", "machine": machine_like(topology) if topology else "host"}


@pytest.fixture(params=CLOCKS)
def clock(request: pytest.FixtureRequest) -> str:
    """``"real"`` then ``"virtual"``."""
    return request.param


def _toml(doc: dict[str, Any]) -> str:
    lines, tables = [], []
    for key, value in doc.items():
        (tables if isinstance(value, dict) else lines).append((key, value))
    out = [f"{k} = {_value(v)}" for k, v in lines]
    for name, table in tables:
        out.append(f"[{name}]")
        out += [f"{k} = {_value(v)}" for k, v in table.items()]
    return "\n".join(out) + "\n"


def _value(v: Any) -> str:
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(v)


def cli_command() -> list[str]:
    """The ``alloclab`` console script, or ``python -m alloclab.cli`` where it is not installed."""
    script = Path(sys.executable).with_name("alloclab")
    return [str(script)] if script.exists() else [sys.executable, "-m", "alloclab.cli"]


def interrupt_cli(args: list[str], out: Path, gaps_s: Sequence[float] = ()) -> tuple[int, str]:
    """Run :func:`cli_command` with ``args``, wait (up to minutes, never asserted) for its first run to be saved in
    ``out``, then press Ctrl-C: one SIGINT, and one more after each gap in ``gaps_s``. Returns the exit
    status and what it wrote to stderr."""
    proc = subprocess.Popen([*cli_command(), *args], stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(6000):
            if (out / "meta.json").exists() or proc.poll() is not None:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        for gap_s in gaps_s:
            time.sleep(gap_s)
            proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err
