//! Version 1 decoder on arbitrary bytes: never panics, never reads past the
//! buffer, and every accepted header's views stay consistent.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rpcrdma_proto::limits::Limits;
use rpcrdma_proto::v1;

fuzz_target!(|data: &[u8]| {
    let Ok(header) = v1::decode(data, &Limits::DEFAULT) else {
        return;
    };
    assert!(header.header_len <= data.len());
    assert_eq!(header.header_len + header.payload.len(), data.len());
    if let v1::Body::Msg(lists) | v1::Body::Nomsg(lists) = header.body {
        let segments: usize = lists.reads.chunks().map(|c| c.len()).sum();
        assert_eq!(segments, lists.reads.segment_count());
        assert_eq!(lists.reads.chunks().count(), lists.reads.chunk_count() as usize);
        assert_eq!(lists.writes.chunks().count(), lists.writes.chunk_count() as usize);
        let _ = lists.sole_handle();
    }
});
