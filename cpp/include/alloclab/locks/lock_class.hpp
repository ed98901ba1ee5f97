// Lock classes and the LockConfig: which primitive each named lock site uses in a run.
//
// Models: lockdep's notion of a *lock class* — every `zone->lock` of every zone is one class, and /proc/lock_stat
// reports per class. The catalogue lists the classes of the kernel paths alloclab models, each with its kernel
// nature (spinlock, mutex, rwsem) and a default primitive that is the kernel's own: spinlock_t is a qspinlock, a
// mutex is the kernel mutex (kmutex: optimistic spinning on the OSQ, then sleep), an rw_semaphore the kernel's rwsem.
// Any class's primitive can be overridden per run.
// Leaves out: lockdep's dependency graph (no deadlock detection), lock subclasses, irq-state tracking.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>

#include "alloclab/locks/lock_kinds.hpp"

namespace alloclab {

enum class LockNature : uint8_t { spinlock, mutex, rwsem };

struct LockClassDef {
  std::string_view name;   // as lock_stat prints it, e.g. "zone->lock"
  LockNature nature;       // what the kernel uses
  std::string_view where;  // kernel file / struct it lives in
};
std::string_view to_string(LockNature n);  // "spinlock", "mutex", "rwsem"
// The primitive a class of nature `n` gets unless the run says otherwise: the kernel's (qspinlock, kmutex, rwsem).
LockKind default_kind(LockNature n);

// Every lock class the models use: the kernel's (lock_class.cpp) and those that lab code registers for its own
// benchmarks. A class not listed here cannot be configured (typos are errors).
std::span<const LockClassDef> lock_class_catalogue();
const LockClassDef* find_lock_class(std::string_view name);
// Adds a class to the catalogue; call it during static initialisation (LockClassRegistrar), before any LockDomain
// exists. Throws std::logic_error for a name that is already there.
void register_lock_class(const LockClassDef& def);
struct LockClassRegistrar {
  explicit LockClassRegistrar(const LockClassDef& def) { register_lock_class(def); }
};

// class name -> primitive, for one run. Unset classes take the default of their nature (default_kind()).
class LockConfig {
 public:
  // Throws std::invalid_argument for an unknown class or kind ("locks['zone->lok']: unknown lock class ...").
  void set(std::string_view cls, std::string_view kind);
  // A scenario's own default for a class (e.g. lock_zoo's `lock` parameter); an explicit set() wins.
  void set_default(std::string_view cls, LockKind kind);
  // The modelled kernel's primitive for every class of nature `n` (e.g. 2.6.35's ticket spinlock_t) in place of
  // default_kind(n); a class's own default and an explicit set() win.
  void set_default(LockNature n, LockKind kind);
  // The primitive of `cls`: set(), else the class's own default, else its nature's (set_default, default_kind()).
  LockKind kind_for(std::string_view cls) const;
  const std::map<std::string, LockKind, std::less<>>& overrides() const { return overrides_; }

 private:
  std::map<std::string, LockKind, std::less<>> overrides_;
  std::map<std::string, LockKind, std::less<>> defaults_;
  std::map<LockNature, LockKind> nature_defaults_;
};

}  // namespace alloclab
