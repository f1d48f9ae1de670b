//! What a Responder (the RPC server) does with RPC-over-RDMA version 1:
//! which received messages become Calls, how a Call is put back together
//! from its inline part and its Read chunks, and how a Reply is split
//! between RDMA Writes and the Send (RFC 8166 §3.4, §3.5, §4.5).
//!
//! The rules follow rpcrdma.ko's `svc_rdma_recvfrom.c`, `svc_rdma_rw.c`,
//! `svc_rdma_pcl.c` and `svc_rdma_sendto.c`, where that is what nfsd and
//! its clients expect, and are stricter where the C trusts the peer:
//!
//! - Shorter than the minimal 28-byte header: dropped before anything is
//!   parsed (RFC 8166 §4.5; C answers ERR_CHUNK echoing whatever the
//!   receive buffer held before).
//! - `rdma_vers` other than 1: ERR_VERS 1..1, echoing the header's version.
//! - RDMA_DONE, RDMA_ERROR: dropped. RDMA_MSGP, unknown procedures,
//!   malformed or oversized chunk lists, misplaced Read chunks: ERR_CHUNK.
//!   An empty Write chunk (no segment, RFC 8166 §3.4.6) is accepted, and
//!   takes a result payload with nothing written (rpcrdma.ko's
//!   `xdr_check_write_chunk` refuses it).
//! - RDMA_NOMSG must carry a Position Zero Read chunk and nothing inline
//!   (C reads whatever follows the header as the Call when there is no
//!   Position Zero Read chunk, and ignores inline bytes when there is one);
//!   RDMA_MSG must not (C then ignores the inline message). Both: ERR_CHUNK.
//! - RDMA_MSG whose inline part is too short for an RPC header, or whose
//!   direction is neither CALL nor REPLY: dropped, as `svc_process` does.
//!   A REPLY without chunks is a backchannel Reply (RFC 8167); with chunks,
//!   too short for an RPC Reply (its credits then unused, bidir-00 §2.4),
//!   or with any fault of its header, dropped: a Requester never answers
//!   a Reply (RFC 8166 §4.5).
//!
//! Nothing here allocates: the Call's pieces and the Reply's Writes are
//! iterators over the borrowed chunk lists.

use core::ops::Range;

use super::chunk::{
    ChunkLists, ListsAt, ReadChunk, ReadChunks, ReadSegment, Segment, Segments, Span, WriteChunk,
    WriteChunks, WriteList,
};
use super::error::{DecodeError, EncodeError};
use super::header::{FixedHeader, MsgType, RpcPrefix};
use super::limits::Limits;
use super::v1::{self, RdmaError};
use super::v2;
use super::xdr::{self, Reader, Writer};

/// What a Responder does with one received message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Received<'a> {
    /// A forward Call: pull its Read chunks, then hand it to the RPC layer.
    Call(Call<'a>),
    /// RDMA_MSG without chunks whose RPC message is a REPLY: the answer to
    /// a backchannel Call (RFC 8167 §2.6). Drop it if there is no
    /// backchannel.
    BackchannelReply {
        /// `rdma_xid`, equal to the RPC XID.
        xid: u32,
        /// `rdma_credit`: the client's backward grant.
        credits: u32,
        /// The RPC Reply message.
        payload: &'a [u8],
    },
}

/// A forward Call as received: the transport header decoded and checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call<'a> {
    /// `rdma_xid`, echoed in the Reply's transport header.
    pub xid: u32,
    /// `rdma_vers`, 1 or 2: the Reply goes in the Call's version (draft
    /// "Requester Does Not Support RPC-over-RDMA Version Two").
    pub vers: u32,
    /// Version 2's `rdma_inv_handle`: the one handle the Reply may
    /// invalidate, one of the Call's own; zero for none and in version 1.
    pub inv_handle: u32,
    /// `rdma_credit`: the raw credit request.
    pub credits: u32,
    /// RDMA_NOMSG: the Call is the Position Zero Read chunk (Long Call).
    pub nomsg: bool,
    /// The chunk lists, borrowing the receive buffer.
    pub chunks: ChunkLists<'a>,
    /// The (reduced) RPC message following the header; empty for NOMSG.
    pub inline: &'a [u8],
}

impl<'a> Call<'a> {
    /// Whether the Read list moves any byte. When it does not (no Read
    /// list, or only empty segments: a zero-length Position Zero chunk,
    /// zero-length data items), the Call is its inline part: [`assemble`]
    /// yields exactly [`Call::inline`], with no [`Piece::Read`], and the
    /// Call is served as an inline one, without posting any Read.
    pub fn has_read_data(&self) -> bool {
        self.chunks.reads.segments().any(|s| s.segment.length > 0)
    }

    /// Where the Call lies in `msg`, the message [`receive`] decoded it
    /// from; `None` for another buffer.
    pub fn locate(&self, msg: &[u8]) -> Option<CallAt> {
        Some(CallAt {
            xid: self.xid,
            vers: self.vers,
            inv_handle: self.inv_handle,
            credits: self.credits,
            nomsg: self.nomsg,
            msg_len: u32::try_from(msg.len()).ok()?,
            chunks: ListsAt::of(msg, &self.chunks)?,
            inline: Span::of(msg, self.inline)?,
        })
    }
}

/// A [`Call`] without the borrow: where its parts lie in its message.
/// A server keeps it with the receive buffer, which stays put until the
/// Reply is sent, so that the Call is decoded and checked once, when it
/// arrives, and not again for its Read chunks or its Reply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallAt {
    xid: u32,
    vers: u32,
    inv_handle: u32,
    credits: u32,
    nomsg: bool,
    msg_len: u32,
    chunks: ListsAt,
    inline: Span,
}

impl CallAt {
    /// `rdma_xid` of the Call.
    pub fn xid(&self) -> u32 {
        self.xid
    }

    /// `rdma_vers` of the Call: the version of every answer to it.
    pub fn vers(&self) -> u32 {
        self.vers
    }

    /// The Call [`Call::locate`] found, over `msg`, which must be its
    /// message, unchanged: nothing is checked again. `None` if `msg` is
    /// not as long as that message was; other bytes of the same length
    /// give a Call of those bytes, never a panic.
    pub fn call<'a>(&self, msg: &'a [u8]) -> Option<Call<'a>> {
        if u32::try_from(msg.len()).ok()? != self.msg_len {
            return None;
        }
        Some(Call {
            xid: self.xid,
            vers: self.vers,
            inv_handle: self.inv_handle,
            credits: self.credits,
            nomsg: self.nomsg,
            chunks: self.chunks.lists(msg)?,
            inline: self.inline.of_msg(msg)?,
        })
    }
}

/// Why a message becomes no Call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Answer with RDMA_ERROR (see [`encode_error`]).
    Error {
        /// `rdma_xid` to answer to.
        xid: u32,
        /// `rdma_vers` to put in the answer: the received one, as
        /// rpcrdma.ko echoes it and the version 2 draft asks.
        vers: u32,
        /// The answer: [`Cause::answer`] of `cause`.
        error: ErrorBody,
        /// The check that failed, for counters and logs.
        cause: Cause,
    },
    /// Drop silently; count it.
    Drop(DropReason),
}

/// Why a Call is answered with RDMA_ERROR, by [`receive`], [`assemble`]
/// or [`plan_reply`]: every refusal says which check failed, for the
/// transport's counters and rate-limited log. [`RdmaError::from`] gives
/// the answer: ERR_VERS for a bad version, else ERR_CHUNK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// The header decoder refused it (and [`assemble`] finds its Read
    /// chunks misplaced the same way).
    Header(DecodeError),
    /// RDMA_NOMSG without a Position Zero Read chunk.
    NomsgWithoutCall,
    /// RDMA_NOMSG with bytes after the header.
    NomsgWithInline,
    /// RDMA_MSG with a Position Zero Read chunk.
    MsgWithPositionZero,
    /// The assembled Call is longer than the room for it.
    CallTooLong,
    /// A result payload lies outside the Reply, or before the end of the
    /// one ahead of it: the upper layer's mistake, refused rather than
    /// sent wrong.
    BadPayload,
    /// A result payload is longer than its Write chunk.
    PayloadTooLong {
        /// The first segment too short, counted from 1 over the Write
        /// list then the Reply chunk (RDMA2_ERR_CANT_REPLY's index).
        segment: u32,
        /// Bytes that segment would need.
        needed: u32,
    },
    /// The Reply does not fit inline, and no Reply chunk was offered.
    ReplyTooLong,
    /// The Reply's body is longer than the Reply chunk.
    ReplyChunkTooSmall {
        /// The Reply chunk's last segment, counted as for
        /// [`Cause::PayloadTooLong`].
        segment: u32,
        /// Bytes that segment would need.
        needed: u32,
    },
    /// The Reply's transport header, echoing every offered chunk, does
    /// not fit the Send.
    HeaderTooLong,
    /// Version 2: an RDMA2_OPTIONAL of a type we do not know (none yet).
    UnknownOption {
        /// The received `rdma_opttype`.
        opttype: u32,
    },
    /// Version 2: `rdma_inv_handle` is none of the Call's handles, which
    /// the draft forbids ("Remote Invalidation").
    ForeignInvHandle,
}

impl From<Cause> for RdmaError {
    fn from(cause: Cause) -> Self {
        match cause {
            Cause::Header(DecodeError::BadVersion { .. }) => VERS,
            _ => Self::Chunk,
        }
    }
}

/// ERR_VERS with the versions we speak.
const VERS: RdmaError = RdmaError::Vers {
    low: v1::VERSION,
    high: v2::VERSION,
};

/// The body of an RDMA_ERROR answer, in the answered message's version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorBody {
    /// RFC 8166's ERR_VERS or ERR_CHUNK: to a version 1 message, or to
    /// one of a version we do not speak.
    V1(RdmaError),
    /// RDMA2_ERROR's body: to a version 2 message.
    V2(v2::RdmaError),
}

impl ErrorBody {
    /// Whether this is ERR_VERS (RDMA2_ERR_VERS), for the trace events.
    pub fn is_vers(&self) -> bool {
        matches!(
            self,
            Self::V1(RdmaError::Vers { .. }) | Self::V2(v2::RdmaError::Vers { .. })
        )
    }
}

impl Cause {
    /// What to answer a message of version `vers` refused for this
    /// cause. Version 1 and unknown versions: ERR_VERS 1..2 or ERR_CHUNK,
    /// as [`RdmaError::from`]. Version 2 ("Transport Errors"):
    /// RDMA2_ERR_INVAL_PROC for an unknown `rdma_proc`,
    /// RDMA2_ERR_INVAL_OPTION for an unknown `rdma_opttype`,
    /// RDMA2_ERR_CANT_REPLY when the Reply does not fit what the Call
    /// offered (found after nfsd processed it: `rdma_processed` true),
    /// with the first segment too short and the bytes it needs where
    /// known, else zeros; RDMA2_ERR_BAD_XDR for the rest.
    pub fn answer(self, vers: u32) -> ErrorBody {
        if vers != v2::VERSION {
            return ErrorBody::V1(self.into());
        }
        let cant_reply = |segment_index, length_needed| v2::RdmaError::CantReply {
            processed: true,
            segment_index,
            length_needed,
        };
        ErrorBody::V2(match self {
            Cause::Header(DecodeError::UnknownProc { .. } | DecodeError::MsgpNotSupported) => {
                v2::RdmaError::InvalProc
            }
            Cause::UnknownOption { .. } => v2::RdmaError::InvalOption,
            Cause::PayloadTooLong { segment, needed }
            | Cause::ReplyChunkTooSmall { segment, needed } => cant_reply(segment, needed),
            Cause::ReplyTooLong | Cause::HeaderTooLong => cant_reply(0, 0),
            Cause::Header(DecodeError::BadVersion { .. }) => v2::RdmaError::Vers {
                low: v1::VERSION,
                high: v2::VERSION,
            },
            _ => v2::RdmaError::BadXdr,
        })
    }
}

/// Why a message is dropped without an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// Shorter than the minimal header (RFC 8166 §4.5): its XID cannot be
    /// trusted.
    Short,
    /// RDMA_DONE (RFC 8166 §4.6.2).
    Done,
    /// RDMA_ERROR: an error is never answered.
    Error,
    /// RDMA_MSG whose inline part is shorter than an RPC header.
    ShortRpc,
    /// The RPC message's direction is neither CALL nor REPLY.
    BadDirection {
        /// The received word.
        value: u32,
    },
    /// A REPLY carrying chunks (RFC 8167 §2.6).
    BackwardWithChunks,
    /// A REPLY whose transport header, or RPC XID, is bad: a Requester
    /// never answers a Reply (RFC 8166 §4.5), and an RDMA_ERROR with an
    /// XID of the backward direction would be looked up among the
    /// client's forward Calls.
    BadReply(DecodeError),
    /// A REPLY too short for an RPC Reply header: its credits are not to
    /// be used (bidir-00 §2.4).
    ShortReply {
        /// Bytes of the RPC message.
        len: u32,
    },
    /// Version 2: a REPLY-direction RDMA2_OPTIONAL, of a type we do not
    /// know: a Reply is never answered.
    BackwardOption {
        /// The received `rdma_opttype`.
        opttype: u32,
    },
}

/// Bytes of the smallest transport header: xid, vers, credit, proc and
/// three empty lists (RFC 8166 §4.5's "minimal size RPC-over-RDMA header").
pub const MIN_HEADER: usize = 28;

/// Whether the RPC message after the transport header of an RDMA_MSG is
/// a REPLY, found by the lists' XDR alone, for a header that failed to
/// decode: such a message is a backward Reply and is never answered.
fn is_reply(mut r: Reader<'_>) -> bool {
    super::chunk::skip_lists(&mut r)
        .and_then(|()| xdr::u32_at(r.rest(), 4))
        .is_some_and(|msg_type| msg_type == MsgType::Reply.to_u32())
}

/// Bytes of the smallest RPC Reply (RFC 5531 §9) that `rpc` can be: xid,
/// msg_type, reply_stat, then for MSG_ACCEPTED the verifier (flavor,
/// length, body and its pad) and accept_stat, for MSG_DENIED the
/// reject_stat and RPC_MISMATCH's versions or AUTH_ERROR's stat. Values
/// with no body of their own count as the smallest accepted Reply: the
/// RPC layer judges them.
fn min_reply_len(rpc: &[u8]) -> usize {
    const ACCEPTED_NULL_VERF: usize = 24;
    let word = |i: usize| xdr::u32_at(rpc, i.saturating_mul(xdr::UNIT));
    match (word(2), word(3)) {
        // MSG_ACCEPTED: the verifier's body comes before accept_stat.
        (Some(0), _) => {
            word(4)
                .and_then(|len| usize::try_from(len).ok())
                .map_or(ACCEPTED_NULL_VERF, |len| {
                    ACCEPTED_NULL_VERF
                        .saturating_add(len)
                        .saturating_add(xdr::pad(len))
                })
        }
        // MSG_DENIED, AUTH_ERROR: one auth_stat.
        (Some(1), Some(1)) => 20,
        _ => ACCEPTED_NULL_VERF,
    }
}

/// Decodes and checks a received message; see the module documentation
/// for the rules. Version 2 messages follow the same rules, in version 2
/// terms (draft-cel-nfsv4-rpcrdma-version-two-02): see [`Cause::answer`]
/// for the errors, and [`receive_v2`] for what else it checks.
pub fn receive<'a>(buf: &'a [u8], limits: &Limits) -> Result<Received<'a>, Refusal> {
    // Its XID cannot be trusted: nothing is parsed (RFC 8166 §4.5).
    if buf.len() < MIN_HEADER {
        return Err(Refusal::Drop(DropReason::Short));
    }
    let mut r = Reader::new(buf);
    let (fixed, proc) =
        FixedHeader::decode(&mut r).map_err(|_| Refusal::Drop(DropReason::Short))?;
    let refuse = |cause: Cause| Refusal::Error {
        xid: fixed.xid,
        vers: fixed.vers,
        error: cause.answer(fixed.vers),
        cause,
    };
    if fixed.vers == v2::VERSION {
        let (nomsg, chunks, payload, inv_handle) = receive_v2(buf, fixed, proc, limits)?;
        return call_or_reply(fixed, nomsg, chunks, payload, inv_handle);
    }
    if fixed.vers != v1::VERSION {
        return Err(refuse(Cause::Header(DecodeError::BadVersion {
            vers: fixed.vers,
        })));
    }
    match proc {
        v1::proc::DONE => return Err(Refusal::Drop(DropReason::Done)),
        v1::proc::ERROR => return Err(Refusal::Drop(DropReason::Error)),
        _ => {}
    }
    let lists = r.clone();
    let header = v1::decode_after_fixed(r, fixed, proc, limits).map_err(|e| match e {
        DecodeError::ShortPayload => Refusal::Drop(DropReason::ShortRpc),
        DecodeError::BadMsgType { value } => Refusal::Drop(DropReason::BadDirection { value }),
        e if proc == v1::proc::MSG && is_reply(lists.clone()) => {
            Refusal::Drop(DropReason::BadReply(e))
        }
        e => refuse(Cause::Header(e)),
    })?;
    let (nomsg, chunks) = match header.body {
        v1::Body::Msg(chunks) => (false, chunks),
        v1::Body::Nomsg(chunks) => (true, chunks),
        // Filtered above; refuse rather than trust it.
        v1::Body::Error(_) => return Err(Refusal::Drop(DropReason::Error)),
    };
    call_or_reply(fixed, nomsg, chunks, header.payload, 0)
}

/// Decodes a version 2 message: RDMA2_MSG or RDMA2_NOMSG with its chunk
/// lists, payload and `rdma_inv_handle`, whose direction is CALL.
///
/// - RDMA2_ERROR: dropped, as in version 1. Unknown `rdma_proc`:
///   RDMA2_ERR_INVAL_PROC. RDMA2_OPTIONAL: we know no `rdma_opttype`, so
///   RDMA2_ERR_INVAL_OPTION to a CALL-direction one ("Optional
///   Features"), a REPLY-direction one dropped (a Reply is never
///   answered).
/// - A header that does not parse, an `rdma_direction` other than the RPC
///   message's msg_type, or an `rdma_inv_handle` that is none of the
///   Call's handles: RDMA2_ERR_BAD_XDR; a REPLY-direction one dropped.
fn receive_v2<'a>(
    buf: &'a [u8],
    fixed: FixedHeader,
    proc: u32,
    limits: &Limits,
) -> Result<(bool, ChunkLists<'a>, &'a [u8], u32), Refusal> {
    let refuse = |cause: Cause| Refusal::Error {
        xid: fixed.xid,
        vers: fixed.vers,
        error: cause.answer(fixed.vers),
        cause,
    };
    if proc == v2::proc::ERROR {
        return Err(Refusal::Drop(DropReason::Error));
    }
    // The word after `rdma_proc`: `rdma_direction` or `rdma_optdir`.
    let reply_dir = xdr::u32_at(buf, 4 * xdr::UNIT) == Some(MsgType::Reply.to_u32());
    let header = v2::decode(buf, limits).map_err(|e| match e {
        DecodeError::ShortPayload => Refusal::Drop(DropReason::ShortRpc),
        DecodeError::BadMsgType { value } => Refusal::Drop(DropReason::BadDirection { value }),
        DecodeError::UnknownProc { .. } => refuse(Cause::Header(e)),
        e if reply_dir => Refusal::Drop(DropReason::BadReply(e)),
        e => refuse(Cause::Header(e)),
    })?;
    let (nomsg, chunks) = match header.body {
        v2::Body::Msg(c) => (false, c),
        v2::Body::Nomsg(c) => (true, c),
        v2::Body::Error(_) => return Err(Refusal::Drop(DropReason::Error)),
        v2::Body::Optional(o) if o.direction == MsgType::Reply => {
            return Err(Refusal::Drop(DropReason::BackwardOption {
                opttype: o.opttype,
            }))
        }
        v2::Body::Optional(o) => return Err(refuse(Cause::UnknownOption { opttype: o.opttype })),
    };
    // RDMA2_MSG's direction was checked against its RPC message.
    if nomsg && chunks.direction == MsgType::Reply {
        return Err(Refusal::Drop(DropReason::BackwardWithChunks));
    }
    if chunks.inv_handle != 0 && !chunks.lists.has_handle(chunks.inv_handle) {
        if chunks.direction == MsgType::Reply {
            return Err(Refusal::Drop(DropReason::BackwardWithChunks));
        }
        return Err(refuse(Cause::ForeignInvHandle));
    }
    Ok((nomsg, chunks.lists, header.payload, chunks.inv_handle))
}

/// The checks both versions share once the header is decoded: a Call,
/// or a backchannel Reply; see the module documentation.
fn call_or_reply<'a>(
    fixed: FixedHeader,
    nomsg: bool,
    chunks: ChunkLists<'a>,
    payload: &'a [u8],
    inv_handle: u32,
) -> Result<Received<'a>, Refusal> {
    let refuse = |cause: Cause| Refusal::Error {
        xid: fixed.xid,
        vers: fixed.vers,
        error: cause.answer(fixed.vers),
        cause,
    };
    let pzrc = chunks.reads.position_zero().is_some();
    if nomsg {
        if !pzrc {
            return Err(refuse(Cause::NomsgWithoutCall));
        }
        if !payload.is_empty() {
            return Err(refuse(Cause::NomsgWithInline));
        }
    } else {
        if pzrc {
            return Err(refuse(Cause::MsgWithPositionZero));
        }
        // The header's decoder has parsed it already; this cannot fail.
        let rpc = RpcPrefix::parse(payload, fixed.xid).map_err(|e| refuse(Cause::Header(e)))?;
        if rpc.msg_type == MsgType::Reply {
            if !chunks.is_empty() {
                return Err(Refusal::Drop(DropReason::BackwardWithChunks));
            }
            if payload.len() < min_reply_len(payload) {
                let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
                return Err(Refusal::Drop(DropReason::ShortReply { len }));
            }
            return Ok(Received::BackchannelReply {
                xid: fixed.xid,
                credits: fixed.credits,
                payload,
            });
        }
    }
    Ok(Received::Call(Call {
        xid: fixed.xid,
        vers: fixed.vers,
        inv_handle,
        credits: fixed.credits,
        nomsg,
        chunks,
        inline: if nomsg { &[] } else { payload },
    }))
}

/// Encodes an RDMA_ERROR answer (RFC 8166 §4.5; RDMA2_ERROR for
/// [`ErrorBody::V2`]) with `rdma_vers` `vers`, and returns its length.
pub fn encode_error(
    buf: &mut [u8],
    xid: u32,
    vers: u32,
    credits: u32,
    error: ErrorBody,
) -> Result<usize, EncodeError> {
    let fixed = FixedHeader { xid, vers, credits };
    match error {
        ErrorBody::V1(e) => v1::encode(buf, &fixed, &v1::Message::Error(e)),
        ErrorBody::V2(e) => v2::encode(buf, &fixed, &v2::Message::Error(e)),
    }
}

/// Whether the server's Replies on a connection may use Send With
/// Invalidate (RFC 8797 §5.1): only when both peers set the Remote
/// Invalidation flag of their CM private data, since "when either peer on
/// a connection clears this flag, the responder MUST use only RDMA Send".
/// `peer` is the client's flag ([`super::pvt::Negotiated`]); `ours` the
/// one the server advertised, which it sets only when its device can post
/// Send With Invalidate (`IB_DEVICE_MEM_MGT_EXTENSIONS`: svcrdma clears
/// `sc_snd_w_inv` without it), so that a Reply never needs a work request
/// the device lacks. The result is [`invalidate_handle`]'s `allowed`.
pub fn remote_invalidation(peer: bool, ours: bool) -> bool {
    peer && ours
}

/// The handle to invalidate with Send With Invalidate (RFC 8797 §4.2),
/// if `allowed` ([`remote_invalidation`] of both peers' flags): the only
/// distinct handle in the Call's header (Read, Write and Reply chunks
/// alike, as `svc_rdma_get_inv_rkey`). A handle of 0 is never chosen,
/// since C uses 0 for "none".
pub fn invalidate_handle(chunks: &ChunkLists<'_>, allowed: bool) -> Option<u32> {
    if !allowed {
        return None;
    }
    chunks.sole_handle().filter(|&h| h != 0)
}

/// The handle to invalidate with the Reply to `call`, if `allowed`: in
/// version 1 [`invalidate_handle`]; in version 2 the Call's
/// `rdma_inv_handle` and never another, none if it is zero (draft
/// "Remote Invalidation"; [`receive`] made sure it is one of the Call's).
pub fn call_invalidate_handle(call: &Call<'_>, allowed: bool) -> Option<u32> {
    if call.vers != v2::VERSION {
        return invalidate_handle(&call.chunks, allowed);
    }
    Some(call.inv_handle).filter(|&h| allowed && h != 0)
}

// ---------------------------------------------------------------------
// Assembling the Call
// ---------------------------------------------------------------------

/// One contiguous part of the assembled RPC Call message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// Copy `call.inline[src]` to `dest`.
    Inline {
        /// Byte range of [`Call::inline`].
        src: Range<usize>,
        /// Offset in the assembled message.
        dest: u32,
    },
    /// RDMA Read `length` bytes at `handle`/`offset` into `dest`.
    Read {
        /// The segment's handle.
        handle: u32,
        /// Bytes to read (never zero).
        length: u32,
        /// Remote offset of the first byte.
        offset: u64,
        /// Offset in the assembled message.
        dest: u32,
    },
    /// Zero `len` bytes at `dest`: XDR roundup of a Read chunk whose
    /// length is not a multiple of 4 (RFC 8166 §3.4.5.2).
    Zero {
        /// Offset in the assembled message.
        dest: u32,
        /// 1 to 3.
        len: u32,
    },
}

impl Piece {
    /// Bytes the piece fills.
    pub fn len(&self) -> u32 {
        match self {
            Self::Inline { src, .. } => {
                u32::try_from(src.end.saturating_sub(src.start)).unwrap_or(u32::MAX)
            }
            Self::Read { length, .. } => *length,
            Self::Zero { len, .. } => *len,
        }
    }

    /// Whether the piece fills nothing (never, for pieces from
    /// [`Assembly`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Offset in the assembled message.
    pub fn dest(&self) -> u32 {
        match self {
            Self::Inline { dest, .. } | Self::Read { dest, .. } | Self::Zero { dest, .. } => *dest,
        }
    }
}

/// Consumes a run of segments a given number of bytes at a time.
#[derive(Clone, Debug)]
struct Cursor<I> {
    segs: I,
    cur: Segment,
    used: u32,
}

impl<I: Iterator<Item = Segment>> Cursor<I> {
    fn new(segs: I) -> Self {
        Self {
            segs,
            cur: Segment::default(),
            used: 0,
        }
    }

    /// The next `1..=max` bytes (`max` > 0) as a segment, skipping empty
    /// segments; `None` once the segments are used up.
    fn take(&mut self, max: u32) -> Option<Segment> {
        while self.used >= self.cur.length {
            self.cur = self.segs.next()?;
            self.used = 0;
        }
        let len = self.cur.length.saturating_sub(self.used).min(max);
        let seg = Segment {
            handle: self.cur.handle,
            length: len,
            offset: self.cur.offset.saturating_add(u64::from(self.used)),
        };
        self.used = self.used.saturating_add(len);
        Some(seg)
    }
}

type ReadCursor<'a> =
    Cursor<core::iter::Map<super::chunk::ReadSegments<'a>, fn(ReadSegment) -> Segment>>;

fn read_cursor(chunk: ReadChunk<'_>) -> ReadCursor<'_> {
    Cursor::new(chunk.segments().map(plain as fn(ReadSegment) -> Segment))
}

fn plain(r: ReadSegment) -> Segment {
    r.segment
}

/// What the chunks are inserted into: the inline message, or for a Long
/// Call the Position Zero Read chunk.
#[derive(Clone, Debug)]
enum Base<'a> {
    Inline { len: usize, used: usize },
    Chunk(ReadCursor<'a>),
}

/// The pieces of a Call message, in increasing and contiguous `dest`
/// order (see [`assemble`]).
#[derive(Clone, Debug)]
pub struct Assembly<'a> {
    base: Base<'a>,
    /// Read chunks still to insert.
    chunks: ReadChunks<'a>,
    /// The next chunk, waiting for `dest` to reach its position.
    next: Option<ReadChunk<'a>>,
    /// The chunk being inserted.
    inserting: Option<ReadCursor<'a>>,
    /// Roundup to add after it.
    pad: u32,
    dest: u32,
    total: u32,
    /// Whether any piece is a [`Piece::Read`].
    reads: bool,
}

impl<'a> Assembly<'a> {
    /// Length of the assembled RPC message.
    pub fn total_len(&self) -> u32 {
        self.total
    }

    /// Whether there is anything to RDMA Read: false exactly when
    /// [`Call::has_read_data`] is, and then the pieces are the inline
    /// bytes alone.
    pub fn has_reads(&self) -> bool {
        self.reads
    }

    fn emit(&mut self, piece: Piece) -> Result<Option<Piece>, Cause> {
        self.dest = self
            .dest
            .checked_add(piece.len())
            .ok_or(Cause::CallTooLong)?;
        Ok(Some(piece))
    }

    /// Up to `max` (> 0) bytes of the base; `None` when it is used up.
    fn take_base(&mut self, max: u32) -> Result<Option<Piece>, Cause> {
        let dest = self.dest;
        let piece = match &mut self.base {
            Base::Inline { len, used } => {
                let n = len
                    .saturating_sub(*used)
                    .min(usize::try_from(max).unwrap_or(usize::MAX));
                if n == 0 {
                    return Ok(None);
                }
                let start = *used;
                *used = start.saturating_add(n);
                Piece::Inline {
                    src: start..*used,
                    dest,
                }
            }
            Base::Chunk(cursor) => match cursor.take(max) {
                Some(s) => Piece::Read {
                    handle: s.handle,
                    length: s.length,
                    offset: s.offset,
                    dest,
                },
                None => return Ok(None),
            },
        };
        self.emit(piece)
    }

    fn step(&mut self) -> Result<Option<Piece>, Cause> {
        loop {
            if let Some(cursor) = &mut self.inserting {
                if let Some(s) = cursor.take(u32::MAX) {
                    let dest = self.dest;
                    return self.emit(Piece::Read {
                        handle: s.handle,
                        length: s.length,
                        offset: s.offset,
                        dest,
                    });
                }
                self.inserting = None;
                if self.pad != 0 {
                    let len = core::mem::take(&mut self.pad);
                    let dest = self.dest;
                    return self.emit(Piece::Zero { dest, len });
                }
            }
            if self.next.is_none() {
                self.next = self.chunks.next();
            }
            let Some(chunk) = self.next else {
                return self.take_base(u32::MAX);
            };
            // Positions count the unreduced stream, which is what has
            // been assembled so far.
            match chunk.position().checked_sub(self.dest) {
                Some(0) => {
                    self.next = None;
                    let len =
                        u32::try_from(chunk.total_length()).map_err(|_| Cause::CallTooLong)?;
                    self.pad = len.wrapping_neg() & 3;
                    self.inserting = Some(read_cursor(chunk));
                }
                Some(gap) => {
                    return self
                        .take_base(gap)?
                        .ok_or(Cause::Header(DecodeError::PositionBeyondPayload))
                        .map(Some)
                }
                // The previous chunk ran past this one's position.
                None => return Err(Cause::Header(DecodeError::OverlappingReadChunks)),
            }
        }
    }
}

impl Iterator for Assembly<'_> {
    type Item = Piece;

    fn next(&mut self) -> Option<Piece> {
        self.step().ok().flatten()
    }
}

/// Lays out the RPC message of `call` as the server's receive pages hold
/// it: the inline bytes (or, for RDMA_NOMSG, the Position Zero Read
/// chunk) with every other Read chunk's data inserted at its position,
/// each followed by the zeros of its XDR roundup when its length is not
/// a multiple of 4 (RFC 8166 §3.4.5.2; rpcrdma.ko pads a single Read chunk
/// this way, last or not, and nfsd's decoders rely on it).
///
/// Fails with ERR_CHUNK when a position falls outside the message, or
/// the message is longer than `max_len` (C: `-EINVAL` once the pages run
/// out, answered with ERR_CHUNK and a disconnect).
pub fn assemble<'a>(call: &Call<'a>, max_len: u32) -> Result<Assembly<'a>, Cause> {
    let mut chunks = call.chunks.reads.chunks();
    let pzrc = call.chunks.reads.position_zero();
    let base = match (call.nomsg, pzrc) {
        (true, Some(pzrc)) => {
            chunks.next();
            Base::Chunk(read_cursor(pzrc))
        }
        (false, None) => Base::Inline {
            len: call.inline.len(),
            used: 0,
        },
        (true, None) => return Err(Cause::NomsgWithoutCall),
        (false, Some(_)) => return Err(Cause::MsgWithPositionZero),
    };
    let mut assembly = Assembly {
        base,
        chunks,
        next: None,
        inserting: None,
        pad: 0,
        dest: 0,
        total: 0,
        reads: false,
    };
    // A dry run validates everything, so that iteration cannot fail.
    let mut dry = assembly.clone();
    while let Some(piece) = dry.step()? {
        if dry.dest > max_len {
            return Err(Cause::CallTooLong);
        }
        assembly.reads |= matches!(piece, Piece::Read { .. });
    }
    assembly.total = dry.dest;
    Ok(assembly)
}

// ---------------------------------------------------------------------
// Planning the Reply
// ---------------------------------------------------------------------

/// Most result payloads of one Reply that go into Write chunks (an NFSv4
/// COMPOUND with several READs): as many as a Write list may have chunks
/// ([`Limits::DEFAULT`]), so that every offered Write chunk takes its data
/// item (RFC 8166 §3.4.6); a later payload has no chunk and stays in the
/// body.
pub const MAX_PAYLOADS: usize = Limits::DEFAULT.max_chunks_per_list as usize;

/// The RPC Reply the upper layer built in `rq_res`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplyShape {
    /// Length of the whole Reply.
    pub len: u32,
    /// The result payloads (`xpo_result_payload`), in Reply order, empty
    /// ones included: offset and length. The `i`-th goes into Write chunk
    /// `i`, if the Call offered that many, as `svc_rdma_result_payload`
    /// pairs them; an empty one (a READ at end of file) takes its chunk
    /// too, which `svc_rdma_result_payload` does not, so that the next
    /// payload goes where the client looks for it.
    pub payloads: [Option<(u32, u32)>; MAX_PAYLOADS],
}

impl ReplyShape {
    /// A Reply of `len` bytes with at most one result payload.
    pub fn new(len: u32, payload: Option<(u32, u32)>) -> Self {
        let mut payloads = [None; MAX_PAYLOADS];
        payloads[0] = payload;
        Self { len, payloads }
    }
}

/// One RDMA Write to post: `len` bytes of the Reply at `src` to the
/// client's `handle`/`offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RdmaWrite {
    /// Offset in the Reply (`rq_res`).
    pub src: u32,
    /// Bytes (never zero).
    pub len: u32,
    /// The client's handle.
    pub handle: u32,
    /// The client's offset.
    pub offset: u64,
}

/// How a Reply is sent: which bytes go by RDMA Write, which inline, and
/// the transport header that describes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplyPlan<'a> {
    writes: WriteList<'a>,
    /// The offered Reply chunk: written to for RDMA_NOMSG, echoed unused
    /// otherwise; `None` also when its echo alone would keep an inline
    /// Reply from fitting the Send.
    reply: Option<WriteChunk<'a>>,
    /// The payload placed in Write chunk `i`, if any; a length of 0 when
    /// nothing went into the chunk.
    payloads: [Option<(u32, u32)>; MAX_PAYLOADS],
    /// Reply ranges not sent by Write chunk: around the placed payloads.
    body: [(u32, u32); MAX_PAYLOADS + 1],
    nomsg: bool,
    header_len: u32,
    /// Version 2: the header is RDMA2_MSG or RDMA2_NOMSG, with this
    /// `rdma_inv_handle`; `None`: version 1.
    v2_inv_handle: Option<u32>,
}

/// Bytes of a Reply header echoing `writes` and, if `reply` is given, a
/// Reply chunk of that many segments: version 1's, or with `v2` version
/// 2's, whose direction and `rdma_inv_handle` take two words more.
fn header_len(writes: &WriteList<'_>, reply: Option<usize>, v2: bool) -> Option<u32> {
    let fixed_and_reads = if v2 { 7 * xdr::UNIT } else { 5 * xdr::UNIT };
    const SEG: usize = 16;
    let list = writes.chunks().try_fold(xdr::UNIT, |acc, c| {
        c.len()
            .checked_mul(SEG)?
            .checked_add(2 * xdr::UNIT)?
            .checked_add(acc)
    })?;
    let reply = match reply {
        None => xdr::UNIT,
        Some(n) => n.checked_mul(SEG)?.checked_add(2 * xdr::UNIT)?,
    };
    u32::try_from(fixed_and_reads.checked_add(list)?.checked_add(reply)?).ok()
}

/// Plans the Reply to a Call that offered `call_chunks`, for a Send of at
/// most `inline_max` bytes (the smaller of the client's receive size,
/// RFC 8797, and the server's send buffer).
///
/// - Result payload `i` goes into Write chunk `i`, filling its segments
///   in order (ERR_CHUNK if it is longer, as `svc_rdma_result_payload`'s
///   `-E2BIG`); a payload without a Write chunk, or whose chunk is an
///   empty Write chunk, stays in the body. An empty payload takes its
///   chunk all the same. Write chunks without a payload are echoed
///   unused.
/// - The body is the Reply minus the placed payloads and their XDR pads
///   (`pcl_chunk_end_offset`). It goes inline (RDMA_MSG) when the header
///   and the body fit `inline_max`, else into the Reply chunk
///   (RDMA_NOMSG). rpcrdma.ko uses the Reply chunk whenever one is
///   offered, and ignores the client's receive size. Either way the
///   header echoes an offered Reply chunk (RFC 8166 §4.3.3), unused for
///   RDMA_MSG, so its segments count in the header's size; only when
///   that echo alone keeps a Reply the chunk cannot carry from fitting
///   inline does the Reply go inline without it.
/// - Neither possible: ERR_CHUNK, as rpcrdma.ko answers a Reply larger
///   than its Reply chunk or too large to pull up (`svc_rdma_sendto`'s
///   `send_err`). So is a payload outside the Reply, or before the end of
///   the one ahead of it.
pub fn plan_reply<'a>(
    call_chunks: &ChunkLists<'a>,
    shape: ReplyShape,
    inline_max: u32,
) -> Result<ReplyPlan<'a>, Cause> {
    plan(call_chunks, shape, inline_max, None)
}

/// [`plan_reply`] for `call`, in its version: a version 2 Call is
/// answered with RDMA2_MSG or RDMA2_NOMSG echoing its `rdma_inv_handle`,
/// and a shortfall of its Write or Reply chunks says which segment is
/// short and by how much (RDMA2_ERR_CANT_REPLY, [`Cause::answer`]).
pub fn plan_call_reply<'a>(
    call: &Call<'a>,
    shape: ReplyShape,
    inline_max: u32,
) -> Result<ReplyPlan<'a>, Cause> {
    let v2 = (call.vers == v2::VERSION).then_some(call.inv_handle);
    plan(&call.chunks, shape, inline_max, v2)
}

/// The segment a payload or body of `len` bytes overruns in `chunk`,
/// whose first segment is number `first` (RDMA2_ERR_CANT_REPLY's
/// counting): its last, and the bytes it would need.
fn shortfall(chunk: &WriteChunk<'_>, first: u32, len: u32) -> (u32, u32) {
    let count = u32::try_from(chunk.len()).unwrap_or(u32::MAX);
    if count == 0 {
        // No segment to point at: "not possible to determine".
        return (0, len);
    }
    let last = chunk.segments().last().map_or(0, |s| s.length);
    let short = u64::from(len).saturating_sub(chunk.total_length());
    let needed = u64::from(last).saturating_add(short);
    (
        first.saturating_add(count.saturating_sub(1)),
        u32::try_from(needed).unwrap_or(u32::MAX),
    )
}

fn plan<'a>(
    call_chunks: &ChunkLists<'a>,
    shape: ReplyShape,
    inline_max: u32,
    v2_inv_handle: Option<u32>,
) -> Result<ReplyPlan<'a>, Cause> {
    let v2 = v2_inv_handle.is_some();
    let mut payloads = [None; MAX_PAYLOADS];
    let mut body = [(shape.len, shape.len); MAX_PAYLOADS + 1];
    {
        let mut placed = payloads.iter_mut();
        let mut gaps = body.iter_mut();
        // Where the body resumes after the last placed payload.
        let mut resume = 0u32;
        let mut chunks = call_chunks.writes.chunks();
        // Segment number of the next chunk's first, counted from 1.
        let mut first = 1u32;
        for &(off, len) in shape.payloads.iter().flatten() {
            let end = off.checked_add(len).filter(|&e| e <= shape.len);
            if end.is_none() || off < resume {
                return Err(Cause::BadPayload);
            }
            let Some(chunk) = chunks.next() else {
                break;
            };
            // An empty Write chunk has room for nothing: the data item
            // stays in the body, as if there were no chunk.
            let len = if chunk.is_empty() { 0 } else { len };
            if u64::from(len) > chunk.total_length() {
                let (segment, needed) = shortfall(&chunk, first, len);
                return Err(Cause::PayloadTooLong { segment, needed });
            }
            first = first.saturating_add(u32::try_from(chunk.len()).unwrap_or(u32::MAX));
            let Some(slot) = placed.next() else {
                break;
            };
            // A gap more than payloads: one before each placed one, and
            // none cut where nothing was placed.
            if len > 0 {
                let Some(gap) = gaps.next() else {
                    break;
                };
                *gap = (resume, off);
                let padded = u64::from(off)
                    .saturating_add(u64::from(len))
                    .saturating_add(3)
                    & !3;
                resume = u32::try_from(padded).unwrap_or(u32::MAX).min(shape.len);
            }
            *slot = Some((off, len));
        }
        if let Some(gap) = gaps.next() {
            *gap = (resume, shape.len);
        }
    }
    let body_len = body
        .iter()
        .map(|&(s, e)| u64::from(e.saturating_sub(s)))
        .sum::<u64>();
    let writes = call_chunks.writes;
    let reply = call_chunks.reply;
    // The same for RDMA_MSG and RDMA_NOMSG: both echo every chunk.
    let echoed = header_len(&writes, reply.map(|r| r.len()), v2).ok_or(Cause::HeaderTooLong)?;
    let fits = |header: u32| u64::from(header).saturating_add(body_len) <= u64::from(inline_max);
    let mut plan = ReplyPlan {
        writes,
        reply,
        payloads,
        body,
        nomsg: false,
        header_len: echoed,
        v2_inv_handle,
    };
    if fits(echoed) {
        return Ok(plan);
    }
    let usable = reply.map(|reply| body_len <= reply.total_length());
    if echoed <= inline_max && usable == Some(true) {
        plan.nomsg = true;
        return Ok(plan);
    }
    // Only the Reply chunk's echo (RFC 8166 §4.3.3) keeps the Reply from
    // fitting inline, and the chunk cannot carry it either: the Reply goes
    // inline without the echo rather than not at all, as it did before
    // the echo (rpcrdma.ko's client accepts both forms). A client
    // registering its Reply chunk page by page meets this with every
    // small Reply.
    let bare = header_len(&writes, None, v2).ok_or(Cause::HeaderTooLong)?;
    if reply.is_some() && fits(bare) {
        plan.reply = None;
        plan.header_len = bare;
        return Ok(plan);
    }
    match reply {
        None => Err(Cause::ReplyTooLong),
        Some(_) if echoed > inline_max => Err(Cause::HeaderTooLong),
        Some(chunk) => {
            // The Reply chunk's segments come after every Write chunk's.
            let first = writes
                .chunks()
                .try_fold(1u32, |n, c| n.checked_add(u32::try_from(c.len()).ok()?))
                .unwrap_or(0);
            let body = u32::try_from(body_len).unwrap_or(u32::MAX);
            let (segment, needed) = shortfall(&chunk, first, body);
            // An index we cannot count is reported as unknown.
            let segment = if first == 0 { 0 } else { segment };
            Err(Cause::ReplyChunkTooSmall { segment, needed })
        }
    }
}

impl<'a> ReplyPlan<'a> {
    /// RDMA_NOMSG: the body goes by Reply chunk, the Send carries only
    /// the header.
    pub fn nomsg(&self) -> bool {
        self.nomsg
    }

    /// Bytes [`encode_header`](Self::encode_header) writes.
    pub fn header_len(&self) -> u32 {
        self.header_len
    }

    /// Bytes of the body: the Reply without the payload placed in a Write
    /// chunk.
    pub fn body_len(&self) -> u32 {
        self.body
            .iter()
            .map(|&(s, e)| e.saturating_sub(s))
            .fold(0, u32::saturating_add)
    }

    /// Bytes of the payloads placed in Write chunks.
    pub fn payload_len(&self) -> u32 {
        self.payloads
            .iter()
            .flatten()
            .map(|&(_, len)| len)
            .fold(0, u32::saturating_add)
    }

    /// Write chunks that carry data: not those of empty payloads, nor
    /// empty Write chunks.
    pub fn write_chunks_used(&self) -> usize {
        self.payloads
            .iter()
            .flatten()
            .filter(|&&(_, len)| len > 0)
            .count()
    }

    /// The body's ranges of the Reply, in order, empty ones left out.
    pub fn body_ranges(&self) -> impl Iterator<Item = Range<u32>> + 'static {
        self.body
            .into_iter()
            .filter(|&(s, e)| s < e)
            .map(|(s, e)| s..e)
    }

    /// The ranges of the Reply to copy after the header into the Send:
    /// the body for RDMA_MSG, nothing for RDMA_NOMSG.
    pub fn inline_ranges(&self) -> impl Iterator<Item = Range<u32>> + 'static {
        let nomsg = self.nomsg;
        self.body_ranges().filter(move |_| !nomsg)
    }

    /// The RDMA Writes to post before the Send: each payload into its
    /// Write chunk, then, for RDMA_NOMSG, the body into the Reply chunk.
    pub fn writes(&self) -> Writes<'_, 'a> {
        Writes {
            plan: self,
            chunks: self.writes.chunks(),
            next: 0,
            body: false,
            range: (0, 0),
            into: None,
        }
    }

    /// The Write list's segments as [`encode_header`](Self::encode_header)
    /// echoes them, in order: the chunk's index, the segment's index in
    /// it, and the segment with the length written into it (what
    /// svcrdma's `svcrdma_encode_wseg` events report).
    pub fn echoed_write_segments(&self) -> impl Iterator<Item = (usize, usize, Segment)> + 'a {
        let payloads = self.payloads;
        self.writes
            .chunks()
            .enumerate()
            .flat_map(move |(i, chunk)| {
                let mut remaining = payloads.get(i).copied().flatten().map_or(0, |(_, len)| len);
                chunk.segments().enumerate().map(move |(j, seg)| {
                    let length = seg.length.min(remaining);
                    remaining = remaining.saturating_sub(length);
                    (i, j, Segment { length, ..seg })
                })
            })
    }

    /// Encodes the Reply's transport header into `buf` and returns its
    /// length: `{xid, 1, credits, MSG or NOMSG}` (version 2: `{xid, 2,
    /// credits, MSG or NOMSG, REPLY, the Call's rdma_inv_handle}`), no
    /// Read list, every
    /// offered Write chunk echoed with the lengths written (zero for
    /// unused segments and chunks, as `svc_rdma_encode_write_list`), and
    /// an offered Reply chunk with the lengths written: the body's for
    /// RDMA_NOMSG, all zero for RDMA_MSG (RFC 8166 §4.3.3: the Responder
    /// "MUST copy that chunk into the Transport header").
    pub fn encode_header(
        &self,
        buf: &mut [u8],
        xid: u32,
        credits: u32,
    ) -> Result<usize, EncodeError> {
        let vers = match self.v2_inv_handle {
            Some(_) => v2::VERSION,
            None => v1::VERSION,
        };
        let fixed = FixedHeader { xid, vers, credits };
        let mut w = Writer::new(buf);
        // RDMA2_MSG and RDMA2_NOMSG have version 1's numbers.
        let proc = if self.nomsg {
            v1::proc::NOMSG
        } else {
            v1::proc::MSG
        };
        fixed.encode(&mut w, proc)?;
        if let Some(inv_handle) = self.v2_inv_handle {
            w.u32(MsgType::Reply.to_u32())?;
            w.u32(inv_handle)?;
        }
        w.bool(false)?;
        let mut payloads = self.payloads.iter();
        for chunk in self.writes.chunks() {
            let mut remaining = payloads.next().copied().flatten().map_or(0, |(_, len)| len);
            w.bool(true)?;
            echo(&mut w, &chunk, &mut remaining)?;
        }
        w.bool(false)?;
        match self.reply {
            Some(reply) => {
                w.bool(true)?;
                let mut written = if self.nomsg { self.body_len() } else { 0 };
                echo(&mut w, &reply, &mut written)
            }
            None => w.bool(false),
        }?;
        Ok(w.len())
    }
}

/// Appends a segment array with each length cut to what `remaining`
/// bytes fill, in order.
fn echo(
    w: &mut Writer<'_>,
    chunk: &WriteChunk<'_>,
    remaining: &mut u32,
) -> Result<(), EncodeError> {
    w.count(chunk.len())?;
    for seg in chunk.segments() {
        let len = seg.length.min(*remaining);
        *remaining = remaining.saturating_sub(len);
        w.u32(seg.handle)?;
        w.u32(len)?;
        w.u64(seg.offset)?;
    }
    Ok(())
}

/// The RDMA Writes of a [`ReplyPlan`], in posting order: each range of
/// the Reply (a payload, then the body's pieces) streamed into the
/// segments of its chunk.
#[derive(Clone, Debug)]
pub struct Writes<'p, 'a> {
    plan: &'p ReplyPlan<'a>,
    /// The Write chunks not yet paired with a payload.
    chunks: WriteChunks<'a>,
    /// The next payload, or once `body`, the next piece of the body.
    next: usize,
    body: bool,
    /// What is left of the range being written.
    range: (u32, u32),
    /// The segments it goes into.
    into: Option<Cursor<Segments<'a>>>,
}

impl Writes<'_, '_> {
    /// Moves to the next range to write; false when there is none.
    fn advance(&mut self) -> bool {
        let plan = self.plan;
        if !self.body {
            // Payload `i` goes into Write chunk `i`; they are placed from
            // the first slot on, so an empty slot ends them.
            if let Some(&Some((off, len))) = plan.payloads.get(self.next) {
                self.next = self.next.saturating_add(1);
                self.range = (off, off.saturating_add(len));
                self.into = self.chunks.next().map(|c| Cursor::new(c.segments()));
                return true;
            }
            if !plan.nomsg {
                return false;
            }
            self.body = true;
            self.next = 0;
            self.into = plan.reply.map(|c| Cursor::new(c.segments()));
        }
        // The body's pieces, one after the other into the Reply chunk.
        let Some(&range) = plan.body.get(self.next) else {
            return false;
        };
        self.next = self.next.saturating_add(1);
        self.range = range;
        true
    }
}

impl Iterator for Writes<'_, '_> {
    type Item = RdmaWrite;

    fn next(&mut self) -> Option<RdmaWrite> {
        loop {
            let (start, end) = self.range;
            if start < end {
                if let Some(seg) = self
                    .into
                    .as_mut()
                    .and_then(|c| c.take(end.saturating_sub(start)))
                {
                    self.range.0 = start.saturating_add(seg.length);
                    return Some(RdmaWrite {
                        src: start,
                        len: seg.length,
                        handle: seg.handle,
                        offset: seg.offset,
                    });
                }
                // No room left in the chunk (the plan made sure there is).
                self.range = (end, end);
            }
            if !self.advance() {
                return None;
            }
        }
    }
}
