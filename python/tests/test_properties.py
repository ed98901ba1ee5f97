"""Properties over every scenario (hypothesis): random parameters either run or raise a ValueError that names them.

For every scenario in ``al.scenarios()`` (new scenarios are covered without touching this file), hypothesis draws
parameter sets from each parameter's declared type, range and choices, biased toward small values and mixed with
the range's extremes, defaults, out-of-range and wrong-type values, random synthetic topologies, placements, lock
kinds and seeds. Each example runs in this process with a short ``timeout_s`` and must either

* return a valid result: a summary, one row per worker, lock_stat rows with ``contentions <= acquisitions``,
  slots that follow the topology mapping, the seed in the provenance, and (when the run was not stopped) every
  ``*_exact`` figure True and every ``check`` figure starting with ``ok``;
  the scenario's own invariant checks run inside the engine after every run and a violation comes back as
  ``RuntimeError``, which fails the property like any other exception type; or
* raise ``ValueError`` whose message starts with a parameter name of the scenario (or the unknown name given), or
  ``memory:``, ``topology:``, ``placement:``, ``locks``, ``seed:``, ``timeout_s:``.

A crash kills pytest (it is the failure); a run that does not come back within ``HANG_S`` seconds is interrupted
and reported as a hang. Default: a few examples per scenario with a fixed seed (``derandomize``), so CI always
runs the same ones. ``ALLOCLAB_LONG=1``: 200 random examples per scenario, with shrinking.
"""

from __future__ import annotations

import _thread
import math
import os
import threading
from collections import Counter
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from scenario_params import names, small_params, specs

import alloclab as al

LONG = os.environ.get("ALLOCLAB_LONG", "").strip().lower() in {"1", "true", "yes", "on"}
EXAMPLES = 200 if LONG else 8
TIMEOUT_S = 2.0
HANG_S = 180.0  # a run that takes this long past its 2 s timeout is a hang (a guard, not a speed check)
SMALL = 8  # integers are drawn mostly from [min, min + SMALL]

SCENARIOS = names()
HOST = al.Topology.host()
LOCK_CLASSES = al.lock_classes()["class"].tolist()
LOCK_KINDS = al.lock_kinds()["kind"].tolist()
UNKNOWN = "no_such_parameter"
OTHER_PREFIXES = ("memory:", "topology:", "placement:", "locks", "seed:", "timeout_s:")

SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not LONG,
    database=None,
    print_blob=True,
    phases=(Phase.explicit, Phase.generate, Phase.shrink) if LONG else (Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def weighted(*choices: tuple[int, st.SearchStrategy]) -> st.SearchStrategy:
    """Pick one of the strategies with the given integer weights (the first is what shrinking goes to)."""
    pool = [s for w, s in choices for _ in range(w)]
    return st.sampled_from(pool).flatmap(lambda s: s)


def in_range(spec: dict[str, Any]) -> st.SearchStrategy:
    kind, default = spec["type"], spec["default"]
    if kind == "int":
        lo, hi = spec["min"], spec["max"]
        return weighted(
            (6, st.integers(lo, min(hi, lo + SMALL))), (2, st.just(default)), (1, st.sampled_from([lo, hi]))
        )
    if kind == "float":
        lo, hi = spec["min"], spec["max"]
        return weighted((4, st.floats(lo, hi)), (2, st.just(default)), (1, st.sampled_from([lo, hi])))
    if kind == "bool":
        return st.booleans()
    if kind == "choice":
        return st.sampled_from(spec["choices"])
    return st.just(default)


def hostile_values(spec: dict[str, Any]) -> list[Any]:
    """Values a parameter must refuse: out of its range, of the wrong type, or not one of its choices."""
    kind = spec["type"]
    common: list[Any] = [None, [1], {"a": 1}]
    if kind == "int":
        lo, hi = spec["min"], spec["max"]
        out = [hi + 1, 2**64, -(2**64), 1.5, math.nan, "zz", str(lo), True]
        return common + ([lo - 1] if lo > -(2**63) else []) + out
    if kind == "float":
        lo, hi = spec["min"], spec["max"]
        return common + [lo - abs(lo) - 1.0, hi + abs(hi) + 1.0, math.nan, math.inf, -math.inf, "zz"]
    if kind == "bool":
        return common + [2, "zz", 0.5]
    if kind == "choice":
        return common + ["zz-not-a-choice", 3, ""]
    return common


@st.composite
def run_arguments(draw: st.DrawFn, scenario: str) -> dict[str, Any]:
    """One call of ``al.run(scenario, **args)``: a small valid set with a few parameters drawn (three examples in
    four) or every parameter drawn; in a quarter of the examples one parameter gets a hostile value."""
    sp = specs(scenario)
    params = small_params(scenario)
    if draw(weighted((3, st.just(False)), (1, st.just(True))), label="draw every parameter"):
        chosen = [s["parameter"] for s in sp]
    else:
        chosen = draw(st.lists(st.sampled_from([s["parameter"] for s in sp]), unique=True, max_size=4))
    for spec in sp:
        if spec["parameter"] in chosen:
            params[spec["parameter"]] = draw(in_range(spec), label=spec["parameter"])
    if draw(st.integers(0, 3)) == 0:  # a quarter of the examples: one hostile value (or an unknown name)
        names = [s["parameter"] for s in sp] + [UNKNOWN]
        name = draw(st.sampled_from(names))
        spec = next((s for s in sp if s["parameter"] == name), {"type": "int", "min": 0, "max": 1})
        params[name] = draw(st.sampled_from(hostile_values(spec)))
    topology = draw(
        weighted(
            (4, st.none()),
            (5, st.builds("node:{} core:{} pu:{}".format, st.integers(1, 4), st.integers(1, 3), st.integers(1, 2))),
            (1, st.sampled_from(["node:0 core:1 pu:1", "node:2", "garbage", "node:64 core:64 pu:2"])),
        )
    )
    n = params.get("threads") if isinstance(params.get("threads"), int) else 1
    placement = draw(
        weighted(
            (6, st.sampled_from(["compact", "scatter"])),
            (2, st.lists(st.integers(0, 7), min_size=min(max(n, 1), 16), max_size=min(max(n, 1), 16))),
            (1, st.sampled_from(["everywhere", [], [-1], [2**40]])),
        )
    )
    locks = draw(
        weighted(
            (6, st.just({})),
            (3, st.dictionaries(st.sampled_from(LOCK_CLASSES), st.sampled_from(LOCK_KINDS), max_size=2)),
            (1, st.sampled_from([{"no_such_class": "spin"}, {LOCK_CLASSES[-1]: "no_such_kind"}])),
        )
    )
    seed = draw(weighted((8, st.integers(0, 2**32)), (1, st.sampled_from([2**63 - 1, -1, 2**64]))))
    return {
        "params": params,
        "topology": topology,
        "placement": placement,
        "locks": locks,
        "seed": seed,
        "lockstat": draw(weighted((4, st.just(True)), (1, st.just(False)))),
    }


def run_guarded(scenario: str, args: dict[str, Any]) -> al.RunResult:
    """``al.run`` with a watchdog: a run that does not return within HANG_S is interrupted and reported."""
    fired = threading.Event()
    done = threading.Event()

    def interrupt() -> None:
        if not done.is_set():
            fired.set()
            _thread.interrupt_main()

    watchdog = threading.Timer(HANG_S, interrupt)
    watchdog.start()
    try:
        return al.run(
            scenario,
            args["topology"],
            placement=args["placement"],
            locks=args["locks"],
            seed=args["seed"],
            lockstat=args["lockstat"],
            timeout_s=TIMEOUT_S,
            **args["params"],
        )
    except KeyboardInterrupt:
        if fired.is_set():
            raise AssertionError(f"hang: {scenario} did not return {HANG_S:.0f} s after its start: {args}") from None
        raise
    finally:
        done.set()
        watchdog.cancel()
        watchdog.join()


def check_result(scenario: str, args: dict[str, Any], r: al.RunResult) -> None:
    assert r.scenario == scenario
    if r.stop_reason.endswith("during set-up (no worker ran)"):  # a slow set-up on a busy machine
        assert r.workers.empty and r.summary.empty
        return
    assert isinstance(r.summary, pd.Series) and len(r.summary) > 0, "no summary"
    assert r.provenance["seed"] == args["seed"]
    assert r.stopped == bool(r.stop_reason)
    if r.stopped:
        assert r.stop_reason.startswith("timeout"), r.stop_reason
    w = r.workers
    assert len(w) == r.provenance["workers"]
    if len(w):
        assert (w["model_node"] == [topology_of(args).node_of_pu(int(p)) for p in w["model_pu"]]).all()
        assert (w["host_pu"] == w["model_pu"] % HOST.pus).all()
        assert (w["host_node"] == w["model_node"] % HOST.nodes).all()
    ls = r.lockstat
    if len(ls):
        assert (ls["contentions"] <= ls["acquisitions"]).all(), ls[["class", "contentions", "acquisitions"]]
    if not r.stopped:
        for key, value in r.summary.items():
            checked = r.summary.get(str(key).removesuffix("_exact") + "_checked", True)
            if str(key).endswith("_exact") and isinstance(value, bool) and checked:
                assert value, f"{key} is False: {r.summary.to_dict()}"
            if (key == "check" or str(key).endswith("_check")) and isinstance(value, str):
                assert value.startswith("ok"), f"{key}: {value}"


_topologies: dict[Any, al.Topology] = {}


def topology_of(args: dict[str, Any]) -> al.Topology:
    key = args["topology"]
    if key not in _topologies:
        _topologies[key] = HOST if key is None else al.Topology.synthetic(key)
    return _topologies[key]


def check_error(scenario: str, args: dict[str, Any], exc: ValueError) -> None:
    message = str(exc)
    names = [s["parameter"] for s in specs(scenario)] + [n for n in args["params"] if n == UNKNOWN]
    named = any(message.startswith(f"{n}:") for n in names) or message.startswith(OTHER_PREFIXES)
    assert named, f"ValueError that names no parameter: {message!r}"


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_random_parameters_run_or_raise_a_value_error_naming_one(scenario):
    outcomes: Counter[str] = Counter()
    small = {"params": small_params(scenario), "topology": None, "placement": "compact", "locks": {}, "seed": 1}

    @SETTINGS
    @example(args={**small, "lockstat": True})  # at least one valid run, whatever the draws
    @given(args=run_arguments(scenario))
    def prop(args: dict[str, Any]) -> None:
        try:
            r = run_guarded(scenario, args)
        except ValueError as exc:
            outcomes[f"ValueError {str(exc).split(':')[0]}"] += 1
            check_error(scenario, args, exc)
        else:
            outcomes["stopped by its timeout" if r.stopped else "ran"] += 1
            check_result(scenario, args, r)

    prop()
    print(f"{scenario}: {dict(outcomes)}")  # pytest -s shows what the examples did
    assert outcomes["ran"] + outcomes["stopped by its timeout"] >= 1


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_hostile_value_of_every_parameter_is_refused_by_name(scenario):
    """One parameter at a time (the others at their defaults), every value it must refuse."""
    wrong = []
    for spec in specs(scenario):
        name = spec["parameter"]
        for value in hostile_values(spec):
            try:
                al.run(scenario, timeout_s=TIMEOUT_S, **{name: value})
            except ValueError as exc:
                if not str(exc).startswith(f"{name}:"):
                    wrong.append(f"{name}={value!r}: ValueError not naming it: {exc}")
            except Exception as exc:  # the point of the test: report every other outcome, not the first
                wrong.append(f"{name}={value!r}: {type(exc).__name__}: {exc}")
            else:
                wrong.append(f"{name}={value!r}: accepted")
    with pytest.raises(ValueError, match=f"^{UNKNOWN}:"):
        al.run(scenario, timeout_s=TIMEOUT_S, **{UNKNOWN: 1})
    assert not wrong, "\n".join(wrong)


@SETTINGS
@given(nodes=st.integers(0, 6), cores=st.integers(0, 5), pus=st.integers(0, 3))
def test_random_synthetic_topologies_are_consistent_or_refused(nodes, cores, pus):
    description = f"node:{nodes} core:{cores} pu:{pus}"
    try:
        topo = al.Topology.synthetic(description)
    except ValueError as exc:
        assert str(exc).startswith("topology:"), exc
        assert 0 in (nodes, cores, pus), f"{description} refused: {exc}"
        return
    assert (topo.nodes, topo.cores, topo.pus) == (nodes, nodes * cores, nodes * cores * pus)
    for node in range(nodes):
        members = topo.pus_of_node(node)
        assert len(members) == cores * pus
        assert all(topo.node_of_pu(p) == node for p in members)


@SETTINGS
@given(
    nodes=st.integers(1, 4),
    cores=st.integers(1, 3),
    placement=st.lists(st.integers(-1, 12), min_size=0, max_size=6),
    threads=st.integers(1, 6),
)
def test_explicit_placements_put_each_worker_on_its_model_pu_or_are_refused(nodes, cores, placement, threads):
    topo = al.Topology.synthetic(f"node:{nodes} core:{cores} pu:1")
    try:
        r = al.run("lock_zoo", topo, placement=placement, threads=threads, iterations=20, timeout_s=TIMEOUT_S)
    except ValueError as exc:
        assert str(exc).startswith("placement:"), exc
        assert len(placement) != threads or any(not 0 <= p < topo.pus for p in placement), exc
        return
    assert r.workers["model_pu"].tolist() == placement
    assert r.workers["model_node"].tolist() == [topo.node_of_pu(p) for p in placement]
    assert r.workers["host_pu"].tolist() == [p % HOST.pus for p in placement]
    assert r.lockstat["acquisitions"].sum() == threads * 20
