// Topology, Machine and NodeMemory over hwloc 2 (see topology.hpp).
#include "alloclab/topology/topology.hpp"

#include <hwloc.h>
#include <sched.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <sstream>
#include <stdexcept>

namespace alloclab {

namespace {

constexpr long kMaxModelPus = 4096;  // a synthetic machine larger than this is a typo, not an experiment

// Multiplies the arities of a synthetic description ("node:4 core:2 pu:1" -> 8) without building it, so that a
// description of a billion PUs is refused before hwloc tries to allocate them.
long synthetic_size(const std::string& d) {
  long total = 1;
  std::istringstream in(d);
  std::string tok;
  while (in >> tok) {
    const auto colon = tok.find(':');
    if (colon == std::string::npos) continue;  // let hwloc reject it with its own diagnosis
    long n = 0;
    for (size_t i = colon + 1; i < tok.size() && std::isdigit(static_cast<unsigned char>(tok[i])); ++i) {
      n = n * 10 + (tok[i] - '0');
      if (n > kMaxModelPus) return kMaxModelPus + 1;
    }
    total *= n == 0 ? 1 : n;
    if (total > kMaxModelPus) return total;
  }
  return total;
}

std::string ranges(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += std::to_string(v[i]);
    if (j > i) {
      s += '-';
      s += std::to_string(v[j]);
    }
    i = j + 1;
  }
  return s;
}

}  // namespace

Topology::Topology(hwloc_topology* t, Source s, std::string description)
    : topo_(t), source_(s), description_(std::move(description)) {
  const int npus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
  const int nnodes = std::max(1, hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE));
  nr_cores_ = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
  pus_of_node_.assign(size_t(nnodes), {});
  node_of_pu_.assign(size_t(npus), 0);
  for (int p = 0; p < npus; ++p) {
    hwloc_obj_t pu = hwloc_get_obj_by_type(t, HWLOC_OBJ_PU, unsigned(p));
    for (int n = 0; n < hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE); ++n) {
      hwloc_obj_t node = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, unsigned(n));
      if (node->cpuset && hwloc_bitmap_isincluded(pu->cpuset, node->cpuset)) {
        node_of_pu_[size_t(p)] = n;
        break;
      }
    }
    pus_of_node_[size_t(node_of_pu_[size_t(p)])].push_back(p);
  }
}

Topology::~Topology() { hwloc_topology_destroy(topo_); }

std::shared_ptr<const Topology> Topology::host() {
  static std::once_flag once;
  static std::shared_ptr<const Topology> host;
  std::call_once(once, [] {
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) != 0 || hwloc_topology_load(t) != 0)
      throw std::runtime_error("topology: hwloc could not load the host topology");
    host.reset(new Topology(t, Source::host, "host"));
  });
  return host;
}

std::shared_ptr<const Topology> Topology::synthetic(const std::string& description) {
  const long size = synthetic_size(description);
  if (size > kMaxModelPus)
    throw std::invalid_argument("topology: synthetic description '" + description + "' has " + std::to_string(size) +
                                "+ PUs (allowed: at most " + std::to_string(kMaxModelPus) + ")");
  hwloc_topology_t t;
  hwloc_topology_init(&t);
  if (description.empty() || hwloc_topology_set_synthetic(t, description.c_str()) != 0 || hwloc_topology_load(t) != 0) {
    hwloc_topology_destroy(t);
    throw std::invalid_argument("topology: malformed synthetic description '" + description +
                                "' (expected hwloc's synthetic syntax, e.g. \"node:4 core:2 pu:1\")");
  }
  return std::shared_ptr<const Topology>(new Topology(t, Source::synthetic, description));
}

std::shared_ptr<const Topology> Topology::from_xml(const std::string& path) {
  hwloc_topology_t t;
  hwloc_topology_init(&t);
  if (hwloc_topology_set_xml(t, path.c_str()) != 0 || hwloc_topology_load(t) != 0) {
    const std::string why = std::strerror(errno);
    hwloc_topology_destroy(t);
    throw std::invalid_argument("topology: cannot load XML topology from '" + path + "' (" + why + ")");
  }
  auto topo = std::shared_ptr<const Topology>(new Topology(t, Source::xml, path));
  if (topo->nr_pus() > kMaxModelPus)
    throw std::invalid_argument("topology: XML topology '" + path + "' has " + std::to_string(topo->nr_pus()) +
                                " PUs (allowed: at most " + std::to_string(kMaxModelPus) + ")");
  return topo;
}

int Topology::node_of_pu(int pu) const {
  if (pu < 0 || pu >= nr_pus())
    throw std::invalid_argument("pu: " + std::to_string(pu) + " is not a PU of this topology (allowed: 0.." +
                                std::to_string(nr_pus() - 1) + ")");
  return node_of_pu_[size_t(pu)];
}

const std::vector<int>& Topology::pus_of_node(int node) const {
  if (node < 0 || node >= nr_nodes())
    throw std::invalid_argument("node: " + std::to_string(node) + " is not a node of this topology (allowed: 0.." +
                                std::to_string(nr_nodes() - 1) + ")");
  return pus_of_node_[size_t(node)];
}

std::string Topology::tree() const {
  std::string s =
      "Machine (" + std::string(to_string(source_)) + (source_ == Source::host ? "" : " \"" + description_ + "\"") +
      "): " + std::to_string(nr_nodes()) + (nr_nodes() == 1 ? " node, " : " nodes, ") + std::to_string(nr_cores_) +
      (nr_cores_ == 1 ? " core, " : " cores, ") + std::to_string(nr_pus()) + (nr_pus() == 1 ? " PU" : " PUs");
  for (int n = 0; n < nr_nodes(); ++n) {
    const auto& pus = pus_of_node_[size_t(n)];
    s += "\n  NUMANode L#" + std::to_string(n) + ": ";
    s += pus.empty() ? std::string("no PUs") : "PU L#" + ranges(pus);
  }
  return s;
}

std::string Topology::synthetic_string() const {
  char buf[1024];
  if (hwloc_topology_export_synthetic(topo_, buf, sizeof buf, 0) < 0) return "";
  return buf;
}

// ---- placement ---------------------------------------------------------------------------------------------

Placement Placement::parse(const std::string& name) {
  if (name == "compact") return {Policy::compact, {}};
  if (name == "scatter") return {Policy::scatter, {}};
  throw std::invalid_argument("placement: unknown policy '" + name +
                              "' (allowed: 'compact', 'scatter', or a list of model PUs)");
}

std::string to_string(Placement::Policy p) {
  switch (p) {
    case Placement::Policy::compact: return "compact";
    case Placement::Policy::scatter: return "scatter";
    case Placement::Policy::list: return "list";
  }
  return "?";
}

Machine::Machine(std::shared_ptr<const Topology> model, std::shared_ptr<const Topology> host)
    : model_(std::move(model)), host_(std::move(host)) {}

int Machine::host_node_of(int model_node) const { return model_node % host_->nr_nodes(); }
int Machine::host_pu_of(int model_pu) const { return model_pu % host_->nr_pus(); }

std::vector<Slot> Machine::place(int n, const Placement& p) const {
  std::vector<Slot> slots;
  const int npus = model_->nr_pus();
  if (p.policy == Placement::Policy::list && int(p.pus.size()) != n)
    throw std::invalid_argument("placement: the list has " + std::to_string(p.pus.size()) + " PUs for " +
                                std::to_string(n) + " workers (give one model PU per worker)");
  std::vector<int> with_pus;  // nodes that have PUs, for scatter
  for (int node = 0; node < model_->nr_nodes(); ++node)
    if (!model_->pus_of_node(node).empty()) with_pus.push_back(node);
  for (int w = 0; w < n; ++w) {
    int pu = 0;
    switch (p.policy) {
      case Placement::Policy::compact: pu = w % npus; break;
      case Placement::Policy::scatter: {
        const auto& pus = model_->pus_of_node(with_pus[size_t(w) % with_pus.size()]);
        pu = pus[(size_t(w) / with_pus.size()) % pus.size()];
        break;
      }
      case Placement::Policy::list:
        pu = p.pus[size_t(w)];
        if (pu < 0 || pu >= npus)
          throw std::invalid_argument("placement: model PU " + std::to_string(pu) + " for worker " + std::to_string(w) +
                                      " is out of range (allowed: 0.." + std::to_string(npus - 1) + ")");
        break;
    }
    const int node = model_->node_of_pu(pu);
    slots.push_back({w, pu, node, host_pu_of(pu), host_node_of(node)});
  }
  return slots;
}

Slot Machine::slot_on_node(int worker, int model_node, int k) const {
  const auto& pus = model_->pus_of_node(model_node);
  const int pu = pus.empty() ? k % model_->nr_pus() : pus[size_t(k) % pus.size()];
  return {worker, pu, model_node, host_pu_of(pu), host_node_of(model_node)};
}

BindOutcome Machine::bind_current_thread(const Slot& s) const {
  hwloc_obj_t pu = hwloc_get_obj_by_type(host_->raw(), HWLOC_OBJ_PU, unsigned(s.host_pu));
  BindOutcome out{false, -1, ""};
  if (!pu) {
    out.error = "host PU " + std::to_string(s.host_pu) + " does not exist";
  } else if (hwloc_set_cpubind(host_->raw(), pu->cpuset, HWLOC_CPUBIND_THREAD | HWLOC_CPUBIND_STRICT) != 0) {
    out.error = std::string("hwloc_set_cpubind: ") + std::strerror(errno);
  } else {
    out.ok = true;
  }
  out.cpu_used = sched_getcpu();
  if (out.ok && pu && int(pu->os_index) != out.cpu_used) {
    out.ok = false;
    out.error = "bound to OS CPU " + std::to_string(pu->os_index) + " but running on " + std::to_string(out.cpu_used);
  }
  return out;
}

// ---- node-local memory -------------------------------------------------------------------------------------

NodeMemory::NodeMemory(const Machine& m, int model_node, size_t bytes) : host_(m.host().raw()), bytes_(bytes) {
  if (bytes == 0) return;
  hwloc_obj_t node = hwloc_get_obj_by_type(host_, HWLOC_OBJ_NUMANODE, unsigned(m.host_node_of(model_node)));
  if (node && node->nodeset) {
    p_ = hwloc_alloc_membind(host_, bytes, node->nodeset, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET);
    membind_ok_ = p_ != nullptr;
  }
  if (!p_) p_ = hwloc_alloc(host_, bytes);
  if (!p_) throw std::bad_alloc();
  from_hwloc_ = true;
}

void NodeMemory::release() noexcept {
  if (p_ && from_hwloc_) hwloc_free(host_, p_, bytes_);
  p_ = nullptr;
  bytes_ = 0;
}

NodeMemory::~NodeMemory() { release(); }

NodeMemory::NodeMemory(NodeMemory&& o) noexcept { *this = std::move(o); }

NodeMemory& NodeMemory::operator=(NodeMemory&& o) noexcept {
  if (this != &o) {
    release();
    host_ = o.host_;
    p_ = o.p_;
    bytes_ = o.bytes_;
    membind_ok_ = o.membind_ok_;
    from_hwloc_ = o.from_hwloc_;
    o.p_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

std::string_view to_string(Topology::Source s) {
  switch (s) {
    case Topology::Source::host: return "host";
    case Topology::Source::synthetic: return "synthetic";
    case Topology::Source::xml: return "xml";
  }
  return "?";
}

}  // namespace alloclab
