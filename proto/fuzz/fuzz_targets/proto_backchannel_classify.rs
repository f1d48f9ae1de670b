//! Direction classification of arbitrary received messages, for both ends.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rpcrdma_proto::backchannel::{self, Direction, Role};
use rpcrdma_proto::header::{self, RpcPrefix};
use rpcrdma_proto::limits::Limits;

fuzz_target!(|data: &[u8]| {
    let _ = RpcPrefix::parse(data, 0);
    let Ok(msg) = header::decode(data, &Limits::DEFAULT) else {
        return;
    };
    let client = backchannel::classify(Role::Client, &msg);
    let server = backchannel::classify(Role::Server, &msg);
    // A client never receives forward Calls, a server never forward Replies.
    assert!(!matches!(client, Ok(Direction::ForwardCall | Direction::BackwardReply)));
    assert!(!matches!(server, Ok(Direction::ForwardReply | Direction::BackwardCall)));
});
