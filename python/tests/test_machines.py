"""Machine profiles: every shipped profile loads and validates, bad profiles name their field, distances, hashes."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

import alloclab as al
from alloclab import _core
from alloclab.machines import UNITS, profile_fields

# What each shipped profile must come out as: (CPUs, cores, NUMA nodes, distance classes).
SHIPPED = {
    "host": (2, 2, 1, ["same_llc"]),
    "xeon-gold-6252-2s": (48, 48, 2, ["same_llc", "remote"]),
    "generic-3node-zen1": (24, 24, 3, ["same_llc", "same_node", "remote"]),
    "assumed-epyc7763-2s-nps2": (256, 128, 4, ["same_core", "same_llc", "same_node", "remote", "remote_2hop"]),
    "assumed-xeon8358-2s-128t": (128, 64, 2, ["same_core", "same_llc", "remote"]),
    "xeon-8380-2s": (160, 80, 2, ["same_core", "same_llc", "remote"]),
    "xeon-8480-2s": (224, 112, 2, ["same_core", "same_llc", "remote"]),
    "nehalem-ex-4s-64t": (64, 32, 4, ["same_core", "same_llc", "remote"]),
    "assumed-xeon8490h-4s-snc2": (480, 240, 8, ["same_core", "same_llc", "remote", "remote_2hop"]),
}
SEEDS = [
    "pcp-refill-check-outside-lock",
    "cma-per-area-lock",
    "hugetlb-padata-parallel-init",
    "vmalloc-busy-lock-once",
    "shmem-prealloc-fault",
]
# The [op_cycles] fields: the engine's list (ALLOCLAB_OPS), pinned here because every profile must follow it.
OPS = ["atomic_rmw", "line_access", "list_op", "tree_step", "bitmap_word", "page_init", "pause", "clock_read"]


def shipped_text(name: str) -> str:
    with open(al.machine(name).path, encoding="utf-8") as f:
        return f.read()


def write(tmp_path, text: str):
    path = tmp_path / "p.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_machines_lists_every_shipped_profile():
    table = al.machines()
    assert list(table.columns) == ["name", "cpus", "cores", "nodes", "ghz", "seeds", "description", "hash"]
    assert sorted(table["name"]) == sorted(SHIPPED)
    for row in table.itertuples():
        assert (row.cpus, row.cores, row.nodes) == SHIPPED[row.name][:3], row.name
        assert row.ghz > 0 and len(row.hash) == 16
    seeds = {s for cell in table["seeds"] for s in cell.split(", ") if s}
    assert seeds == set(SEEDS)


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_profile_loads_with_its_topology_and_a_source_for_every_number(name):
    m = al.machine(name)
    cpus, cores, nodes, classes = SHIPPED[name]
    assert m.name == name  # the file's stem is the profile's name
    assert (m.topology.pus, m.topology.cores, m.topology.nodes) == (cpus, cores, nodes)
    assert m.classes == classes
    assert "numa:" in m.topology.description  # nodes are declared, never left to hwloc's default of one
    fields = m.fields
    assert list(fields.columns) == ["table", "field", "value", "unit", "source"]
    assert (fields["value"] > 0).all()
    assert all(len(s.strip()) > 20 for s in fields["source"])
    assert sorted(fields.loc[fields["table"] == "op_cycles", "field"]) == sorted(OPS)
    assert sorted(fields.loc[fields["table"] == "transfer_ns", "field"]) == sorted(classes)


def test_host_profile_is_a_calibration_of_this_project_machine():
    m = al.machine("host")
    assert m.description.startswith("2-vCPU VM")
    assert all(s.startswith("calibrated on ") and "with alloclab calibrate on " in s for s in m.fields["source"])


def test_op_list_matches_the_engine_and_the_readme():
    assert list(_core.op_names()) == OPS
    readme = (Path(al.machine("host").path).parent / "README.md").read_text(encoding="utf-8")
    table = readme.split("[op_cycles]", 1)[1].split("```", 1)[0]
    assert re.findall(r"^(\w+) = \{", table, re.MULTILINE) == OPS


def test_derived_op_cycles_are_the_host_calibration():
    # The rule "same cycles as measured on the host" must hold for every profile that cites it.
    host = al.machine("host")
    for name in SHIPPED:
        m = al.machine(name)
        for row in m.fields[m.fields["table"] == "op_cycles"].itertuples():
            if row.source.startswith("Derived by rule from the host profile"):
                assert row.value == host.value(f"op_cycles.{row.field}"), (name, row.field)


def test_no_profile_field_is_study_specific():
    # One profile serves every scenario: the schema's tables, nothing named after a study or a seed.
    tables = {
        "clock",
        "transfer_ns",
        "wakeup_ns",
        "bandwidth_gbs",
        "misses_in_flight",
        "cache_kib",
        "cache_mib",
        "cache_ns",
        "dram_ns",
        "page_ns",
        "op_cycles",
    }
    assert tables == set(UNITS)  # the tables machines.py shows units for are the schema's
    for name in SHIPPED:
        doc = tomllib.loads(shipped_text(name))
        assert {k for k, v in doc.items() if isinstance(v, dict)} <= tables, name


def test_distance_classes_of_a_two_socket_nps2_machine():
    m = al.machine("assumed-epyc7763-2s-nps2")  # 2 packages x 2 nodes x 4 L3 x 8 cores x 2 PUs
    assert m.distance(5, 5) == "same_pu" and m.transfer_ns(5, 5) == 0
    assert m.distance(0, 1) == "same_core"
    assert m.distance(0, 2) == "same_llc"
    assert m.distance(0, 16) == "same_node"
    assert m.distance(0, 64) == "remote"  # the other node of the same package
    assert m.distance(0, 128) == "remote_2hop"  # a node of the other package
    assert m.transfer_ns(0, 128) == m.value("transfer_ns.remote_2hop")
    assert m.transfer_ns(1, 0) == m.value("transfer_ns.same_core")
    with pytest.raises(ValueError, match=r"pu: 256 is not a PU of this topology \(allowed: 0..255\)"):
        m.distance(0, 256)


def test_distance_classes_across_sockets():
    m = al.machine("xeon-8380-2s")
    assert [m.distance(0, b) for b in (1, 2, 80, 159)] == ["same_core", "same_llc", "remote", "remote"]


def test_hash_is_stable_and_follows_the_numbers(tmp_path):
    text = shipped_text("xeon-8380-2s")
    m = al.machine("xeon-8380-2s")
    assert al.machine("xeon-8380-2s").hash == m.hash
    assert al.machine(write(tmp_path, text)).hash == m.hash  # a copy elsewhere: same content, same hash
    reworded = text.replace('name = "xeon-8380-2s"', 'name = "copy"')
    assert al.machine(write(tmp_path, reworded)).hash == m.hash
    changed = text.replace("remote = { value = 108.0,", "remote = { value = 109.0,")
    assert changed != text
    assert al.machine(write(tmp_path, changed)).hash != m.hash


def test_unknown_profile_lists_the_available_ones():
    with pytest.raises(ValueError, match=r"machine: unknown profile 'nope' \(available: .*xeon-8380-2s"):
        al.machine("nope")
    with pytest.raises(ValueError, match=r"machine: cannot read"):
        al.machine("/nonexistent/profile.toml")


BAD = [
    # (replace this, with this, error message prefix)
    ('name = "xeon-8380-2s"', 'name = "xeon-8380-2s', "machine: .* is not valid TOML"),
    ("[clock]\nghz = { value = 2.3,", "[clock]\nmhz = { value = 2.3,", "clock.mhz: unknown field"),
    ('ghz = { value = 2.3, source = "', 'ghz = { source = "', r"clock.ghz.value: missing"),
    ("same_llc = { value = 51.1,", "same_llc = { value = -51.1,", r"transfer_ns.same_llc: -51.1 is not allowed"),
    ("remote = { value = 108.0,", "remote = { value = 0,", r"transfer_ns.remote: 0 is not allowed"),
    ("node = { value = 160.1,", "node = { value = -1,", r"bandwidth_gbs.node: -1 is not allowed"),
    ("futex = { value = 6000,", "futex = { value = 0.0,", r"wakeup_ns.futex: 0 is not allowed"),
    ('topology = "package:2 numa:1 l3:1 core:40 pu:2"', 'topology = "package:2 numa:1 l3:1 core:400 pu:2"',
     r"topology: 'package:2 numa:1 l3:1 core:400 pu:2' has 1600 PUs and 2 NUMA nodes \(allowed: at most 512 PUs"),
    ('topology = "package:2 numa:1 l3:1 core:40 pu:2"', 'topology = "package:2 numa:9 l3:1 core:4 pu:2"',
     r"topology: .* has 144 PUs and 18 NUMA nodes \(allowed: at most 512 PUs and 16 nodes\)"),
    ('topology = "package:2 numa:1 l3:1 core:40 pu:2"', 'topology = "package:2 numa:1 l3:1 core:40 pu:1"',
     r"transfer_ns.same_core: not allowed: the topology has no two PUs at this distance"),
    ('topology = "package:2 numa:1 l3:1 core:40 pu:2"', 'topology = "package:2 banana:3"',
     "topology: malformed synthetic description"),
    ("schema = 1", "schema = 2", r"schema: 2 is not supported \(allowed: 1\)"),
    ("ghz = { value = 2.3,", "ghz = { value = true,", r"clock.ghz.value: expected a number or a string, got True"),
    ("ghz = { value = 2.3,", 'ghz = { value = "2.3",', r'clock.ghz.value: expected a number, got "2.3"'),
    ('seeds = ["vmalloc-busy-lock-once"]', 'seeds = "vmalloc-busy-lock-once"', "seeds: expected a list"),
]  # fmt: skip


@pytest.mark.parametrize(("old", "new", "error"), BAD)
def test_bad_profile_is_a_value_error_naming_the_field(tmp_path, old, new, error):
    text = shipped_text("xeon-8380-2s")
    assert old in text
    with pytest.raises(ValueError, match=error):
        al.machine(write(tmp_path, text.replace(old, new, 1)))


def test_incomplete_profile_names_the_missing_field(tmp_path):
    text = shipped_text("xeon-8380-2s")
    without_wakeup = re.sub(r"\[wakeup_ns\]\nfutex = \{[^\n]*\}\n", "", text)
    with pytest.raises(ValueError, match=r"wakeup_ns.futex: missing \(required: \{ value = <ns>"):
        al.machine(write(tmp_path, without_wakeup))


def test_profile_fields_flattens_by_type():
    text, numbers, seeds = profile_fields(
        {"schema": 1, "name": "x", "seeds": ["a"], "clock": {"ghz": {"value": 2, "source": "s"}}}
    )
    assert text == {"name": "x", "clock.ghz.source": "s"}
    assert numbers == {"schema": 1.0, "clock.ghz.value": 2.0}
    assert seeds == ["a"]
    with pytest.raises(ValueError, match=r"clock.ghz.value: expected a number or a string, got \[1\]"):
        profile_fields({"clock": {"ghz": {"value": [1]}}})


def test_machine_repr_and_values():
    m = al.machine("nehalem-ex-4s-64t")
    assert repr(m).startswith("Machine 'nehalem-ex-4s-64t': 64 CPUs, 32 cores, 4 NUMA nodes at 2.26 GHz")
    assert m.values["transfer_ns.remote"] == m.value("transfer_ns.remote") == 135.7
    assert m.ghz == 2.26
    assert m.seeds == ["shmem-prealloc-fault"]
    f = m.fields
    assert list(f.columns) == ["table", "field", "value", "unit", "source"] and len(f) == len(m.values)
    assert f.set_index(["table", "field"]).loc[("transfer_ns", "remote"), "value"] == 135.7
    with pytest.raises(ValueError, match="dram_ns.nope: not a number of profile 'nehalem-ex-4s-64t'"):
        m.value("dram_ns.nope")
