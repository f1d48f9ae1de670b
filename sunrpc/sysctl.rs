// SPDX-License-Identifier: GPL-2.0

//! `rpcrdma.ko`'s sysctl tables: `/proc/sys/sunrpc/rdma_*` and
//! `/proc/sys/sunrpc/svc_rdma/*`, registered by `sys/sysctl.c` with the
//! same names, ranges and handlers. The tunables are C variables shared
//! with the module parameters (read through [`crate::params`]); the
//! server's four `rdma_stat_*` counters are [`SvcStats`], kept here and
//! read or reset by the C handler.

use kernel::prelude::*;

use super::Counter;
use crate::sys;

/// svcrdma's `rdma_stat_*` counters. A write to one of their files
/// resets it to zero, as with `rpcrdma.ko`.
pub(crate) struct SvcStats {
    /// `rdma_stat_read`: RDMA Read segments set up for a Call's Read
    /// chunks (one rdma_rw context each).
    pub(crate) read: Counter,
    /// `rdma_stat_recv`: received messages taken by `xpo_recvfrom`.
    pub(crate) recv: Counter,
    /// `rdma_stat_write`: RDMA Writes of Write and Reply chunks, one per
    /// segment and Reply part (head, pages, tail) as svcrdma's rdma_rw
    /// contexts. Lower than svcrdma's for the same I/O: a Reply that fits
    /// inline is sent inline, where svcrdma writes it into any offered
    /// Reply chunk (every NFSv4.1+ OPEN offers one; admin guide,
    /// Sysctls).
    pub(crate) write: Counter,
    /// `rdma_stat_sq_starve`: times a thread had to wait for Send Queue
    /// room (or a Send buffer).
    pub(crate) sq_starve: Counter,
}

impl SvcStats {
    /// All at zero.
    pub(crate) const fn new() -> Self {
        Self {
            read: Counter::new(),
            recv: Counter::new(),
            write: Counter::new(),
            sq_starve: Counter::new(),
        }
    }
}

/// The registered tables; removed on drop.
///
/// # Invariants
///
/// When `registered`, this value registered the C tables (whose counter
/// files read a `'static` [`SvcStats`]) and nobody else may remove them.
pub(crate) struct Sysctls {
    registered: bool,
}

impl Sysctls {
    /// Registers the tables, the counters' files showing `stats`. A
    /// failure is logged and the module goes on without the sysctls (or
    /// the part that failed): the transports work, and the module
    /// parameters set the same values.
    pub(crate) fn register(stats: &'static SvcStats) -> Self {
        // SAFETY: The four counters are `'static`, so they outlive the
        // tables; the C handler accesses them only atomically.
        let rc = unsafe {
            sys::rpcrdma_rs_sysctls_register(
                stats.read.as_ptr(),
                stats.recv.as_ptr(),
                stats.write.as_ptr(),
                stats.sq_starve.as_ptr(),
            )
        };
        if rc != 0 {
            pr_warn!(
                "rpcrdma_rs: sunrpc sysctls not (all) registered ({rc}); the module parameters still apply\n"
            );
        }
        // INVARIANT: -EBUSY means another value registered them.
        Self {
            registered: rc != EBUSY.to_errno(),
        }
    }
}

impl Drop for Sysctls {
    fn drop(&mut self) {
        if self.registered {
            // SAFETY: Ours (invariant); removing waits for handlers.
            unsafe { sys::rpcrdma_rs_sysctls_unregister() };
        }
    }
}
