// SPDX-License-Identifier: GPL-2.0

//! The sunrpc client transport: `xprt_class` "rdma" (netids "rdma" and
//! "rdma6", ident 256) and its `rpc_xprt_ops`.
//!
//! The planner ([`crate::proto::plan`]) decides per RPC how the Call and
//! its Reply travel. Inline parts are copied into a pre-mapped Send
//! buffer behind the transport header, and out of pre-posted Receive
//! buffers. Everything else moves by RDMA through FRWR registrations of
//! the request's own `xdr_buf` memory: a Read chunk for NFS WRITE data, a
//! Position Zero Read chunk for other long Calls, a Write chunk for NFS
//! READ (READLINK, READDIR) data and a Reply chunk for other long Replies.
//! Every MR is invalidated (by LOCAL_INV, or by the server's Send With
//! Invalidate) before the RPC completes. Backward-direction Calls are
//! counted and dropped.
//!
//! `sunrpc.rs` holds the `extern "C"` entry points and the thin wrappers
//! over sunrpc objects; the protocol decisions here are safe code calling
//! [`crate::proto`].

mod conn;
mod sunrpc;

use core::sync::atomic::{AtomicU64, Ordering};

use kernel::prelude::*;

use crate::proto::backchannel::{self, Direction, Role};
use crate::proto::chunk::{ChunkLists, ChunkSlices};
use crate::proto::credits;
use crate::proto::header::{self, FixedHeader, Header};
use crate::proto::limits::Limits;
use crate::proto::v1;

pub(crate) use sunrpc::{RdmaXprt, Registration, IDENT};

/// Default RPC slots, and credits we ask for (`RPCRDMA_DEF_SLOT_TABLE`;
/// the default of the slot_table_entries parameter in `sys/helpers.c`).
pub(crate) const DEF_SLOTS: u32 = 128;
/// Largest RPC payload (NFS rsize/wsize): 1 MiB, moved by RDMA in chunks
/// (`RPCRDMA_MAX_DATA_SEGS` pages).
pub(crate) const MAX_PAYLOAD: usize = 1 << 20;

/// Per-transport settings, read from the module parameters once, when the
/// transport is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Config {
    /// Largest Reply we receive inline: size of every Receive buffer.
    pub(crate) inline_read: u32,
    /// Largest Call we send inline: size of every Send buffer.
    pub(crate) inline_write: u32,
    /// RPC slots, and the credits we ask for.
    pub(crate) slots: u32,
}

impl Config {
    /// Clamps raw parameter values to what the transport supports:
    /// inline sizes 1024..=65536 (`RPCRDMA_MIN_INLINE`,
    /// `RPCRDMA_MAX_INLINE`), slots 4..=256 (`RPCRDMA_MIN_SLOT_TABLE`,
    /// `RPCRDMA_MAX_SLOT_TABLE`).
    pub(crate) fn clamped(inline_read: u32, inline_write: u32, slots: u32) -> Self {
        Self {
            inline_read: inline_read.clamp(1024, 65536),
            inline_write: inline_write.clamp(1024, 65536),
            slots: slots.clamp(4, 256),
        }
    }

    /// The module parameters (`sys/helpers.c`, which refuses values out
    /// of range), clamped once more so that nothing here depends on it.
    pub(crate) fn from_params() -> Self {
        let (inline_read, inline_write, slots) = sunrpc::module_params();
        Self::clamped(inline_read, inline_write, slots)
    }
}
/// Smallest version 1 transport header (`RPCRDMA_HDRLEN_MIN`).
pub(crate) const HDRLEN_MIN: usize = 28;

/// Counters, shown by `print_stats` in rpcrdma.ko's column order.
#[derive(Default)]
pub(crate) struct Stats {
    /// Call bytes past the `xdr_buf` head copied into Send buffers.
    pub(crate) pullup_copy_count: AtomicU64,
    /// Reply bytes copied past the receive `xdr_buf` head.
    pub(crate) fixup_copy_count: AtomicU64,
    /// Calls that could not be marshalled.
    pub(crate) failed_marshal_count: AtomicU64,
    /// Replies dropped as malformed.
    pub(crate) bad_reply_count: AtomicU64,
    /// Sends that found no free Send buffer.
    pub(crate) empty_sendctx_q: AtomicU64,
    /// Backward-direction Calls dropped (no backchannel yet); not a
    /// mountstats column, reported with `pr_debug`.
    pub(crate) bcall_dropped: AtomicU64,
    /// Read list segments sent.
    pub(crate) read_chunk_count: AtomicU64,
    /// Write chunk segments sent.
    pub(crate) write_chunk_count: AtomicU64,
    /// Reply chunk segments sent.
    pub(crate) reply_chunk_count: AtomicU64,
    /// Bytes registered for chunks.
    pub(crate) total_rdma_request: AtomicU64,
    /// Bytes the server wrote into Write and Reply chunks.
    pub(crate) total_rdma_reply: AtomicU64,
    /// Calls sent as RDMA_NOMSG.
    pub(crate) nomsg_call_count: AtomicU64,
    /// MRs taken out of use after a failed or flushed operation.
    pub(crate) mrs_recycled: AtomicU64,
    /// MRs left registered when their connection went.
    pub(crate) mrs_orphaned: AtomicU64,
    /// MRs allocated.
    pub(crate) mrs_allocated: AtomicU64,
    /// MRs invalidated with LOCAL_INV.
    pub(crate) local_inv_needed: AtomicU64,
    /// Replies that had to wait for their Call's Send to complete.
    pub(crate) reply_waits_for_send: AtomicU64,
    /// Send With Invalidate of a key that was not the RPC's: the
    /// connection was closed. Not a mountstats column.
    pub(crate) bad_remote_inv: AtomicU64,
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

/// A forward Reply's transport body.
#[derive(Clone, Copy)]
pub(crate) struct ReplyBody<'a> {
    /// RDMA_NOMSG: the Reply is in the Reply chunk.
    pub(crate) nomsg: bool,
    /// The chunk lists the server returned.
    pub(crate) lists: ChunkLists<'a>,
    /// The inline part of the RPC Reply (empty for RDMA_NOMSG).
    pub(crate) payload: &'a [u8],
}

/// Outcome of decoding one received message, for the sunrpc layer.
pub(crate) enum Received<'a> {
    /// Drop it (already counted).
    Drop,
    /// A forward Reply to `xid` (network order) with `credits` granted:
    /// complete the RPC with this body, or with the errno.
    Reply {
        /// `rdma_xid` as it is in `rq_xid`.
        xid: u32,
        /// Sanitised credit grant.
        credits: u32,
        /// The body, or the errno that fails the RPC.
        payload: Result<ReplyBody<'a>, kernel::error::Error>,
    },
}

/// Decodes a received message (safe protocol logic, no sunrpc calls);
/// `max_credits` is the most credits we asked for.
pub(crate) fn classify_received<'a>(
    msg: &'a [u8],
    stats: &Stats,
    max_credits: u32,
) -> Received<'a> {
    let limits = Limits::DEFAULT;
    let hdr = match header::decode(msg, &limits) {
        Ok(hdr) => hdr,
        Err(err) => {
            rdebug!("dropping bad reply: {:?}\n", err);
            bump(&stats.bad_reply_count, 1);
            return Received::Drop;
        }
    };
    match backchannel::classify(Role::Client, &hdr) {
        Ok(Direction::ForwardReply) => {}
        Ok(Direction::BackwardCall) => {
            bump(&stats.bcall_dropped, 1);
            rdebug!("backward Call dropped (no backchannel)\n");
            return Received::Drop;
        }
        Ok(_) | Err(_) => {
            bump(&stats.bad_reply_count, 1);
            return Received::Drop;
        }
    }
    let fixed = hdr.fixed();
    let payload = match hdr {
        Header::V1(h) => match h.body {
            v1::Body::Msg(lists) => Ok(ReplyBody {
                nomsg: false,
                lists,
                payload: h.payload,
            }),
            v1::Body::Nomsg(lists) => Ok(ReplyBody {
                nomsg: true,
                lists,
                payload: &[],
            }),
            v1::Body::Error(err) => {
                rdebug!("RDMA_ERROR {:?} for xid {:#x}\n", err, fixed.xid);
                Err(kernel::error::code::EIO)
            }
        },
        // We only send version 1; a version 2 Reply is a protocol error.
        Header::V2(_) => {
            bump(&stats.bad_reply_count, 1);
            return Received::Drop;
        }
    };
    Received::Reply {
        xid: fixed.xid.to_be(),
        credits: credits::sanitize(fixed.credits, max_credits),
        payload,
    }
}

/// Writes the header for the Call with `xid` (as in `rq_xid`) into `buf`,
/// asking for `credits`; RDMA_NOMSG when `nomsg`. Returns its length.
pub(crate) fn encode_call_header(
    buf: &mut [u8],
    xid: u32,
    credits: u32,
    nomsg: bool,
    chunks: ChunkSlices<'_>,
) -> Option<usize> {
    let fixed = FixedHeader {
        xid: u32::from_be(xid),
        vers: v1::VERSION,
        credits,
    };
    let msg = if nomsg {
        v1::Message::Nomsg(chunks)
    } else {
        v1::Message::Msg(chunks)
    };
    v1::encode(buf, &fixed, &msg).ok()
}

#[kunit_tests(rpcrdma_rs_transport)]
mod tests {
    use super::*;

    #[test]
    fn call_header_round_trips() {
        let mut buf = [0u8; 64];
        let xid = 0x1234_5678u32.to_be();
        let n = encode_call_header(&mut buf, xid, DEF_SLOTS, false, ChunkSlices::NONE).unwrap_or(0);
        assert_eq!(n, 28);
        assert_eq!(&buf[..4], &[0x12, 0x34, 0x56, 0x78]);
    }

    #[test]
    fn reply_is_routed() {
        let stats = Stats::default();
        // RDMA_MSG, credits 200 (capped), empty lists, then an RPC Reply.
        let mut msg = [0u8; 36];
        let words: [u32; 9] = [0xabcd, 1, 200, 0, 0, 0, 0, 0xabcd, 1];
        for (i, w) in words.iter().enumerate() {
            msg[i * 4..i * 4 + 4].copy_from_slice(&w.to_be_bytes());
        }
        // A KUnit assertion fails the case; a panic would oops the kernel.
        let got = classify_received(&msg, &stats, DEF_SLOTS);
        assert!(matches!(got, Received::Reply { .. }));
        if let Received::Reply {
            xid,
            credits,
            payload,
        } = got
        {
            assert_eq!(xid, 0xabcdu32.to_be());
            assert_eq!(credits, DEF_SLOTS);
            assert_eq!(payload.map(|p| p.payload.len()), Ok(8));
        }
        // A backward Call is dropped and counted.
        msg[32..36].copy_from_slice(&0u32.to_be_bytes());
        assert!(matches!(
            classify_received(&msg, &stats, DEF_SLOTS),
            Received::Drop
        ));
        assert_eq!(stats.bcall_dropped.load(Ordering::Relaxed), 1);
        // RDMA_ERROR (ERR_CHUNK) fails the RPC it names with EIO.
        let mut err = [0u8; 20];
        for (i, w) in [0xabcdu32, 1, 0, 4, 2].iter().enumerate() {
            err[i * 4..i * 4 + 4].copy_from_slice(&w.to_be_bytes());
        }
        let got = classify_received(&err, &stats, DEF_SLOTS);
        assert!(matches!(got, Received::Reply { .. }));
        if let Received::Reply {
            credits, payload, ..
        } = got
        {
            assert_eq!(credits, 1);
            assert!(payload.is_err());
        }
        // Module parameters are clamped.
        assert_eq!(
            Config::clamped(0, 1 << 20, 1000),
            Config {
                inline_read: 1024,
                inline_write: 65536,
                slots: 256
            }
        );
        // Garbage is dropped and counted.
        assert!(matches!(
            classify_received(&msg[..10], &stats, DEF_SLOTS),
            Received::Drop
        ));
        assert_eq!(stats.bad_reply_count.load(Ordering::Relaxed), 1);
    }
}
