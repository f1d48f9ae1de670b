//! Known-answer self tests, built into both the host crate and the kernel.
//!
//! Each function checks one area against hand-assembled wire images (after
//! the examples of RFC 8166 §4.7 and the XDR of the version 2 draft) or
//! against the decisions rpcrdma.ko makes. They use neither allocation nor
//! `std`, and report the first failed check by name, so the kernel's KUnit
//! suite and `cargo test` run exactly the same assertions.

use core::fmt;

use super::backchannel::{self, Direction, Role};
use super::chunk::{ChunkLists, ChunkSlices, ReadSegment, Segment};
use super::credits::CreditWindow;
use super::error::{DecodeError, ErrorKind};
use super::header::{self, FixedHeader, MsgType};
use super::limits::Limits;
use super::negotiate::{Action, Answer, Negotiator, SendAs, Version};
use super::plan::{self, CallPlan, Connection, DeviceLimits, ReplyPlan, Rpc};
use super::pvt::{self, InlineThresholds, PrivateData};
use super::reply::{self, BadReply, Dropped, Inbound};
use super::v2::{self, ErrorCode};
use super::{v1, xdr};

/// The name of the first check that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SelftestFailure(pub &'static str);

impl fmt::Display for SelftestFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "selftest check failed: {}", self.0)
    }
}

/// What every check returns.
pub type Outcome = Result<(), SelftestFailure>;

fn check(ok: bool, what: &'static str) -> Outcome {
    if ok {
        Ok(())
    } else {
        Err(SelftestFailure(what))
    }
}

/// A wire image assembled from XDR words on the stack (kept small: KUnit
/// runs these on a kernel stack).
struct Wire {
    buf: [u8; 256],
    len: usize,
}

impl Wire {
    fn new(parts: &[&[u32]]) -> Result<Self, SelftestFailure> {
        let mut wire = Self {
            buf: [0; 256],
            len: 0,
        };
        parts.iter().try_for_each(|part| wire.push(part))?;
        Ok(wire)
    }

    fn push(&mut self, words: &[u32]) -> Outcome {
        for word in words {
            // A fixed-size slot: no length check left to fail at run time.
            let slot: &mut [u8; xdr::UNIT] = self
                .buf
                .get_mut(self.len..)
                .and_then(|rest| rest.first_chunk_mut())
                .ok_or(SelftestFailure("wire image too long"))?;
            *slot = word.to_be_bytes();
            self.len = self.len.saturating_add(xdr::UNIT);
        }
        Ok(())
    }

    fn bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }
}

const XID: u32 = 0xcafe_0001;
const CREDITS: u32 = 32;
const H1: Segment = Segment {
    handle: 0x1000_0001,
    length: 8192,
    offset: 0x0000_7f00_0000_1000,
};
const H2: Segment = Segment {
    handle: 0x1000_0002,
    length: 4096,
    offset: 0x0000_7f00_0000_4000,
};
const H3: Segment = Segment {
    handle: 0x1000_0003,
    length: 0x0010_0000,
    offset: 0xffff_8000_0000_0000,
};

/// Words of a plain segment: "HLOO" in RFC 8166 §4.7.
const fn hloo(s: Segment) -> [u32; 4] {
    let [a, b, c, d, e, f, g, h] = s.offset.to_be_bytes();
    [
        s.handle,
        s.length,
        u32::from_be_bytes([a, b, c, d]),
        u32::from_be_bytes([e, f, g, h]),
    ]
}

/// Words of an RDMA read segment: "PHLOO".
const fn phloo(position: u32, s: Segment) -> [u32; 5] {
    let [h, l, o1, o2] = hloo(s);
    [position, h, l, o1, o2]
}

/// An RPC Call header start: what follows RDMA_MSG.
const RPC_CALL: [u32; 2] = [XID, 0];
const RPC_REPLY: [u32; 2] = [XID, 1];

fn fixed(vers: u32) -> FixedHeader {
    FixedHeader {
        xid: XID,
        vers,
        credits: CREDITS,
    }
}

fn lists_match(decoded: &ChunkLists<'_>, expected: &ChunkSlices<'_>) -> bool {
    let reads = decoded.reads.segments().eq(expected.reads.iter().copied());
    let writes = usize::try_from(decoded.writes.chunk_count()) == Ok(expected.writes.len())
        && decoded
            .writes
            .chunks()
            .zip(expected.writes)
            .all(|(chunk, segs)| chunk.segments().eq(segs.iter().copied()));
    let reply = match (decoded.reply, expected.reply) {
        (Some(chunk), Some(segs)) => chunk.segments().eq(segs.iter().copied()),
        (None, None) => true,
        _ => false,
    };
    reads && writes && reply
}

/// Encodes `msg`, compares with `header` words, then decodes `header`
/// followed by `payload` and compares with `msg`.
fn v1_vector(
    header: &[&[u32]],
    payload: &[u32],
    msg: &v1::Message<'_>,
    what: &'static str,
) -> Outcome {
    let expected = Wire::new(header)?;
    let mut out = [0u8; 256];
    let len = v1::encode(&mut out, &fixed(v1::VERSION), msg).map_err(|_| SelftestFailure(what))?;
    check(out.get(..len) == Some(expected.bytes()), what)?;
    check(
        v1::encode(
            out.get_mut(..len.saturating_sub(1)).unwrap_or_default(),
            &fixed(1),
            msg,
        )
        .is_err(),
        what,
    )?;

    let mut wire = Wire::new(header)?;
    wire.push(payload)?;
    let decoded = v1::decode(wire.bytes(), &Limits::DEFAULT).map_err(|_| SelftestFailure(what))?;
    check(
        decoded.fixed == fixed(v1::VERSION) && decoded.header_len == len,
        what,
    )?;
    let ok = match (&decoded.body, msg) {
        (v1::Body::Msg(got), v1::Message::Msg(want))
        | (v1::Body::Nomsg(got), v1::Message::Nomsg(want)) => lists_match(got, want),
        (v1::Body::Error(got), v1::Message::Error(want)) => got == want,
        _ => false,
    };
    check(ok, what)
}

/// Version 1 headers: the chunk list shapes of RFC 8166 §4.7, a Long Call,
/// and both RDMA_ERROR bodies.
pub fn v1_header_vectors() -> Outcome {
    // No chunks: "three 32-bit fields that contain zero".
    v1_vector(
        &[&[XID, 1, CREDITS, 0], &[0, 0, 0]],
        &RPC_CALL,
        &v1::Message::Msg(ChunkSlices::NONE),
        "v1: short message",
    )?;

    // Read chunk "1 PHLOO 1 PHLOO 0" and Reply chunk "1 2 HLOO HLOO".
    let reads = [
        ReadSegment {
            position: 8,
            segment: H1,
        },
        ReadSegment {
            position: 8,
            segment: H2,
        },
    ];
    v1_vector(
        &[
            &[XID, 1, CREDITS, 0],
            &[1],
            &phloo(8, H1),
            &[1],
            &phloo(8, H2),
            &[0, 0, 1, 2],
            &hloo(H2),
            &hloo(H3),
        ],
        &RPC_CALL,
        &v1::Message::Msg(ChunkSlices {
            reads: &reads,
            writes: &[],
            reply: Some(&[H2, H3]),
        }),
        "v1: read chunk and reply chunk",
    )?;

    // Write list "1 3 HLOO HLOO HLOO 1 2 HLOO HLOO 0".
    v1_vector(
        &[
            &[XID, 1, CREDITS, 0, 0, 1, 3],
            &hloo(H1),
            &hloo(H2),
            &hloo(H3),
            &[1, 2],
            &hloo(H3),
            &hloo(H1),
            &[0, 0],
        ],
        &RPC_REPLY,
        &v1::Message::Msg(ChunkSlices {
            reads: &[],
            writes: &[&[H1, H2, H3], &[H3, H1]],
            reply: None,
        }),
        "v1: write list of two chunks",
    )?;

    // Long Call: RDMA_NOMSG with a Position Zero Read chunk.
    let call = [ReadSegment {
        position: 0,
        segment: H3,
    }];
    v1_vector(
        &[
            &[XID, 1, CREDITS, 1, 1],
            &phloo(0, H3),
            &[0, 0, 1, 1],
            &hloo(H1),
        ],
        &[],
        &v1::Message::Nomsg(ChunkSlices {
            reads: &call,
            writes: &[],
            reply: Some(&[H1]),
        }),
        "v1: long call",
    )?;

    v1_vector(
        &[&[XID, 1, CREDITS, 4, 1, 1, 1]],
        &[],
        &v1::Message::Error(v1::RdmaError::Vers { low: 1, high: 1 }),
        "v1: ERR_VERS",
    )?;
    v1_vector(
        &[&[XID, 1, CREDITS, 4, 2]],
        &[],
        &v1::Message::Error(v1::RdmaError::Chunk),
        "v1: ERR_CHUNK",
    )?;

    // The views group Read segments into chunks by position.
    let wire = Wire::new(&[
        &[XID, 1, CREDITS, 1, 1],
        &phloo(0, H1),
        &[1],
        &phloo(0, H2),
        &[1],
        &phloo(12, H3),
        &[0, 0, 0],
    ])?;
    let header = v1::decode(wire.bytes(), &Limits::DEFAULT)
        .map_err(|_| SelftestFailure("v1: read chunks"))?;
    let v1::Body::Nomsg(lists) = header.body else {
        return Err(SelftestFailure("v1: read chunks"));
    };
    let mut chunks = lists.reads.chunks();
    let zero = lists.reads.position_zero();
    check(
        lists.reads.chunk_count() == 2
            && chunks
                .next()
                .is_some_and(|c| c.position() == 0 && c.len() == 2)
            && chunks
                .next()
                .is_some_and(|c| c.position() == 12 && c.len() == 1)
            && chunks.next().is_none()
            && zero.is_some_and(|c| c.total_length() == 8192 + 4096),
        "v1: read chunks grouped by position",
    )
}

fn v2_vector(
    header: &[&[u32]],
    payload: &[u32],
    msg: &v2::Message<'_>,
    what: &'static str,
) -> Outcome {
    let expected = Wire::new(header)?;
    let mut out = [0u8; 256];
    let len = v2::encode(&mut out, &fixed(v2::VERSION), msg).map_err(|_| SelftestFailure(what))?;
    check(out.get(..len) == Some(expected.bytes()), what)?;

    let mut wire = Wire::new(header)?;
    wire.push(payload)?;
    let decoded = v2::decode(wire.bytes(), &Limits::DEFAULT).map_err(|_| SelftestFailure(what))?;
    check(
        decoded.fixed == fixed(v2::VERSION) && decoded.header_len == len,
        what,
    )?;
    let ok = match (&decoded.body, msg) {
        (v2::Body::Msg(got), v2::Message::Msg(want))
        | (v2::Body::Nomsg(got), v2::Message::Nomsg(want)) => {
            got.direction == want.direction
                && got.inv_handle == want.inv_handle
                && lists_match(&got.lists, &want.lists)
        }
        (v2::Body::Error(got), v2::Message::Error(want)) => got == want,
        (v2::Body::Optional(got), v2::Message::Optional(want)) => got == want,
        _ => false,
    };
    check(ok, what)
}

/// Version 2 headers: chunk lists with direction and invalidation handle,
/// the five RDMA2_ERROR codes, and RDMA2_OPTIONAL with padded content.
pub fn v2_header_vectors() -> Outcome {
    let reads = [ReadSegment {
        position: 8,
        segment: H1,
    }];
    v2_vector(
        &[
            &[XID, 2, CREDITS, 0, 0, H1.handle, 1],
            &phloo(8, H1),
            &[0, 0, 1, 1],
            &hloo(H2),
        ],
        &RPC_CALL,
        &v2::Message::Msg(v2::Chunks {
            direction: MsgType::Call,
            inv_handle: H1.handle,
            lists: ChunkSlices {
                reads: &reads,
                writes: &[],
                reply: Some(&[H2]),
            },
        }),
        "v2: call with read and reply chunks",
    )?;
    v2_vector(
        &[&[XID, 2, CREDITS, 0, 1, 0, 0, 1, 1], &hloo(H3), &[0, 0]],
        &RPC_REPLY,
        &v2::Message::Msg(v2::Chunks {
            direction: MsgType::Reply,
            inv_handle: 0,
            lists: ChunkSlices {
                reads: &[],
                writes: &[&[H3]],
                reply: None,
            },
        }),
        "v2: reply with write chunk",
    )?;
    v2_vector(
        &[&[XID, 2, CREDITS, 1, 1, 0, 0, 0, 1, 1], &hloo(H2)],
        &[],
        &v2::Message::Nomsg(v2::Chunks {
            direction: MsgType::Reply,
            inv_handle: 0,
            lists: ChunkSlices {
                reads: &[],
                writes: &[],
                reply: Some(&[H2]),
            },
        }),
        "v2: long reply",
    )?;

    let errors: [(&[u32], v2::RdmaError); 5] = [
        (&[1, 1, 2], v2::RdmaError::Vers { low: 1, high: 2 }),
        (&[2], v2::RdmaError::BadXdr),
        (
            &[3, 1, 2, 65536],
            v2::RdmaError::CantReply {
                processed: true,
                segment_index: 2,
                length_needed: 65536,
            },
        ),
        (&[4], v2::RdmaError::InvalProc),
        (&[5], v2::RdmaError::InvalOption),
    ];
    for (body, error) in errors {
        v2_vector(
            &[&[XID, 2, CREDITS, 4], body],
            &[],
            &v2::Message::Error(error),
            "v2: RDMA2_ERROR",
        )?;
    }

    let optional = v2::Optional {
        direction: MsgType::Call,
        opttype: 0x00c0_ffee,
        optinfo: b"hello",
    };
    v2_vector(
        &[&[
            XID,
            2,
            CREDITS,
            5,
            0,
            0x00c0_ffee,
            5,
            0x6865_6c6c,
            0x6f00_0000,
        ]],
        &[],
        &v2::Message::Optional(optional),
        "v2: RDMA2_OPTIONAL",
    )?;

    // Both versions decode through the common entry point.
    let wire = Wire::new(&[&[XID, 2, CREDITS, 0, 0, 0, 0, 0, 0], &RPC_CALL])?;
    check(
        matches!(
            header::decode(wire.bytes(), &Limits::DEFAULT),
            Ok(header::Header::V2(_))
        ),
        "v2: dispatch on rdma_vers",
    )
}

/// RFC 8797 private data: the byte layout, size encoding, and the
/// threshold negotiation, including the 1024-byte fallbacks.
pub fn pvt_data_vectors() -> Outcome {
    let ours = PrivateData {
        remote_invalidate: true,
        send_size: 4096,
        recv_size: 8192,
    };
    let bytes = ours.encode();
    check(bytes == [0xf6, 0xab, 0x0e, 0x18, 1, 1, 3, 7], "pvt: encode")?;
    check(PrivateData::parse(&bytes) == Some(ours), "pvt: parse")?;
    check(
        pvt::encode_size(0) == 0
            && pvt::encode_size(1024) == 0
            && pvt::encode_size(2047) == 0
            && pvt::encode_size(256 * 1024) == 255
            && pvt::encode_size(u32::MAX) == 255
            && pvt::decode_size(255) == 256 * 1024,
        "pvt: size encoding",
    )?;

    let local = InlineThresholds {
        send: 4096,
        recv: 4096,
    };
    // Peer (server) sends 64 KiB replies, receives 2 KiB calls.
    let peer = [0xf6, 0xab, 0x0e, 0x18, 1, 0, 63, 1, 0xee, 0xee];
    let got = pvt::negotiate(local, &peer);
    check(
        got.inline.send == 2048 && got.inline.recv == 4096 && !got.peer_remote_invalidate,
        "pvt: negotiate",
    )?;
    let fallback = InlineThresholds::V1_DEFAULT;
    let cases: [&[u8]; 4] = [
        &[],
        &[0xf6, 0xab, 0x0e, 0x18, 1, 1, 3],
        &[0xde, 0xad, 0xbe, 0xef, 1, 1, 3, 3],
        &[0xf6, 0xab, 0x0e, 0x18, 2, 1, 3, 3],
    ];
    for case in cases {
        check(
            pvt::negotiate(local, case).inline == fallback,
            "pvt: absent, short, foreign or future data means 1024",
        )?;
    }
    check(
        pvt::negotiate(
            InlineThresholds {
                send: 1024,
                recv: 512,
            },
            &bytes,
        )
        .inline
            == InlineThresholds {
                send: 1024,
                recv: 512,
            },
        "pvt: never above our own sizes",
    )
}

/// A wire image, the error it must yield, and the Responder's answer.
type MalformedCase<'w> = (&'w [&'w [u32]], DecodeError, Option<ErrorKind>);

/// One malformed header per check, each with the answer RFC 8166 §4.5
/// requires of a Responder.
pub fn malformed_input() -> Outcome {
    let tight = Limits {
        max_segments_per_chunk: 2,
        max_chunks_per_list: 2,
        max_total_bytes: 16384,
        position_alignment: 4,
    };
    let seg = hloo(Segment {
        handle: 1,
        length: 16,
        offset: 0,
    });
    let seg4 = phloo(4, H2);
    let cases: [MalformedCase<'_>; 21] = [
        (&[&[XID, 1, CREDITS]], DecodeError::ShortFixedHeader, None),
        (
            &[&[XID, 3, CREDITS, 0]],
            DecodeError::BadVersion { vers: 3 },
            Some(ErrorKind::Vers),
        ),
        (
            &[&[XID, 1, CREDITS, 9]],
            DecodeError::UnknownProc { proc: 9 },
            Some(ErrorKind::Chunk),
        ),
        (
            &[&[XID, 1, CREDITS, 2, 0, 0, 0, 0]],
            DecodeError::MsgpNotSupported,
            Some(ErrorKind::Chunk),
        ),
        (
            &[&[XID, 1, CREDITS, 3]],
            DecodeError::DoneNotSupported,
            None,
        ),
        (
            &[&[XID, 1, CREDITS, 0, 1, 4, 1]],
            DecodeError::Truncated,
            Some(ErrorKind::Chunk),
        ),
        (
            &[&[XID, 1, CREDITS, 0, 2]],
            DecodeError::BadDiscriminator { value: 2 },
            Some(ErrorKind::Chunk),
        ),
        (
            &[&[XID, 1, CREDITS, 0, 0, 1, 3], &seg, &seg, &seg],
            DecodeError::TooManySegments,
            Some(ErrorKind::Chunk),
        ),
        (
            &[&[XID, 1, CREDITS, 0, 0, 1, 0, 1, 0, 1, 0]],
            DecodeError::TooManyChunks,
            Some(ErrorKind::Chunk),
        ),
        (
            &[&[XID, 1, CREDITS, 1, 1], &phloo(0, H3), &[0, 0, 0]],
            DecodeError::TooManyBytes,
            Some(ErrorKind::Chunk),
        ),
        (
            &[&[XID, 1, CREDITS, 1, 1], &phloo(6, H1)],
            DecodeError::MisalignedPosition { position: 6 },
            Some(ErrorKind::Chunk),
        ),
        // In either order (RFC 8166 does not order the Read list).
        (
            &[
                &[XID, 1, CREDITS, 0, 1],
                &phloo(8, H2),
                &[1],
                &seg4,
                &[0, 0, 0],
                &RPC_CALL,
            ],
            DecodeError::OverlappingReadChunks,
            Some(ErrorKind::Chunk),
        ),
        (
            &[
                &[XID, 1, CREDITS, 0, 1],
                &phloo(12, H2),
                &[0, 0, 0],
                &RPC_CALL,
            ],
            DecodeError::PositionBeyondPayload,
            Some(ErrorKind::Chunk),
        ),
        (
            &[
                &[XID, 1, CREDITS, 0, 1],
                &seg4,
                &[1],
                &phloo(8, H2),
                &[0, 0, 0],
                &RPC_CALL,
            ],
            DecodeError::OverlappingReadChunks,
            Some(ErrorKind::Chunk),
        ),
        (
            &[&[XID, 1, CREDITS, 1, 0, 0, 0]],
            DecodeError::NomsgWithoutChunks,
            Some(ErrorKind::Chunk),
        ),
        (
            &[&[XID, 1, CREDITS, 0, 0, 0, 0, XID]],
            DecodeError::ShortPayload,
            Some(ErrorKind::Chunk),
        ),
        (
            &[&[XID, 1, CREDITS, 0, 0, 0, 0, 7, 0]],
            DecodeError::XidMismatch,
            Some(ErrorKind::Chunk),
        ),
        (
            &[&[XID, 1, CREDITS, 0, 0, 0, 0, XID, 2]],
            DecodeError::BadMsgType { value: 2 },
            Some(ErrorKind::Chunk),
        ),
        (
            &[&[XID, 2, CREDITS, 0, 3]],
            DecodeError::BadDirection { value: 3 },
            Some(ErrorKind::Chunk),
        ),
        (
            &[&[XID, 2, CREDITS, 0, 1, 0, 0, 0, 0], &RPC_CALL],
            DecodeError::DirectionMismatch,
            Some(ErrorKind::Chunk),
        ),
        (
            &[&[XID, 1, CREDITS, 4, 7]],
            DecodeError::MalformedError,
            None,
        ),
    ];
    for (words, error, answer) in cases {
        let wire = Wire::new(words)?;
        let got = header::decode(wire.bytes(), &tight);
        check(got == Err(error), "malformed: wrong error")?;
        check(error.reply_error() == answer, "malformed: wrong answer")?;
    }
    check(
        DecodeError::UnknownProc { proc: 9 }.v2_reply_error() == Some(ErrorCode::InvalProc)
            && DecodeError::Truncated.v2_reply_error() == Some(ErrorCode::BadXdr)
            && DecodeError::BadVersion { vers: 3 }.v2_reply_error() == Some(ErrorCode::Vers)
            && DecodeError::DoneNotSupported.v2_reply_error().is_none(),
        "malformed: version 2 answers",
    )?;
    // Every proper prefix of a valid header is refused, never accepted.
    let wire = Wire::new(&[
        &[XID, 1, CREDITS, 0, 1],
        &phloo(0, H1),
        &[0, 1, 1],
        &hloo(H2),
        &[0, 0],
        &RPC_CALL,
    ])?;
    let full = wire.bytes();
    let header_len = full.len().saturating_sub(8);
    for cut in 0..header_len {
        check(
            v1::decode(full.get(..cut).unwrap_or_default(), &Limits::DEFAULT).is_err(),
            "malformed: truncated header accepted",
        )?;
    }
    check(
        v1::decode(full, &Limits::DEFAULT).is_ok(),
        "malformed: baseline rejected",
    )
}

/// Chunk planning decisions, table-driven against what rpcrdma.ko's
/// `rpcrdma_marshal_req` chooses, and the credit window.
pub fn planner_decisions() -> Outcome {
    // A typical mlx5: large MRs, so 3 segments per chunk.
    let mlx5 = DeviceLimits {
        max_fast_reg_page_list_len: 512,
        max_sge_rd: 30,
        max_send_sge: 30,
        page_size: 4096,
    };
    check(
        mlx5.max_fr_depth() == 30 && mlx5.max_rdma_segs() == 11 && mlx5.send_sges() == 19,
        "plan: device limits",
    )?;
    let small = DeviceLimits {
        max_fast_reg_page_list_len: 16,
        max_sge_rd: 1,
        max_send_sge: 4,
        page_size: 4096,
    };
    check(small.max_rdma_segs() == 16, "plan: small device")?;
    check(
        mlx5.segments_for(0, 1 << 20) == 9
            && mlx5.segments_for(100, 4096) == 1
            && small.segments_for(4000, 200) == 1,
        "plan: segments for a payload",
    )?;

    let conn = Connection::new(
        InlineThresholds {
            send: 4096,
            recv: 4096,
        },
        &mlx5,
    );
    check(
        conn.max_inline_send == 4096 - 316 && conn.max_inline_recv == 4096 - 212,
        "plan: inline budget",
    )?;

    let getattr = Rpc {
        call_len: 200,
        reply_max: 300,
        reply_nonpayload: 300,
        ddp_allowed: true,
        ..Rpc::default()
    };
    let read = Rpc {
        reply_max: 1 << 20,
        reply_nonpayload: 400,
        reply_ddp: true,
        ..getattr
    };
    let write = Rpc {
        call_len: 65536 + 300,
        call_page_len: 65536,
        call_ddp: true,
        ..getattr
    };
    let readdir = Rpc {
        reply_max: 32768,
        reply_nonpayload: 32768,
        ..getattr
    };
    let big_compound = Rpc {
        call_len: 5000,
        ..getattr
    };
    let cases = [
        (
            getattr,
            CallPlan::Inline,
            ReplyPlan::Inline,
            "plan: GETATTR",
        ),
        (read, CallPlan::Inline, ReplyPlan::WriteChunk, "plan: READ"),
        (
            Rpc {
                ddp_allowed: false,
                ..read
            },
            CallPlan::Inline,
            ReplyPlan::ReplyChunk,
            "plan: READ under krb5i",
        ),
        (write, CallPlan::ReadChunk, ReplyPlan::Inline, "plan: WRITE"),
        (
            Rpc {
                ddp_allowed: false,
                ..write
            },
            CallPlan::PositionZero,
            ReplyPlan::Inline,
            "plan: WRITE under krb5p",
        ),
        (
            readdir,
            CallPlan::Inline,
            ReplyPlan::ReplyChunk,
            "plan: READDIR",
        ),
        (
            big_compound,
            CallPlan::PositionZero,
            ReplyPlan::Inline,
            "plan: large call",
        ),
        (
            Rpc {
                call_len: 3000,
                call_page_len: 2000,
                call_page_base: 4000,
                ..getattr
            },
            CallPlan::Inline,
            ReplyPlan::Inline,
            "plan: small page payload inline",
        ),
    ];
    for (rpc, call, reply, what) in cases {
        let got = plan::plan(&rpc, &conn);
        check(got.call == call && got.reply == reply, what)?;
    }
    // The thresholds' edges: `<=` for whole messages, `<` for the
    // non-payload part of a Write chunk Reply, as in rpc_rdma.c.
    let send = conn.max_inline_send;
    let recv = conn.max_inline_recv;
    let edges = [
        (
            Rpc {
                call_len: send,
                reply_max: recv,
                ..getattr
            },
            CallPlan::Inline,
            ReplyPlan::Inline,
        ),
        (
            Rpc {
                call_len: send.saturating_add(1),
                reply_max: recv.saturating_add(1),
                ..getattr
            },
            CallPlan::PositionZero,
            ReplyPlan::ReplyChunk,
        ),
        (
            Rpc {
                reply_nonpayload: recv.saturating_sub(1),
                ..read
            },
            CallPlan::Inline,
            ReplyPlan::WriteChunk,
        ),
        (
            Rpc {
                reply_nonpayload: recv,
                ..read
            },
            CallPlan::Inline,
            ReplyPlan::ReplyChunk,
        ),
    ];
    for (rpc, call, reply) in edges {
        let got = plan::plan(&rpc, &conn);
        check(
            got.call == call && got.reply == reply,
            "plan: threshold edges",
        )?;
    }
    // Too many pages for the device's Send SGEs forces a chunk.
    let narrow = Connection::new(
        InlineThresholds {
            send: 4096,
            recv: 4096,
        },
        &small,
    );
    let paged = Rpc {
        call_len: 2100,
        call_page_len: 2000,
        call_page_base: 4000,
        ..getattr
    };
    check(
        plan::plan(&paged, &narrow).call == CallPlan::PositionZero,
        "plan: SGE limit",
    )?;
    check(
        plan::plan(&big_compound, &conn).proc() == v1::proc::NOMSG
            && plan::plan(&getattr, &conn).proc() == v1::proc::MSG,
        "plan: rdma_proc",
    )?;

    // Credits: start at one, sanitise grants, never exceed them.
    let mut window = CreditWindow::new(128);
    check(
        window.try_acquire() && !window.try_acquire(),
        "credits: one until granted",
    )?;
    check(
        window.update(0) == 1 && window.update(100_000) == 128,
        "credits: sanitised",
    )?;
    let mut sent = 1u32;
    while window.try_acquire() {
        sent = sent.saturating_add(1);
    }
    check(
        sent == 128 && window.available() == 0,
        "credits: window full",
    )?;
    window.update(4);
    check(
        !window.try_acquire(),
        "credits: shrunk grant holds new calls",
    )?;
    window.release();
    window.reset();
    check(
        window.in_flight() == 0 && window.granted() == 1,
        "credits: reset",
    )
}

/// The version negotiation state machine and message direction rules.
pub fn negotiation() -> Outcome {
    // A version 2 peer.
    let mut n = Negotiator::new();
    check(
        n.send(1) == SendAs::Probe { max_inline: 1024 },
        "negotiate: probe first",
    )?;
    check(
        n.send(2) == SendAs::Wait,
        "negotiate: one call during probe",
    )?;
    check(
        n.on_answer(1, Answer::Reply { vers: 2 }) == Action::None,
        "negotiate: v2 reply",
    )?;
    check(
        n.send(2) == SendAs::Version(Version::V2),
        "negotiate: settled on v2",
    )?;

    // A version 1 peer answers ERR_VERS 1..1: resend as v1, and remember.
    let mut n = Negotiator::new();
    n.send(7);
    check(
        n.on_answer(8, Answer::ErrVers { low: 1, high: 1 }) == Action::None,
        "negotiate: other xid",
    )?;
    check(
        n.on_answer(7, Answer::ErrVers { low: 1, high: 1 }) == Action::ResendAsV1 { xid: 7 },
        "negotiate: fall back",
    )?;
    check(n.version() == Some(Version::V1), "negotiate: settled on v1")?;
    n.on_connect();
    check(
        n.send(9) == SendAs::Version(Version::V1),
        "negotiate: remembered across reconnect",
    )?;

    // A lost probe means version 1 too.
    let mut n = Negotiator::new();
    n.send(3);
    check(
        n.on_probe_lost() == Action::ResendAsV1 { xid: 3 },
        "negotiate: lost probe",
    )?;
    check(
        n.on_probe_lost() == Action::None,
        "negotiate: nothing left to lose",
    )?;

    // No common version.
    let mut n = Negotiator::new();
    n.send(4);
    check(
        n.on_answer(4, Answer::ErrVers { low: 3, high: 4 }) == Action::Incompatible
            && n.send(5) == SendAs::Wait,
        "negotiate: incompatible",
    )?;

    // Direction: a backward Call from the server on a client's connection.
    let wire = Wire::new(&[&[XID, 1, 8, 0, 0, 0, 0], &RPC_CALL])?;
    let msg = header::decode(wire.bytes(), &Limits::DEFAULT)
        .map_err(|_| SelftestFailure("direction: decode"))?;
    check(
        backchannel::classify(Role::Client, &msg) == Ok(Direction::BackwardCall)
            && backchannel::classify(Role::Server, &msg) == Ok(Direction::ForwardCall),
        "direction: by msg_type",
    )?;
    let wire = Wire::new(&[&[XID, 1, 8, 0, 0, 0, 1, 1], &hloo(H1), &RPC_REPLY])?;
    let msg = header::decode(wire.bytes(), &Limits::DEFAULT)
        .map_err(|_| SelftestFailure("direction: decode"))?;
    check(
        backchannel::classify(Role::Client, &msg) == Ok(Direction::ForwardReply)
            && backchannel::classify(Role::Server, &msg)
                == Err(backchannel::ClassifyError::BackwardWithChunks),
        "direction: backward messages carry no chunks",
    )?;
    let mut out = [0u8; 32];
    let len = backchannel::encode_backward_v1(&mut out, XID, 0).unwrap_or(0);
    let expected = Wire::new(&[&[XID, 1, 1, 0, 0, 0, 0]])?;
    check(
        out.get(..len) == Some(expected.bytes()),
        "direction: backward header",
    )?;
    check(
        backchannel::backward_credit(0) == 1 && backchannel::client_receive_buffers(5, 2) == 7,
        "direction: backchannel credits",
    )
}

/// The Requester's chunk rules: FRWR segmentation, the written lengths a
/// Reply may claim, the Write-list layout and the Send With Invalidate
/// key check.
pub fn requester_chunk_rules() -> Outcome {
    let page = 4096;
    let whole = [(0u32, 4096u32); 40];
    check(
        plan::mr_segments(whole, 32, page) == 32
            && plan::mr_segments([(100, 200), (0, 4096)], 32, page) == 1
            && plan::mr_segments([(100, 3996), (0, 4096), (0, 5)], 32, page) == 3
            && plan::mr_segments([(0, 4096), (8, 100)], 32, page) == 1,
        "frwr: MR segmentation",
    )?;
    let f = plan::write_fixup(140, 1 << 20, 112, 1001);
    check(
        f.trim_head == Some(112) && f.head_copy == 112 && f.total == 112 + 1004,
        "frwr: write list trim",
    )?;
    check(
        plan::write_fixup(100, 4096, 100, 4099).total == 4196,
        "frwr: written length bounded by the pages",
    )?;
    check(
        plan::remote_invalidation_ok(5, [7, 5]) == Some(1)
            && plan::remote_invalidation_ok(6, [7, 5]).is_none(),
        "frwr: remote invalidation key",
    )?;
    // A Reply claiming 4097 bytes in a 4096-byte Reply chunk.
    let mut buf = [0u8; 64];
    let seg = [Segment {
        handle: 1,
        length: 4097,
        offset: 0,
    }];
    let chunks = ChunkSlices {
        reply: Some(&seg),
        ..ChunkSlices::NONE
    };
    let n = v1::encode(&mut buf, &fixed(1), &v1::Message::Nomsg(chunks))
        .map_err(|_| SelftestFailure("frwr: encode"))?;
    let hdr = v1::decode(buf.get(..n).unwrap_or(&[]), &Limits::DEFAULT)
        .map_err(|_| SelftestFailure("frwr: decode"))?;
    let offered = plan::Offered {
        write_chunk: None,
        reply_chunk: Some(4096),
    };
    let too_long = match hdr.body {
        v1::Body::Nomsg(lists) => plan::check_reply(true, &lists, &offered),
        _ => Ok(plan::ReplyShape::Inline),
    };
    check(
        too_long == Err(plan::BadReply::TooLong),
        "frwr: reply chunk overrun refused",
    )
}

/// What a Requester does with what it receives (`reply::classify`): a
/// header that does not decode fails the RPC it names, at once; a message
/// without an XID, or of another version, touches none; the grant is
/// clamped; a zero-length Reply chunk is accepted unused in RDMA_MSG and
/// refused as the carrier of an RDMA_NOMSG Reply.
pub fn requester_receive_rules() -> Outcome {
    let fails = |parts: &[&[u32]], want: BadReply, what| -> Outcome {
        let wire = Wire::new(parts)?;
        check(
            matches!(
                reply::classify(wire.bytes(), CREDITS),
                Inbound::Reply { xid: XID, body: Err(got), .. } if got == want
            ),
            what,
        )
    };
    fails(
        &[&[XID, 1, CREDITS, v1::proc::MSGP, 0, 0, 0, 0]],
        BadReply::Header(DecodeError::MsgpNotSupported),
        "reply: RDMA_MSGP fails its RPC",
    )?;
    fails(
        &[&[XID, 1, CREDITS, 7, 0, 0, 0]],
        BadReply::Header(DecodeError::UnknownProc { proc: 7 }),
        "reply: unknown procedure fails its RPC",
    )?;
    fails(
        &[&[XID, 1, CREDITS, v1::proc::ERROR, 1]],
        BadReply::Header(DecodeError::MalformedError),
        "reply: truncated ERR_VERS fails its RPC",
    )?;
    fails(
        &[&[XID, 1, CREDITS, v1::proc::ERROR, 99]],
        BadReply::Header(DecodeError::MalformedError),
        "reply: unknown RDMA_ERROR fails its RPC",
    )?;
    fails(
        &[&[XID, 1, CREDITS, v1::proc::ERROR, 2]],
        BadReply::Error(v1::RdmaError::Chunk),
        "reply: ERR_CHUNK fails its RPC",
    )?;
    // Checked against what was registered: the byte limit is the Read
    // list's.
    let huge = Wire::new(&[
        &[XID, 1, CREDITS, v1::proc::MSG, 0, 1, 1],
        &hloo(Segment {
            handle: 0xdead_beef,
            length: 0x7fff_ffff,
            offset: 0,
        }),
        &[0, 0],
        &RPC_REPLY,
    ])?;
    let offered = plan::Offered {
        write_chunk: Some(1 << 20),
        reply_chunk: None,
    };
    check(
        matches!(
            reply::classify(huge.bytes(), CREDITS),
            Inbound::Reply { body: Ok(body), .. }
                if plan::check_reply(body.nomsg, &body.lists, &offered)
                    == Err(plan::BadReply::TooLong)
        ),
        "reply: 0x7fffffff written refused",
    )?;
    let short = Wire::new(&[&[XID, 1, CREDITS]])?;
    check(
        reply::classify(short.bytes(), CREDITS) == Inbound::Dropped(Dropped::Short),
        "reply: no XID, no RPC",
    )?;
    let v9 = Wire::new(&[&[XID, 9, CREDITS, 0]])?;
    check(
        reply::classify(v9.bytes(), CREDITS) == Inbound::Dropped(Dropped::Version { vers: 9 }),
        "reply: other version, no RPC",
    )?;
    let greedy = Wire::new(&[&[XID, 1, 5000, v1::proc::MSG, 0, 0, 0], &RPC_REPLY])?;
    check(
        matches!(
            reply::classify(greedy.bytes(), CREDITS),
            Inbound::Reply {
                credits: CREDITS,
                body: Ok(_),
                ..
            }
        ),
        "reply: grant clamped",
    )?;
    let offered = plan::Offered {
        write_chunk: None,
        reply_chunk: Some(4096),
    };
    let empty = hloo(Segment {
        handle: 1,
        length: 0,
        offset: 0,
    });
    let unused = Wire::new(&[
        &[XID, 1, CREDITS, v1::proc::MSG, 0, 0, 1, 1],
        &empty,
        &RPC_REPLY,
    ])?;
    let nomsg = Wire::new(&[&[XID, 1, CREDITS, v1::proc::NOMSG, 0, 0, 1, 1], &empty])?;
    let shape = |wire: &Wire| match reply::classify(wire.bytes(), CREDITS) {
        Inbound::Reply { body: Ok(b), .. } => Some(plan::check_reply(b.nomsg, &b.lists, &offered)),
        _ => None,
    };
    check(
        shape(&unused) == Some(Ok(plan::ReplyShape::Inline)),
        "reply: unused empty Reply chunk accepted",
    )?;
    check(
        shape(&nomsg) == Some(Err(plan::BadReply::BadNomsg)),
        "reply: empty Reply chunk refused for RDMA_NOMSG",
    )?;
    // A backward Call is routed before its credits are read: nfsd's grant
    // of 2 must never reach the forward window.
    let bcall = Wire::new(&[&[XID, 1, 2, v1::proc::MSG, 0, 0, 0], &RPC_CALL])?;
    check(
        matches!(
            reply::classify(bcall.bytes(), CREDITS),
            Inbound::BackwardCall(h) if h.fixed.credits == 2
        ),
        "backchannel: a backward Call is no Reply",
    )?;
    let max = backchannel::client_max_payload(4096, 4096, 4096);
    check(
        max == 4068
            && backchannel::client_max_payload(1024, 65536, 4096) == 996
            && backchannel::check_call(&[0; 8], max).is_ok()
            && backchannel::check_call(&[0; 8], 4)
                == Err(backchannel::CallDropped::TooLong { len: 8, max: 4 }),
        "backchannel: payload limit",
    )?;
    let all = backchannel::SlotMask::all(backchannel::CLIENT_SLOTS);
    check(
        all.claim() == Some((0, backchannel::SlotMask(0xfffe)))
            && backchannel::SlotMask(0).claim().is_none()
            && all.release(0).is_none()
            && backchannel::SlotMask(0).release(40).is_none(),
        "backchannel: slots claimed once",
    )
}

/// The Send path's economy: which parts of a Call are copied and which
/// mapped, which Sends are signalled, and the Receive batch.
pub fn send_economy() -> Outcome {
    use super::plan::{send_layout, CallBuf, Range, SendLayout, PULLUP_MAX};
    use super::queue::{recv_batch, send_batch, SendSignals};
    let page = 4096;
    let r = |offset, len| Range { offset, len };
    // A 3000-byte inline WRITE: head 120, pages at offset 8, tail 4.
    let write = CallBuf {
        head: 120,
        page_base: 8,
        page_len: 3000,
        tail: 4,
    };
    check(
        send_layout(CallPlan::Inline, &write, 19, page)
            == SendLayout {
                copy: [r(0, 120), r(3120, 4)],
                mapped: Some(r(120, 3000)),
            },
        "send: large inline page data mapped",
    )?;
    // Pages that need more SGEs than the device has are copied.
    check(
        send_layout(CallPlan::Inline, &write, 3, page)
            == SendLayout {
                copy: [r(0, 3124), r(0, 0)],
                mapped: None,
            },
        "send: pulled up when SGEs run out",
    )?;
    let small = CallBuf {
        page_len: PULLUP_MAX - 1,
        tail: 0,
        ..write
    };
    check(
        send_layout(CallPlan::Inline, &small, 19, page)
            .mapped
            .is_none()
            && send_layout(CallPlan::Inline, &small, 19, page).copy[0]
                == r(0, 120 + PULLUP_MAX - 1),
        "send: small page data pulled up",
    )?;
    // Read chunk: the tail without the page data's pad (3 bytes of 11).
    let chunked = CallBuf {
        head: 100,
        page_base: 0,
        page_len: 1 << 20 | 1,
        tail: 11,
    };
    check(
        send_layout(CallPlan::ReadChunk, &chunked, 19, page)
            == SendLayout {
                copy: [r(0, 100), r(100 + (1 << 20 | 1) + 3, 8)],
                mapped: None,
            },
        "send: read chunk skips the XDR pad",
    )?;
    check(
        send_layout(
            CallPlan::ReadChunk,
            &CallBuf { tail: 3, ..chunked },
            19,
            page,
        )
        .copy[1]
            == r(0, 0)
            && send_layout(CallPlan::PositionZero, &write, 19, page) == SendLayout::default(),
        "send: pad-only tail and Long Call send no data",
    )?;
    // What the chunks carry: a Read chunk the page data at its position,
    // a Long Call all of it; a Write chunk the Reply's pages, with the pad
    // segment when they end unaligned; a Reply chunk the whole Reply.
    let both = plan::Plan {
        call: CallPlan::ReadChunk,
        reply: ReplyPlan::WriteChunk,
    };
    let rbuf = plan::ReplyBuf {
        head: 200,
        page_len: 1001,
        tail: 3,
    };
    let regs = plan::registrations(&both, &write, &rbuf);
    check(
        regs.read == Some((120, r(120, 3000)))
            && regs.write == Some((r(200, 1001), true))
            && regs.reply.is_none(),
        "send: read and write chunk regions",
    )?;
    let long = plan::Plan {
        call: CallPlan::PositionZero,
        reply: ReplyPlan::ReplyChunk,
    };
    let regs = plan::registrations(&long, &write, &rbuf);
    check(
        regs.read == Some((0, r(0, 3124)))
            && regs.write.is_none()
            && regs.reply == Some(r(0, 1204)),
        "send: long call and reply chunk regions",
    )?;
    check(
        send_batch(128) == 16 && send_batch(4) == 1 && recv_batch(128) == 8 && recv_batch(4) == 1,
        "send: batch sizes",
    )?;
    // Every 4th Send signalled; a mapped one at once; REG_MRs count.
    let mut s = SendSignals::new(4, 10);
    let mut got = [false; 6];
    for (g, awaited) in got
        .iter_mut()
        .zip([false, false, false, false, true, false])
    {
        *g = s.next(0, awaited);
    }
    check(
        got == [false, false, false, true, true, false],
        "send: signalled every batch and when awaited",
    )?;
    let mut s = SendSignals::new(16, 10);
    check(
        !s.next(4, false) && s.next(4, false) && !s.next(0, false),
        "send: signalled before the queue fills with unsignalled work",
    )
}

/// What a Responder does with what it receives (`responder::receive`):
/// which messages are dropped, which answered with ERR_VERS or ERR_CHUNK,
/// which are backchannel Replies; and how a Call with Read chunks is
/// assembled.
pub fn responder_receive_rules() -> Outcome {
    use super::responder::{self, Cause, DropReason, Piece, Received, Refusal};
    let limits = Limits::DEFAULT;
    let refusal = |parts: &[&[u32]]| -> Result<Option<Refusal>, SelftestFailure> {
        let wire = Wire::new(parts)?;
        Ok(responder::receive(wire.bytes(), &limits).err())
    };
    let chunk = |cause| {
        Some(Refusal::Error {
            xid: XID,
            vers: 1,
            error: responder::ErrorBody::V1(v1::RdmaError::Chunk),
            cause,
        })
    };
    check(
        refusal(&[&[XID, 1]])? == Some(Refusal::Drop(DropReason::Short)),
        "responder: too short is dropped",
    )?;
    // RFC 8166 §4.5: under 28 bytes the XID cannot be trusted.
    check(
        refusal(&[&[XID, 1, CREDITS, v1::proc::MSG, 0, 0]])?
            == Some(Refusal::Drop(DropReason::Short))
            && refusal(&[&[XID, 2, CREDITS, 0, 0, 0]])? == Some(Refusal::Drop(DropReason::Short)),
        "responder: shorter than the minimal header is dropped, not answered",
    )?;
    check(
        refusal(&[&[XID, 3, CREDITS, 0, 0, 0, 0]])?
            == Some(Refusal::Error {
                xid: XID,
                vers: 3,
                error: responder::ErrorBody::V1(v1::RdmaError::Vers { low: 1, high: 2 }),
                cause: Cause::Header(DecodeError::BadVersion { vers: 3 }),
            }),
        "responder: ERR_VERS 1..2 echoing the version",
    )?;
    check(
        refusal(&[&[XID, 1, CREDITS, v1::proc::DONE, 0, 0, 0]])?
            == Some(Refusal::Drop(DropReason::Done))
            && refusal(&[&[XID, 1, CREDITS, v1::proc::ERROR, 2, 0, 0]])?
                == Some(Refusal::Drop(DropReason::Error)),
        "responder: RDMA_DONE and RDMA_ERROR dropped",
    )?;
    check(
        refusal(&[&[XID, 1, CREDITS, v1::proc::MSGP, 0, 0, 0, 0, 0]])?
            == chunk(Cause::Header(DecodeError::MsgpNotSupported))
            && refusal(&[&[XID, 1, CREDITS, 9, 0, 0, 0]])?
                == chunk(Cause::Header(DecodeError::UnknownProc { proc: 9 })),
        "responder: RDMA_MSGP and unknown procedures get ERR_CHUNK",
    )?;
    check(
        refusal(&[&[XID, 1, CREDITS, v1::proc::MSG, 1, 0, 0]])?
            == chunk(Cause::Header(DecodeError::Truncated)),
        "responder: truncated lists get ERR_CHUNK",
    )?;
    check(
        refusal(&[&[XID, 1, CREDITS, v1::proc::MSG, 0, 1, 0, 0, 0], &RPC_CALL])?.is_none(),
        "responder: an empty Write chunk is accepted (RFC 8166 §3.4.6)",
    )?;
    check(
        refusal(&[&[XID, 1, CREDITS, v1::proc::NOMSG, 0, 0, 1, 1], &hloo(H1)])?
            == chunk(Cause::NomsgWithoutCall)
            && refusal(&[
                &[XID, 1, CREDITS, v1::proc::NOMSG, 1],
                &phloo(0, H1),
                &[0, 0, 0, 0],
            ])? == chunk(Cause::NomsgWithInline),
        "responder: RDMA_NOMSG needs a Position Zero chunk alone",
    )?;
    check(
        refusal(&[
            &[XID, 1, CREDITS, v1::proc::MSG, 1],
            &phloo(0, H1),
            &[0, 0, 0],
            &RPC_CALL,
        ])? == chunk(Cause::MsgWithPositionZero),
        "responder: RDMA_MSG with a Position Zero chunk gets ERR_CHUNK",
    )?;
    check(
        refusal(&[&[XID, 1, CREDITS, v1::proc::MSG, 0, 0, 0, XID]])?
            == Some(Refusal::Drop(DropReason::ShortRpc))
            && refusal(&[&[XID, 1, CREDITS, v1::proc::MSG, 0, 0, 0, XID, 5]])?
                == Some(Refusal::Drop(DropReason::BadDirection { value: 5 })),
        "responder: a short or undirected RPC message is dropped",
    )?;
    // xid, REPLY, MSG_ACCEPTED, AUTH_NONE verifier, SUCCESS.
    let bc = Wire::new(&[
        &[XID, 1, 2, v1::proc::MSG, 0, 0, 0],
        &RPC_REPLY,
        &[0, 0, 0, 0],
    ])?;
    check(
        matches!(
            responder::receive(bc.bytes(), &limits),
            Ok(Received::BackchannelReply { xid: XID, credits: 2, payload }) if payload.len() == 24
        ) && refusal(&[
            &[XID, 1, 2, v1::proc::MSG, 0, 0, 1, 1],
            &hloo(H2),
            &RPC_REPLY,
        ])? == Some(Refusal::Drop(DropReason::BackwardWithChunks)),
        "responder: a Reply without chunks is for the backchannel",
    )?;
    // Bidir-00 §2.4: too short for an RPC Reply, its credits unused.
    check(
        refusal(&[&[XID, 1, 0, v1::proc::MSG, 0, 0, 0], &RPC_REPLY])?
            == Some(Refusal::Drop(DropReason::ShortReply { len: 8 })),
        "responder: a Reply too short for an RPC Reply is dropped",
    )?;
    // RFC 8166 §4.5: a Reply is never answered, however malformed.
    check(
        refusal(&[
            &[XID, 1, 2, v1::proc::MSG, 0, 0, 0],
            &[XID ^ 1, 1, 0, 0, 0, 0],
        ])? == Some(Refusal::Drop(DropReason::BadReply(
            DecodeError::XidMismatch,
        ))) && refusal(&[
            &[XID, 1, 2, v1::proc::MSG, 1],
            &phloo(6, H1),
            &[0, 0, 0],
            &RPC_REPLY,
            &[0, 0, 0, 0],
        ])? == Some(Refusal::Drop(DropReason::BadReply(
            DecodeError::MisalignedPosition { position: 6 },
        ))),
        "responder: a malformed Reply is dropped, not answered",
    )?;
    // A WRITE-like Call: 12 inline bytes, 5 bytes read at 8 (padded), the
    // last 4 inline bytes after them.
    let x = Segment {
        handle: 7,
        length: 5,
        offset: 0x100,
    };
    let write = Wire::new(&[
        &[XID, 1, CREDITS, v1::proc::MSG, 1],
        &phloo(8, x),
        &[0, 0, 0],
        &RPC_CALL,
        &[0xabcd],
    ])?;
    let Ok(Received::Call(call)) = responder::receive(write.bytes(), &limits) else {
        return check(false, "responder: a Call with a Read chunk");
    };
    // The server keeps where the Call lies, and assembles it from there.
    let at = call.locate(write.bytes());
    check(
        at.and_then(|at| at.call(write.bytes())) == Some(call),
        "responder: a Call comes back from where it lies in its message",
    )?;
    let assembly = responder::assemble(&call, 4096).map_err(|_| SelftestFailure("assemble"))?;
    check(assembly.total_len() == 20, "responder: assembled length")?;
    let want = [
        Piece::Inline { src: 0..8, dest: 0 },
        Piece::Read {
            handle: 7,
            length: 5,
            offset: 0x100,
            dest: 8,
        },
        Piece::Zero { dest: 13, len: 3 },
        Piece::Inline {
            src: 8..12,
            dest: 16,
        },
    ];
    let mut pieces = assembly;
    check(
        want.iter().all(|w| pieces.next().as_ref() == Some(w)) && pieces.next().is_none(),
        "responder: pieces of a Call with a padded Read chunk",
    )?;
    check(
        responder::assemble(&call, 19).is_err(),
        "responder: a Call longer than the pages refused",
    )?;
    // A zero-length data item: nothing to read, the Call is its inline part.
    let empty = Wire::new(&[
        &[XID, 1, CREDITS, v1::proc::MSG, 1],
        &phloo(8, Segment { length: 0, ..x }),
        &[0, 0, 0],
        &RPC_CALL,
        &[0xabcd],
    ])?;
    let Ok(Received::Call(empty)) = responder::receive(empty.bytes(), &limits) else {
        return check(false, "responder: a Call with an empty Read chunk");
    };
    let assembly = responder::assemble(&empty, 4096).map_err(|_| SelftestFailure("empty"))?;
    check(
        !empty.has_read_data() && !assembly.has_reads() && assembly.total_len() == 12,
        "responder: a Read list that moves no byte leaves the inline Call",
    )?;
    // A Long Call: the Position Zero chunk in two segments.
    let long = Wire::new(&[
        &[XID, 1, CREDITS, v1::proc::NOMSG, 1],
        &phloo(0, H1),
        &[1],
        &phloo(0, H2),
        &[0, 0, 0],
    ])?;
    let Ok(Received::Call(call)) = responder::receive(long.bytes(), &limits) else {
        return check(false, "responder: a Long Call");
    };
    check(
        call.locate(long.bytes())
            .and_then(|at| at.call(long.bytes()))
            == Some(call)
            && call.locate(write.bytes()).is_none(),
        "responder: a Long Call comes back from where it lies, and only there",
    )?;
    let assembly = responder::assemble(&call, 1 << 20).map_err(|_| SelftestFailure("long"))?;
    check(
        call.nomsg && assembly.total_len() == 12288 && assembly.count() == 2,
        "responder: a Long Call is its Position Zero chunk",
    )?;
    // The same Long Call, its Position Zero segments apart and after a
    // chunk at 8: taken by position (as `svc_rdma_pcl.c`), the Position
    // Zero segments joined in list order.
    let unordered = Wire::new(&[
        &[XID, 1, CREDITS, v1::proc::NOMSG, 1],
        &phloo(0, H1),
        &[1],
        &phloo(8, x),
        &[1],
        &phloo(0, H2),
        &[0, 0, 0],
    ])?;
    let Ok(Received::Call(call)) = responder::receive(unordered.bytes(), &limits) else {
        return check(false, "responder: a Read list out of order");
    };
    let assembly = responder::assemble(&call, 1 << 20).map_err(|_| SelftestFailure("unordered"))?;
    check(
        call.chunks.reads.chunk_count() == 2 && assembly.total_len() == 12288 + 8,
        "responder: a Read list in any order is taken by position",
    )
}

/// How a Responder sends a Reply (`responder::plan_reply`): inline when
/// header and body fit the client's receive size, else by Reply chunk;
/// each payload into its own Write chunk; the header echoing what was
/// written;
/// and which handle Send With Invalidate may take.
pub fn responder_reply_rules() -> Outcome {
    // Each half its own frame, one after the other: none holds every
    // Reply plan at once on KUnit's stack.
    one_write_chunk_reply_rules()?;
    more_responder_reply_rules()
}

/// A Call with one Write chunk and a Reply chunk, for
/// [`responder_reply_rules`].
#[inline(never)]
fn one_write_chunk_reply_rules() -> Outcome {
    use super::responder::{self, RdmaWrite, Received, ReplyShape};
    let limits = Limits::DEFAULT;
    // A READ-like Call: one Write chunk of H1 (8192) and H2 (4096), and a
    // Reply chunk of H3.
    let wire = Wire::new(&[
        &[XID, 1, CREDITS, v1::proc::MSG, 0, 1, 2],
        &hloo(H1),
        &hloo(H2),
        &[0, 1, 1],
        &hloo(H3),
        &RPC_CALL,
    ])?;
    let Ok(Received::Call(call)) = responder::receive(wire.bytes(), &limits) else {
        return check(false, "reply: the Call decodes");
    };
    let plan =
        |len, payload, max| responder::plan_reply(&call.chunks, ReplyShape::new(len, payload), max);
    // 120 bytes of RPC header, 10001 bytes of data (+3 pad), 8 after.
    let p = plan(10132, Some((120, 10001)), 1024).map_err(|_| SelftestFailure("plan"))?;
    let mut writes = p.writes();
    check(
        !p.nomsg()
            && p.body_len() == 128
            && writes.next()
                == Some(RdmaWrite {
                    src: 120,
                    len: 8192,
                    handle: H1.handle,
                    offset: H1.offset,
                })
            && writes.next()
                == Some(RdmaWrite {
                    src: 8312,
                    len: 1809,
                    handle: H2.handle,
                    offset: H2.offset,
                })
            && writes.next().is_none(),
        "reply: the payload fills the Write chunk in order",
    )?;
    let mut ranges = p.inline_ranges();
    check(
        ranges.next() == Some(0..120)
            && ranges.next() == Some(10124..10132)
            && ranges.next().is_none(),
        "reply: the body goes inline without the payload's pad",
    )?;
    let mut buf = [0u8; 128];
    let n = p
        .encode_header(&mut buf, XID, CREDITS)
        .map_err(|_| SelftestFailure("encode"))?;
    let written = |s: Segment, length| Segment { length, ..s };
    let want = Wire::new(&[
        &[XID, 1, CREDITS, v1::proc::MSG, 0, 1, 2],
        &hloo(H1),
        &hloo(written(H2, 1809)),
        &[0, 1, 1],
        &hloo(written(H3, 0)),
    ])?;
    check(
        buf.get(..n) == Some(want.bytes()) && n == p.header_len() as usize,
        "reply: the header echoes the Write chunk with lengths written, the unused Reply chunk with none",
    )?;
    check(
        plan(20000, Some((0, 12289)), 1024)
            == Err(responder::Cause::PayloadTooLong {
                segment: 2,
                needed: 4097,
            }),
        "reply: a payload larger than the Write chunk refused",
    )?;
    // Header 20 + 44 + 24 = 88: 936 bytes of body fit 1024 exactly.
    let fits = plan(936, None, 1024).map_err(|_| SelftestFailure("fits"))?;
    let over = plan(937, None, 1024).map_err(|_| SelftestFailure("over"))?;
    check(
        !fits.nomsg() && over.nomsg() && over.inline_ranges().next().is_none(),
        "reply: inline when it fits, else the Reply chunk",
    )?;
    let mut writes = over.writes();
    check(
        writes.next()
            == Some(RdmaWrite {
                src: 0,
                len: 937,
                handle: H3.handle,
                offset: H3.offset,
            })
            && writes.next().is_none(),
        "reply: the body into the Reply chunk",
    )?;
    let n = over
        .encode_header(&mut buf, XID, CREDITS)
        .map_err(|_| SelftestFailure("encode nomsg"))?;
    let want = Wire::new(&[
        &[XID, 1, CREDITS, v1::proc::NOMSG, 0, 1, 2],
        &hloo(written(H1, 0)),
        &hloo(written(H2, 0)),
        &[0, 1, 1],
        &hloo(written(H3, 937)),
    ])?;
    check(
        buf.get(..n) == Some(want.bytes()),
        "reply: RDMA_NOMSG header, Write chunk unused",
    )?;
    let none = Wire::new(&[&[XID, 1, CREDITS, v1::proc::MSG, 0, 0, 0], &RPC_CALL])?;
    let Ok(Received::Call(short)) = responder::receive(none.bytes(), &limits) else {
        return check(false, "reply: a Call without chunks");
    };
    check(
        responder::plan_reply(&short.chunks, ReplyShape::new(997, None), 1024)
            == Err(responder::Cause::ReplyTooLong),
        "reply: too long for inline without a Reply chunk refused",
    )?;
    let n = responder::encode_error(
        &mut buf,
        XID,
        2,
        CREDITS,
        responder::ErrorBody::V1(v1::RdmaError::Vers { low: 1, high: 1 }),
    )
    .map_err(|_| SelftestFailure("encode error"))?;
    let want = Wire::new(&[&[XID, 2, CREDITS, v1::proc::ERROR, 1, 1, 1]])?;
    check(buf.get(..n) == Some(want.bytes()), "reply: ERR_VERS")?;
    Ok(())
}

/// Several Write chunks, and Send With Invalidate, for
/// [`responder_reply_rules`].
#[inline(never)]
fn more_responder_reply_rules() -> Outcome {
    use super::responder::{self, Received, ReplyShape};
    let limits = Limits::DEFAULT;
    let mut buf = [0u8; 128];
    let written = |s: Segment, length| Segment { length, ..s };
    // An NFSv4 COMPOUND with two READs: a Write chunk for each.
    let two = Wire::new(&[
        &[XID, 1, CREDITS, v1::proc::MSG, 0, 1, 1],
        &hloo(H1),
        &[1, 1],
        &hloo(H2),
        &[0, 0],
        &RPC_CALL,
    ])?;
    let Ok(Received::Call(two)) = responder::receive(two.bytes(), &limits) else {
        return check(false, "reply: a Call with two Write chunks");
    };
    let mut shape = ReplyShape::new(1750, Some((100, 1001)));
    shape.payloads[1] = Some((1200, 500));
    let p = responder::plan_reply(&two.chunks, shape, 1024)
        .map_err(|_| SelftestFailure("plan two payloads"))?;
    let mut writes = p.writes().map(|w| (w.src, w.len, w.handle));
    let mut ranges = p.inline_ranges();
    check(
        writes.next() == Some((100, 1001, H1.handle))
            && writes.next() == Some((1200, 500, H2.handle))
            && writes.next().is_none()
            && ranges.next() == Some(0..100)
            && ranges.next() == Some(1104..1200)
            && ranges.next() == Some(1700..1750)
            && ranges.next().is_none(),
        "reply: each payload into its own Write chunk",
    )?;
    let n = p
        .encode_header(&mut buf, XID, CREDITS)
        .map_err(|_| SelftestFailure("encode two payloads"))?;
    let want = Wire::new(&[
        &[XID, 1, CREDITS, v1::proc::MSG, 0, 1, 1],
        &hloo(written(H1, 1001)),
        &[1, 1],
        &hloo(written(H2, 500)),
        &[0, 0],
    ])?;
    check(
        buf.get(..n) == Some(want.bytes()),
        "reply: the header echoes each Write chunk with its payload's length",
    )?;
    // A Reply chunk of 16 bytes: echoed unused when the echo fits; left
    // out only when the echo alone keeps the Reply from fitting inline,
    // the chunk being too small to carry it.
    let small = Wire::new(&[
        &[XID, 1, CREDITS, v1::proc::MSG, 0, 0, 1, 1],
        &hloo(Segment { length: 16, ..H3 }),
        &RPC_CALL,
    ])?;
    let Ok(Received::Call(small)) = responder::receive(small.bytes(), &limits) else {
        return check(false, "reply: a Call with a small Reply chunk");
    };
    let echoed = responder::plan_reply(&small.chunks, ReplyShape::new(976, None), 1024)
        .map_err(|_| SelftestFailure("plan an echo"))?;
    let bare = responder::plan_reply(&small.chunks, ReplyShape::new(980, None), 1024)
        .map_err(|_| SelftestFailure("plan without echo"))?;
    check(
        !echoed.nomsg() && echoed.header_len() == 48 && !bare.nomsg() && bare.header_len() == 28,
        "reply: the Reply chunk echoed when it fits, else left out of an inline Reply",
    )?;
    // A READ at end of file first: its empty payload takes the first
    // chunk, the second READ's data the second.
    let mut shape = ReplyShape::new(800, Some((100, 0)));
    shape.payloads[1] = Some((200, 500));
    let p = responder::plan_reply(&two.chunks, shape, 1024)
        .map_err(|_| SelftestFailure("plan an empty payload"))?;
    let mut writes = p.writes().map(|w| (w.src, w.len, w.handle));
    check(
        writes.next() == Some((200, 500, H2.handle)) && writes.next().is_none(),
        "reply: an empty payload consumes its Write chunk",
    )?;
    let one = Wire::new(&[
        &[XID, 1, CREDITS, v1::proc::MSG, 0, 1, 1],
        &hloo(H1),
        &[0, 1, 1],
        &hloo(H1),
        &RPC_CALL,
    ])?;
    let Ok(Received::Call(one)) = responder::receive(one.bytes(), &limits) else {
        return check(false, "reply: a Call with one handle");
    };
    check(
        responder::invalidate_handle(&one.chunks, true) == Some(H1.handle)
            && responder::invalidate_handle(&one.chunks, false).is_none()
            && responder::invalidate_handle(&two.chunks, true).is_none(),
        "reply: Send With Invalidate only for a sole handle the client allows",
    )?;
    check(
        responder::remote_invalidation(true, true)
            && !responder::remote_invalidation(true, false)
            && !responder::remote_invalidation(false, true)
            && responder::invalidate_handle(
                &one.chunks,
                responder::remote_invalidation(true, false),
            )
            .is_none(),
        "reply: Send With Invalidate only when both peers set the flag (RFC 8797 §5.1)",
    )
}
