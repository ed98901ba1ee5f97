/* The peer locks of bench_lock_peers.cpp: Concurrency Kit's (libck-dev) spinlocks of the algorithms our kinds
 * implement, behind a C interface (ck's headers are C and do not compile as C++). Built with -flto together with the
 * benchmark, so that these calls inline into its loop as ck's static inline functions do in a C program.
 * Models: nothing; leaves out ck's other locks (CLH, Anderson, cohort), which have no kind here to compare with. */
#include <spinlock/fas.h>
#include <spinlock/mcs.h>
#include <spinlock/ticket.h>

#include "ck_peers.h"

_Static_assert(sizeof(ck_spinlock_mcs_context_t) <= CK_PEER_NODE_BYTES, "an MCS node fits a ck_peer_node");

void ck_peer_init(enum ck_peer_kind k, struct ck_peer_lock* l) {
  switch (k) {
    case CK_PEER_FAS: ck_spinlock_fas_init((ck_spinlock_fas_t*)l->word); break;
    case CK_PEER_TICKET: ck_spinlock_ticket_init((ck_spinlock_ticket_t*)l->word); break;
    case CK_PEER_MCS: *(ck_spinlock_mcs_t*)l->word = CK_SPINLOCK_MCS_INITIALIZER; break;
  }
}

void ck_peer_acquire(enum ck_peer_kind k, struct ck_peer_lock* l, struct ck_peer_node* n) {
  switch (k) {
    case CK_PEER_FAS: ck_spinlock_fas_lock((ck_spinlock_fas_t*)l->word); break;
    case CK_PEER_TICKET: ck_spinlock_ticket_lock((ck_spinlock_ticket_t*)l->word); break;
    case CK_PEER_MCS: ck_spinlock_mcs_lock((ck_spinlock_mcs_t*)l->word, (ck_spinlock_mcs_context_t*)n->bytes); break;
  }
}

void ck_peer_release(enum ck_peer_kind k, struct ck_peer_lock* l, struct ck_peer_node* n) {
  switch (k) {
    case CK_PEER_FAS: ck_spinlock_fas_unlock((ck_spinlock_fas_t*)l->word); break;
    case CK_PEER_TICKET: ck_spinlock_ticket_unlock((ck_spinlock_ticket_t*)l->word); break;
    case CK_PEER_MCS: ck_spinlock_mcs_unlock((ck_spinlock_mcs_t*)l->word, (ck_spinlock_mcs_context_t*)n->bytes); break;
  }
}
