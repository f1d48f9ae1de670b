//! The Responder's path for every received Call on arbitrary bytes:
//! `receive`, the Call found again where it lies, then `assemble` and
//! `plan_call_reply`. No panic; the same Call found again; pieces contiguous
//! and within the limit; every Reply byte sent once, by Write or inline;
//! headers the size announced.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rpcrdma_proto::limits::Limits;
use rpcrdma_proto::responder::{assemble, plan_call_reply, receive, Received, ReplyShape};

fuzz_target!(|data: &[u8]| {
    let Some((knobs, msg)) = data.split_first_chunk::<12>() else {
        return;
    };
    let word = |i: usize| u32::from_be_bytes([knobs[i], knobs[i + 1], knobs[i + 2], knobs[i + 3]]);
    let max_len = word(0) & 0x1f_ffff;
    let len = word(4) & 0x1f_ffff;
    let inline_max = u32::from(u16::from_be_bytes([knobs[8], knobs[9]]));
    let payload = (knobs[10] & 1 != 0).then(|| {
        let off = (len / 256)
            .saturating_mul(u32::from(knobs[11] & 0xf))
            .min(len);
        (off, (len - off) / 2 + u32::from(knobs[11] >> 4))
    });
    let Ok(Received::Call(received)) = receive(msg, &Limits::DEFAULT) else {
        return;
    };
    // The server goes on from where the Call lies in its message.
    let call = received.locate(msg).and_then(|at| at.call(msg)).unwrap();
    assert_eq!(call, received);
    if let Ok(a) = assemble(&call, max_len) {
        let total = a.total_len();
        assert!(total <= max_len);
        let mut at = 0u32;
        for piece in a {
            assert_eq!(piece.dest(), at);
            assert!(!piece.is_empty());
            at = at.checked_add(piece.len()).unwrap();
        }
        assert_eq!(at, total);
    }
    // With knobs[10] bit 1, a second payload after the first: an NFSv4
    // COMPOUND with two READs.
    let mut shape = ReplyShape::new(len, payload);
    if let Some((off, plen)) = payload.filter(|_| knobs[10] & 2 != 0) {
        let at = off.saturating_add(plen).saturating_add(3) & !3;
        shape.payloads[1] = Some((at, len.saturating_sub(at) / 2));
    }
    let Ok(plan) = plan_call_reply(&call, shape, inline_max) else {
        return;
    };
    let mut sent = 0u64;
    for w in plan.writes() {
        assert!(w.len > 0 && w.src.checked_add(w.len).is_some_and(|end| end <= len));
        sent += u64::from(w.len);
    }
    let inline: u64 = plan
        .inline_ranges()
        .map(|r| u64::from(r.end - r.start))
        .sum();
    let body: u64 = plan.body_ranges().map(|r| u64::from(r.end - r.start)).sum();
    assert_eq!(body, u64::from(plan.body_len()));
    let by_write = if plan.nomsg() { body } else { 0 };
    assert_eq!(sent, u64::from(plan.payload_len()) + by_write);
    assert!(u64::from(plan.header_len()) + inline <= u64::from(inline_max));
    let mut hdr = [0u8; 8192];
    if let Ok(n) = plan.encode_header(&mut hdr, call.xid, 1) {
        assert_eq!(n, plan.header_len() as usize);
    }
});
