//! Errors: why a received header was refused, and what to answer.
//!
//! RFC 8166 §4.5 splits the reaction to a bad header by role. A Responder
//! answers with RDMA_ERROR: ERR_VERS for a version it does not speak,
//! ERR_CHUNK for anything it cannot parse. A Requester never answers; it
//! drops the Reply. Some messages are dropped by both: one too short to
//! carry an XID, an RDMA_DONE (§4.6.2), or a malformed RDMA_ERROR (an error
//! is never answered with an error). [`DecodeError::reply_error`] gives the
//! Responder's answer; [`DecodeError::v2_reply_error`] the version 2 one.

use core::fmt;

use super::v2::ErrorCode;

/// The RDMA_ERROR a Responder sends back (RFC 8166 §4.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// ERR_VERS: the header's version is not supported (§4.5.1).
    Vers,
    /// ERR_CHUNK: the header cannot be parsed or violates a limit (§4.5.2).
    Chunk,
}

/// Why a received transport header was refused.
///
/// Each variant is one distinct check, so that counters and traces can tell
/// them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Shorter than the four fixed words (xid, vers, credit, proc): there is
    /// not even an XID to answer to.
    ShortFixedHeader,
    /// `rdma_vers` names a version this decoder does not implement.
    BadVersion {
        /// The received version.
        vers: u32,
    },
    /// `rdma_proc` is not a known procedure.
    UnknownProc {
        /// The received procedure.
        proc: u32,
    },
    /// RDMA_MSGP: no longer supported, Responders answer ERR_CHUNK
    /// (RFC 8166 §4.6.1).
    MsgpNotSupported,
    /// RDMA_DONE: no longer supported, silently discarded (RFC 8166 §4.6.2).
    DoneNotSupported,
    /// The header ends in the middle of a chunk list.
    Truncated,
    /// An optional-data discriminator or XDR `bool` was neither 0 nor 1.
    BadDiscriminator {
        /// The received word.
        value: u32,
    },
    /// A chunk has more segments than [`Limits::max_segments_per_chunk`].
    ///
    /// [`Limits::max_segments_per_chunk`]: super::limits::Limits::max_segments_per_chunk
    TooManySegments,
    /// A list has more chunks than [`Limits::max_chunks_per_list`].
    ///
    /// [`Limits::max_chunks_per_list`]: super::limits::Limits::max_chunks_per_list
    TooManyChunks,
    /// The Read segments add up to more than [`Limits::max_total_bytes`].
    ///
    /// [`Limits::max_total_bytes`]: super::limits::Limits::max_total_bytes
    TooManyBytes,
    /// A Read segment's position is not XDR-aligned (RFC 8166 §3.4.5).
    MisalignedPosition {
        /// The received position.
        position: u32,
    },
    /// A Read chunk is inserted past the end of the inline payload, or of
    /// the Position Zero Read chunk.
    PositionBeyondPayload,
    /// A Read chunk's data overlaps the position of the next one.
    OverlappingReadChunks,
    /// RDMA_NOMSG without any chunk to carry the payload (RFC 8166 §4.5.2).
    NomsgWithoutChunks,
    /// RDMA_MSG whose inline payload is too short for an RPC header.
    ShortPayload,
    /// The RPC message's msg_type is neither CALL nor REPLY.
    BadMsgType {
        /// The received msg_type.
        value: u32,
    },
    /// The RPC message's XID differs from `rdma_xid` (RFC 8166 §4.5.2).
    XidMismatch,
    /// Version 2 `rdma_direction` or `rdma_optdir` is neither CALL nor
    /// REPLY.
    BadDirection {
        /// The received direction.
        value: u32,
    },
    /// Version 2 `rdma_direction` differs from the RPC message's msg_type.
    DirectionMismatch,
    /// An RDMA_ERROR body is truncated or carries an unknown code; errors
    /// are dropped, never answered.
    MalformedError,
}

impl DecodeError {
    /// What a version 1 Responder sends back, or `None` to drop silently.
    ///
    /// A Requester drops every malformed Reply whatever this says
    /// (RFC 8166 §4.5.2).
    pub fn reply_error(&self) -> Option<ErrorKind> {
        match self {
            Self::ShortFixedHeader | Self::DoneNotSupported | Self::MalformedError => None,
            Self::BadVersion { .. } => Some(ErrorKind::Vers),
            Self::UnknownProc { .. }
            | Self::MsgpNotSupported
            | Self::Truncated
            | Self::BadDiscriminator { .. }
            | Self::TooManySegments
            | Self::TooManyChunks
            | Self::TooManyBytes
            | Self::MisalignedPosition { .. }
            | Self::PositionBeyondPayload
            | Self::OverlappingReadChunks
            | Self::NomsgWithoutChunks
            | Self::ShortPayload
            | Self::BadMsgType { .. }
            | Self::XidMismatch
            | Self::BadDirection { .. }
            | Self::DirectionMismatch => Some(ErrorKind::Chunk),
        }
    }

    /// What a version 2 Responder sends back, or `None` to drop silently
    /// (draft-cel-nfsv4-rpcrdma-version-two-02, "Transport Errors").
    pub fn v2_reply_error(&self) -> Option<ErrorCode> {
        match (self, self.reply_error()?) {
            (Self::UnknownProc { .. } | Self::MsgpNotSupported, _) => Some(ErrorCode::InvalProc),
            (_, ErrorKind::Vers) => Some(ErrorCode::Vers),
            (_, ErrorKind::Chunk) => Some(ErrorCode::BadXdr),
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Why a header could not be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// The send buffer is too small for the header.
    BufferTooSmall,
    /// A count or length does not fit its 32-bit XDR field.
    TooLong,
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
