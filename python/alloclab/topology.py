"""Model and host topologies (hwloc): :class:`Topology`."""

from __future__ import annotations

import functools
import hashlib
import json
import os

from . import _core
from ._forward import CoreAttr

__all__ = ["Topology"]


class Topology:
    """A machine as an experiment sees it: the host, a synthetic description, or an hwloc XML file.

    Model PU ``p`` runs on host PU ``p % host.pus`` and model node ``n`` keeps its memory on host node
    ``n % host.nodes``. Build one with :meth:`host`, :meth:`synthetic` or :meth:`from_xml`.
    """

    def __init__(self, core: _core.Topology):
        self._core = core

    @classmethod
    def host(cls) -> Topology:
        """The machine this process runs on."""
        return cls(_core.Topology.host())

    @classmethod
    def synthetic(cls, description: str) -> Topology:
        """A synthetic machine in hwloc's syntax.

        Args:
            description: e.g. ``"node:4 core:2 pu:1"`` (4 NUMA nodes of 2 single-threaded cores).

        Raises:
            ValueError: the description is malformed, or describes more than 4096 PUs (the product of its level
                arities, typed or bare, checked before anything is built).
        """
        if not isinstance(description, str):
            raise ValueError(f"topology: expected a synthetic description string, got {description!r}")
        return cls(_core.Topology.synthetic(description))

    @classmethod
    def from_xml(cls, path: str | os.PathLike) -> Topology:
        """A machine exported by ``lstopo file.xml`` on another host.

        Args:
            path: the XML file: a regular file of at most 64 MiB (a FIFO or a device is refused, never read).

        Raises:
            ValueError: the file cannot be read as an hwloc topology, or describes a machine no run can use: no PUs,
                more than 4096 PUs or NUMA nodes (counted in the text before hwloc parses it), or a NUMA node or
                package without PUs.
        """
        if not isinstance(path, (str, os.PathLike)):
            raise ValueError(f"topology: expected the path of an XML file, got {path!r}")
        return cls(_core.Topology.from_xml(os.fspath(path)))

    nodes = CoreAttr[int]("Number of NUMA nodes.")

    pus = CoreAttr[int]("Number of processing units (hardware threads).")

    cores = CoreAttr[int]("Number of cores.")

    source = CoreAttr[str]('``"host"``, ``"synthetic"`` or ``"xml"``.')

    description = CoreAttr[str]('``"host"``, the synthetic string, or the XML path.')

    @functools.cached_property
    def digest(self) -> str:
        """A digest of what the model uses of this machine: its cores and which PUs each NUMA node holds.

        Two topologies with the same digest give the same runs, whatever their source (a synthetic string, an XML
        file and its path, the host); a sweep's resume matches its topology by this digest, not by its path.
        """
        shape = [self.cores, [self.pus_of_node(n) for n in range(self.nodes)]]
        return hashlib.sha256(json.dumps(shape, separators=(",", ":")).encode()).hexdigest()[:16]

    def pus_of_node(self, node: int) -> list[int]:
        """Logical indices of the PUs of NUMA node ``node``.

        Args:
            node: a node index, ``0 <= node < nodes``.

        Raises:
            ValueError: no such node.
        """
        return list(self._core.pus_of_node(node))

    def node_of_pu(self, pu: int) -> int:
        """The NUMA node of PU ``pu`` (a logical index, ``0 <= pu < pus``)."""
        return self._core.node_of_pu(pu)

    def __repr__(self) -> str:
        return self._core.tree()
