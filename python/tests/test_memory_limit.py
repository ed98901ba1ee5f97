"""A run that needs more memory than the machine has fails at once, before allocating, with both figures.

Generic over ``al.scenarios()``: for each scenario, every integer size parameter (a name containing ``pages``,
``size``, ``count``, ``mib`` or ``bytes``) is set to its declared maximum (or, when the scenario refuses that value
for its granularity, the maximum rounded down to a multiple of 512 or of 2**20), with one worker and the other
parameters at their defaults. A refusal must read ``memory: this run needs X (detail) but only Y are available;
...`` with X > Y, and the process must not have grown by more than a few hundred MiB (nothing was allocated). A
scenario is *covered* when at least one of its size parameters reaches that check; a scenario none of whose
maxima exceed the memory available (or whose maxima are all refused by another named check) is skipped with the
outcome of each parameter. Run ``pytest -rs`` to see which scenarios were covered and why others were skipped.
"""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
import textwrap

import pytest
from scenario_params import WORKER_PARAMS, names, specs

import alloclab as al

SCENARIOS = names()
SIZE_WORDS = ("pages", "size", "count", "mib", "bytes")
FIGURE = r"([0-9]+(?:\.[0-9]+)?) ((?:[KMGTPE]i)?B)"
MEMORY_MESSAGE = re.compile(rf"^memory: this run needs {FIGURE}.* but only {FIGURE} are available")
UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50, "EiB": 2**60}
GROWTH_LIMIT_MIB = 512  # a refused run allocates (almost) nothing; a run that allocated first would grow by GiBs


def size_params(scenario: str) -> list[dict]:
    return [s for s in specs(scenario) if s["type"] == "int" and any(w in s["parameter"] for w in SIZE_WORDS)]


def candidates(hi: int) -> list[int]:
    out = [hi]
    for step in (512, 2**20):
        v = hi - hi % step
        if v > 0 and v not in out:
            out.append(v)
    return out


def max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def parse_bytes(number: str, unit: str) -> float:
    return float(number) * UNITS[unit]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_run_that_does_not_fit_fails_at_once_with_both_figures(scenario):
    sizes = size_params(scenario)
    if not sizes:
        pytest.skip(f"{scenario}: no integer size parameter (a name with {', '.join(SIZE_WORDS)})")
    base = {s["parameter"]: max(s["min"], 1) for s in specs(scenario) if s["parameter"] in WORKER_PARAMS}
    covered: list[str] = []
    outcomes: list[str] = []
    for spec in sizes:
        name = spec["parameter"]
        for value in candidates(spec["max"]):
            before = max_rss_mib()
            try:
                r = al.run(scenario, timeout_s=2.0, **{**base, name: value})
            except ValueError as exc:
                message = str(exc)
                if message.startswith("memory:"):
                    match = MEMORY_MESSAGE.match(message)
                    assert match, f"{name}={value}: the memory message lacks a figure: {message}"
                    need, available = parse_bytes(*match.group(1, 2)), parse_bytes(*match.group(3, 4))
                    assert need > available, message
                    assert max_rss_mib() - before < GROWTH_LIMIT_MIB, f"{name}={value} allocated before failing"
                    covered.append(f"{name}={value}")
                    break
                assert not re.search(r"\bavailable\b|host memory", message), (
                    f"{name}={value}: a memory refusal must start with 'memory:' and give both figures: {message}"
                )
                outcomes.append(f"{name}={value}: refused by another check: {message}")
                if not message.startswith(f"{name}:"):
                    break  # another parameter's rule; a rounder value will not change that
            else:
                outcomes.append(f"{name}={value}: fits in the memory available (the run {r.stop_reason or 'ended'})")
                break
    print(f"{scenario}: memory check reached by {covered or 'none'}; {outcomes}")
    if not covered:
        pytest.skip(f"{scenario}: no size parameter at its maximum reaches the memory check: {'; '.join(outcomes)}")


def test_the_memory_figures_are_the_machine_s():
    """16 TiB of frames on one node is refused by the memory check, and 'available' is a figure of this machine
    (positive, at most its MemTotal)."""
    scenario = next(
        (s for s in SCENARIOS for spec in size_params(s) if spec["parameter"] == "node_pages"),
        None,
    )
    if scenario is None:
        pytest.skip("no scenario with a node_pages parameter")
    with open("/proc/meminfo") as f:
        meminfo = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f}
    with pytest.raises(ValueError, match="^memory: ") as info:
        al.run(scenario, node_pages=2**32 - 2**20, timeout_s=2.0)  # 16 TiB of frames
    match = MEMORY_MESSAGE.match(str(info.value))
    assert match, str(info.value)
    available = parse_bytes(*match.group(3, 4))
    assert 0 < available <= meminfo["MemTotal"]


def _child(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=600)


def test_ulimit_v_is_seen_before_threads_or_memory_are_taken():
    """The reproducer: under ``ulimit -v`` large runs died as MemoryError("std::bad_alloc") or "could not start worker
    153 of 1024". The address space left (RLIMIT_AS minus what is mapped) must hold the run and a stack per worker;
    the refusal names both figures and why. In a child: the limit stays there."""
    out = _child("""
        import resource, alloclab as al
        with open("/proc/self/status") as f:
            mapped = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
        limit = mapped + (768 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        for scenario, params in (("lock_zoo", dict(threads=1024, iterations=10)),
                                 ("hugetlb_boot", dict(pages=1 << 15)),
                                 ("vmalloc_stress", dict(threads=4, live=1_000_000, ops=1_000_000))):
            try:
                al.run(scenario, **params)
                print(scenario, "ran")
            except Exception as exc:
                print(scenario, type(exc).__name__, exc)
        print("small", int(al.run("lock_zoo", threads=2, iterations=10).workers["ops"].sum()))
    """)
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert lines["lock_zoo"].startswith("ValueError memory: this run needs 8.0 GiB (1024 worker stacks of ")
    assert "(address space: ulimit -v " in lines["lock_zoo"]
    for scenario in ("hugetlb_boot", "vmalloc_stress"):
        assert MEMORY_MESSAGE.match(lines[scenario].removeprefix("ValueError ")), lines[scenario]
        assert "address space" in lines[scenario]
    assert lines["small"] == "20"


def test_vmalloc_live_areas_count():
    """The reproducer: 4 workers x 1e6 live areas took 582 MiB that no check counted, and 1024 x 1e6 would have
    reached the OOM killer. The areas, their vm_structs and free-tree fragments are declared now."""
    with pytest.raises(ValueError, match=r"^memory: this run needs .* \(up to \d+ vmap areas "):
        al.run("vmalloc_stress", threads=1024, live=1_000_000, ops=1_000_000)
    r = al.run("vmalloc_stress", threads=4, live=100_000, ops=100_000)
    assert r.provenance["memory_needed"] >= 4 * 100_000 * 2 * 64  # a busy area and its fragment, at least 64 B each


# One configuration per scenario that allocates a few hundred MiB (every kind of structure it has).
FOOTPRINT = {
    "lock_zoo": dict(threads=64, iterations=1000, locks_n=65536),
    "pcp_refill": dict(threads=2, order=0, count=1 << 21),
    "page_alloc": dict(threads=2, node_pages=1 << 22, share=0.9, pattern="rand", iterations=1000),
    "vmalloc_stress": dict(threads=4, live=200_000, ops=200_000, map_pages=True, node_pages=1 << 20),
    "hugetlb_boot": dict(pages=8192),
    "shmem_fault": dict(threads=2, pages_per_thread=1 << 20, backing="none"),
    "cma_concurrent": dict(regions=2, pages_per_region=1 << 19, backing="none"),
}
SLACK_MIB = 48  # the interpreter's own growth while it runs and converts a result


def test_every_scenario_has_a_footprint_configuration():
    assert set(FOOTPRINT) == set(SCENARIOS)


@pytest.mark.parametrize("scenario", sorted(FOOTPRINT))
def test_a_run_declares_what_it_allocates(scenario):
    """What a run declares before allocating (provenance "memory_needed", the figure the memory check compared)
    covers what it then really kept resident: the child's peak RSS grows by no more than that (and a little slack)."""
    out = _child(f"""
        import json, resource, alloclab as al
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        r = al.run({scenario!r}, **{FOOTPRINT[scenario]!r})
        grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
        print(json.dumps([r.provenance["memory_needed"], grew]))
    """)
    assert out.returncode == 0, out.stderr
    declared, grew = json.loads(out.stdout.splitlines()[-1])
    assert grew <= declared * 1.1 + SLACK_MIB * 2**20, f"declared {declared >> 20} MiB, grew {grew >> 20} MiB"
