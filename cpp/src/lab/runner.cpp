// The runner (see runner.hpp).
#include "alloclab/runner.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <exception>
#include <fstream>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include "alloclab/clock.hpp"
#include "alloclab/lock_domain.hpp"
#include "alloclab/scenario.hpp"

#ifndef ALLOCLAB_VERSION
#define ALLOCLAB_VERSION "0.0.0"
#endif

namespace alloclab {

std::string version() { return ALLOCLAB_VERSION; }

namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(50);

// Shared between the controlling thread and the workers of one run.
struct Control {
  std::atomic<bool> stop{false};
  std::atomic<uint32_t> go{0};  // the start gate
  std::mutex mu;
  std::condition_variable cv;
  int ready = 0;  // workers waiting at the gate
  int done = 0;   // workers finished
  std::exception_ptr error;

  void fail(std::exception_ptr e) {
    std::lock_guard<std::mutex> g(mu);
    if (!error) error = std::move(e);
    stop.store(true);
  }
  void count(int Control::*field) {
    std::lock_guard<std::mutex> g(mu);
    ++(this->*field);
    cv.notify_all();
  }
};

std::string utc_now() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void describe(RunResult& r, const std::string& name, const Params& params, const Machine& machine,
              const RunOptions& opt, const LockConfig& cfg, int n, bool oversubscribed, const MemoryNeed& need,
              const std::string& started);

std::string hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

}  // namespace

RunResult run(const std::string& scenario_name, const std::map<std::string, Value>& given, const RunOptions& opt) {
  const ScenarioDef& def = find_scenario(scenario_name);
  const Params params = Params::resolve(def.params, given, def.name);
  std::unique_ptr<Scenario> sc = def.make(params);
  return run_scenario(*sc, def.name, params, opt);
}

RunResult run_scenario(Scenario& scenario, const std::string& name, const Params& params, const RunOptions& opt) {
  Scenario* sc = &scenario;
  const Machine machine(opt.model ? opt.model : Topology::host(), Topology::host());
  // The slots define the workers: a scenario's count may depend on the model (hugetlb_boot: padata's nworks).
  const std::vector<Slot> slots = sc->place(machine, opt.placement);
  const int n = int(slots.size());
  const bool oversubscribed = machine.oversubscribed(n);

  LockConfig cfg = opt.locks;
  sc->lock_defaults(cfg);
  LockDomain locks(cfg, opt.lockstat, oversubscribed);
  locks.reset_stats(n);
  (void)clock_calibration();  // calibrate before anything is timed
  // timeout_s counts from here: it ends the set-up (its interruption points) and then the workers.
  const auto t_start = std::chrono::steady_clock::now();
  RunEnv env{machine,
             locks,
             slots,
             opt.seed,
             oversubscribed,
             &opt.poll,
             opt.timeout_s > 0 ? clock_ticks() + ns_to_ticks(uint64_t(std::min(opt.timeout_s, 1e9) * 1e9)) : 0};

  MemoryNeed need = sc->memory_needed(machine);
  need.threads = n;  // each worker's stack must fit the address space too (ulimit -v)
  check_memory(need);
  const std::string started = utc_now();
  RunResult r;
  try {
    sc->prepare(env);
  } catch (const RunInterrupted& e) {
    if (!e.timed_out) throw;  // Ctrl-C: the caller raises KeyboardInterrupt; nothing has started
    r.stopped = true;
    r.stop_reason = "timeout after " + std::to_string(opt.timeout_s) + " s, during set-up (no worker ran)";
    describe(r, name, params, machine, opt, cfg, n, oversubscribed, need, started);
    return r;
  }

  Control ctl;
  std::vector<WorkerCtx> ctxs;
  ctxs.reserve(size_t(n));
  for (const Slot& s : slots) ctxs.emplace_back(s, opt.seed, ctl.stop);
  std::vector<WorkerRow> rows(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  threads.reserve(size_t(n));

  auto body = [&](int w) {
    WorkerCtx& ctx = ctxs[size_t(w)];
    WorkerRow& row = rows[size_t(w)];
    row.slot = ctx.slot;
    const BindOutcome b = machine.bind_current_thread(ctx.slot);
    row.bind_ok = b.ok;
    row.cpu_used = b.cpu_used;
    row.bind_error = b.error;
    if (!b.ok && opt.strict)
      ctl.fail(std::make_exception_ptr(std::runtime_error("strict: worker " + std::to_string(w) +
                                                          " could not be bound to host PU " +
                                                          std::to_string(ctx.slot.host_pu) + ": " + b.error)));
    locks.attach(w, ctx.slot.model_pu);
    ctl.count(&Control::ready);
    ctl.go.wait(0);
    if (!ctl.stop.load()) {
      const uint64_t t0 = clock_ticks();
      try {
        sc->work(ctx);
      } catch (...) {
        ctl.fail(std::current_exception());
      }
      const uint64_t t1 = ctx.timed_end() ? ctx.timed_end() : clock_ticks();
      row.elapsed_s = ticks_to_ns(t1 - t0) * 1e-9;
    }
    LockDomain::detach();
    ctl.count(&Control::done);
  };

  auto release_and_join = [&] {
    ctl.go.store(1);
    ctl.go.notify_all();
    for (auto& t : threads) t.join();
  };

  try {
    for (int w = 0; w < n; ++w) threads.emplace_back(body, w);
  } catch (const std::system_error& e) {
    ctl.stop.store(true);
    release_and_join();
    throw std::runtime_error("could not start worker " + std::to_string(threads.size()) + " of " + std::to_string(n) +
                             ": " + e.what());
  }
  {
    std::unique_lock<std::mutex> g(ctl.mu);
    ctl.cv.wait(g, [&] { return ctl.ready == n; });
  }

  ctl.go.store(1);
  ctl.go.notify_all();
  for (;;) {
    std::unique_lock<std::mutex> g(ctl.mu);
    if (ctl.cv.wait_for(g, kPollInterval, [&] { return ctl.done == n; })) break;
    g.unlock();
    if (ctl.stop.load()) continue;  // already stopping (error): wait for the workers to notice
    if (opt.poll && opt.poll()) {
      env.interrupted = true;  // finish()'s interruption points end the teardown
      r.stopped = true;
      r.stop_reason = "interrupted";
      ctl.stop.store(true);
    } else if (opt.timeout_s > 0 &&
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count() > opt.timeout_s) {
      r.stopped = true;
      r.stop_reason = "timeout after " + std::to_string(opt.timeout_s) + " s";
      ctl.stop.store(true);
    }
  }
  for (auto& t : threads) t.join();
  if (ctl.error) std::rethrow_exception(ctl.error);

  for (size_t w = 0; w < rows.size(); ++w) {
    WorkerRow& row = rows[w];
    const WorkerCtx& ctx = ctxs[w];
    row.ops = ctx.ops();
    const LatencyHistogram& h = ctx.latency();
    row.lat_count = h.count();
    row.lat_mean_ns = h.mean();
    row.lat_p50_ns = h.percentile(0.50);
    row.lat_p99_ns = h.percentile(0.99);
    row.lat_max_ns = double(h.max());
    row.allocs_recorded = ctx.allocs_recorded();
    row.alloc_digest = ctx.alloc_digest();
    row.metrics = std::move(ctxs[w].metrics());
  }
  r.workers = std::move(rows);
  r.lockstat = locks.rows();

  env.deadline = 0;  // the checks and teardown after the run always finish, unless Ctrl-C ends them
  sc->finish(env, r);
  describe(r, name, params, machine, opt, cfg, n, oversubscribed, need, started);
  return r;
}

namespace {

// The run's parameters and provenance.
void describe(RunResult& r, const std::string& name, const Params& params, const Machine& machine,
              const RunOptions& opt, const LockConfig& cfg, int n, bool oversubscribed, const MemoryNeed& need,
              const std::string& started) {
  r.scenario = name;
  for (const auto& [k, v] : params.values()) r.params.emplace_back(k, v);

  int bound = 0;
  for (const auto& w : r.workers) bound += w.bind_ok;
  auto& p = r.provenance;
  const Topology& model = machine.model();
  const char* source = model.source() == Topology::Source::host        ? "host"
                       : model.source() == Topology::Source::synthetic ? "synthetic"
                                                                       : "xml";
  p.emplace_back("model_topology", std::string(source));
  p.emplace_back("model_description", model.description());
  p.emplace_back("model_nodes", int64_t(model.nr_nodes()));
  p.emplace_back("model_pus", int64_t(model.nr_pus()));
  p.emplace_back("host_topology", machine.host().tree());
  p.emplace_back("host_nodes", int64_t(machine.host().nr_nodes()));
  p.emplace_back("host_pus", int64_t(machine.host().nr_pus()));
  p.emplace_back("placement", to_string(opt.placement.policy));
  p.emplace_back("workers", int64_t(n));
  p.emplace_back("workers_bound", int64_t(bound));
  p.emplace_back("memory_needed", int64_t(need.bytes));  // what the run declared, checked before it allocated
  p.emplace_back("oversubscribed", oversubscribed);
  p.emplace_back("lockstat", opt.lockstat);
  std::string kinds;
  for (const auto& c : lock_class_catalogue())
    kinds += (kinds.empty() ? "" : ", ") + std::string(c.name) + "=" + std::string(to_string(cfg.kind_for(c.name)));
  p.emplace_back("lock_kinds", kinds);
  p.emplace_back("seed", int64_t(opt.seed));
  p.emplace_back("clock", std::string(clock_source()));
  p.emplace_back("alloclab_version", version());
  p.emplace_back("hostname", hostname());
  p.emplace_back("started", started);
  p.emplace_back("ended", utc_now());
}

}  // namespace

}  // namespace alloclab
