// Topology, Machine and NodeMemory over hwloc 2 (see topology.hpp).
#include "alloclab/topology/topology.hpp"

#include <fcntl.h>
#include <hwloc.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "alloclab/base/enum_names.hpp"
#include "alloclab/topology/cost_model.hpp"

namespace alloclab {

namespace {

constexpr uint64_t kMaxModelPus = 4096;                // a model machine larger than this is a typo, not an experiment
constexpr uint64_t kMaxXmlBytes = uint64_t(64) << 20;  // 64 MiB; lstopo's export of a 4096-PU machine is about 2 MiB

// The PUs hwloc will build for a synthetic description, without building it: the product of the level arities, in
// hwloc 2's grammar (topology-synthetic.c): an optional "(attributes)" for the root, then levels separated by
// blanks, each "[type:]count[(attributes)]" (count as strtoul base 0), and "[numa...]" memory attached to the level
// before it. Saturates at kMaxModelPus + 1. nullopt for text outside that grammar (hwloc refuses it too).
std::optional<uint64_t> synthetic_pus(const std::string& d) {
  size_t i = 0;
  const auto skip_past = [&](char close) {
    const size_t end = d.find(close, i);
    if (end == std::string::npos) return false;
    i = end + 1;
    return true;
  };
  if (i < d.size() && d[i] == '(' && !skip_past(')')) return std::nullopt;
  uint64_t pus = 1;
  bool any = false;
  for (;;) {
    while (i < d.size() && (d[i] == ' ' || d[i] == '\n')) ++i;
    if (i == d.size()) break;
    if (d[i] == '[') {
      if (!skip_past(']')) return std::nullopt;
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(d[i])) && !skip_past(':')) return std::nullopt;
    const char* begin = d.c_str() + i;
    char* end = nullptr;
    errno = 0;
    const unsigned long long arity = std::strtoull(begin, &end, 0);
    if (end == begin || arity == 0) return std::nullopt;
    i += size_t(end - begin);
    if (i < d.size() && d[i] == '(' && !skip_past(')')) return std::nullopt;
    pus =
        errno == ERANGE || arity > kMaxModelPus ? kMaxModelPus + 1 : std::min<uint64_t>(pus * arity, kMaxModelPus + 1);
    any = true;
  }
  if (!any) return std::nullopt;
  return pus;
}

// Occurrences of `needle` in `text` (the XML pre-count of PU and NUMANode objects).
uint64_t count_of(const std::string& text, const std::string& needle) {
  uint64_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

// The whole of a regular file of at most kMaxXmlBytes; throws std::invalid_argument("topology: ...") for anything
// else (a FIFO would block, /dev/zero would never end). O_NONBLOCK so that opening a FIFO does not wait for a writer.
std::string read_xml_file(const std::string& path) {
  const auto refuse = [&](const std::string& why) {
    return std::invalid_argument("topology: cannot load XML topology from '" + path + "' (" + why + ")");
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw refuse(std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw refuse(std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw refuse(std::string("not a regular file: a ") + (S_ISDIR(st.st_mode)    ? "directory"
                                                          : S_ISFIFO(st.st_mode) ? "FIFO"
                                                          : S_ISCHR(st.st_mode)  ? "character device"
                                                          : S_ISSOCK(st.st_mode) ? "socket"
                                                                                 : "special file"));
  if (uint64_t(st.st_size) > kMaxXmlBytes)
    throw refuse(std::to_string(st.st_size) + " bytes, allowed: at most " + std::to_string(kMaxXmlBytes) + ", 64 MiB");
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw refuse(std::strerror(errno));
    if (got == 0) break;
    text.append(buf, size_t(got));
    if (text.size() > kMaxXmlBytes) throw refuse("grew past " + std::to_string(kMaxXmlBytes) + " bytes while read");
  }
  return text;
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
  const int nnodes = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  nr_cores_ = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
  pus_of_node_.assign(size_t(std::max(1, nnodes)), {});
  node_of_pu_.assign(size_t(std::max(0, npus)), 0);
  std::vector<hwloc_const_cpuset_t> node_cpus;
  for (int n = 0; n < nnodes; ++n)
    node_cpus.push_back(hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, unsigned(n))->cpuset);
  for (int p = 0; p < npus; ++p) {
    // The first node whose cpuset holds the PU; one bit test per node, so PUs x nodes stays cheap under the caps.
    const int bit = hwloc_bitmap_first(hwloc_get_obj_by_type(t, HWLOC_OBJ_PU, unsigned(p))->cpuset);
    for (int n = 0; n < nnodes && bit >= 0; ++n)
      if (node_cpus[size_t(n)] && hwloc_bitmap_isset(node_cpus[size_t(n)], unsigned(bit))) {
        node_of_pu_[size_t(p)] = n;
        break;
      }
    pus_of_node_[size_t(node_of_pu_[size_t(p)])].push_back(p);
  }
}

Topology::~Topology() { hwloc_topology_destroy(topo_); }

std::shared_ptr<const Topology> Topology::build(hwloc_topology* t, Source s, const std::string& description) {
  std::unique_ptr<hwloc_topology, void (*)(hwloc_topology*)> owned(t, hwloc_topology_destroy);
  const auto refuse = [&](const std::string& why) {
    const std::string subject = s == Source::host        ? "the host"
                                : s == Source::synthetic ? "synthetic description '" + description + "'"
                                                         : "XML topology '" + description + "'";
    return std::invalid_argument("topology: " + subject + " " + why + " (allowed: 1.." + std::to_string(kMaxModelPus) +
                                 " PUs, every NUMA node and package holding at least one)");
  };
  // hwloc keeps a count per level: a machine that is refused costs nothing per PU.
  const int pus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
  if (pus <= 0) throw refuse("has no PUs");
  if (s == Source::host) return std::shared_ptr<const Topology>(new Topology(owned.release(), s, description));
  // A model's node or package without PUs would have workers placed by a division by zero or over an empty node set.
  // (The host is what it is: its CPU-less nodes, CXL or HBM memory, are real, and model nodes map onto them.)
  if (uint64_t(pus) > kMaxModelPus) throw refuse("has " + std::to_string(pus) + " PUs");
  const int nodes = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  if (nodes > pus) throw refuse("has " + std::to_string(nodes) + " NUMA nodes for " + std::to_string(pus) + " PUs");
  std::vector<bool> package_has_pu(size_t(std::max(0, hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE))), false);
  for (int p = 0; p < pus; ++p) {
    const hwloc_obj_t pu = hwloc_get_obj_by_type(t, HWLOC_OBJ_PU, unsigned(p));
    if (const hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, pu))
      package_has_pu[pkg->logical_index] = true;
  }
  for (size_t i = 0; i < package_has_pu.size(); ++i)
    if (!package_has_pu[i]) throw refuse("has Package L#" + std::to_string(i) + " without PUs");
  std::shared_ptr<const Topology> topo(new Topology(owned.release(), s, description));
  for (int n = 0; n < topo->nr_nodes(); ++n)
    if (topo->pus_of_node(n).empty()) throw refuse("has NUMANode L#" + std::to_string(n) + " without PUs");
  return topo;
}

std::shared_ptr<const Topology> Topology::host() {
  static std::once_flag once;
  static std::shared_ptr<const Topology> host;
  std::call_once(once, [] {
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) != 0 || hwloc_topology_load(t) != 0)
      throw std::runtime_error("topology: hwloc could not load the host topology");
    host = build(t, Source::host, "host");
  });
  return host;
}

std::shared_ptr<const Topology> Topology::synthetic(const std::string& description) {
  const auto malformed = [&] {
    return std::invalid_argument("topology: malformed synthetic description '" + description +
                                 "' (expected hwloc's synthetic syntax, e.g. \"node:4 core:2 pu:1\")");
  };
  const std::optional<uint64_t> pus = synthetic_pus(description);
  if (!pus) throw malformed();
  if (*pus > kMaxModelPus)
    throw std::invalid_argument("topology: synthetic description '" + description + "' has more than " +
                                std::to_string(kMaxModelPus) + " PUs (allowed: 1.." + std::to_string(kMaxModelPus) +
                                ")");
  hwloc_topology_t t;
  hwloc_topology_init(&t);
  if (hwloc_topology_set_synthetic(t, description.c_str()) != 0 || hwloc_topology_load(t) != 0) {
    hwloc_topology_destroy(t);
    throw malformed();
  }
  return build(t, Source::synthetic, description);
}

std::shared_ptr<const Topology> Topology::from_xml(const std::string& path) {
  const std::string text = read_xml_file(path);
  // Counted in the text before hwloc builds anything: hwloc's own cost grows with the PUs and nodes.
  const uint64_t pus = count_of(text, "type=\"PU\"") + count_of(text, "type='PU'");
  const uint64_t nodes = count_of(text, "type=\"NUMANode\"") + count_of(text, "type='NUMANode'");
  if (pus > kMaxModelPus || nodes > kMaxModelPus)
    throw std::invalid_argument("topology: XML topology '" + path + "' has " + std::to_string(pus) + " PUs and " +
                                std::to_string(nodes) + " NUMA nodes (allowed: at most " +
                                std::to_string(kMaxModelPus) + " of each)");
  hwloc_topology_t t;
  hwloc_topology_init(&t);
  if (hwloc_topology_set_xmlbuffer(t, text.data(), int(text.size())) != 0 || hwloc_topology_load(t) != 0) {
    hwloc_topology_destroy(t);
    throw std::invalid_argument("topology: cannot load XML topology from '" + path +
                                "' (hwloc cannot read it as a topology)");
  }
  return build(t, Source::xml, path);
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

namespace {
constexpr EnumNames<Placement::Policy, 3> kPolicyNames{{{{Placement::Policy::compact, "compact"},
                                                         {Placement::Policy::scatter, "scatter"},
                                                         {Placement::Policy::list, "list"}}}};
}  // namespace

std::string to_string(Placement::Policy p) { return std::string(kPolicyNames(p)); }

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
  // The kernel reaches node memory through its direct map, on huge pages: ask for transparent huge pages, so that a
  // walk over model memory meets the caches, not a TLB miss every 4 KiB. Advice only (THP may be off or short).
  madvise(p_, bytes, MADV_HUGEPAGE);
  if (CostModel* costs = current_costs()) costs->home(p_, bytes, model_node);  // a virtual run's node memory
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

namespace {
constexpr EnumNames<Topology::Source, 3> kSourceNames{
    {{{Topology::Source::host, "host"}, {Topology::Source::synthetic, "synthetic"}, {Topology::Source::xml, "xml"}}}};
}  // namespace

std::string_view to_string(Topology::Source s) { return kSourceNames(s); }

}  // namespace alloclab
