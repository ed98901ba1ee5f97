// Locks: mutual exclusion of every kind (NUMA-aware ones with waiters on two nodes), FIFO hand-off of the FIFO
// kinds, CNA's order over qspinlock's word (pending waiter, secondary queue), trylock, lock_stat arithmetic (hand-offs
// by node included), bad kind names, hmcs's fast path (the order of its release, mutual exclusion with two-level
// acquirers).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "alloclab/base/clock.hpp"
#include "alloclab/locks/lock.hpp"
#include "alloclab/locks/qspinlock_slowpath.hpp"

using namespace alloclab;

namespace {

std::vector<LockKind> all_kinds() {
  std::vector<LockKind> v;
  for (const LockKindInfo& k : lock_kinds()) v.push_back(k.kind);
  return v;
}

LockConfig config_for(LockKind k) {
  LockConfig c;
  c.set("zone->lock", std::string(to_string(k)));
  return c;
}

bool oversubscribed(int threads) { return unsigned(threads) > std::thread::hardware_concurrency(); }

struct KindThreads : ::testing::TestWithParam<std::tuple<LockKind, int>> {};

TEST_P(KindThreads, CounterUnderLockIsExactAndLockStatCountsEveryAcquisition) {
  const auto [kind, threads] = GetParam();
  constexpr uint64_t kIters = 20000;
  LockDomain dom(config_for(kind), /*lockstat=*/true, oversubscribed(threads));
  dom.reset_stats(threads);
  Lock lock(dom, "zone->lock");
  ASSERT_EQ(lock.kind(), kind);
  uint64_t counter = 0;  // deliberately not atomic: only the lock protects it
  std::vector<std::thread> ts;
  for (int w = 0; w < threads; ++w)
    ts.emplace_back([&, w] {
      dom.attach(w, w, w % 2);  // two model nodes: NUMA-aware kinds queue by node
      for (uint64_t i = 0; i < kIters; ++i) {
        LockGuard g(lock);
        counter = counter + 1;
      }
      LockDomain::detach();
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(counter, kIters * uint64_t(threads));
  const auto rows = dom.rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].cls, "zone->lock");
  EXPECT_EQ(rows[0].kind, to_string(kind));
  EXPECT_EQ(rows[0].acquisitions, kIters * uint64_t(threads));
  EXPECT_LE(rows[0].contentions, rows[0].acquisitions);
  EXPECT_LE(rows[0].con_bounces, rows[0].contentions);
  EXPECT_LE(rows[0].acq_bounces, rows[0].acquisitions);
  EXPECT_EQ(rows[0].handoffs_local + rows[0].handoffs_remote, rows[0].contentions);
  if (threads == 1) {
    EXPECT_EQ(rows[0].contentions, 0u);
    EXPECT_EQ(rows[0].acq_bounces, 1u);  // the first acquisition moves the lock from "no CPU" to CPU 0
  }
}

INSTANTIATE_TEST_SUITE_P(AllKinds, KindThreads,
                         ::testing::Combine(::testing::ValuesIn(all_kinds()), ::testing::Values(1, 2, 4, 8)),
                         [](const auto& info) {
                           return std::string(to_string(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "threads";
                         });

struct Fifo : ::testing::TestWithParam<LockKind> {};

// Waiters queue in a known order while the main thread holds the lock; FIFO locks must hand over in that order.
TEST_P(Fifo, HandOffFollowsArrivalOrder) {
  constexpr int kWaiters = 6;
  LockDomain dom(config_for(GetParam()), false, true /* yield: more threads than CPUs */);
  Lock lock(dom, "zone->lock");
  std::vector<int> order;
  LockToken main_token;
  lock.lock(main_token);
  std::vector<std::thread> ts;
  for (int i = 0; i < kWaiters; ++i) {
    ts.emplace_back([&, i] {
      LockGuard g(lock);
      order.push_back(i);
    });
    while (lock.queued(main_token) != uint32_t(i + 1)) std::this_thread::yield();  // waiter i is now in the queue
  }
  lock.unlock(main_token);
  for (auto& t : ts) t.join();
  std::vector<int> expected(kWaiters);
  for (int i = 0; i < kWaiters; ++i) expected[size_t(i)] = i;
  EXPECT_EQ(order, expected);
  LockToken last;
  lock.lock(last);
  EXPECT_EQ(lock.queued(last), 0u);
  lock.unlock(last);
}

INSTANTIATE_TEST_SUITE_P(FifoKinds, Fifo, ::testing::Values(LockKind::ticket, LockKind::mcs, LockKind::qspinlock),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// The waiters queued on `lock` whose next links reach its tail (call while the queue only grows: before the first
// pass there is no secondary queue, whose links form a circle).
uint32_t linked_waiters(const CnaSpinlock& lock) {
  const uint32_t v = lock.val().load(std::memory_order_acquire);
  if (!(v & QspinlockVal::kTailMask)) return 0;
  const McsNode* last = decode_tail<CnaNode>(v & QspinlockVal::kTailMask);
  uint32_t n = 0;
  for (int c = 0; c < qspinlock_cpus_used(); ++c)
    for (uint32_t i = 0; i < qnodes<CnaNode>[c].count.load() && i < QspinlockVal::kMaxNodes; ++i) {
      const McsNode* p = &qnodes<CnaNode>[c].nodes[i];
      while (p && p != last) p = p->next_acquire();
      n += p == last;
    }
  return n;
}

// The order in which waiters on model nodes `nodes` get a CNA lock the test thread (node 0) holds: waiter 0 sets the
// pending bit, the others queue one by one, each linked in before the next starts; then the holder releases.
std::vector<int> cna_order(const std::vector<int>& nodes) {
  CnaSpinlock lock;
  CnaSpinlock::Token held{0};
  EXPECT_TRUE(lock.enter(held));
  std::vector<int> order;  // under the lock
  std::vector<std::thread> ts;
  for (size_t i = 0; i < nodes.size(); ++i) {
    ts.emplace_back([&, i] {
      CnaSpinlock::Token t{nodes[i]};
      if (!lock.enter(t)) lock.wait(t, /*yield=*/true);
      order.push_back(int(i));
      lock.leave(t);
    });
    if (i == 0)
      while (!(lock.val().load() & QspinlockVal::kPendingVal)) std::this_thread::yield();
    else
      while (linked_waiters(lock) != i) std::this_thread::yield();
  }
  lock.leave(held);
  for (auto& t : ts) t.join();
  EXPECT_EQ(lock.val().load(), 0u);  // free, no tail left behind
  return order;
}

// On one node CNA is qspinlock: the pending waiter, then the queue in order.
TEST(CnaOnQspinlock, OnOneNodeThePendingWaiterThenTheQueueInOrder) {
  EXPECT_EQ(cna_order({0, 0, 0, 0}), (std::vector<int>{0, 1, 2, 3}));
}

// The pending waiter (node 1) goes first whatever its node. Head 1 (node 1) passes over 2 (node 0) to 3 (node 1),
// moving 2 to the secondary queue; head 3, alone in the main queue, makes the secondary queue the main one
// (cna_try_clear_tail) and 2 gets the lock last, with the word's tail then its node's.
TEST(CnaOnQspinlock, TheHeadPassesToItsNodeAndAloneSplicesTheSecondaryQueueIn) {
  EXPECT_EQ(cna_order({1, 1, 0, 1}), (std::vector<int>{0, 1, 3, 2}));
}

// As above with 4 (node 0) behind 3: head 3 finds no waiter of node 1, so the secondary queue (2) goes in front of
// the main queue (4), and 2 then passes to 4 on its own node.
TEST(CnaOnQspinlock, WithNoLocalWaiterTheSecondaryQueueGoesFirst) {
  EXPECT_EQ(cna_order({1, 1, 0, 1, 0}), (std::vector<int>{0, 1, 3, 2, 4}));
}

struct EveryKind : ::testing::TestWithParam<LockKind> {};

TEST_P(EveryKind, TrylockFailsWhileHeldAndCountsNothing) {
  LockDomain dom(config_for(GetParam()), true, false);
  dom.reset_stats(2);
  Lock lock(dom, "zone->lock");
  LockToken a;
  dom.attach(0, 0);
  lock.lock(a);
  bool other_got_it = true;
  std::thread([&] {
    dom.attach(1, 1);
    LockToken b;
    other_got_it = lock.trylock(b);
    if (other_got_it) lock.unlock(b);
    LockDomain::detach();
  }).join();
  EXPECT_FALSE(other_got_it);
  lock.unlock(a);
  LockToken c;
  ASSERT_TRUE(lock.trylock(c));
  lock.unlock(c);
  LockDomain::detach();
  const auto rows = dom.rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].acquisitions, 2u);  // lock + successful trylock; the failed trylock is not counted
  EXPECT_EQ(rows[0].contentions, 0u);
}

TEST_P(EveryKind, HoldTimeCoversTheInjectedHold) {
  constexpr uint64_t kHoldNs = 2000;
  constexpr int kAcq = 200;
  LockDomain dom(config_for(GetParam()), true, false);
  dom.reset_stats(1);
  Lock lock(dom, "zone->lock");
  dom.attach(0, 0);
  const uint64_t hold_ticks = ns_to_ticks(kHoldNs);
  for (int i = 0; i < kAcq; ++i) {
    LockGuard g(lock);
    spin_for_ticks(hold_ticks);
  }
  LockDomain::detach();
  const auto rows = dom.rows();
  ASSERT_EQ(rows.size(), 1u);
  const double injected_ns = ticks_to_ns(hold_ticks);
  EXPECT_GE(rows[0].hold_total_ns, kAcq * injected_ns);
  EXPECT_GE(rows[0].hold_min_ns, injected_ns);
  EXPECT_GE(rows[0].hold_max_ns, rows[0].hold_min_ns);
  EXPECT_NEAR(rows[0].hold_avg_ns, rows[0].hold_total_ns / kAcq, 1e-6 * rows[0].hold_total_ns);
}

INSTANTIATE_TEST_SUITE_P(AllKinds, EveryKind, ::testing::ValuesIn(all_kinds()),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// Takes `lock` (a FIFO kind) as the calling thread, lets a thread attached as worker `worker` on model CPU `worker`
// of node `node` queue behind it, holds on for `hold_ns` more, then releases it to that waiter and joins it.
void hand_to_a_waiter(LockDomain& dom, Lock& lock, int worker, int node, uint64_t hold_ns = 0) {
  LockToken held;
  lock.lock(held);
  std::thread waiter([&] {
    dom.attach(worker, worker, node);
    LockGuard g(lock);  // queues behind the holder
    LockDomain::detach();
  });
  while (lock.queued(held) != 1) std::this_thread::yield();
  if (hold_ns) spin_for_ns(hold_ns);
  lock.unlock(held);
  waiter.join();
}

// A ticket lock in a lock_stat domain of three workers; the test thread is worker 0 on model CPU 0 of node 0.
struct LockStatTicket : ::testing::Test {
  void SetUp() override {
    dom.reset_stats(3);
    dom.attach(0, 0, 0);
  }
  void TearDown() override { LockDomain::detach(); }
  // The test thread detaches; `row` is the domain's one lock_stat row.
  void only_row(LockStatRow& row) {
    LockDomain::detach();
    const auto rows = dom.rows();
    ASSERT_EQ(rows.size(), 1u);
    row = rows[0];
  }
  LockDomain dom{config_for(LockKind::ticket), true, true};
  Lock lock{dom, "zone->lock"};
};

TEST_F(LockStatTicket, ContendedWaitIsRecordedOnlyOnContention) {
  hand_to_a_waiter(dom, lock, 1, 0, 100000);  // exactly one contention, on another CPU
  LockStatRow row;
  ASSERT_NO_FATAL_FAILURE(only_row(row));
  EXPECT_EQ(row.acquisitions, 2u);
  EXPECT_EQ(row.contentions, 1u);
  EXPECT_EQ(row.con_bounces, 1u);
  EXPECT_EQ(row.acq_bounces, 2u);     // none -> CPU 0 -> CPU 1
  EXPECT_EQ(row.handoffs_local, 1u);  // both attached on node 0
  EXPECT_EQ(row.handoffs_remote, 0u);
  EXPECT_GE(row.wait_min_ns, 0.0);
  EXPECT_EQ(row.wait_min_ns, row.wait_max_ns);  // one sample
  EXPECT_DOUBLE_EQ(row.wait_avg_ns, row.wait_total_ns);
}

// Takes `lock` `n` times in a row as worker 0 on model CPU 0 of `dom`.
void take_as_worker0(LockDomain& dom, Lock& lock, int n) {
  dom.attach(0, 0);
  for (int i = 0; i < n; ++i) LockGuard g(lock);
  LockDomain::detach();
}

TEST(LockStat, OffCountsNothingAndUnattachedThreadsCountNothing) {
  LockDomain off(config_for(LockKind::spin), false, false);
  off.reset_stats(1);
  Lock a(off, "zone->lock");
  take_as_worker0(off, a, 10);
  EXPECT_TRUE(off.rows().empty());

  LockDomain on(config_for(LockKind::spin), true, false);
  on.reset_stats(1);
  Lock b(on, "zone->lock");
  for (int i = 0; i < 10; ++i) LockGuard g(b);  // controlling thread, not attached: set-up is not counted
  EXPECT_TRUE(on.rows().empty());
}

TEST(LockStat, TextFormatFollowsProcLockStat) {
  LockDomain dom(config_for(LockKind::mcs), true, false);
  dom.reset_stats(1);
  Lock l(dom, "zone->lock");
  take_as_worker0(dom, l, 3);
  const std::string text = LockDomain::format(dom.rows());
  EXPECT_EQ(text.rfind("lock_stat version 0.4\n", 0), 0u);
  EXPECT_NE(text.find("class name    con-bounces    contentions   waittime-min"), std::string::npos);
  EXPECT_NE(text.find("&zone->lock:"), std::string::npos);
  // "%40s" right-aligns "&zone->lock:"; the underline sits under "&zone->lock".
  EXPECT_NE(text.find("\n" + std::string(28, ' ') + "&zone->lock:"), std::string::npos);
  EXPECT_NE(text.find("\n" + std::string(28, ' ') + std::string(11, '-') + "\n"), std::string::npos);
}

TEST(LockConfig, DefaultsFollowTheKernelNatureAndOverridesWin) {
  LockConfig c;
  EXPECT_EQ(c.kind_for("zone->lock"), LockKind::qspinlock);
  EXPECT_EQ(c.kind_for("cma_mutex"), LockKind::kmutex);
  c.set_default("zone->lock", LockKind::spin);
  EXPECT_EQ(c.kind_for("zone->lock"), LockKind::spin);
  c.set("zone->lock", "ticket");
  c.set_default("zone->lock", LockKind::pthread);
  EXPECT_EQ(c.kind_for("zone->lock"), LockKind::ticket);
}

TEST(LockConfig, AKernelsNatureDefaultYieldsToAClassDefaultAndToTheUser) {
  LockConfig c;
  c.set_default(LockNature::spinlock, LockKind::ticket);  // 2.6.35's spinlock_t
  EXPECT_EQ(c.kind_for("info->lock"), LockKind::ticket);
  EXPECT_EQ(c.kind_for("pcp->lock"), LockKind::ticket);
  EXPECT_EQ(c.kind_for("cma_mutex"), LockKind::kmutex);  // another nature keeps the lab's default
  c.set_default("zone->lock", LockKind::mcs);
  EXPECT_EQ(c.kind_for("zone->lock"), LockKind::mcs);
  c.set("info->lock", "qspinlock");
  EXPECT_EQ(c.kind_for("info->lock"), LockKind::qspinlock);
}

TEST(LockConfig, UnknownClassOrKindNamesTheProblem) {
  LockConfig c;
  try {
    c.set("zone->lok", "mcs");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown lock class 'zone->lok'"), std::string::npos);
  }
  try {
    c.set("zone->lock", "rcu");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("locks['zone->lock']: unknown lock kind 'rcu'"), std::string::npos);
    for (const LockKindInfo& k : lock_kinds())  // the message lists every kind
      EXPECT_NE(std::string(e.what()).find(std::string(k.name)), std::string::npos) << k.name;
  }
}

TEST(LockKinds, EveryKindIsListedOnceWithADoc) {
  std::vector<std::string> names;
  for (const LockKindInfo& k : lock_kinds()) {
    names.emplace_back(k.name);
    EXPECT_FALSE(k.doc.empty()) << k.name;
    EXPECT_EQ(parse_lock_kind(k.name, "lock"), k.kind);
  }
  for (const char* expected : {"qspinlock", "kmutex", "rwsem", "cna", "cohort", "hmcs", "shfllock"})
    EXPECT_EQ(std::count(names.begin(), names.end(), expected), 1) << expected;
}

// Hand-offs by node: a waiter on another node than the holder is a remote hand-off, on the same node a local one.
TEST_F(LockStatTicket, HandoffsCountTheNodeOfThePreviousHolder) {
  hand_to_a_waiter(dom, lock, 1, 1);  // node 0 -> node 1
  hand_to_a_waiter(dom, lock, 2, 0);  // node 0 -> node 0
  LockStatRow row;
  ASSERT_NO_FATAL_FAILURE(only_row(row));
  EXPECT_EQ(row.contentions, 2u);
  EXPECT_EQ(row.handoffs_remote, 1u);
  EXPECT_EQ(row.handoffs_local, 1u);
}

// AHMCS's fast path (hmcs): a free lock is taken at the root alone, so its release hands the root to the root's next
// entry (the node that queued there first) and not to a waiter of the releaser's node, as the two-level path would.
TEST(HmcsFastPath, AFreeLockIsTakenAtTheRootAndReleasedInRootOrder) {
  HmcsSpinlock h;
  const auto acquire = [&h](HmcsSpinlock::Token& t) {
    if (!h.enter(t)) h.wait(t, true);
  };
  const auto tail = [&h](int node) { return h.locals[size_t(node)].tail.load(std::memory_order_acquire); };
  const auto root = [&h] { return h.global.tail.load(std::memory_order_acquire); };
  HmcsSpinlock::Token main_token, a, b, c;
  main_token.numa_node = 0;
  ASSERT_TRUE(h.enter(main_token));
  EXPECT_TRUE(main_token.at_root);
  EXPECT_EQ(tail(0), nullptr);  // no node lock taken
  std::string order;            // appended under the lock only
  const auto waiter = [&](HmcsSpinlock::Token& t, int node, char name) {
    t.numa_node = node;
    return std::thread([&, name] {
      acquire(t);
      EXPECT_FALSE(t.at_root) << name;  // the lock was busy: the two-level path
      order += name;
      h.leave(t);
    });
  };
  std::thread ta = waiter(a, 1, 'A');  // node 1's head: queues node 1 at the root, behind the holder
  while (root() != &h.locals[1].global_token) std::this_thread::yield();
  std::thread tb = waiter(b, 0, 'B');  // node 0's head: queues node 0 at the root, behind node 1
  while (root() != &h.locals[0].global_token) std::this_thread::yield();
  std::thread tc = waiter(c, 0, 'C');  // behind B in node 0's queue
  while (b.next_acquire() != &c) std::this_thread::yield();
  h.leave(main_token);
  for (std::thread* t : {&ta, &tb, &tc}) t->join();
  EXPECT_EQ(order, "ABC");  // the two-level path would pass to B and C first (node 0's queue), then A
  EXPECT_EQ(root(), nullptr);
  EXPECT_EQ(tail(0), nullptr);
  EXPECT_EQ(tail(1), nullptr);
  HmcsSpinlock::Token again;
  again.numa_node = 1;
  EXPECT_TRUE(h.try_enter(again));  // free again: the fast path's trylock takes the root alone
  EXPECT_TRUE(again.at_root);
  EXPECT_FALSE(h.try_enter(a));  // held at the root: a trylock fails on either node
  h.leave(again);
}

// Fast-path and two-level acquirers mixed: the test thread takes the free lock (the fast path) and lets workers of
// two nodes queue behind it (the two-level path), then workers come and go, idling between some acquisitions so the
// lock is now free, now queued. The counter only the lock protects and lock_stat's counts are exact.
TEST(HmcsFastPath, MutualExclusionWhenFastPathAndQueuedAcquirersMix) {
  constexpr int kThreads = 4;
  constexpr uint64_t kIters = 20000;
  LockDomain dom(config_for(LockKind::hmcs), /*lockstat=*/true, oversubscribed(kThreads));
  dom.reset_stats(kThreads);
  Lock lock(dom, "zone->lock");
  uint64_t counter = 0;  // deliberately not atomic
  std::atomic<uint64_t> fast{0};
  std::atomic<int> started{0};
  LockToken held;
  lock.lock(held);  // the test thread is not attached: not counted
  ASSERT_TRUE(held.hmcs.at_root);
  std::vector<std::thread> ts;
  for (int w = 0; w < kThreads; ++w)
    ts.emplace_back([&, w] {
      dom.attach(w, w, w % 2);
      started.fetch_add(1);
      uint64_t mine = 0;
      for (uint64_t i = 0; i < kIters; ++i) {
        LockToken t;
        lock.lock(t);
        counter = counter + 1;
        mine += t.hmcs.at_root;
        lock.unlock(t);
        if ((i + uint64_t(w)) % 8 == 0) spin_for_ns(200);  // come and go: the lock falls free at times
      }
      fast.fetch_add(mine);
      LockDomain::detach();
    });
  while (started.load() != kThreads) std::this_thread::yield();
  lock.unlock(held);
  for (auto& t : ts) t.join();
  EXPECT_EQ(counter, kIters * kThreads);
  const auto rows = dom.rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].acquisitions, kIters * kThreads);
  EXPECT_EQ(rows[0].handoffs_local + rows[0].handoffs_remote, rows[0].contentions);
  std::printf("hmcs: %llu of %llu acquisitions on the fast path, %llu contended\n", (unsigned long long)fast.load(),
              (unsigned long long)(kIters * kThreads), (unsigned long long)rows[0].contentions);
}

}  // namespace
