"""Every ``experiments/*.py`` script runs end to end in quick mode and writes its folder (data, meta.json, plots)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXPERIMENTS = sorted((Path(__file__).resolve().parents[2] / "experiments").glob("*.py"))


def test_there_are_experiments():
    assert EXPERIMENTS, "no experiments/*.py found"


@pytest.mark.parametrize("script", EXPERIMENTS, ids=lambda p: p.stem)
def test_the_script_runs_quick_and_writes_its_results(script, tmp_path, monkeypatch):
    monkeypatch.setenv("ALLOCLAB_QUICK", "1")
    spec = importlib.util.spec_from_file_location(f"experiment_{script.stem}", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--quick", "--out", str(tmp_path), "--repeats", "1", "--no-progress"]) == 0
    (run_dir,) = (tmp_path / script.stem).iterdir()
    names = {p.name for p in run_dir.iterdir()}
    assert "meta.json" in names
    assert any(n.startswith("data.") for n in names), names
    assert any(n.endswith(".png") for n in names), names
