"""Topologies and placement as Python sees them; model machines no run can use are refused at load, quickly."""

import os
import subprocess
import sys
import textwrap

import pytest
from hwloc_xml import machine_xml

import alloclab as al

CHILD_TIMEOUT_S = 60  # a refusal takes milliseconds; a regression hangs (or crashes) the child, never pytest


def child(code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter (a crash or hang there fails the test instead of killing pytest)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=CHILD_TIMEOUT_S
    )


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "alloclab.cli", *args], capture_output=True, text=True, timeout=CHILD_TIMEOUT_S
    )


def test_synthetic_counts_and_tree():
    t = al.Topology.synthetic("node:4 core:2 pu:1")
    assert (t.nodes, t.pus, t.cores) == (4, 8, 8)
    assert t.pus_of_node(1) == [2, 3]
    assert t.node_of_pu(5) == 2
    assert t.source == "synthetic"
    assert repr(t).splitlines()[0] == 'Machine (synthetic "node:4 core:2 pu:1"): 4 nodes, 8 cores, 8 PUs'
    assert repr(t).splitlines()[4] == "  NUMANode L#3: PU L#6-7"


def test_host_has_at_least_one_node_and_pu():
    h = al.Topology.host()
    assert h.nodes >= 1 and h.pus >= 1
    assert sum(len(h.pus_of_node(n)) for n in range(h.nodes)) == h.pus


@pytest.mark.parametrize("bad", ["", "node:4 banana:2", "node:x"])
def test_malformed_synthetic_raises_value_error(bad):
    with pytest.raises(ValueError, match="topology: malformed synthetic description"):
        al.Topology.synthetic(bad)


def test_huge_synthetic_is_refused_before_building():
    with pytest.raises(ValueError, match="more than 4096 PUs"):
        al.Topology.synthetic("node:100000 pu:100000")


@pytest.mark.parametrize("description", ["8 8 8 16", "100 100 100", "node:2 0x1000 pu:1"])
def test_bare_arities_count_towards_the_cap(description):
    """Levels without a type count as much as typed ones; a million PUs is refused at once (in a child, so that a
    regression that builds them hangs the child, not the suite)."""
    out = child(f"""
        import alloclab as al
        try:
            al.Topology.synthetic({description!r})
        except ValueError as exc:
            print(exc)
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"topology: synthetic description {description!r} has more than 4096 PUs")


def test_a_topology_without_pus_is_refused_and_runs_never_see_it(tmp_path):
    """The reproducer: an XML whose PU objects are removed used to load ("0 PUs"); lock_zoo then died of SIGFPE and
    hugetlb_boot of a double free. Now the CLI refuses it by name, exit status 1, for every scenario."""
    zero = tmp_path / "zero_pu.xml"
    zero.write_text(machine_xml([2, 2], remove=(0, 1, 2, 3)))
    with pytest.raises(ValueError, match="^topology: XML topology .* has no PUs"):
        al.Topology.from_xml(zero)
    for scenario, params in (("lock_zoo", ["threads=1", "iterations=10"]), ("hugetlb_boot", ["pages=8"])):
        out = cli("run", scenario, *params, "--topology", str(zero))
        assert out.returncode == 1, (scenario, out.returncode, out.stderr)
        assert "topology: XML topology" in out.stderr and "has no PUs" in out.stderr


@pytest.mark.parametrize("remove", [(0, 1), (2, 3, 4)])
def test_a_node_or_package_without_pus_is_refused(tmp_path, remove):
    path = tmp_path / "half.xml"
    path.write_text(machine_xml([2, 3], remove=remove))
    with pytest.raises(ValueError, match="^topology: .* L#[01] without PUs"):
        al.Topology.from_xml(path)
    path.write_text(machine_xml([2, 3]))
    t = al.Topology.from_xml(path)
    assert (t.nodes, t.pus, t.pus_of_node(1)) == (2, 5, [2, 3, 4])


def test_an_xml_of_65536_pus_is_refused_before_hwloc_builds_it(tmp_path):
    path = tmp_path / "big.xml"
    pus = "".join(f'<object type="PU" os_index="{i}"/>\n' for i in range(65536))
    path.write_text(
        f'<?xml version="1.0"?>\n<topology version="2.0">\n<object type="Machine">\n{pus}</object>\n</topology>\n'
    )
    out = child(f"""
        import alloclab as al
        try:
            al.Topology.from_xml({str(path)!r})
        except ValueError as exc:
            print(exc)
    """)
    assert out.returncode == 0, out.stderr
    assert "has 65536 PUs and 0 NUMA nodes (allowed: at most 4096 of each)" in out.stdout


def test_only_regular_files_of_bounded_size_are_read(tmp_path):
    """A FIFO used to block forever and /dev/zero was read until memory ran out; a file above 64 MiB is refused
    without being read (this one is sparse)."""
    fifo = tmp_path / "topo.xml"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.xml"
    with open(huge, "wb") as f:
        f.truncate((64 << 20) + 1)
    out = child(f"""
        import alloclab as al
        for path in ({str(fifo)!r}, "/dev/zero", {str(huge)!r}, {str(tmp_path)!r}):
            try:
                al.Topology.from_xml(path)
            except ValueError as exc:
                print(exc)
    """)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 4, out.stdout
    assert lines[0].endswith("(not a regular file: a FIFO)")
    assert lines[1].endswith("(not a regular file: a character device)")
    assert lines[2].endswith("(67108865 bytes, allowed: at most 67108864, 64 MiB)")
    assert lines[3].endswith("(not a regular file: a directory)")


def test_bad_node_index_names_the_parameter():
    with pytest.raises(ValueError, match="node: 4 is not a node"):
        al.Topology.synthetic("node:4 pu:1").pus_of_node(4)


def test_xml_missing_file_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="cannot load XML topology"):
        al.Topology.from_xml(tmp_path / "nope.xml")


def test_placement_compact_scatter_and_list():
    t = al.Topology.synthetic("node:4 core:2 pu:1")
    kw = dict(topology=t, threads=4, iterations=10)
    compact = al.run("lock_zoo", placement="compact", **kw).workers
    assert list(compact.model_pu) == [0, 1, 2, 3]
    assert list(compact.model_node) == [0, 0, 1, 1]
    scatter = al.run("lock_zoo", placement="scatter", **kw).workers
    assert list(scatter.model_pu) == [0, 2, 4, 6]
    assert list(scatter.model_node) == [0, 1, 2, 3]
    explicit = al.run("lock_zoo", placement=[7, 6, 5, 4], **kw).workers
    assert list(explicit.model_node) == [3, 3, 2, 2]
    host_pus = al.Topology.host().pus
    assert list(explicit.host_pu) == [p % host_pus for p in (7, 6, 5, 4)]


def test_oversubscription_is_reported():
    host_pus = al.Topology.host().pus
    r = al.run("lock_zoo", threads=host_pus + 1, iterations=10)
    assert r.provenance["oversubscribed"] is True
    assert r.provenance["workers"] == host_pus + 1
    assert r.provenance["oversubscribed_why"] == f"{host_pus + 1} workers on {host_pus} host PU(s)"
    # One worker on its own PU is oversubscribed only by what happened on the host (never by its placement).
    r = al.run("lock_zoo", threads=1, iterations=10)
    assert r.provenance["oversubscribed"] is bool(r.provenance["oversubscribed_why"])
    assert "host PU(s)" not in r.provenance["oversubscribed_why"]


@pytest.mark.parametrize("placement", ["spread", [0, 99], [0]])
def test_bad_placement_names_the_parameter(placement):
    with pytest.raises(ValueError, match="placement"):
        al.run("lock_zoo", topology=al.Topology.synthetic("node:2 pu:2"), threads=2, placement=placement)
