"""`alloclab compare DIR_A DIR_B` and al.compare.directories: per configuration the change of B against A, its
bootstrap interval and the U test of alloclab.stats.compare, on virtual-time sweeps (deterministic: the samples of a
configuration are its seeds, each another interleaving)."""

from __future__ import annotations

import numpy as np
import pytest

import alloclab as al
from alloclab.cli import main

# min_time_s=0: a short virtual run is still a measurement (virtual time has no timer resolution to fall under).
VIRTUAL = {"clock": "virtual", "machine": "xeon-8380-2s", "iterations": 200, "min_time_s": 0.0}
SEEDS = [1, 2, 3, 4, 5]


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    out = {}
    for name, lock, threads in (("spin", "spin", [1, 4]), ("mcs", "mcs", [1, 4]), ("mcs_wide", "mcs", [4, 8])):
        al.sweep("lock_zoo", grid={"threads": threads, "seed": SEEDS}, lock=lock, out=root / name, progress=False,
                 **VIRTUAL)  # fmt: skip
        out[name] = root / name
    return out


def test_change_interval_and_significance(dirs):
    t = al.compare.directories(dirs["spin"], dirs["mcs"])
    assert t["threads"].tolist() == [1, 4]
    a = al.results.load(dirs["spin"]).data
    b = al.results.load(dirs["mcs"]).data
    for _, row in t.iterrows():
        xa = a.loc[a["threads"] == row["threads"], "elapsed_s"].to_numpy()
        xb = b.loc[b["threads"] == row["threads"], "elapsed_s"].to_numpy()
        assert (row["n_a"], row["n_b"]) == (5, 5)
        assert row["median_a"] == np.median(xa) and row["median_b"] == np.median(xb)
        assert row["ratio"] == pytest.approx(np.median(xb) / np.median(xa), rel=1e-12)
        assert row["change"] == pytest.approx(row["ratio"] - 1, rel=1e-12)
        assert row["ci_low"] <= row["ratio"] <= row["ci_high"]
        assert row["significant"] == (row["p_value"] < 0.05)
        assert row["finding"].startswith(f"{row['ratio']:.3g}x") == row["significant"]
    # the interval is reproducible (seeded bootstrap)
    again = al.compare.directories(dirs["spin"], dirs["mcs"])
    assert again[["ci_low", "ci_high"]].equals(t[["ci_low", "ci_high"]])
    assert al.compare.differing_parameters(dirs["spin"], dirs["mcs"]) == {"lock": ("spin", "mcs")}


def test_a_directory_against_itself_changes_nothing(dirs):
    t = al.compare.directories(dirs["spin"], dirs["spin"])
    assert t["ratio"].tolist() == [1.0, 1.0] and t["change"].tolist() == [0.0, 0.0]
    assert not t["significant"].any() and all(f.startswith("n.s.") for f in t["finding"])


def test_configurations_one_side_lacks(dirs):
    t = al.compare.directories(dirs["mcs"], dirs["mcs_wide"])
    assert t[["threads", "finding"]].values.tolist() == [[1, "only in A"], [4, t.loc[1, "finding"]], [8, "only in B"]]
    assert t.loc[1, "ratio"] == 1.0  # the same virtual runs: threads=4 of mcs in both
    with pytest.raises(ValueError, match=r"metric: 'nope' is not a column of dir_a"):
        al.compare.directories(dirs["mcs"], dirs["spin"], metric="nope")
    with pytest.raises(ValueError, match=r"by: 'nope' is not a column of dir_a"):
        al.compare.directories(dirs["mcs"], dirs["spin"], by=["nope"])
    with pytest.raises(ValueError, match=r"confidence: expected a level between 0 and 1, got 95"):
        al.compare.directories(dirs["mcs"], dirs["spin"], confidence=95)


def test_cli_compare_prints_per_configuration(dirs, capsys):
    assert main(["compare", str(dirs["spin"]), str(dirs["mcs"])]) == 0
    out = capsys.readouterr().out
    assert "B differs from A in: lock=spin -> mcs" in out
    lines = out.splitlines()
    header = next(line for line in lines if "configuration" in line)
    for word in ("A elapsed_s", "B elapsed_s", "change", "95% CI", "p", "finding"):
        assert word in header
    assert any(line.strip().startswith("threads=1 ") for line in lines)
    assert any(line.strip().startswith("threads=4 ") for line in lines)
    assert "geometric mean of B/A over 2 configuration(s)" in out
    assert main(["compare", str(dirs["spin"]), str(dirs["mcs"]), "--metric", "nope"]) == 1
    assert "alloclab compare: error: metric: 'nope' is not a column" in capsys.readouterr().err
