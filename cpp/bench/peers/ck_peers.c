/* The peer locks of bench_lock_peers.cpp: Concurrency Kit's (libck-dev) spinlocks of the algorithms our kinds
 * implement, behind a C interface (ck's headers are C and do not compile as C++). Built with -flto together with the
 * benchmark, so that these calls inline into its loop as ck's static inline functions do in a C program.
 * Models: nothing; leaves out ck's other locks (CLH, Anderson, ...), which have no kind here to compare with. */
#include <ck_cohort.h>
#include <spinlock/fas.h>
#include <spinlock/mcs.h>
#include <spinlock/ticket.h>

#include "ck_peers.h"

_Static_assert(sizeof(ck_spinlock_mcs_context_t) <= CK_PEER_NODE_BYTES, "an MCS node fits a ck_peer_node");

/* C-BO-MCS from ck_cohort: the methods in the (lock, context) shape CK_COHORT_PROTOTYPE calls. */
static void bo_lock(ck_spinlock_fas_t* l, void* c) { (void)c, ck_spinlock_fas_lock_eb(l); }
static void bo_unlock(ck_spinlock_fas_t* l, void* c) { (void)c, ck_spinlock_fas_unlock(l); }
static bool bo_locked(ck_spinlock_fas_t* l, void* c) { return (void)c, ck_spinlock_fas_locked(l); }
static void mcs_lock(ck_spinlock_mcs_t* l, void* c) { ck_spinlock_mcs_lock(l, c); }
static void mcs_unlock(ck_spinlock_mcs_t* l, void* c) { ck_spinlock_mcs_unlock(l, c); }
static bool mcs_locked(ck_spinlock_mcs_t* l, void* c) { return (void)c, ck_spinlock_mcs_locked(l); }
CK_COHORT_PROTOTYPE(bo_mcs, bo_lock, bo_unlock, bo_locked, mcs_lock, mcs_unlock, mcs_locked)

_Static_assert(sizeof(CK_COHORT_INSTANCE(bo_mcs)) <= 64, "a cohort's state fits its line");
#define COHORT(l) ((CK_COHORT_INSTANCE(bo_mcs)*)(l)->word)
#define COHORT_GLOBAL(l) ((ck_spinlock_fas_t*)((l)->word + 64))
#define COHORT_LOCAL(l) ((ck_spinlock_mcs_t*)((l)->word + 128))

void ck_peer_init(enum ck_peer_kind k, struct ck_peer_lock* l, unsigned pass_limit) {
  switch (k) {
    case CK_PEER_FAS: ck_spinlock_fas_init((ck_spinlock_fas_t*)l->word); break;
    case CK_PEER_TICKET: ck_spinlock_ticket_init((ck_spinlock_ticket_t*)l->word); break;
    case CK_PEER_MCS: *(ck_spinlock_mcs_t*)l->word = CK_SPINLOCK_MCS_INITIALIZER; break;
    case CK_PEER_COHORT:
      ck_spinlock_fas_init(COHORT_GLOBAL(l));
      *COHORT_LOCAL(l) = CK_SPINLOCK_MCS_INITIALIZER;
      CK_COHORT_INIT(bo_mcs, COHORT(l), COHORT_GLOBAL(l), COHORT_LOCAL(l), pass_limit);
      break;
  }
}

void ck_peer_acquire(enum ck_peer_kind k, struct ck_peer_lock* l, struct ck_peer_node* n) {
  switch (k) {
    case CK_PEER_FAS: ck_spinlock_fas_lock((ck_spinlock_fas_t*)l->word); break;
    case CK_PEER_TICKET: ck_spinlock_ticket_lock((ck_spinlock_ticket_t*)l->word); break;
    case CK_PEER_MCS: ck_spinlock_mcs_lock((ck_spinlock_mcs_t*)l->word, (ck_spinlock_mcs_context_t*)n->bytes); break;
    case CK_PEER_COHORT: CK_COHORT_LOCK(bo_mcs, COHORT(l), NULL, n->bytes); break;
  }
}

void ck_peer_release(enum ck_peer_kind k, struct ck_peer_lock* l, struct ck_peer_node* n) {
  switch (k) {
    case CK_PEER_FAS: ck_spinlock_fas_unlock((ck_spinlock_fas_t*)l->word); break;
    case CK_PEER_TICKET: ck_spinlock_ticket_unlock((ck_spinlock_ticket_t*)l->word); break;
    case CK_PEER_MCS: ck_spinlock_mcs_unlock((ck_spinlock_mcs_t*)l->word, (ck_spinlock_mcs_context_t*)n->bytes); break;
    case CK_PEER_COHORT: CK_COHORT_UNLOCK(bo_mcs, COHORT(l), NULL, n->bytes); break;
  }
}
