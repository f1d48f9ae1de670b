//! One test per validation check: each malformed header yields its own
//! `DecodeError` variant and the RDMA_ERROR RFC 8166 §4.5 asks for.

// Test code: panicking is how a test fails, and the inputs are ours.
#![allow(
    clippy::arithmetic_side_effects,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unwrap_used
)]

use rpcrdma_proto::error::{DecodeError, ErrorKind};
use rpcrdma_proto::header;
use rpcrdma_proto::limits::Limits;
use rpcrdma_proto::v2::ErrorCode;

const XID: u32 = 0x0bad_cafe;

fn wire(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// A read list entry: discriminator, position and a segment of `length`.
fn read_entry(position: u32, length: u32) -> [u32; 6] {
    [1, position, 0x77, length, 0, 0x1000]
}

/// A plain segment of `length`.
fn segment(length: u32) -> [u32; 4] {
    [0x77, length, 0, 0x1000]
}

fn concat(parts: &[&[u32]]) -> Vec<u32> {
    parts.concat()
}

fn decode(words: &[u32], limits: &Limits) -> Result<header::Header<'static>, DecodeError> {
    let bytes: &'static [u8] = Box::leak(wire(words).into_boxed_slice());
    header::decode(bytes, limits)
}

fn assert_refused(words: &[u32], limits: &Limits, error: DecodeError, answer: Option<ErrorKind>) {
    assert_eq!(decode(words, limits).err(), Some(error));
    assert_eq!(error.reply_error(), answer);
}

const RPC_CALL: [u32; 2] = [XID, 0];
const DEFAULT: Limits = Limits::DEFAULT;

#[test]
fn short_fixed_header_is_dropped() {
    for len in 0..4 {
        let words = [XID, 1, 1, 0];
        assert_refused(&words[..len], &DEFAULT, DecodeError::ShortFixedHeader, None);
    }
}

#[test]
fn unsupported_version_gets_err_vers() {
    assert_refused(
        &[XID, 0, 1, 0, 0, 0, 0],
        &DEFAULT,
        DecodeError::BadVersion { vers: 0 },
        Some(ErrorKind::Vers),
    );
    assert_eq!(
        DecodeError::BadVersion { vers: 0 }.v2_reply_error(),
        Some(ErrorCode::Vers)
    );
}

#[test]
fn unknown_proc_gets_err_chunk_or_inval_proc() {
    let error = DecodeError::UnknownProc { proc: 5 };
    assert_refused(&[XID, 1, 1, 5], &DEFAULT, error, Some(ErrorKind::Chunk));
    // Version 2 knows neither RDMA_MSGP nor RDMA_DONE.
    assert_eq!(
        decode(&[XID, 2, 1, 3], &DEFAULT).err(),
        Some(DecodeError::UnknownProc { proc: 3 })
    );
    assert_eq!(error.v2_reply_error(), Some(ErrorCode::InvalProc));
}

#[test]
fn rdma_msgp_gets_err_chunk() {
    assert_refused(
        &[XID, 1, 1, 2, 4, 1024, 0, 0, 0],
        &DEFAULT,
        DecodeError::MsgpNotSupported,
        Some(ErrorKind::Chunk),
    );
}

#[test]
fn rdma_done_is_discarded() {
    assert_refused(
        &[XID, 1, 1, 3],
        &DEFAULT,
        DecodeError::DoneNotSupported,
        None,
    );
}

#[test]
fn truncated_lists_get_err_chunk() {
    let full = concat(&[
        &[XID, 1, 1, 0],
        &read_entry(0, 8),
        &[0, 1, 1],
        &segment(8),
        &[0, 1, 1],
        &segment(8),
    ]);
    for len in 4..full.len() {
        assert_refused(
            &full[..len],
            &DEFAULT,
            DecodeError::Truncated,
            Some(ErrorKind::Chunk),
        );
    }
}

#[test]
fn bad_discriminator_gets_err_chunk() {
    for (at, value) in [(4, 2), (5, 0x8000_0000), (6, u32::MAX)] {
        let mut words = vec![XID, 1, 1, 0, 0, 0, 0];
        words[at] = value;
        assert_refused(
            &words,
            &DEFAULT,
            DecodeError::BadDiscriminator { value },
            Some(ErrorKind::Chunk),
        );
    }
}

#[test]
fn too_many_segments_per_chunk() {
    let limits = Limits {
        max_segments_per_chunk: 2,
        ..DEFAULT
    };
    // Three Read segments at one position form one chunk of three.
    let reads = concat(&[
        &[XID, 1, 1, 1],
        &read_entry(0, 1),
        &read_entry(0, 1),
        &read_entry(0, 1),
        &[0, 0, 0],
    ]);
    assert_refused(
        &reads,
        &limits,
        DecodeError::TooManySegments,
        Some(ErrorKind::Chunk),
    );
    // A huge count is refused before anything is read.
    assert_refused(
        &[XID, 1, 1, 0, 0, 0, 1, u32::MAX],
        &limits,
        DecodeError::TooManySegments,
        Some(ErrorKind::Chunk),
    );
}

#[test]
fn too_many_chunks_per_list() {
    let limits = Limits {
        max_chunks_per_list: 1,
        ..DEFAULT
    };
    let reads = concat(&[
        &[XID, 1, 1, 0],
        &read_entry(4, 1),
        &read_entry(8, 1),
        &[0, 0, 0],
        &RPC_CALL,
        &[0, 0],
    ]);
    assert_refused(
        &reads,
        &limits,
        DecodeError::TooManyChunks,
        Some(ErrorKind::Chunk),
    );
    let writes = [XID, 1, 1, 0, 0, 1, 0, 1, 0, 0, 0];
    assert_refused(
        &writes,
        &limits,
        DecodeError::TooManyChunks,
        Some(ErrorKind::Chunk),
    );
}

/// The byte limit bounds the Read list, over all its chunks: what a
/// Responder pulls into its own memory. Write and Reply chunks are the
/// peer's memory and count against no byte limit.
#[test]
fn too_many_bytes_over_the_read_list() {
    let limits = Limits {
        max_total_bytes: 100,
        ..DEFAULT
    };
    let ok = concat(&[
        &[XID, 1, 1, 0],
        &read_entry(8, 50),
        &read_entry(8, 30),
        &read_entry(88, 20),
        &[0, 0, 0],
        &RPC_CALL,
        &[0, 0],
    ]);
    assert!(decode(&ok, &limits).is_ok());
    let over = concat(&[
        &[XID, 1, 1, 0],
        &read_entry(8, 50),
        &read_entry(8, 30),
        &read_entry(88, 21),
        &[0, 0, 0],
        &RPC_CALL,
        &[0, 0],
    ]);
    assert_refused(
        &over,
        &limits,
        DecodeError::TooManyBytes,
        Some(ErrorKind::Chunk),
    );
    let writes = concat(&[
        &[XID, 1, 1, 0, 0, 1, 2],
        &segment(u32::MAX),
        &segment(u32::MAX),
        &[0, 1, 1],
        &segment(u32::MAX),
        &RPC_CALL,
    ]);
    assert!(decode(&writes, &limits).is_ok());
    // The sum is computed without overflow.
    let huge = Limits {
        max_total_bytes: u64::MAX,
        ..DEFAULT
    };
    let max = concat(&[
        &[XID, 1, 1, 0],
        &read_entry(8, u32::MAX),
        &read_entry(8, u32::MAX),
        &[0, 0, 0],
        &RPC_CALL,
    ]);
    assert!(decode(&max, &huge).is_ok());
}

#[test]
fn misaligned_position() {
    let words = concat(&[&[XID, 1, 1, 0], &read_entry(2, 4), &[0, 0, 0], &RPC_CALL]);
    assert_refused(
        &words,
        &DEFAULT,
        DecodeError::MisalignedPosition { position: 2 },
        Some(ErrorKind::Chunk),
    );
    let unchecked = Limits {
        position_alignment: 0,
        ..DEFAULT
    };
    assert!(decode(&words, &unchecked).is_ok());
}

/// RFC 8166 does not order the Read list (rpcrdma.ko sorts it too): a
/// list out of order is taken by position.
#[test]
fn positions_in_any_order() {
    let words = concat(&[
        &[XID, 1, 1, 0],
        &read_entry(8, 4),
        &read_entry(4, 4),
        &[0, 0, 0],
        &RPC_CALL,
        &[0, 0],
    ]);
    let Ok(header::Header::V1(header)) = decode(&words, &DEFAULT) else {
        panic!("refused");
    };
    let rpcrdma_proto::v1::Body::Msg(lists) = header.body else {
        panic!("{:?}", header.body);
    };
    let positions: Vec<u32> = lists.reads.chunks().map(|c| c.position()).collect();
    assert_eq!(positions, vec![4, 8]);
}

#[test]
fn position_beyond_payload() {
    let words = concat(&[&[XID, 1, 1, 0], &read_entry(12, 4), &[0, 0, 0], &RPC_CALL]);
    assert_refused(
        &words,
        &DEFAULT,
        DecodeError::PositionBeyondPayload,
        Some(ErrorKind::Chunk),
    );
    // Within a Long Call, positions count the Position Zero Read chunk.
    let long = concat(&[
        &[XID, 1, 1, 1],
        &read_entry(0, 16),
        &read_entry(20, 4),
        &[0, 0, 0],
    ]);
    assert_refused(
        &long,
        &DEFAULT,
        DecodeError::PositionBeyondPayload,
        Some(ErrorKind::Chunk),
    );
    let fits = concat(&[
        &[XID, 1, 1, 1],
        &read_entry(0, 16),
        &read_entry(16, 4),
        &[0, 0, 0],
    ]);
    assert!(decode(&fits, &DEFAULT).is_ok());
}

#[test]
fn overlapping_read_chunks() {
    let words = concat(&[
        &[XID, 1, 1, 0],
        &read_entry(4, 8),
        &read_entry(8, 4),
        &[0, 0, 0],
        &RPC_CALL,
        &[0, 0],
    ]);
    assert_refused(
        &words,
        &DEFAULT,
        DecodeError::OverlappingReadChunks,
        Some(ErrorKind::Chunk),
    );
}

#[test]
fn nomsg_without_chunks() {
    assert_refused(
        &[XID, 1, 1, 1, 0, 0, 0],
        &DEFAULT,
        DecodeError::NomsgWithoutChunks,
        Some(ErrorKind::Chunk),
    );
    assert_refused(
        &[XID, 2, 1, 1, 0, 0, 0, 0, 0],
        &DEFAULT,
        DecodeError::NomsgWithoutChunks,
        Some(ErrorKind::Chunk),
    );
}

#[test]
fn short_payload() {
    assert_refused(
        &[XID, 1, 1, 0, 0, 0, 0],
        &DEFAULT,
        DecodeError::ShortPayload,
        Some(ErrorKind::Chunk),
    );
    assert_refused(
        &[XID, 1, 1, 0, 0, 0, 0, XID],
        &DEFAULT,
        DecodeError::ShortPayload,
        Some(ErrorKind::Chunk),
    );
}

#[test]
fn xid_mismatch() {
    assert_refused(
        &[XID, 1, 1, 0, 0, 0, 0, !XID, 0],
        &DEFAULT,
        DecodeError::XidMismatch,
        Some(ErrorKind::Chunk),
    );
}

#[test]
fn bad_msg_type() {
    let error = DecodeError::BadMsgType { value: 7 };
    assert_refused(
        &[XID, 1, 1, 0, 0, 0, 0, XID, 7],
        &DEFAULT,
        error,
        Some(ErrorKind::Chunk),
    );
}

#[test]
fn bad_direction() {
    let error = DecodeError::BadDirection { value: 2 };
    assert_refused(
        &[XID, 2, 1, 0, 2, 0, 0, 0, 0, XID, 0],
        &DEFAULT,
        error,
        Some(ErrorKind::Chunk),
    );
    assert_refused(
        &[XID, 2, 1, 5, 2, 0, 0],
        &DEFAULT,
        error,
        Some(ErrorKind::Chunk),
    );
    assert_eq!(error.v2_reply_error(), Some(ErrorCode::BadXdr));
}

#[test]
fn direction_mismatch() {
    let words = [XID, 2, 1, 0, 1, 0, 0, 0, 0, XID, 0];
    assert_refused(
        &words,
        &DEFAULT,
        DecodeError::DirectionMismatch,
        Some(ErrorKind::Chunk),
    );
}

#[test]
fn malformed_errors_are_dropped() {
    for words in [
        &[XID, 1, 1, 4][..],
        &[XID, 1, 1, 4, 1, 1],
        &[XID, 1, 1, 4, 3],
        &[XID, 2, 1, 4, 3, 2, 0, 0],
        &[XID, 2, 1, 4, 6],
    ] {
        assert_refused(words, &DEFAULT, DecodeError::MalformedError, None);
        assert_eq!(DecodeError::MalformedError.v2_reply_error(), None);
    }
}

#[test]
fn every_variant_has_one_answer() {
    // Distinct variants, so counters can tell the checks apart.
    let all = [
        DecodeError::ShortFixedHeader,
        DecodeError::BadVersion { vers: 9 },
        DecodeError::UnknownProc { proc: 9 },
        DecodeError::MsgpNotSupported,
        DecodeError::DoneNotSupported,
        DecodeError::Truncated,
        DecodeError::BadDiscriminator { value: 9 },
        DecodeError::TooManySegments,
        DecodeError::TooManyChunks,
        DecodeError::TooManyBytes,
        DecodeError::MisalignedPosition { position: 9 },
        DecodeError::PositionBeyondPayload,
        DecodeError::OverlappingReadChunks,
        DecodeError::NomsgWithoutChunks,
        DecodeError::ShortPayload,
        DecodeError::BadMsgType { value: 9 },
        DecodeError::XidMismatch,
        DecodeError::BadDirection { value: 9 },
        DecodeError::DirectionMismatch,
        DecodeError::MalformedError,
    ];
    let dropped: Vec<_> = all.iter().filter(|e| e.reply_error().is_none()).collect();
    assert_eq!(
        dropped,
        [
            &DecodeError::ShortFixedHeader,
            &DecodeError::DoneNotSupported,
            &DecodeError::MalformedError
        ]
    );
    for error in all {
        assert_eq!(
            error.reply_error().is_none(),
            error.v2_reply_error().is_none(),
            "{error}"
        );
    }
}
