// SPDX-License-Identifier: GPL-2.0

//! RDMA Reads an nfsd thread posts and waits for.
//!
//! The thread owns the memory, the request's pages for a Read chunk.
//! Waiting for the Reads to complete before the Call goes to nfsd is what
//! keeps those pages alive and untouched while the device fills them. A
//! flushed operation completes too, so a lost connection never leaves a
//! thread waiting. (A Reply's Writes are not waited for: they go with its
//! Send, see `send`.)

use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Full, Relaxed};
use kernel::sync::Completion;

use super::conn::SvcConn;
use crate::rdma::{CqEntry, CqHandler, RwCtx, Wc};
use crate::sys;

/// Counts the completions of one batch of operations.
#[pin_data]
struct IoWait {
    cqe: CqEntry<IoWait>,
    /// Completions still to come, plus one held by the poster.
    pending: Atomic<u32>,
    /// Status plus one of a failed operation, or zero.
    failed: Atomic<u32>,
    #[pin]
    done: Completion,
}

crate::impl_has_cq_entry!(IoWait, 0, cqe);

impl IoWait {
    fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            cqe: CqEntry::new(),
            pending: Atomic::new(1),
            failed: Atomic::new(0),
            done <- Completion::new(),
        })
    }

    fn finish(&self, n: u32) {
        if self.pending.fetch_sub(n, Full) == n {
            self.done.complete_all();
        }
    }
}

impl CqHandler for IoWait {
    fn done(&self, wc: &Wc<'_>) {
        // The first error is the one to report: the operations after it
        // complete flushed. Completions of one CQ run one at a time.
        if !wc.ok() && (!wc.flushed() || self.failed.load(Relaxed) == 0) {
            self.failed.store(wc.status().saturating_add(1), Relaxed);
        }
        // Nothing of `self` is touched after this: the waiter may return.
        self.finish(1);
    }
}

/// Posts `ctxs` on `conn`'s QP and waits until every one completed.
/// Fails if one could not be posted or did not succeed; the connection is
/// then closed, since its QP is in error or its peer misbehaved.
pub(super) fn run(conn: &SvcConn, ctxs: &mut [RwCtx]) -> Result {
    if ctxs.is_empty() {
        return Ok(());
    }
    let wrs = RwCtx::total_wrs(ctxs);
    conn.get_wrs(wrs)?;
    pin_init::stack_pin_init!(let wait = IoWait::new());
    let mut res = Ok(());
    for ctx in ctxs.iter_mut() {
        wait.pending.fetch_add(1, Relaxed);
        // SAFETY: `ctx` is not dropped or posted again, and `wait` (on
        // this stack frame) stays, until the completion ran: this
        // function waits for every posted context before returning, and
        // `ctxs` outlives the call.
        if let Err(e) = unsafe { ctx.post(&wait.cqe) } {
            wait.pending.fetch_sub(1, Relaxed);
            res = Err(e);
            break;
        }
    }
    wait.finish(1);
    wait.done.wait_for_completion();

    conn.put_wrs(wrs);
    let failed = wait.failed.load(Relaxed);
    if res.is_err() || failed != 0 {
        let status = failed.saturating_sub(1);
        // Flushed: the connection is already going (its peer left, its
        // device is being removed), as a flushed Send or Receive says
        // nothing either.
        if failed == sys::ib_wc_status_IB_WC_WR_FLUSH_ERR + 1 {
            rdebug!("server: RDMA Read or Write flushed\n");
        } else {
            rwarn!("server: RDMA Read or Write failed, status {}\n", status);
        }
        conn.close();
        return Err(EIO);
    }
    res
}
