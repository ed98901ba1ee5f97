// Topology and Machine: what the experiment believes the machine is, and where its workers really run.
//
// Models: the NUMA and CPU structure the kernel's allocator sees (pglist_data per node, per-CPU pagesets).
// Two hwloc topologies are involved. The *host* topology is the real machine and is used for every binding call.
// The *model* topology is what the experiment believes: the host itself, a synthetic description
// ("node:4 core:2 pu:1", hwloc_topology_set_synthetic) or an XML file. Model PU p runs on host PU
// p % host_pus; model node n keeps its memory on host node n % host_nodes. A placement gives each worker a Slot.
// Binding failures (a container refusing CPUs or mbind) never abort a run: they are recorded in the worker's row
// (bind_ok, the CPU actually used) unless the run is strict.
// Leaves out: distances between nodes (no SLIT), caches, hotplug.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct hwloc_topology;

namespace alloclab {

class Topology {
 public:
  enum class Source { host, synthetic, xml };

  // The machine this process runs on (loaded once per process, then shared read-only).
  static std::shared_ptr<const Topology> host();
  // A model machine. Both throw std::invalid_argument("topology: ...") for a malformed description or file, and for a
  // machine no run could place workers on: no PUs, more than 4096 PUs, or a NUMA node or package without PUs. Sizes
  // are checked before hwloc builds anything: a synthetic description's PUs are the product of its arities; an XML
  // file must be a regular file of at most 64 MiB, whose PU and NUMANode objects are counted in its text first.
  static std::shared_ptr<const Topology> synthetic(const std::string& description);
  static std::shared_ptr<const Topology> from_xml(const std::string& path);

  ~Topology();
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;

  Source source() const { return source_; }
  const std::string& description() const { return description_; }  // "host", the synthetic string, the path
  int nr_nodes() const { return int(pus_of_node_.size()); }
  int nr_pus() const { return int(node_of_pu_.size()); }
  int nr_cores() const { return nr_cores_; }
  int node_of_pu(int pu) const;  // logical indices throughout
  const std::vector<int>& pus_of_node(int node) const;
  // A terse lstopo-like tree: "Machine (4 nodes, 8 PUs)\n  NUMANode L#0: PU 0-1\n ...".
  std::string tree() const;
  // The synthetic description hwloc would export for this topology ("" when hwloc cannot express it).
  std::string synthetic_string() const;
  hwloc_topology* raw() const { return topo_; }

 private:
  Topology(hwloc_topology* t, Source s, std::string description);
  // Takes `t` (destroyed on refusal), refuses what a run cannot use (see synthetic()), builds the PU -> node maps.
  static std::shared_ptr<const Topology> build(hwloc_topology* t, Source s, const std::string& description);
  hwloc_topology* topo_;
  Source source_;
  std::string description_;
  int nr_cores_ = 0;
  std::vector<int> node_of_pu_;
  std::vector<std::vector<int>> pus_of_node_;
};

// Where one worker runs.
struct Slot {
  int worker;
  int model_pu;
  int model_node;
  int host_pu;    // model_pu % host PUs (logical index)
  int host_node;  // model_node % host nodes: where the worker's node-local memory lives
};

// Placement policies: compact fills the model's PUs in order; scatter deals workers round-robin over the model's
// nodes (worker i on node i % nodes, the next free PU there); list gives each worker's model PU explicitly.
struct Placement {
  enum class Policy { compact, scatter, list };
  Policy policy = Policy::compact;
  std::vector<int> pus;                             // for list
  static Placement parse(const std::string& name);  // "compact" | "scatter"; throws naming "placement"
};
std::string to_string(Placement::Policy p);
std::string_view to_string(Topology::Source s);  // "host", "synthetic", "xml"

struct BindOutcome {
  bool ok;
  int cpu_used;       // OS CPU index from sched_getcpu() after binding
  std::string error;  // why binding failed, empty when ok
};

class Machine {
 public:
  Machine(std::shared_ptr<const Topology> model, std::shared_ptr<const Topology> host);
  const Topology& model() const { return *model_; }
  const Topology& host() const { return *host_; }
  std::shared_ptr<const Topology> model_ptr() const { return model_; }

  // Slots for `n` workers; throws std::invalid_argument naming "placement" for an explicit list that does not fit.
  std::vector<Slot> place(int n, const Placement& p) const;
  // Slot for a worker on a given model node (its k-th worker there): for scenarios that pin by node.
  Slot slot_on_node(int worker, int model_node, int k) const;
  int host_node_of(int model_node) const;
  int host_pu_of(int model_pu) const;

  // Binds the calling thread to the slot's host PU.
  BindOutcome bind_current_thread(const Slot& s) const;

 private:
  std::shared_ptr<const Topology> model_;
  std::shared_ptr<const Topology> host_;
};

// Memory bound to the host node of a model node (hwloc_alloc_membind); falls back to ordinary memory, and says so,
// when the host refuses (containers often do). Zero-filled, advised onto transparent huge pages (as the kernel's
// direct map). Movable, not copyable. Made during a virtual-clock run's set-up, it tells the run's cost model its node
// (CostModel::home).
class NodeMemory {
 public:
  NodeMemory() = default;
  NodeMemory(const Machine& m, int model_node, size_t bytes);
  ~NodeMemory();
  NodeMemory(NodeMemory&& o) noexcept;
  NodeMemory& operator=(NodeMemory&& o) noexcept;
  NodeMemory(const NodeMemory&) = delete;
  NodeMemory& operator=(const NodeMemory&) = delete;

  void* data() const { return p_; }
  size_t size() const { return bytes_; }
  bool membind_ok() const { return membind_ok_; }

 private:
  void release() noexcept;
  hwloc_topology* host_ = nullptr;
  void* p_ = nullptr;
  size_t bytes_ = 0;
  bool membind_ok_ = false;
  bool from_hwloc_ = false;
};

}  // namespace alloclab
