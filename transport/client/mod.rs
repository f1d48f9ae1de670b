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
//! Invalidate) before the RPC completes. Backward-direction Calls (NFSv4.1
//! callbacks) go to the callback service, and their Replies back inline
//! (`backchannel`).
//!
//! Files are named for their jobs, and each uses only the ones before it
//! (and this root, which holds [`Config`], [`Stats`] and the protocol
//! helpers):
//!
//! 1. `state`: what the transport keeps across connections, and what
//!    every layer asks of it (counters, forced disconnect, congestion
//!    window, the fence on a request's memory).
//! 2. `request`: per-request state in the request's slot.
//! 3. `placement`: checking a Reply against what its RPC offered, and
//!    placing it.
//! 4. `connection`: one RDMA connection, its Receive and Send buffers, and
//!    the transport's hold on it.
//! 5. `backchannel`: NFSv4.1 callbacks received.
//! 6. `receive`: the Receive completion, up to the RPC's completion.
//! 7. `send`: posting Sends and their completion.
//! 8. `marshal`: `send_request`, of a Call or a backchannel Reply.
//! 9. `xprt`: connect, the connect worker, destroy, stats.
//! 10. `class`: registration, and the [`crate::sunrpc::ClientTransport`]
//!     behaviour that sunrpc's entry points call.
//!
//! The C entry points, the `container_of` from `rpc_xprt` and the raw
//! sunrpc objects live in [`crate::sunrpc`] ([`crate::sunrpc::ClientXprt`]),
//! the RDMA objects in [`crate::rdma`]; a request's pages are mapped and
//! registered under a hold that `buf_free` waits for
//! ([`crate::sunrpc::ForwardCall::pages`]). The `unsafe` left here is
//! posting on the QP, which waits for an abstraction of its own (see
//! `transport/mod.rs`). The protocol decisions are safe code calling
//! [`crate::proto`].

mod backchannel;
mod class;
mod connection;
mod marshal;
mod placement;
mod receive;
mod request;
mod send;
mod state;
mod version;
mod xprt;

use kernel::prelude::*;

use crate::proto::chunk::ChunkSlices;
use crate::proto::header::{FixedHeader, MsgType};
use crate::proto::negotiate::{self, Version};
use crate::proto::reply::{self, Dropped, Inbound};
use crate::proto::{v1, v2};

pub(crate) use super::Counter;
pub(crate) use class::{Registration, IDENT};

/// Default RPC slots, and credits we ask for (`RPCRDMA_DEF_SLOT_TABLE`;
/// the default of the slot_table_entries parameter in `sys/helpers.c`).
pub(crate) const DEF_SLOTS: u32 = 128;
/// Largest RPC payload (NFS rsize/wsize): 1 MiB, moved by RDMA in chunks
/// (`RPCRDMA_MAX_DATA_SEGS` pages).
pub(crate) const MAX_PAYLOAD: usize = 1 << 20;

/// Per-transport settings, read from the tunables when the transport is
/// set up; the inline sizes again at each connect ([`Config::at_connect`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Config {
    /// Largest Reply we receive inline: size of every Receive buffer.
    pub(crate) inline_read: u32,
    /// Largest Call we send inline: size of every Send buffer.
    pub(crate) inline_write: u32,
    /// RPC slots, and the credits we ask for.
    pub(crate) slots: u32,
    /// New connections offer version 2 (`max_version`).
    pub(crate) offers_v2: bool,
}

impl Config {
    /// Clamps raw parameter values to what the transport supports:
    /// inline sizes 1024..=65536 (`RPCRDMA_MIN_INLINE`,
    /// `RPCRDMA_MAX_INLINE`), slots 4..=256 (`RPCRDMA_MIN_SLOT_TABLE`;
    /// the tunable takes up to `RPCRDMA_MAX_SLOT_TABLE`, 16384, as
    /// rpcrdma.ko's, but a connection's buffers are sized for every slot).
    pub(crate) fn clamped(
        inline_read: u32,
        inline_write: u32,
        slots: u32,
        max_version: u32,
    ) -> Self {
        Self {
            inline_read: inline_read.clamp(1024, 65536),
            inline_write: inline_write.clamp(1024, 65536),
            slots: slots.clamp(4, 256),
            offers_v2: max_version >= 2,
        }
    }

    /// The tunables (`sys/sysctl.c`, which refuses values out of range),
    /// clamped once more so that nothing here depends on it.
    pub(crate) fn from_params() -> Self {
        let (inline_read, inline_write, slots) = crate::params::transport();
        Self::clamped(
            inline_read,
            inline_write,
            slots,
            crate::params::max_version(),
        )
    }

    /// The settings of a new connection of a transport set up with
    /// `self`: its slots, and the inline sizes in force now, which
    /// rpcrdma.ko also reads at every connect (`rpcrdma_ep_create`).
    ///
    /// A transport that may speak version 2 receives at least its
    /// default of 4096 bytes, which a version 2 server sends without
    /// asking ([`crate::proto::pvt::recv_size`]).
    pub(crate) fn at_connect(&self) -> Self {
        let now = Self::from_params();
        Self {
            slots: self.slots,
            inline_read: crate::proto::pvt::recv_size(now.inline_read, now.offers_v2),
            ..now
        }
    }
}

/// Counters, shown by `print_stats` in rpcrdma.ko's column order.
#[derive(Default)]
pub(crate) struct Stats {
    /// Call bytes past the `xdr_buf` head copied into Send buffers.
    pub(crate) pullup_copy_count: Counter,
    /// Reply bytes copied past the receive `xdr_buf` head.
    pub(crate) fixup_copy_count: Counter,
    /// Bytes of request buffers allocated because a slot's were too
    /// small (or new).
    pub(crate) hardway_register_count: Counter,
    /// Calls that could not be marshalled.
    pub(crate) failed_marshal_count: Counter,
    /// Replies dropped as malformed.
    pub(crate) bad_reply_count: Counter,
    /// Sends that found no free Send buffer.
    pub(crate) empty_sendctx_q: Counter,
    /// Backward-direction Calls received, dropped ones included. Not a
    /// mountstats column: in debugfs (`backchannel`).
    pub(crate) bcall_received: Counter,
    /// Replies to backward-direction Calls sent.
    pub(crate) bcall_replied: Counter,
    /// Backward-direction Calls dropped: with chunks, too long, without a
    /// callback service or beyond the backchannel's slots.
    pub(crate) bcall_dropped: Counter,
    /// Read list segments sent.
    pub(crate) read_chunk_count: Counter,
    /// Write chunk segments sent.
    pub(crate) write_chunk_count: Counter,
    /// Reply chunk segments sent.
    pub(crate) reply_chunk_count: Counter,
    /// Bytes registered for chunks.
    pub(crate) total_rdma_request: Counter,
    /// Bytes the server wrote into Write and Reply chunks.
    pub(crate) total_rdma_reply: Counter,
    /// Calls sent as RDMA_NOMSG.
    pub(crate) nomsg_call_count: Counter,
    /// MRs taken out of use after a failed or flushed operation.
    pub(crate) mrs_recycled: Counter,
    /// MRs left registered when their connection went.
    pub(crate) mrs_orphaned: Counter,
    /// MRs allocated.
    pub(crate) mrs_allocated: Counter,
    /// MRs invalidated with LOCAL_INV.
    pub(crate) local_inv_needed: Counter,
    /// Replies that had to wait for their Call's Send to complete.
    pub(crate) reply_waits_for_send: Counter,
    /// Send With Invalidate of a key that was not the RPC's: the
    /// connection was closed. Not a mountstats column.
    pub(crate) bad_remote_inv: Counter,
    /// The connection's RPC-over-RDMA version, 0 while it is probed. Not
    /// a mountstats column: in debugfs (`rdma_version`).
    pub(crate) rdma_version: Counter,
    /// RPCs sent again with a Reply chunk after RDMA2_ERR_CANT_REPLY.
    /// Not a mountstats column: in debugfs (`cant_reply_resends`).
    pub(crate) cant_reply_resends: Counter,
    /// Replies dropped because their Call was not sent on the connection
    /// they came on (a server answering before it could have the Call).
    /// Not a mountstats column: in debugfs (`unsent_replies`).
    pub(crate) unsent_replies: Counter,
    /// Replies that came while their Call was being posted, finished by
    /// the sender once it was. Not a mountstats column: in debugfs
    /// (`reply_waits_for_post`).
    pub(crate) reply_waits_for_post: Counter,
}

/// What the transport does with a received message: the protocol's
/// verdict ([`reply::classify`]) with its counters bumped.
pub(crate) fn classify_received<'a>(msg: &'a [u8], stats: &Stats, max_credits: u32) -> Inbound<'a> {
    let inbound = reply::classify(msg, max_credits);
    match &inbound {
        Inbound::Dropped(why) => {
            stats.bad_reply_count.add(1);
            match why {
                Dropped::BackwardWithChunks => {
                    stats.bcall_received.add(1);
                    stats.bcall_dropped.add(1);
                    rwarn!("backward call with chunks dropped\n");
                }
                Dropped::Short | Dropped::Version { .. } => {
                    rdebug!("dropping received message: {:?}\n", why);
                }
            }
        }
        // For the backchannel, which counts it; its credit field is
        // never read: the forward window is not the backchannel's.
        Inbound::BackwardCall(_) | Inbound::BackwardCall2(_) => {}
        // As in rpcrdma.ko, RDMA_ERROR counts as a bad reply too.
        Inbound::Reply {
            body: Err(why),
            xid,
            ..
        } => {
            stats.bad_reply_count.add(1);
            rdebug!("reply to xid {:#x} fails its RPC: {:?}\n", xid, why);
        }
        Inbound::Reply { body: Ok(_), .. } => {}
    }
    inbound
}

/// Writes the header for the Call with `xid` (as in `rq_xid`) into `buf`,
/// asking for `credits`, in `version`; RDMA_NOMSG when `nomsg`. Returns
/// its length.
pub(crate) fn encode_call_header(
    buf: &mut [u8],
    xid: u32,
    credits: u32,
    nomsg: bool,
    chunks: ChunkSlices<'_>,
    version: Version,
) -> Option<usize> {
    let fixed = FixedHeader {
        xid: u32::from_be(xid),
        vers: version.number(),
        credits,
    };
    if version == Version::V2 {
        let chunks = v2::Chunks {
            direction: MsgType::Call,
            inv_handle: negotiate::inv_handle(&chunks),
            lists: chunks,
        };
        let msg = if nomsg {
            v2::Message::Nomsg(chunks)
        } else {
            v2::Message::Msg(chunks)
        };
        return v2::encode(buf, &fixed, &msg).ok();
    }
    let msg = if nomsg {
        v1::Message::Nomsg(chunks)
    } else {
        v1::Message::Msg(chunks)
    };
    v1::encode(buf, &fixed, &msg).ok()
}

#[kunit_tests(rpcrdma_rs_transport)]
mod tests {
    use super::request::{CallPhase, CallState};
    use super::*;

    /// A Reply finds its Call as posted only once the sender said so on
    /// that connection; one that comes while it posts is handed over
    /// exactly once, whoever comes first.
    #[test]
    fn call_phase_hands_an_early_reply_over_once() {
        let (gen, other) = (7, 8);
        let call = CallPhase::new();
        assert_eq!(call.on(gen), CallState::NotSent);
        call.start(gen);
        assert_eq!(call.on(gen), CallState::Posting);
        assert_eq!(call.on(other), CallState::NotSent);
        // The Reply first: the sender finishes it.
        assert!(call.leave_early(gen));
        // A second Reply meanwhile is none.
        assert_eq!(call.on(gen), CallState::NotSent);
        assert!(!call.leave_early(gen));
        assert!(call.posted(gen));
        assert_eq!(call.on(gen), CallState::Posted);
        // The sender first: the Reply goes on itself.
        let call = CallPhase::new();
        call.start(gen);
        assert!(!call.posted(other));
        assert!(!call.posted(gen));
        assert!(!call.leave_early(gen));
        assert_eq!(call.on(gen), CallState::Posted);
        assert_eq!(call.on(other), CallState::NotSent);
        // Not posted after all: a Reply left meanwhile is dropped.
        let call = CallPhase::new();
        call.start(gen);
        assert!(call.leave_early(gen));
        assert!(call.unsent(gen));
        assert_eq!(call.on(gen), CallState::NotSent);
        call.start(gen);
        assert!(!call.unsent(gen));
        assert_eq!(call.on(gen), CallState::NotSent);
    }

    #[test]
    fn call_header_round_trips() {
        let mut buf = [0u8; 64];
        let xid = 0x1234_5678u32.to_be();
        let none = ChunkSlices::NONE;
        let n = encode_call_header(&mut buf, xid, DEF_SLOTS, false, none, Version::V1).unwrap_or(0);
        assert_eq!(n, 28);
        assert_eq!(&buf[..4], &[0x12, 0x34, 0x56, 0x78]);
        // Version 2: direction CALL and rdma_inv_handle (none) more.
        let n = encode_call_header(&mut buf, xid, DEF_SLOTS, false, none, Version::V2).unwrap_or(0);
        assert_eq!(n, 36);
        assert_eq!(&buf[4..8], &[0, 0, 0, 2]);
        assert_eq!(&buf[16..24], &[0; 8]);
    }

    fn words<const N: usize>(w: [u32; N]) -> KVec<u8> {
        let mut v = KVec::new();
        for w in w {
            for b in w.to_be_bytes() {
                let _ = v.push(b, GFP_KERNEL);
            }
        }
        v
    }

    #[test]
    fn reply_is_routed() {
        let stats = Stats::default();
        // RDMA_MSG, credits 200 (capped), empty lists, then an RPC Reply.
        let msg = words([0xabcd, 1, 200, 0, 0, 0, 0, 0xabcd, 1]);
        let got = classify_received(&msg, &stats, DEF_SLOTS);
        assert!(
            matches!(got, Inbound::Reply { xid: 0xabcd, credits: DEF_SLOTS, body: Ok(b), .. } if b.payload.len() == 8)
        );
        // A backward Call goes to the backchannel, which counts it: it is
        // no bad Reply, and its credits (2, as nfsd sends) are not a grant.
        let call = words([0xabcd, 1, 2, 0, 0, 0, 0, 0xabcd, 0]);
        assert!(matches!(
            classify_received(&call, &stats, DEF_SLOTS),
            Inbound::BackwardCall(_)
        ));
        assert_eq!(stats.bcall_dropped.get(), 0);
        assert_eq!(stats.bad_reply_count.get(), 0);
        // With chunks, it is dropped and counted.
        // A Write list of one 16-byte segment.
        let chunked = words([0xabcd, 1, 2, 0, 0, 1, 1, 0x1234, 16, 0, 0, 0, 0, 0xabcd, 0]);
        assert!(matches!(
            classify_received(&chunked, &stats, DEF_SLOTS),
            Inbound::Dropped(Dropped::BackwardWithChunks)
        ));
        assert_eq!(stats.bcall_received.get(), 1);
        assert_eq!(stats.bcall_dropped.get(), 1);
        // RDMA_ERROR (ERR_CHUNK) fails the RPC it names with EIO.
        let err = words([0xabcd, 1, 0, 4, 2]);
        assert!(matches!(
            classify_received(&err, &stats, DEF_SLOTS),
            Inbound::Reply {
                credits: 1,
                body: Err(_),
                ..
            }
        ));
        assert_eq!(stats.bad_reply_count.get(), 2);
        // So do RDMA_MSGP, an unknown procedure and a truncated error.
        for bad in [
            words([0xabcd, 1, 8, 2, 0, 0, 0, 0]),
            words([0xabcd, 1, 8, 7, 0, 0, 0, 0]),
            words([0xabcd, 1, 8, 4, 1]),
        ] {
            assert!(matches!(
                classify_received(&bad, &stats, DEF_SLOTS),
                Inbound::Reply {
                    xid: 0xabcd,
                    body: Err(_),
                    ..
                }
            ));
        }
        assert_eq!(stats.bad_reply_count.get(), 5);
        // Module parameters are clamped.
        assert_eq!(
            Config::clamped(0, 1 << 20, 1000, 2),
            Config {
                inline_read: 1024,
                inline_write: 65536,
                slots: 256,
                offers_v2: true
            }
        );
        // Garbage without an XID touches no RPC, and is counted.
        assert!(matches!(
            classify_received(&msg[..10], &stats, DEF_SLOTS),
            Inbound::Dropped(Dropped::Short)
        ));
        assert_eq!(stats.bad_reply_count.get(), 6);
    }
}
