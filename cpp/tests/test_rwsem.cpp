// rwsem: readers share, a writer excludes readers and writers, a reader that comes after a queued writer waits for
// it, rwsem_mark_wake grants every queued reader at once (writers between them stay queued), lock_stat's read and
// write rows with exact counts, a kind without a read side taking it exclusively, and the same in virtual time
// (deterministic: two runs give identical times) with the hand-off rule on hand-built queues.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "alloclab/base/scheduler.hpp"
#include "alloclab/locks/lock.hpp"
#include "test_profiles.hpp"

using namespace alloclab;

namespace {

LockConfig mmap_sem_as(const char* kind) {
  LockConfig c;
  c.set("mmap_sem", kind);
  return c;
}

long readers_of(const Rwsem& sem) { return sem.count.load() >> 8; }

// Blocks until `n` waiters are on the wait list (each test makes them arrive; no timing involved).
void until_queued(const Rwsem& sem, uint32_t n) {
  const Rwsem::Token any{};
  while (sem.queued(any) < n) std::this_thread::yield();
}

TEST(Rwsem, ReadersShareAndExcludeWriters) {
  Rwsem sem;
  Rwsem::Token a{}, b{}, w{};
  ASSERT_TRUE(sem.enter_read(a));
  ASSERT_TRUE(sem.try_enter_read(b));  // a second reader while the first holds it
  EXPECT_EQ(readers_of(sem), 2);
  EXPECT_FALSE(sem.try_enter(w));  // no writer while readers hold it
  sem.leave_read(a);
  EXPECT_FALSE(sem.try_enter(w));
  sem.leave_read(b);
  EXPECT_EQ(sem.count.load(), 0);
  ASSERT_TRUE(sem.enter(w));
  EXPECT_EQ(sem.count.load(), Rwsem::kWriterLocked);
  EXPECT_FALSE(sem.try_enter_read(a));  // no reader, and no writer, while a writer holds it
  EXPECT_FALSE(sem.try_enter(b));
  sem.leave(w);
  EXPECT_EQ(sem.count.load(), 0);
}

// A writer queues behind two readers; a third reader comes after it and must wait for it (no reader starvation of
// writers): the writer gets the lock before the late reader.
TEST(Rwsem, AReaderAfterAQueuedWriterWaitsForIt) {
  Rwsem sem;
  Rwsem::Token r1{}, r2{};
  ASSERT_TRUE(sem.enter_read(r1));
  ASSERT_TRUE(sem.enter_read(r2));
  std::vector<char> order;
  std::atomic<int> in_writer{0};
  std::thread writer([&] {
    Rwsem::Token t{};
    if (!sem.enter(t)) sem.wait(t, false);
    in_writer = 1;
    order.push_back('W');  // the lock orders these appends
    sem.leave(t);
  });
  until_queued(sem, 1);
  EXPECT_EQ(sem.count.load() & Rwsem::kFlagWaiters, Rwsem::kFlagWaiters);
  std::thread reader([&] {
    Rwsem::Token t{};
    if (!sem.enter_read(t)) sem.wait_read(t, false);  // the fast path fails: WAITERS is set
    order.push_back('R');
    EXPECT_EQ(in_writer.load(), 1);
    sem.leave_read(t);
  });
  until_queued(sem, 2);
  EXPECT_EQ(readers_of(sem), 2);  // the late reader took its bias back out while it waits
  sem.leave_read(r1);
  sem.leave_read(r2);  // the last reader out wakes the writer at the head
  writer.join();
  reader.join();
  EXPECT_EQ(order, (std::vector<char>{'W', 'R'}));
  EXPECT_EQ(sem.count.load(), 0);
}

// With a writer holding it, readers R1, R2 and a writer W2 between them queue as R1, W2, R2. up_write grants the
// read side to R1 and R2 at once, in the release itself (phase-fair: W2 is skipped and stays queued); the last of
// them out wakes W2.
TEST(Rwsem, MarkWakeGrantsEveryQueuedReaderAtOnceAndSkipsWriters) {
  Rwsem sem;
  Rwsem::Token w{};
  ASSERT_TRUE(sem.enter(w));
  std::atomic<bool> go{false};
  std::atomic<int> writer2_done{0};
  const auto reader = [&] {
    Rwsem::Token t{};
    if (!sem.enter_read(t)) sem.wait_read(t, false);
    while (!go) std::this_thread::yield();
    sem.leave_read(t);
  };
  std::thread r1(reader);
  until_queued(sem, 1);
  std::thread w2([&] {
    Rwsem::Token t{};
    if (!sem.enter(t)) sem.wait(t, false);
    EXPECT_EQ(readers_of(sem), 0);
    writer2_done = 1;
    sem.leave(t);
  });
  until_queued(sem, 2);
  std::thread r2(reader);
  until_queued(sem, 3);
  sem.leave(w);
  EXPECT_EQ(readers_of(sem), 2);  // both readers hold it, granted by rwsem_mark_wake before they even run
  EXPECT_EQ(sem.queued(w), 1u);   // W2 still waits
  EXPECT_EQ(writer2_done.load(), 0);
  go = true;
  r1.join();
  r2.join();
  w2.join();
  EXPECT_EQ(writer2_done.load(), 1);
  EXPECT_EQ(sem.count.load(), 0);
}

// Threads mix reads and writes on mmap_sem: a writer is alone inside, readers never see a writer, and lock_stat has
// a -W row and a -R row with exactly the acquisitions made.
TEST(RwsemLock, ThreadsReadAndWriteWithExactReadAndWriteRows) {
  constexpr int kThreads = 4;
  constexpr uint64_t kIters = 4000;
  const bool oversubscribed = kThreads > int(std::thread::hardware_concurrency());
  LockDomain dom(LockConfig{}, true, oversubscribed);
  dom.reset_stats(kThreads);
  Lock sem(dom, "mmap_sem");
  ASSERT_EQ(sem.kind(), LockKind::rwsem);  // the default of an rwsem class
  std::atomic<int> readers{0}, writers{0};
  uint64_t written = 0;  // not atomic: only the write side protects it
  std::atomic<uint64_t> bad{0};
  std::vector<std::thread> ts;
  for (int w = 0; w < kThreads; ++w)
    ts.emplace_back([&, w] {
      dom.attach(w, w);
      for (uint64_t i = 0; i < kIters; ++i) {
        LockToken t;
        if (i % 4 == 0) {  // one write in four
          sem.lock(t);
          if (writers.fetch_add(1) != 0 || readers.load() != 0) ++bad;
          ++written;
          writers.fetch_sub(1);
          sem.unlock(t);
        } else {
          sem.lock_read(t);
          readers.fetch_add(1);
          if (writers.load() != 0) ++bad;
          readers.fetch_sub(1);
          sem.unlock_read(t);
        }
      }
      LockDomain::detach();
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(written, kThreads * kIters / 4);
  const auto rows = dom.rows();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].cls, "mmap_sem-W");  // seq_stats: -W first, then -R
  EXPECT_EQ(rows[1].cls, "mmap_sem-R");
  EXPECT_EQ(rows[0].acquisitions, kThreads * kIters / 4);
  EXPECT_EQ(rows[1].acquisitions, kThreads * kIters * 3 / 4);
  for (const LockStatRow& r : rows) {
    EXPECT_EQ(r.kind, "rwsem");
    EXPECT_LE(r.contentions, r.acquisitions);
  }
  const std::string text = LockDomain::format(rows);
  EXPECT_NE(text.find("&mmap_sem-W:"), std::string::npos);
  EXPECT_NE(text.find("&mmap_sem-R:"), std::string::npos);
}

// The kernel's naming: a class only read has a -R row alone; a class only written keeps its plain name.
TEST(RwsemLock, ARowPerSideAsProcLockStatPrintsThem) {
  for (const bool read : {true, false}) {
    LockDomain dom(LockConfig{}, true, false);
    dom.reset_stats(1);
    Lock sem(dom, "mmap_sem");
    dom.attach(0, 0);
    for (int i = 0; i < 3; ++i) {
      LockToken t;
      if (read) {
        sem.lock_read(t);
        sem.unlock_read(t);
      } else {
        sem.lock(t);
        sem.unlock(t);
      }
    }
    LockToken t;
    ASSERT_TRUE(read ? sem.trylock_read(t) : sem.trylock(t));
    read ? sem.unlock_read(t) : sem.unlock(t);
    LockDomain::detach();
    const auto rows = dom.rows();
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].cls, read ? "mmap_sem-R" : "mmap_sem");
    EXPECT_EQ(rows[0].acquisitions, 4u);
    EXPECT_EQ(rows[0].contentions, 0u);
  }
}

// A kind without a read side takes it exclusively for a reader: a second reader cannot get in; lock_stat still
// counts reads in the -R row, under the kind used.
TEST(RwsemLock, AKindWithoutAReadSideTakesItExclusively) {
  LockDomain dom(mmap_sem_as("mcs"), true, false);
  dom.reset_stats(1);
  Lock sem(dom, "mmap_sem");
  EXPECT_FALSE(lock_kinds()[size_t(LockKind::mcs)].read_side);
  EXPECT_TRUE(lock_kinds()[size_t(LockKind::rwsem)].read_side);
  dom.attach(0, 0);
  LockToken a, b;
  sem.lock_read(a);
  EXPECT_FALSE(sem.trylock_read(b));
  EXPECT_FALSE(sem.trylock(b));
  sem.unlock_read(a);
  LockDomain::detach();
  const auto rows = dom.rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].cls, "mmap_sem-R");
  EXPECT_EQ(rows[0].kind, "mcs");
  EXPECT_EQ(rows[0].acquisitions, 1u);
}

TEST(RwsemLock, TheDefaultForRwsemClassesIsRwsem) {
  EXPECT_EQ(default_kind(LockNature::rwsem), LockKind::rwsem);
  EXPECT_EQ(LockConfig{}.kind_for("mmap_sem"), LockKind::rwsem);
}

// ---- virtual time ---------------------------------------------------------------------------------------------------

constexpr vt::vtime kNs = vt::kNanosecond;

std::shared_ptr<const MachineProfile> two_sockets() {
  return test::test_profile("package:2 numa:1 l3:1 core:2 pu:1", {"same_llc", "remote"});
}

// What one virtual run of `cpus` CPUs (0, 1 on socket 0; 2, 3 on socket 1) did to mmap_sem: CPU 0 writes `writes`
// times (a 1 us hold), the others read 20 times each (a 100 ns hold); `kind` is mmap_sem's kind.
struct VRun {
  struct Hold {
    vt::vtime from, to;
    bool write;
  };
  std::vector<LockStatRow> rows;
  std::vector<Hold> holds;  // every critical section, in virtual time
  vt::vtime end = 0;        // the last CPU's finishing time
  // Whether a write section overlaps any other section, and whether two read sections overlap.
  bool write_overlaps() const {
    for (const Hold& a : holds)
      for (const Hold& b : holds)
        if (&a != &b && a.write && a.from < b.to && b.from < a.to) return true;
    return false;
  }
  bool reads_overlap() const {
    for (const Hold& a : holds)
      for (const Hold& b : holds)
        if (&a != &b && !a.write && !b.write && a.from < b.to && b.from < a.to) return true;
    return false;
  }
};

VRun virtual_run(int cpus, int writes, const char* kind = "rwsem") {
  std::vector<int> pus;
  for (int i = 0; i < cpus; ++i) pus.push_back(i);
  CostModel m(two_sockets(), Costs::table, pus, 1.0);
  const CostScope scope(&m);
  const VirtualClockScope vclock;
  LockDomain d(mmap_sem_as(kind), true, false, &m);
  d.reset_stats(cpus);
  Lock sem(d, "mmap_sem");
  VRun out;
  vt::Simulator sim;
  sim.run(cpus, [&](int cpu) {
    d.attach(cpu, cpu);
    for (int i = 0; i < (cpu == 0 ? writes : 20); ++i) {
      LockToken t;
      const bool write = cpu == 0;
      write ? sem.lock(t) : sem.lock_read(t);
      const vt::vtime from = clock_ticks();
      spin_for_ticks(ns_to_ticks(write ? 1000 : 100));
      out.holds.push_back({from, clock_ticks(), write});
      write ? sem.unlock(t) : sem.unlock_read(t);
    }
    out.end = std::max(out.end, vt::vtime(clock_ticks()));
  });
  out.rows = d.rows();
  return out;
}

const LockStatRow* row(const VRun& r, const std::string& cls) {
  for (const LockStatRow& x : r.rows)
    if (x.cls == cls) return &x;
  return nullptr;
}

TEST(RwsemVirtual, ReadersShareWithoutWaitingAndBounceTheCountLine) {
  const VRun r = virtual_run(4, 0);
  ASSERT_EQ(r.rows.size(), 1u);
  const LockStatRow* rd = row(r, "mmap_sem-R");
  ASSERT_NE(rd, nullptr);
  EXPECT_EQ(rd->acquisitions, 60u);
  EXPECT_EQ(rd->contentions, 0u);  // no writer: no reader ever waits
  EXPECT_TRUE(r.reads_overlap());  // they hold it together
  EXPECT_GT(rd->acq_bounces, 0u);  // and move the count word's line between them
  // A single reader pays no line transfers: its 20 reads end sooner than those of 3 readers on two sockets.
  EXPECT_LT(virtual_run(2, 0).end, r.end);
  // The same reads on an exclusive kind wait for each other and take longer.
  const VRun excl = virtual_run(4, 0, "mcs");
  EXPECT_FALSE(excl.reads_overlap());
  EXPECT_GT(row(excl, "mmap_sem-R")->contentions, 0u);
  EXPECT_GT(excl.end, r.end);
}

TEST(RwsemVirtual, AWriterExcludesReadersAndTheCountsAreExact) {
  const VRun r = virtual_run(4, 10);
  EXPECT_FALSE(r.write_overlaps());
  EXPECT_TRUE(r.reads_overlap());
  const LockStatRow* w = row(r, "mmap_sem-W");
  const LockStatRow* rd = row(r, "mmap_sem-R");
  ASSERT_NE(w, nullptr);
  ASSERT_NE(rd, nullptr);
  EXPECT_EQ(w->acquisitions, 10u);
  EXPECT_EQ(rd->acquisitions, 60u);
  EXPECT_GT(w->contentions + rd->contentions, 0u);
}

TEST(RwsemVirtual, TwoRunsGiveIdenticalTimes) {
  const VRun a = virtual_run(4, 10), b = virtual_run(4, 10);
  EXPECT_EQ(a.end, b.end);
  ASSERT_EQ(a.rows.size(), b.rows.size());
  for (size_t i = 0; i < a.rows.size(); ++i) {
    EXPECT_EQ(a.rows[i].cls, b.rows[i].cls);
    EXPECT_EQ(a.rows[i].contentions, b.rows[i].contentions);
    EXPECT_EQ(a.rows[i].wait_total_ns, b.rows[i].wait_total_ns);
    EXPECT_EQ(a.rows[i].hold_total_ns, b.rows[i].hold_total_ns);
  }
}

// The hand-off rule on hand-built queues (cpus 0-1 socket 0, 2-3 socket 1: same_llc 20 ns, remote 40 ns).
struct Queue {
  Queue(const CostModel& m, std::vector<int> cpus, std::vector<bool> read) : costs(m) {
    waiters.resize(cpus.size());
    states.assign(size_t(m.nr_cpus()), VWaitState{});
    for (size_t i = 0; i < cpus.size(); ++i) {
      waiters[i].cpu = cpus[i];
      states[size_t(cpus[i])].read = read[i];
      list.push_back(waiters[i]);
    }
  }
  const CostModel& costs;
  std::vector<vt::Waiter> waiters;
  vt::WaiterList list;
  std::vector<VWaitState> states;
};

TEST(RwsemVirtual, AWriterAtTheHeadIsWokenAloneAndOwnsItOnlyAfterAHandoff) {
  const CostModel m(two_sockets(), Costs::table, {0, 1, 2, 3}, 1.0);
  const Queue q(m, {2, 1, 3}, {false, true, true});
  VRelease r{0, 1000 * kNs, q.list, m, q.states};
  VHandoff h = Rwsem::vhandoff(r);
  ASSERT_EQ(h.nr_wakes, 1);
  EXPECT_EQ(h.wakes[0].cpu, 2);
  EXPECT_FALSE(h.owned);  // woken to race: a newcomer may steal it first
  EXPECT_EQ(h.readers, 0u);
  EXPECT_EQ(h.wakes[0].at, 1000 * kNs + m.wakeup());
  r.handoff = true;  // it lost a race after RWSEM_WAIT_TIMEOUT
  h = Rwsem::vhandoff(r);
  EXPECT_TRUE(h.owned);
  EXPECT_EQ(h.wakes[0].at, 1000 * kNs + 40 * kNs);  // it spins on the owner: one line transfer
}

TEST(RwsemVirtual, AReaderAtTheHeadBringsEveryQueuedReaderAlong) {
  const CostModel m(two_sockets(), Costs::table, {0, 1, 2, 3}, 1.0);
  const Queue q(m, {1, 2, 3}, {true, false, true});
  const VHandoff h = Rwsem::vhandoff(VRelease{0, 0, q.list, m, q.states});
  EXPECT_EQ(h.readers, 2u);  // cpus 1 and 3; the writer on cpu 2 stays queued
  ASSERT_EQ(h.nr_wakes, 1);
  EXPECT_EQ(h.wakes[0].cpu, 1);
  EXPECT_EQ(h.wakes[0].at, m.wakeup());
}

}  // namespace
