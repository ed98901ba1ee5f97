"""What the figures of a run mean: the unit and meaning of every summary figure and per-worker figure each scenario
reports (:func:`alloclab.metrics` presents them), and the size unit of the parameters that are sizes.

Declared here, once, for what the engine emits without a description; what the engine describes itself is taken
from it, not restated: the meanings of the per-worker columns every run has (``_core.worker_columns()``, with their
units in :data:`WORKER_COLUMN_UNITS`) and of the counter lists that scenarios emit whole (``_core.counters()``, named
in :data:`COUNTERS`). ``test_metrics.py`` runs every scenario and checks that each figure it emits is declared and
each declared figure is emitted, so this table cannot drift from the engine.

Units: ``s``, ``ms``, ``us``, ``ns`` (virtual in a virtual run), ``count``, ``pages`` (4 KiB frames), ``folios``,
``KiB``, ``MiB``, ``1/s`` (a rate over the run's one clock), ``ratio`` (a dimensionless quotient), ``share``
(a fraction 0..1), ``bool``, ``text``, ``id`` (an index or identifier), ``hash``.
Leaves out: lock_stat's own columns (``r.lockstat``, documented with :func:`alloclab.run`).
"""

from __future__ import annotations

#: A figure: (name, unit, meaning). ``<i>`` in a name stands for 1, 2, ... (one figure per worker).
Metric = tuple[str, str, str]

#: Every run's summary begins with this figure (the runner's one clock) ...
RUN_FIRST: tuple[Metric, ...] = (
    ("elapsed_s", "s", "from the workers' common release to the end of the last one's timed part"),
)
#: ... and ends with these, after the scenario's figures and its lock counts (see alloclab.run).
RUN_LAST: tuple[Metric, ...] = (
    ("lock_counts_exact", "bool", "lock_stat's count of every expected class equals the formula (None: lock_stat "
     "off, or no formula for this run)"),
    ("overlap", "share", "of the run during which every worker was running"),
    ("start_lag", "share", "of the run that passed before the last worker started"),
    ("overlap_poor", "bool", "the workers ran together for less than 90 % of the run because of the scheduler"),
    ("short_run", "bool", "the run was shorter than min_time_s: too short to measure"),
    ("runq_wait_share", "share", "the largest share of the run a worker spent runnable, waiting for a CPU"),
)  # fmt: skip

#: The units of the per-worker columns every run has (their meanings are the engine's: ``_core.worker_columns()``).
WORKER_COLUMN_UNITS: dict[str, str] = {
    "worker": "id", "model_pu": "id", "model_node": "id", "host_pu": "id", "host_node": "id", "cpu_used": "id",
    "bind_ok": "bool", "bind_error": "text", "ops": "count", "ops_window": "count", "start_s": "s", "end_s": "s",
    "elapsed_s": "s", "cpu_s": "s", "runq_wait_s": "s", "lat_count": "count", "lat_mean_ns": "ns",
    "lat_p50_ns": "ns", "lat_p99_ns": "ns", "lat_max_ns": "ns", "allocs_recorded": "count", "alloc_digest": "hash",
}  # fmt: skip
#: The per-worker columns that a run whose workers recorded no allocation address leaves out ...
ALLOC_COLUMNS = ("allocs_recorded", "alloc_digest")
#: ... as the runs of these scenarios always do.
RECORDS_NO_ALLOCS = frozenset({"lock_zoo", "hugetlb_boot"})  # hugetlb_boot hashes its pool instead

#: Lock counts the runner checks, per scenario: expectation key -> lock class. Each key gives three summary figures:
#: ``<key>_acquisitions``, ``<key>_expected`` and ``<key>_formula`` (:func:`lock_count_metrics`).
LOCK_EXPECTATIONS: dict[str, dict[str, str]] = {
    "lock_zoo": {"lock_zoo": "lock_zoo"},
    "pcp_refill": {"zone_lock": "zone->lock", "pcp_lock": "pcp->lock"},
    "page_alloc": {},
    "cma_concurrent": {
        "alloc_mutex": "cma_mutex or cma->alloc_mutex", "cma_lock": "cma->lock", "pcpu_drain_mutex": "pcpu_drain_mutex",
        "zone_lock": "zone->lock", "i_pages": "mapping->i_pages", "lru_lock": "lru_lock", "pcp_lock": "pcp->lock",
    },
    "hugetlb_boot": {"hugetlb_lock": "hugetlb_lock", "padata_lock": "padata_work_lock", "zone_lock": "zone->lock"},
    "shmem_fault": {
        "info_lock": "info->lock", "tree_lock": "mapping->tree_lock or mapping->i_pages", "lru_lock": "lru_lock",
        "mmap_sem_read": "mmap_sem-R",
    },
    "vmalloc_stress": {
        "busy_lock": "vmap_area_lock or vn->busy.lock", "free_lock": "free_vmap_area_lock",
        "pool_lock": "vn->pool_lock", "purge_lock": "vmap_purge_lock",
        "lazy_lock": "purge_vmap_area_lock or vn->lazy.lock",
    },
}  # fmt: skip

#: Scenarios that emit a stats struct's whole counter list (emit_counters): struct name -> where (summary, worker).
#: Every counter is a count; its meaning is the engine's (``_core.counters()``).
COUNTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "shmem_fault": ("ShmemStats", ("summary", "worker")),
    "vmalloc_stress": ("VmallocStats", ("summary", "worker")),
}

#: Each scenario's own summary figures (between elapsed_s and its lock counts).
SUMMARY: dict[str, tuple[Metric, ...]] = {
    "lock_zoo": (
        ("acquisitions", "count", "lock acquisitions of all workers"),
        ("acquisitions_per_s", "1/s", "acquisitions over elapsed_s"),
        ("fairness_jain", "ratio", "Jain's index of the acquisitions each worker made while all were running "
         "(ops_window): 1 = fair, 1/n = one worker took them all; NaN when none was made"),
        ("fairness_max_min", "ratio", "max/min of the per-worker acquisitions while all were running: 1 = fair, "
         "inf = a worker starved"),
        ("wait_total_ns", "ns", "lock_stat: time waited for the lock, all contended acquisitions (NaN: lock_stat off)"),
        ("hold_total_ns", "ns", "lock_stat: time the lock was held, all acquisitions"),
        ("wait_per_hold", "ratio", "wait_total_ns / hold_total_ns: waiting per unit of useful holding"),
        ("handoff_local_share", "share", "contended hand-offs to a waiter on the previous holder's node (NaN: "
         "lock_stat off or no contention)"),
    ),
    "pcp_refill": (
        ("ns_per_alloc", "ns", "mean over workers of a worker's elapsed time per allocation"),
        ("ns_per_alloc_p50", "ns", "mean over workers of the median allocation latency"),
        ("ns_per_alloc_p99", "ns", "mean over workers of the 99th percentile allocation latency"),
        ("allocations", "count", "blocks allocated by all workers"),
        ("alloc_failed", "count", "allocations that returned no page"),
        ("refills", "count", "rmqueue_bulk calls: pcp refills from the buddy lists under zone->lock"),
        ("pages_pulled", "count", "blocks those refills moved to the pcp lists"),
        ("bulk_frees", "count", "free_pcppages_bulk calls: pcp lists drained back to the buddy lists"),
        ("pages_checked_under_lock", "count", "pages check_new_pages examined while holding zone->lock"),
        ("pages_checked_after_unlock", "count", "pages checked after zone->lock was dropped (the seed's placement)"),
        ("refill_hold_ns", "ns", "mean time one rmqueue_bulk held zone->lock"),
        ("zone_lock_contentions", "count", "lock_stat: contended zone->lock acquisitions (None: lock_stat off)"),
        ("zone_lock_wait_avg_ns", "ns", "lock_stat: mean wait of a contended zone->lock acquisition"),
        ("zone_lock_hold_avg_ns", "ns", "lock_stat: mean zone->lock hold"),
        ("pcp_batch", "pages", "pcp->batch of the first worker's pcp"),
        ("pcp_high", "pages", "pcp->high_min of the first worker's pcp"),
        ("node_pages", "pages", "4 KiB frames of the node allocated from"),
        ("free_area_same_migratetypes", "bool", "the node's free_area is back to its initial state, migratetype by "
         "migratetype (False: stealing moved pageblocks between types)"),
        ("check", "text", "the allocator's consistency check after the run"),
    ),
    "page_alloc": (
        ("alloc_ns", "ns", "mean over workers of a worker's mean allocation time"),
        ("free_ns", "ns", "mean over workers of a worker's mean free time"),
        ("allocations", "count", "blocks allocated by all workers"),
        ("alloc_failed", "count", "allocations that returned no page"),
        ("blocks_per_worker", "count", "blocks each worker holds in the bulk and rand patterns"),
        ("zone_lock_acquisitions", "count", "lock_stat: zone->lock acquisitions (None: lock_stat off)"),
        ("zone_lock_per_1k_allocs", "ratio", "zone->lock acquisitions per 1000 allocations"),
        ("zone_lock_contentions", "count", "lock_stat: contended zone->lock acquisitions"),
        ("pcp_hit_share", "share", "allocations served by a pcp list rather than the buddy lists"),
        ("refills", "count", "rmqueue_bulk calls: pcp refills under zone->lock"),
        ("bulk_frees", "count", "free_pcppages_bulk calls"),
        ("buddy_allocs", "count", "rmqueue_buddy calls: allocations taken straight from the buddy lists"),
        ("buddy_frees", "count", "free_one_page calls: frees straight to the buddy lists"),
        ("fallbacks", "count", "allocations that fell back to another migratetype"),
        ("pages_checked_under_lock", "count", "pages check_new_pages examined while holding zone->lock"),
        ("check", "text", "the allocator's consistency check after the run"),
    ),
    "cma_concurrent": (
        ("completion_sorted_s", "text", "every worker's completion time (s), fastest first: the seed's staircase"),
        ("completion_s_<i>", "s", "the i-th fastest worker's completion time"),
        ("fastest_s", "s", "the fastest worker's completion time"),
        ("slowest_s", "s", "the slowest worker's completion time"),
        ("mean_s", "s", "mean completion time"),
        ("ratio_slowest_fastest", "ratio", "slowest_s / fastest_s: ~ the number of areas behind one mutex, ~1 apart"),
        ("pages_allocated", "pages", "pages cma_alloc returned, all workers"),
        ("pages_migrated", "pages", "page-cache pages migrated out of the areas"),
        ("filled_pages", "pages", "page-cache pages the areas held before the timed part"),
        ("fill_actual", "share", "filled_pages over the areas' pages"),
        ("attempts", "count", "alloc_contig_range attempts, all workers"),
        ("retries", "count", "attempts that failed with -EBUSY and moved on"),
        ("failures", "count", "workers whose cma_alloc returned nothing"),
        ("failure_reasons", "text", "why each failed worker failed (errno names), empty when none"),
        ("alloc_mutex_class", "text", "the lock class of the alloc mutex: cma_mutex (global) or cma->alloc_mutex"),
        ("alloc_mutex_wait_s", "s", "lock_stat: time waited for the alloc mutex, all workers (NaN: lock_stat off)"),
        ("node_pages", "text", "4 KiB frames of each model node, comma-separated"),
        ("contents_checked", "bool", "migrated pages were checked for their contents (backing='real')"),
        ("contents_ok", "bool", "every migrated page kept its contents"),
    ),
    "hugetlb_boot": (
        ("allocated", "folios", "folios in the pool after the run (h->nr_huge_pages)"),
        ("pool_digest", "hash", "order-sensitive hash of the pool's folios, node by node in free-list order"),
        ("requested", "folios", "the folios asked for (pages)"),
        ("exhausted", "bool", "fewer folios than requested could be allocated"),
        ("nworks", "count", "padata works run (1: serial)"),
        ("chunk_size", "folios", "padata's chunk size"),
        ("chunks", "count", "chunks padata planned (serial: thread_fn calls)"),
        ("chunks_run", "count", "chunks the workers ran"),
        ("max_threads", "count", "the job's max_threads (multiplier x nodes)"),
        ("min_chunk", "folios", "the job's min_chunk"),
        ("nworks_wanted", "count", "works padata wanted before capping by max_threads"),
        ("nodes", "count", "memory nodes (num_node_state(N_MEMORY))"),
        ("nr_node_ids", "count", "node ids of the model"),
        ("helper_nodes", "text", "the node of each padata helper, comma-separated"),
        ("folio_order", "count", "the folios' order (9: 2 MiB, 18: 1 GiB)"),
        ("folio_kib", "KiB", "one folio's size"),
        ("hugetlb_lock_mode", "text", "how hugetlb_lock is taken per folio"),
        ("zone_lock_per_folio", "ratio", "zone->lock acquisitions per folio (NaN: lock_stat off)"),
        ("node_attempts", "count", "per-node allocation attempts of all workers"),
        ("thread_us_per_folio", "us", "the seed's figure: threads x elapsed / folios"),
        ("cpu_us_per_folio", "us", "CPU time the workers spent per folio"),
        ("busy_us_per_folio", "us", "time the workers were busy allocating per folio"),
        ("per_node_folios", "text", "folios of each node (h->nr_huge_pages_node), comma-separated"),
        ("bootmem_folios", "folios", "gigantic=True: folios taken from the memblock stand-in before SMP"),
        ("bootmem_s", "s", "gigantic=True: time of that serial memblock stand-in (untimed in elapsed_s)"),
        ("tails_written", "count", "gigantic=True: tail struct pages initialised"),
        ("model_mib", "MiB", "memory of the model's nodes"),
        ("pool_check", "text", "the hugetlb pool's consistency check"),
        ("check", "text", "the allocator's consistency check after the teardown"),
        ("warning", "text", "the kernel's 'HugeTLB: allocating ... failed' line, only when the pool ran out"),
    ),
    "shmem_fault": (
        ("fault_handler", "text", "the ->fault handler the variant runs (shmem_fault, filemap_fault, ...)"),
        ("faults_per_s", "1/s", "faults over elapsed_s"),
        ("ns_per_fault", "ns", "mean over workers of a worker's elapsed time per fault"),
        ("info_lock_per_fault", "ratio", "info->lock acquisitions per fault (the model's own count)"),
        ("info_lock_contentions", "count", "lock_stat: contended info->lock acquisitions (None: lock_stat off)"),
        ("info_lock_wait_ns", "ns", "lock_stat: time waited for info->lock (NaN: lock_stat off)"),
        ("info_lock_hold_ns", "ns", "lock_stat: time info->lock was held"),
        ("tree_lock_per_fault", "ratio", "mapping->tree_lock (i_pages) acquisitions per fault"),
        ("tree_lock_contentions", "count", "lock_stat: contended tree_lock acquisitions"),
        ("tree_lock_wait_ns", "ns", "lock_stat: time waited for tree_lock"),
        ("tree_lock_hold_ns", "ns", "lock_stat: time tree_lock was held"),
        ("zone_lock_acquisitions", "count", "lock_stat: zone->lock acquisitions"),
        ("pcp_batch", "pages", "pcp->batch of the first worker's zone"),
        ("pcp_high", "pages", "pcp->high of the first worker's zone"),
        ("pages_checked_at_prep", "count", "pages checked in prep_new_page"),
        ("pages_checked_under_lock", "count", "pages checked while holding zone->lock"),
        ("pagecache_pages", "pages", "pages the file held in its page cache after the run"),
        ("file_pages", "pages", "pages of the mapping (threads x pages_per_thread)"),
        ("index_pages", "pages", "index (radix-tree) pages of the file"),
        ("check", "text", "the page cache's and the allocator's consistency checks"),
    ),
    "vmalloc_stress": (
        ("ops", "count", "operations (allocation and free) of all workers"),
        ("ops_per_s", "1/s", "operations over elapsed_s"),
        ("freed_at_teardown", "count", "areas a stopped run left, freed after it"),
        ("shape", "text", "the vmalloc code the run follows: v6.7 or v6.9+ (vmap_nodes)"),
        ("nr_vmap_nodes", "count", "vmap_node structures (1: the v6.7 shape)"),
        ("busy_lock", "text", "the busy lock taken twice (before the seed) or once per allocation"),
        ("busy_lock_class", "text", "the busy lock's class: vmap_area_lock or vn->busy.lock"),
        ("busy_lock_per_alloc", "ratio", "busy-lock acquisitions per allocation (the model's own count)"),
        ("busy_lock_per_free", "ratio", "busy-lock acquisitions per free"),
        ("busy_lock_lookups", "count", "find_vm_area() busy-lock acquisitions (stress_ng_pthread: one a fresh stack)"),
        ("busy_lock_contentions", "count", "lock_stat: contended busy-lock acquisitions (None: lock_stat off)"),
        ("busy_lock_wait_ns", "ns", "lock_stat: time waited for the busy lock (NaN: lock_stat off)"),
        ("busy_lock_hold_ns", "ns", "lock_stat: time the busy lock was held"),
        ("free_lock_per_alloc", "ratio", "free_vmap_area_lock acquisitions per allocation"),
        ("free_lock_contentions", "count", "lock_stat: contended free_vmap_area_lock acquisitions"),
        ("free_lock_wait_ns", "ns", "lock_stat: time waited for free_vmap_area_lock"),
        ("pool_hit_ratio", "share", "allocations served from a vmap_node pool"),
        ("lazy_max_pages", "pages", "lazily freed pages that trigger a purge (the parameter, or the kernel's rule)"),
        ("search_steps_per_search", "ratio", "free-tree nodes visited per find_vmap_lowest_match"),
        ("map_pages", "bool", "the areas were backed by pages from the page allocator"),
        ("stack_cache_hits", "count", "stress_ng_pthread: stacks reused from fork.c's per-CPU stack cache"),
        ("stack_cache_puts", "count", "stress_ng_pthread: stacks put back into that cache"),
        ("page_alloc_failures", "count", "page allocations that failed while mapping areas"),
    ),
}  # fmt: skip

#: Each scenario's own per-worker figures (after the columns every run has).
WORKER: dict[str, tuple[Metric, ...]] = {
    "lock_zoo": (),
    "pcp_refill": (
        ("alloc_failed", "count", "its allocations that returned no page"),
        ("ns_per_alloc", "ns", "its elapsed time per allocation"),
        ("refills", "count", "rmqueue_bulk refills of its pcp"),
        ("bulk_frees", "count", "free_pcppages_bulk drains of its pcp"),
        ("pages_checked_under_lock", "count", "pages checked under zone->lock for its pcp"),
    ),
    "page_alloc": (
        ("allocations", "count", "its allocations"),
        ("alloc_failed", "count", "its allocations that returned no page"),
        ("alloc_ns", "ns", "its mean allocation time"),
        ("free_ns", "ns", "its mean free time"),
    ),
    "cma_concurrent": (
        ("pages", "pages", "pages its cma_alloc returned (0: it failed)"),
        ("pages_migrated", "pages", "pages it migrated out of its range"),
        ("retries", "count", "its attempts that failed with -EBUSY"),
        ("attempts", "count", "its alloc_contig_range attempts"),
        ("failed", "bool", "1 when its cma_alloc returned nothing"),
        ("error", "count", "the errno its last failed attempt ended with (-16 EBUSY, -12 ENOMEM, -4 EINTR), 0: ok"),
        ("filled_pages", "pages", "page-cache pages its area held before the timed part"),
        ("mutex_wait_s", "s", "time it waited for the alloc mutex"),
        ("alloc_contig_s", "s", "time it held the alloc mutex (alloc_contig_range)"),
        ("isolate_s", "s", "alloc_contig_range phase: start_isolate_page_range"),
        ("migrate_s", "s", "phase: __alloc_contig_migrate_range"),
        ("test_s", "s", "phase: test_pages_isolated"),
        ("take_s", "s", "phase: isolate_freepages_range (taking the pages)"),
        ("undo_s", "s", "phase: undo_isolate_page_range"),
    ),
    "hugetlb_boot": (
        ("work_node", "id", "the node its padata work allocated from"),
        ("folios", "folios", "folios it allocated"),
        ("chunks", "count", "padata chunks it ran"),
        ("busy_s", "s", "time it spent allocating"),
        ("cpu_s", "s", "CPU time it spent"),
        ("cpu_us_per_folio", "us", "its CPU time per folio"),
        ("alloc_failed", "count", "its folio allocations that failed"),
        ("tails_written", "count", "gigantic=True: tail struct pages it initialised"),
    ),
    "shmem_fault": (("ns_per_fault", "ns", "its elapsed time per fault"),),
    "vmalloc_stress": (),
}  # fmt: skip

#: Bytes per unit of the size units a parameter may be declared in (``pages``: the model's 4 KiB PAGE_SIZE).
SIZE_UNITS: dict[str, int] = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "pages": 4096}

#: The parameters that are sizes, with their unit: (scenario, parameter) -> a key of SIZE_UNITS. The engine's
#: parameter declarations carry no unit; these are the ones whose doc says what they measure in.
PARAMETER_SIZES: dict[tuple[str, str], str] = {
    ("cma_concurrent", "pages_per_region"): "pages",
    ("cma_concurrent", "alloc_pages"): "pages",
    ("cma_concurrent", "align"): "pages",
    ("hugetlb_boot", "node_mib"): "MiB",
    ("page_alloc", "node_pages"): "pages",
    ("pcp_refill", "node_pages"): "pages",
    ("shmem_fault", "pages_per_thread"): "pages",
    ("vmalloc_stress", "size"): "bytes",
    ("vmalloc_stress", "align"): "bytes",
    ("vmalloc_stress", "vmalloc_size"): "bytes",
    ("vmalloc_stress", "lazy_max_pages"): "pages",
    ("vmalloc_stress", "node_pages"): "pages",
}


def lock_count_metrics(scenario: str) -> list[Metric]:
    """The three summary figures of each of ``scenario``'s lock expectations."""
    out: list[Metric] = []
    for key, cls in LOCK_EXPECTATIONS[scenario].items():
        out += [
            (f"{key}_acquisitions", "count", f"lock_stat: acquisitions of {cls} (None: lock_stat off)"),
            (
                f"{key}_expected",
                "count",
                f"acquisitions of {cls} the scenario's formula gives for this run (None: no formula)",
            ),
            (f"{key}_formula", "text", "that formula with this run's numbers, or why there is none"),
        ]
    return out
