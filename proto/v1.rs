//! RPC-over-RDMA version 1 transport header (RFC 8166 §4).

use super::chunk::{ChunkLists, ChunkSlices};
use super::error::{DecodeError, EncodeError};
use super::header::{FixedHeader, RpcPrefix};
use super::limits::Limits;
use super::xdr::{Reader, Writer};

/// The version number carried in `rdma_vers`.
pub const VERSION: u32 = 1;

/// Inline threshold both ways when nothing else is known (RFC 8166 §3.3.3).
pub const DEFAULT_INLINE: u32 = 1024;

/// `rdma_proc` values (RFC 8166 §4.1).
pub mod proc {
    /// RDMA_MSG: an RPC message follows the header.
    pub const MSG: u32 = 0;
    /// RDMA_NOMSG: the RPC message is carried in a chunk.
    pub const NOMSG: u32 = 1;
    /// RDMA_MSGP: padded message, no longer supported (§4.6.1).
    pub const MSGP: u32 = 2;
    /// RDMA_DONE: Read-Read completion, no longer supported (§4.6.2).
    pub const DONE: u32 = 3;
    /// RDMA_ERROR: a transport error report.
    pub const ERROR: u32 = 4;
}

/// `rdma_err` values (RFC 8166 §4.1).
pub mod err {
    /// ERR_VERS.
    pub const VERS: u32 = 1;
    /// ERR_CHUNK.
    pub const CHUNK: u32 = 2;
}

/// Body of an RDMA_ERROR (RFC 8166 §4.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RdmaError {
    /// ERR_VERS with the inclusive range of versions the sender supports.
    Vers {
        /// Lowest supported version.
        low: u32,
        /// Highest supported version.
        high: u32,
    },
    /// ERR_CHUNK: the header could not be parsed or processed.
    Chunk,
}

impl RdmaError {
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut word = || r.u32().ok_or(DecodeError::MalformedError);
        match word()? {
            err::VERS => Ok(Self::Vers {
                low: word()?,
                high: word()?,
            }),
            err::CHUNK => Ok(Self::Chunk),
            _ => Err(DecodeError::MalformedError),
        }
    }

    pub(crate) fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        match *self {
            Self::Vers { low, high } => {
                w.u32(err::VERS)?;
                w.u32(low)?;
                w.u32(high)
            }
            Self::Chunk => w.u32(err::CHUNK),
        }
    }
}

/// The part of a version 1 header that depends on `rdma_proc`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body<'a> {
    /// RDMA_MSG: the RPC message follows inline, possibly reduced.
    Msg(ChunkLists<'a>),
    /// RDMA_NOMSG: the RPC message travels in a Position Zero Read chunk
    /// (Long Call) or in the Reply chunk (Long Reply).
    Nomsg(ChunkLists<'a>),
    /// RDMA_ERROR.
    Error(RdmaError),
}

/// A decoded version 1 header, borrowing the receive buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header<'a> {
    /// xid, vers (always [`VERSION`]) and credits.
    pub fixed: FixedHeader,
    /// Procedure and its body.
    pub body: Body<'a>,
    /// Octets of transport header: the offset of the RPC payload.
    pub header_len: usize,
    /// Everything after the header: the (reduced) RPC message for RDMA_MSG.
    pub payload: &'a [u8],
}

/// Decodes and validates a version 1 header in place.
///
/// For RDMA_MSG the payload must start with an RPC header whose XID matches
/// `rdma_xid`. The Read list positions are checked against the inline
/// payload (or the Position Zero Read chunk). On error, see
/// [`DecodeError::reply_error`] for what to answer.
pub fn decode<'a>(buf: &'a [u8], limits: &Limits) -> Result<Header<'a>, DecodeError> {
    super::header::decode_with(buf, limits, decode_after_fixed)
}

/// [`decode`] once the fixed fields and `rdma_proc` are read from `r`.
pub(crate) fn decode_after_fixed<'a>(
    mut r: Reader<'a>,
    fixed: FixedHeader,
    procedure: u32,
    limits: &Limits,
) -> Result<Header<'a>, DecodeError> {
    if fixed.vers != VERSION {
        return Err(DecodeError::BadVersion { vers: fixed.vers });
    }
    let body = match procedure {
        proc::MSG => Body::Msg(ChunkLists::decode(&mut r, limits)?),
        proc::NOMSG => Body::Nomsg(ChunkLists::decode(&mut r, limits)?),
        proc::ERROR => Body::Error(RdmaError::decode(&mut r)?),
        proc::MSGP => return Err(DecodeError::MsgpNotSupported),
        proc::DONE => return Err(DecodeError::DoneNotSupported),
        proc => return Err(DecodeError::UnknownProc { proc }),
    };
    let payload = r.rest();
    match &body {
        Body::Msg(chunks) => {
            chunks.check_positions(payload.len())?;
            RpcPrefix::parse(payload, fixed.xid)?;
        }
        Body::Nomsg(chunks) if chunks.is_empty() => return Err(DecodeError::NomsgWithoutChunks),
        Body::Nomsg(chunks) => chunks.check_positions(0)?,
        Body::Error(_) => {}
    }
    Ok(Header {
        fixed,
        body,
        header_len: r.position(),
        payload,
    })
}

/// A version 1 header to be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'s> {
    /// RDMA_MSG with its chunk lists.
    Msg(ChunkSlices<'s>),
    /// RDMA_NOMSG with its chunk lists.
    Nomsg(ChunkSlices<'s>),
    /// RDMA_ERROR.
    Error(RdmaError),
}

/// Encodes a version 1 header into `buf` and returns its length; the RPC
/// message, if any, goes right after it.
///
/// `fixed.vers` is written as given: it is [`VERSION`] except in an
/// ERR_VERS answer, which echoes the offending header's version like
/// rpcrdma.ko does, so that a version 2 requester recognises it.
pub fn encode(
    buf: &mut [u8],
    fixed: &FixedHeader,
    msg: &Message<'_>,
) -> Result<usize, EncodeError> {
    let mut w = Writer::new(buf);
    match msg {
        Message::Msg(chunks) => {
            fixed.encode(&mut w, proc::MSG)?;
            chunks.encode(&mut w)?;
        }
        Message::Nomsg(chunks) => {
            fixed.encode(&mut w, proc::NOMSG)?;
            chunks.encode(&mut w)?;
        }
        Message::Error(error) => {
            fixed.encode(&mut w, proc::ERROR)?;
            error.encode(&mut w)?;
        }
    }
    Ok(w.len())
}
