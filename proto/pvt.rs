//! RDMA-CM private data for RPC-over-RDMA version 1 (RFC 8797) and the
//! inline thresholds it negotiates.
//!
//! The 8-byte message, in network byte order:
//!
//! ```text
//!  0               1               2               3
//! +---------------+---------------+---------------+---------------+
//! |                 Format Identifier (0xf6ab0e18)                |
//! +---------------+---------------+---------------+---------------+
//! |    Version    |     Flags     |   Send Size   | Receive Size  |
//! +---------------+---------------+---------------+---------------+
//! ```
//!
//! Sizes are encoded as `KiB - 1`, so 1 KiB to 256 KiB fit a byte. The only
//! flag is Remote Invalidation (bit 0 of the flags byte, `Bit 15` in the
//! RFC's numbering); the others are reserved.

use super::negotiate::Version;
use super::xdr;
use super::{v1, v2};

/// The RPC-over-RDMA format identifier registered with IANA.
pub const FORMAT_ID: u32 = 0xf6ab_0e18;
/// The message version this module speaks.
pub const VERSION: u8 = 1;
/// Octets of a version 1 message.
pub const LEN: usize = 8;
/// Flags bit: the sender can receive Send With Invalidate.
pub const FLAG_REMOTE_INVALIDATE: u8 = 1;
/// Smallest size the encoding can express.
pub const MIN_SIZE: u32 = 1024;
/// Largest size the encoding can express.
pub const MAX_SIZE: u32 = 256 * 1024;

/// Encodes a buffer size in bytes: whole KiB minus one, clamped to the
/// representable 1 KiB ..= 256 KiB.
pub fn encode_size(bytes: u32) -> u8 {
    let kib = bytes.clamp(MIN_SIZE, MAX_SIZE) / 1024;
    u8::try_from(kib.saturating_sub(1)).unwrap_or(u8::MAX)
}

/// Decodes a size byte into bytes.
pub fn decode_size(encoded: u8) -> u32 {
    u32::from(encoded).saturating_add(1).saturating_mul(1024)
}

/// The content of an RFC 8797 version 1 message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PrivateData {
    /// The sender can receive Send With Invalidate.
    pub remote_invalidate: bool,
    /// Largest message the sender will send, in bytes.
    pub send_size: u32,
    /// Largest message the sender can receive, in bytes.
    pub recv_size: u32,
}

impl PrivateData {
    /// The 8 bytes to hand to `rdma_connect` or `rdma_accept`. Sizes are
    /// rounded down to whole KiB and clamped to what the format can carry.
    pub fn encode(&self) -> [u8; LEN] {
        let [a, b, c, d] = FORMAT_ID.to_be_bytes();
        let flags = if self.remote_invalidate {
            FLAG_REMOTE_INVALIDATE
        } else {
            0
        };
        [
            a,
            b,
            c,
            d,
            VERSION,
            flags,
            encode_size(self.send_size),
            encode_size(self.recv_size),
        ]
    }

    /// Parses a peer's private data. `None` when it is absent, shorter than
    /// 8 bytes, of another format or of another version: the peer then gets
    /// version 1 defaults. Trailing bytes are ignored, since RDMA-CM pads
    /// private data to the transport's fixed size, and so are the reserved
    /// flag bits.
    pub fn parse(buf: &[u8]) -> Option<Self> {
        let (message, _) = buf.split_first_chunk::<LEN>()?;
        let [_, _, _, _, version, flags, send, recv] = *message;
        if xdr::u32_at(message, 0)? != FORMAT_ID || version != VERSION {
            return None;
        }
        Some(Self {
            remote_invalidate: flags & FLAG_REMOTE_INVALIDATE != 0,
            send_size: decode_size(send),
            recv_size: decode_size(recv),
        })
    }
}

/// A connection's pair of inline thresholds, in bytes (RFC 8166 §3.3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InlineThresholds {
    /// Largest message we may Send to the peer.
    pub send: u32,
    /// Largest message the peer may Send to us.
    pub recv: u32,
}

impl InlineThresholds {
    /// Version 1 default, assumed of a peer that says nothing.
    pub const V1_DEFAULT: InlineThresholds = InlineThresholds {
        send: v1::DEFAULT_INLINE,
        recv: v1::DEFAULT_INLINE,
    };
}

/// What a connection settles on after the private data exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Negotiated {
    /// The thresholds while the connection speaks version 1.
    pub inline: InlineThresholds,
    /// The thresholds once it speaks version 2: never below version 1's,
    /// so buffers sized for these fit both.
    pub inline_v2: InlineThresholds,
    /// The peer advertised that it accepts Send With Invalidate.
    pub peer_remote_invalidate: bool,
}

impl Negotiated {
    /// The thresholds for messages of `version`: a connection changes
    /// them when it settles on version 2, without reconnecting ("Protocol
    /// Version Negotiation").
    pub fn for_version(&self, version: Version) -> InlineThresholds {
        match version {
            Version::V1 => self.inline,
            Version::V2 => self.inline_v2,
        }
    }
}

/// Negotiates inline thresholds from `ours` (what we advertised) and the
/// peer's private data (RFC 8797 §5.2): each way, the smaller of the
/// sender's send size and the receiver's receive size. A peer without
/// valid private data counts as 1024 bytes each way, as in rpcrdma.ko's
/// `rpcrdma_update_cm_private`. Both ends use this same rule.
///
/// On version 2 the peer's sizes are at least 4096 bytes, also without
/// private data: every version 2 receiver "MUST support an inline
/// threshold of 4096 bytes" and a sender without a better mechanism
/// "MUST assume" it (draft-cel-nfsv4-rpcrdma-version-two-02, "Default
/// Values"); larger private data sizes still count. Ours stay what our
/// buffers hold.
pub fn negotiate(ours: InlineThresholds, peer: &[u8]) -> Negotiated {
    let peer = PrivateData::parse(peer);
    let (peer_send, peer_recv) = peer.map_or((v1::DEFAULT_INLINE, v1::DEFAULT_INLINE), |p| {
        (p.send_size, p.recv_size)
    });
    let floor = |size: u32| size.max(v2::DEFAULT_INLINE);
    Negotiated {
        inline: InlineThresholds {
            send: ours.send.min(peer_recv),
            recv: ours.recv.min(peer_send),
        },
        inline_v2: InlineThresholds {
            send: ours.send.min(floor(peer_recv)),
            recv: ours.recv.min(floor(peer_send)),
        },
        peer_remote_invalidate: peer.is_some_and(|p| p.remote_invalidate),
    }
}

/// The size of a Receive buffer, and the receive size we advertise, for
/// a configured `inline_read`: at least version 2's 4096 bytes when we
/// may speak version 2, whose peers send that much without asking.
pub fn recv_size(inline_read: u32, offers_v2: bool) -> u32 {
    if offers_v2 {
        inline_read.max(v2::DEFAULT_INLINE)
    } else {
        inline_read
    }
}
