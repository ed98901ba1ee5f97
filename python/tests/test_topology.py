"""Topologies and placement as Python sees them."""

import pytest

import alloclab as al


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
    with pytest.raises(ValueError, match="at most 4096"):
        al.Topology.synthetic("node:100000 pu:100000")


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
