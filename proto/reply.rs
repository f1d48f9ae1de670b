//! What a Requester does with a received message (RFC 8166 §4.5,
//! RFC 8167 §2): which RPC it completes, with what, and what credit grant
//! it carries.
//!
//! The rules follow rpcrdma.ko's `rpcrdma_reply_handler`, which a Linux
//! server expects: a message too short to carry an XID, or of a version we
//! never send, touches no RPC. Otherwise the XID is looked up first; a
//! header that does not decode (RDMA_MSGP, RDMA_DONE, an unknown
//! procedure, a truncated or unknown RDMA_ERROR, garbage chunk lists)
//! fails the RPC it names at once with EIO instead of leaving it to time
//! out. The credit grant is applied only once the XID matched an RPC
//! waiting for it: a stray message must not move the window.

use super::backchannel::{self, ClassifyError, Direction, Role};
use super::chunk::ChunkLists;
use super::credits;
use super::error::DecodeError;
use super::header::{FixedHeader, Header};
use super::limits::Limits;
use super::negotiate::Answer;
use super::xdr::Reader;
use super::{v1, v2};

/// Why a received message was dropped without touching any RPC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// Shorter than the four fixed words: no XID to match.
    Short,
    /// A version we never send (neither 1 nor 2).
    Version {
        /// The received `rdma_vers`.
        vers: u32,
    },
    /// A backward-direction message with chunks (RFC 8167 §2.5).
    BackwardWithChunks,
}

/// Why a Reply fails its RPC with EIO.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadReply {
    /// The transport header does not decode.
    Header(DecodeError),
    /// The server answered RDMA_ERROR.
    Error(v1::RdmaError),
    /// The server answered RDMA2_ERROR.
    Error2(v2::RdmaError),
}

/// A forward Reply's transport body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplyBody<'a> {
    /// RDMA_NOMSG: the Reply is in the Reply chunk.
    pub nomsg: bool,
    /// The chunk lists the server returned.
    pub lists: ChunkLists<'a>,
    /// The inline part of the RPC Reply (empty for RDMA_NOMSG).
    pub payload: &'a [u8],
}

/// A received message, seen by the Requester.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inbound<'a> {
    /// Touches no RPC (count it as a bad reply).
    Dropped(Dropped),
    /// A backward-direction Call (RFC 8167): for the backchannel.
    BackwardCall(v1::Header<'a>),
    /// A version 2 backward-direction Call, RDMA2_MSG without chunks:
    /// for the backchannel, answered in version 2.
    BackwardCall2(v2::Header<'a>),
    /// A message for the forward RPC `xid` (as on the wire): if an RPC
    /// waits for it, apply `credits` and complete the RPC with `body`.
    Reply {
        /// `rdma_xid`.
        xid: u32,
        /// The grant, already clamped to `[1, max_credits]`.
        credits: u32,
        /// The body, or why the RPC fails.
        body: Result<ReplyBody<'a>, BadReply>,
        /// What it tells the version negotiation
        /// ([`super::negotiate::Negotiator::on_answer`]).
        answer: Answer,
    },
}

/// Classifies `msg`, received by a Requester that asked for at most
/// `max_credits`.
///
/// Version 2 messages are Replies as version 1's (the answer to a
/// version 2 Call, draft-cel-nfsv4-rpcrdma-version-two-02); a version 2
/// ERR_VERS is how a version 1 server refuses the probe, with
/// `rdma_vers` 2 echoed.
pub fn classify(msg: &[u8], max_credits: u32) -> Inbound<'_> {
    let mut r = Reader::new(msg);
    let Ok((fixed, procedure)) = FixedHeader::decode(&mut r) else {
        return Inbound::Dropped(Dropped::Short);
    };
    if fixed.vers != v1::VERSION && fixed.vers != v2::VERSION {
        return Inbound::Dropped(Dropped::Version { vers: fixed.vers });
    }
    let reply = |body, answer| Inbound::Reply {
        xid: fixed.xid,
        credits: credits::sanitize(fixed.credits, max_credits),
        body,
        answer,
    };
    let header = match super::header::decode_after_fixed(r, fixed, procedure, &Limits::DEFAULT) {
        Ok(header) => header,
        Err(err) => {
            // A version 1 header, even a bad one, comes from a version 1
            // speaker; a bad version 2 one got our version 2 through.
            let answer = if fixed.vers == v1::VERSION {
                Answer::Reply { vers: v1::VERSION }
            } else {
                Answer::OtherError
            };
            return reply(Err(BadReply::Header(err)), answer);
        }
    };
    let answer = Answer::of(&header);
    match (backchannel::classify(Role::Client, &header), header) {
        (Ok(Direction::BackwardCall), Header::V1(h)) => Inbound::BackwardCall(h),
        // Only RDMA2_MSG without chunks carries a backward Call we can
        // take: no Upper Layer uses chunks backward, and our callback
        // service reads one inline message.
        (Ok(Direction::BackwardCall), Header::V2(h)) => match h.body {
            v2::Body::Msg(c) if c.lists.is_empty() && c.inv_handle == 0 => {
                Inbound::BackwardCall2(h)
            }
            _ => Inbound::Dropped(Dropped::BackwardWithChunks),
        },
        (Err(ClassifyError::BackwardWithChunks), _) => {
            Inbound::Dropped(Dropped::BackwardWithChunks)
        }
        // An RDMA_MSG whose RPC header is unreadable still names its RPC.
        (Err(ClassifyError::Rpc(err)), _) => reply(Err(BadReply::Header(err)), answer),
        // A client receives nothing else.
        (Ok(_), Header::V1(h)) => reply(body(&h), answer),
        (Ok(_), Header::V2(h)) => reply(body2(&h), answer),
    }
}

fn body2<'a>(header: &v2::Header<'a>) -> Result<ReplyBody<'a>, BadReply> {
    match header.body {
        v2::Body::Msg(chunks) => Ok(ReplyBody {
            nomsg: false,
            lists: chunks.lists,
            payload: header.payload,
        }),
        v2::Body::Nomsg(chunks) => Ok(ReplyBody {
            nomsg: true,
            lists: chunks.lists,
            payload: &[],
        }),
        v2::Body::Error(err) => Err(BadReply::Error2(err)),
        // We offer no extension: no OPTIONAL answers a Call of ours.
        v2::Body::Optional(_) => Err(BadReply::Header(DecodeError::UnknownProc {
            proc: v2::proc::OPTIONAL,
        })),
    }
}

fn body<'a>(header: &v1::Header<'a>) -> Result<ReplyBody<'a>, BadReply> {
    match header.body {
        v1::Body::Msg(lists) => Ok(ReplyBody {
            nomsg: false,
            lists,
            payload: header.payload,
        }),
        v1::Body::Nomsg(lists) => Ok(ReplyBody {
            nomsg: true,
            lists,
            payload: &[],
        }),
        v1::Body::Error(err) => Err(BadReply::Error(err)),
    }
}
