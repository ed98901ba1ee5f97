// Simulator: one fiber per virtual CPU of a described machine, run on the calling host thread in virtual-time order.
//
// Models: a machine of up to 4096 CPUs executing the same model code in virtual time: direct-execution discrete-event
// simulation, as in the Wisconsin Wind Tunnel, Graphite or SlackSim. Each virtual CPU has its own clock. Work between
// sync points is charged with advance() and runs without switching; at a sync point (sync(), and every wait) the
// runnable CPU with the smallest (clock, cpu) runs next, so every access to shared state made at sync points happens
// in virtual-time order, ties broken by CPU id. Nothing else decides the order: a run is a pure function of its
// inputs, identical on every host and every time. The runnable CPUs wait in a min-heap (ready_queue.hpp); a CPU that
// yields switches straight to the next one's fiber (fiber.hpp), without a round trip through the host.
//
// Waits: blocking on a WaitQueue (wait_queue.hpp), sleeping to a virtual time (block_until), and polling a plain
// predicate (wait_until, for model code that spins on a flag or retries a trylock). A wait that can never end is an
// error, never a hang: when no CPU can run but some are blocked, run() throws VirtualDeadlock naming each blocked CPU,
// what it waits on and since when; when the only runnable CPUs are pollers that keep failing, nothing can change what
// they poll (a failed poll changes nothing), so after `livelock_polls` failed polls per runnable CPU with no other
// progress, run() throws VirtualDeadlock naming the pollers.
//
// Stopping: Options::poll (Ctrl-C, a timeout) is called on the host thread, outside every fiber, about every 50 ms of
// host time (the host clock is read once per 1024 scheduling decisions, sync() calls included, so a body that loops
// without a sync point is never interrupted); when it returns true (it is not called again), or a body calls stop(),
// the run is stopped: stopped() becomes true, every blocked CPU is released (its wait() returns false), and from then
// on waits return false at once, so bodies that check them unwind and run() returns. A stop is the one input from
// outside: where it lands in virtual time depends on the host. Errors: the first
// exception a body throws (or the poll callback, or a VirtualDeadlock) ends the run; every other fiber is unwound
// (each object on its stack destroyed, in CPU order) and run() rethrows it.
//
// Leaves out: preemption (a CPU runs until its next sync point, as a pinned worker would); parallel simulation (one
// host thread, so the host's CPU count does not matter); time not charged with advance() costs nothing.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "alloclab/base/fiber.hpp"
#include "alloclab/base/ready_queue.hpp"
#include "alloclab/base/tls.hpp"
#include "alloclab/base/vclock.hpp"
#include "alloclab/base/wait_queue.hpp"

namespace alloclab::vt {

// The simulator's version, recorded in every virtual-clock result: it changes whenever the same inputs could give
// different virtual times (the scheduling rule, what a sync point is). 2: a clock read costs Options::clock_read;
// 3: an MCS pass is two transfers (mcs_pass_at); 4: a lock kind's uncontended ops are its own (LockKindTraits::lock,
// unlock); 5: independent misses overlap (CostModel::touch_each, misses_in_flight.core); 6: the vmalloc free tree's
// propagation up a path is one such group; 7: struct page writes stream at the update bandwidth (Stream); 8: struct
// page reads at the load bandwidth; 9: a struct page pass's line accesses overlap its stream (CostModel::pass); 10:
// struct pages written unread stream at the store bandwidth; 11: a clear_page is a store stream, and a page that
// follows the same CPU's previous page op pays no cold-page latency (CostModel::pages); 12: such a page pays the
// profile's page_ns.<op>_ascending; 13: cache capacity: a tracked line an LLC's worth of newer lines has pushed out
// pays the DRAM latency (cache_mib.llc), or the stream where the CPU's previous such miss was in its 4 KiB page; 14:
// lock_stat's clock reads are free (instrument_ticks()): a run with lock_stat has the virtual times of one without;
// 15: the streamer's page rule holds for node memory only (a heap object's page made times depend on the heap); 16:
// the runner's start gate: each worker starts at a phase of its spin loop drawn from the run's seed (the start order);
// 17: private cache levels: a tracked line that has left its last user's L1D (L2) costs cache_ns.l2 (cache_ns.llc);
// 18: a lock kind's uncontended accesses run in its RMWs' shadow (LockOps: the larger of the two, not their sum).
inline constexpr int kSimulatorVersion = 18;

// Thrown out of model code whose wait ended because the run was stopped (a lock, a page flag, a completion): the
// wait cannot be granted any more, so the worker unwinds to the runner, which catches it.
class Stopped : public std::exception {
 public:
  const char* what() const noexcept override { return "the virtual-clock run was stopped"; }
};

// No virtual CPU can ever run again (deadlock), or only pollers that cannot succeed can (livelock).
class VirtualDeadlock : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Options {
  std::size_t stack_size = 256 * 1024;  // bytes of stack per virtual CPU (16 KiB .. 1 GiB), plus a guard page
  std::function<bool()> poll;           // host-time check (Ctrl-C, timeout): true stops the run; empty: never
  uint64_t livelock_polls = 100'000;    // failed polls per runnable CPU, nothing else progressing, that are a livelock
  vtime clock_read = 0;                 // what one read of the clock costs the reading CPU (read_clock())
};

class Simulator {
 public:
  static constexpr int kMaxCpus = 4096;

  // std::invalid_argument ("stack_size: ...", "livelock_polls: ...") for options out of range.
  explicit Simulator(Options options = {});
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  // Runs body(cpu) for cpu = 0 .. nr_cpus-1, each on its own fiber with its clock at 0, to completion, on the calling
  // thread; returns when every body has returned. Throws what a body threw first, or VirtualDeadlock, after unwinding
  // every fiber; std::invalid_argument ("nr_cpus: ...", "body: ...") before anything runs; std::logic_error when this
  // simulator is already running.
  void run(int nr_cpus, std::function<void(int cpu)> body);

  // The simulator running on this host thread (nullptr outside run(), so real-clock code can tell); the virtual CPU
  // whose fiber calls is vt::current_cpu() (vclock.hpp).
  static Simulator* current() noexcept { return tls_current_; }

  // The number of virtual CPUs of the current run (0 outside run()).
  int nr_cpus() const noexcept { return nr_cpus_; }
  // Whether the run is stopped (after run() returns: whether the last run was).
  bool stopped() const noexcept { return stopped_; }
  // Stops the run (see the file comment): releases every blocked CPU; waits return false from now on. During run().
  void stop();

  // The functions below run on this simulator's fibers (std::logic_error elsewhere) and act on the calling CPU.

  // The calling CPU's clock.
  vtime now() const { return self().clock; }
  // The calling CPU reads its clock as model code does (clock_ticks(): an RDTSC): the read's cost, Options::clock_read,
  // is charged first, so a span between two reads includes one of them, as on hardware. Returns the clock after it.
  vtime read_clock() {
    advance(opts_.clock_read);
    return now();
  }
  // Charges `dt` of local work: the clock moves on, nothing switches. std::overflow_error past 2^64 ps.
  void advance(vtime dt) { charge(self(), dt); }
  // The sync point: yields when another runnable CPU comes first by (clock, cpu); returns when the caller does.
  void sync() {
    VCpu& c = self();
    if (ready_.before(c.clock, c.cpu))
      yield(c);
    else if (--poll_countdown_ == 0) [[unlikely]]
      check_host_clock(c);
  }
  // Sleeps to virtual time `t` (the clock becomes max(now, t)), then syncs. False when the run is stopped.
  [[nodiscard]] bool block_until(vtime t);
  // Polls `pred` until it holds: syncs and checks it, then per failed check charges `poll_cost`, syncs (another CPU
  // may change the state) and checks again. True once it holds; false when the run is stopped first. `pred` must not
  // change shared state when it returns false (a failed trylock, a flag read), and `label` (what is polled, e.g.
  // "PG_locked") must outlive the call. A predicate that turns true by virtual time alone must do so within
  // Options::livelock_polls polls. std::invalid_argument ("poll_cost: ...") for a zero cost.
  template <class Pred>
  [[nodiscard]] bool wait_until(Pred&& pred, vtime poll_cost, std::string_view label);

 private:
  friend class WaitQueue;
  enum class State : uint8_t { runnable, blocked, finished };
  // Cache-line aligned, the fiber's switch state first: 512 CPUs switch about 5% faster than packed (bench_vsim).
  struct alignas(64) VCpu {
    std::optional<Fiber> fiber;  // created by run() for every CPU
    int cpu = -1;
    vtime clock = 0;                // this CPU's virtual time
    State state = State::runnable;  // runnable: running, or in ready_
    bool polling = false;           // inside wait_until: its failed checks count towards a livelock
    bool woken = false;             // the last wait() ended with a wake-up, not with the run's stop
    std::string_view poll_label;    // what wait_until polls for, while polling
    vtime poll_since = 0;           // the clock when wait_until started polling
    Waiter waiter;                  // linked into a WaitQueue while blocked
  };
  // Marks a CPU as polling for the duration of a wait_until.
  struct PollScope {
    PollScope(VCpu& c, std::string_view label) : c(c) {
      c.polling = true;
      c.poll_label = label;
      c.poll_since = c.clock;
    }
    ~PollScope() { c.polling = false; }
    VCpu& c;
  };

  VCpu& self() const {
    const int cpu = detail::tls_vcpu;
    if (cpu < 0) [[unlikely]]
      not_on_a_fiber();
    return cpus_[cpu];
  }
  void charge(VCpu& c, vtime dt) {
    if (__builtin_add_overflow(c.clock, dt, &c.clock)) [[unlikely]]
      clock_overflow(c, dt);
  }
  [[noreturn]] static void not_on_a_fiber();
  [[noreturn]] static void clock_overflow(const VCpu& c, vtime dt);

  // `c` stays runnable but another CPU comes first: `c` becomes ready and the earliest ready CPU runs.
  void yield(VCpu& c);
  // `c` blocked: the earliest ready CPU runs, or the scheduler when a poll is due or none is ready (a deadlock).
  void run_next(VCpu& c);
  // From the running `c` to the ready CPU `next`.
  void switch_cpu(VCpu& c, int next);
  // From the running `c` to the scheduler; during the unwinding it never switches (see Fiber::switch_to).
  void switch_to_host(VCpu& c, bool poll);
  // Every 1024 scheduling decisions: whether Options::poll is due (reads the host clock).
  bool poll_due();
  // sync() after its countdown ran out: yields to the scheduler when a poll is due, else syncs as usual.
  void check_host_clock(VCpu& c);
  // A failed wait_until check: counts it, and at the livelock threshold ends the run with VirtualDeadlock.
  void failed_poll(VCpu& c);
  // Throws std::logic_error unless `c` is the earliest runnable CPU ("op" and "what" name the operation).
  void require_sync_point(const VCpu& c, const char* op, const std::string& what) const {
    if (!unwinding_ && ready_.before(c.clock, c.cpu)) [[unlikely]]
      not_a_sync_point(c, op, what);
  }
  [[noreturn]] void not_a_sync_point(const VCpu& c, const char* op, const std::string& what) const;
  // WaitQueue's side: the simulator of the calling fiber; the calling CPU waits on `q` (at its head with `first`);
  // `w` of `q` is woken at `at`; the waiter of `cpu`, if any.
  static Simulator& on_a_fiber();
  bool block(WaitQueue& q, bool first = false);
  void wake(const WaitQueue& q, const Waiter& w, vtime at);
  const Waiter* waiter_of(int cpu) const noexcept;

  // A blocked `c` becomes runnable (woken, or released by stop()).
  void make_ready(VCpu& c);
  // The scheduler loop on the host thread: starts the earliest ready CPU, and whenever control comes back (a CPU
  // finished, a poll is due, nothing is ready, an error) handles it and starts the next, until none is left.
  void schedule();
  // Calls Options::poll when 50 ms of host time have passed since the last call.
  void poll_host();
  // "cpu 0 waits on 'zone->lock' since 1.234 us; cpu 2 polls 'PG_locked' since 3.000 ns" for every waiting CPU.
  std::string describe_waits() const;
  // Unwinds every unfinished fiber in CPU order, then frees the run's state.
  void end_run() noexcept;

  // The CPU whose fiber runs is detail::tls_vcpu (vclock.hpp): -1 in the scheduler.
  ALLOCLAB_TLS static inline constinit thread_local Simulator* tls_current_ = nullptr;

  Options opts_;
  Fiber* host_ = nullptr;         // the host thread's context during run()
  std::unique_ptr<VCpu[]> cpus_;  // the run's virtual CPUs (null between runs)
  ReadyQueue ready_;              // the runnable CPUs but the running one
  int nr_cpus_ = 0;
  int finished_ = 0;             // bodies that have returned
  uint32_t poll_countdown_ = 1;  // scheduling decisions until the host clock is read
  bool poll_requested_ = false;  // a fiber switched to the scheduler so that it calls Options::poll
  bool stopped_ = false;
  bool unwinding_ = false;   // end_run() is unwinding the fibers
  uint64_t idle_polls_ = 0;  // failed polls since anything else happened
  std::chrono::steady_clock::time_point next_poll_;
  std::exception_ptr error_;  // what ends the run
};

template <class Pred>
bool Simulator::wait_until(Pred&& pred, vtime poll_cost, std::string_view label) {
  if (poll_cost == 0) throw std::invalid_argument("poll_cost: 0 ps (a poll must take virtual time)");
  VCpu& c = self();
  sync();
  if (pred()) return true;
  PollScope polling(c, label);
  for (;;) {
    if (stopped_ || unwinding_) return false;
    charge(c, poll_cost);
    failed_poll(c);
    sync();
    if (pred()) {
      idle_polls_ = 0;
      return true;
    }
  }
}

}  // namespace alloclab::vt
