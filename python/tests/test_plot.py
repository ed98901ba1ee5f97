"""al.plot on the Agg backend: each function returns an Axes drawing the right numbers and writes a PNG."""

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
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "lock=spin" in labels and "lock=mutex" in labels
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
    df = pd.DataFrame({"threads": [1, 2, 1, 2, 1], "mult": [1, 1, 2, 2, 2], "t": [1.0, 2.0, 3.0, 4.0, 5.0]})
    ax = al.plot.heatmap(df, x="threads", y="mult", value="t")
    image = ax.get_images()[0].get_array()
    np.testing.assert_array_equal(np.asarray(image), [[1.0, 2.0], [4.0, 4.0]])  # median of 3 and 5 is 4
    assert sorted(t.get_text() for t in ax.texts) == ["1", "2", "4", "4"]
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
    assert ax.get_xlabel() == "time (µs)"
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
