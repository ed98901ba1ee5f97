// Virtual-time simulator (base/): CPUs interleave in (clock, cpu) order and identically on every run and thread;
// blocking and wake-up set clocks to the max; deadlocks and livelocks are errors that name every CPU and what it
// waits on; exceptions propagate and every fiber's stack objects are destroyed; stop releases blocked CPUs; bad input
// is refused. Every assertion is about orders, counts and virtual times, none about host time.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <exception>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "alloclab/base/clock.hpp"
#include "alloclab/base/fiber.hpp"
#include "alloclab/base/scheduler.hpp"
#include "alloclab/base/vclock.hpp"
#include "alloclab/base/wait_queue.hpp"

using namespace alloclab::vt;
using alloclab::clock_ticks, alloclab::spin_for_ticks, alloclab::VirtualClockScope;

namespace {

constexpr vtime ns = kNanosecond;

struct Event {
  int cpu;
  vtime t;
  bool operator==(const Event&) const = default;
};

bool by_time_then_cpu(const Event& a, const Event& b) { return std::tie(a.t, a.cpu) < std::tie(b.t, b.cpu); }

// Counts the objects alive on fiber stacks.
struct Alive {
  explicit Alive(int& n) : n(n) { ++n; }
  ~Alive() { --n; }
  int& n;
};

// Runs `f` and returns the message of the exception of type E it throws ("" when it throws none).
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

// A FIFO lock made of a flag and a WaitQueue, handing over to the oldest waiter `transfer` after the release. Each
// CPU takes it `rounds` times with work outside and inside drawn from its own seeded stream; the log holds
// (cpu, acquisition time) in acquisition order.
std::vector<Event> lock_run(Simulator& sim, int nr_cpus, uint64_t seed, int rounds = 40) {
  std::vector<Event> log;
  bool held = false;
  WaitQueue queue("test_lock");
  const vtime transfer = 7 * ns;
  sim.run(nr_cpus, [&](int cpu) {
    std::mt19937_64 rng(seed * 1000 + uint64_t(cpu));
    for (int k = 0; k < rounds; ++k) {
      sim.advance(1 + rng() % (50 * ns));
      sim.sync();
      if (!held)
        held = true;
      else if (!queue.wait())  // woken as the new owner
        return;
      log.push_back({cpu, sim.now()});
      sim.advance(1 + rng() % (10 * ns));
      sim.sync();
      if (queue.wake_one(sim.now() + transfer) < 0) held = false;
    }
  });
  return log;
}

}  // namespace

TEST(VirtualTime, FormatIsExactAndHostIndependent) {
  EXPECT_EQ(format_vtime(0), "0 ps");
  EXPECT_EQ(format_vtime(300), "300 ps");
  EXPECT_EQ(format_vtime(1'000), "1.000 ns");
  EXPECT_EQ(format_vtime(1'234'567), "1.234 us");
  EXPECT_EQ(format_vtime(2 * kMillisecond + 5 * kMicrosecond), "2.005 ms");
  EXPECT_EQ(format_vtime(90 * kSecond + 1), "90.000 s");
}

TEST(VirtualTime, FibersSwitchDirectlyAndUnwindWhenDestroyed) {
  Fiber host;
  bool ran = false;
  {
    Fiber never(host, 64 * 1024, [&] { ran = true; });
  }
  EXPECT_FALSE(ran);  // never switched to: its entry never runs

  int alive = 0, entered = 0;
  std::optional<Fiber> f;
  f.emplace(host, 64 * 1024, [&] {
    Alive a(alive);
    for (;;) {
      ++entered;
      f->switch_to(host);
    }
  });
  host.switch_to(*f);
  host.switch_to(*f);
  EXPECT_EQ(entered, 2);
  EXPECT_EQ(alive, 1);
  f.reset();  // suspended: destroying it unwinds its stack
  EXPECT_EQ(alive, 0);

  std::optional<Fiber> a, b;  // fiber to fiber; a finished fiber returns to its parent with what it threw
  std::vector<int> order;
  a.emplace(host, 64 * 1024, [&] {
    Alive live(alive);
    order.push_back(1);
    a->switch_to(*b);
    order.push_back(3);
  });
  b.emplace(host, 64 * 1024, [&] {
    order.push_back(2);
    throw std::runtime_error("b failed");
  });
  host.switch_to(*a);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  ASSERT_TRUE(b->finished());
  EXPECT_EQ(message_of<std::runtime_error>([&] { std::rethrow_exception(b->error()); }), "b failed");
  EXPECT_FALSE(a->finished());
  a.reset();
  EXPECT_EQ(alive, 0);
}

TEST(VirtualTime, CpusInterleaveByClockThenCpu) {
  const vtime cost[8] = {3 * ns, 5 * ns, 2 * ns, 7 * ns, 3 * ns, 1 * ns, 4 * ns, 6 * ns};
  std::vector<Event> log;
  Simulator sim;
  sim.run(8, [&](int cpu) {
    EXPECT_EQ(Simulator::current(), &sim);
    EXPECT_EQ(current_cpu(), cpu);
    for (int k = 0; k < 20; ++k) {
      sim.advance(cost[cpu]);
      sim.sync();
      log.push_back({cpu, sim.now()});
    }
  });
  std::vector<Event> expected;
  for (int cpu = 0; cpu < 8; ++cpu)
    for (int k = 1; k <= 20; ++k) expected.push_back({cpu, k * cost[cpu]});
  std::sort(expected.begin(), expected.end(), by_time_then_cpu);  // ties (cpus 0 and 4, ...) by cpu
  EXPECT_EQ(log, expected);
  EXPECT_EQ(Simulator::current(), nullptr);
  EXPECT_EQ(current_cpu(), -1);
}

TEST(VirtualTime, EveryClockReadCostsTheReadingCpuItsRead) {
  // clock_ticks() on a virtual CPU is an RDTSC of the modelled machine: each read is charged before it returns, so a
  // span between two reads holds one read, as on hardware; spin_for_ticks() advances without reading.
  Options o;
  o.clock_read = 9 * ns;
  Simulator sim(std::move(o));
  std::vector<uint64_t> read(2);
  sim.run(2, [&](int cpu) {
    const VirtualClockScope virtual_clock;
    const uint64_t t0 = clock_ticks();
    spin_for_ticks(100 * ns);
    read[size_t(cpu)] = clock_ticks() - t0;
    EXPECT_EQ(sim.now(), (9 + 100 + 9) * ns);
  });
  EXPECT_EQ(read, std::vector<uint64_t>(2, (100 + 9) * ns));
}

TEST(VirtualTime, RunsAreIdentical) {
  Simulator sim;
  const std::vector<Event> first = lock_run(sim, 6, 42);
  const std::vector<Event> second = lock_run(sim, 6, 42);
  ASSERT_EQ(first.size(), 6u * 40u);
  EXPECT_EQ(first, second);
  EXPECT_TRUE(std::is_sorted(first.begin(), first.end(), by_time_then_cpu));
  EXPECT_NE(first, lock_run(sim, 6, 43));  // the seed, not the host, decides
}

TEST(VirtualTime, WakeSetsTheClockToTheMax) {
  WaitQueue q("completion");
  vtime first = 0, second = 0;
  Simulator sim;
  sim.run(2, [&](int cpu) {
    if (cpu == 0) {
      sim.advance(5 * ns);
      sim.sync();
      ASSERT_TRUE(q.wait());
      first = sim.now();  // woken at 30 ns, later than its 5 ns
      sim.advance(100 * ns);
      sim.sync();
      ASSERT_TRUE(q.wait());
      second = sim.now();  // woken "at 110 ns", earlier than its 130 ns
    } else {
      sim.advance(30 * ns);
      sim.sync();
      EXPECT_EQ(q.wake_one(sim.now()), 0);
      ASSERT_TRUE(sim.block_until(140 * ns));
      ASSERT_FALSE(q.empty());
      EXPECT_EQ(q.waiters().front().since, 130 * ns);
      EXPECT_EQ(q.wake_one(110 * ns), 0);
    }
  });
  EXPECT_EQ(first, 30 * ns);
  EXPECT_EQ(second, 130 * ns);
}

TEST(VirtualTime, WakeupsInFifoOrChosenOrder) {
  WaitQueue q("zone->lock");
  const vtime block_at[5] = {0, 2 * ns, 4 * ns, 1 * ns, 3 * ns};  // arrival order: cpus 3, 1, 4, 2
  std::vector<Event> seen;                                        // (cpu, since) of the queue when cpu 0 looks
  std::vector<Event> woken;
  std::string not_waiting, out_of_range;
  Simulator sim;
  sim.run(5, [&](int cpu) {
    if (cpu != 0) {
      sim.advance(block_at[cpu]);
      sim.sync();
      ASSERT_TRUE(q.wait());
      woken.push_back({cpu, sim.now()});
      return;
    }
    sim.advance(10 * ns);
    sim.sync();
    for (const Waiter& w : q.waiters()) seen.push_back({w.cpu, w.since});
    not_waiting = message_of<std::invalid_argument>([&] { q.wake(0, sim.now()); });
    out_of_range = message_of<std::invalid_argument>([&] { q.wake(99, sim.now()); });
    q.wake(4, 10 * ns);                    // chosen by cpu
    q.wake(q.waiters().front(), 11 * ns);  // chosen by node: the oldest, cpu 3
    EXPECT_EQ(q.wake_one(12 * ns), 1);
    EXPECT_EQ(q.wake_all(13 * ns), 1);  // cpu 2
    EXPECT_TRUE(q.empty());
  });
  EXPECT_EQ(seen, (std::vector<Event>{{3, 1 * ns}, {1, 2 * ns}, {4, 3 * ns}, {2, 4 * ns}}));
  EXPECT_EQ(woken, (std::vector<Event>{{4, 10 * ns}, {3, 11 * ns}, {1, 12 * ns}, {2, 13 * ns}}));
  EXPECT_EQ(not_waiting, "cpu: 0 does not wait on 'zone->lock'");
  EXPECT_EQ(out_of_range, "cpu: 99 does not wait on 'zone->lock'");
}

TEST(VirtualTime, DeadlockNamesEveryBlockedCpuAndWhatItWaitsOn) {
  WaitQueue zone("zone->lock"), cma("cma_mutex");
  int alive = 0;
  Simulator sim;
  const std::string msg = message_of<VirtualDeadlock>([&] {
    sim.run(4, [&](int cpu) {
      Alive a(alive);
      if (cpu == 0 || cpu == 3) {
        sim.advance(cpu == 0 ? 1'234'567 : 2 * ns);
        sim.sync();
        (void)(cpu == 0 ? zone : cma).wait();
        ADD_FAILURE() << "cpu " << cpu << " was woken";
      }
    });
  });
  EXPECT_EQ(msg,
            "virtual deadlock: cpu 0 waits on 'zone->lock' since 1.234 us; cpu 3 waits on 'cma_mutex' since 2.000 ns");
  EXPECT_EQ(alive, 0);  // both blocked fibers unwound
  EXPECT_TRUE(zone.empty());
  EXPECT_EQ(Simulator::current(), nullptr);
}

TEST(VirtualTime, LivelockOfPollersIsDetected) {
  Options opts;
  opts.livelock_polls = 1000;
  Simulator sim(opts);
  bool flag = false;
  int alive = 0;
  WaitQueue helpers("padata helpers");
  const std::string msg = message_of<VirtualDeadlock>([&] {
    sim.run(3, [&](int cpu) {
      Alive a(alive);
      if (cpu == 2) {
        sim.advance(1 * ns);
        sim.sync();
        (void)helpers.wait();
      } else {
        sim.advance(cpu * 5 * ns);
        (void)sim.wait_until([&] { return flag; }, (cpu + 1) * ns, cpu == 0 ? "PG_locked" : "PG_writeback");
      }
      ADD_FAILURE() << "cpu " << cpu << " went on";
    });
  });
  EXPECT_EQ(msg,
            "virtual livelock: cpu 0 polls 'PG_locked' since 0 ps; cpu 1 polls 'PG_writeback' since 5.000 ns; "
            "cpu 2 waits on 'padata helpers' since 1.000 ns");
  EXPECT_EQ(alive, 0);
}

TEST(VirtualTime, PollerWaitingForASleeperIsNoLivelock) {
  Options opts;
  opts.livelock_polls = 10;  // far fewer than the 1000 polls below
  Simulator sim(opts);
  bool flag = false;
  vtime seen_at = 0;
  sim.run(2, [&](int cpu) {
    if (cpu == 0) {
      ASSERT_TRUE(sim.wait_until([&] { return flag; }, 1 * ns, "flag"));
      seen_at = sim.now();
    } else {
      ASSERT_TRUE(sim.block_until(1000 * ns));
      flag = true;
    }
  });
  EXPECT_EQ(seen_at, 1001 * ns);  // cpu 0 polls at 1000 ns first (lower id), then sees the flag 1 ns later
}

TEST(VirtualTime, BodyExceptionUnwindsEveryFiber) {
  WaitQueue never("never");
  int alive = 0;
  Simulator sim;
  const std::string msg = message_of<std::runtime_error>([&] {
    sim.run(5, [&](int cpu) {
      Alive a(alive);
      switch (cpu) {
        case 0:  // blocked
          sim.sync();
          (void)never.wait();
          break;
        case 1:  // running through sync points
          for (;;) {
            sim.advance(1 * ns);
            sim.sync();
          }
        case 2:  // polling
          (void)sim.wait_until([] { return false; }, 1 * ns, "never");
          break;
        case 3:
          sim.advance(50 * ns);
          sim.sync();
          throw std::runtime_error("boom at cpu 3");
        default:  // ready, far in the future
          sim.advance(kMillisecond);
          sim.sync();
      }
      ADD_FAILURE() << "cpu " << cpu << " went on";
    });
  });
  EXPECT_EQ(msg, "boom at cpu 3");
  EXPECT_EQ(alive, 0);

  int started = 0;  // fibers that never ran are not started by the unwinding
  EXPECT_THROW(sim.run(4,
                       [&](int) {
                         ++started;
                         throw std::out_of_range("first");
                       }),
               std::out_of_range);
  EXPECT_EQ(started, 1);
}

TEST(VirtualTime, ExceptionStateIsPerFiber) {
  Simulator sim;
  std::string rethrown[2];
  sim.run(2, [&](int cpu) {
    try {
      if (cpu == 0) throw std::runtime_error("A");
      throw std::logic_error("B");
    } catch (...) {
      sim.advance(cpu + 1);  // switch to the other CPU while inside this catch block
      sim.sync();
      EXPECT_EQ(std::uncaught_exceptions(), 0);
      try {
        throw;
      } catch (const std::exception& e) {
        rethrown[cpu] = e.what();
      }
    }
  });
  EXPECT_EQ(rethrown[0], "A");
  EXPECT_EQ(rethrown[1], "B");

  struct SyncOnDestroy {  // a destructor that reaches a sync point while its CPU unwinds an exception
    Simulator& sim;
    ~SyncOnDestroy() {
      sim.advance(1 * ns);
      sim.sync();
    }
  };
  int uncaught_seen = -1;
  const std::string msg = message_of<std::runtime_error>([&] {
    sim.run(2, [&](int cpu) {
      if (cpu == 1) {
        uncaught_seen = std::uncaught_exceptions();
        return;
      }
      SyncOnDestroy d{sim};
      throw std::runtime_error("A unwinds");
    });
  });
  EXPECT_EQ(msg, "A unwinds");
  EXPECT_EQ(uncaught_seen, 0);
}

TEST(VirtualTime, StopReleasesBlockedCpus) {
  int polls = 0;
  Options opts;
  opts.poll = [&] { return ++polls == 3; };
  Simulator sim(opts);
  WaitQueue never("never woken");
  int alive = 0;
  bool waited = true, polled = true, waited_again = true;
  sim.run(3, [&](int cpu) {
    Alive a(alive);
    if (cpu == 0) {
      sim.sync();
      waited = never.wait();
      waited_again = never.wait();  // stopped: returns at once
    } else if (cpu == 1) {
      polled = sim.wait_until([] { return false; }, kMicrosecond, "never");
    } else {
      while (!sim.stopped()) {
        sim.advance(kMicrosecond);
        sim.sync();
      }
    }
  });
  EXPECT_EQ(polls, 3);  // never called again once it said stop
  EXPECT_TRUE(sim.stopped());
  EXPECT_FALSE(waited);
  EXPECT_FALSE(polled);
  EXPECT_FALSE(waited_again);
  EXPECT_EQ(alive, 0);
}

TEST(VirtualTime, PollErrorEndsTheRun) {
  Options opts;
  opts.poll = []() -> bool { throw std::runtime_error("interrupted"); };
  Simulator sim(opts);
  int alive = 0;
  const std::string msg = message_of<std::runtime_error>([&] {
    sim.run(2, [&](int) {
      Alive a(alive);
      for (;;) {
        sim.advance(kMicrosecond);
        sim.sync();
      }
    });
  });
  EXPECT_EQ(msg, "interrupted");
  EXPECT_EQ(alive, 0);
}

TEST(VirtualTime, StopFromABodyKeepsTheReleasedClock) {
  WaitQueue q("q");
  vtime released_at = 0;
  bool waited = true, slept = true;
  Simulator sim;
  sim.run(2, [&](int cpu) {
    if (cpu == 0) {
      sim.advance(5 * ns);
      sim.sync();
      waited = q.wait();
      released_at = sim.now();
      slept = sim.block_until(kSecond);
    } else {
      sim.advance(10 * ns);
      sim.sync();
      sim.stop();
    }
  });
  EXPECT_FALSE(waited);
  EXPECT_EQ(released_at, 5 * ns);
  EXPECT_FALSE(slept);
  EXPECT_TRUE(sim.stopped());
  sim.run(1, [&](int) { EXPECT_FALSE(sim.stopped()); });  // a new run starts unstopped
  EXPECT_FALSE(sim.stopped());
}

TEST(VirtualTime, FiveHundredTwelveCpusPassAToken) {
  constexpr int kCpus = 512;
  std::deque<WaitQueue> token;
  for (int i = 0; i < kCpus; ++i) token.emplace_back("token " + std::to_string(i));
  std::vector<vtime> done(kCpus, 0);
  std::vector<Event> log;
  Simulator sim;
  sim.run(kCpus, [&](int cpu) {
    sim.sync();
    if (cpu > 0) {
      ASSERT_TRUE(token[cpu].wait());  // every other CPU blocks at 0 before cpu 0 goes on
    }
    sim.advance(1 * ns);
    sim.sync();
    log.push_back({cpu, sim.now()});
    if (cpu + 1 < kCpus) {
      EXPECT_EQ(token[cpu + 1].wake_one(sim.now()), cpu + 1);
    }
    done[cpu] = sim.now();
  });
  ASSERT_EQ(log.size(), size_t(kCpus));
  for (int cpu = 0; cpu < kCpus; ++cpu) {
    EXPECT_EQ(log[cpu], (Event{cpu, vtime(cpu + 1) * ns}));
    EXPECT_EQ(done[cpu], vtime(cpu + 1) * ns);
  }
  const std::vector<Event> many = lock_run(sim, kCpus, 7, 4);  // 512 CPUs contending
  EXPECT_EQ(many.size(), size_t(kCpus) * 4);
  EXPECT_TRUE(std::is_sorted(many.begin(), many.end(), by_time_then_cpu));
}

TEST(VirtualTime, TwoSimulatorsOnTwoHostThreads) {
  Simulator reference_sim;
  const std::vector<Event> reference = lock_run(reference_sim, 8, 11);
  std::vector<Event> logs[2];
  bool own_simulator[2] = {false, false};
  std::thread threads[2];
  for (int t = 0; t < 2; ++t)
    threads[t] = std::thread([&, t] {
      Simulator sim;
      Simulator* seen = nullptr;
      sim.run(1, [&](int) { seen = Simulator::current(); });
      own_simulator[t] = seen == &sim;
      logs[t] = lock_run(sim, 8, 11);
    });
  EXPECT_EQ(Simulator::current(), nullptr);  // this thread runs none
  for (std::thread& th : threads) th.join();
  EXPECT_TRUE(own_simulator[0]);
  EXPECT_TRUE(own_simulator[1]);
  EXPECT_EQ(logs[0], reference);
  EXPECT_EQ(logs[1], reference);
}

TEST(VirtualTime, BadInputIsRefusedNamingTheParameter) {
  Simulator sim;
  const auto body = [](int) {};
  EXPECT_EQ(message_of<std::invalid_argument>([&] { sim.run(0, body); }), "nr_cpus: 0 (allowed: 1..4096)");
  EXPECT_EQ(message_of<std::invalid_argument>([&] { sim.run(-3, body); }), "nr_cpus: -3 (allowed: 1..4096)");
  EXPECT_EQ(message_of<std::invalid_argument>([&] { sim.run(4097, body); }), "nr_cpus: 4097 (allowed: 1..4096)");
  EXPECT_EQ(message_of<std::invalid_argument>([&] { sim.run(1, {}); }), "body: an empty function");
  Options zero_stack;
  zero_stack.stack_size = 0;
  EXPECT_EQ(message_of<std::invalid_argument>([&] { Simulator s(zero_stack); }),
            "stack_size: 0 bytes (allowed: 16384..1073741824)");
  Options zero_polls;
  zero_polls.livelock_polls = 0;
  EXPECT_EQ(message_of<std::invalid_argument>([&] { Simulator s(zero_polls); }),
            "livelock_polls: 0 (must be at least 1)");
  EXPECT_EQ(message_of<std::invalid_argument>(
                [&] { sim.run(1, [&](int) { (void)sim.wait_until([] { return false; }, 0, "x"); }); }),
            "poll_cost: 0 ps (a poll must take virtual time)");

  // Misuse: outside a fiber, off a sync point, re-entering run(), overflowing the clock.
  WaitQueue q("q");
  EXPECT_THROW(sim.advance(1), std::logic_error);
  EXPECT_THROW(sim.sync(), std::logic_error);
  EXPECT_THROW((void)q.wait(), std::logic_error);
  EXPECT_EQ(message_of<std::logic_error>([&] {
              sim.run(2, [&](int cpu) {
                if (cpu == 0) {
                  sim.advance(10 * ns);
                  (void)q.wait();
                }
              });
            }),
            "wait: cpu 0 touches 'q' at 10.000 ns before cpu 1 has run to 0 ps (call sync() first)");
  EXPECT_THROW(sim.run(1, [&](int) { sim.run(1, body); }), std::logic_error);
  EXPECT_THROW(sim.run(1,
                       [&](int) {
                         sim.advance(~vtime(0));
                         sim.advance(1);
                       }),
               std::overflow_error);
}

TEST(VirtualTimeDeathTest, StackOverflowHitsTheGuardPage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  struct Deep {
    static int recurse(int n) {
      volatile char frame[1024];
      frame[0] = char(n);
      return n == 0 ? frame[0] : recurse(n - 1) + frame[0];
    }
  };
  EXPECT_DEATH(
      {
        Options opts;
        opts.stack_size = 16 * 1024;
        Simulator sim(opts);
        sim.run(1, [](int) { Deep::recurse(1000); });
      },
      "");
}
