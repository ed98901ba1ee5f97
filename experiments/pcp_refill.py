"""pcp_refill study: check_pcp_refill in zone->lock (v6.2) vs after it (the patch) vs off, orders 9 and 0.

Writes results/pcp_refill/<UTC stamp>/: the sweep (threads 1..host PUs x check, per order) with its per-worker
and lock_stat detail, meta.json with the provenance, table.csv (ours beside the seed's published table), one
scaling plot per order and the zone->lock lock_stat plot, and prints the plain-words reading. The study itself is
``alloclab.studies.pcp_refill`` (also ``alloclab reproduce pcp_refill``). ``--quick`` (or ALLOCLAB_QUICK=1) runs
in seconds.

    python experiments/pcp_refill.py [--quick] [--out results] [--repeats N] [--no-progress]
"""

from __future__ import annotations

import sys

import alloclab as al
from alloclab.studies import experiment_args, new_run_dir
from alloclab.studies import pcp_refill as study


def main(argv: list[str] | None = None) -> int:
    """Run the study; returns 0 when every run finished ok, 1 otherwise."""
    args = experiment_args(__doc__, argv)

    quick = args.quick or al.quick()
    threads = study.host_threads()
    topology = f"node:1 core:{max(threads)} pu:1"
    repeats = args.repeats or al.config.sized(5, 3, quick_mode=quick)
    counts = {9: al.config.sized(512, 32, quick_mode=quick), 0: al.config.sized(32_768, 2_048, quick_mode=quick)}

    result = study.sweep_orders(counts, threads, repeats, topology, args.progress, grow=not quick)
    out_dir = new_run_dir(args.out, study.NAME)
    table = study.summarize(result.runs)
    plots = study.draw(result, out_dir)
    table.to_csv(out_dir / "table.csv", index=False)
    study.PUBLISHED.to_csv(out_dir / "published.csv", index=False)
    notes = study.reading(table)
    al.results.save(
        result,
        out_dir,
        meta={"study": {"name": study.NAME, "script": "experiments/pcp_refill.py", "quick": quick,
                        "seed": study.SEED, "topology": topology, "counts": counts, "repeats": repeats,
                        "plots": [p.name for p in plots], "table": "table.csv", "published": "published.csv",
                        "notes": notes}},
    )  # fmt: skip
    cols = ["order", "check", "threads", "ns_per_alloc", "vs_in_lock", "published_ns_per_alloc",
            "published_ratio_vs_in_lock", "zone_lock_acquisitions", "pages_checked_under_lock",
            "refill_hold_ns"]  # fmt: skip
    print(table[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}", na_rep="-"))
    for line in notes:
        print("-", line)
    print(f"wrote {out_dir} ({len(plots)} plots)")
    return 0 if (result.runs["status"] == "ok").all() else 1


if __name__ == "__main__":
    sys.exit(main())
