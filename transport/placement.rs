// SPDX-License-Identifier: GPL-2.0

//! Reply placement: moving a Reply's payload into the request's receive
//! buffer (inline, or already written through the Write or Reply chunk),
//! and completing the RPC.

use core::ffi::{c_int, c_uint};
use core::ptr::NonNull;

use kernel::prelude::*;

use super::request::ReqState;
use super::xprt::RdmaXprt;
use super::Stats;
use crate::proto::plan::{self, ReplyShape};
use crate::proto::reply::ReplyBody;
use crate::sys;

impl RdmaXprt {
    /// Places a Reply in the request's receive buffer and completes it.
    ///
    /// # Safety
    ///
    /// `rqst` is pinned; this unpins it.
    pub(super) unsafe fn complete(
        &self,
        rqst: NonNull<sys::rpc_rqst>,
        payload: Result<ReplyBody<'_>, Error>,
        st: &ReqState,
    ) {
        let status = match payload {
            Ok(body) => match plan::check_reply(body.nomsg, &body.lists, &st.offered()) {
                Ok(ReplyShape::Inline) => {
                    // SAFETY: The request is pinned, so its buffer stays.
                    unsafe { copy_to_rcv_buf(rqst, body.payload, &self.stats) }
                }
                Ok(ReplyShape::Write { written }) => {
                    self.stats.total_rdma_reply.add(u64::from(written));
                    // SAFETY: As above.
                    unsafe { write_chunk_fixup(rqst, body.payload, written, &self.stats) }
                }
                Ok(ReplyShape::Reply { written }) => {
                    self.stats.total_rdma_reply.add(u64::from(written));
                    c_int::try_from(written).unwrap_or(EIO.to_errno())
                }
                Err(err) => {
                    rdebug!("bad reply: {:?}\n", err);
                    self.stats.bad_reply_count.add(1);
                    EIO.to_errno()
                }
            },
            Err(err) => err.to_errno(),
        };
        let xprt = self.raw();
        // SAFETY: The request is pinned; completing and unpinning need
        // `queue_lock`.
        unsafe {
            sys::rpcrdma_rs_spin_lock(&raw mut (*xprt).queue_lock);
            sys::xprt_complete_rqst((*rqst.as_ptr()).rq_task, status);
            sys::xprt_unpin_rqst(rqst.as_ptr());
            sys::rpcrdma_rs_spin_unlock(&raw mut (*xprt).queue_lock);
        }
    }
}

/// Lays out a Reply whose result data came in the Write chunk
/// ([`plan::write_fixup`]); returns its length.
///
/// # Safety
///
/// `rqst` must be pinned.
unsafe fn write_chunk_fixup(
    rqst: NonNull<sys::rpc_rqst>,
    payload: &[u8],
    written: u32,
    stats: &Stats,
) -> c_int {
    let r = rqst.as_ptr();
    // SAFETY: The caller keeps `rqst` alive; nobody else touches the
    // buffers of a request being completed.
    unsafe {
        let prv = &raw mut (*r).rq_private_buf;
        let rcv = &raw mut (*r).rq_rcv_buf;
        let head = u32::try_from((*prv).head[0].iov_len).unwrap_or(u32::MAX);
        let inline = u32::try_from(payload.len()).unwrap_or(u32::MAX);
        let f = plan::write_fixup(head, (*prv).page_len, inline, written);
        if let Some(h) = f.trim_head {
            let delta = head.saturating_sub(h);
            for b in [prv, rcv] {
                (*b).head[0].iov_len = h as usize;
                (*b).buflen = (*b).buflen.saturating_sub(delta);
            }
        }
        let (first, rest) = payload.split_at(f.head_copy.min(inline) as usize);
        if sys::rpcrdma_rs_write_xdr_buf(
            prv,
            0,
            first.as_ptr().cast_mut().cast(),
            first.len() as c_uint,
        ) != 0
        {
            return EIO.to_errno();
        }
        if !rest.is_empty() {
            let rc = sys::rpcrdma_rs_write_xdr_buf(
                prv,
                f.rest_offset,
                rest.as_ptr().cast_mut().cast(),
                rest.len() as c_uint,
            );
            if rc != 0 {
                return EIO.to_errno();
            }
            stats.fixup_copy_count.add(rest.len() as u64);
        }
        let room =
            ((*prv).head[0].iov_len + (*prv).page_len as usize + (*prv).tail[0].iov_len) as u64;
        c_int::try_from(u64::from(f.total).min(room)).unwrap_or(c_int::MAX)
    }
}

/// Copies a Reply into the request's private receive buffer, head then
/// pages then tail, as a byte stream transport does; returns the bytes
/// copied.
///
/// # Safety
///
/// `rqst` must be pinned (or otherwise kept alive).
unsafe fn copy_to_rcv_buf(rqst: NonNull<sys::rpc_rqst>, payload: &[u8], stats: &Stats) -> c_int {
    // SAFETY: The caller keeps `rqst` alive; the buffer layout is fixed
    // once the request is queued for receive.
    let buf = unsafe { &raw const (*rqst.as_ptr()).rq_private_buf };
    // SAFETY: `buf` is valid; reading the three lengths.
    let room =
        unsafe { (*buf).head[0].iov_len + (*buf).page_len as usize + (*buf).tail[0].iov_len };
    let len = payload.len().min(room);
    let Ok(len32) = c_uint::try_from(len) else {
        return EIO.to_errno();
    };
    // SAFETY: `len` fits the buffer's head, pages and tail; `payload` has
    // at least `len` bytes; the helper only reads from it.
    let rc =
        unsafe { sys::rpcrdma_rs_write_xdr_buf(buf, 0, payload.as_ptr().cast_mut().cast(), len32) };
    if rc != 0 {
        return EIO.to_errno();
    }
    // Bytes that landed past the head: what rpcrdma.ko's fixup copies.
    // SAFETY: `buf` is valid.
    let head = unsafe { (*buf).head[0].iov_len };
    stats.fixup_copy_count.add(len.saturating_sub(head) as u64);
    c_int::try_from(len).unwrap_or(c_int::MAX)
}
