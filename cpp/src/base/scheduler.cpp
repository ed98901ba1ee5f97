// The simulator: its scheduling loop and switches, its waits, its stop and its errors (see scheduler.hpp).
#include "alloclab/base/scheduler.hpp"

#include <algorithm>
#include <utility>

namespace alloclab::vt {

namespace {

constexpr uint32_t kPollEvery = 1024;  // scheduling decisions between two host-clock reads
constexpr auto kPollInterval = std::chrono::milliseconds(50);
constexpr std::size_t kMinStack = 16 * 1024;
constexpr std::size_t kMaxStack = std::size_t(1) << 30;

}  // namespace

Simulator::Simulator(Options options) : opts_(std::move(options)) {
  if (opts_.stack_size < kMinStack || opts_.stack_size > kMaxStack)
    throw std::invalid_argument("stack_size: " + std::to_string(opts_.stack_size) + " bytes (allowed: " +
                                std::to_string(kMinStack) + ".." + std::to_string(kMaxStack) + ")");
  if (opts_.livelock_polls == 0) throw std::invalid_argument("livelock_polls: 0 (must be at least 1)");
}

void Simulator::not_on_a_fiber() {
  throw std::logic_error("virtual time: not called from a virtual CPU of a running simulator");
}

void Simulator::clock_overflow(const VCpu& c, vtime dt) {
  throw std::overflow_error("advance: cpu " + std::to_string(c.cpu) + "'s clock " + format_vtime(c.clock) + " + " +
                            format_vtime(dt) + " overflows 2^64 ps");
}

Simulator& Simulator::on_a_fiber() {
  Simulator* const s = tls_current_;
  if (!s || detail::tls_vcpu < 0) not_on_a_fiber();
  return *s;
}

// --- Running ---------------------------------------------------------------------------------------------------

void Simulator::run(int nr_cpus, std::function<void(int cpu)> body) {
  if (nr_cpus < 1 || nr_cpus > kMaxCpus)
    throw std::invalid_argument("nr_cpus: " + std::to_string(nr_cpus) + " (allowed: 1.." + std::to_string(kMaxCpus) +
                                ")");
  if (!body) throw std::invalid_argument("body: an empty function");
  if (cpus_) throw std::logic_error("run: this simulator is already running");

  Simulator* const outer = std::exchange(tls_current_, this);
  const int outer_cpu = std::exchange(detail::tls_vcpu, -1);  // a run inside another run's fiber
  Fiber host;
  host_ = &host;
  nr_cpus_ = nr_cpus;
  finished_ = 0;
  poll_countdown_ = kPollEvery;
  poll_requested_ = false;
  stopped_ = false;
  idle_polls_ = 0;
  error_ = nullptr;
  cpus_ = std::make_unique<VCpu[]>(nr_cpus);
  try {
    ready_.reserve(nr_cpus);
    for (int i = 0; i < nr_cpus; ++i) {
      VCpu& c = cpus_[i];
      c.cpu = i;
      c.waiter.cpu = i;
      c.fiber.emplace(host, opts_.stack_size, [&body, i] { body(i); });
      ready_.push(0, i);
    }
    schedule();
  } catch (...) {  // creating the fibers, or the poll callback
    if (!error_) error_ = std::current_exception();
  }
  end_run();
  host_ = nullptr;
  tls_current_ = outer;
  detail::tls_vcpu = outer_cpu;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void Simulator::schedule() {
  next_poll_ = std::chrono::steady_clock::now() + kPollInterval;
  while (!ready_.empty() && !error_) {
    VCpu& c = cpus_[ready_.pop()];
    if (!c.polling) idle_polls_ = 0;  // a CPU that is not polling may change what the pollers wait for
    detail::tls_vcpu = c.cpu;
    host_->switch_to(*c.fiber);
    VCpu& back = cpus_[detail::tls_vcpu];  // the CPU that switched here
    detail::tls_vcpu = -1;
    if (back.fiber->finished()) {
      back.state = State::finished;
      ++finished_;
      if (back.fiber->error() && !error_) error_ = back.fiber->error();
    }
    if (poll_requested_) poll_host();
  }
  if (!error_ && finished_ < nr_cpus_)
    error_ = std::make_exception_ptr(VirtualDeadlock("virtual deadlock: " + describe_waits()));
}

void Simulator::switch_cpu(VCpu& c, int next) {
  VCpu& n = cpus_[next];
  if (!n.polling) idle_polls_ = 0;  // a CPU that is not polling may change what the pollers wait for
  detail::tls_vcpu = next;
  c.fiber->switch_to(*n.fiber);
}

void Simulator::switch_to_host(VCpu& c, bool poll) {
  poll_requested_ = poll;
  c.fiber->switch_to(*host_);
}

void Simulator::yield(VCpu& c) {
  if (unwinding_) return switch_to_host(c, false);
  if (--poll_countdown_ == 0 && poll_due()) {
    ready_.push(c.clock, c.cpu);
    return switch_to_host(c, true);
  }
  switch_cpu(c, ready_.replace_top(c.clock, c.cpu));
}

void Simulator::run_next(VCpu& c) {
  if (unwinding_ || ready_.empty()) return switch_to_host(c, false);  // ready_ empty: a deadlock
  if (--poll_countdown_ == 0 && poll_due()) return switch_to_host(c, true);
  switch_cpu(c, ready_.pop());
}

void Simulator::make_ready(VCpu& c) {
  c.state = State::runnable;
  ready_.push(c.clock, c.cpu);
}

void Simulator::end_run() noexcept {
  unwinding_ = true;
  for (int i = 0; i < nr_cpus_; ++i) {
    VCpu& c = cpus_[i];
    if (!c.fiber || c.fiber->finished()) continue;
    detail::tls_vcpu = i;
    c.fiber->unwind();
  }
  detail::tls_vcpu = -1;
  unwinding_ = false;
  cpus_.reset();
  ready_.clear();
  nr_cpus_ = 0;
}

// --- Host time: Options::poll ----------------------------------------------------------------------------------

bool Simulator::poll_due() {
  poll_countdown_ = kPollEvery;
  return opts_.poll && !stopped_ && std::chrono::steady_clock::now() >= next_poll_;
}

void Simulator::check_host_clock(VCpu& c) {
  if (!poll_due()) return;
  ready_.push(c.clock, c.cpu);
  switch_to_host(c, true);  // the scheduler polls, then runs the earliest CPU: this one unless stop() came first
}

void Simulator::poll_host() {
  poll_requested_ = false;
  if (!poll_due()) return;
  next_poll_ = std::chrono::steady_clock::now() + kPollInterval;
  if (opts_.poll()) stop();
}

// --- Stopping and errors ---------------------------------------------------------------------------------------

void Simulator::stop() {
  if (stopped_) return;
  stopped_ = true;
  for (int i = 0; i < nr_cpus_; ++i) {
    VCpu& c = cpus_[i];
    if (c.state != State::blocked) continue;
    c.waiter.unlink();
    c.waiter.queue = nullptr;
    c.woken = false;
    make_ready(c);
  }
}

void Simulator::failed_poll(VCpu& c) {
  if (++idle_polls_ < opts_.livelock_polls || idle_polls_ / (ready_.size() + 1) < opts_.livelock_polls) return;
  // A ready CPU that is not polling runs once the pollers' clocks pass its own, and may change what they poll.
  if (ready_.any([&](int cpu) { return !cpus_[cpu].polling; })) {
    idle_polls_ = 0;
    return;
  }
  error_ = std::make_exception_ptr(VirtualDeadlock("virtual livelock: " + describe_waits()));
  switch_to_host(c, false);  // the scheduler sees error_ and unwinds every fiber, this one included
}

std::string Simulator::describe_waits() const {
  std::string text;
  for (int i = 0; i < nr_cpus_; ++i) {
    const VCpu& c = cpus_[i];
    std::string what;
    if (c.state == State::blocked)
      what =
          (c.waiter.queue ? "waits on '" + c.waiter.queue->label() + "'" : std::string("waits on a destroyed queue")) +
          " since " + format_vtime(c.waiter.since);
    else if (c.polling && c.state != State::finished)
      what = "polls '" + std::string(c.poll_label) + "' since " + format_vtime(c.poll_since);
    else
      continue;
    if (!text.empty()) text += "; ";
    text += "cpu " + std::to_string(i) + " " + what;
  }
  return text;
}

void Simulator::not_a_sync_point(const VCpu& c, const char* op, const std::string& what) const {
  const VCpu& first = cpus_[ready_.top_cpu()];
  throw std::logic_error(std::string(op) + ": cpu " + std::to_string(c.cpu) + " touches '" + what + "' at " +
                         format_vtime(c.clock) + " before cpu " + std::to_string(first.cpu) + " has run to " +
                         format_vtime(first.clock) + " (call sync() first)");
}

// --- Waits -----------------------------------------------------------------------------------------------------

bool Simulator::block_until(vtime t) {
  VCpu& c = self();
  if (stopped_) return false;
  c.clock = std::max(c.clock, t);
  sync();
  return !stopped_;
}

bool Simulator::block(WaitQueue& q, bool first) {
  VCpu& c = self();
  if (unwinding_) {
    switch_to_host(c, false);  // throws, unless called from a destructor the unwinding runs
    return false;
  }
  if (stopped_) return false;
  require_sync_point(c, "wait", q.label());
  c.state = State::blocked;
  c.woken = false;
  c.waiter.since = c.clock;
  c.waiter.queue = &q;
  if (first)
    q.waiters_.push_front(c.waiter);
  else
    q.waiters_.push_back(c.waiter);
  run_next(c);  // if unwound from here, the waiter stays queued until end_run() frees it (auto-unlink hook)
  return c.woken;
}

void Simulator::wake(const WaitQueue& q, const Waiter& w, vtime at) {
  require_sync_point(self(), "wake", q.label());
  VCpu& c = cpus_[w.cpu];
  c.waiter.unlink();
  c.waiter.queue = nullptr;
  c.clock = std::max(c.clock, at);
  c.woken = true;
  make_ready(c);
}

const Waiter* Simulator::waiter_of(int cpu) const noexcept {
  return cpu >= 0 && cpu < nr_cpus_ ? &cpus_[cpu].waiter : nullptr;
}

}  // namespace alloclab::vt
