// The lock-class catalogue and LockConfig (see lock_class.hpp).
#include "alloclab/locks/lock_class.hpp"

#include <iterator>
#include <stdexcept>
#include <vector>

#include "alloclab/base/suggest.hpp"

namespace alloclab {

namespace {
// A NUMA-aware kind's Token carries the acquirer's node (lock_kinds.hpp).
template <class Kind>
constexpr bool kNumaAware = requires(typename Kind::Token t) {
  t.numa_node;
};

// A NUMA-aware kind's base lock (kinds/kind.hpp), empty for the others.
template <class Kind>
constexpr std::string_view kBase = {};
template <class Kind>
requires kNumaAware<Kind>
constexpr std::string_view kBase<Kind> = Kind::kBase;

constexpr LockKindInfo kKinds[] = {
#define ALLOCLAB_KIND_INFO(name, Type)                                       \
  {LockKind::name,      #name,       Type::kTraits.doc,  Type::kTraits.fifo, \
   kNumaAware<Type>,    kBase<Type>, ReadSideKind<Type>, Type::kTraits.lock, \
   Type::kTraits.unlock},
    ALLOCLAB_LOCK_KINDS(ALLOCLAB_KIND_INFO)
#undef ALLOCLAB_KIND_INFO
};

// A NUMA-aware kind's base names a kind of the list that is not NUMA-aware itself (what it degenerates to).
constexpr bool bases_are_plain_kinds() {
  for (const LockKindInfo& k : kKinds) {
    if (!k.numa_aware) continue;
    bool found = false;
    for (const LockKindInfo& b : kKinds) found = found || (b.name == k.base && !b.numa_aware);
    if (!found) return false;
  }
  return true;
}
static_assert(bases_are_plain_kinds(),
              "a NUMA-aware kind's kBase must name a kind of ALLOCLAB_LOCK_KINDS that is not "
              "NUMA-aware");

// The kernel's classes; lab code registers its own (register_lock_class).
constexpr LockClassDef kKernelClasses[] = {
    {"zone->lock", LockNature::spinlock, "struct zone (mm/page_alloc.c): free_area lists"},
    {"pcp->lock", LockNature::spinlock, "struct per_cpu_pages (mm/page_alloc.c): per-CPU page lists, trylock"},
    {"pcpu_drain_mutex", LockNature::mutex, "mm/page_alloc.c: __drain_all_pages serialisation"},
    {"cma_mutex", LockNature::mutex, "mm/cma.c before the per-area patch: one mutex for every area"},
    {"cma->alloc_mutex", LockNature::mutex, "struct cma (mm/cma.h) after the per-area patch"},
    {"cma->lock", LockNature::spinlock, "struct cma (mm/cma.h): the allocation bitmap"},
    {"mapping->i_pages", LockNature::spinlock, "struct address_space: page-cache xarray lock (migration)"},
    {"hugetlb_lock", LockNature::spinlock, "mm/hugetlb.c: hstate free lists and counters"},
    {"padata_work_lock", LockNature::spinlock, "kernel/padata.c: padata_mt_job_state.lock, chunk hand-out"},
    {"vmap_area_lock", LockNature::spinlock, "mm/vmalloc.c (v6.7): the busy vmap_area tree"},
    {"free_vmap_area_lock", LockNature::spinlock, "mm/vmalloc.c: the free vmap_area tree"},
    {"vn->busy.lock", LockNature::spinlock, "mm/vmalloc.c (v6.9+): per-vmap_node busy tree"},
    {"vn->pool_lock", LockNature::spinlock, "mm/vmalloc.c (v6.9+): per-vmap_node size-class pools"},
    {"vmap_purge_lock", LockNature::mutex, "mm/vmalloc.c: lazy-free purge"},
    {"purge_vmap_area_lock", LockNature::spinlock, "mm/vmalloc.c (v6.7): the lazily freed vmap_area tree"},
    {"vn->lazy.lock", LockNature::spinlock, "mm/vmalloc.c (v6.9+): per-vmap_node lazily freed vmap_area tree"},
    {"info->lock", LockNature::spinlock, "struct shmem_inode_info (mm/shmem.c): accounting, swap vector"},
    {"mapping->tree_lock", LockNature::spinlock, "struct address_space (2.6.35): page-cache radix tree"},
    {"lru_lock", LockNature::spinlock, "zone->lru_lock (2.6.35) / lruvec->lru_lock: LRU lists"},
    {"mmap_sem", LockNature::rwsem, "mm_struct: taken for read on every fault"},
};
}  // namespace

std::span<const LockKindInfo> lock_kinds() { return kKinds; }

std::string_view to_string(LockKind k) {
  for (const auto& i : kKinds)
    if (i.kind == k) return i.name;
  return "?";
}

LockKind parse_lock_kind(std::string_view name, std::string_view param) {
  for (const auto& i : kKinds)
    if (i.name == name) return i.kind;
  std::string allowed;
  std::vector<std::string> known;
  for (const auto& i : kKinds) {
    allowed += (allowed.empty() ? "" : ", ") + std::string(i.name);
    known.emplace_back(i.name);
  }
  throw std::invalid_argument(std::string(param) + ": unknown lock kind '" + std::string(name) +
                              "' (allowed: " + allowed + ")" + did_you_mean(name, known));
}

static std::vector<LockClassDef>& catalogue() {
  static std::vector<LockClassDef> all(std::begin(kKernelClasses), std::end(kKernelClasses));
  return all;
}

std::span<const LockClassDef> lock_class_catalogue() { return catalogue(); }

const LockClassDef* find_lock_class(std::string_view name) {
  for (const auto& c : catalogue())
    if (c.name == name) return &c;
  return nullptr;
}

void register_lock_class(const LockClassDef& def) {
  if (find_lock_class(def.name)) throw std::logic_error("lock class '" + std::string(def.name) + "' registered twice");
  catalogue().push_back(def);
}

std::string_view to_string(LockNature n) {
  switch (n) {
    case LockNature::spinlock: return "spinlock";
    case LockNature::mutex: return "mutex";
    case LockNature::rwsem: return "rwsem";
  }
  return "?";
}

static const LockClassDef& require_class(std::string_view cls) {
  if (const auto* c = find_lock_class(cls)) return *c;
  std::string allowed;
  std::vector<std::string> known;
  for (const auto& c : catalogue()) {
    allowed += (allowed.empty() ? "" : ", ") + std::string(c.name);
    known.emplace_back(c.name);
  }
  throw std::invalid_argument("locks: unknown lock class '" + std::string(cls) + "' (known classes: " + allowed + ")" +
                              did_you_mean(cls, known));
}

void LockConfig::set(std::string_view cls, std::string_view kind) {
  require_class(cls);
  overrides_[std::string(cls)] = parse_lock_kind(kind, "locks['" + std::string(cls) + "']");
}

void LockConfig::set_default(std::string_view cls, LockKind kind) {
  require_class(cls);
  defaults_[std::string(cls)] = kind;
}

void LockConfig::set_default(LockNature n, LockKind kind) { nature_defaults_[n] = kind; }

LockKind LockConfig::kind_for(std::string_view cls) const {
  if (auto it = overrides_.find(cls); it != overrides_.end()) return it->second;
  if (auto it = defaults_.find(cls); it != defaults_.end()) return it->second;
  const LockNature n = require_class(cls).nature;
  if (auto it = nature_defaults_.find(n); it != nature_defaults_.end()) return it->second;
  return default_kind(n);
}

LockKind default_kind(LockNature n) {
  switch (n) {
    case LockNature::spinlock: return LockKind::qspinlock;
    case LockNature::mutex: return LockKind::kmutex;
    case LockNature::rwsem: return LockKind::rwsem;
  }
  return LockKind::qspinlock;
}

}  // namespace alloclab
