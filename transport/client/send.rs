// SPDX-License-Identifier: GPL-2.0

//! Sending: posting on the ring of pre-mapped Send buffers, the RPC pages
//! a Send gathers, and the Send completion, which tells when a buffer
//! (and a Reply waiting for its Call's Send) is free.

use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Relaxed, Release};

use super::connection::{Ep, SendCtx, BC_SENDS};
use crate::rdma::{CqHandler, HeldPages, MappedPages, SendChain, Wc, MAX_MAPPED_PAGES};
use crate::sunrpc::{trace, SendRqst};
use crate::sys;

/// A signalled Send completed, or any Send failed.
impl CqHandler for SendCtx {
    fn done(&self, wc: &Wc<'_>) {
        let shared = &self.shared;
        // The Send completed, and its number is not yet published, so the
        // mapping is ours; the device is done with it.
        drop(self.mapped.take());
        if !wc.ok() && !wc.flushed() {
            rwarn!("send failed, status {}\n", wc.status());
            shared.xprt().force_disconnect();
        }
        // This completion retires every Send posted before it, too.
        shared.sends_completed_to(self.seq.load(Acquire));
    }
}

/// Result of trying to marshal and Send one RPC Call.
pub(crate) enum SendError {
    /// No Send buffer free.
    NoBuffer,
    /// The message does not fit the inline threshold.
    TooBig,
    /// Posting failed: the connection is unusable.
    Post,
}

impl Ep {
    /// Number the next Send gets; see [`Shared::send_completed`].
    pub(crate) fn next_send_seq(&self) -> u64 {
        self.sends_posted.load(Relaxed).wrapping_add(1)
    }

    /// Maps `pages` of an RPC for a Send; see [`Ep::send`]. The mapping
    /// keeps their hold until the Send's completion drops it.
    pub(crate) fn map_pages(&self, pages: HeldPages<'_>) -> Result<MappedPages> {
        MappedPages::map_held(self.dev.as_ref().ok_or(ENOTCONN)?, pages)
    }

    /// Fills the next free Send buffer with `fill` and posts it, after the
    /// `chained` work requests of `before`. `fill` returns `(split, len)`:
    /// the Send gathers the first `split` bytes of the buffer, then the
    /// `mapped` pages, then the buffer up to `len`; or `None` if the
    /// message does not fit. A Send with mapped pages is signalled, and
    /// they are unmapped when it completes. The last [`BC_SENDS`] free
    /// buffers are left to backchannel Replies.
    pub(crate) fn send(
        &self,
        before: &SendChain,
        chained: u32,
        mapped: Option<MappedPages>,
        rqst: &SendRqst<'_>,
        fill: impl FnOnce(&mut [u8]) -> Option<(usize, usize)>,
    ) -> Result<(), SendError> {
        self.post_send(
            before,
            chained,
            mapped,
            u64::from(BC_SENDS),
            Some(rqst),
            fill,
        )
    }

    /// Sends a backchannel Reply that `fill` writes (see [`Ep::send`]),
    /// from any free Send buffer, the reserved ones included.
    pub(crate) fn send_backward(
        &self,
        fill: impl FnOnce(&mut [u8]) -> Option<(usize, usize)>,
    ) -> Result<(), SendError> {
        self.post_send(&SendChain::new(), 0, None, 0, None, fill)
    }

    /// [`Ep::send`], leaving `keep` Send buffers free.
    fn post_send(
        &self,
        before: &SendChain,
        chained: u32,
        mapped: Option<MappedPages>,
        keep: u64,
        rqst: Option<&SendRqst<'_>>,
        fill: impl FnOnce(&mut [u8]) -> Option<(usize, usize)>,
    ) -> Result<(), SendError> {
        let n = self.tx.len() as u64;
        let posted = self.sends_posted.load(Relaxed);
        if n == 0 {
            return Err(SendError::Post);
        }
        if posted.wrapping_sub(self.shared.sends_completed()) >= n.saturating_sub(keep) {
            return Err(SendError::NoBuffer);
        }
        let seq = posted.wrapping_add(1);
        let idx = usize::try_from(posted % n).map_err(|_| SendError::Post)?;
        let ctx = self.tx.get(idx).ok_or(SendError::Post)?;
        // Send `seq - n`, the last one in this context, has completed: the
        // sender (us, under XPRT_LOCKED) owns the buffer and the mapping.
        let Some(mut buf) = ctx.buf.try_borrow_mut() else {
            return Err(SendError::Post);
        };
        let Some((split, len)) = fill(buf.as_mut_slice()) else {
            return Err(SendError::TooBig);
        };
        let split = split.min(len);
        buf.sync_for_device(len);
        let qp = self
            .id
            .as_ref()
            .and_then(|id| id.qp())
            .ok_or(SendError::Post)?;
        let lkey = self.shared.lkey.load(Relaxed);
        let mut sges = [sys::ib_sge::default(); MAX_MAPPED_PAGES + 2];
        let mut k = 0;
        let first = core::iter::once(buf.sge(0, split, lkey));
        let pages = mapped.iter().flat_map(|m| m.sges(lkey));
        let last = core::iter::once(buf.sge(split, len - split, lkey));
        let parts =
            Iterator::chain(Iterator::chain(first, pages), last).filter(|sge| sge.length > 0);
        for (slot, sge) in sges.iter_mut().zip(parts) {
            *slot = sge;
            k += 1;
        }
        let awaited = mapped.is_some();
        // The policy is the sender's, and we hold XPRT_LOCKED.
        let Some(mut signals) = self.signals.try_borrow_mut() else {
            return Err(SendError::Post);
        };
        let signalled = signals.next(chained, awaited);
        drop(signals);
        ctx.seq.store(seq, Release);
        // The context's previous Send completed (checked against
        // `sends_completed` above), so its mapping slot is the sender's
        // until this Send is posted; a mapping left in it is of a Send
        // that completed.
        drop(ctx.mapped.take());
        if let Some(mapped) = mapped {
            if ctx.mapped.put(mapped).is_err() {
                return Err(SendError::Post);
            }
        }
        // The CPU is done with the buffer; the device reads it until the
        // Send completes.
        drop(buf);
        // SAFETY: Context, buffer and mapped pages stay until the Send
        // completes (`SendCtx` invariant, `map_pages` contract); the
        // chain's WRs belong to the caller's MRs.
        let posted = unsafe {
            qp.post_send_after(
                ctx.cqe.as_ptr(),
                sges.get_mut(..k).unwrap_or(&mut []),
                signalled,
                before,
            )
        };
        if posted.is_err() {
            // Nothing was posted: the slot is still ours.
            drop(ctx.mapped.take());
            return Err(SendError::Post);
        }
        self.sends_posted.store(seq, Relaxed);
        if let Some(rqst) = rqst {
            // The Send's number stands for rpcrdma.ko's completion id.
            let cq_id = || qp.send_cq_id();
            trace::xprtrdma_post_send(cq_id, seq, || rqst.trace_task(), k, signalled);
        }
        Ok(())
    }
}
