"""hwloc 2 XML topologies for tests: a machine of packages, each with one NUMA node and its PUs, written as hwloc's
own exporter writes them (zero words of a cpuset left empty between commas)."""

from __future__ import annotations


def cpuset(bits: list[int]) -> str:
    """hwloc's bitmap text: 32-bit words, most significant first, zero words empty ("0x80000000,,0x0" style)."""
    if not bits:
        return "0x0"
    words = [0] * (max(bits) // 32 + 1)
    for b in bits:
        words[b // 32] |= 1 << (b % 32)
    return ",".join(f"0x{w:08x}" if w else "" for w in reversed(words)).rstrip(",") or "0x0"


def machine_xml(pus_per_package: list[int], *, remove: tuple[int, ...] = ()) -> str:
    """A machine with one package and one NUMA node per entry, holding that many PUs, numbered from 0; the PU objects
    numbered in `remove` are left out (the cpusets still hold them, as in an exported XML edited by hand)."""

    def sets(cpus: list[int], nodes: list[int]) -> str:
        return (
            f'cpuset="{cpuset(cpus)}" complete_cpuset="{cpuset(cpus)}" '
            f'nodeset="{cpuset(nodes)}" complete_nodeset="{cpuset(nodes)}"'
        )

    total = sum(pus_per_package)
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
        '<topology version="2.0">',
        f'<object type="Machine" os_index="0" {sets(list(range(total)), list(range(len(pus_per_package))))}>',
    ]
    first = 0
    for node, n in enumerate(pus_per_package):
        cpus = list(range(first, first + n))
        lines.append(f'<object type="Package" os_index="{node}" {sets(cpus, [node])}>')
        lines.append(f'<object type="NUMANode" os_index="{node}" {sets(cpus, [node])} local_memory="1073741824"/>')
        lines += [f'<object type="PU" os_index="{p}" {sets([p], [node])}/>' for p in cpus if p not in remove]
        lines.append("</object>")
        first += n
    lines += ["</object>", "</topology>"]
    return "\n".join(lines) + "\n"
