// SPDX-License-Identifier: GPL-2.0

//! The sunrpc client transport: `xprt_class` "rdma" (netids "rdma" and
//! "rdma6", ident 256) and its `rpc_xprt_ops`.
//!
//! Every RPC travels inline: the Call is copied behind an RDMA_MSG header
//! into a pre-mapped Send buffer, and the Reply arrives in a pre-posted
//! Receive buffer and is copied into the request's receive `xdr_buf`.
//! `max_payload` is sized so that NFS READ and WRITE fit the default
//! 4 KiB inline thresholds. Backward-direction Calls are counted and
//! dropped.
//!
//! `sunrpc.rs` holds the `extern "C"` entry points and the thin wrappers
//! over sunrpc objects; the protocol decisions here are safe code calling
//! [`crate::proto`].

mod conn;
mod sunrpc;

use core::sync::atomic::{AtomicU64, Ordering};

use kernel::prelude::*;

use crate::proto::backchannel::{self, Direction, Role};
use crate::proto::chunk::ChunkSlices;
use crate::proto::credits;
use crate::proto::header::{self, FixedHeader, Header};
use crate::proto::limits::Limits;
use crate::proto::v1;

pub(crate) use sunrpc::{RdmaXprt, Registration, IDENT};

/// Most RPC slots, and credits we ask for (`RPCRDMA_DEF_SLOT_TABLE`).
pub(crate) const MAX_SLOTS: u32 = 128;
/// Our inline send and receive size, and the size of every buffer
/// (`RPCRDMA_DEF_INLINE`).
pub(crate) const INLINE_SIZE: usize = 4096;
/// Largest RPC payload (NFS rsize/wsize): half the inline size leaves room
/// for the RPC, NFS COMPOUND and transport headers, and is a power of two
/// as the NFS client wants.
pub(crate) const MAX_PAYLOAD: usize = INLINE_SIZE / 2;
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
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

/// Outcome of decoding one received message, for the sunrpc layer.
pub(crate) enum Received<'a> {
    /// Drop it (already counted).
    Drop,
    /// A forward Reply to `xid` (network order) with `credits` granted:
    /// complete the RPC with this payload, or with the errno.
    Reply {
        /// `rdma_xid` as it is in `rq_xid`.
        xid: u32,
        /// Sanitised credit grant.
        credits: u32,
        /// RPC message, or the errno that fails the RPC.
        payload: Result<&'a [u8], kernel::error::Error>,
    },
}

/// Decodes a received message (safe protocol logic, no sunrpc calls).
pub(crate) fn classify_received<'a>(msg: &'a [u8], stats: &Stats) -> Received<'a> {
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
            // We never offer chunks, so a Reply must come inline.
            v1::Body::Msg(lists) if lists.is_empty() => Ok(h.payload),
            v1::Body::Error(err) => {
                rdebug!("RDMA_ERROR {:?} for xid {:#x}\n", err, fixed.xid);
                Err(kernel::error::code::EIO)
            }
            v1::Body::Msg(_) | v1::Body::Nomsg(_) => {
                bump(&stats.bad_reply_count, 1);
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
        credits: credits::sanitize(fixed.credits, MAX_SLOTS),
        payload,
    }
}

/// Writes the RDMA_MSG header for the Call with `xid` (as in `rq_xid`)
/// into `buf`; returns its length.
pub(crate) fn encode_call_header(buf: &mut [u8], xid: u32) -> Option<usize> {
    let fixed = FixedHeader {
        xid: u32::from_be(xid),
        vers: v1::VERSION,
        credits: MAX_SLOTS,
    };
    v1::encode(buf, &fixed, &v1::Message::Msg(ChunkSlices::NONE)).ok()
}

#[kunit_tests(rpcrdma_rs_transport)]
mod tests {
    use super::*;

    #[test]
    fn call_header_round_trips() {
        let mut buf = [0u8; 64];
        let xid = 0x1234_5678u32.to_be();
        let n = encode_call_header(&mut buf, xid).unwrap_or(0);
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
        let got = classify_received(&msg, &stats);
        assert!(matches!(got, Received::Reply { .. }));
        if let Received::Reply {
            xid,
            credits,
            payload,
        } = got
        {
            assert_eq!(xid, 0xabcdu32.to_be());
            assert_eq!(credits, MAX_SLOTS);
            assert_eq!(payload.map(|p| p.len()), Ok(8));
        }
        // A backward Call is dropped and counted.
        msg[32..36].copy_from_slice(&0u32.to_be_bytes());
        assert!(matches!(classify_received(&msg, &stats), Received::Drop));
        assert_eq!(stats.bcall_dropped.load(Ordering::Relaxed), 1);
        // RDMA_ERROR (ERR_CHUNK) fails the RPC it names with EIO.
        let mut err = [0u8; 20];
        for (i, w) in [0xabcdu32, 1, 0, 4, 2].iter().enumerate() {
            err[i * 4..i * 4 + 4].copy_from_slice(&w.to_be_bytes());
        }
        let got = classify_received(&err, &stats);
        assert!(matches!(got, Received::Reply { .. }));
        if let Received::Reply {
            credits, payload, ..
        } = got
        {
            assert_eq!(credits, 1);
            assert!(payload.is_err());
        }
        // Garbage is dropped and counted.
        assert!(matches!(
            classify_received(&msg[..10], &stats),
            Received::Drop
        ));
        assert_eq!(stats.bad_reply_count.load(Ordering::Relaxed), 1);
    }
}
