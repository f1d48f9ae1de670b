// SPDX-License-Identifier: GPL-2.0

//! Sending: posting on the ring of pre-mapped Send buffers, the RPC pages
//! a Send gathers, and the Send completion, which tells when a buffer
//! (and a Reply waiting for its Call's Send) is free.

use kernel::prelude::*;

use super::connection::{Ep, MrPool, RpcMrs, RpcPosted, Sender, BC_SENDS};
use crate::proto::queue::SendSignals;
use crate::rdma::{HeldPages, MappedPages, SendOwner, SendPosted, Wc};
use crate::sunrpc::{trace, SendRqst};

pub(crate) use crate::rdma::SendError;

/// A signalled Send completed, or any Send failed.
impl SendOwner for Sender {
    fn sent(&self, seq: u64, wc: &Wc<'_>) {
        trace::xprtrdma_wc_send(wc, seq);
        if !wc.ok() {
            self.shared.wr_failed("send", wc);
        }
        // This completion retires every Send posted before it, too.
        self.sends_completed_to(seq);
    }
}

impl Ep {
    /// Number the next Send gets; see [`Shared::sends_completed`].
    pub(crate) fn next_send_seq(&self) -> u64 {
        self.tx.as_ref().map_or(1, |tx| tx.next_seq())
    }

    /// Maps `pages` of an RPC for a Send; see [`Ep::send`]. The mapping
    /// keeps their hold until the Send's completion drops it.
    pub(crate) fn map_pages(&self, pages: HeldPages<'_>) -> Result<MappedPages> {
        MappedPages::map_held(self.dev.as_ref().ok_or(ENOTCONN)?, pages)
    }

    /// Fills the next free Send buffer with `fill` and posts it, after the
    /// REG_MRs of `mrs`, MRs of `pool` registered and not yet posted;
    /// moves them, posted, to `posted` (as `SendRing::post`: not sent,
    /// they stay in `mrs` unless the post failed). `fill` returns `(split, len)`: the Send
    /// gathers the first `split` bytes of the buffer, then the `mapped`
    /// pages, then the buffer up to `len`; or `None` if the message does
    /// not fit. A Send with mapped pages is signalled, and they are
    /// unmapped when it completes (posted, `mapped` is left empty). The last [`BC_SENDS`] free buffers are
    /// left to backchannel Replies.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn send(
        &self,
        pool: &MrPool,
        mrs: &mut RpcMrs,
        posted: &mut RpcPosted,
        signals: &mut SendSignals,
        mapped: &mut Option<MappedPages>,
        rqst: &SendRqst<'_>,
        fill: impl FnOnce(&mut [u8]) -> Option<(usize, usize)>,
    ) -> Result<(), SendError> {
        let chained = mrs.len() as u32;
        for mr in mrs.as_slice() {
            trace::xprtrdma_mr(
                trace::MrEvent::FastReg,
                || Some(rqst.trace_task()),
                || pool.registered(mr),
            );
        }
        self.post_send(
            Some(pool),
            mrs,
            posted,
            Some(signals),
            chained,
            mapped,
            u64::from(BC_SENDS),
            rqst,
            fill,
        )
    }

    /// Sends the backchannel Reply `rqst` that `fill` writes (see
    /// [`Ep::send`]), from any free Send buffer, the reserved ones
    /// included.
    pub(crate) fn send_backward(
        &self,
        rqst: &SendRqst<'_>,
        fill: impl FnOnce(&mut [u8]) -> Option<(usize, usize)>,
    ) -> Result<(), SendError> {
        let (mut none, mut posted) = (RpcMrs::new(), RpcPosted::new());
        // The sender's, as we hold XPRT_LOCKED.
        let mut scratch = self.scratch.try_borrow_mut();
        let signals = scratch.as_mut().map(|s| &mut s.signals);
        self.post_send(
            None,
            &mut none,
            &mut posted,
            signals,
            0,
            &mut None,
            0,
            rqst,
            fill,
        )
    }

    /// [`Ep::send`], leaving `keep` Send buffers free.
    #[allow(clippy::too_many_arguments)]
    fn post_send(
        &self,
        pool: Option<&MrPool>,
        mrs: &mut RpcMrs,
        posted: &mut RpcPosted,
        signals: Option<&mut SendSignals>,
        chained: u32,
        mapped: &mut Option<MappedPages>,
        keep: u64,
        rqst: &SendRqst<'_>,
        fill: impl FnOnce(&mut [u8]) -> Option<(usize, usize)>,
    ) -> Result<(), SendError> {
        let Some(tx) = self.tx.as_ref() else {
            return Err(SendError::Post);
        };
        let signal = |awaited: bool| {
            // The policy is the sender's, and we hold XPRT_LOCKED; without
            // it (a busy cell: never) the Send is signalled, always safe.
            signals.is_none_or(|s| s.next(chained, awaited))
        };
        // Before the post, as rpcrdma.ko (a backchannel Reply's too: its
        // task has no client, -1): the completion may be handled before
        // the post returns. The Send's number stands for rpcrdma.ko's
        // completion id.
        let posting = |p: &SendPosted| {
            let cq_id = || tx.cq_id();
            trace::xprtrdma_post_send(cq_id, p.seq, || rqst.trace_task(), p.sges, p.signalled);
        };
        let failed = |e: Error| {
            trace::xprtrdma_post_send_err(|| tx.cq_id(), || rqst.trace_task(), e.to_errno());
        };
        tx.post(
            keep, pool, mrs, posted, mapped, signal, fill, posting, failed,
        )
        .map(drop)
    }
}
