// ALLOCLAB_TLS: the attribute of a thread-local that hot paths read (a lock's fast path, every clock read, every
// tracked access of a virtual run).
//
// Models: the kernel's per-CPU variables, which `current`, numa_node_id() and this_cpu_read() read with one
// %gs-relative load. In the Python extension module, a shared object loaded by dlopen, a thread-local of the default
// (global-dynamic) model costs a call to __tls_get_addr per access: 4 ns on kmutex's fast path, 2 ns on a NUMA-aware
// kind's, 4-5 ns of lock_stat's cost per acquisition, measured on this project's Zen 4 host. The initial-exec model
// makes each access one %fs-relative load; glibc serves it from its static TLS surplus, which the few dozen bytes of
// these variables fit. Declare them constinit as well, so that no access runs a guard for dynamic initialisation.
// Leaves out: nothing; it is an attribute.
#pragma once

#define ALLOCLAB_TLS [[gnu::tls_model("initial-exec")]]
