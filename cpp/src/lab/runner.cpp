// The runner (see runner.hpp).
#include "alloclab/lab/runner.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <ctime>
#include <exception>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include "alloclab/base/clock.hpp"
#include "alloclab/base/rng.hpp"
#include "alloclab/base/scheduler.hpp"
#include "alloclab/lab/scenario.hpp"
#include "alloclab/locks/lock_domain.hpp"
#include "alloclab/topology/host_load.hpp"

#ifndef ALLOCLAB_VERSION
#define ALLOCLAB_VERSION "0.0.0"
#endif

namespace alloclab {

std::string version() { return ALLOCLAB_VERSION; }

namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(50);
// overlap_poor: the workers were running together for less than kOverlapGood of the run, and the scheduler is why
// (the last one started later than kSchedulerLost of the run, or one waited that long on a runqueue). Workers that
// end apart by design (the CMA staircase behind one mutex, an unfair lock) are the result, not a bad measurement.
constexpr double kOverlapGood = 0.9;
constexpr double kSchedulerLost = 0.1;
constexpr double kRunqWaiting = 0.05;  // oversubscribed as it happened: a worker waited this share for a CPU

// Shared between the controlling thread and the workers of one run.
struct Control {
  std::atomic<bool> stop{false};
  std::atomic<int> ready{0};    // workers at the start gate
  std::atomic<uint32_t> go{0};  // the start gate: workers spin on it
  RunPhase phase;
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;  // workers finished
  std::exception_ptr error;
  std::string stop_reason;             // set with stop by someone other than this run's controller (stop_all_runs)
  std::atomic<bool> abandoned{false};  // stop_all_runs(..., abandon): the teardown ends too

  void fail(std::exception_ptr e) {
    std::lock_guard<std::mutex> g(mu);
    if (!error) error = std::move(e);
    stop.store(true);
  }
  void stop_for(const std::string& why, bool abandon) {
    std::lock_guard<std::mutex> g(mu);
    if (stop_reason.empty()) stop_reason = why;
    if (abandon) abandoned.store(true);
    stop.store(true);
    cv.notify_all();
  }
  std::string stopped_because() {
    std::lock_guard<std::mutex> g(mu);
    return stop_reason;
  }
  void count_done() {
    std::lock_guard<std::mutex> g(mu);
    ++done;
    cv.notify_all();
  }
};

// ---- the runs in flight in this process -------------------------------------------------------------------------

struct InFlight {
  Control* ctl;
  int workers;
  bool exclusive;
};

struct Registry {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<InFlight> runs;
  std::vector<Control*> waiting;  // runs waiting for their turn (stop_all_runs stops them too)
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: a run may still end during static destruction
  return *r;
}

// Holds a run's place among the runs in flight from its construction (after waiting for its turn) to its end.
class Registration {
 public:
  // Waits while another run excludes this one (an exclusive run waits for every run in flight; every run waits for
  // an exclusive one), asking `poll` every 50 ms; throws RunInterrupted when poll says stop or the run is stopped
  // meanwhile. `others` is the number of workers of the runs still in flight once it may start.
  Registration(Control& ctl, int workers, bool exclusive, const std::function<bool()>& poll) : ctl_(ctl) {
    Registry& reg = registry();
    std::unique_lock<std::mutex> g(reg.mu);
    reg.waiting.push_back(&ctl);
    const auto blocked = [&] {
      if (exclusive) return !reg.runs.empty();
      return std::any_of(reg.runs.begin(), reg.runs.end(), [](const InFlight& r) { return r.exclusive; });
    };
    while (blocked() && !ctl.stop.load()) {
      if (reg.cv.wait_for(g, kPollInterval, [&] { return !blocked() || ctl.stop.load(); })) break;
      g.unlock();
      const bool stop = poll && poll();
      g.lock();
      if (stop) ctl.stop.store(true);
    }
    std::erase(reg.waiting, &ctl);
    if (ctl.stop.load()) throw RunInterrupted(RunInterrupted::Cause::interrupted);
    for (const InFlight& r : reg.runs) others += r.workers;
    reg.runs.push_back({&ctl, workers, exclusive});
  }
  ~Registration() {
    Registry& reg = registry();
    std::lock_guard<std::mutex> g(reg.mu);
    std::erase_if(reg.runs, [&](const InFlight& r) { return r.ctl == &ctl_; });
    reg.cv.notify_all();
  }
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;

  int others = 0;

 private:
  Control& ctl_;
};

// The worker threads of one run. Whatever happens — an exception, a forced unwind of the controlling thread at
// interpreter exit — none is destroyed joinable: the destructor stops the run, opens the gate and joins them.
class WorkerThreads {
 public:
  explicit WorkerThreads(Control& ctl) : ctl_(ctl) {}
  ~WorkerThreads() { stop_and_join(); }
  WorkerThreads(const WorkerThreads&) = delete;
  WorkerThreads& operator=(const WorkerThreads&) = delete;

  template <class F>
  void start(int n, F body) {
    threads_.reserve(size_t(n));
    for (int w = 0; w < n; ++w) threads_.emplace_back(body, w);
  }
  size_t started() const { return threads_.size(); }
  void join() {
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }
  void stop_and_join() {
    ctl_.stop.store(true);
    ctl_.go.store(1);
    join();
  }

 private:
  Control& ctl_;
  std::vector<std::thread> threads_;
};

std::string utc_now() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

// Several workers on one host PU: they take turns on it whatever the host's load.
int distinct_host_pus(const std::vector<Slot>& slots) {
  std::vector<int> pus;
  for (const Slot& s : slots) pus.push_back(s.host_pu);
  std::sort(pus.begin(), pus.end());
  return int(std::unique(pus.begin(), pus.end()) - pus.begin());
}

// The machine a run of `opt` models on the host: the virtual machine's topology, the given model, or the host.
Machine model_machine(const RunOptions& opt) {
  const bool virt = opt.clock == ClockKind::virtual_time;
  return Machine(virt ? opt.machine->topology() : opt.model ? opt.model : Topology::host(), Topology::host());
}

// The check before prepare() allocates anything: the memory `workers` workers of `sc` on `machine` declare they
// need; throws MemoryRefused when the host has less than that and `spare` of it (a share kept free) besides.
MemoryNeed check_run_memory(const Scenario& sc, const Machine& machine, int workers, const RunOptions& opt,
                            double spare = 0) {
  MemoryNeed need = sc.memory_needed(machine);
  // Each worker thread's stack must fit the address space too (ulimit -v); virtual CPUs are fibers.
  need.threads = opt.clock == ClockKind::virtual_time ? 0 : workers;
  MemoryNeed with_spare = need;
  if (const uint64_t kept = uint64_t(double(need.bytes) * spare)) {
    with_spare.bytes += kept;
    with_spare.detail += " + " + format_bytes(kept) + " kept free";
  }
  check_memory(with_spare);
  return need;
}

// `params` with the caller's grow_fit over them, resolved; std::invalid_argument "grow_fit: ..." when they do not fit
// the declaration.
Params with_grow_fit(const ScenarioDef& def, std::map<std::string, Value> params, const RunOptions& opt) {
  for (const auto& [k, v] : opt.grow_fit) params[k] = v;
  try {
    return Params::resolve(def.params, params, def.name);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("grow_fit: ") + e.what());
  }
}

// Why a run of `params` with the caller's grow_fit over them on `machine` (the run's model_machine()) would not fit
// the host's memory with a quarter to spare (the memory available moves between runs), "grow_fit: memory: ...", or ""
// when it would: the runner's own check before prepare(), on the scenario object alone. Parameters the scenario or the
// model refuse (more workers than model PUs) throw std::invalid_argument "grow_fit: ...".
std::string grow_misfit(const ScenarioDef& def, const std::map<std::string, Value>& params, const Machine& machine,
                        const RunOptions& opt) {
  if (opt.grow_fit.empty()) return "";
  const Params fit = with_grow_fit(def, params, opt);
  try {
    const std::unique_ptr<Scenario> sc = def.make(fit);
    check_run_memory(*sc, machine, int(sc->place(machine, opt.placement).size()), opt, 0.25);
  } catch (const MemoryRefused& e) {
    return std::string("grow_fit: ") + e.what();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("grow_fit: ") + e.what());
  }
  return "";
}

// Whether a run was too short to time (RunOptions::min_time_s): only a real clock has timer and start-up noise.
bool short_run(const RunResult& r, const RunOptions& opt) {
  return opt.clock == ClockKind::real && r.elapsed_s < opt.min_time_s;
}

// The next size of a run that was too short (Google Benchmark's rule: aim 40 % past the goal, at most 10x, 10x
// when the run was too short to extrapolate from), rounded up to the step and capped at the parameter's maximum.
int64_t grown_size(int64_t size, double elapsed, double goal, const ParamSpec& spec, int64_t step) {
  double mult = goal * 1.4 / std::max(elapsed, 1e-9);
  mult = elapsed / goal > 0.1 ? std::min(mult, 10.0) : 10.0;
  double next = std::max(double(size) * mult, double(size + 1));
  next = std::min(next, spec.max);
  int64_t n = int64_t(next);
  n = (n + step - 1) / step * step;
  while (double(n) > spec.max) n -= step;
  return n;
}

// lock_stat against each expectation: a mismatch is an error naming the class, both numbers and the formula.
void check_lock_counts(const std::vector<LockExpectation>& expected, const RunResult& r) {
  if (!r.lockstat_on) return;
  for (const LockExpectation& e : expected) {
    if (!e.expected) continue;
    const LockStatRow* row = r.lock_row(e.cls);
    const uint64_t got = row ? row->acquisitions : 0;
    if (got != *e.expected)
      throw std::runtime_error("lock counts: lock_stat counted " + std::to_string(got) + " acquisitions of " + e.cls +
                               ", the formula says " + std::to_string(*e.expected) + ": " + e.formula);
  }
}

// The same columns for every scenario: <key>_acquisitions (lock_stat, or not measured), <key>_expected (not measured
// without a formula), <key>_formula, and lock_counts_exact (True, or not measured when lock_stat was off or no
// formula applied).
void append_lock_counts(const std::vector<LockExpectation>& expected, RunResult& r) {
  bool checked = false;
  for (const LockExpectation& e : expected) {
    r.summary.emplace_back(e.key + "_acquisitions", r.lock_count(e.cls, &LockStatRow::acquisitions));
    r.summary.emplace_back(e.key + "_expected", e.expected ? Value(int64_t(*e.expected)) : kNotMeasured);
    r.summary.emplace_back(e.key + "_formula", e.formula);
    checked |= e.expected.has_value();
  }
  r.summary.emplace_back("lock_counts_exact", r.lockstat_on && checked ? Value(true) : kNotMeasured);
}

}  // namespace

int stop_all_runs(const std::string& reason, bool abandon) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> g(reg.mu);
  for (const InFlight& r : reg.runs) r.ctl->stop_for(reason, abandon);
  for (Control* c : reg.waiting) c->stop.store(true);
  reg.cv.notify_all();
  return int(reg.runs.size() + reg.waiting.size());
}

int runs_in_flight() {
  Registry& reg = registry();
  std::lock_guard<std::mutex> g(reg.mu);
  return int(reg.runs.size());
}

std::map<std::string, Value> with_lock_params(const ScenarioDef& def, std::map<std::string, Value> given,
                                              const LockConfig& locks) {
  for (const auto& [cls, param] : def.lock_params) {
    const auto over = locks.overrides().find(cls);
    if (over == locks.overrides().end()) continue;
    const std::string kind(to_string(over->second));
    const auto it = given.find(param);
    if (it == given.end()) {
      given[param] = kind;
      continue;
    }
    const auto* value = std::get_if<std::string>(&it->second);
    if (value && *value != kind)
      throw std::invalid_argument(param + ": '" + *value + "' conflicts with locks['" + cls + "']='" + kind +
                                  "' (scenario '" + def.name + "' takes the kind of lock class '" + cls +
                                  "' from its parameter " + param + "; give one of them, or the same kind in both)");
  }
  return given;
}

Params check_run(const std::string& scenario, const std::map<std::string, Value>& given, const RunOptions& opt) {
  const ScenarioDef& def = find_scenario(scenario);
  if (opt.grow && !def.size)
    throw std::invalid_argument("grow: scenario '" + def.name + "' declares no size parameter to grow");
  opt.validate();
  const std::map<std::string, Value> params = with_lock_params(def, given, opt.locks);
  if (!opt.grow_fit.empty()) (void)with_grow_fit(def, params, opt);
  return Params::resolve(def.params, params, def.name);
}

RunResult run(const std::string& scenario_name, const std::map<std::string, Value>& given, const RunOptions& opt) {
  Params resolved = check_run(scenario_name, given, opt);
  const ScenarioDef& def = find_scenario(scenario_name);
  const auto run_resolved = [&] {
    const std::unique_ptr<Scenario> sc = def.make(resolved);
    RunResult r = run_scenario(*sc, def.name, resolved, opt);
    r.provenance.emplace_back("kernel", def.kernel);
    return r;
  };
  if (!opt.grow) return run_resolved();
  std::map<std::string, Value> params = resolved.values();
  const Machine machine = model_machine(opt);
  // A grow_fit that cannot run throws before anything runs; a size already too big for it is not grown.
  std::string misfit = grow_misfit(def, params, machine, opt);
  RunResult r = run_resolved();
  const SizeParam size = def.size(resolved);
  const ParamSpec& spec =
      *std::find_if(def.params.begin(), def.params.end(), [&](const ParamSpec& p) { return p.name == size.name; });
  const int64_t first = resolved.i(size.name);
  int grown = 0;
  std::string why_stopped;  // why a run still too short was not grown further
  while (!r.stopped && short_run(r, opt)) {
    const int64_t now = resolved.i(size.name);
    int64_t next = misfit.empty() ? grown_size(now, r.elapsed_s, opt.min_time_s, spec, size.step) : now;
    try {
      while (next > now) {  // cut a quarter of the step at a time until a run with grow_fit fits
        params[size.name] = next;
        misfit = grow_misfit(def, params, machine, opt);
        if (misfit.empty()) break;
        next = now + (next - now) / 4 * 3 / size.step * size.step;
      }
      if (next <= now) {
        why_stopped = misfit.empty() ? size.name + " is at its maximum" : misfit;
        break;
      }
      resolved = Params::resolve(def.params, params, def.name);
      r = run_resolved();
    } catch (const std::invalid_argument& e) {  // the grown size does not fit (memory, topology): keep the last one
      why_stopped = e.what();
      break;
    }
    ++grown;
  }
  r.provenance.emplace_back("grow_param", size.name);
  r.provenance.emplace_back("grown_from", first);
  r.provenance.emplace_back("grow_steps", int64_t(grown));
  r.provenance.emplace_back("grow_stopped", why_stopped);
  return r;
}

void RunOptions::validate() const {
  if (!grow_fit.empty() && !grow)
    throw std::invalid_argument(
        "grow_fit: given without grow (it names the parameters a grown size must also fit "
        "the host's memory with, e.g. {'threads': 8}; pass grow=True too, or leave it out)");
  const auto seconds = [](const char* name, double v, const char* zero) {
    if (!(v >= 0) || std::isinf(v))
      throw std::invalid_argument(std::string(name) + ": " + std::to_string(v) + " (allowed: a finite number of " +
                                  "seconds >= 0; " + zero + ")");
  };
  seconds("timeout_s", timeout_s, "0 for no limit");
  seconds("min_time_s", min_time_s, "0 flags nothing");
  if (clock == ClockKind::real) {
    if (machine)
      throw std::invalid_argument("machine: '" + machine->name() +
                                  "' is for clock='virtual' (a real-clock run runs on the host; its model is "
                                  "topology=)");
    if (costs)
      throw std::invalid_argument("costs: '" + std::string(kCostsNames(*costs)) +
                                  "' is for clock='virtual' (a real-clock run costs what the host takes)");
    return;
  }
  if (!machine)
    throw std::invalid_argument(
        "machine: required with clock='virtual' (a machine profile, e.g. 'host'; see "
        "al.machines())");
  if (model)
    throw std::invalid_argument("topology: a virtual-clock run's topology is its machine profile's ('" +
                                machine->name() + "'); leave topology unset");
  if (strict)
    throw std::invalid_argument(
        "strict: True binds workers to host PUs, which a virtual-clock run has none of "
        "(allowed: False with clock='virtual')");
}

namespace {

// A virtual-clock run gives each worker a PU of the profile's machine to itself (one virtual CPU = one pinned worker).
void check_virtual_slots(const std::vector<Slot>& slots, const MachineProfile& m) {
  if (int(slots.size()) > vt::Simulator::kMaxCpus)
    throw std::invalid_argument("workers: " + std::to_string(slots.size()) + " (allowed: at most " +
                                std::to_string(vt::Simulator::kMaxCpus) + " virtual CPUs)");
  std::vector<int> pus;
  for (const Slot& s : slots) pus.push_back(s.model_pu);
  std::sort(pus.begin(), pus.end());
  const int distinct = int(std::unique(pus.begin(), pus.end()) - pus.begin());
  if (distinct < int(slots.size()))
    throw std::invalid_argument("placement: " + std::to_string(slots.size()) + " workers on " +
                                std::to_string(distinct) + " PU(s) of machine '" + m.name() +
                                "' (allowed: one PU per worker in a virtual-clock run; the machine has " +
                                std::to_string(m.topology()->nr_pus()) + ")");
}

// The host's clock rate, for measured costs: the TSC's rate where ticks are TSC ticks, else /proc/cpuinfo's.
double host_ghz() {
  if (clock_calibration().tsc) return clock_calibration().ticks_per_ns;
  const double mhz = read_host_load().cpu_mhz;
  if (!(mhz > 0))
    throw std::invalid_argument(
        "costs: 'measured' scales host time by the clock ratio, and this host's clock rate "
        "is unknown (no TSC, no cpu MHz in /proc/cpuinfo); use costs='table'");
  return mhz / 1000.0;
}

// While alive, WorkerCtx::current() finds a virtual-clock run's workers by virtual CPU.
struct VirtualWorkersScope {
  explicit VirtualWorkersScope(std::vector<WorkerCtx>* w) : previous(detail::tls_virtual_workers) {
    detail::tls_virtual_workers = w;
  }
  ~VirtualWorkersScope() { detail::tls_virtual_workers = previous; }
  std::vector<WorkerCtx>* previous;
};

constexpr auto kHardStopGrace = std::chrono::seconds(1);

// The start gate of a virtual-clock run, as the real one: the workers spin on a flag (`while (!go) cpu_relax();`)
// and each sees it open at some phase of its spin loop. Worker w starts at that phase, which the run's seed draws
// uniform over one spin_step (its own stream: the workers' draws stay as they were), so the seed picks the workers'
// start order, and through it the run's interleaving. Leaves out the line's transfer to each spinner: in a model
// without noise it would sort the start by distance for good (a FIFO lock keeps its first queue order forever), which
// a real machine's noise does not. Returns w's start, in virtual time after the release.
vt::vtime gate_seen(const CostModel& costs, uint64_t seed, int w) {
  Rng phase(seed, ~uint64_t(w));
  return phase.below(costs.spin_step());
}

}  // namespace

namespace detail {
thread_local WorkerCtx* tls_worker = nullptr;
thread_local std::vector<WorkerCtx>* tls_virtual_workers = nullptr;
}  // namespace detail

RunResult run_scenario(Scenario& scenario, const std::string& name, const Params& params, const RunOptions& opt) {
  opt.validate();
  const bool virt = opt.clock == ClockKind::virtual_time;
  // Model code converts its nanoseconds to the run's ticks in prepare() and times itself in them.
  std::optional<VirtualClockScope> virtual_clock_scope;
  if (virt) virtual_clock_scope.emplace();
  Scenario* sc = &scenario;
  const Machine machine = model_machine(opt);
  // The slots define the workers: a scenario's count may depend on the model (hugetlb_boot: padata's nworks).
  const std::vector<Slot> slots = sc->place(machine, opt.placement);
  const int n = int(slots.size());
  const int host_pus = machine.host().nr_pus();
  if (virt) check_virtual_slots(slots, *opt.machine);

  Control ctl;
  ctl.phase.workers = n;
  const Registration in_flight(ctl, virt ? 1 : n, opt.exclusive, opt.poll);  // a virtual run is one host thread

  // Oversubscription known before the start: workers sharing a host PU, other runs' workers, other runnable tasks.
  const HostLoad load_start = read_host_load();
  const int host_others = std::max(0, load_start.procs_running - 1);  // -1: this controlling thread
  std::string over_why;
  if (virt)
    ;  // virtual CPUs take no host PU of their own
  else if (distinct_host_pus(slots) < n)
    over_why = std::to_string(n) + " workers on " + std::to_string(distinct_host_pus(slots)) + " host PU(s)";
  else if (in_flight.others + n > host_pus)
    over_why = std::to_string(in_flight.others) + " workers of other runs in this process + " + std::to_string(n) +
               " > " + std::to_string(host_pus) + " host PUs";
  else if (host_others + n > host_pus)
    over_why = std::to_string(host_others) + " other runnable task(s) on the host + " + std::to_string(n) +
               " workers > " + std::to_string(host_pus) + " host PUs";
  const bool spin_yield = !over_why.empty();

  std::unique_ptr<CostModel> costs;
  if (virt) {
    std::vector<int> pus;
    for (const Slot& s : slots) pus.push_back(s.model_pu);
    const Costs c = opt.costs.value_or(Costs::table);
    costs = std::make_unique<CostModel>(opt.machine, c, std::move(pus), c == Costs::measured ? host_ghz() : 1.0);
  }
  const CostScope cost_scope(costs.get());

  LockConfig cfg = opt.locks;
  sc->lock_defaults(cfg);
  LockDomain locks(cfg, opt.lockstat, spin_yield, costs.get());
  locks.reset_stats(n);
  (void)clock_calibration();  // calibrate before anything is timed
  // timeout_s counts from here, in host time: it ends the set-up (its interruption points) and then the workers.
  const auto t_start = std::chrono::steady_clock::now();
  RunEnv env{machine, locks, slots, opt.seed, spin_yield, &opt.poll};
  env.stop = &ctl.stop;
  env.abandoned = &ctl.abandoned;
  if (opt.timeout_s > 0)
    env.deadline = host_ticks() + uint64_t(std::min(opt.timeout_s, 1e9) * 1e9 * clock_calibration().ticks_per_ns);

  const MemoryNeed need = check_run_memory(*sc, machine, n, opt);
  const std::string started = utc_now();
  RunResult r;
  int host_busiest = host_others;  // other runnable tasks seen at the start and at every poll
  // The run's parameters and provenance, given the host's load at its end (also for a run stopped in set-up).
  const auto describe = [&](const HostLoad& load_end) {
    r.scenario = name;
    for (const auto& [k, v] : params.values()) r.params.emplace_back(k, v);
    int bound = 0;
    for (const auto& w : r.workers) bound += w.bind_ok;
    auto& p = r.provenance;
    const Topology& model = machine.model();
    p.emplace_back("model_topology", std::string(to_string(model.source())));
    p.emplace_back("model_description", model.description());
    p.emplace_back("model_nodes", int64_t(model.nr_nodes()));
    p.emplace_back("model_pus", int64_t(model.nr_pus()));
    p.emplace_back("host_topology", machine.host().tree());
    p.emplace_back("host_nodes", int64_t(machine.host().nr_nodes()));
    p.emplace_back("host_pus", int64_t(host_pus));
    p.emplace_back("placement", to_string(opt.placement.policy));
    p.emplace_back("workers", int64_t(n));
    p.emplace_back("workers_bound", int64_t(bound));
    p.emplace_back("memory_needed", int64_t(need.bytes));  // what the run declared, checked before it allocated
    p.emplace_back("oversubscribed", !over_why.empty());
    p.emplace_back("oversubscribed_why", over_why);
    p.emplace_back("other_runs_workers", int64_t(in_flight.others));
    p.emplace_back("exclusive", opt.exclusive);
    p.emplace_back("host_load1_start", load_start.load1);
    p.emplace_back("host_load1_end", load_end.load1);
    p.emplace_back("host_other_runnable_start", int64_t(host_others));
    p.emplace_back("host_other_runnable_max", int64_t(std::max(0, host_busiest)));
    const int host_threads = virt ? 1 : n;
    p.emplace_back("host_busy", host_others + host_threads > host_pus || host_busiest + host_threads > host_pus);
    p.emplace_back("host_cpu_mhz_start", load_start.cpu_mhz);
    p.emplace_back("host_cpu_mhz_end", load_end.cpu_mhz);
    p.emplace_back("lockstat", opt.lockstat);
    std::string kinds;
    for (const auto& c : lock_class_catalogue())
      kinds += (kinds.empty() ? "" : ", ") + std::string(c.name) + "=" + std::string(to_string(cfg.kind_for(c.name)));
    p.emplace_back("lock_kinds", kinds);
    // A NUMA-aware kind on one node is allowed, and said (only a run's own choice can name one: default_kind()
    // never does).
    std::string notes;
    if (model.nr_nodes() == 1)
      for (const auto& c : lock_class_catalogue())
        if (const LockKind k = cfg.kind_for(c.name); lock_kinds()[size_t(k)].numa_aware)
          notes += (notes.empty() ? "" : "; ") + std::string(c.name) + ": " + std::string(to_string(k)) +
                   " on a 1-node model degenerates to its base lock, " + std::string(lock_kinds()[size_t(k)].base) +
                   " (every hand-off is local)";
    p.emplace_back("lock_notes", notes);
    p.emplace_back("seed", int64_t(opt.seed));
    p.emplace_back("min_time_s", opt.min_time_s);
    p.emplace_back("clock", std::string(kClockKindNames(opt.clock)));
    p.emplace_back("clock_source", virt ? std::string("simulator") : std::string(clock_source()));
    if (virt) {
      p.emplace_back("machine", opt.machine->name());
      p.emplace_back("machine_hash", opt.machine->hash());
      p.emplace_back("costs", std::string(kCostsNames(costs->costs())));
      p.emplace_back("simulator_version", int64_t(vt::kSimulatorVersion));
      p.emplace_back("virtual_leaves_out",
                     std::string("out-of-order overlap of misses the model code does not declare independent "
                                 "(only touch_each overlaps: lock_zoo's protected lines, a CMA bitmap scan, a "
                                 "free-tree propagation), prefetchers, SMT sharing of a core, interrupts, OS "
                                 "scheduling (one virtual CPU = one pinned worker), DRAM misses of untracked data, "
                                 "interconnect bandwidth between nodes"));
    }
    p.emplace_back("alloclab_version", version());
    p.emplace_back("hostname", hostname());
    p.emplace_back("started", started);
    p.emplace_back("ended", utc_now());
  };
  try {
    sc->prepare(env);
  } catch (const RunInterrupted& e) {
    if (e.cause == RunInterrupted::Cause::interrupted) throw;  // Ctrl-C: the caller raises KeyboardInterrupt
    r.stopped = true;
    r.stop_reason = (e.cause == RunInterrupted::Cause::timeout ? "timeout after " + std::to_string(opt.timeout_s) + " s"
                                                               : ctl.stopped_because()) +
                    ", during set-up (no worker ran)";
    describe(read_host_load());
    return r;
  }

  std::vector<WorkerCtx> ctxs;
  ctxs.reserve(size_t(n));
  for (const Slot& s : slots) ctxs.emplace_back(s, opt.seed, ctl.stop, ctl.phase);
  std::vector<WorkerRow> rows(static_cast<size_t>(n));
  struct Span {
    bool ran = false;  // the worker reached its timed part
    uint64_t start = 0, end = 0;
    ThreadSched sched0;
  };
  std::vector<Span> spans(static_cast<size_t>(n));

  // The timed part of worker w, on its thread or its virtual CPU, from the release to its own end.
  const auto run_worker = [&](int w) {
    WorkerCtx& ctx = ctxs[size_t(w)];
    Span& span = spans[size_t(w)];
    span.ran = true;
    span.start = clock_ticks();
    ctl.phase.worker_started();
    try {
      sc->work(ctx);
    } catch (const vt::Stopped&) {
      // a virtual-clock run stopped hard: its waits failed and it unwound
    } catch (...) {
      ctl.fail(std::current_exception());
      if (virt) vt::Simulator::current()->stop();  // every other virtual CPU unwinds too
    }
    ctx.end_timed();
    span.end = ctx.timed_end();
  };

  // The run's stop condition, asked every ~50 ms of host time: Ctrl-C, the timeout.
  const auto poll_stop = [&] {
    if (ctl.stop.load()) return;
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
  };
  uint64_t release = 0;  // the start gate's opening, in the run's ticks (0: virtual time 0, see gate_seen)
  bool hard_stopped = false;

  if (virt) {
    std::chrono::steady_clock::time_point soft_at{};
    vt::Options so;
    so.clock_read = costs->op(Op::clock_read);
    so.poll = [&] {
      poll_stop();
      if (!ctl.stop.load()) return false;
      const auto now = std::chrono::steady_clock::now();
      if (soft_at == std::chrono::steady_clock::time_point{}) soft_at = now;
      return now - soft_at > kHardStopGrace;
    };
    vt::Simulator sim(std::move(so));
    const VirtualWorkersScope current(&ctxs);
    ctl.phase.raise(RunPhase::released);
    sim.run(n, [&](int w) {
      WorkerRow& row = rows[size_t(w)];
      row.slot = ctxs[size_t(w)].slot;
      row.bind_ok = true;  // the virtual CPU is its model PU
      locks.attach(w, row.slot.model_pu, row.slot.model_node);
      if (sim.block_until(gate_seen(*costs, opt.seed, w)) && !ctl.stop.load()) run_worker(w);
    });
    hard_stopped = sim.stopped() && !ctl.error;
    if (ctl.error) std::rethrow_exception(ctl.error);
  } else {
    auto body = [&](int w) {
      WorkerCtx& ctx = ctxs[size_t(w)];
      WorkerRow& row = rows[size_t(w)];
      row.slot = ctx.slot;
      detail::tls_worker = &ctx;
      const BindOutcome b = machine.bind_current_thread(ctx.slot);
      row.bind_ok = b.ok;
      row.cpu_used = b.cpu_used;
      row.bind_error = b.error;
      if (!b.ok && opt.strict)
        ctl.fail(std::make_exception_ptr(std::runtime_error("strict: worker " + std::to_string(w) +
                                                            " could not be bound to host PU " +
                                                            std::to_string(ctx.slot.host_pu) + ": " + b.error)));
      locks.attach(w, ctx.slot.model_pu, ctx.slot.model_node);
      // Arrive, and let the threads still being created (and the controller) have the CPUs until all are here;
      // then spin on the gate, so that every worker sees the release within a cache-line transfer.
      ctl.ready.fetch_add(1, std::memory_order_acq_rel);
      while (ctl.ready.load(std::memory_order_acquire) < n && !ctl.stop.load(std::memory_order_relaxed)) sched_yield();
      spans[size_t(w)].sched0 = read_thread_sched();
      while (ctl.go.load(std::memory_order_acquire) == 0) {
        if (spin_yield)
          sched_yield();
        else
          cpu_pause();
      }
      if (!ctl.stop.load()) run_worker(w);
      LockDomain::detach();
      detail::tls_worker = nullptr;
      ctl.count_done();
    };

    WorkerThreads threads(ctl);
    try {
      threads.start(n, body);
    } catch (const std::system_error& e) {
      const size_t got = threads.started();
      threads.stop_and_join();
      throw std::runtime_error("could not start worker " + std::to_string(got) + " of " + std::to_string(n) + ": " +
                               e.what());
    }
    while (ctl.ready.load(std::memory_order_acquire) < n) sched_yield();

    release = clock_ticks();
    ctl.phase.raise(RunPhase::released);
    ctl.go.store(1, std::memory_order_release);
    for (;;) {
      std::unique_lock<std::mutex> g(ctl.mu);
      if (ctl.cv.wait_for(g, kPollInterval, [&] { return ctl.done == n; })) break;
      g.unlock();
      host_busiest = std::max(host_busiest, read_host_load().procs_running - n - 1);
      poll_stop();
    }
    threads.join();
    if (ctl.error) std::rethrow_exception(ctl.error);
  }
  if (!r.stopped) {
    std::lock_guard<std::mutex> g(ctl.mu);  // stop_all_runs may be writing it from another thread
    if (!ctl.stop_reason.empty()) {
      r.stopped = true;
      r.stop_reason = ctl.stop_reason;
    }
  }
  if (hard_stopped)
    r.stop_reason += " (virtual CPUs cut mid-operation after a grace of 1 s: the model's state is not checked)";
  const HostLoad load_end = read_host_load();

  // ---- the run's one clock ----
  const double s_per_tick = locks.ns_per_tick() * 1e-9;
  double last_start = 0, first_end = INFINITY, last_end = 0, runq_share = 0;
  for (size_t w = 0; w < rows.size(); ++w) {
    WorkerRow& row = rows[w];
    const WorkerCtx& ctx = ctxs[w];
    const Span& span = spans[w];
    if (span.ran) {
      row.start_s = double(span.start - release) * s_per_tick;
      row.end_s = double(span.end - release) * s_per_tick;
      row.elapsed_s = row.end_s - row.start_s;
      const ThreadSched& s1 = ctx.sched_at_end();
      if (span.sched0.ok && s1.ok) {
        row.cpu_s = double(s1.run_ns - span.sched0.run_ns) * 1e-9;
        row.runq_wait_s = double(s1.wait_ns - span.sched0.wait_ns) * 1e-9;
      }
    }
    last_start = std::max(last_start, row.start_s);
    first_end = std::min(first_end, row.end_s);
    last_end = std::max(last_end, row.end_s);
    row.ops = ctx.ops();
    row.ops_window = ctx.ops_window();
    const LatencyHistogram& h = ctx.latency();
    row.lat_count = h.count();
    if (h.count()) {
      row.lat_mean_ns = h.mean();
      row.lat_p50_ns = h.percentile(0.50);
      row.lat_p99_ns = h.percentile(0.99);
      row.lat_max_ns = double(h.max());
    }
    row.allocs_recorded = ctx.allocs_recorded();
    row.alloc_digest = ctx.alloc_digest();
    row.metrics = std::move(ctxs[w].metrics());
  }
  r.elapsed_s = last_end;
  r.overlap = last_end > 0 ? std::max(0.0, first_end - last_start) / last_end : 0.0;
  r.start_lag = last_end > 0 ? last_start / last_end : 0.0;
  for (const WorkerRow& row : rows)
    if (r.elapsed_s > 0 && !std::isnan(row.runq_wait_s))
      runq_share = std::max(runq_share, row.runq_wait_s / r.elapsed_s);
  if (over_why.empty() && runq_share > kRunqWaiting)
    over_why = "a worker waited " + std::to_string(int(std::lround(runq_share * 100))) +
               " % of the run for a CPU (schedstat run delay)";

  r.workers = std::move(rows);
  r.lockstat = locks.rows();
  r.lockstat_on = opt.lockstat;

  r.summary.emplace_back("elapsed_s", r.elapsed_s);
  // The checks and teardown after the run always finish, unless Ctrl-C or an abandoning stop_all_runs ends them.
  env.deadline = 0;
  env.stop = nullptr;
  const std::vector<LockExpectation> expected =
      r.stopped ? std::vector<LockExpectation>{} : sc->lock_expectations(env, r);
  check_lock_counts(expected, r);
  if (!hard_stopped) sc->finish(env, r);
  append_lock_counts(expected, r);
  // How far the timing can be trusted, after the scenario's own figures.
  const bool poor = r.overlap < kOverlapGood && (r.start_lag > kSchedulerLost || runq_share > kSchedulerLost);
  r.summary.emplace_back("overlap", r.overlap);
  r.summary.emplace_back("start_lag", r.start_lag);
  r.summary.emplace_back("overlap_poor", poor);
  r.summary.emplace_back("short_run", short_run(r, opt));
  r.summary.emplace_back("runq_wait_share", runq_share);

  describe(load_end);
  return r;
}

}  // namespace alloclab
