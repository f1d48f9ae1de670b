//! Decode then re-encode: whatever a decoder accepts, the encoder writes
//! back byte for byte (bar the padding of an RDMA2_OPTIONAL opaque, which
//! the decoder does not police), and the result decodes to the same header.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rpcrdma_proto::chunk::{ChunkLists, ChunkSlices, ReadSegment, Segment};
use rpcrdma_proto::header::{self, Header};
use rpcrdma_proto::limits::Limits;
use rpcrdma_proto::{v1, v2};

struct Owned {
    reads: Vec<ReadSegment>,
    writes: Vec<Vec<Segment>>,
    reply: Option<Vec<Segment>>,
}

impl Owned {
    fn new(lists: &ChunkLists<'_>) -> Self {
        Self {
            reads: lists.reads.segments().collect(),
            writes: lists.writes.chunks().map(|c| c.segments().collect()).collect(),
            reply: lists.reply.map(|c| c.segments().collect()),
        }
    }

    fn with<R>(&self, f: impl FnOnce(ChunkSlices<'_>) -> R) -> R {
        let writes: Vec<&[Segment]> = self.writes.iter().map(Vec::as_slice).collect();
        f(ChunkSlices {
            reads: &self.reads,
            writes: &writes,
            reply: self.reply.as_deref(),
        })
    }
}

fn reencode(header: &Header<'_>, out: &mut [u8]) -> usize {
    let fixed = header.fixed();
    let len = match header {
        Header::V1(h) => match h.body {
            v1::Body::Msg(l) => Owned::new(&l).with(|s| v1::encode(out, &fixed, &v1::Message::Msg(s))),
            v1::Body::Nomsg(l) => Owned::new(&l).with(|s| v1::encode(out, &fixed, &v1::Message::Nomsg(s))),
            v1::Body::Error(e) => v1::encode(out, &fixed, &v1::Message::Error(e)),
        },
        Header::V2(h) => match h.body {
            v2::Body::Msg(c) => Owned::new(&c.lists).with(|lists| {
                let chunks = v2::Chunks { direction: c.direction, inv_handle: c.inv_handle, lists };
                v2::encode(out, &fixed, &v2::Message::Msg(chunks))
            }),
            v2::Body::Nomsg(c) => Owned::new(&c.lists).with(|lists| {
                let chunks = v2::Chunks { direction: c.direction, inv_handle: c.inv_handle, lists };
                v2::encode(out, &fixed, &v2::Message::Nomsg(chunks))
            }),
            v2::Body::Error(e) => v2::encode(out, &fixed, &v2::Message::Error(e)),
            v2::Body::Optional(o) => v2::encode(out, &fixed, &v2::Message::Optional(o)),
        },
    };
    len.expect("a decoded header re-encodes into a buffer as large as its source")
}

fuzz_target!(|data: &[u8]| {
    let limits = Limits::DEFAULT;
    let Ok(header) = header::decode(data, &limits) else {
        return;
    };
    let mut out = vec![0u8; data.len()];
    let len = reencode(&header, &mut out);
    assert_eq!(len, header.header_len());
    let optional = matches!(header, Header::V2(v2::Header { body: v2::Body::Optional(_), .. }));
    if !optional {
        assert_eq!(out[..len], data[..len]);
    }
    // Decoding the re-encoding (plus the original payload) gives the same.
    out.truncate(len);
    out.extend_from_slice(header.payload());
    let again = header::decode(&out, &limits).expect("re-encoded header decodes");
    assert_eq!(reencode_eq(&header, &again), true);
});

fn reencode_eq(a: &Header<'_>, b: &Header<'_>) -> bool {
    let mut x = vec![0u8; a.header_len()];
    let mut y = vec![0u8; b.header_len()];
    let (lx, ly) = (reencode(a, &mut x), reencode(b, &mut y));
    x[..lx] == y[..ly] && a.payload() == b.payload()
}
