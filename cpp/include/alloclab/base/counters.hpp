// Counters: a stats struct names each of its fields once, in a list, and the list generates the fields, their sum
// and a visit over (name, value, doc) that emits them as per-worker metrics or summary values.
//
// Models: the kernel's vm_event_item.h + vmstat_text[] habit (a counter named once, printed from one table).
//
//   #define ALLOCLAB_FOO_STATS(X) X(faults, sum, "faults taken") X(hold_min, min, "shortest hold, ticks")
//   struct FooStats { ALLOCLAB_COUNTERS(FooStats, ALLOCLAB_FOO_STATS) };
//
// Each field is a uint64_t combined by `sum` (+), `min` or `max`; a struct may add members outside its list (a
// nested stats struct, a last error) and fold them in its own += after the generated one.
// Leaves out: per-CPU storage (a struct is written by one thread; the callers sum them when no worker runs).
#pragma once

#include <algorithm>
#include <cstdint>

namespace alloclab::counters {

struct sum {
  static constexpr uint64_t init = 0;
  static constexpr uint64_t combine(uint64_t a, uint64_t b) { return a + b; }
};
struct min {
  static constexpr uint64_t init = UINT64_MAX;
  static constexpr uint64_t combine(uint64_t a, uint64_t b) { return std::min(a, b); }
};
struct max {
  static constexpr uint64_t init = 0;
  static constexpr uint64_t combine(uint64_t a, uint64_t b) { return std::max(a, b); }
};

// Folds what a stats struct keeps outside its list (its add_extra), when it has any.
template <class T>
void add_extra(T& t, const T& o) {
  if constexpr (requires { t.add_extra(o); }) t.add_extra(o);
}

}  // namespace alloclab::counters

#define ALLOCLAB_COUNTER_FIELD(name, op, doc) uint64_t name = ::alloclab::counters::op::init;
#define ALLOCLAB_COUNTER_COMBINE(name, op, doc) name = ::alloclab::counters::op::combine(name, o.name);
#define ALLOCLAB_COUNTER_VISIT(name, op, doc) f(#name, name, doc);

// Inside `struct Type { ... }`: the fields of LIST, `operator+=` (each field by its op, then the struct's own
// `add_extra(o)` when it has one) and `for_each_counter(f)` calling f(const char* name, uint64_t value,
// const char* doc) in list order.
#define ALLOCLAB_COUNTERS(Type, LIST)          \
  LIST(ALLOCLAB_COUNTER_FIELD)                 \
  Type& operator+=(const Type& o) {            \
    LIST(ALLOCLAB_COUNTER_COMBINE)             \
    ::alloclab::counters::add_extra(*this, o); \
    return *this;                              \
  }                                            \
  template <class F>                           \
  void for_each_counter(F&& f) const {         \
    LIST(ALLOCLAB_COUNTER_VISIT)               \
  }
