//! RPC-over-RDMA version 2 transport header
//! (draft-cel-nfsv4-rpcrdma-version-two-02, "XDR Protocol Definition").
//!
//! Version 2 keeps version 1's fixed fields and chunk list XDR, adds the
//! message direction and a remotely invalidatable handle in front of the
//! lists, five error codes, and RDMA2_OPTIONAL for extensions.

use super::chunk::{ChunkLists, ChunkSlices};
use super::error::{DecodeError, EncodeError};
use super::header::{FixedHeader, MsgType, RpcPrefix};
use super::limits::Limits;
use super::xdr::{Reader, Writer};

/// The version number carried in `rdma_vers`.
pub const VERSION: u32 = 2;

/// Inline threshold a version 2 sender assumes of its peer ("Default
/// Values").
pub const DEFAULT_INLINE: u32 = 4096;

/// `rdma_proc` values of version 2.
pub mod proc {
    /// RDMA2_MSG: an RPC message follows the header.
    pub const MSG: u32 = 0;
    /// RDMA2_NOMSG: the RPC message is carried in a chunk.
    pub const NOMSG: u32 = 1;
    /// RDMA2_ERROR: a transport error report.
    pub const ERROR: u32 = 4;
    /// RDMA2_OPTIONAL: an extension message.
    pub const OPTIONAL: u32 = 5;
}

/// `rpcrdma2_errcode`: the error codes of RDMA2_ERROR.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// RDMA2_ERR_VERS (1): version not supported.
    Vers,
    /// RDMA2_ERR_BAD_XDR (2): header cannot be parsed; ERR_CHUNK's heir.
    BadXdr,
    /// RDMA2_ERR_CANT_REPLY (3): not enough Write or Reply chunk room.
    CantReply,
    /// RDMA2_ERR_INVAL_PROC (4): `rdma_proc` not recognised.
    InvalProc,
    /// RDMA2_ERR_INVAL_OPTION (5): `rdma_opttype` not recognised.
    InvalOption,
}

/// Body of an RDMA2_ERROR.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RdmaError {
    /// RDMA2_ERR_VERS with the inclusive range of supported versions.
    Vers {
        /// Lowest supported version.
        low: u32,
        /// Highest supported version.
        high: u32,
    },
    /// RDMA2_ERR_BAD_XDR.
    BadXdr,
    /// RDMA2_ERR_CANT_REPLY: the Requester may retry with the same XID and
    /// larger reply resources.
    CantReply {
        /// Whether the Upper Layer had already processed the request.
        processed: bool,
        /// One-based index of the first segment that is too short (counting
        /// Write list then Reply chunk), or zero if unknown.
        segment_index: u32,
        /// Bytes that segment needs.
        length_needed: u32,
    },
    /// RDMA2_ERR_INVAL_PROC.
    InvalProc,
    /// RDMA2_ERR_INVAL_OPTION.
    InvalOption,
}

impl RdmaError {
    /// The error's code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Vers { .. } => ErrorCode::Vers,
            Self::BadXdr => ErrorCode::BadXdr,
            Self::CantReply { .. } => ErrorCode::CantReply,
            Self::InvalProc => ErrorCode::InvalProc,
            Self::InvalOption => ErrorCode::InvalOption,
        }
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut word = || r.u32().ok_or(DecodeError::MalformedError);
        Ok(match word()? {
            1 => Self::Vers {
                low: word()?,
                high: word()?,
            },
            2 => Self::BadXdr,
            3 => Self::CantReply {
                processed: match word()? {
                    0 => false,
                    1 => true,
                    _ => return Err(DecodeError::MalformedError),
                },
                segment_index: word()?,
                length_needed: word()?,
            },
            4 => Self::InvalProc,
            5 => Self::InvalOption,
            _ => return Err(DecodeError::MalformedError),
        })
    }

    fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        match *self {
            Self::Vers { low, high } => {
                w.u32(1)?;
                w.u32(low)?;
                w.u32(high)
            }
            Self::BadXdr => w.u32(2),
            Self::CantReply {
                processed,
                segment_index,
                length_needed,
            } => {
                w.u32(3)?;
                w.bool(processed)?;
                w.u32(segment_index)?;
                w.u32(length_needed)
            }
            Self::InvalProc => w.u32(4),
            Self::InvalOption => w.u32(5),
        }
    }

    /// The error to send for `code`, with empty details where it has any.
    pub fn from_code(code: ErrorCode) -> Self {
        match code {
            ErrorCode::Vers => Self::Vers {
                low: super::v1::VERSION,
                high: VERSION,
            },
            ErrorCode::BadXdr => Self::BadXdr,
            ErrorCode::CantReply => Self::CantReply {
                processed: false,
                segment_index: 0,
                length_needed: 0,
            },
            ErrorCode::InvalProc => Self::InvalProc,
            ErrorCode::InvalOption => Self::InvalOption,
        }
    }
}

/// `rpcrdma2_optional`: an extension message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Optional<'a> {
    /// Direction of the message (`rdma_optdir`).
    pub direction: MsgType,
    /// Which extension; unknown ones are answered RDMA2_ERR_INVAL_OPTION.
    pub opttype: u32,
    /// Extension-defined content.
    pub optinfo: &'a [u8],
}

impl<'a> Optional<'a> {
    fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        Ok(Self {
            direction: decode_direction(r)?,
            opttype: r.u32().ok_or(DecodeError::Truncated)?,
            optinfo: r.opaque().ok_or(DecodeError::Truncated)?,
        })
    }
}

fn decode_direction(r: &mut Reader<'_>) -> Result<MsgType, DecodeError> {
    let value = r.u32().ok_or(DecodeError::Truncated)?;
    MsgType::from_u32(value).ok_or(DecodeError::BadDirection { value })
}

/// `rpcrdma2_chunk_lists`: direction, invalidatable handle and the chunk
/// lists, either decoded ([`ChunkLists`]) or to be encoded ([`ChunkSlices`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunks<L> {
    /// `rdma_direction`: must match the RPC message's msg_type.
    pub direction: MsgType,
    /// `rdma_inv_handle`: the one handle the Responder may invalidate with
    /// Send With Invalidate; zero for none.
    pub inv_handle: u32,
    /// The Read list, Write list and Reply chunk.
    pub lists: L,
}

impl<'a> Chunks<ChunkLists<'a>> {
    fn decode(r: &mut Reader<'a>, limits: &Limits) -> Result<Self, DecodeError> {
        Ok(Self {
            direction: decode_direction(r)?,
            inv_handle: r.u32().ok_or(DecodeError::Truncated)?,
            lists: ChunkLists::decode(r, limits)?,
        })
    }
}

impl Chunks<ChunkSlices<'_>> {
    fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        w.u32(self.direction.to_u32())?;
        w.u32(self.inv_handle)?;
        self.lists.encode(w)
    }
}

/// The part of a version 2 header that depends on `rdma_proc`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body<'a> {
    /// RDMA2_MSG.
    Msg(Chunks<ChunkLists<'a>>),
    /// RDMA2_NOMSG.
    Nomsg(Chunks<ChunkLists<'a>>),
    /// RDMA2_ERROR.
    Error(RdmaError),
    /// RDMA2_OPTIONAL.
    Optional(Optional<'a>),
}

/// A decoded version 2 header, borrowing the receive buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header<'a> {
    /// xid, vers (always [`VERSION`]) and credits.
    pub fixed: FixedHeader,
    /// Procedure and its body.
    pub body: Body<'a>,
    /// Octets of transport header: the offset of the RPC payload.
    pub header_len: usize,
    /// Everything after the header.
    pub payload: &'a [u8],
}

/// Decodes and validates a version 2 header in place.
///
/// Besides the version 1 checks, RDMA2_MSG's `rdma_direction` must match
/// the msg_type of the RPC message that follows. On error, see
/// [`DecodeError::v2_reply_error`] for what to answer.
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
        proc::MSG => Body::Msg(Chunks::decode(&mut r, limits)?),
        proc::NOMSG => Body::Nomsg(Chunks::decode(&mut r, limits)?),
        proc::ERROR => Body::Error(RdmaError::decode(&mut r)?),
        proc::OPTIONAL => Body::Optional(Optional::decode(&mut r)?),
        proc => return Err(DecodeError::UnknownProc { proc }),
    };
    let payload = r.rest();
    match &body {
        Body::Msg(chunks) => {
            chunks.lists.check_positions(payload.len())?;
            if RpcPrefix::parse(payload, fixed.xid)?.msg_type != chunks.direction {
                return Err(DecodeError::DirectionMismatch);
            }
        }
        Body::Nomsg(chunks) if chunks.lists.is_empty() => {
            return Err(DecodeError::NomsgWithoutChunks)
        }
        Body::Nomsg(chunks) => chunks.lists.check_positions(0)?,
        Body::Error(_) | Body::Optional(_) => {}
    }
    Ok(Header {
        fixed,
        body,
        header_len: r.position(),
        payload,
    })
}

/// A version 2 header to be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'s> {
    /// RDMA2_MSG.
    Msg(Chunks<ChunkSlices<'s>>),
    /// RDMA2_NOMSG.
    Nomsg(Chunks<ChunkSlices<'s>>),
    /// RDMA2_ERROR.
    Error(RdmaError),
    /// RDMA2_OPTIONAL.
    Optional(Optional<'s>),
}

/// Encodes a version 2 header into `buf` and returns its length.
///
/// `fixed.vers` is written as given; an error answer copies `rdma_xid` and
/// `rdma_vers` from the offending header ("Transport Errors").
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
        Message::Optional(optional) => {
            fixed.encode(&mut w, proc::OPTIONAL)?;
            w.u32(optional.direction.to_u32())?;
            w.u32(optional.opttype)?;
            w.opaque(optional.optinfo)?;
        }
    }
    Ok(w.len())
}
