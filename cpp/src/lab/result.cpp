// The columns of RunResult's per-worker table (see result.hpp).
#include "alloclab/lab/result.hpp"

namespace alloclab {

namespace {
template <class T>
Value count(T v) {
  return int64_t(v);
}

constexpr Column<WorkerRow> kWorkerColumns[] = {
    {"worker", "the worker's index", [](const WorkerRow& r) { return count(r.slot.worker); }},
    {"model_pu", "the model PU it ran as (its CPU in the model: pcp lists, lock_stat's CPU)",
     [](const WorkerRow& r) { return count(r.slot.model_pu); }},
    {"model_node", "the model node of that PU", [](const WorkerRow& r) { return count(r.slot.model_node); }},
    {"host_pu", "the host PU it was bound to (model PU modulo the host's PUs)",
     [](const WorkerRow& r) { return count(r.slot.host_pu); }},
    {"host_node", "the host node its node-local memory lives on",
     [](const WorkerRow& r) { return count(r.slot.host_node); }},
    {"cpu_used", "the OS CPU it ran on after binding", [](const WorkerRow& r) { return count(r.cpu_used); }},
    {"bind_ok", "binding to host_pu succeeded", [](const WorkerRow& r) { return Value(r.bind_ok); }},
    {"bind_error", "why binding failed, empty when it did not", [](const WorkerRow& r) { return Value(r.bind_error); }},
    {"ops", "operations it completed (the scenario's unit: acquisitions, allocations, faults, ...)",
     [](const WorkerRow& r) { return count(r.ops); }},
    {"ops_window", "operations it completed while every worker was running",
     [](const WorkerRow& r) { return count(r.ops_window); }},
    {"start_s", "s after the run's release when its timed part began",
     [](const WorkerRow& r) { return Value(r.start_s); }},
    {"end_s", "s after the release when its timed part ended", [](const WorkerRow& r) { return Value(r.end_s); }},
    {"elapsed_s", "s, its own span: end_s - start_s", [](const WorkerRow& r) { return Value(r.elapsed_s); }},
    {"cpu_s", "s it spent on a CPU during its span (schedstat; NaN where unknown)",
     [](const WorkerRow& r) { return Value(r.cpu_s); }},
    {"runq_wait_s", "s it was runnable but waited for a CPU (schedstat run delay; NaN where unknown)",
     [](const WorkerRow& r) { return Value(r.runq_wait_s); }},
    {"lat_count", "latency samples the scenario recorded (0: none, and the lat_* columns are NaN)",
     [](const WorkerRow& r) { return count(r.lat_count); }},
    {"lat_mean_ns", "ns, mean latency of one operation", [](const WorkerRow& r) { return Value(r.lat_mean_ns); }},
    {"lat_p50_ns", "ns, median latency", [](const WorkerRow& r) { return Value(r.lat_p50_ns); }},
    {"lat_p99_ns", "ns, 99th percentile latency", [](const WorkerRow& r) { return Value(r.lat_p99_ns); }},
    {"lat_max_ns", "ns, longest latency", [](const WorkerRow& r) { return Value(r.lat_max_ns); }},
    {"allocs_recorded", "addresses folded into alloc_digest",
     [](const WorkerRow& r) { return count(r.allocs_recorded); }},
    // 63 bits, so that it stays a non-negative int64 in pandas and Parquet.
    {"alloc_digest", "order-sensitive hash of every pfn or vmalloc address it allocated (63 bits)",
     [](const WorkerRow& r) { return count(r.alloc_digest >> 1); }},
};
}  // namespace

std::span<const Column<WorkerRow>> worker_columns() { return kWorkerColumns; }

}  // namespace alloclab
