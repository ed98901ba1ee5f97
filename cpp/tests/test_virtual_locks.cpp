// Locks in virtual time: each kind's hand-off rule on a hand-built queue, what they add up to in lock_zoo on a
// 64-CPU two-socket machine (ticket collapses as waiters grow, MCS does not; TTAS grows unfair; the NUMA-aware kinds
// keep hand-offs on one node and beat MCS there, and match their base lock on one node, where they also run on real
// threads), waits that can never end, stops, and the options a virtual-clock run refuses.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "alloclab/base/scheduler.hpp"
#include "alloclab/lab/runner.hpp"
#include "alloclab/locks/lock.hpp"
#include "mm_test_util.hpp"
#include "test_profiles.hpp"

using namespace alloclab;

namespace {

// Two sockets of `cores` cores each, one PU per core: same_llc 20 ns, remote 40 ns (test_profiles.hpp).
std::shared_ptr<const MachineProfile> two_sockets(int cores) {
  return test::test_profile("package:2 numa:1 l3:1 core:" + std::to_string(cores) + " pu:1", {"same_llc", "remote"});
}

// A release by `releaser` at `now` with waiters queued in `cpus` order, each having begun waiting at `began`.
struct Queue {
  explicit Queue(const CostModel& m, std::vector<int> cpus, vt::vtime began = 0) : costs(m) {
    waiters.resize(cpus.size());
    states.assign(size_t(m.nr_cpus()), VWaitState{began});
    for (size_t i = 0; i < cpus.size(); ++i) {
      waiters[i].cpu = cpus[i];
      list.push_back(waiters[i]);
    }
  }
  // `taken_free`: the releaser took the lock free (VRelease::taken_free).
  VRelease release(int releaser, vt::vtime now, uint32_t batch = 0, bool taken_free = false) const {
    VRelease r{releaser, now, list, costs, states, batch};
    r.taken_free = taken_free;
    return r;
  }

  const CostModel& costs;
  std::vector<vt::Waiter> waiters;
  vt::WaiterList list;
  std::vector<VWaitState> states;
};

CostModel model(int cores) {
  std::vector<int> pus(size_t(2 * cores));
  for (size_t i = 0; i < pus.size(); ++i) pus[i] = int(i);
  return CostModel(two_sockets(cores), Costs::table, pus, 1.0);
}

constexpr vt::vtime kNs = vt::kNanosecond;

// What one uncontended side of a kind costs on `m` (LockKindTraits): its locked RMWs at atomic_rmw, or, where they
// take longer, its plain loads and stores at line_access, which run in the RMWs' shadow.
vt::vtime uncontended(const CostModel& m, LockOps ops) {
  return std::max(ops.rmws * m.op(Op::atomic_rmw), ops.accesses * m.op(Op::line_access));
}

// One "zone->lock" on the simulator's fibers, lock_stat on: of kind `kind` (the class's default when empty), in a
// virtual-time domain on two sockets of two cores (CPUs 0-1 and 2-3), its virtual CPUs running as PUs `pus`.
struct VirtualZoneLock {
  VirtualZoneLock(const std::string& kind, std::vector<int> pus)
      : m(two_sockets(2), Costs::table, std::move(pus), 1.0),
        scope(&m),
        d(config(kind), true, false, &m),
        l(reset(d, m.nr_cpus()), "zone->lock") {}

  static LockConfig config(const std::string& kind) {
    LockConfig c;
    if (!kind.empty()) c.set("zone->lock", kind);
    return c;
  }
  static LockDomain& reset(LockDomain& d, int nr_cpus) {
    d.reset_stats(nr_cpus);
    return d;
  }

  CostModel m;
  const CostScope scope;
  const VirtualClockScope vclock;
  LockDomain d;
  Lock l;
};

// Both hand over to the oldest waiter in FIFO order. MCS's release first loads its node's `next`, which the
// successor wrote (a transfer from it), then stores into the successor's node (a transfer to it); qspinlock's head
// spins on the lock word and read its `next` while it waited: the releaser's store is its only transfer.
TEST(VirtualHandoff, McsPassesAfterTwoTransfersQspinlockAfterOne) {
  const CostModel m = model(4);  // cpus 0-3 socket 0, 4-7 socket 1
  const Queue q(m, {5, 1, 2});   // 5 (remote) is the oldest
  for (const auto& [vhandoff, transfers] : {std::pair{&McsSpinlock::vhandoff, 2}, {&Qspinlock::vhandoff, 1}}) {
    const VHandoff h = vhandoff(q.release(0, 1000 * kNs));
    ASSERT_EQ(h.nr_wakes, 1);
    EXPECT_TRUE(h.owned);
    EXPECT_EQ(h.wakes[0].cpu, 5);
    EXPECT_EQ(h.wakes[0].at, 1000 * kNs + transfers * 40 * kNs) << transfers;
  }
}

TEST(VirtualHandoff, TicketWaitsForTheReadsServedBeforeTheNextOwner) {
  const CostModel m = model(4);
  // The oldest (the next ticket) is remote: the nearer waiters' reads (20 ns each) are served before its own 40 ns.
  const Queue far_first(m, {5, 1, 2});
  VHandoff h = TicketSpinlock::vhandoff(far_first.release(0, 0));
  EXPECT_TRUE(h.owned);
  EXPECT_EQ(h.wakes[0].cpu, 5);
  EXPECT_EQ(h.wakes[0].at, (20 + 20 + 40) * kNs);
  // The oldest is near: its read comes first among equals by CPU id.
  const Queue near_first(m, {1, 2, 5});
  h = TicketSpinlock::vhandoff(near_first.release(0, 0));
  EXPECT_EQ(h.wakes[0].cpu, 1);
  EXPECT_EQ(h.wakes[0].at, 20 * kNs);
  // Every waiter more is one read more before the far owner's.
  const Queue more(m, {5, 1, 2, 3, 6});
  EXPECT_EQ(TicketSpinlock::vhandoff(more.release(0, 0)).wakes[0].at, (20 * 3 + 40) * kNs);
  // The reads behind the next owner's keep the line busy until every waiter's is served; a release before then
  // starts its hand-off when they are done.
  h = TicketSpinlock::vhandoff(far_first.release(0, 0));
  EXPECT_EQ(h.line_busy_until, (20 + 20 + 40) * kNs);
  h = TicketSpinlock::vhandoff(more.release(0, 0));
  EXPECT_EQ(h.line_busy_until, (20 * 3 + 40 * 2) * kNs);
  VRelease late = near_first.release(0, 10 * kNs);
  late.line_busy_until = 500 * kNs;
  h = TicketSpinlock::vhandoff(late);
  EXPECT_EQ(h.wakes[0].at, (500 + 20) * kNs);
  EXPECT_EQ(h.line_busy_until, (500 + 20 + 20 + 40) * kNs);
}

TEST(VirtualHandoff, TtasIsARaceTheNearestLookerWins) {
  const CostModel m = model(4);
  const vt::vtime step = m.spin_step();
  // All began waiting at 0 and the release comes much later: every one is at the kMaxBackoff period, so they look
  // at the same moment and the nearest (a same-socket CPU; among them the lowest id) wins; not owned.
  const Queue q(m, {6, 3, 2});
  const VHandoff h = TtasSpinlock::vhandoff(q.release(0, 5'000'000 * step));
  ASSERT_EQ(h.nr_wakes, 1);
  EXPECT_FALSE(h.owned);
  EXPECT_EQ(h.wakes[0].cpu, 2);
  EXPECT_GE(h.wakes[0].at, 5'000'000 * step);
  EXPECT_LT(h.wakes[0].at, 5'000'000 * step + step * TtasSpinlock::kMaxBackoff);
}

// The spinners that look before the winner's read is served read the word free too: the winner waits out their
// reads (one transfer each from the releaser), and their failed exchanges take the line from the winner after its own
// (one transfer each), which the next release's store queues behind. One spinner: no storm.
TEST(VirtualHandoff, TtasSpinnersThatReadTheWordFreeStormTheLine) {
  const CostModel m = model(4);
  const vt::vtime step = m.spin_step();
  const vt::vtime now = 5'000'000 * step;
  const Queue q(m, {6, 3, 2});  // at the kMaxBackoff period: they look at the same moment; 2 wins (see above)
  const VRelease r = q.release(0, now);
  const vt::vtime look = ttas_next_look(r, 0, TtasSpinlock::kMaxBackoff);
  VHandoff h = TtasSpinlock::vhandoff(r);
  EXPECT_EQ(h.wakes[0].cpu, 2);
  EXPECT_EQ(h.wakes[0].at, look + (40 + 20) * kNs);  // 6's and 3's reads first
  const vt::vtime rmw = m.op(Op::atomic_rmw);
  EXPECT_EQ(h.line_busy_until, h.wakes[0].at + 20 * kNs + rmw + (40 + 20) * kNs);  // its exchange, then theirs
  // A release whose store comes while the line is still busy: the looks start after it.
  VRelease busy = q.release(0, now + kNs);
  busy.line_busy_until = h.line_busy_until;
  EXPECT_GE(TtasSpinlock::vhandoff(busy).wakes[0].at, h.line_busy_until);
  // One spinner: its look, its read and its exchange, nothing else.
  const Queue one(m, {3});
  h = TtasSpinlock::vhandoff(one.release(0, now));
  EXPECT_EQ(h.wakes[0].cpu, 3);
  EXPECT_EQ(h.wakes[0].at, look);
  EXPECT_EQ(h.line_busy_until, look + 20 * kNs + rmw);
}

TEST(VirtualHandoff, SleepingKindsWakeASpinnerAndTheOldestSleeper) {
  const CostModel m = model(4);
  const vt::vtime step = m.spin_step();
  Queue q(m, {1, 2, 3});
  q.states[1].began = 0;  // asleep by the release: its kSpins look are over
  q.states[2].began = 0;
  q.states[3].began = 1000 * step;  // still spinning
  const VHandoff h = FutexMutex::vhandoff(q.release(0, 1000 * step + 10 * step));
  ASSERT_EQ(h.nr_wakes, 2);
  EXPECT_FALSE(h.owned);
  EXPECT_EQ(h.wakes[0].cpu, 3);
  EXPECT_EQ(h.wakes[0].at, 1000 * step + 10 * step);
  EXPECT_EQ(h.wakes[1].cpu, 1);  // the oldest sleeper, one futex wake-up (5 us) later
  EXPECT_EQ(h.wakes[1].at, 1010 * step + 5000 * kNs);
  // pthread_mutex does not spin: only the oldest sleeper.
  const VHandoff p = PthreadMutex::vhandoff(q.release(0, 1010 * step));
  ASSERT_EQ(p.nr_wakes, 1);
  EXPECT_EQ(p.wakes[0].cpu, 1);
}

TEST(VirtualHandoff, KmutexSpinnerRacesSleeperWakesAndAStarvingWaiterGetsItHandedOff) {
  const CostModel m = model(4);
  const vt::vtime step = m.spin_step();
  const vt::vtime now = 10 * KernelMutex::kSpins * step;
  Queue q(m, {1, 5, 2});
  q.states[1].began = 0;    // asleep: its spin budget is over
  q.states[5].began = now;  // spinning (the OSQ's head: the oldest spinner)
  q.states[2].began = now;
  VHandoff h = KernelMutex::vhandoff(q.release(0, now));
  ASSERT_EQ(h.nr_wakes, 2);
  EXPECT_FALSE(h.owned);
  EXPECT_EQ(h.wakes[0].cpu, 5);
  EXPECT_EQ(h.wakes[0].at, now + 40 * kNs);
  EXPECT_EQ(h.wakes[1].cpu, 1);
  EXPECT_EQ(h.wakes[1].at, now + 5000 * kNs);
  q.states[1].lost = 1;  // woken before and lost: it set HANDOFF and spins on the owner
  h = KernelMutex::vhandoff(q.release(0, now));
  ASSERT_EQ(h.nr_wakes, 1);
  EXPECT_TRUE(h.owned);
  EXPECT_EQ(h.wakes[0].cpu, 1);
  EXPECT_EQ(h.wakes[0].at, now + 20 * kNs);
}

TEST(VirtualHandoff, CnaPassesToTheFirstLocalWaiterReadingThoseItPassesOver) {
  const CostModel m = model(4);
  Queue q(m, {5, 6, 1, 2});
  q.waiters[1].since = 600 * kNs;  // 6, 1 and 2 queued after the previous release (500 ns), 5 before it
  q.waiters[2].since = 700 * kNs;
  q.waiters[3].since = 800 * kNs;
  VRelease r = q.release(0, 1000 * kNs);
  r.previous_release = 500 * kNs;
  VHandoff h = CnaSpinlock::vhandoff(r);
  EXPECT_TRUE(h.owned);
  EXPECT_TRUE(h.batch);
  EXPECT_EQ(h.wakes[0].cpu, 1);
  EXPECT_EQ(h.wakes[0].at, (1000 + 40 + 20) * kNs);  // reads 6's node (5's was read before), then a local transfer
  // At the threshold the secondary queue's head (the oldest) goes first.
  r.batch = CnaSpinlock::kThreshold;
  h = CnaSpinlock::vhandoff(r);
  EXPECT_FALSE(h.batch);
  EXPECT_EQ(h.wakes[0].cpu, 5);
  EXPECT_EQ(h.wakes[0].at, (1000 + 40) * kNs);
  // When 5 came after the previous release nobody waited: it holds the pending bit and gets the word, remote or not.
  q.waiters[0].since = 500 * kNs;
  r.batch = 0;
  h = CnaSpinlock::vhandoff(r);
  EXPECT_TRUE(h.owned);
  EXPECT_FALSE(h.batch);
  EXPECT_EQ(h.wakes[0].cpu, 5);
  EXPECT_EQ(h.wakes[0].at, (1000 + 40) * kNs);
}

TEST(VirtualHandoff, CohortPassesLocallyThenLetsEveryNodesHeadRace) {
  const CostModel m = model(4);
  const vt::vtime step = m.spin_step();
  const Queue q(m, {5, 1, 2});
  VHandoff h = CohortSpinlock::vhandoff(q.release(0, 0));
  EXPECT_TRUE(h.owned);
  EXPECT_TRUE(h.batch);
  EXPECT_EQ(h.wakes[0].cpu, 1);
  EXPECT_EQ(h.wakes[0].at, 2 * 20 * kNs);  // the local MCS pass: two transfers within the socket
  // At the limit: the global word is free; node 1's head (5) and node 0's (1) race, and the nearer one wins.
  const vt::vtime late = 5'000'000 * step;
  h = CohortSpinlock::vhandoff(q.release(0, late, CohortSpinlock::kBatchLimit));
  EXPECT_FALSE(h.owned);
  EXPECT_FALSE(h.batch);
  EXPECT_EQ(h.wakes[0].cpu, 1);
  EXPECT_GE(h.wakes[0].at, late);
}

TEST(VirtualHandoff, HmcsPassesLocallyThenInRootOrderAndFromTheFastPathToTheOldest) {
  const CostModel m = model(4);
  const Queue q(m, {5, 1, 2});
  VHandoff h = HmcsSpinlock::vhandoff(q.release(0, 0));
  EXPECT_TRUE(h.owned);
  EXPECT_TRUE(h.batch);
  EXPECT_EQ(h.wakes[0].cpu, 1);
  h = HmcsSpinlock::vhandoff(q.release(0, 0, HmcsSpinlock::kBatchLimit));
  EXPECT_TRUE(h.owned);
  EXPECT_FALSE(h.batch);
  EXPECT_EQ(h.wakes[0].cpu, 5);
  EXPECT_EQ(h.wakes[0].at, 2 * 40 * kNs);  // the root's MCS pass to the other socket
  // A holder that took the lock free (AHMCS's fast path) holds the root alone: the root's next entry is the oldest
  // waiter's node, whatever the node of the releaser, and no batch starts.
  const Queue local_first(m, {1, 5, 2});
  h = HmcsSpinlock::vhandoff(q.release(0, 0, 0, /*taken_free=*/true));
  EXPECT_TRUE(h.owned);
  EXPECT_FALSE(h.batch);
  EXPECT_EQ(h.wakes[0].cpu, 5);
  EXPECT_EQ(h.wakes[0].at, 2 * 40 * kNs);
  h = HmcsSpinlock::vhandoff(local_first.release(0, 0, 0, /*taken_free=*/true));
  EXPECT_FALSE(h.batch);
  EXPECT_EQ(h.wakes[0].cpu, 1);
  EXPECT_EQ(h.wakes[0].at, 2 * 20 * kNs);
}

TEST(VirtualHandoff, ShfllockHeadIsTheShuffledLocalWaiterAndRaces) {
  const CostModel m = model(4);
  const Queue q(m, {5, 1, 2});
  VHandoff h = Shfllock::vhandoff(q.release(0, 7 * kNs));
  EXPECT_FALSE(h.owned);  // it still takes the word, against newcomers
  EXPECT_TRUE(h.batch);
  EXPECT_EQ(h.wakes[0].cpu, 1);
  EXPECT_EQ(h.wakes[0].at, 7 * kNs);  // it spins on the word: the transfer is paid by its exchange
  h = Shfllock::vhandoff(q.release(0, 7 * kNs, Shfllock::kMaxBatch));
  EXPECT_FALSE(h.batch);
  EXPECT_EQ(h.wakes[0].cpu, 5);
}

double zoo(const char* kind, int threads, const char* figure) {
  RunOptions opt;
  opt.clock = ClockKind::virtual_time;
  opt.machine = two_sockets(32);
  opt.lockstat = false;
  opt.placement = Placement::parse("scatter");
  const RunResult r = run("lock_zoo",
                          {{"threads", int64_t(threads)},
                           {"iterations", int64_t(12'800 / threads)},
                           {"hold_ns", int64_t(100)},
                           {"think_ns", int64_t(200)},
                           {"lock", std::string(kind)}},
                          opt);
  return std::get<double>(mmtest::summary_value(r, figure));
}

TEST(VirtualLockZoo, TicketCollapsesAsWaitersGrowAndMcsDoesNot) {
  // Boyd-Wickizer et al., "Non-scalable locks are dangerous" (OLS 2012): ticket throughput falls with the number of
  // waiters, MCS throughput stays at its two transfers per hand-off.
  std::vector<double> ticket, mcs;
  for (int n : {1, 2, 4, 8, 16, 32, 64}) {
    ticket.push_back(zoo("ticket", n, "acquisitions_per_s"));
    mcs.push_back(zoo("mcs", n, "acquisitions_per_s"));
  }
  // One CPU: no hand-off at all; the two differ by their uncontended acquisition and release alone (LockKindTraits).
  const CostModel m = model(32);
  const auto uncontended_s = [&](LockKind k) {
    const LockKindInfo& info = lock_kinds()[size_t(k)];
    return double(uncontended(m, info.lock) + uncontended(m, info.unlock)) / 1e12;
  };
  EXPECT_NEAR(1 / mcs[0] - 1 / ticket[0], uncontended_s(LockKind::mcs) - uncontended_s(LockKind::ticket), 1e-15);
  EXPECT_GT(uncontended_s(LockKind::mcs), uncontended_s(LockKind::ticket));  // two RMWs and three accesses, one and two
  for (size_t i = 3; i < ticket.size(); ++i) {
    EXPECT_LT(ticket[i], mcs[i]) << "at " << (1 << i) << " CPUs";
    EXPECT_LT(ticket[i], ticket[i - 1]) << "at " << (1 << i) << " CPUs";
    // Not quite flat: the queue keeps the start gate's order, and with it a share of remote hand-offs that the seed's
    // draw sets at each size (16 -> 32 CPUs: -2.9 % at seed 1).
    EXPECT_GE(mcs[i], mcs[i - 1] * 0.95) << "at " << (1 << i) << " CPUs";
  }
  EXPECT_LT(ticket.back(), mcs.back() / 4);
}

TEST(VirtualLockZoo, TtasGrowsUnfairWithCpus) {
  // The nearest spinner wins each race, so the far ones starve: max/min throughput grows (to infinity once one
  // worker gets nothing in the common span), and Jain's index, defined throughout, falls.
  EXPECT_LT(zoo("spin", 2, "fairness_max_min"), zoo("spin", 4, "fairness_max_min"));
  EXPECT_LE(zoo("spin", 4, "fairness_max_min"), zoo("spin", 64, "fairness_max_min"));
  const double at2 = zoo("spin", 2, "fairness_jain");
  const double at8 = zoo("spin", 8, "fairness_jain");
  const double at64 = zoo("spin", 64, "fairness_jain");
  EXPECT_GT(at2, at8);
  EXPECT_GT(at8, at64);
  EXPECT_EQ(zoo("mcs", 64, "fairness_max_min"), zoo("ticket", 64, "fairness_max_min"));  // FIFO: both fair alike
}

// lock_zoo under contention (32 CPUs, 100 ns holds, 200 ns between) with lock_stat on (free in virtual time).
RunResult zoo_run(const char* kind, std::shared_ptr<const MachineProfile> machine) {
  RunOptions opt;
  opt.clock = ClockKind::virtual_time;
  opt.machine = std::move(machine);
  opt.placement = Placement::parse("scatter");
  return run("lock_zoo",
             {{"threads", int64_t(32)},
              {"iterations", int64_t(400)},
              {"hold_ns", int64_t(100)},
              {"think_ns", int64_t(200)},
              {"lock", std::string(kind)}},
             opt);
}

struct ZooFigures {
  double rate;   // acquisitions per virtual second
  double local;  // share of hand-offs within a node
};

ZooFigures zoo_figures(const char* kind, std::shared_ptr<const MachineProfile> machine) {
  const RunResult r = zoo_run(kind, std::move(machine));
  const LockStatRow& row = r.lockstat.at(0);
  EXPECT_EQ(row.cls, "lock_zoo");
  EXPECT_EQ(row.acquisitions, 32u * 400u) << kind;  // exact, for every kind
  EXPECT_EQ(row.handoffs_local + row.handoffs_remote, row.contentions) << kind;
  const double handoffs = double(row.handoffs_local + row.handoffs_remote);
  const double rate = std::get<double>(mmtest::summary_value(r, "acquisitions_per_s"));
  std::printf("%-10s acquisitions/s %.4g  local hand-offs %.1f%% of %.0f\n", kind, rate,
              handoffs > 0 ? 100.0 * double(row.handoffs_local) / handoffs : 0.0, handoffs);
  return {rate, handoffs > 0 ? double(row.handoffs_local) / handoffs : 0.0};
}

const char* const kNumaKinds[] = {"cna", "cohort", "hmcs", "shfllock"};

TEST(VirtualLockZoo, NumaAwareKindsKeepHandOffsOnANodeAndBeatMcsOnTwoNodes) {
  const auto machine = two_sockets(16);  // 32 CPUs, scatter: 16 on each node
  std::printf("two nodes, 32 CPUs:\n");
  const ZooFigures mcs = zoo_figures("mcs", machine);
  EXPECT_LT(mcs.local, 0.6);  // FIFO over a scattered queue: about half
  for (const char* kind : kNumaKinds) {
    const ZooFigures f = zoo_figures(kind, machine);
    EXPECT_GT(f.local, 0.9) << kind;
    EXPECT_GT(f.local, mcs.local + 0.3) << kind;
    EXPECT_GT(f.rate, mcs.rate * 1.02) << kind;
  }
}

// On one node a NUMA-aware kind is its base lock (LockKindTraits::base): cna and shfllock qspinlock's word with an
// MCS queue whose head spins on it, cohort and hmcs MCS locks.
TEST(VirtualLockZoo, NumaAwareKindsMatchTheirBaseLockOnOneNode) {
  const auto machine = test::test_profile("package:1 numa:1 l3:1 core:32 pu:1", {"same_llc"});
  std::printf("one node, 32 CPUs:\n");
  for (const char* kind : kNumaKinds) {
    const std::string base(lock_kinds()[size_t(parse_lock_kind(kind, "kind"))].base);
    const ZooFigures b = zoo_figures(base.c_str(), machine);
    const ZooFigures f = zoo_figures(kind, machine);
    EXPECT_EQ(f.local, 1.0) << kind;
    EXPECT_NEAR(f.rate / b.rate, 1.0, 0.05) << kind << " against " << base;
  }
}

TEST(VirtualLockZoo, EveryKindCountsExactlyOnTwoNodes) {
  for (const LockKindInfo& k : lock_kinds()) zoo_figures(std::string(k.name).c_str(), two_sockets(16));
}

// A NUMA-aware kind on one node is allowed in both clocks: it degenerates to its base lock, every hand-off local.
TEST(VirtualLockZoo, NumaAwareKindsOnOneNodeRunInBothClocks) {
  for (const char* kind : kNumaKinds) {
    RunOptions real;
    real.model = Topology::synthetic("node:1 core:2 pu:1");
    RunOptions virt;
    virt.clock = ClockKind::virtual_time;
    virt.machine = test::test_profile("package:1 numa:1 l3:1 core:2 pu:1", {"same_llc"});
    for (const RunOptions& opt : {real, virt}) {
      const RunResult r =
          run("lock_zoo", {{"threads", int64_t(2)}, {"iterations", int64_t(2000)}, {"lock", std::string(kind)}}, opt);
      ASSERT_EQ(r.lockstat.size(), 1u);
      EXPECT_EQ(r.lockstat[0].kind, kind);
      EXPECT_EQ(r.lockstat[0].acquisitions, 4000u) << kind;
      EXPECT_EQ(r.lockstat[0].handoffs_local, r.lockstat[0].contentions) << kind;
      EXPECT_EQ(r.lockstat[0].handoffs_remote, 0u) << kind;
    }
  }
}

TEST(VirtualLock, AWaitThatCanNeverEndNamesTheLockAndTheCpus) {
  VirtualZoneLock v("", {0, 1, 2});
  Lock& l = v.l;
  vt::Simulator sim;
  try {
    sim.run(3, [&](int cpu) {
      LockToken t;
      l.lock(t);  // cpu 0 takes it and never lets go; 1 and 2 wait forever
      (void)cpu;
    });
    FAIL() << "no deadlock reported";
  } catch (const vt::VirtualDeadlock& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("zone->lock"), std::string::npos) << what;
    EXPECT_NE(what.find("cpu 1"), std::string::npos) << what;
    EXPECT_NE(what.find("cpu 2"), std::string::npos) << what;
  }
}

TEST(VirtualLock, CountsAndTimesInLockStatAreVirtual) {
  VirtualZoneLock v("", {0, 2});  // one CPU on each socket
  LockDomain& d = v.d;
  Lock& l = v.l;
  vt::Simulator sim;
  sim.run(2, [&](int cpu) {
    d.attach(cpu, cpu == 0 ? 0 : 2);
    for (int i = 0; i < 3; ++i) {
      LockToken t;
      l.lock(t);
      spin_for_ticks(ns_to_ticks(100));  // a 100 ns hold
      l.unlock(t);
    }
  });
  const std::vector<LockStatRow> rows = d.rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].acquisitions, 6u);
  EXPECT_EQ(rows[0].hold_min_ns, 100.0);  // exactly: virtual time
  EXPECT_EQ(rows[0].hold_max_ns, 100.0);
  EXPECT_GT(rows[0].contentions, 0u);
}

// Every kind's uncontended acquisition and release cost what its real code does to memory (LockKindTraits): its
// locked RMWs at the profile's atomic_rmw (2 cycles at 2.5 GHz), or, where they take longer, its plain loads and
// stores at line_access (3 cycles each), which run in the RMWs' shadow.
TEST(VirtualLock, AnUncontendedKindCostsItsOwnFastPath) {
  for (const LockKindInfo& k : lock_kinds()) {
    SCOPED_TRACE(std::string(k.name));
    VirtualZoneLock v(std::string(k.name), {0});
    vt::vtime locked = 0, unlocked = 0;
    vt::Simulator sim;
    sim.run(1, [&](int cpu) {
      v.d.attach(cpu, 0);
      LockToken t;
      const vt::vtime t0 = sim.now();
      v.l.lock(t);
      const vt::vtime t1 = sim.now();
      v.l.unlock(t);
      locked = t1 - t0;
      unlocked = sim.now() - t1;
    });
    EXPECT_EQ(locked, uncontended(v.m, k.lock));
    EXPECT_EQ(unlocked, uncontended(v.m, k.unlock));
    EXPECT_GE(k.lock.rmws + k.unlock.rmws, 1);  // every kind takes its word with a locked RMW
  }
}

// A ticket lock on the simulator's fibers (two sockets: CPUs 0-1 and 2-3; 20 ns within one, 40 ns across). CPU 0
// holds it 1000 ns while 1, 2 and 3 queue; each of them holds it 10 ns. CPU 0's release (at r0) has three re-reads
// to serve: CPU 1's (20 ns) first, it owns the lock at r0 + 20; CPUs 2 and 3 read after it (40 ns each), the line is
// busy until r0 + 100. CPU 1 releases at r0 + 30, but its store queues behind those reads: its hand-off starts at
// r0 + 100 and CPU 2's read comes 40 ns later (r0 + 140; the line busy until r0 + 180 with CPU 3's); CPU 2's release
// at r0 + 150 waits for r0 + 180, then CPU 3's read: r0 + 200. (Starting each hand-off at its release instead gave
// r0 + 70 and r0 + 100: a release cheaper the fewer waiters read before the next owner, whatever the others cost.)
TEST(VirtualLock, TicketReleaseQueuesBehindTheLastReleasesReReads) {
  VirtualZoneLock v("ticket", {0, 1, 2, 3});
  LockDomain& d = v.d;
  Lock& l = v.l;
  std::vector<vt::vtime> acquired(4), released(4);
  vt::Simulator sim;
  sim.run(4, [&](int cpu) {
    d.attach(cpu, cpu);
    spin_for_ticks(ns_to_ticks(100 * cpu));  // arrivals: 0, then 1, 2, 3, each while 0 holds it
    LockToken t;
    l.lock(t);
    acquired[size_t(cpu)] = clock_ticks();
    spin_for_ticks(ns_to_ticks(cpu == 0 ? 1000 : 10));
    released[size_t(cpu)] = clock_ticks();
    l.unlock(t);
  });
  const vt::vtime r0 = released[0];
  EXPECT_EQ(acquired[1] - r0, 20 * kNs);
  EXPECT_EQ(released[1] - r0, 30 * kNs);
  EXPECT_EQ(acquired[2] - r0, 140 * kNs);
  EXPECT_EQ(acquired[3] - r0, 200 * kNs);
  const std::vector<LockStatRow> rows = d.rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].acquisitions, 4u);
  EXPECT_EQ(rows[0].contentions, 3u);
}

// hmcs on the simulator's fibers: CPU 0 takes the free lock (AHMCS's fast path: the root alone), CPU 2 (the other
// socket) queues, then CPU 1 (CPU 0's socket). The release goes to CPU 2, the root's next entry; a holder of node 0's
// lock would have passed it to CPU 1 first.
TEST(VirtualLock, HmcsFastPathHolderReleasesInRootOrder) {
  VirtualZoneLock v("hmcs", {0, 1, 2});  // CPUs 0 and 1 on socket 0, CPU 2 on socket 1
  LockDomain& d = v.d;
  Lock& l = v.l;
  std::vector<int> order;
  vt::Simulator sim;
  sim.run(3, [&](int cpu) {
    d.attach(cpu, cpu);
    spin_for_ticks(ns_to_ticks(cpu == 0 ? 0 : cpu == 2 ? 100 : 200));  // arrivals: 0, then 2, then 1
    LockToken t;
    l.lock(t);
    order.push_back(cpu);
    spin_for_ticks(ns_to_ticks(1000));
    l.unlock(t);
  });
  EXPECT_EQ(order, (std::vector<int>{0, 2, 1}));
  const std::vector<LockStatRow> rows = d.rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].acquisitions, 3u);
  EXPECT_EQ(rows[0].contentions, 2u);
}

TEST(VirtualRun, RefusesOptionsThatMakeNoSenseThere) {
  const auto message = [](RunOptions opt) {
    try {
      run("lock_zoo", {}, opt);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  RunOptions v;
  v.clock = ClockKind::virtual_time;
  EXPECT_EQ(message(v).rfind("machine: required with clock='virtual'", 0), 0u) << message(v);
  v.machine = two_sockets(2);
  RunOptions with_model = v;
  with_model.model = Topology::synthetic("node:2 core:1 pu:1");
  EXPECT_EQ(message(with_model).rfind("topology: ", 0), 0u) << message(with_model);
  RunOptions strict = v;
  strict.strict = true;
  EXPECT_EQ(message(strict).rfind("strict: ", 0), 0u) << message(strict);
  RunOptions crowded = v;
  crowded.placement.policy = Placement::Policy::list;
  crowded.placement.pus = {0, 0};
  EXPECT_EQ(message(crowded).rfind("placement: ", 0), 0u) << message(crowded);
  RunOptions real;
  real.machine = two_sockets(2);
  EXPECT_EQ(message(real).rfind("machine: ", 0), 0u) << message(real);
  real.machine = nullptr;
  real.costs = Costs::measured;
  EXPECT_EQ(message(real).rfind("costs: ", 0), 0u) << message(real);
}

TEST(VirtualRun, ATimeoutStopsIt) {
  RunOptions opt;
  opt.clock = ClockKind::virtual_time;
  opt.machine = two_sockets(4);
  opt.timeout_s = 0.2;
  const RunResult r = run(
      "lock_zoo", {{"threads", int64_t(8)}, {"iterations", int64_t(1'000'000'000)}, {"lock", std::string("mcs")}}, opt);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stop_reason.rfind("timeout after", 0), 0u) << r.stop_reason;
}

}  // namespace
