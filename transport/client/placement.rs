// SPDX-License-Identifier: GPL-2.0

//! Reply placement: moving a Reply's payload into the request's receive
//! buffer (inline, or already written through the Write or Reply chunk),
//! and completing the RPC.

use kernel::prelude::*;

use super::request::ReqState;
use super::state::RdmaXprt;
use super::Stats;
use crate::proto::plan::{self, ReplyShape};
use crate::proto::reply::ReplyBody;
use crate::sunrpc::{trace, PinnedRqst};

/// A Reply checked against what its RPC offered, to be placed: decided
/// when the Reply arrives and kept while the RPC's MRs are invalidated,
/// so that the message is decoded once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Checked {
    shape: ReplyShape,
    /// Where the inline payload is in the Receive buffer (of at most
    /// 64 KiB, behind a header of at least 28 bytes), and its length.
    at: u16,
    len: u16,
}

/// What a received Reply does to its RPC, decided when it arrives.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Verdict {
    /// Complete it with the Reply, placed as checked.
    Place(Checked),
    /// Fail it with EIO.
    Fail,
    /// The server refused the version 2 probe (ERR_VERS): send the RPC
    /// again, as version 1, on the same connection.
    Resend,
}

impl RdmaXprt {
    /// Checks a Reply's chunk lists against what its RPC offered; `msg`
    /// is the message received, `body` its decoded body. `None`: the Reply
    /// fails its RPC.
    pub(super) fn check_reply(
        &self,
        msg: &[u8],
        body: ReplyBody<'_>,
        st: &ReqState,
    ) -> Option<Checked> {
        match plan::check_reply(body.nomsg, &body.lists, &st.offered()) {
            Ok(shape) => {
                // The payload is the end of the message.
                let len = body.payload.len();
                let at = if len == 0 {
                    0
                } else {
                    msg.len().checked_sub(len)?
                };
                Some(Checked {
                    shape,
                    at: u16::try_from(at).ok()?,
                    len: u16::try_from(len).ok()?,
                })
            }
            Err(err) => {
                rdebug!("bad reply: {:?}\n", err);
                self.stats.bad_reply_count.add(1);
                None
            }
        }
    }

    /// Places a Reply, as [`RdmaXprt::check_reply`] found it in the
    /// Receive buffer `buf`, in the request's receive buffer and completes
    /// the RPC.
    pub(super) fn complete(&self, mut rqst: PinnedRqst, reply: Verdict, buf: &[u8]) {
        let reply = match reply {
            Verdict::Place(checked) => Some(checked),
            Verdict::Fail => None,
            Verdict::Resend => {
                rqst.complete_resend();
                return;
            }
        };
        let result = reply.ok_or(EIO).and_then(|checked| {
            let at = usize::from(checked.at);
            let payload = buf.get(at..at + usize::from(checked.len)).ok_or(EIO)?;
            match checked.shape {
                ReplyShape::Inline => copy_to_rcv_buf(&mut rqst, payload, &self.stats),
                ReplyShape::Write { written } => {
                    self.stats.total_rdma_reply.add(u64::from(written));
                    write_chunk_fixup(&mut rqst, payload, written, &self.stats)
                }
                ReplyShape::Reply { written } => {
                    self.stats.total_rdma_reply.add(u64::from(written));
                    Ok(written)
                }
            }
        });
        rqst.complete(result);
    }
}

/// Lays out a Reply whose result data came in the Write chunk
/// ([`plan::write_fixup`]); returns its length.
fn write_chunk_fixup(
    rqst: &mut PinnedRqst,
    payload: &[u8],
    written: u32,
    stats: &Stats,
) -> Result<u32> {
    let prv = rqst.private_buf();
    let head = prv.head_len();
    let inline = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    let f = plan::write_fixup(head, prv.page_len(), inline, written);
    if let Some(h) = f.trim_head {
        rqst.trim_head(h);
    }
    let (first, rest) = payload.split_at(f.head_copy.min(inline) as usize);
    rqst.write(0, first).map_err(|_| EIO)?;
    if !rest.is_empty() {
        rqst.write(f.rest_offset, rest).map_err(|_| EIO)?;
        stats.fixup_copy_count.add(rest.len() as u64);
        trace_fixup(rqst, rest.len());
    }
    let room = rqst.private_buf().room();
    Ok(u32::try_from(u64::from(f.total).min(room)).unwrap_or(u32::MAX))
}

/// Copies a Reply into the request's private receive buffer, head then
/// pages then tail, as a byte stream transport does; returns the bytes
/// copied.
fn copy_to_rcv_buf(rqst: &mut PinnedRqst, payload: &[u8], stats: &Stats) -> Result<u32> {
    let room = rqst.private_buf().room();
    let len = payload
        .len()
        .min(usize::try_from(room).unwrap_or(usize::MAX));
    rqst.write(0, payload.get(..len).unwrap_or(&[]))
        .map_err(|_| EIO)?;
    // Bytes that landed past the head: what rpcrdma.ko's fixup copies.
    let head = rqst.private_buf().head_len() as usize;
    let fixup = len.saturating_sub(head);
    stats.fixup_copy_count.add(fixup as u64);
    if fixup > 0 {
        trace_fixup(rqst, fixup);
    }
    u32::try_from(len).map_err(|_| EIO)
}

/// `xprtrdma_fixup` of `fixup` bytes copied past the head.
fn trace_fixup(rqst: &PinnedRqst, fixup: usize) {
    let xdr = || {
        let b = rqst.private_buf();
        [b.head_len(), b.page_len(), b.tail_len()]
    };
    trace::xprtrdma_fixup(|| rqst.trace_task(), fixup as u64, xdr);
}
