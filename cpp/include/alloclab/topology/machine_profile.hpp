// MachineProfile: the machine a virtual-time run believes in. It gives the topology and the cost of each kind of
// work on that machine, and every number carries its source. The schema is documented in
// python/alloclab/profiles/README.md.
//
// Models: a profile as the engine receives it after Python has read the TOML: flat fields, checked here and
// nowhere else. Also the distance class between two PUs, from the hwloc objects they share (core, L3, NUMA node,
// package) and the hop count between their nodes, and the line-transfer latency for each class. A content hash
// names the numbers a result was computed with.
//   Distance rule, nearest class first:
//     same_pu      a == b (no transfer);
//     same_core    SMT siblings (same Core object);
//     same_llc     different cores under one L3 object. A topology with no L3 level counts its NUMA node as one
//                  last-level cache, as on Intel server parts (one LLC per socket);
//     same_node    same NUMA node, different L3 (only where a node holds several LLCs, e.g. Zen CCXs);
//     remote       different nodes one hop apart;
//     remote_2hop  different nodes two hops apart.
//   Hops: hwloc 2 synthetic descriptions carry no distance matrix (hwloc_distances_get finds none), so hops follow
//   the packages. Nodes in one package are 1 hop apart (on-package fabric). Nodes in different packages are 1 hop
//   apart when each package holds one node: a point-to-point socket link (2-socket UPI, fully connected 4-socket
//   QPI). They are 2 hops apart when the packages hold several nodes: the on-package fabric, then the socket link
//   (e.g. 2-socket EPYC in NPS2).
// Leaves out: per-pair latencies (one figure per class), asymmetric or partially connected socket links (8-socket
// twisted hypercubes), memory sizes, SLIT distances.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "alloclab/topology/topology.hpp"

// X(op): the model operations a profile costs in cycles (its [op_cycles] table), named once: the profile's fields,
// kOpNames, the cost model's Op and calibrate's microbenchmarks (one bench_<op> each) follow this list.
//   pause  one x86 PAUSE (cpu_pause()), the spin-wait hint in every iteration of a spin loop: TTAS backoff, the
//          futex mutex's optimistic spin, a poll of a flag. Its latency differs tenfold between microarchitectures.
//   clock_read  one read of the time-stamp counter (RDTSC, clock_ticks()): the lab's own stopwatch, which model code
//          reads around each timed operation and lock_stat around each acquisition, in a real run as in a virtual one
//          (the simulator charges it on every read; vt::Options::clock_read).
#define ALLOCLAB_OPS(X) \
  X(atomic_rmw)         \
  X(line_access)        \
  X(list_op)            \
  X(tree_step)          \
  X(bitmap_word)        \
  X(page_init)          \
  X(pause)              \
  X(clock_read)

namespace alloclab {

// The private cache levels the cost model prices, innermost first (cost_model.hpp, cache capacity): each one's size
// is cache_kib.<name>, hwloc's level `hwloc_level` on the host, and a line that has left it is found in the level
// below at cache_ns.<below>. Declared once: the schema's rules, the cost model and alloclab calibrate follow it.
struct PrivateCacheLevel {
  std::string_view name;
  int hwloc_level;
  std::string_view below;

  // The profile's fields: "cache_kib.<name>" (its size), "cache_ns.<below>" (what a line that has left it costs).
  std::string size_field() const { return "cache_kib." + std::string(name); }
  std::string latency_field() const { return "cache_ns." + std::string(below); }
};
inline constexpr PrivateCacheLevel kPrivateCacheLevels[] = {{"l1d", 1, "l2"}, {"l2", 2, "llc"}};
inline constexpr size_t kNrPrivateCacheLevels = std::size(kPrivateCacheLevels);

// The ops' names in list order ("atomic_rmw", ..., "clock_read"): the fields of a profile's [op_cycles] table.
inline constexpr std::string_view kOpNames[] = {
#define ALLOCLAB_OP_NAME(name) #name,
    ALLOCLAB_OPS(ALLOCLAB_OP_NAME)
#undef ALLOCLAB_OP_NAME
};

// ---- distance classes ---------------------------------------------------------------------------------------------

enum class DistanceClass { same_pu, same_core, same_llc, same_node, remote, remote_2hop };

// The classes a line transfer can cross, nearest first (same_pu transfers nothing).
inline constexpr std::array<DistanceClass, 5> kTransferClasses = {DistanceClass::same_core, DistanceClass::same_llc,
                                                                  DistanceClass::same_node, DistanceClass::remote,
                                                                  DistanceClass::remote_2hop};

// "same_core", ..., as the profile's [transfer_ns] table names them.
std::string_view to_string(DistanceClass c);

// Distance classes between the PUs of one topology (logical indices), by the rule in the header comment.
// Immutable after construction; O(1) per query.
class PuDistances {
 public:
  explicit PuDistances(const Topology& t);

  // Throws std::invalid_argument("pu: ...") for an index outside the topology.
  DistanceClass classify(int a, int b) const;
  // The transfer classes that at least one pair of PUs has, in kTransferClasses order.
  const std::vector<DistanceClass>& present() const { return present_; }
  // Up to `max` pairs (a < b) at class `c`, in index order: the pairs a calibration measures.
  std::vector<std::pair<int, int>> pairs(DistanceClass c, size_t max) const;
  // Hops between two NUMA nodes (0 for the same node).
  int node_hops(int node_a, int node_b) const;
  // The last-level cache of a PU (0 .. nr_llcs() - 1): its L3, or its node's index when the topology has no L3.
  int llc(int pu) const { return pus_.at(size_t(pu)).llc; }
  int nr_llcs() const { return nr_llcs_; }

 private:
  struct Place {
    int core;  // Core logical index (a PU without a Core ancestor is its own core)
    int llc;   // L3 logical index, or the node's when the topology has no L3 level
    int node;
  };
  std::vector<Place> pus_;
  int nr_llcs_ = 0;
  std::vector<int> package_of_node_;  // -1: the node has no Package ancestor (all such nodes count as one package)
  std::vector<int> nodes_in_package_;
  std::vector<DistanceClass> present_;
};

// ---- the profile --------------------------------------------------------------------------------------------------

// What Python hands over after reading a profile's TOML. Every leaf is stored under its dotted key and split by
// type: "name", "topology", "clock.ghz.source" go in `text`; "schema", "clock.ghz.value" go in `numbers`.
struct ProfileFields {
  std::map<std::string, std::string> text;
  std::map<std::string, double> numbers;
  std::vector<std::string> seeds;
};

class MachineProfile {
 public:
  static constexpr int kSchema = 1;
  static constexpr int kMaxPus = 512;  // what the virtual-time simulator supports
  static constexpr int kMaxNodes = 16;

  // Validates every field and throws std::invalid_argument whose message starts with the field's dotted name, then
  // gives the value and what is allowed. It checks: schema 1; name, description, topology and topology_source
  // present; a topology Topology::synthetic accepts with at most kMaxPus PUs and kMaxNodes nodes; every required
  // number present as a { value, source } pair with a finite value > 0 and a non-empty source; no unknown field;
  // one transfer_ns entry for each distance class the topology has, and none for a class it lacks.
  explicit MachineProfile(const ProfileFields& f);

  const std::string& name() const { return name_; }
  const std::string& description() const { return description_; }
  const std::vector<std::string>& seeds() const { return seeds_; }
  const std::string& topology_source() const { return topology_source_; }
  const std::shared_ptr<const Topology>& topology() const { return topology_; }
  const PuDistances& distances() const { return distances_; }

  // The numbers and their sources, by "section.field" ("clock.ghz", "transfer_ns.remote", "op_cycles.list_op").
  const std::map<std::string, double>& values() const { return values_; }
  const std::map<std::string, std::string>& sources() const { return sources_; }
  // Throws std::invalid_argument naming the key when the profile has no such number.
  double value(const std::string& key) const;
  // An optional number (misses_in_flight, page_ns, the bandwidths of a pattern): `otherwise` when the profile has none.
  double value_or(const std::string& key, double otherwise) const {
    const auto it = values_.find(key);
    return it == values_.end() ? otherwise : it->second;
  }

  // 16 hex digits of FNV-1a 64 over the schema, the topology string and every (key, value) in key order. Values are
  // written in shortest round-trip form, so the hash is the same on every host. Names, descriptions and sources
  // are left out: two profiles with the same numbers give the same virtual-time results.
  const std::string& hash() const { return hash_; }

  // Distance class and one-way line-transfer latency (ns; 0 for the same PU) between two PUs of the topology.
  // Throw std::invalid_argument("pu: ...") for an index outside the topology.
  DistanceClass distance(int a, int b) const { return distances_.classify(a, b); }
  double transfer_ns(int a, int b) const;

 private:
  // Checks the schema, the text fields and the seeds, then loads and bounds the topology: everything the numbers'
  // checks depend on. Runs first, from the member initialisers.
  static std::shared_ptr<const Topology> checked_topology(const ProfileFields& f);

  std::shared_ptr<const Topology> topology_;
  PuDistances distances_;
  std::string name_, description_, topology_source_;
  std::vector<std::string> seeds_;
  std::map<std::string, double> values_;
  std::map<std::string, std::string> sources_;
  std::array<double, 6> transfer_by_class_{};  // indexed by DistanceClass; same_pu stays 0
  std::string hash_;
};

}  // namespace alloclab
