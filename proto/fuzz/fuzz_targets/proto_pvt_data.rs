//! RFC 8797 private data parser and negotiation on arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rpcrdma_proto::pvt::{self, InlineThresholds, PrivateData};

fuzz_target!(|data: &[u8]| {
    let ours = InlineThresholds { send: 4096, recv: 8192 };
    let got = pvt::negotiate(ours, data);
    assert!(got.inline.send <= ours.send && got.inline.recv <= ours.recv);
    assert!(got.inline.send >= 1024 && got.inline.recv >= 1024);
    // Version 2: within ours, at least 4096 (ours allowing), never below version 1.
    assert!(got.inline_v2.send <= ours.send && got.inline_v2.recv <= ours.recv);
    assert!(got.inline_v2.send >= got.inline.send && got.inline_v2.recv >= got.inline.recv);
    assert!(got.inline_v2.send >= 4096 && got.inline_v2.recv >= 4096);
    if let Some(parsed) = PrivateData::parse(data) {
        // Sizes survive re-encoding; reserved flag bits do not.
        assert_eq!(PrivateData::parse(&parsed.encode()), Some(parsed));
        assert_eq!(parsed.encode()[..4], data[..4]);
    }
});
