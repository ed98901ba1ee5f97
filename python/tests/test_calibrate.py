"""``alloclab calibrate``: a quick run writes a profile that loads back; only its structure is asserted."""

from __future__ import annotations

import tomllib

import pytest
from test_cli import alloclab

import alloclab as al
from alloclab import _core
from alloclab.calibrate import _OP_HOW, calibrate, to_toml

OPS = set(_core.op_names())  # the engine's op list (ALLOCLAB_OPS); test_machines.py pins it

# A line transfer and a wake-up need two PUs: a single-PU host cannot be calibrated (and says so).
pytestmark = pytest.mark.skipif(al.Topology.host().pus < 2, reason="calibration needs at least two host PUs")


def test_calibrate_quick_writes_a_profile_that_loads_back(tmp_path):
    out = tmp_path / "x.toml"
    run = alloclab("calibrate", "--quick", "--out", str(out), "--name", "here", "--description", "a test box")
    assert run.returncode == 0, run.stderr
    assert f"wrote {out}" in run.stderr
    m = al.machine(out)
    host = al.Topology.host()
    assert m.name == "here"
    assert m.seeds == []
    assert m.description.startswith("a test box. Calibrated with alloclab calibrate on ")
    assert "QUICK MODE" in m.description and "load average" in m.description
    assert (m.topology.pus, m.topology.cores, m.topology.nodes) == (host.pus, host.cores, host.nodes)
    values = m.values
    assert {k.split(".")[1] for k in values if k.startswith("op_cycles.")} == OPS
    assert {k.split(".")[1] for k in values if k.startswith("transfer_ns.")} == set(m.classes)
    assert {"clock.ghz", "wakeup_ns.futex", "bandwidth_gbs.node", "bandwidth_gbs.core"} <= set(values)
    assert {"page_ns.copy", "page_ns.clear"} <= set(values)
    for source in m.fields["source"]:
        assert source.startswith("calibrated on ") and " with alloclab calibrate on " in source


def test_calibrate_prints_the_profile_without_out():
    run = alloclab("calibrate", "--quick")
    assert run.returncode == 0, run.stderr
    doc = tomllib.loads(run.stdout)
    assert doc["schema"] == 1 and doc["name"] == "host"
    assert set(doc["op_cycles"]) == OPS


def test_to_toml_round_trips_strings_that_need_escaping():
    doc = calibrate(quick=True, name="x", description='a "quoted" box\\ with\ttabs and ünïcode')
    assert tomllib.loads(to_toml(doc)) == doc


def test_calibration_refuses_bad_pus():
    n = al.Topology.host().pus
    with pytest.raises(ValueError, match=rf"pu: {n} is not a host PU \(allowed: 0..{n - 1}\)"):
        _core.calibration.op_ns(n, 1, 10)
    with pytest.raises(ValueError, match="pu: a transfer needs two different PUs"):
        _core.calibration.transfer_ns(0, 0, 1, 1)
    with pytest.raises(ValueError, match=rf"pu: {n} is not a host PU"):
        _core.calibration.page_op_ns("copy", n, 1 << 20, 1)


def test_page_ops_refuse_bad_input():
    with pytest.raises(ValueError, match=r"op: invalid value 'move' \(allowed: one of 'copy', 'clear'\)"):
        _core.calibration.page_op_ns("move", 0, 1 << 20, 1)
    with pytest.raises(ValueError, match=r"bytes: 4096 bytes, 1 trials \(allowed: at least 8192 bytes and one trial\)"):
        _core.calibration.page_op_ns("clear", 0, 4096, 1)


def test_every_op_has_one_microbenchmark_and_one_description():
    measured = _core.calibration.op_ns(0, 1, 100)
    assert [op for op, _ in measured] == list(_core.op_names())  # every op, in list order
    assert all(ns > 0 for _, ns in measured)
    assert set(_OP_HOW) == OPS
