/* Concurrency Kit's spinlocks behind a C interface for the C++ benchmarks (see ck_peers.c). */
#pragma once

#ifndef __cplusplus
#include <stdalign.h> /* alignas in C11 */
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ck's lock of the algorithm of our kind: fas = test-and-test-and-set (our spin), ticket, mcs, and cohort = ck_cohort
 * of a fas lock with exponential backoff and an MCS lock (C-BO-MCS, our cohort). */
enum ck_peer_kind { CK_PEER_FAS, CK_PEER_TICKET, CK_PEER_MCS, CK_PEER_COHORT };

#define CK_PEER_NODE_BYTES 64
/* Each ck lock on cache lines of its own (a cohort: its state, the global word and the local queue's tail, one line
 * each); one MCS queue node per thread, on its own line too. */
struct ck_peer_lock {
  alignas(64) unsigned char word[3 * 64];
};
struct ck_peer_node {
  alignas(64) unsigned char bytes[CK_PEER_NODE_BYTES];
};

/* `pass_limit`: a cohort's local hand-offs in a row, at most (ignored by the other kinds). */
void ck_peer_init(enum ck_peer_kind k, struct ck_peer_lock* l, unsigned pass_limit);
void ck_peer_acquire(enum ck_peer_kind k, struct ck_peer_lock* l, struct ck_peer_node* n);
void ck_peer_release(enum ck_peer_kind k, struct ck_peer_lock* l, struct ck_peer_node* n);

#ifdef __cplusplus
}
#endif
