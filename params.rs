// SPDX-License-Identifier: GPL-2.0

//! The tunables: C variables in `sys/sysctl.c`, each both a module
//! parameter and one of rpcrdma.ko's sysctls (see
//! `Documentation/admin-guide.rst`): read here, once per transport or
//! connect.

use crate::sys;

/// `max_inline_read`, `max_inline_write` and `slot_table_entries`.
pub(crate) fn transport() -> (u32, u32, u32) {
    let (mut inline_read, mut inline_write, mut slots) = (0, 0, 0);
    // SAFETY: The helper only writes the three integers.
    unsafe { sys::rpcrdma_rs_params(&mut inline_read, &mut inline_write, &mut slots) };
    (inline_read, inline_write, slots)
}

/// `svc_max_requests` and `svc_max_inline`: the server's credits and
/// inline size.
pub(crate) fn server() -> (u32, u32) {
    let (mut requests, mut inline) = (0, 0);
    // SAFETY: The helper only writes the two integers.
    unsafe { sys::rpcrdma_rs_svc_params(&mut requests, &mut inline) };
    (requests, inline)
}

/// `max_version`: the highest RPC-over-RDMA version the client offers
/// on a new connection (1 or 2), read at each connect.
pub(crate) fn max_version() -> u32 {
    // SAFETY: Reads a module parameter; no preconditions.
    unsafe { sys::rpcrdma_rs_max_version() }
}

/// `fault_inject` bit: fail the MR pool allocation at connect, after the
/// QP exists.
pub(crate) const FAULT_MR_POOL: u32 = 1;

/// `fault_inject` bit: fail posting the LOCAL_INVs of a Reply's MRs.
pub(crate) const FAULT_LOCAL_INV: u32 = 2;

/// `fault_inject` bit, once: move the QP to the error state before the
/// next Call's Send, telling nobody.
pub(crate) const FAULT_QP_ERROR: u32 = 4;

/// `fault_inject` bit: hold each forward Call for a second before it is
/// marshalled, so that a Reply sent ahead of it finds it not sent.
pub(crate) const FAULT_SLOW_CALL: u32 = 8;

/// Whether any of the test faults `bits` of `fault_inject` is switched on.
pub(crate) fn injected(bits: u32) -> bool {
    // SAFETY: Reads a module parameter; no preconditions.
    unsafe { sys::rpcrdma_rs_fault(bits) }
}

/// Whether the test fault `bit` of `fault_inject` was on; switches it off.
pub(crate) fn injected_once(bit: u32) -> bool {
    // SAFETY: Updates a module parameter atomically; no preconditions.
    unsafe { sys::rpcrdma_rs_fault_take(bit) }
}
