"""The HTML report (``alloclab report``, written by ``alloclab reproduce``): built from a results root it makes, each
study's newest run, escaped text, inline plots; and in a real browser (headless Chromium) every image decodes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.figure import Figure
from test_cli import alloclab

from alloclab import report


def _study_run(root: Path, name: str, stamp: str, *, title: str, notes: list[str], plot: bool = True) -> Path:
    """A study run folder as studies.reproduce writes it: meta.json, table.parquet, published.parquet and a plot."""
    run = root / name / stamp
    run.mkdir(parents=True)
    pd.DataFrame({"workers": [1, 2], "ratio": [0.52, 0.097], "verdict": ["p=0.004", "n.s."]}).to_parquet(
        run / "table.parquet", index=False
    )
    pd.DataFrame({"workers": [2], "ratio": [0.5]}).to_parquet(run / "published.parquet", index=False)
    plots = []
    if plot:
        fig = Figure(figsize=(2, 1.5))
        fig.subplots().plot([1, 2], [3, 1])
        fig.savefig(run / "speed.png", dpi=60)
        plots = ["speed.png"]
    study = {"name": name, "title": title, "seed": "a seed", "quick": True, "elapsed_s": 1.5, "table": "table.parquet",
             "published": "published.parquet", "plots": plots, "notes": notes}  # fmt: skip
    meta = {"study": study, "git_sha": "0123456789abcdef", "hostname": "box", "saved": "2026-12-01T00:00:00Z"}
    (run / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return run


@pytest.fixture
def root(tmp_path: Path) -> Path:
    _study_run(tmp_path, "cma", "20261201T100000Z", title="old title", notes=[])
    _study_run(tmp_path, "cma", "20261201T110000Z", title="CMA areas", notes=["a <b>raw</b> note & more"])
    _study_run(tmp_path, "shmem", "20261201T110000Z", title="shmem faults", notes=[], plot=False)
    (tmp_path / "stray").mkdir()  # not a study: no run folder with a study's meta.json
    return tmp_path


def test_each_studys_newest_run_with_its_tables_notes_and_inline_plots(root: Path):
    assert [p.parent.name + "/" + p.name for p in report.latest_runs(root)] == [
        "cma/20261201T110000Z",
        "shmem/20261201T110000Z",
    ]
    page = report.build(root).read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert "CMA areas" in page and "old title" not in page and "shmem faults" in page
    assert page.count("<img ") == 1 and "src='data:image/png;base64,iVBORw0KGgo" in page  # the PNG, inline
    assert "a &lt;b&gt;raw&lt;/b&gt; note &amp; more" in page  # text is escaped, never markup
    assert "<td>n.s.</td>" in page and "<td>0.097</td>" in page
    assert "Published by the seed:" in page and "git 0123456789" in page


def test_bad_roots_are_named(tmp_path: Path):
    with pytest.raises(ValueError, match="root: '.*nope' is not a directory"):
        report.build(tmp_path / "nope")
    with pytest.raises(ValueError, match="root: '.*' holds no study run"):
        report.build(tmp_path)


def test_cli_rebuilds_the_report(root: Path):
    out = alloclab("report", str(root))
    assert out.returncode == 0, out.stderr
    assert f"wrote {root / 'index.html'}" in out.stdout
    bad = alloclab("report", str(root / "nope"))
    assert bad.returncode == 1 and "alloclab report: error: root: " in bad.stderr


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _browser(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run headless Chromium without the sanitizer preload of ``make test-asan`` (the browser is not under test, and
    under libasan it hangs)."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")}
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000"]
    return subprocess.run([_chromium(), *flags, *args], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.skipif(_chromium() is None, reason="Debian's chromium is not installed (make test installs it)")
def test_every_image_decodes_in_headless_chromium(root: Path, tmp_path: Path):
    index = report.build(root)
    dom = _browser("--dump-dom", index.as_uri())
    assert dom.returncode == 0, dom.stderr
    decoded = re.search(r'data-images="(\d+)/(\d+)"', dom.stdout)
    assert decoded, dom.stdout[:2000]
    assert decoded.groups() == ("1", "1")  # the one plot, decoded by the browser
    shot = tmp_path / "report.png"
    assert _browser(f"--screenshot={shot}", "--window-size=1200,900", index.as_uri()).returncode == 0
    assert shot.read_bytes().startswith(b"\x89PNG")
