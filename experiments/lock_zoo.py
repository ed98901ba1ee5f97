"""lock_zoo study: every lock kind x threads x critical-section length.

Writes results/lock_zoo/<UTC stamp>/: the sweep with its per-worker and lock_stat detail, meta.json with the
provenance, a scaling plot per hold time, and a heatmap of the acquisition rate over threads x hold time per
lock kind. ``--quick`` (or ALLOCLAB_QUICK=1) runs in a few seconds.

    python experiments/lock_zoo.py [--quick] [--out results] [--repeats N] [--no-progress]
"""

from __future__ import annotations

import sys
from pathlib import Path

from matplotlib.figure import Figure

import alloclab as al
from alloclab.studies import experiment_args, measure, new_run_dir, timed


def main(argv: list[str] | None = None) -> int:
    """Run the study; returns 0 when every run finished ok, 1 otherwise."""
    args = experiment_args(__doc__, argv)

    quick = args.quick or al.quick()
    kinds = al.lock_kinds()["kind"].tolist()
    threads = [1, 2, 4]
    hold_ns = al.config.sized([0, 100, 1_000, 10_000], [0, 1_000], quick_mode=quick)
    iterations = al.config.sized(50_000, 1_000, quick_mode=quick)
    repeats = args.repeats or al.config.sized(5, 2, quick_mode=quick)

    result = measure("lock_zoo", grid={"hold_ns": hold_ns, "lock": kinds, "threads": threads}, repeats=repeats,
                     progress=args.progress, iterations=iterations)  # fmt: skip
    out_dir = new_run_dir(args.out, "lock_zoo")
    plots: list[Path] = []
    runs = timed(result.runs)
    for hold in hold_ns:
        ax = Figure(figsize=(7, 4.5), layout="constrained").subplots()
        al.plot.scaling(
            runs[runs["hold_ns"] == hold], x="threads", y="acquisitions_per_s", hue="lock", ax=ax, logy=True,
            title=f"lock_zoo, hold {hold} ns: acquisitions/s vs threads",
        )  # fmt: skip
        plots.append(al.plot.savefig(ax, out_dir / f"scaling_hold{hold}.png"))
    for kind in kinds:
        ax = Figure(figsize=(6, 4), layout="constrained").subplots()
        al.plot.heatmap(
            runs[runs["lock"] == kind], x="threads", y="hold_ns", value="acquisitions_per_s", ax=ax, log=True,
            title=f"lock_zoo, {kind}: acquisitions/s",
        )  # fmt: skip
        plots.append(al.plot.savefig(ax, out_dir / f"heatmap_{kind}.png"))

    table = al.stats.compare(runs, by="lock", metric="acquisitions_per_s", within=["hold_ns", "threads"])
    table.to_csv(out_dir / "compare.csv", index=False)
    al.results.save(
        result,
        out_dir,
        meta={"study": {"name": "lock_zoo", "script": "experiments/lock_zoo.py", "quick": quick,
                        "plots": [p.name for p in plots], "compare": "compare.csv"}},
    )  # fmt: skip
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}", na_rep="-"))
    print(f"wrote {out_dir} ({len(plots)} plots)")
    return 0 if (result.runs["status"] == "ok").all() else 1


if __name__ == "__main__":
    sys.exit(main())
