"""al.plot.projected: a seed study's claim as published/virtual lines and real points, checked on the Figure object
(lines, labels, styles, the real-cell tally), and the projected.png that reproduce() writes and the report shows."""

from __future__ import annotations

import sys
import textwrap

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import alloclab as al  # noqa: E402
from alloclab import report, studies  # noqa: E402


def _pcp_like() -> pd.DataFrame:
    """A projected table shaped like pcp_refill's: keys order x threads, two ns figures and the claim's ratio (the
    real one as comparison findings: a significant ratio, an n.s., and configurations the host could not run)."""
    return pd.DataFrame(
        {
            "order": [0, 0, 9, 9, 9],
            "threads": [1, 2, 1, 2, 24],
            "published_default_ns": [127.0, 140.0, 2790.0, 6685.0, 90226.0],
            "virtual_default_ns": [120.0, 150.0, 2500.0, 5000.0, 80000.0],
            "real_default_ns": [300.0, 310.0, 4000.0, 4100.0, np.nan],
            "published_patch_over_default": [0.98, 1.0, 0.99, 0.52, 0.097],
            "virtual_patch_over_default": [1.0, 1.0, 1.0, 0.6, 0.1],
            "real_patch_over_default": ["n.s. (p=0.4)", "1.01x (p=0.03)", "baseline", "0.62x (p=0.008)", np.nan],
            "real_note": ["", "", "", "", "not run: 24 workers on 2 host PUs would be oversubscribed"],
        }
    )


def _lines(ax) -> dict[str, matplotlib.lines.Line2D]:
    return {line.get_label(): line for line in ax.get_lines()}


def test_published_and_virtual_are_lines_real_are_points_per_colour_key():
    fig = al.plot.projected({"patch_vs_default": _pcp_like()})
    assert isinstance(fig, Figure)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in axes] == ["patch_vs_default: claim: patch_over_default",
                                               "patch_vs_default: default_ns"]  # fmt: skip
    claim, ns = axes
    lines = _lines(claim)
    drawn = {k for k in lines if not k.startswith("_")}
    assert drawn == {f"{s} order={o}" for s in ("published", "virtual", "real") for o in (0, 9)}
    assert lines["published order=9"].get_linestyle() == "-" and lines["virtual order=9"].get_linestyle() == "--"
    assert lines["real order=9"].get_linestyle() == "None"  # points, no line
    assert list(lines["published order=9"].get_xdata()) == [1, 2, 24]
    assert list(lines["virtual order=9"].get_ydata()) == [1.0, 0.6, 0.1]
    # real: only findings are drawn (0.62x at 2 threads; "baseline" and the oversubscribed point are not)
    assert list(lines["real order=9"].get_xdata()) == [2] and list(lines["real order=9"].get_ydata()) == [0.62]
    assert list(lines["real order=0"].get_xdata()) == [2]  # the n.s. at 1 thread is not drawn
    assert [(t.get_xdata()[0], t.get_ydata()[0]) for t in claim.get_lines() if t.get_label().startswith("_")] == [
        (0, 1.0)
    ]  # the line at ratio 1 (axhline: x in axes coordinates)
    tally = [t.get_text() for t in claim.texts]
    assert tally == ["real: 2 drawn, 1 n.s. (not drawn), 1 not run here"]
    assert claim.get_xlabel() == "threads" and claim.get_ylabel() == "patch over default"
    assert ns.get_yscale() == "log"  # 120 ns to 90,000 ns: drawn in µs, the unit of the largest
    assert ns.get_ylabel() == "default (µs)"
    assert list(_lines(ns)["real order=9"].get_ydata()) == [4.0, 4.1]


def test_a_table_without_a_numeric_key_gets_its_machines_as_categories():
    head = pd.DataFrame({"machine": ["256c2T(4 node)", "128c1T(2 node)"], "published_saved_pct": [68.52, 63.15],
                         "virtual_saved_pct": [70.0, 60.0], "real_saved_pct": [np.nan, np.nan],
                         "real_note": ["not run: 8 workers on 2 host PUs would be oversubscribed"] * 2})  # fmt: skip
    fig = al.plot.projected(head, title="headline")
    (ax,) = [a for a in fig.axes if a.get_visible()]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["256c2T(4 node)", "128c1T(2 node)"]
    lines = _lines(ax)
    assert set(lines) == {"published", "virtual"}  # no real point: the host cannot run them
    assert all(line.get_linestyle() == "None" for line in lines.values())  # categories are not joined
    assert fig.get_suptitle() == "headline" and ax.get_title() == "projected: claim: saved_pct"


def test_virtual_findings_are_drawn_by_their_number_and_n_s_is_tallied():
    # Virtual cells over seeds are findings like the real ones: a ratio or a share when significant, else n.s.
    table = _pcp_like().assign(virtual_patch_over_default=["n.s. (p=1)", "0.958x (p=0.0079)", "n.s. (p=1)",
                                                           "0.53x (p=0.0079)", "0.0997x (p=0.0079)"])  # fmt: skip
    claim = next(ax for ax in al.plot.projected(table).axes if ax.get_visible())
    lines = _lines(claim)
    assert list(lines["virtual order=9"].get_xdata()) == [2, 24]
    assert list(lines["virtual order=9"].get_ydata()) == [0.53, 0.0997]
    assert [t.get_text() for t in claim.texts] == [
        "real: 2 drawn, 1 n.s. (not drawn), 1 not run here; virtual: 2 n.s. (not drawn)"
    ]
    # A configuration the full-size real sweep ran oversubscribed has no real figure, and the tally says why.
    table["real_note"] = ["", "", "", "", "oversubscribed: 24 workers on 2 host PUs, no figure (its runs are ...)"]
    claim = next(ax for ax in al.plot.projected(table).axes if ax.get_visible())
    assert [t.get_text() for t in claim.texts] == [
        "real: 2 drawn, 1 n.s. (not drawn), 0 not run here, 1 oversubscribed (no figure); virtual: 2 n.s. (not drawn)"
    ]
    head = pd.DataFrame({"machine": ["a", "b"], "published_saved_pct": [68.52, 63.15],
                         "virtual_saved_pct": ["80.17 % (p=0.0079)", "n.s. (p=0.31)"],
                         "real_saved_pct": [np.nan, np.nan]})  # fmt: skip
    (ax,) = [a for a in al.plot.projected(head).axes if a.get_visible()]
    assert list(_lines(ax)["virtual"].get_ydata()) == [80.17]


def test_several_tables_are_rows_of_one_figure_and_x_can_be_chosen():
    multiplier = pd.DataFrame({"case": ["2T", "2T"], "multiplier": [1, 2], "published_ms": [979.0, 679.0],
                               "virtual_ms": [900.0, 600.0], "real_ms": [np.nan, np.nan],
                               "real_note": ["not run here"] * 2})  # fmt: skip
    fig = al.plot.projected({"a": _pcp_like(), "b": multiplier}, x={"a": "order"})
    titles = [a.get_title() for a in fig.axes if a.get_visible()]
    assert titles == ["a: claim: patch_over_default", "a: default_ns", "b: ms"]
    assert set(_lines(fig.axes[0])) >= {"published threads=1", "virtual threads=24"}  # hue: the other key


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="tables: \\['nope'\\] not among the projected tables \\(t\\)"):
        al.plot.projected({"t": _pcp_like()}, tables=["nope"])
    with pytest.raises(ValueError, match="x: 'cores' is not a key column of t \\(keys: order, threads\\)"):
        al.plot.projected({"t": _pcp_like()}, x="cores")
    with pytest.raises(ValueError, match="study_result: expected a StudyResult"):
        al.plot.projected(42)
    with pytest.raises(ValueError, match="tables: \\[\\] not among"):
        al.plot.projected(studies.StudyResult(table=pd.DataFrame()))
    text_only = pd.DataFrame({"k": [1], "published_f": ["7 / 14"], "virtual_f": ["a"], "real_f": ["b"]})
    with pytest.raises(ValueError, match="t: a projected table needs key columns and a numeric figure"):
        al.plot.projected({"t": text_only})


FAKE = '''
"""A fake seed study with a projected table."""
from pathlib import Path

import pandas as pd

from alloclab.studies import StudyResult, projected

NAME = "fake_projected"
SCENARIOS = ()
SEED = "fake-seed"


def run(quick: bool, out_dir: Path, progress: bool) -> StudyResult:
    pub = pd.DataFrame({"threads": [1, 4], "ratio": [1.0, 0.5]})
    virt = pd.DataFrame({"threads": [1, 2, 4], "ratio": [1.0, 0.8, 0.55]})
    real = pd.DataFrame({"threads": [1], "ratio": ["0.97x (p=0.01)"]})
    table = projected(["threads"], published=pub, virtual=virt, real=real, workers=lambda row: 10**6)
    return StudyResult(table=virt, projected={"speedup": table})
'''


@pytest.fixture
def fake_study(tmp_path, monkeypatch):
    (tmp_path / "fake_projected.py").write_text(textwrap.dedent(FAKE))
    monkeypatch.setattr(studies, "__path__", [*studies.__path__, str(tmp_path)])
    yield
    sys.modules.pop("alloclab.studies.fake_projected", None)


def test_reproduce_writes_the_projected_figure_first_and_the_report_shows_it_with_its_table(fake_study, tmp_path):
    out = tmp_path / "results"
    done = studies.reproduce("fake_projected", quick=True, out=out, progress=False)
    assert done.result.plots[0] == done.out_dir / studies.PROJECTED_PLOT and done.result.plots[0].is_file()
    meta = al.results.load(done.out_dir).meta["study"]
    assert meta["plots"] == ["projected.png"] and meta["projected"] == {"speedup": "projected_speedup.parquet"}
    page = report.build(out).read_text(encoding="utf-8")
    assert "The seed's claim, <b>speedup</b>" in page and page.count("<img ") == 1
    assert page.index("<b>speedup</b>") < page.index("real_note") < page.index("<img ")  # the claim's table, its figure


def test_each_study_gets_a_progress_bar_against_its_estimate_only_when_asked(fake_study, capsys):
    study = studies.find("fake_projected")
    with studies.study_bar(study, quick=True, enabled=False):
        pass
    assert capsys.readouterr().err == ""
    with studies.study_bar(study, quick=True, enabled=True):
        pass
    assert "fake_projected (no estimate)" in capsys.readouterr().err  # no ESTIMATED_S: the bar counts seconds
    timed = studies.Study(**{**study.__dict__, "estimated_s": {"quick": 3.0, "full": None}})
    with studies.study_bar(timed, quick=True, enabled=True):
        pass
    err = capsys.readouterr().err
    assert "fake_projected (estimated): 100%" in err and "of ~3 s" in err  # done: the bar is full
