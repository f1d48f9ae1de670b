//! The Requester's receive rules on arbitrary messages: no panic, a grant
//! always within [1, max], and no written length past what was offered.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rpcrdma_proto::plan::{check_reply, Offered, ReplyShape};
use rpcrdma_proto::reply::{classify, Inbound};

fuzz_target!(|data: &[u8]| {
    let Some((offer, msg)) = data.split_first_chunk::<8>() else {
        return;
    };
    let max = u32::from(offer[0]).max(1);
    let offered = Offered {
        write_chunk: (offer[1] & 1 != 0).then(|| u32::from_be_bytes([0, offer[2], offer[3], 0])),
        reply_chunk: (offer[1] & 2 != 0).then(|| u32::from_be_bytes([0, offer[4], offer[5], 0])),
    };
    if let Inbound::Reply { credits, body, .. } = classify(msg, max) {
        assert!((1..=max).contains(&credits));
        if let Ok(body) = body {
            match check_reply(body.nomsg, &body.lists, &offered) {
                Ok(ReplyShape::Write { written }) => {
                    assert!(written <= offered.write_chunk.unwrap_or(0))
                }
                Ok(ReplyShape::Reply { written }) => {
                    assert!(written > 0 && written <= offered.reply_chunk.unwrap_or(0))
                }
                Ok(ReplyShape::Inline) | Err(_) => {}
            }
        }
    }
});
