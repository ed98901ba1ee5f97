// LockDomain: lock classes of a run, per-worker lock_stat slots, merge and /proc/lock_stat text (see header).
#include "alloclab/locks/lock_domain.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "alloclab/base/clock.hpp"

namespace alloclab {

ALLOCLAB_TLS constinit thread_local LockStatThread tls_lockstat;

namespace {
Value count(uint64_t v) { return int64_t(v); }

constexpr Column<LockStatRow> kLockStatColumns[] = {
    {"class", "the lock class, as lock_stat prints it", [](const LockStatRow& r) { return Value(r.cls); }},
    {"kind", "the primitive the class used in this run", [](const LockStatRow& r) { return Value(r.kind); }},
    {"con_bounces", "contentions on another CPU than the lock's previous acquirer",
     [](const LockStatRow& r) { return count(r.con_bounces); }},
    {"contentions", "acquisitions that had to wait", [](const LockStatRow& r) { return count(r.contentions); }},
    {"waittime_min_ns", "ns, shortest wait of a contended acquisition",
     [](const LockStatRow& r) { return Value(r.wait_min_ns); }},
    {"waittime_max_ns", "ns, longest wait", [](const LockStatRow& r) { return Value(r.wait_max_ns); }},
    {"waittime_total_ns", "ns, all waits", [](const LockStatRow& r) { return Value(r.wait_total_ns); }},
    {"waittime_avg_ns", "ns, mean wait per contention", [](const LockStatRow& r) { return Value(r.wait_avg_ns); }},
    {"acq_bounces", "acquisitions on another CPU than the previous acquirer",
     [](const LockStatRow& r) { return count(r.acq_bounces); }},
    {"acquisitions", "successful acquisitions (a failed trylock counts nothing)",
     [](const LockStatRow& r) { return count(r.acquisitions); }},
    {"holdtime_min_ns", "ns, shortest hold", [](const LockStatRow& r) { return Value(r.hold_min_ns); }},
    {"holdtime_max_ns", "ns, longest hold", [](const LockStatRow& r) { return Value(r.hold_max_ns); }},
    {"holdtime_total_ns", "ns, all holds", [](const LockStatRow& r) { return Value(r.hold_total_ns); }},
    {"holdtime_avg_ns", "ns, mean hold per acquisition", [](const LockStatRow& r) { return Value(r.hold_avg_ns); }},
    {"handoffs_local", "contentions whose previous holder ran on the same model node",
     [](const LockStatRow& r) { return count(r.handoffs_local); }},
    {"handoffs_remote", "contentions whose previous holder ran on another model node (or outside the workers)",
     [](const LockStatRow& r) { return count(r.handoffs_remote); }},
};
}  // namespace

std::span<const Column<LockStatRow>> lockstat_columns() { return kLockStatColumns; }

LockDomain::LockDomain(const LockConfig& config, bool lockstat, bool spin_yield, CostModel* costs)
    : config_(config),
      lockstat_(lockstat),
      spin_yield_(spin_yield),
      nr_classes_(lock_class_catalogue().size()),
      costs_(costs) {
  for (const auto& c : lock_class_catalogue()) kinds_.push_back(config_.kind_for(c.name));
  // Write blocks, then read blocks, then one spare block (96 bytes) between workers: two workers never write the
  // same cache line.
  stride_ = 2 * nr_classes_ + 1;
}

LockClassId LockDomain::class_id(std::string_view cls) const {
  const auto classes = lock_class_catalogue();
  for (size_t i = 0; i < classes.size(); ++i)
    if (classes[i].name == cls) return LockClassId(i);
  throw std::invalid_argument("lock class '" + std::string(cls) + "' is not in the lock-class catalogue");
}

double LockDomain::ns_per_tick() const { return costs_ ? 1e-3 : clock_calibration().ns_per_tick; }

void LockDomain::reset_stats(int nr_workers) {
  slots_.assign(size_t(nr_workers) * stride_, LockStatCounters{});
  if (costs_) {
    vthreads_.assign(size_t(nr_workers), LockStatThread{});
    vwait_.assign(size_t(nr_workers), VWaitState{});
  }
}

void LockDomain::attach(int worker, int cpu, int node) {
  LockStatThread& th = stat_thread();
  LockStatCounters* block = slots_.empty() ? nullptr : &slots_[size_t(worker) * stride_];
  th = {this, block, cpu, node, block ? block + nr_classes_ : nullptr};
  if (slots_.empty()) th.domain = nullptr;  // no stats allocated: count nothing
}

void LockDomain::detach() { tls_lockstat = {}; }

std::vector<LockStatRow> LockDomain::rows() const {
  const size_t workers = stride_ ? slots_.size() / stride_ : 0;
  const double ns = ns_per_tick();  // the domain's, whichever thread merges
  // The workers' counters of one block (a class's write or read block), merged.
  const auto merged = [&](size_t block) {
    LockStatCounters m;
    for (size_t w = 0; w < workers; ++w) {
      const LockStatCounters& c = slots_[w * stride_ + block];
      m.con_bounces += c.con_bounces;
      m.contentions += c.contentions;
      m.wait_min = std::min(m.wait_min, c.wait_min);
      m.wait_max = std::max(m.wait_max, c.wait_max);
      m.wait_total += c.wait_total;
      m.acq_bounces += c.acq_bounces;
      m.acquisitions += c.acquisitions;
      m.hold_min = std::min(m.hold_min, c.hold_min);
      m.hold_max = std::max(m.hold_max, c.hold_max);
      m.hold_total += c.hold_total;
      m.handoffs_local += c.handoffs_local;
      m.handoffs_remote += c.handoffs_remote;
    }
    return m;
  };
  const auto row = [&](std::string name, size_t cls, const LockStatCounters& m) {
    LockStatRow r;
    r.cls = std::move(name);
    r.kind = std::string(to_string(kinds_[cls]));
    r.con_bounces = m.con_bounces;
    r.contentions = m.contentions;
    r.wait_min_ns = m.contentions ? double(m.wait_min) * ns : 0.0;
    r.wait_max_ns = double(m.wait_max) * ns;
    r.wait_total_ns = double(m.wait_total) * ns;
    r.wait_avg_ns = m.contentions ? r.wait_total_ns / double(m.contentions) : 0.0;
    r.acq_bounces = m.acq_bounces;
    r.acquisitions = m.acquisitions;
    r.hold_min_ns = double(m.hold_min) * ns;
    r.hold_max_ns = double(m.hold_max) * ns;
    r.hold_total_ns = double(m.hold_total) * ns;
    r.hold_avg_ns = r.hold_total_ns / double(m.acquisitions);
    r.handoffs_local = m.handoffs_local;
    r.handoffs_remote = m.handoffs_remote;
    return r;
  };
  // Per class: its rows (seq_stats: -W then -R when read at all) and its contentions, the sort key.
  struct ClassRows {
    uint64_t contentions;
    std::vector<LockStatRow> rows;
  };
  std::vector<ClassRows> classes;
  for (size_t cls = 0; cls < nr_classes_; ++cls) {
    const LockStatCounters w = merged(cls), r = merged(nr_classes_ + cls);
    if (w.acquisitions == 0 && r.acquisitions == 0) continue;
    const std::string name(lock_class_catalogue()[cls].name);
    ClassRows c{w.contentions + r.contentions, {}};
    if (w.acquisitions) c.rows.push_back(row(r.acquisitions ? name + "-W" : name, cls, w));
    if (r.acquisitions) c.rows.push_back(row(name + "-R", cls, r));
    classes.push_back(std::move(c));
  }
  // lock_stat sorts by contentions, most contended class first.
  std::stable_sort(classes.begin(), classes.end(),
                   [](const ClassRows& a, const ClassRows& b) { return a.contentions > b.contentions; });
  std::vector<LockStatRow> out;
  for (ClassRows& c : classes)
    for (LockStatRow& r : c.rows) out.push_back(std::move(r));
  return out;
}

std::string LockDomain::format(const std::vector<LockStatRow>& rows) {
  // kernel/locking/lockdep_proc.c: seq_header / seq_stats / seq_time (microseconds, two decimals).
  std::string s;
  char buf[512];
  const std::string dashes(40 + 12 * 15, '-');
  s += "lock_stat version 0.4\n" + dashes + "\n";
  std::snprintf(buf, sizeof buf, "%40s %14s %14s %14s %14s %14s %14s %14s %14s %14s %14s %14s %14s\n", "class name",
                "con-bounces", "contentions", "waittime-min", "waittime-max", "waittime-total", "waittime-avg",
                "acq-bounces", "acquisitions", "holdtime-min", "holdtime-max", "holdtime-total", "holdtime-avg");
  s += buf + dashes + "\n";
  for (const auto& r : rows) {
    const auto us = [](double ns) { return ns / 1000.0; };
    std::snprintf(buf, sizeof buf,
                  "\n%40s %14llu %14llu %14.2f %14.2f %14.2f %14.2f %14llu %14llu %14.2f %14.2f %14.2f %14.2f\n",
                  ("&" + r.cls + ":").c_str(), (unsigned long long)r.con_bounces, (unsigned long long)r.contentions,
                  us(r.wait_min_ns), us(r.wait_max_ns), us(r.wait_total_ns), us(r.wait_avg_ns),
                  (unsigned long long)r.acq_bounces, (unsigned long long)r.acquisitions, us(r.hold_min_ns),
                  us(r.hold_max_ns), us(r.hold_total_ns), us(r.hold_avg_ns));
    s += buf;
    const size_t name = r.cls.size() + 1;  // "&class", underlined as the kernel does
    s += std::string(name < 39 ? 39 - name : 0, ' ') + std::string(name, '-') + "\n";
  }
  return s;
}

}  // namespace alloclab
