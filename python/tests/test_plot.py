"""al.plot on the Agg backend: each function returns an Axes drawing the right numbers and writes a PNG; the
conventions of the field are asserted on the Figure objects (units on the axes, the interval and n in the legend,
the provenance footer, annotations, the 1/hold ceiling), never on pixels."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import alloclab as al  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def _no_show(monkeypatch):
    def refuse(*_args, **_kwargs):
        raise AssertionError("plot functions must not call show()")

    monkeypatch.setattr(plt, "show", refuse)
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def detail() -> al.SweepResult:
    return al.sweep("lock_zoo", grid={"lock": ["spin", "mutex"], "threads": [1, 2, 3]}, repeats=2, progress=False,
                    detail=True, iterations=200)  # fmt: skip


def _png(ax, path) -> None:
    al.plot.savefig(ax, path)
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 1000


def test_scaling_draws_medians_and_the_linear_reference(tmp_path):
    df = pd.DataFrame(
        {
            "threads": [1, 1, 1, 2, 2, 2, 4, 4, 4],
            "ops": [10, 11, 12, 15, 16, 17, 18, 19, 20],
            "status": ["ok"] * 9,
            "oversubscribed": [False] * 6 + [True] * 3,
        }
    )
    ax = al.plot.scaling(df, x="threads", y="ops")
    assert isinstance(ax, matplotlib.axes.Axes)
    lines = {line.get_label(): line for line in ax.get_lines()}
    ref = lines["ideal (linear)"]
    assert list(ref.get_xdata()) == [1, 2, 4]
    assert list(ref.get_ydata()) == [11, 22, 44]
    medians = [line for line in ax.get_lines() if list(line.get_ydata()) == [11, 16, 19]]
    assert medians, "the median line is drawn"
    assert any("oversubscribed" in p.get_label() for p in ax.patches)
    _png(ax, tmp_path / "scaling.png")

    ax = al.plot.scaling(df, x="threads", y="ops", reference="inverse")
    ref = next(line for line in ax.get_lines() if line.get_label() == "ideal (inverse)")
    assert list(ref.get_ydata()) == [11, 5.5, 2.75]


def test_scaling_with_hue_on_a_real_sweep(tmp_path, detail):
    ax = al.plot.scaling(detail.runs, x="threads", y="acquisitions_per_s", hue="lock", logy=True)
    legend = ax.get_legend()
    labels = [t.get_text() for t in legend.get_texts()]
    assert "spin" in labels and "mutex" in labels
    assert legend.get_title().get_text() == "lock (median, IQR, n=2)"
    _png(ax, tmp_path / "scaling_hue.png")
    with pytest.raises(ValueError, match="numeric"):
        al.plot.scaling(detail.runs, x="lock", y="acquisitions_per_s")


def test_workers_bars(tmp_path, detail):
    two = detail.workers[detail.workers["threads"] == 2]
    ax = al.plot.workers(two, y="ops", by="lock")
    heights = [p.get_height() for p in ax.patches]
    assert heights == [200.0] * 4  # 2 workers x 2 locks, each worker did 200 ops
    _png(ax, tmp_path / "workers.png")
    r = al.run("lock_zoo", threads=2, iterations=100)
    ax = al.plot.workers(r, y="ops")
    assert [p.get_height() for p in ax.patches] == [100.0, 100.0]


def test_heatmap_shows_the_pivot(tmp_path):
    df = pd.DataFrame({"threads": [1, 2, 1, 2, 1], "mult": [1, 1, 2, 2, 2], "t_ms": [1.0, 2.0, 3.0, 4.0, 5.0]})
    ax = al.plot.heatmap(df, x="threads", y="mult", value="t_ms")
    mesh = ax.collections[0].get_array()
    np.testing.assert_array_equal(np.asarray(mesh).reshape(2, 2), [[1.0, 2.0], [4.0, 4.0]])  # median of 3 and 5
    assert sorted(t.get_text() for t in ax.texts) == ["1", "2", "4", "4"]
    assert ax.collections[0].colorbar.ax.get_ylabel() == "t (ms)\nmedian, n=1-2"
    _png(ax, tmp_path / "heatmap.png")


def test_lockstat_bars_wait_beside_hold(tmp_path, detail):
    table = pd.DataFrame(
        {
            "class": ["zone->lock", "pcp->lock"],
            "waittime_total_ns": [3000.0, 100.0],
            "holdtime_total_ns": [1000.0, 500.0],
        }
    )
    ax = al.plot.lockstat(table)
    widths = [p.get_width() for p in ax.patches]
    assert widths == [3.0, 0.1, 1.0, 0.5]  # µs: wait bars, then hold bars
    assert ax.get_xlabel() == "total time (µs)"
    assert ax.get_legend().get_title().get_text() == "lock_stat (single value, n=1)"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["zone->lock", "pcp->lock"]
    _png(ax, tmp_path / "lockstat.png")
    ax = al.plot.lockstat(detail, by="lock", stat="avg")
    assert len(ax.get_yticklabels()) == 2
    _png(ax, tmp_path / "lockstat_sweep.png")
    with pytest.raises(ValueError, match="stat"):
        al.plot.lockstat(table, stat="median")


def test_plots_draw_on_a_given_axes():
    fig, ax = plt.subplots()
    df = pd.DataFrame({"threads": [1, 2], "y": [1.0, 2.0]})
    assert al.plot.scaling(df, y="y", ax=ax) is ax


def _footer(ax) -> str:
    texts = [t for t in ax.figure.findobj(matplotlib.text.Text) if t.get_gid() == al.plot.FOOTER_GID]
    assert len(texts) == 1, "exactly one provenance footer"
    return texts[0].get_text()


def test_a_sweep_plot_has_units_the_interval_and_its_provenance(detail):
    ax = al.plot.scaling(detail.runs, x="threads", y="acquisitions_per_s", hue="lock")
    assert ax.get_ylabel().startswith("acquisitions per second (") and ax.get_ylabel().endswith("/s)")
    assert ax.get_xlabel() == "threads"
    text = _footer(ax)
    sha = al.results.environment()["git_sha"]
    assert f"git {sha[:10]}" in text and f"host {detail.meta['provenance']['hostname']}" in text
    assert "clock real" in text and "repeats 2" in text and ("quick" in text or "full" in text)
    assert "ideal (linear)" in [t.get_text() for t in ax.get_legend().get_texts()]
    ax = al.plot.workers(detail.workers, y="elapsed_s", by="lock", provenance={"quick": True})
    assert ax.get_ylabel() in ("elapsed (ns)", "elapsed (µs)", "elapsed (ms)", "elapsed (s)")
    assert ax.get_legend().get_title().get_text().startswith("lock (median, IQR, n=")
    assert " · quick · " in _footer(ax)
    ax = al.plot.lockstat(detail, by="lock")
    # every run (3 thread counts x 2 repeats) has a lock_stat row per class: 6 per bar
    assert ax.get_legend().get_title().get_text() == "lock_stat (median, IQR, n=6)"


def test_the_units_follow_the_magnitude():
    df = pd.DataFrame({"threads": [1, 2], "ops_per_s": [2.5e6, 4e6], "ns_per_alloc": [800.0, 2500.0]})
    ax = al.plot.scaling(df, y="ops_per_s")
    assert ax.get_ylabel() == "ops per second (Mops/s)"
    assert [list(line.get_ydata()) for line in ax.get_lines()][:1] == [[2.5, 4.0]]
    ax = al.plot.scaling(df, y="ns_per_alloc", reference="inverse")
    assert ax.get_ylabel() == "time per alloc (µs)"
    ref = next(line for line in ax.get_lines() if line.get_label() == "ideal (inverse)")
    assert list(ref.get_ydata()) == [0.8, 0.4]
    holds = pd.DataFrame({"hold_ns": [500, 2000], "ops_per_s": [1e6, 5e5]})
    ax = al.plot.scaling(holds, x="hold_ns", y="ops_per_s", reference=None)
    assert ax.get_xlabel() == "hold (µs)" and list(ax.get_lines()[0].get_xdata()) == [0.5, 2.0]
    ax = al.plot.heatmap(holds.assign(lock="spin"), x="hold_ns", y="lock", value="ops_per_s")
    assert ax.get_xlabel() == "hold (ns)"  # a heatmap's ticks are the values as stored
    assert [t.get_text() for t in ax.get_xticklabels()] == ["500", "2000"]


def test_one_lock_gets_the_ceiling_one_over_hold_instead_of_a_linear_ideal():
    df = pd.DataFrame({"threads": [1, 1, 2, 2], "acquisitions_per_s": [4e6, 5e6, 6e6, 7e6], "hold_ns": [100] * 4,
                       "locks_n": [1] * 4})  # fmt: skip
    ax = al.plot.scaling(df, reference="ceiling")
    labels = [line.get_label() for line in ax.get_lines()]
    assert "ceiling 1/hold (hold 100 ns)" in labels and not any(lab.startswith("ideal") for lab in labels)
    ceiling = next(line for line in ax.get_lines() if line.get_label().startswith("ceiling"))
    assert list(ceiling.get_ydata()) == [10.0, 10.0]  # 1 / 100 ns = 10 M acquisitions/s, in the axis's M/s
    assert ax.get_ylabel() == "acquisitions per second (M/s)"
    assert "ceiling 1/hold (hold 100 ns)" in [t.get_text() for t in ax.get_legend().get_texts()]
    ax = al.plot.scaling(df.drop(columns="hold_ns"), reference="ceiling", hold_ns=250)
    assert next(ln for ln in ax.get_lines() if ln.get_label().startswith("ceiling")).get_ydata()[0] == 4.0
    with pytest.raises(ValueError, match=r"reference: 'ceiling' is a per-second rate \(1/hold\), got y='hold_ns'"):
        al.plot.scaling(df, y="hold_ns", reference="ceiling")
    with pytest.raises(ValueError, match=r"locks_n != 1"):
        al.plot.scaling(df.assign(locks_n=4), reference="ceiling")
    with pytest.raises(ValueError, match=r"hold_ns: reference='ceiling' needs one hold time, got \[\]"):
        al.plot.scaling(df.drop(columns="hold_ns"), reference="ceiling")
    with pytest.raises(ValueError, match=r"hold_ns: expected a time > 0 in ns, got -1"):
        al.plot.scaling(df, reference="ceiling", hold_ns=-1)
    with pytest.raises(ValueError, match=r"reference: expected 'linear', 'inverse', 'ceiling' or None, got 'log'"):
        al.plot.scaling(df, reference="log")


def test_a_virtual_sweep_names_its_machine_and_single_values_have_no_error_bars():
    runs = al.sweep("lock_zoo", grid={"threads": [1, 2]}, clock="virtual", machine="xeon-8380-2s", costs="table",
                    progress=False, iterations=100)  # fmt: skip
    ax = al.plot.scaling(runs, y="acquisitions_per_s", reference=None)
    assert ax.get_legend().get_title().get_text() == "single value, n=1"
    assert not [c for c in ax.collections if isinstance(c, matplotlib.collections.LineCollection)]  # no error bars
    text = _footer(ax)
    assert "model machine xeon-8380-2s (costs=table)" in text and "clock virtual" in text and "repeats 1" in text


def test_a_published_figure_has_no_error_bars_and_says_where_it_comes_from():
    from alloclab.studies import cma

    ax = al.plot.workers(cma.PUBLISHED_TERMINALS, y="elapsed_s", by="alloc_mutex", worker="terminal")
    assert [p.get_height() for p in ax.patches] == [7.0, 14.0, 21.0, 7.0, 8.0, 7.0]
    assert ax.get_lines() == []  # seaborn draws error bars as lines: none for single published figures
    assert ax.get_legend().get_title().get_text() == "alloc_mutex (single value, n=1)"
    assert _footer(ax).startswith("published figures, not a run of this lab: cma-per-area-lock.mbox.txt")
    assert ax.get_ylabel() == "elapsed (s)"
    df = pd.DataFrame({"threads": [1, 1, 1, 2, 2, 2], "ns_per_alloc": [100.0, 110, 120, 200, 210, 220],
                       "check": ["a"] * 6})  # fmt: skip
    seed = pd.DataFrame({"threads": [1, 2], "ns_per_alloc": [90.0, 180.0], "check": ["a", "a"]})
    ax = al.plot.scaling(df, y="ns_per_alloc", hue="check", reference=None, published=seed)
    crosses = [c for c in ax.collections if c.get_label() == "published (single figures, no interval)"]
    assert len(crosses) == 1 and crosses[0].get_offsets().tolist() == [[1.0, 90.0], [2.0, 180.0]]
    assert ax.get_legend().get_title().get_text() == "check (median, IQR, n=3)"


def test_heatmap_annotates_every_cell_and_marks_oversubscribed_ones():
    df = pd.DataFrame({"threads": [1, 2, 4], "lock": ["spin"] * 3, "fairness_max_min": [1.0, 1.25, 2.0],
                       "oversubscribed": [False, False, True]})  # fmt: skip
    ax = al.plot.heatmap(df, x="threads", y="lock", value="fairness_max_min")
    assert [t.get_text() for t in ax.texts] == ["1", "1.25", "2*"]
    assert "(* = oversubscribed" in ax.get_xlabel()
    assert ax.collections[0].colorbar.ax.get_ylabel().startswith("fairness: max/min per-worker throughput")


def test_the_footer_of_a_saved_result_is_its_own(tmp_path, detail):
    path = al.results.save(detail, tmp_path / "saved")
    loaded = al.results.load(path)
    loaded.meta["git_sha"] = "0123456789abcdef"  # what a result saved by another checkout carries
    loaded.data.attrs["alloclab"] = loaded.meta
    text = _footer(al.plot.scaling(loaded.data, y="acquisitions_per_s", hue="lock"))
    assert "git 0123456789" in text and "repeats 2" in text and "clock real" in text
    assert al.plot.footer(plt.figure(), None).get_text() == "host ? · model ? · clock ? · repeats ? · sizes ? · git ?"


def test_panels_from_two_sources_keep_a_footer_line_each(detail):
    from alloclab.studies import cma

    fig, (left, right) = plt.subplots(1, 2, layout="constrained")
    al.plot.workers(detail, y="ops", by="lock", ax=left)
    al.plot.workers(cma.PUBLISHED_TERMINALS, y="elapsed_s", by="alloc_mutex", worker="terminal", ax=right)
    al.plot.workers(detail, y="ops", by="lock", ax=left)  # the same source again: no third line
    lines = _footer(left).split("\n")
    assert len(lines) == 2 and "clock real" in lines[0] and lines[1].startswith("published figures")
    al.plot.footer(fig, {**detail.meta, "quick": True})  # an explicit footer replaces them
    assert "\n" not in _footer(left) and " · quick · " in _footer(left)
