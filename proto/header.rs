//! What every transport header version shares: the fixed fields, the
//! dispatch on `rdma_vers`, and the checks tying a header to the RPC
//! message that follows it.

use super::error::{DecodeError, EncodeError};
use super::limits::Limits;
use super::xdr::{self, Reader, Writer};
use super::{v1, v2};

/// The first three words of every RPC-over-RDMA header (RFC 8166 §4.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FixedHeader {
    /// `rdma_xid`: the XID of the RPC message this header carries.
    pub xid: u32,
    /// `rdma_vers`: the RPC-over-RDMA version.
    pub vers: u32,
    /// `rdma_credit`: credits requested (in a Call) or granted (in a Reply).
    pub credits: u32,
}

impl FixedHeader {
    /// Decodes the fixed fields and the procedure number that follows them.
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<(Self, u32), DecodeError> {
        let mut word = || r.u32().ok_or(DecodeError::ShortFixedHeader);
        let fixed = Self {
            xid: word()?,
            vers: word()?,
            credits: word()?,
        };
        Ok((fixed, word()?))
    }

    /// Appends the fixed fields and the procedure number.
    pub(crate) fn encode(&self, w: &mut Writer<'_>, proc: u32) -> Result<(), EncodeError> {
        w.u32(self.xid)?;
        w.u32(self.vers)?;
        w.u32(self.credits)?;
        w.u32(proc)
    }
}

/// Reads the fixed fields without decoding further, for example to echo
/// them in an RDMA_ERROR after a [`DecodeError`].
pub fn peek_fixed(buf: &[u8]) -> Option<FixedHeader> {
    FixedHeader::decode(&mut Reader::new(buf))
        .ok()
        .map(|(fixed, _)| fixed)
}

/// RPC `msg_type` (RFC 5531 §9); also the version 2 `rdma_direction`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MsgType {
    /// CALL (0).
    Call,
    /// REPLY (1).
    Reply,
}

impl MsgType {
    /// The XDR value.
    pub fn to_u32(self) -> u32 {
        match self {
            Self::Call => 0,
            Self::Reply => 1,
        }
    }

    /// Parses an XDR value.
    pub fn from_u32(value: u32) -> Option<Self> {
        match value {
            0 => Some(Self::Call),
            1 => Some(Self::Reply),
            _ => None,
        }
    }
}

/// The start of an RPC message (RFC 5531 §9): what the transport needs to
/// route it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RpcPrefix {
    /// The RPC XID.
    pub xid: u32,
    /// CALL or REPLY.
    pub msg_type: MsgType,
}

impl RpcPrefix {
    /// Reads the XID and msg_type at the start of an inline payload and
    /// checks the XID against `rdma_xid` (RFC 8166 §4.5.2).
    pub fn parse(payload: &[u8], rdma_xid: u32) -> Result<Self, DecodeError> {
        let (xid, msg_type) = xdr::u32_at(payload, 0)
            .zip(xdr::u32_at(payload, 4))
            .ok_or(DecodeError::ShortPayload)?;
        if xid != rdma_xid {
            return Err(DecodeError::XidMismatch);
        }
        let msg_type =
            MsgType::from_u32(msg_type).ok_or(DecodeError::BadMsgType { value: msg_type })?;
        Ok(Self { xid, msg_type })
    }
}

/// A decoded header of either version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Header<'a> {
    /// RPC-over-RDMA version 1.
    V1(v1::Header<'a>),
    /// RPC-over-RDMA version 2.
    V2(v2::Header<'a>),
}

impl<'a> Header<'a> {
    /// The fixed fields.
    pub fn fixed(&self) -> FixedHeader {
        match self {
            Self::V1(h) => h.fixed,
            Self::V2(h) => h.fixed,
        }
    }

    /// Offset of the first byte after the transport header.
    pub fn header_len(&self) -> usize {
        match self {
            Self::V1(h) => h.header_len,
            Self::V2(h) => h.header_len,
        }
    }

    /// The inline RPC payload that follows the transport header.
    pub fn payload(&self) -> &'a [u8] {
        match self {
            Self::V1(h) => h.payload,
            Self::V2(h) => h.payload,
        }
    }
}

/// Decodes a header of any supported version, dispatching on `rdma_vers`.
///
/// An unsupported version yields [`DecodeError::BadVersion`], to be
/// answered with ERR_VERS listing versions 1 to 2.
pub fn decode<'a>(buf: &'a [u8], limits: &Limits) -> Result<Header<'a>, DecodeError> {
    decode_with(buf, limits, decode_after_fixed)
}

/// What decodes a header once its fixed fields and `rdma_proc` are read.
pub(crate) type AfterFixed<'a, H> =
    fn(Reader<'a>, FixedHeader, u32, &Limits) -> Result<H, DecodeError>;

/// Reads the fixed fields and `rdma_proc` of `buf`, then decodes the rest
/// with `after`.
pub(crate) fn decode_with<'a, H>(
    buf: &'a [u8],
    limits: &Limits,
    after: AfterFixed<'a, H>,
) -> Result<H, DecodeError> {
    let mut r = Reader::new(buf);
    let (fixed, procedure) = FixedHeader::decode(&mut r)?;
    after(r, fixed, procedure, limits)
}

/// [`decode`] once the fixed fields and `rdma_proc` are read from `r`
/// (the Requester reads them first, to know whose Reply it is).
pub(crate) fn decode_after_fixed<'a>(
    r: Reader<'a>,
    fixed: FixedHeader,
    procedure: u32,
    limits: &Limits,
) -> Result<Header<'a>, DecodeError> {
    match fixed.vers {
        v1::VERSION => v1::decode_after_fixed(r, fixed, procedure, limits).map(Header::V1),
        v2::VERSION => v2::decode_after_fixed(r, fixed, procedure, limits).map(Header::V2),
        vers => Err(DecodeError::BadVersion { vers }),
    }
}
