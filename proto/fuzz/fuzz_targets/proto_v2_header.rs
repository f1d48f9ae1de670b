//! Version 2 decoder on arbitrary bytes: never panics, and accepted
//! headers are consistent with the buffer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rpcrdma_proto::limits::Limits;
use rpcrdma_proto::v2;

fuzz_target!(|data: &[u8]| {
    let Ok(header) = v2::decode(data, &Limits::DEFAULT) else {
        return;
    };
    assert_eq!(header.header_len + header.payload.len(), data.len());
    if let v2::Body::Msg(chunks) | v2::Body::Nomsg(chunks) = header.body {
        assert_eq!(chunks.lists.writes.chunks().count(), chunks.lists.writes.chunk_count() as usize);
    }
});
