// MachineProfile and PuDistances (see machine_profile.hpp).
#include "alloclab/topology/machine_profile.hpp"

#include <hwloc.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>

namespace alloclab {

namespace {

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument(msg); }

// Shortest round-trip decimal form of a double: the same text on every IEEE-754 host.
std::string fmt(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// ---- schema 1 -----------------------------------------------------------------------------------------------------

struct FieldSpec {
  const char* section;
  const char* field;
  const char* unit;
  bool required;  // when the topology allows the field at all (transfer_ns and dram_ns.remote depend on it)
};

// Every number a schema-1 profile can hold, in the order of the documentation. (clang-format would pack the table
// around the generated op_cycles rows.)
// clang-format off
constexpr FieldSpec kFields[] = {
    {"clock", "ghz", "GHz", true},
    {"transfer_ns", "same_core", "ns", true},
    {"transfer_ns", "same_llc", "ns", true},
    {"transfer_ns", "same_node", "ns", true},
    {"transfer_ns", "remote", "ns", true},
    {"transfer_ns", "remote_2hop", "ns", true},
    {"wakeup_ns", "futex", "ns", true},
    {"bandwidth_gbs", "node", "GB/s", true},
    {"bandwidth_gbs", "core", "GB/s", true},
    {"bandwidth_gbs", "node_update", "GB/s", false},
    {"bandwidth_gbs", "core_update", "GB/s", false},
    {"bandwidth_gbs", "node_load", "GB/s", false},
    {"bandwidth_gbs", "core_load", "GB/s", false},
    {"bandwidth_gbs", "node_store", "GB/s", false},
    {"bandwidth_gbs", "core_store", "GB/s", false},
    {"misses_in_flight", "core", "lines", false},
    {"cache_kib", "l1d", "KiB", false},
    {"cache_kib", "l2", "KiB", false},
    {"cache_mib", "llc", "MiB", false},
    {"cache_ns", "l2", "ns", false},
    {"cache_ns", "llc", "ns", false},
    {"dram_ns", "local", "ns", false},
    {"dram_ns", "remote", "ns", false},
    {"page_ns", "copy", "ns", false},
    {"page_ns", "clear", "ns", false},
    {"page_ns", "copy_ascending", "ns", false},
    {"page_ns", "clear_ascending", "ns", false},
#define ALLOCLAB_OP_FIELD(name) {"op_cycles", #name, "cycles", true},
    ALLOCLAB_OPS(ALLOCLAB_OP_FIELD)
#undef ALLOCLAB_OP_FIELD
};
// clang-format on
constexpr const char* kSections[] = {"clock",     "transfer_ns", "wakeup_ns", "bandwidth_gbs", "misses_in_flight",
                                     "cache_kib", "cache_mib",   "cache_ns",  "dram_ns",       "page_ns",
                                     "op_cycles"};
// The cache capacity model's numbers come in sets (cost_model.hpp): a level's size needs the latency of a line that
// has left it and the reverse, and a private level needs the level above it (kPrivateCacheLevels) and the LLC.
struct Needs {
  std::string field;
  std::string needs;
  std::string what;  // what `needs` is to `field`
};
// How messages name a level: "L1D", "L2", "the LLC".
std::string level_text(std::string_view name) {
  if (name == "llc") return "the LLC";
  std::string s(name);
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
std::vector<Needs> needs_table() {
  std::vector<Needs> v{{"cache_mib.llc", "dram_ns.local", "the latency of a line that has left the LLC"}};
  const PrivateCacheLevel* above = nullptr;
  for (const auto& l : kPrivateCacheLevels) {
    const std::string size = l.size_field(), latency = l.latency_field();
    v.push_back({size, latency, "the latency of a line that has left " + level_text(l.name)});
    v.push_back({latency, size,
                 "the " + level_text(l.name) + " size, which lines leave to be found in " + level_text(l.below)});
    if (!above)
      v.push_back({size, "cache_mib.llc", "the LLC, where a line that leaves the private caches goes"});
    else
      v.push_back({size, above->size_field(),
                   "the " + level_text(above->name) + " size (" + level_text(l.name) + " is the level below " +
                       level_text(above->name) + ")"});
    above = &l;
  }
  return v;
}
constexpr const char* kTextFields[] = {"name", "description", "topology", "topology_source"};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::string sections_list() {
  std::vector<std::string> v(std::begin(kSections), std::end(kSections));
  return join(v);
}

std::string fields_of(const std::string& section) {
  std::vector<std::string> v;
  for (const auto& f : kFields)
    if (section == f.section) v.emplace_back(f.field);
  return join(v);
}

const FieldSpec* find_field(const std::string& section, const std::string& field) {
  for (const auto& f : kFields)
    if (section == f.section && field == f.field) return &f;
  return nullptr;
}

bool is_section(const std::string& s) {
  for (const char* x : kSections)
    if (s == x) return true;
  return false;
}

bool is_text_field(const std::string& s) {
  for (const char* x : kTextFields)
    if (s == x) return true;
  return false;
}

// Why the topology rules a field out ("" when it allows it).
std::string not_applicable(const FieldSpec& f, const Topology& t, const PuDistances& d) {
  const std::string section = f.section, field = f.field;
  if (section == "transfer_ns") {
    std::vector<std::string> present;
    for (const auto c : d.present()) {
      if (to_string(c) == field) return "";
      present.emplace_back(to_string(c));
    }
    return "the topology has no two PUs at this distance (classes present: " +
           (present.empty() ? std::string("none") : join(present)) + ")";
  }
  if (section == "dram_ns" && field == "remote" && t.nr_nodes() == 1)
    return "the topology has one NUMA node, so no memory is remote";
  return "";
}

uint64_t fnv1a(const std::string& s, uint64_t h = 0xcbf29ce484222325ull) {
  for (const unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

// ---- distance classes ---------------------------------------------------------------------------------------------

std::string_view to_string(DistanceClass c) {
  switch (c) {
    case DistanceClass::same_pu: return "same_pu";
    case DistanceClass::same_core: return "same_core";
    case DistanceClass::same_llc: return "same_llc";
    case DistanceClass::same_node: return "same_node";
    case DistanceClass::remote: return "remote";
    case DistanceClass::remote_2hop: return "remote_2hop";
  }
  return "?";
}

PuDistances::PuDistances(const Topology& t) {
  hwloc_topology_t topo = t.raw();
  const bool has_l3 = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_L3CACHE) > 0;
  const int npus = t.nr_pus();
  pus_.resize(size_t(npus));
  for (int p = 0; p < npus; ++p) {
    hwloc_obj_t pu = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PU, unsigned(p));
    hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_CORE, pu);
    hwloc_obj_t l3 = has_l3 ? hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_L3CACHE, pu) : nullptr;
    const int node = t.node_of_pu(p);
    // Ids that cannot collide with logical indices stand in for a missing ancestor.
    pus_[size_t(p)] = {core ? int(core->logical_index) : npus + p, l3 ? int(l3->logical_index) : npus + node, node};
  }
  std::map<int, int> llc_ids;  // dense LLC numbers, in the order of the ids above
  for (const Place& pl : pus_) llc_ids.emplace(pl.llc, 0);
  for (auto& [id, dense] : llc_ids) dense = nr_llcs_++;
  for (Place& pl : pus_) pl.llc = llc_ids.at(pl.llc);
  const int nnodes = t.nr_nodes();
  package_of_node_.assign(size_t(nnodes), -1);
  for (int n = 0; n < hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE); ++n) {
    hwloc_obj_t node = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, unsigned(n));
    if (hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, node))
      package_of_node_[size_t(n)] = int(pkg->logical_index);
  }
  const int npackages = std::max(1, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE));
  nodes_in_package_.assign(size_t(npackages) + 1, 0);  // the last slot counts the nodes without a package
  for (const int pkg : package_of_node_) ++nodes_in_package_[pkg < 0 ? size_t(npackages) : size_t(pkg)];

  // Which classes occur: one pass over the pairs, ended early once all of them have been seen.
  std::set<DistanceClass> seen;
  for (int a = 0; a < npus && seen.size() < kTransferClasses.size(); ++a)
    for (int b = a + 1; b < npus; ++b) seen.insert(classify(a, b));
  for (const auto c : kTransferClasses)
    if (seen.count(c)) present_.push_back(c);
}

int PuDistances::node_hops(int node_a, int node_b) const {
  if (node_a == node_b) return 0;
  const int pa = package_of_node_.at(size_t(node_a)), pb = package_of_node_.at(size_t(node_b));
  if (pa == pb) return 1;
  const auto count = [&](int pkg) { return nodes_in_package_[pkg < 0 ? nodes_in_package_.size() - 1 : size_t(pkg)]; };
  return count(pa) == 1 && count(pb) == 1 ? 1 : 2;
}

DistanceClass PuDistances::classify(int a, int b) const {
  const int n = int(pus_.size());
  for (const int p : {a, b})
    if (p < 0 || p >= n)
      bad("pu: " + std::to_string(p) + " is not a PU of this topology (allowed: 0.." + std::to_string(n - 1) + ")");
  if (a == b) return DistanceClass::same_pu;
  const Place &x = pus_[size_t(a)], &y = pus_[size_t(b)];
  if (x.node != y.node) return node_hops(x.node, y.node) == 1 ? DistanceClass::remote : DistanceClass::remote_2hop;
  if (x.core == y.core) return DistanceClass::same_core;
  if (x.llc == y.llc) return DistanceClass::same_llc;
  return DistanceClass::same_node;
}

std::vector<std::pair<int, int>> PuDistances::pairs(DistanceClass c, size_t max) const {
  std::vector<std::pair<int, int>> out;
  const int n = int(pus_.size());
  for (int a = 0; a < n && out.size() < max; ++a)
    for (int b = a + 1; b < n && out.size() < max; ++b)
      if (classify(a, b) == c) out.emplace_back(a, b);
  return out;
}

// ---- the profile --------------------------------------------------------------------------------------------------

std::shared_ptr<const Topology> MachineProfile::checked_topology(const ProfileFields& f) {
  if (!f.numbers.count("schema")) {
    if (f.text.count("schema")) bad("schema: expected a number, got \"" + f.text.at("schema") + "\" (allowed: 1)");
    bad("schema: missing (allowed: 1)");
  }
  if (const double s = f.numbers.at("schema"); s != kSchema)
    bad("schema: " + fmt(s) + " is not supported (allowed: " + std::to_string(kSchema) + ")");
  static const std::map<std::string, std::string> what = {
      {"name", "the profile's name"},
      {"description", "what machine this is and how it was identified"},
      {"topology",
       "an hwloc synthetic description with an explicit numa: level, e.g. "
       "\"package:2 numa:1 l3:1 core:24 pu:1\""},
      {"topology_source", "where the topology comes from"}};
  for (const char* key : kTextFields) {
    if (f.numbers.count(key)) bad(std::string(key) + ": expected a string, got " + fmt(f.numbers.at(key)));
    const auto it = f.text.find(key);
    if (it == f.text.end()) bad(std::string(key) + ": missing (required: " + what.at(key) + ")");
    if (it->second.find_first_not_of(" \t\n") == std::string::npos)
      bad(std::string(key) + ": empty (required: " + what.at(key) + ")");
  }
  const std::string& name = f.text.at("name");
  for (const char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      bad("name: " + quoted(name) + " (allowed: letters, digits, '-', '_' and '.')");
  for (size_t i = 0; i < f.seeds.size(); ++i)
    if (f.seeds[i].empty()) bad("seeds[" + std::to_string(i) + "]: empty (allowed: the file stem of a seed patch)");

  const std::string& description = f.text.at("topology");
  auto topo = Topology::synthetic(description);  // throws "topology: ..." for what hwloc cannot parse
  if (topo->nr_pus() > kMaxPus || topo->nr_nodes() > kMaxNodes)
    bad("topology: " + quoted(description) + " has " + std::to_string(topo->nr_pus()) + " PUs and " +
        std::to_string(topo->nr_nodes()) + " NUMA nodes (allowed: at most " + std::to_string(kMaxPus) + " PUs and " +
        std::to_string(kMaxNodes) + " nodes)");
  return topo;
}

MachineProfile::MachineProfile(const ProfileFields& f)
    : topology_(checked_topology(f)),
      distances_(*topology_),
      name_(f.text.at("name")),
      description_(f.text.at("description")),
      topology_source_(f.text.at("topology_source")),
      seeds_(f.seeds) {
  // Every key must belong to the schema, with the right type; numbers and sources are collected by field.
  std::map<std::string, double> values;
  std::map<std::string, std::string> sources;
  const auto check_key = [&](const std::string& key, bool is_number, const std::string& shown) {
    if (key == "schema" || is_text_field(key)) return;  // checked in checked_topology
    const auto dot = key.find('.');
    const std::string section = key.substr(0, dot);
    if (!is_section(section))
      bad(section + ": unknown " + (dot == std::string::npos ? "field" : "table") +
          " (allowed: schema, name, description, seeds, topology, topology_source and the tables " + sections_list() +
          ")");
    if (dot == std::string::npos) bad(section + ": expected a table of fields, got " + shown);
    const auto dot2 = key.find('.', dot + 1);
    const std::string field = key.substr(dot + 1, dot2 == std::string::npos ? std::string::npos : dot2 - dot - 1);
    const std::string entry = section + "." + field;
    const FieldSpec* spec = find_field(section, field);
    if (!spec) bad(entry + ": unknown field (allowed in [" + section + "]: " + fields_of(section) + ")");
    if (const std::string why = not_applicable(*spec, *topology_, distances_); !why.empty())
      bad(entry + ": not allowed: " + why);
    if (dot2 == std::string::npos)
      bad(entry + ": expected a table { value = <" + spec->unit + ">, source = \"...\" }, got " + shown);
    const std::string attr = key.substr(dot2 + 1);
    if (attr == "value") {
      if (!is_number) bad(key + ": expected a number, got " + shown);
      values[entry] = f.numbers.at(key);
    } else if (attr == "source") {
      if (is_number) bad(key + ": expected a string, got " + shown);
      sources[entry] = f.text.at(key);
    } else {
      bad(key + ": unknown key (allowed: value, source)");
    }
  };
  for (const auto& [key, text] : f.text) check_key(key, false, "\"" + text + "\"");
  for (const auto& [key, number] : f.numbers) check_key(key, true, fmt(number));

  // Every field the topology allows and the schema requires is there; every number is positive and sourced.
  for (const auto& spec : kFields) {
    const std::string entry = std::string(spec.section) + "." + spec.field;
    const bool has_value = values.count(entry), has_source = sources.count(entry);
    if (!has_value && !has_source) {
      if (spec.required && not_applicable(spec, *topology_, distances_).empty())
        bad(entry + ": missing (required: { value = <" + spec.unit + ">, source = \"...\" })");
      continue;
    }
    if (!has_value) bad(entry + ".value: missing (every source needs its number, in " + spec.unit + ")");
    if (!has_source) bad(entry + ".source: missing (every number needs its source)");
    const double v = values.at(entry);
    if (!std::isfinite(v) || v <= 0)
      bad(entry + ": " + fmt(v) + " is not allowed (allowed: a finite number > 0, in " + spec.unit + ")");
    if (sources.at(entry).find_first_not_of(" \t\n") == std::string::npos)
      bad(entry + ".source: empty (every number needs its source)");
  }
  // A cache that lines leave needs the time to bring them back; each level is smaller than the one below it.
  for (const auto& n : needs_table())
    if (values.count(n.field) && !values.count(n.needs))
      bad(n.field + ": needs " + n.needs + ", " + n.what + " (allowed: both, or neither)");
  // The rules above make the sizes given a prefix of kPrivateCacheLevels, with cache_mib.llc when there is one.
  const PrivateCacheLevel* inner = nullptr;  // the last level checked, inner_kib its size
  double inner_kib = 0;
  for (const auto& l : kPrivateCacheLevels) {
    if (!values.count(l.size_field())) break;
    const double kib = values.at(l.size_field());
    if (inner && kib <= inner_kib)
      bad(l.size_field() + ": " + fmt(kib) + " KiB is not allowed (allowed: more than " + inner->size_field() + ", " +
          fmt(inner_kib) + " KiB)");
    inner = &l;
    inner_kib = kib;
  }
  if (inner) {
    const double llc = values.at("cache_mib.llc") * 1024;
    if (inner_kib >= llc)
      bad(inner->size_field() + ": " + fmt(inner_kib) + " KiB is not allowed (allowed: less than cache_mib.llc, " +
          fmt(llc) + " KiB)");
  }
  values_ = std::move(values);
  sources_ = std::move(sources);
  for (const auto c : distances_.present())
    transfer_by_class_[size_t(c)] = values_.at("transfer_ns." + std::string(to_string(c)));

  std::string canonical =
      "alloclab machine profile schema " + std::to_string(kSchema) + "\ntopology=" + f.text.at("topology") + "\n";
  for (const auto& [key, v] : values_) canonical += key + "=" + fmt(v) + "\n";
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(canonical)));
  hash_ = hex;
}

double MachineProfile::value(const std::string& key) const {
  const auto it = values_.find(key);
  if (it == values_.end()) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : values_) keys.push_back(k);
    bad(key + ": not a number of profile " + quoted(name_) + " (it has: " + join(keys) + ")");
  }
  return it->second;
}

double MachineProfile::transfer_ns(int a, int b) const { return transfer_by_class_[size_t(distance(a, b))]; }

}  // namespace alloclab
