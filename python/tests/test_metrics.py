"""al.metrics: every figure a scenario emits is documented with a unit and a meaning, and every documented figure is
emitted (so the table cannot drift from the engine); al.scenarios/al.metrics filter by name; sizes read as sizes; the
CLI's tables fit a terminal."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from scenario_params import names, small_params

import alloclab as al
from alloclab import cli
from alloclab._catalogue import human_size
from alloclab._units import PARAMETER_SIZES, SIZE_UNITS

#: Runs beside each scenario's small one that reach the figures only some runs emit (the meaning says when).
VARIANTS: dict[str, list[dict]] = {
    "hugetlb_boot": [{"gigantic": True, "pages": 2}, {"node_mib": 64, "nodes": 1}],  # 1 GiB folios; a pool run out
}


def _runs(scenario: str, clock: str) -> list[al.RunResult]:
    options = {"clock": "virtual", "machine": "xeon-8380-2s"} if clock == "virtual" else {}
    return [
        al.run(scenario, **options, **{**small_params(scenario), **extra})
        for extra in [{}, *VARIANTS.get(scenario, [])]
    ]


def _pattern(metric: str) -> re.Pattern[str]:
    return re.compile(re.escape(metric).replace(re.escape("<i>"), r"[1-9][0-9]*") + "$")


@pytest.mark.parametrize("clock", ["real", "virtual"])
@pytest.mark.parametrize("scenario", names())
def test_every_emitted_figure_is_documented_and_every_documented_one_is_emitted(scenario, clock):
    documented = al.metrics(scenario)
    assert set(documented["scenario"]) == {scenario}
    assert documented["unit"].str.len().gt(0).all() and documented["meaning"].str.len().gt(5).all()
    assert not documented.duplicated(["level", "metric"]).any()
    runs = _runs(scenario, clock)
    for level, emitted in (
        ("summary", [list(r.summary.index) for r in runs]),
        ("worker", [list(r.workers.columns) for r in runs]),
    ):
        declared = documented.loc[documented["level"] == level, "metric"].tolist()
        patterns = {m: _pattern(m) for m in declared}
        seen: set[str] = set()
        for columns in emitted:
            for col in columns:
                match = [m for m, p in patterns.items() if p.match(col)]
                assert match, f"{scenario} ({clock}): {level} figure {col!r} is not documented in al.metrics"
                seen.update(match)
        assert seen == set(declared), f"{scenario} ({clock}): documented, never emitted: {set(declared) - seen}"


def test_the_issue_example_reads_as_written():
    row = al.metrics("lock_zoo").set_index("metric").loc["fairness_max_min"]
    assert row["level"] == "summary" and row["unit"] == "ratio"
    assert row["meaning"].startswith("max/min of the per-worker acquisitions") and "1 = fair" in row["meaning"]
    workers = al.metrics("lock_zoo").query("level == 'worker'").set_index("metric")
    assert workers.loc["elapsed_s", "unit"] == "s"
    assert workers.loc["elapsed_s", "meaning"] == "s, its own span: end_s - start_s"  # the engine's own words


@pytest.mark.parametrize("table", [al.scenarios, al.metrics])
def test_a_name_or_a_list_filters_and_an_unknown_name_suggests(table):
    assert set(table("lock_zoo")["scenario"]) == {"lock_zoo"}
    both = table(["page_alloc", "lock_zoo"])
    assert list(dict.fromkeys(both["scenario"])) == ["page_alloc", "lock_zoo"]  # in the order asked
    assert list(dict.fromkeys(table()["scenario"])) == names()
    with pytest.raises(
        ValueError, match=r"^names: unknown scenario 'lock_zo' \(available: .*\); did you mean 'lock_zoo"
    ):
        table("lock_zo")
    with pytest.raises(ValueError, match=r"^names: unknown scenario 'nope'"):
        table(["lock_zoo", "nope"])


def test_sizes_read_in_binary_units():
    assert human_size(2**45, "bytes") == "32 TiB"
    assert human_size(131072, "pages") == "512 MiB"
    assert human_size(2621440, "pages") == "10 GiB"
    assert human_size(16384, "bytes") == "16 KiB"
    assert human_size(1536, "bytes") == "1.5 KiB"
    assert human_size(1000, "bytes") == "1000 B"
    assert human_size(3, "MiB") == "3 MiB"
    with pytest.raises(ValueError, match=r"^unit: expected one of 'bytes', 'KiB', 'MiB', 'pages', got 'pages4k'"):
        human_size(1, "pages4k")


def test_every_size_parameter_is_an_integer_parameter_of_its_scenario():
    table = al.scenarios().set_index(["scenario", "parameter"])
    for (scenario, parameter), unit in PARAMETER_SIZES.items():
        assert (scenario, parameter) in table.index, (scenario, parameter)
        assert table.loc[(scenario, parameter), "type"] == "int" and unit in SIZE_UNITS
        assert table.loc[(scenario, parameter), "size_unit"] == unit
    assert table["size_unit"].notna().sum() == len(PARAMETER_SIZES)


def test_fit_wraps_the_named_columns_into_the_width():
    table = pd.DataFrame({"name": ["a", "bb"], "doc": ["one two three four five six", "short"]})
    assert cli._fit(table, ["doc"], width=26, indent=2) == (
        "  name  doc\n"
        "  a     one two three four\n"
        "        five six\n"
        "  bb    short"
    )  # fmt: skip


@pytest.mark.parametrize("columns", [80, 100, 160])
def test_cli_scenarios_fit_the_terminal(capsys, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    for name in names():
        assert cli.main(["scenarios", name]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert max(len(line) for line in lines) <= columns, max(lines, key=len)


def test_cli_scenarios_show_sizes_and_whole_docs(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert cli.main(["scenarios", "vmalloc_stress"]) == 0
    out = capsys.readouterr().out
    assert re.search(
        r"\n   vmalloc_size +int +35184372088832 \(32 TiB\) +65536\.\.35184372088832 \(up to 32 TiB\) ", out
    )
    assert re.search(r"\n   size +int +16384 \(16 KiB\) +1\.\.1073741824 \(up to 1 GiB\) ", out)
    assert re.search(r"\n   ops +int +100000 +1\.\.1000000000 ", out)  # not a size: no unit beside it
    lines = out.splitlines()
    doc = al.scenarios("vmalloc_stress").set_index("parameter").loc["clone_ns", "doc"]
    start = next(i for i, line in enumerate(lines) if line.startswith("   clone_ns "))
    column = lines[start].index(doc.split()[0])
    words = lines[start][column:].split()
    for line in lines[start + 1 :]:
        if not line.startswith("    "):  # the next parameter's row (names start in column 3) or the end
            break
        words += line[column:].split()
    assert len(lines[start + 1]) > column and " ".join(words) == " ".join(doc.split())  # wrapped, whole, at spaces


def test_cli_metrics_lists_each_level(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert cli.main(["metrics", "lock_zoo"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 100
    assert "lock_zoo: r.summary (one value per run)" in out and "lock_zoo: r.workers (per worker)" in out
    assert re.search(r"fairness_max_min +ratio +max/min of the per-worker", out)
    assert cli.main(["metrics", "lock_zo"]) == 1
    assert "did you mean 'lock_zoo'" in capsys.readouterr().err
