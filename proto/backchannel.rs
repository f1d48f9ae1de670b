//! Bi-directional operation (RFC 8167, draft-ietf-nfsv4-rpcrdma-bidirection).
//!
//! On one connection the client both sends forward Calls and answers
//! backward Calls (NFSv4.1 callbacks), so every received message must be
//! routed by direction before its XID or credit value means anything: the
//! two directions have separate XID spaces (§1.3.4.1) and separate credit
//! windows (§2.1.2).

use super::chunk::{ChunkLists, ChunkSlices};
use super::error::{DecodeError, EncodeError};
use super::header::{FixedHeader, Header, MsgType, RpcPrefix};
use super::negotiate::{Version, V2_EXTRA};
use super::{v1, v2};

/// Which end of the connection we are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// The RPC client: it connects, sends forward Calls, and receives
    /// forward Replies and backward Calls.
    Client,
    /// The RPC server: it accepts, receives forward Calls and backward
    /// Replies.
    Server,
}

/// What a received message is, seen from the receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// A Call from client to server.
    ForwardCall,
    /// A Reply from server to client.
    ForwardReply,
    /// A Call from server to client.
    BackwardCall,
    /// A Reply from client to server.
    BackwardReply,
}

impl Direction {
    /// The direction of a message of `msg_type` received by `role`.
    pub fn of(role: Role, msg_type: MsgType) -> Self {
        match (role, msg_type) {
            (Role::Client, MsgType::Reply) => Self::ForwardReply,
            (Role::Client, MsgType::Call) => Self::BackwardCall,
            (Role::Server, MsgType::Call) => Self::ForwardCall,
            (Role::Server, MsgType::Reply) => Self::BackwardReply,
        }
    }

    /// Whether this is backward-direction traffic.
    pub fn is_backward(self) -> bool {
        matches!(self, Self::BackwardCall | Self::BackwardReply)
    }
}

/// Why a message could not be classified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassifyError {
    /// The RPC header after the transport header is unusable.
    Rpc(DecodeError),
    /// A version 1 backward-direction message that is not RDMA_MSG with
    /// three empty chunk lists (§2.5, §2.6): drop it.
    BackwardWithChunks,
}

impl From<DecodeError> for ClassifyError {
    fn from(error: DecodeError) -> Self {
        Self::Rpc(error)
    }
}

/// Classifies a decoded message received by `role`.
///
/// RDMA_MSG is routed by the msg_type of its RPC header. A message without
/// inline RPC header is routed by what it can be: RDMA_NOMSG and
/// RDMA2_NOMSG by `rdma_direction` (version 1 never uses them backward),
/// errors as Replies, RDMA2_OPTIONAL by `rdma_optdir`.
pub fn classify(role: Role, header: &Header<'_>) -> Result<Direction, ClassifyError> {
    let xid = header.fixed().xid;
    let payload = header.payload();
    let forward = match role {
        Role::Client => MsgType::Reply,
        Role::Server => MsgType::Call,
    };
    match header {
        Header::V1(h) => match &h.body {
            v1::Body::Msg(lists) => {
                let direction = Direction::of(role, RpcPrefix::parse(payload, xid)?.msg_type);
                check_v1_backward(direction, lists)
            }
            v1::Body::Nomsg(_) => Ok(Direction::of(role, forward)),
            v1::Body::Error(_) => Ok(Direction::of(role, MsgType::Reply)),
        },
        Header::V2(h) => Ok(match &h.body {
            v2::Body::Msg(chunks) | v2::Body::Nomsg(chunks) => {
                Direction::of(role, chunks.direction)
            }
            v2::Body::Error(_) => Direction::of(role, MsgType::Reply),
            v2::Body::Optional(optional) => Direction::of(role, optional.direction),
        }),
    }
}

fn check_v1_backward(
    direction: Direction,
    lists: &ChunkLists<'_>,
) -> Result<Direction, ClassifyError> {
    if direction.is_backward() && !lists.is_empty() {
        return Err(ClassifyError::BackwardWithChunks);
    }
    Ok(direction)
}

/// The `rdma_credit` to put in a backward-direction message for a
/// backchannel of `slots` slots: never zero (§2.1.2).
pub fn backward_credit(slots: u32) -> u32 {
    slots.max(1)
}

/// Encodes the version 1 transport header of a backward-direction Call
/// (sent by the server) or Reply (sent by the client) into `buf`, ahead of
/// the RPC message with the same `xid` (§2.5, §2.6): RDMA_MSG, three empty
/// chunk lists, and a non-zero credit value for a backchannel of `slots`.
pub fn encode_backward_v1(buf: &mut [u8], xid: u32, slots: u32) -> Result<usize, EncodeError> {
    let fixed = FixedHeader {
        xid,
        vers: v1::VERSION,
        credits: backward_credit(slots),
    };
    v1::encode(buf, &fixed, &v1::Message::Msg(ChunkSlices::NONE))
}

/// Encodes the transport header of a backward-direction Call (`msg_type`
/// CALL, sent by the server) or Reply (REPLY, sent by the client) in
/// `version`: version 1 as [`encode_backward_v1`]; version 2 (the draft
/// makes the backward direction mandatory) RDMA2_MSG with `rdma_direction`
/// `msg_type`, no handle to invalidate and three empty chunk lists.
pub fn encode_backward(
    buf: &mut [u8],
    xid: u32,
    slots: u32,
    msg_type: MsgType,
    version: Version,
) -> Result<usize, EncodeError> {
    if version == Version::V1 {
        return encode_backward_v1(buf, xid, slots);
    }
    let fixed = FixedHeader {
        xid,
        vers: v2::VERSION,
        credits: backward_credit(slots),
    };
    let chunks = v2::Chunks {
        direction: msg_type,
        inv_handle: 0,
        lists: ChunkSlices::NONE,
    };
    v2::encode(buf, &fixed, &v2::Message::Msg(chunks))
}

/// Bytes of the header [`encode_backward`] writes in `version`.
pub fn backward_header_len(version: Version) -> u32 {
    match version {
        Version::V1 => V1_HDRLEN_MIN,
        Version::V2 => V1_HDRLEN_MIN.saturating_add(V2_EXTRA),
    }
}

/// Largest backward-direction RPC message a server sends in one inline
/// Send of at most `inline_send` bytes in `version`, less its header.
pub fn server_max_payload(inline_send: u32, version: Version) -> u32 {
    inline_send.saturating_sub(backward_header_len(version))
}

/// Receive buffers a client must keep posted (§2.2.1): one per forward Call
/// outstanding plus its whole backward credit grant, so that a backward
/// Call never finds the receive queue empty.
pub fn client_receive_buffers(forward_in_flight: u32, backward_credits: u32) -> u32 {
    forward_in_flight.saturating_add(backward_credits)
}

/// Receive buffers a server must keep posted (§2.2.2): its forward credit
/// grant plus one per backward Call outstanding.
pub fn server_receive_buffers(forward_credits: u32, backward_in_flight: u32) -> u32 {
    forward_credits.saturating_add(backward_in_flight)
}

/// Backward-direction slots a client offers (`bc_num_slots`, the
/// `ca_maxrequests` of the CREATE_SESSION back channel attributes): as
/// many as rpcrdma.ko, which reserves Receives for that many Calls.
pub const CLIENT_SLOTS: u32 = 16;

/// Smallest version 1 transport header: fixed words and three empty
/// chunk lists (`RPCRDMA_HDRLEN_MIN`).
pub const V1_HDRLEN_MIN: u32 = 28;

/// Largest backward-direction RPC message a client accepts and sends
/// (`bc_maxpayload`, the CREATE_SESSION back channel's
/// `ca_maxrequestsize` and `ca_maxresponsesize`): both go inline
/// (§2.5), so within both negotiated inline thresholds, and in one page,
/// which is what the callback service decodes from and encodes into,
/// less the transport header.
pub fn client_max_payload(inline_send: u32, inline_recv: u32, page: u32) -> u32 {
    inline_send
        .min(inline_recv)
        .min(page)
        .saturating_sub(V1_HDRLEN_MIN)
}

/// [`client_max_payload`] for a client that may speak version 2, whose
/// backward headers are [`V2_EXTRA`] bytes longer: the limit is told to
/// the server once (CREATE_SESSION) and must hold in either version.
/// `inline_send` and `inline_recv` are version 1's, never above version
/// 2's.
pub fn client_max_payload_v2(inline_send: u32, inline_recv: u32, page: u32) -> u32 {
    client_max_payload(inline_send, inline_recv, page).saturating_sub(V2_EXTRA)
}

/// Why a client drops a backward-direction Call. The Requester never
/// answers a backward Call with RDMA_ERROR: the server's callback times
/// out, and NFSv4.1 recovers through its session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallDropped {
    /// The Call carries chunks (§2.5).
    WithChunks,
    /// The RPC message is longer than the backchannel's `max` payload.
    TooLong {
        /// Its length.
        len: usize,
        /// The largest accepted.
        max: u32,
    },
    /// No callback service listens on this transport.
    NoService,
    /// Every backchannel slot holds a Call: the server sent more than
    /// the slots it was granted.
    NoSlot,
}

/// Checks the RPC message of a backward Call (what follows the transport
/// header) against the backchannel's `max_payload`. The classifier has
/// already checked that it is RDMA_MSG without chunks, and that it starts
/// with the XID and msg_type CALL.
pub fn check_call(payload: &[u8], max_payload: u32) -> Result<(), CallDropped> {
    if payload.len() > max_payload as usize {
        return Err(CallDropped::TooLong {
            len: payload.len(),
            max: max_payload,
        });
    }
    Ok(())
}

/// A fixed set of `N` slots (at most 32), claimed and released without a
/// lock: bit `k` of the mask is set while slot `k` is free.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlotMask(pub u32);

impl SlotMask {
    /// All of the first `n` slots free.
    pub fn all(n: u32) -> Self {
        Self(
            1u32.checked_shl(n)
                .map_or(u32::MAX, |bit| bit.wrapping_sub(1)),
        )
    }

    /// The lowest free slot and the mask with it taken, if any is free.
    pub fn claim(self) -> Option<(u32, Self)> {
        let k = self.0.trailing_zeros();
        let bit = 1u32.checked_shl(k)?;
        Some((k, Self(self.0 & !bit)))
    }

    /// The mask with slot `k` free again; `None` if `k` is out of range
    /// or already free (a double release).
    pub fn release(self, k: u32) -> Option<Self> {
        let bit = 1u32.checked_shl(k)?;
        if self.0 & bit != 0 {
            return None;
        }
        Some(Self(self.0 | bit))
    }
}
