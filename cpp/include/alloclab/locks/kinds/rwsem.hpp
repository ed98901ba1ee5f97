// rwsem: the kernel's reader-writer semaphore, struct rw_semaphore (kernel/locking/rwsem.c, v6.x: down_read,
// rwsem_read_trylock, rwsem_down_read_slowpath, rwsem_down_write_slowpath, rwsem_try_write_lock, rwsem_mark_wake,
// rwsem_wake, up_read, up_write), mm->mmap_sem's primitive.
//
// Algorithm: one count word: bit 0 RWSEM_WRITER_LOCKED, bit 1 RWSEM_FLAG_WAITERS, bit 2 RWSEM_FLAG_HANDOFF, the
// reader count from bit 8 (RWSEM_READER_BIAS). Read fast path: one atomic add of the bias; it holds unless the
// result has a writer, waiters or the hand-off flag (RWSEM_READ_FAILED_MASK): a reader does not pass queued waiters.
// Write fast path: cmpxchg 0 -> WRITER_LOCKED. up_read subtracts the bias and wakes when it leaves only WAITERS;
// up_write subtracts WRITER_LOCKED and wakes when WAITERS is set. The wait list (under wait_lock, a qspinlock) is
// FIFO; rwsem_mark_wake wakes a writer at its head alone (it retries rwsem_try_write_lock), or, with a reader at the
// head, grants the read side to the readers of the whole list at once (phase-fair: writers between them are
// skipped), at most MAX_READERS_WAKEUP (256) per call, each woken already holding it. A writer that has waited
// RWSEM_WAIT_TIMEOUT (4 ms: one jiffy at HZ=250) and still finds it locked sets HANDOFF: then no newcomer, reader or
// writer, takes it, and it goes to the first waiter; a reader at the head sets it when a writer stole the lock from
// under its wake-up after that timeout. Both clocks time the 4 ms in their own time (host ticks on threads, virtual
// time on the simulator).
// Reader optimistic cases: modelled — the reader lock stealing of rwsem_down_read_slowpath (a reader whose fast
// path failed takes the lock anyway when no writer holds it, HANDOFF is clear and no other reader holds it, i.e. a
// woken writer has not run yet; it then wakes the readers at the head, RWSEM_WAKE_READ_OWNED) and the empty-list
// exit (no waiter and no writer: keep the bias). "Readers probably own it" is judged from the count (another
// reader's bias) instead of the owner field's RWSEM_READER_OWNED hint, which is left out.
// Fairness: writers are served in order unless a newcomer steals a free lock before a woken waiter runs; queued
// readers are never overtaken by later readers once a writer waits. Cost: one atomic RMW on the count word per
// down_read and per up_read: readers on different CPUs bounce its line (mmap_sem's scalability problem).
// Lock (lock.hpp): lock()/unlock() are down_write/up_write, lock_read()/unlock_read() down_read/up_read.
// Leaves out: writer optimistic spinning on the owner (rwsem_optimistic_spin, the OSQ, RWSEM_NONSPINNABLE: writers
// sleep at once), the owner field, RWSEM_FLAG_READFAIL (2^55 readers), RT-task hand-off, killable waits,
// downgrade_write, the too-many-readers check of rwsem_mark_wake, PREEMPT_RT's rt_mutex-based rwsem, lockdep.
#pragma once

#include "alloclab/locks/kinds/kind.hpp"
#include "alloclab/locks/kinds/qspinlock.hpp"

namespace alloclab {

struct Rwsem {
  static constexpr LockKindTraits kTraits{
      .fifo = false,
      .doc =
          "the kernel's rw_semaphore: readers share via an atomic add on the count word, writers exclude; FIFO "
          "wait list, a woken writer alone or every queued reader at once, hand-off after 4 ms; lock() is "
          "down_write, lock_read() down_read; the default for rwsem classes (mmap_sem)",
      // Uncontended: down_write's cmpxchg and up_write's fetch_sub (down_read's and up_read's fetch_add and fetch_sub
      // alike).
      .lock = {.rmws = 1, .accesses = 0},
      .unlock = {.rmws = 1, .accesses = 0}};

  // The count word (kernel/locking/rwsem.c).
  static constexpr long kWriterLocked = 1L << 0;  // RWSEM_WRITER_LOCKED
  static constexpr long kFlagWaiters = 1L << 1;   // RWSEM_FLAG_WAITERS
  static constexpr long kFlagHandoff = 1L << 2;   // RWSEM_FLAG_HANDOFF
  static constexpr long kReaderBias = 1L << 8;    // RWSEM_READER_BIAS (RWSEM_READER_SHIFT 8)
  static constexpr long kReaderMask = ~(kReaderBias - 1);
  static constexpr long kLockMask = kWriterLocked | kReaderMask;                        // RWSEM_LOCK_MASK
  static constexpr long kReadFailedMask = kWriterLocked | kFlagWaiters | kFlagHandoff;  // RWSEM_READ_FAILED_MASK
  static constexpr int kMaxReadersWakeup = 0x100;                                       // MAX_READERS_WAKEUP
  static constexpr uint64_t kWaitTimeoutNs = 4000000;  // RWSEM_WAIT_TIMEOUT: DIV_ROUND_UP(HZ, 250) jiffies, HZ=250

  // struct rwsem_waiter: on the wait list while it sleeps.
  struct Waiter {
    Waiter* prev;
    Waiter* next;
    bool write;        // RWSEM_WAITING_FOR_WRITE
    bool handoff_set;  // this first waiter set HANDOFF
    uint64_t timeout;  // host ticks: jiffies + RWSEM_WAIT_TIMEOUT
    uint32_t woken;    // the futex it sleeps on: a writer's wake-up, a reader's grant (waiter->task = NULL)
  };
  struct Token {
    Waiter waiter;
    long count;  // the count after the read fast path's add (rwsem_down_read_slowpath's argument)
  };

  // Write side. rwsem_write_trylock: 0 -> WRITER_LOCKED.
  bool enter(Token&) noexcept {
    long expected = 0;
    return count.compare_exchange_strong(expected, kWriterLocked, std::memory_order_acquire, std::memory_order_relaxed);
  }
  bool try_enter(Token& t) noexcept { return enter(t); }  // down_write_trylock
  void wait(Token& t, bool yield) noexcept;               // rwsem.cpp: rwsem_down_write_slowpath
  // up_write.
  void leave(Token&) noexcept {
    if (count.fetch_sub(kWriterLocked, std::memory_order_release) & kFlagWaiters) wake();
  }
  // The waiters on the wait list, readers and writers (for tests that build a known queue; any holder's token).
  uint32_t queued(const Token&) const noexcept;

  // Read side. rwsem_read_trylock: the bias goes in whatever happens; true when the result has no writer, waiters or
  // HANDOFF. Otherwise call wait_read(), which starts from the count left in the token.
  bool enter_read(Token& t) noexcept {
    t.count = count.fetch_add(kReaderBias, std::memory_order_acquire) + kReaderBias;
    return !(t.count & kReadFailedMask);
  }
  // down_read_trylock: a cmpxchg loop while none of the failure bits is set; never queues.
  bool try_enter_read(Token&) noexcept {
    long c = count.load(std::memory_order_relaxed);
    while (!(c & kReadFailedMask))
      if (count.compare_exchange_weak(c, c + kReaderBias, std::memory_order_acquire, std::memory_order_relaxed))
        return true;
    return false;
  }
  void wait_read(Token& t, bool yield) noexcept;  // rwsem.cpp: rwsem_down_read_slowpath
  // up_read: wake when only WAITERS is left (no writer, no reader).
  void leave_read(Token&) noexcept {
    const long c = count.fetch_sub(kReaderBias, std::memory_order_release) - kReaderBias;
    if ((c & (kLockMask | kFlagWaiters)) == kFlagWaiters) wake();
  }

  // Virtual time (vhandoff.hpp; Lock's virtual read side in virtual_lock.cpp). At a release that leaves the lock
  // free: a writer at the head is woken alone one futex wake-up later, to race (a newcomer may take it first); after
  // it lost a race past RWSEM_WAIT_TIMEOUT it has set HANDOFF and the lock is its own at once (it spins on the owner
  // once HANDOFF is set: one line transfer). A reader at the head: every queued reader (up to MAX_READERS_WAKEUP) is
  // granted the read side at the release and woken a futex wake-up later.
  static VHandoff vhandoff(const VRelease& r);

  std::atomic<long> count{0};   // writer | waiters | handoff | readers << 8
  Qspinlock wait_lock;          // guards the wait list and the waiters' handoff_set
  Waiter* wait_head = nullptr;  // the wait list, oldest first (under wait_lock)
  Waiter* wait_tail = nullptr;

 private:
  enum class WakeType { any, readers, read_owned };  // enum rwsem_wake_type
  void lock_wait_lock() noexcept;
  void unlock_wait_lock() noexcept;
  void add_waiter(Waiter& w) noexcept;  // at the tail
  void unlink(Waiter& w) noexcept;
  // rwsem_mark_wake (wait_lock held, list not empty): wakes the writer at the head, or grants the readers.
  void mark_wake(WakeType type) noexcept;
  void cond_wake_waiter(long c) noexcept;   // rwsem_cond_wake_waiter (wait_lock held)
  bool try_write_lock(Waiter& w) noexcept;  // rwsem_try_write_lock (wait_lock held)
  void wake() noexcept;                     // rwsem_wake: mark_wake(any) under wait_lock
};

}  // namespace alloclab
