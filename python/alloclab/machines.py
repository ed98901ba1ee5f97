"""Machine profiles: the machines virtual time can simulate, with a source for every number.

A profile is a schema-1 TOML file (the schema is in ``alloclab/profiles/README.md``): a topology, the clock,
line-transfer latencies by distance, the futex wake-up latency, per-node and single-core bandwidth, and the cost of
each core-bound operation in cycles. The package ships one profile for this project's host and one for each seed
machine. :func:`machines` lists them. :func:`machine` loads one by name, or from a TOML file such as the one
``alloclab calibrate --out`` writes. The engine validates every field: a bad profile raises ``ValueError`` naming
the field.
"""

from __future__ import annotations

import os
import tomllib
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import pandas as pd

from . import _core
from ._forward import CoreAttr
from .topology import Topology

__all__ = ["Machine", "machine", "machines"]

#: The unit of each table's numbers, for display (``Machine.fields``) and in ``alloclab calibrate``'s sources.
UNITS = {
    "clock": "GHz",
    "transfer_ns": "ns",
    "wakeup_ns": "ns",
    "bandwidth_gbs": "GB/s",
    "misses_in_flight": "lines",
    "cache_kib": "KiB",
    "cache_mib": "MiB",
    "cache_ns": "ns",
    "dram_ns": "ns",
    "page_ns": "ns",
    "op_cycles": "cycles",
}


class Machine:
    """A validated machine profile. Get one from :func:`machine`.

    The numbers are in :attr:`values` (and :attr:`fields` as a table, each with its source). :meth:`distance` and
    :meth:`transfer_ns` classify a pair of the topology's PUs the way virtual time charges line transfers.
    """

    def __init__(self, core: _core.MachineProfile, path: str):
        self._core = core
        self._path = path

    name = CoreAttr[str]("The profile's name (a shipped profile's name is its file's stem).")

    description = CoreAttr[str]("What machine this is and how it was identified.")

    @property
    def seeds(self) -> list[str]:
        """The seed patches whose machine this profile describes (file stems under ``shared/seeds``)."""
        return list(self._core.seeds)

    @property
    def path(self) -> str:
        """The TOML file the profile was read from."""
        return self._path

    @property
    def topology(self) -> Topology:
        """The machine's topology (a synthetic hwloc topology)."""
        return Topology(self._core.topology)

    topology_source = CoreAttr[str]("Where the topology comes from.")

    hash = CoreAttr[str](
        "16 hex digits naming the topology and the numbers (not the names or sources), the same on every host."
    )

    @property
    def ghz(self) -> float:
        """The clock rate (GHz) that converts ``op_cycles`` to time."""
        return self._core.value("clock.ghz")

    @property
    def classes(self) -> list[str]:
        """The line-transfer distance classes the topology has, nearest first."""
        return list(self._core.classes)

    @property
    def values(self) -> dict[str, float]:
        """Every number by ``"table.field"`` (``"transfer_ns.remote"``, ``"op_cycles.list_op"``, ...)."""
        return dict(self._core.values)

    @property
    def fields(self) -> pd.DataFrame:
        """One row per number: ``table, field, value, unit, source``."""
        sources = self._core.sources
        rows = []
        for key, value in self._core.values.items():
            table, field = key.split(".", 1)
            rows.append((table, field, value, UNITS.get(table, ""), sources[key]))
        return pd.DataFrame(rows, columns=["table", "field", "value", "unit", "source"])

    def value(self, key: str) -> float:
        """One number, e.g. ``value("wakeup_ns.futex")``.

        Raises:
            ValueError: the profile has no such number.
        """
        return self._core.value(key)

    def distance(self, a: int, b: int) -> str:
        """Distance class between model PUs ``a`` and ``b``: ``same_pu``, ``same_core``, ``same_llc``,
        ``same_node``, ``remote`` or ``remote_2hop``.

        Raises:
            ValueError: a PU outside the topology.
        """
        return self._core.distance(a, b)

    def transfer_ns(self, a: int, b: int) -> float:
        """One-way line-transfer latency (ns) from PU ``a`` to PU ``b`` (0 for the same PU).

        Raises:
            ValueError: a PU outside the topology.
        """
        return self._core.transfer_ns(a, b)

    def __repr__(self) -> str:
        topo = self._core.topology
        return (
            f"Machine {self.name!r}: {topo.pus} CPUs, {topo.cores} cores, {topo.nodes} NUMA nodes at {self.ghz:g} GHz "
            f"({self._core.topology.description}); hash {self.hash}\n  {self.description}"
        )


def machine(profile: str | os.PathLike) -> Machine:
    """Load and validate a machine profile.

    Args:
        profile: the name of a shipped profile (see :func:`machines`), or the path of a TOML file (a name ending in
            ``.toml`` or any ``os.PathLike``).

    Raises:
        ValueError: an unknown name, a file that cannot be read or is not TOML, or a profile the engine refuses
            (the message names the field, its value and what is allowed).
    """
    if isinstance(profile, os.PathLike) or str(profile).endswith(".toml"):
        path = Path(profile)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"machine: cannot read {str(path)!r}: {exc}") from None
        return _load(text, str(path))
    if not isinstance(profile, str):
        raise ValueError(f"machine: expected a profile name or a path, got {profile!r}")
    shipped = _shipped()
    if profile not in shipped:
        names = sorted(shipped)
        raise ValueError(
            f"machine: unknown profile {profile!r} (available: {', '.join(names)})" + _core.did_you_mean(profile, names)
        )
    return _load(shipped[profile].read_text(encoding="utf-8"), str(shipped[profile]))


def machines() -> pd.DataFrame:
    """The shipped machine profiles, one row each.

    Returns:
        A DataFrame with ``name, cpus, cores, nodes, ghz, seeds`` (comma-separated seed patches), ``description``
        and ``hash``, sorted by name.
    """
    rows = []
    for name in sorted(_shipped()):
        m = machine(name)
        topo = m.topology
        rows.append((m.name, topo.pus, topo.cores, topo.nodes, m.ghz, ", ".join(m.seeds), m.description, m.hash))
    return pd.DataFrame(rows, columns=["name", "cpus", "cores", "nodes", "ghz", "seeds", "description", "hash"])


def profile_fields(doc: dict[str, Any]) -> tuple[dict[str, str], dict[str, float], list[str]]:
    """Flatten a parsed profile into what the engine validates: ``(text, numbers, seeds)``.

    Every leaf goes under its dotted key (``clock.ghz.value``), in ``text`` if it is a string and in ``numbers`` if
    it is a number. The engine then checks names, types, presence and values.

    Raises:
        ValueError: ``seeds`` is not a list of strings, or a leaf is neither a number nor a string.
    """
    text: dict[str, str] = {}
    numbers: dict[str, float] = {}
    seeds = doc.get("seeds", [])
    if not isinstance(seeds, list) or not all(isinstance(s, str) for s in seeds):
        raise ValueError(f"seeds: expected a list of seed patch names, got {seeds!r}")

    def walk(prefix: str, table: dict[str, Any]) -> None:
        for key, value in table.items():
            dotted = f"{prefix}{key}"
            if not prefix and key == "seeds":
                continue
            if isinstance(value, dict):
                walk(dotted + ".", value)
            elif isinstance(value, str):
                text[dotted] = value
            elif isinstance(value, int | float) and not isinstance(value, bool):
                numbers[dotted] = float(value)
            else:
                raise ValueError(f"{dotted}: expected a number or a string, got {value!r}")

    walk("", doc)
    return text, numbers, list(seeds)


def _load(text: str, where: str) -> Machine:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"machine: {where!r} is not valid TOML ({exc})") from None
    return Machine(_core.MachineProfile(*profile_fields(doc)), where)


def _shipped() -> dict[str, Traversable]:
    folder = resources.files("alloclab") / "profiles"
    return {p.name.removesuffix(".toml"): p for p in folder.iterdir() if p.name.endswith(".toml")}
