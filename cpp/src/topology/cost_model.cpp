// The virtual-time cost model (see cost_model.hpp).
#include "alloclab/topology/cost_model.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "alloclab/base/clock.hpp"
#include "alloclab/base/scheduler.hpp"

namespace alloclab {

namespace detail {
ALLOCLAB_TLS constinit thread_local CostModel* tls_costs = nullptr;
}

CostScope::CostScope(CostModel* m) noexcept : previous_(detail::tls_costs) { detail::tls_costs = m; }
CostScope::~CostScope() { detail::tls_costs = previous_; }

namespace {
vt::vtime ps(double ns) { return vt::vtime(std::llround(ns * 1000.0)); }
}  // namespace

CostModel::CostModel(std::shared_ptr<const MachineProfile> profile, Costs costs, std::vector<int> pu_of_cpu,
                     double host_ghz)
    : profile_(std::move(profile)), costs_(costs), pu_of_cpu_(std::move(pu_of_cpu)) {
  const Topology& topo = *profile_->topology();
  for (int pu : pu_of_cpu_) {
    if (pu < 0 || pu >= topo.nr_pus())
      throw std::invalid_argument("pu: " + std::to_string(pu) + " is not a PU of machine '" + profile_->name() +
                                  "' (allowed: 0.." + std::to_string(topo.nr_pus() - 1) + ")");
    node_of_cpu_.push_back(topo.node_of_pu(pu));
  }
  const double ghz = profile_->value("clock.ghz");
  for (int o = 0; o < kNrOps; ++o)
    op_ps_[size_t(o)] = ps(profile_->value("op_cycles." + std::string(kOpNames[o])) / ghz);
  const size_t n = pu_of_cpu_.size();
  transfer_ps_.assign(n * n, 0);
  for (size_t a = 0; a < n; ++a)
    for (size_t b = 0; b < n; ++b) transfer_ps_[a * n + b] = ps(profile_->transfer_ns(pu_of_cpu_[a], pu_of_cpu_[b]));
  wakeup_ps_ = ps(profile_->value("wakeup_ns.futex"));
  misses_in_flight_ = std::max<size_t>(1, size_t(profile_->value_or("misses_in_flight.core", 1)));
  const double core_copy = profile_->value("bandwidth_gbs.core"), node_copy = profile_->value("bandwidth_gbs.node");
  for (const auto& [st, name] : kStreamNames.names) {  // a pattern without figures of its own streams at the copy ones
    const std::string suffix = st == Stream::copy ? "" : "_" + std::string(name);
    core_gbs_[size_t(st)] = profile_->value_or("bandwidth_gbs.core" + suffix, core_copy);
    node_gbs_[size_t(st)] = profile_->value_or("bandwidth_gbs.node" + suffix, node_copy);
  }
  for (const auto& [op, name] : kPageOpNames.names)
    page_ps_[size_t(op)] = {ps(profile_->value_or("page_ns." + std::string(name), 0)),
                            ps(profile_->value_or("page_ns." + std::string(name) + "_ascending", 0))};
  if (!(host_ghz > 0))
    throw std::invalid_argument("host_ghz: " + std::to_string(host_ghz) + " (allowed: > 0, the host's clock)");
  host_to_profile_ = host_ghz / ghz;
  host_mark_.assign(n, 0);
  next_frame_.assign(n, {});
  bulk_ends_.assign(size_t(topo.nr_nodes()), {});
  lines_.assign(size_t(1) << 16, LineState{});
  if (costs_ == Costs::table && profile_->values().count("cache_mib.llc")) {  // measured: the host's misses are real
    llc_lines_ = std::max<uint64_t>(1, uint64_t(profile_->value("cache_mib.llc") * double(1 << 20) / 64));
    for (int pu : pu_of_cpu_) llc_of_cpu_.push_back(profile_->distances().llc(pu));
    fills_.assign(size_t(profile_->distances().nr_llcs()), 0);
    dram_local_ = ps(profile_->value("dram_ns.local"));
    streamed_ = ps(64.0 / core_gbs_[size_t(Stream::load)]);
    last_miss_.assign(n, 0);
    dram_remote_ = ps(profile_->value_or("dram_ns.remote", profile_->value("dram_ns.local")));
    private_fills_.assign(n, {});
    for (size_t i = 0; i < kNrPrivateCacheLevels; ++i) {
      const auto& level = kPrivateCacheLevels[i];
      if (profile_->values().count(level.size_field())) {  // the schema gives each size its latency
        private_lines_[i] = std::max<uint64_t>(1, uint64_t(profile_->value(level.size_field()) * 1024 / 64));
        private_miss_ps_[i] =
            std::max<vt::vtime>(0, ps(profile_->value(level.latency_field())) - op_ps_[size_t(Op::line_access)]);
      }
    }
  }
}

void CostModel::outside_run() { throw std::logic_error("cost model: called outside the run's virtual CPUs"); }

void CostModel::restart_host_clock() { restart(self()); }

void CostModel::sync_measured() {
  vt::Simulator& sim = *vt::Simulator::current();
  const int c = self();
  const uint64_t now = host_ticks();
  if (host_mark_[size_t(c)])
    sim.advance(ps(double(now - host_mark_[size_t(c)]) * clock_calibration().ns_per_tick * host_to_profile_));
  sim.sync();
  host_mark_[size_t(c)] = host_ticks();
}

CostModel::LineState& CostModel::slot(uint64_t key) {
  // Fibonacci hashing takes the product's high bits: its low bits depend only on the key's low bits, which lines
  // at a power-of-two stride (a page apart, a PTE line apart) share.
  const size_t mask = lines_.size() - 1;
  const int bits = std::countr_zero(lines_.size());
  for (size_t i = size_t((key * 0x9e3779b97f4a7c15ull) >> (64 - bits));; i = (i + 1) & mask)
    if (lines_[i].key == key || lines_[i].key == 0) return lines_[i];
}

CostModel::LineState& CostModel::line(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uint64_t key = (a >> 6) + 1;
  if (2 * (nr_lines_ + 1) > lines_.size()) {  // keep the table at most half full
    std::vector<LineState> old(lines_.size() * 2);
    old.swap(lines_);
    for (const LineState& l : old)
      if (l.key) slot(l.key) = l;
  }
  LineState& l = slot(key);
  if (l.key == 0) {
    l.key = key;
    if (llc_lines_)  // the home matters only for a line that leaves the caches
      if (auto it = homes_.upper_bound(a); it != homes_.begin() && a < (--it)->second.first)
        l.home = int8_t(it->second.second);
    ++nr_lines_;
  }
  return l;
}

void CostModel::home(const void* p, uint64_t bytes, int node) {
  const uintptr_t first = reinterpret_cast<uintptr_t>(p), end = first + bytes;
  auto it = homes_.lower_bound(first);
  if (it != homes_.begin() && std::prev(it)->second.first > first) --it;
  while (it != homes_.end() && it->first < end) it = homes_.erase(it);
  homes_.emplace(first, std::pair{end, node});
}

// Not a sync point: no other CPU can reach memory the heap just gave this one before it is published (through a
// lock or a tracked line, which are sync points). With measured costs the host time of the look-ups is moved out
// of the segment by pushing the calling CPU's mark forward.
void CostModel::forget(const void* p, uint64_t bytes) {
  const uint64_t t0 = costs_ == Costs::measured ? host_ticks() : 0;
  const uintptr_t first = reinterpret_cast<uintptr_t>(p) & ~uintptr_t(63);
  for (uintptr_t a = first; a < reinterpret_cast<uintptr_t>(p) + bytes; a += 64) {
    LineState& l = line(reinterpret_cast<const void*>(a));
    l = LineState{.key = l.key, .home = l.home};
  }
  if (costs_ == Costs::measured)
    if (uint64_t& mark = host_mark_[size_t(self())]) mark += host_ticks() - t0;
}

int CostModel::private_level(const LineState& l, int c) const {
  const auto& fills = private_fills_[size_t(c)];
  for (size_t i = 0; i < kNrPrivateCacheLevels; ++i)
    if (!private_lines_[i] || fills[i] - l.private_stamp[i] < private_lines_[i]) return int(i);
  return int(kNrPrivateCacheLevels);
}

vt::vtime CostModel::access(LineState& l, int c, bool write) {
  if (!llc_lines_) return coherence(l, c, write);
  vt::vtime refill = 0;
  const int llc = llc_of_cpu_[size_t(c)];
  bool taken_in = true;  // the line enters c's LLC
  // Where c finds it, for fills: private_level(), whose kNrPrivateCacheLevels is past the private levels.
  int found = int(kNrPrivateCacheLevels);
  if (l.last >= 0) {
    const int last_llc = llc_of_cpu_[size_t(l.last)];
    if (fills_[size_t(last_llc)] - l.stamp >= llc_lines_) {  // every copy has been evicted (written back if dirty)
      l.owner = -1;
      l.nreaders = 0;
      l.many_readers = false;
      uint64_t& last = last_miss_[size_t(c)];
      // The streamer's page (keys are line + 1), in node memory only: its host pages are the model's pages, where a
      // heap object's 4 KiB page is an accident of the host's heap (it would make virtual times depend on it).
      if (l.home >= 0 && last && last != l.key && (last - 1) >> 6 == (l.key - 1) >> 6)
        refill = streamed_;
      else
        refill = l.home < 0 || l.home == node_of_cpu_[size_t(c)] ? dram_local_ : dram_remote_;
      last = l.key;
    } else {
      taken_in = last_llc != llc;
      if (l.last == c) {  // another CPU's line comes by coherence (a transfer, or c's copy as a reader: its L1D)
        found = private_level(l, c);
        if (found > 0) refill = private_miss_ps_[size_t(found - 1)];
      }
    }
  }
  if (taken_in) ++fills_[size_t(llc)];
  if (private_lines_[0]) {  // the private levels' counts matter only where they are modelled
    auto& fills = private_fills_[size_t(c)];
    for (size_t i = 0; i < fills.size(); ++i) fills[i] += found > int(i);
    l.private_stamp = fills;
  }
  l.last = int16_t(c);
  l.stamp = fills_[size_t(llc)];
  return refill + coherence(l, c, write);
}

vt::vtime CostModel::coherence(LineState& l, int c, bool write) {
  if (write) {
    vt::vtime far = 0;
    if (l.owner >= 0 && l.owner != c) far = transfer(l.owner, c);
    for (int i = 0; i < l.nreaders; ++i)
      if (l.readers[size_t(i)] != c) far = std::max(far, transfer(l.readers[size_t(i)], c));
    if (l.many_readers && l.owner >= 0) far = std::max(far, transfer(l.owner, c));
    l.owner = int16_t(c);
    l.nreaders = 0;
    l.many_readers = false;
    return far;
  }
  if (l.owner == c) return 0;
  for (int i = 0; i < l.nreaders; ++i)
    if (l.readers[size_t(i)] == c) return 0;
  vt::vtime near = l.owner >= 0 ? transfer(l.owner, c) : 0;
  for (int i = 0; i < l.nreaders; ++i) near = std::min(near, transfer(l.readers[size_t(i)], c));
  if (l.nreaders < l.readers.size())
    l.readers[l.nreaders++] = int16_t(c);
  else
    l.many_readers = true;
  return near;
}

void CostModel::touch(const void* p, bool write) {
  const SyncPoint sp(*this);
  const vt::vtime wait = access(line(p), self(), write);
  vt::Simulator::current()->advance(op_ps_[size_t(Op::line_access)] + wait);
}

template <class LineOf>
void CostModel::touch_group(size_t n, LineOf line_of, bool write) {
  const SyncPoint sp(*this);
  const int c = self();
  vt::vtime cost = 0;
  for (size_t g = 0; g < n; g += misses_in_flight_) {
    vt::vtime slowest = 0;
    for (size_t i = g; i < std::min(n, g + misses_in_flight_); ++i)
      slowest = std::max(slowest, access(line(line_of(i)), c, write));
    cost += op_ps_[size_t(Op::line_access)] + slowest;
  }
  vt::Simulator::current()->advance(cost);
}

void CostModel::touch_each(const void* first, size_t n, size_t stride, bool write) {
  const char* const base = static_cast<const char*>(first);
  touch_group(
      n, [base, stride](size_t i) { return base + i * stride; }, write);
}

void CostModel::touch_each(std::span<const void* const> lines, bool write) {
  touch_group(
      lines.size(), [lines](size_t i) { return lines[i]; }, write);
}

void CostModel::pages(PageOp op, uint64_t n, PageFrame to, PageFrame from) {
  const bool copy = op == PageOp::copy;
  uint64_t cold = n;  // the pages that follow no page of this CPU's
  if (n > 0 && to.pfn != kNoPfn && (!copy || from.pfn != kNoPfn)) {
    std::array<PageFrame, 2>& next = next_frame_.at(size_t(vt::current_cpu()));
    cold = next[0] == to && (!copy || next[1] == from) ? 0 : 1;
    next = {PageFrame{to.node, to.pfn + n}, copy ? PageFrame{from.node, from.pfn + n} : PageFrame{}};
  }
  fill(self(), (copy ? 2 : 1) * n * (kPageBytes / 64));
  const PageCost& c = page_ps_[size_t(op)];
  stream(2 * n * kPageBytes, to.node, vt::vtime(cold) * c.cold + vt::vtime(n - cold) * c.ascending,
         kPageOpStream[size_t(op)]);
}

void CostModel::stream(uint64_t bytes, int node, vt::vtime at_least, Stream s) {
  if (costs_ == Costs::measured) return;  // the copy or clear really ran, and is in the host time
  const SyncPoint sp(*this);
  vt::Simulator& sim = *vt::Simulator::current();
  const vt::vtime now = sim.now();
  std::vector<vt::vtime>& ends = bulk_ends_.at(size_t(node));
  std::erase_if(ends, [now](vt::vtime e) { return e <= now; });
  const double share = node_gbs_[size_t(s)] / double(ends.size() + 1);
  const double gbs = std::min(core_gbs_[size_t(s)], share);  // bytes per ns
  const vt::vtime d = std::max<vt::vtime>({1, at_least, ps(double(bytes) / gbs)});
  ends.push_back(now + d);
  sim.advance(d);
}

}  // namespace alloclab
