// SPDX-License-Identifier: GPL-2.0

//! `rpcrdma.ko`'s sysctl tables: `/proc/sys/sunrpc/rdma_*` and
//! `/proc/sys/sunrpc/svc_rdma/*`, registered by `sys/sysctl.c` with the
//! same names, ranges and handlers. The tunables are C variables shared
//! with the module parameters (read through [`crate::params`]); the
//! server's four `rdma_stat_*` counters ([`SvcStat`]) are per-CPU C
//! variables too, summed when read.

use kernel::prelude::*;

use crate::sys;

/// One of svcrdma's `rdma_stat_*` counters. Per CPU, as svcrdma's
/// `percpu_counter`s: each Call counts in some of them, and one shared
/// word would be a cache line every CPU serving Calls writes. A read of
/// its file sums the CPUs; a write resets it to zero, as with
/// `rpcrdma.ko`.
#[derive(Clone, Copy)]
pub(crate) struct SvcStat(u32);

impl SvcStat {
    /// `rdma_stat_read`: RDMA Read segments set up for a Call's Read
    /// chunks (one rdma_rw context each).
    pub(crate) const READ: Self = Self(sys::RPCRDMA_RS_SVC_STAT_READ);
    /// `rdma_stat_recv`: received messages taken by `xpo_recvfrom`.
    pub(crate) const RECV: Self = Self(sys::RPCRDMA_RS_SVC_STAT_RECV);
    /// `rdma_stat_write`: RDMA Writes of Write and Reply chunks, one per
    /// segment and Reply part (head, pages, tail) as svcrdma's rdma_rw
    /// contexts. Lower than svcrdma's for the same I/O: a Reply that fits
    /// inline is sent inline, where svcrdma writes it into any offered
    /// Reply chunk (every NFSv4.1+ OPEN offers one; admin guide,
    /// Sysctls).
    pub(crate) const WRITE: Self = Self(sys::RPCRDMA_RS_SVC_STAT_WRITE);
    /// `rdma_stat_sq_starve`: times a thread had to wait for Send Queue
    /// room (or a Send buffer).
    pub(crate) const SQ_STARVE: Self = Self(sys::RPCRDMA_RS_SVC_STAT_SQ_STARVE);

    /// Adds `n` to this CPU's part.
    pub(crate) fn add(self, n: u64) {
        // SAFETY: No pointer is passed; the C side ignores an index out
        // of range, and adds to a static per-CPU variable.
        unsafe { sys::rpcrdma_rs_svc_stat_add(self.0, n) }
    }

    /// Adds one.
    pub(crate) fn inc(self) {
        self.add(1)
    }
}

/// The registered tables; removed on drop.
///
/// # Invariants
///
/// When `registered`, this value registered the C tables and nobody else
/// may remove them.
pub(crate) struct Sysctls {
    registered: bool,
}

impl Sysctls {
    /// Registers the tables. A failure is logged and the module goes on without the sysctls (or
    /// the part that failed): the transports work, and the module
    /// parameters set the same values.
    pub(crate) fn register() -> Self {
        // SAFETY: The tables and everything they show are C statics;
        // `Drop` removes them once, if we registered them.
        let rc = unsafe { sys::rpcrdma_rs_sysctls_register() };
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
