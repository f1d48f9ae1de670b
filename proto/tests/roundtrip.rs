//! Property tests: generated v1 and v2 headers survive encode -> decode ->
//! encode unchanged, and arbitrary bytes never panic the decoders.

// Test code: panicking is how a test fails, and the inputs are ours.
#![allow(
    clippy::arithmetic_side_effects,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unwrap_used
)]

use proptest::collection::vec;
use proptest::prelude::*;
use rpcrdma_proto::chunk::{ChunkLists, ChunkSlices, ReadSegment, Segment};
use rpcrdma_proto::header::{self, FixedHeader, MsgType};
use rpcrdma_proto::limits::Limits;
use rpcrdma_proto::{backchannel, pvt, v1, v2};

const LIMITS: Limits = Limits {
    max_segments_per_chunk: 64,
    max_chunks_per_list: 16,
    max_total_bytes: u64::MAX,
    position_alignment: 4,
};

/// Owned chunk lists, the generator's output.
#[derive(Clone, Debug, PartialEq)]
struct Lists {
    reads: Vec<ReadSegment>,
    writes: Vec<Vec<Segment>>,
    reply: Option<Vec<Segment>>,
    /// Inline payload length the Read positions need.
    payload_len: usize,
}

impl Lists {
    fn with_slices<R>(&self, f: impl FnOnce(ChunkSlices<'_>) -> R) -> R {
        let writes: Vec<&[Segment]> = self.writes.iter().map(Vec::as_slice).collect();
        f(ChunkSlices {
            reads: &self.reads,
            writes: &writes,
            reply: self.reply.as_deref(),
        })
    }

    fn from_decoded(
        lists: &ChunkLists<'_>,
    ) -> (Vec<ReadSegment>, Vec<Vec<Segment>>, Option<Vec<Segment>>) {
        (
            lists.reads.segments().collect(),
            lists
                .writes
                .chunks()
                .map(|c| c.segments().collect())
                .collect(),
            lists.reply.map(|c| c.segments().collect()),
        )
    }
}

fn segment(max_len: u32) -> impl Strategy<Value = Segment> {
    (any::<u32>(), 0..=max_len, any::<u64>()).prop_map(|(handle, length, offset)| Segment {
        handle,
        length,
        offset,
    })
}

/// Read chunks at increasing, aligned, non-overlapping, non-zero
/// positions, each preceded by an inline gap. Returns the inline payload
/// length they need: the gaps plus the roundup padding the chunks leave out.
fn read_list() -> impl Strategy<Value = (Vec<ReadSegment>, usize)> {
    vec((1u32..64, vec(segment(1 << 16), 1..6)), 0..4).prop_map(|chunks| {
        let mut reads = Vec::new();
        let (mut position, mut inline) = (0u32, 0u32);
        for (gap, segments) in chunks {
            position += gap * 4;
            inline += gap * 4;
            let length: u32 = segments.iter().map(|s| s.length).sum();
            reads.extend(
                segments
                    .into_iter()
                    .map(|segment| ReadSegment { position, segment }),
            );
            position += length.next_multiple_of(4);
            inline += length.next_multiple_of(4) - length;
        }
        (reads, inline as usize)
    })
}

fn lists() -> impl Strategy<Value = Lists> {
    (
        read_list(),
        vec(vec(segment(u32::MAX), 0..6), 0..4),
        proptest::option::of(vec(segment(u32::MAX), 0..6)),
    )
        .prop_map(|((reads, payload_len), writes, reply)| Lists {
            reads,
            writes,
            reply,
            payload_len,
        })
}

/// An RPC header with `xid` and `msg_type`, padded to `len` bytes.
fn rpc_payload(xid: u32, msg_type: MsgType, len: usize) -> Vec<u8> {
    let mut payload = Vec::with_capacity(len.max(8));
    payload.extend_from_slice(&xid.to_be_bytes());
    payload.extend_from_slice(&msg_type.to_u32().to_be_bytes());
    payload.resize(len.max(8), 0);
    payload
}

fn msg_type() -> impl Strategy<Value = MsgType> {
    prop_oneof![Just(MsgType::Call), Just(MsgType::Reply)]
}

fn v1_error() -> impl Strategy<Value = v1::RdmaError> {
    prop_oneof![
        (any::<u32>(), any::<u32>()).prop_map(|(low, high)| v1::RdmaError::Vers { low, high }),
        Just(v1::RdmaError::Chunk),
    ]
}

fn v2_error() -> impl Strategy<Value = v2::RdmaError> {
    prop_oneof![
        (any::<u32>(), any::<u32>()).prop_map(|(low, high)| v2::RdmaError::Vers { low, high }),
        Just(v2::RdmaError::BadXdr),
        (any::<bool>(), any::<u32>(), any::<u32>()).prop_map(
            |(processed, segment_index, length_needed)| {
                v2::RdmaError::CantReply {
                    processed,
                    segment_index,
                    length_needed,
                }
            }
        ),
        Just(v2::RdmaError::InvalProc),
        Just(v2::RdmaError::InvalOption),
    ]
}

fn encode_v1(fixed: &FixedHeader, msg: &v1::Message<'_>) -> Vec<u8> {
    let mut buf = vec![0u8; 8192];
    let len = v1::encode(&mut buf, fixed, msg).expect("fits");
    buf.truncate(len);
    buf
}

fn encode_v2(fixed: &FixedHeader, msg: &v2::Message<'_>) -> Vec<u8> {
    let mut buf = vec![0u8; 8192];
    let len = v2::encode(&mut buf, fixed, msg).expect("fits");
    buf.truncate(len);
    buf
}

proptest! {
    #[test]
    fn v1_chunk_messages_round_trip(
        xid in any::<u32>(),
        credits in any::<u32>(),
        mut lists in lists(),
        nomsg in any::<bool>(),
        msg_type in msg_type(),
    ) {
        // RDMA_NOMSG carries no inline payload: its Read chunk can only be
        // a Position Zero Read chunk, and some chunk must be present.
        let nomsg = nomsg && !(lists.reads.is_empty() && lists.writes.is_empty() && lists.reply.is_none());
        if nomsg {
            lists.reads.iter_mut().for_each(|r| r.position = 0);
        }
        let fixed = FixedHeader { xid, vers: v1::VERSION, credits };
        let header = lists.with_slices(|slices| {
            encode_v1(&fixed, &if nomsg { v1::Message::Nomsg(slices) } else { v1::Message::Msg(slices) })
        });
        let mut wire = header.clone();
        if !nomsg {
            wire.extend(rpc_payload(xid, msg_type, lists.payload_len));
        }
        let decoded = v1::decode(&wire, &LIMITS).expect("valid header decodes");
        prop_assert_eq!(decoded.fixed, fixed);
        prop_assert_eq!(decoded.header_len, header.len());
        let got = match decoded.body {
            v1::Body::Msg(l) if !nomsg => Lists::from_decoded(&l),
            v1::Body::Nomsg(l) if nomsg => Lists::from_decoded(&l),
            other => return Err(TestCaseError::fail(format!("wrong body {other:?}"))),
        };
        prop_assert_eq!(&got, &(lists.reads.clone(), lists.writes.clone(), lists.reply.clone()));
        // Chunk grouping agrees with the positions.
        if let v1::Body::Msg(l) | v1::Body::Nomsg(l) = decoded.body {
            let mut positions: Vec<u32> = lists.reads.iter().map(|r| r.position).collect();
            positions.dedup();
            let grouped: Vec<u32> = l.reads.chunks().map(|c| c.position()).collect();
            prop_assert_eq!(grouped, positions);
        }
    }

    #[test]
    fn v1_errors_round_trip(xid in any::<u32>(), credits in any::<u32>(), error in v1_error()) {
        let fixed = FixedHeader { xid, vers: v1::VERSION, credits };
        let wire = encode_v1(&fixed, &v1::Message::Error(error));
        let decoded = v1::decode(&wire, &LIMITS).expect("decodes");
        prop_assert_eq!(decoded.body, v1::Body::Error(error));
        prop_assert_eq!(decoded.header_len, wire.len());
    }

    #[test]
    fn v2_messages_round_trip(
        xid in any::<u32>(),
        credits in any::<u32>(),
        lists in lists(),
        direction in msg_type(),
        inv_handle in any::<u32>(),
    ) {
        let fixed = FixedHeader { xid, vers: v2::VERSION, credits };
        let header = lists.with_slices(|slices| {
            encode_v2(&fixed, &v2::Message::Msg(v2::Chunks { direction, inv_handle, lists: slices }))
        });
        let mut wire = header.clone();
        wire.extend(rpc_payload(xid, direction, lists.payload_len));
        let decoded = v2::decode(&wire, &LIMITS).expect("valid header decodes");
        prop_assert_eq!(decoded.header_len, header.len());
        let v2::Body::Msg(chunks) = decoded.body else {
            return Err(TestCaseError::fail("wrong body"));
        };
        prop_assert_eq!(chunks.direction, direction);
        prop_assert_eq!(chunks.inv_handle, inv_handle);
        prop_assert_eq!(
            Lists::from_decoded(&chunks.lists),
            (lists.reads.clone(), lists.writes.clone(), lists.reply.clone())
        );
    }

    #[test]
    fn v2_errors_and_options_round_trip(
        xid in any::<u32>(),
        error in v2_error(),
        direction in msg_type(),
        opttype in any::<u32>(),
        optinfo in vec(any::<u8>(), 0..40),
    ) {
        let fixed = FixedHeader { xid, vers: v2::VERSION, credits: 1 };
        let wire = encode_v2(&fixed, &v2::Message::Error(error));
        prop_assert_eq!(v2::decode(&wire, &LIMITS).map(|h| h.body), Ok(v2::Body::Error(error)));
        prop_assert_eq!(error.code(), v2::RdmaError::from_code(error.code()).code());

        let optional = v2::Optional { direction, opttype, optinfo: &optinfo };
        let wire = encode_v2(&fixed, &v2::Message::Optional(optional));
        prop_assert_eq!(wire.len() % 4, 0);
        let decoded = v2::decode(&wire, &LIMITS).expect("decodes");
        prop_assert_eq!(decoded.body, v2::Body::Optional(optional));
        prop_assert!(decoded.payload.is_empty());
    }

    #[test]
    fn encoding_into_a_short_buffer_fails_cleanly(lists in lists(), cut in 0usize..64) {
        let fixed = FixedHeader { xid: 1, vers: v1::VERSION, credits: 1 };
        let full = lists.with_slices(|s| encode_v1(&fixed, &v1::Message::Msg(s)));
        let mut short = vec![0u8; full.len().saturating_sub(cut + 1)];
        let result = lists.with_slices(|s| v1::encode(&mut short, &fixed, &v1::Message::Msg(s)));
        prop_assert_eq!(result, Err(rpcrdma_proto::error::EncodeError::BufferTooSmall));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..256)) {
        let limits = Limits::DEFAULT;
        if let Ok(h) = header::decode(&bytes, &limits) {
            prop_assert!(h.header_len() <= bytes.len());
            let _ = backchannel::classify(backchannel::Role::Client, &h);
        }
        let _ = pvt::negotiate(pvt::InlineThresholds::V1_DEFAULT, &bytes);
    }

    #[test]
    fn pvt_data_round_trips(invalidate in any::<bool>(), send in 1u32..=256, recv in 1u32..=256) {
        let data = pvt::PrivateData {
            remote_invalidate: invalidate,
            send_size: send * 1024,
            recv_size: recv * 1024,
        };
        prop_assert_eq!(pvt::PrivateData::parse(&data.encode()), Some(data));
    }
}
