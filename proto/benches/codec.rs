//! Encode/decode cost of a typical header: RDMA_MSG with a Read list of two
//! segments and a Reply chunk of four segments, in version 1 and version 2;
//! and a server's work on the header of an NFS READ Call and its Reply.
//!
//! Run with `cargo bench -p rpcrdma-proto`; prints ns/op.

// Host-only measurement code: the no-panic rules are for the core.
#![allow(
    clippy::arithmetic_side_effects,
    clippy::expect_used,
    clippy::indexing_slicing
)]

use std::hint::black_box;
use std::time::Instant;

use rpcrdma_proto::chunk::{ChunkSlices, ReadSegment, Segment};
use rpcrdma_proto::header::{FixedHeader, MsgType};
use rpcrdma_proto::limits::Limits;
use rpcrdma_proto::responder::{self, Received, ReplyShape};
use rpcrdma_proto::{v1, v2};

const ITERATIONS: u32 = 2_000_000;

fn segment(i: u32) -> Segment {
    Segment {
        handle: 0x1000 + i,
        length: 4096,
        offset: 0x7f00_0000_0000 + u64::from(i) * 4096,
    }
}

fn measure(name: &str, mut op: impl FnMut() -> usize) {
    // Warm up caches and branch predictors.
    for _ in 0..ITERATIONS / 10 {
        black_box(op());
    }
    let start = Instant::now();
    for _ in 0..ITERATIONS {
        black_box(op());
    }
    let ns = start.elapsed().as_secs_f64() * 1e9 / f64::from(ITERATIONS);
    println!("{name:<28} {ns:>8.1} ns/op");
}

fn main() {
    let reads = [0, 1].map(|i| ReadSegment {
        position: 148,
        segment: segment(i),
    });
    let reply = [2, 3, 4, 5].map(segment);
    let lists = ChunkSlices {
        reads: &reads,
        writes: &[],
        reply: Some(&reply),
    };
    let limits = Limits::DEFAULT;
    let mut buf = [0u8; 1024];
    // An RPC Call header after the transport header, padded to position 148.
    let rpc_call = |buf: &mut [u8], at: usize, xid: u32| {
        buf[at..at + 4].copy_from_slice(&xid.to_be_bytes());
        buf[at + 4..at + 8].fill(0);
        at + 148
    };

    let v1_fixed = FixedHeader {
        xid: 42,
        vers: v1::VERSION,
        credits: 128,
    };
    let v1_msg = v1::Message::Msg(lists);
    let v1_len = v1::encode(&mut buf, &v1_fixed, &v1_msg).expect("v1 encodes");
    let v1_total = rpc_call(&mut buf, v1_len, 42);
    let v1_wire = buf[..v1_total].to_vec();
    assert!(v1::decode(&v1_wire, &limits).is_ok());
    measure("v1 encode", || {
        v1::encode(
            black_box(&mut buf),
            black_box(&v1_fixed),
            black_box(&v1_msg),
        )
        .unwrap_or(0)
    });
    measure("v1 decode", || {
        v1::decode(black_box(&v1_wire), &limits).map_or(0, |h| h.header_len)
    });

    let v2_fixed = FixedHeader {
        vers: v2::VERSION,
        ..v1_fixed
    };
    let v2_msg = v2::Message::Msg(v2::Chunks {
        direction: MsgType::Call,
        inv_handle: 0x1000,
        lists,
    });
    let v2_len = v2::encode(&mut buf, &v2_fixed, &v2_msg).expect("v2 encodes");
    let v2_total = rpc_call(&mut buf, v2_len, 42);
    let v2_wire = buf[..v2_total].to_vec();
    assert!(v2::decode(&v2_wire, &limits).is_ok());
    measure("v2 encode", || {
        v2::encode(
            black_box(&mut buf),
            black_box(&v2_fixed),
            black_box(&v2_msg),
        )
        .unwrap_or(0)
    });
    measure("v2 decode", || {
        v2::decode(black_box(&v2_wire), &limits).map_or(0, |h| h.header_len)
    });
    // What a server does per NFS READ: the Call offers one Write chunk of
    // one segment; the Reply puts 4 KiB in it and the rest inline.
    let write = [segment(9)];
    let read_call = ChunkSlices {
        reads: &[],
        writes: &[&write],
        reply: None,
    };
    let len = v1::encode(&mut buf, &v1_fixed, &v1::Message::Msg(read_call)).expect("encodes");
    let total = rpc_call(&mut buf, len, 42);
    let read_wire = buf[..total].to_vec();
    fn received<'a>(wire: &'a [u8], limits: &Limits) -> Option<responder::Call<'a>> {
        match responder::receive(wire, limits) {
            Ok(Received::Call(call)) => Some(call),
            _ => None,
        }
    }
    let at = received(&read_wire, &limits)
        .and_then(|c| c.locate(&read_wire))
        .expect("a Call");
    measure("responder receive", || {
        received(black_box(&read_wire), &limits).map_or(0, |c| c.inline.len())
    });
    measure("responder receive + locate", || {
        received(black_box(&read_wire), &limits)
            .and_then(|c| c.locate(&read_wire))
            .map_or(0, |a| a.xid() as usize)
    });
    measure("responder Call from CallAt", || {
        black_box(at)
            .call(black_box(&read_wire))
            .map_or(0, |c| c.inline.len())
    });
    let mut send = [0u8; 1024];
    measure("responder Reply from CallAt", || {
        let Some(call) = at.call(black_box(&read_wire)) else {
            return 0;
        };
        let shape = ReplyShape::new(4200, Some((96, 4096)));
        let Ok(plan) = responder::plan_reply(&call.chunks, shape, 4096) else {
            return 0;
        };
        plan.writes().count()
            + plan.encode_header(&mut send, call.xid, 128).unwrap_or(0)
            + responder::invalidate_handle(&call.chunks, true).map_or(0, |h| h as usize)
    });
    measure("v1 decode + walk segments", || {
        v1::decode(black_box(&v1_wire), &limits).map_or(0, |h| match h.body {
            v1::Body::Msg(l) => {
                l.reads.segments().count() + l.reply.map_or(0, |r| r.segments().count())
            }
            _ => 0,
        })
    });
}
