// SPDX-License-Identifier: GPL-2.0

//! The client backchannel (RFC 8167): NFSv4.1 and 4.2 callbacks (CB_NULL,
//! CB_SEQUENCE, CB_RECALL ...) that the server sends on the client's own
//! connection.
//!
//! - Receiving: a backward Call is recognised by the classifier before
//!   anything reads its credit field, so the server's backchannel credits
//!   (2 for nfsd) never reach the forward window. It is checked against
//!   the backchannel's payload limit, copied into a backchannel request
//!   ([`crate::sunrpc::BcPool`]) and handed to the callback service; its
//!   Receive buffer goes back to the device at once.
//! - Versions: on a connection settled on RPC-over-RDMA version 2 the
//!   server's backward Calls come as version 2 (RDMA2_MSG, direction
//!   CALL) and our Replies go as version 2 too; else version 1.
//! - Replying: the callback service sends its Reply through
//!   `send_request` on a backchannel request, which
//!   [`RdmaXprt::send_bc_reply`] (in `marshal`) sends without anything
//!   that assumes a forward Call: no
//!   congestion slot, no retransmission check, no Reply expected. The
//!   Reply goes inline as RDMA_MSG with the backchannel's own credits.
//! - Resources: every connection reserves [`CLIENT_SLOTS`] Receives and
//!   Send buffers beyond the forward window's, so backward traffic never
//!   takes a buffer a forward RPC was promised.
//! - Bad input (a Call with chunks, longer than the payload limit, with
//!   no callback service, or beyond the slots) is dropped, counted and
//!   logged under the rate limit; forward RPCs never notice.
//!
//! The requests outlive connections: a Call received on one connection
//! may be answered on the next, or its Reply dropped by sunrpc when none
//! comes in time.

use kernel::sync::atomic::Relaxed;

use super::connection::Shared;
use super::state::RdmaXprt;
use crate::proto::backchannel::{self, CallDropped};
use crate::proto::negotiate::Version;
use crate::sunrpc::{trace, BC_BUF};

impl RdmaXprt {
    /// A backward Call `xid` whose RPC message is `payload` arrived in
    /// `version` (Receive completion): hand it to the callback service,
    /// or drop it. The Receive buffer is free again when this returns.
    pub(super) fn backward_call(
        &self,
        shared: &Shared,
        xid: u32,
        payload: &[u8],
        version: Version,
    ) {
        self.stats.bcall_received.add(1);
        let inline = shared.inline();
        let max = if version == Version::V2 {
            backchannel::client_max_payload_v2(inline.send, inline.recv, BC_BUF as u32)
        } else {
            backchannel::client_max_payload(inline.send, inline.recv, BC_BUF as u32)
        };
        let claimed = backchannel::check_call(payload, max)
            .and_then(|()| {
                if self.xprt().has_bc_serv() {
                    Ok(())
                } else {
                    Err(CallDropped::NoService)
                }
            })
            .and_then(|()| self.bc_pool().claim().ok_or(CallDropped::NoSlot));
        match claimed {
            Ok(slot) => {
                // Before the callback service can have answered it.
                trace::xprtrdma_cb(false, self.xprt(), xid);
                if let Err(err) = slot.deliver(self.xprt(), payload) {
                    self.stats.bcall_dropped.add(1);
                    rwarn!("backward call not delivered ({})\n", err.to_errno());
                }
            }
            Err(why) => self.bcall_dropped(why),
        }
    }

    /// Counts and logs (rate limited) a backward Call dropped for `why`.
    pub(super) fn bcall_dropped(&self, why: CallDropped) {
        self.stats.bcall_dropped.add(1);
        rwarn!("backward call from {} dropped: {:?}\n", self.peer(), why);
    }
}

/// `bc_setup` for `reqs` requests, once they are allocated: publishes
/// the counters in the transport's debugfs directory, once.
pub(super) fn publish(rx: &RdmaXprt, reqs: u32) {
    trace::xprtrdma_cb_setup(rx.xprt(), reqs);
    if !rx.bc.published.xchg(true, Relaxed) {
        let s = &rx.stats;
        for (name, counter) in [
            (c"rdma_bc_calls_received", &s.bcall_received),
            (c"rdma_bc_replies_sent", &s.bcall_replied),
            (c"rdma_bc_calls_dropped", &s.bcall_dropped),
        ] {
            rx.debugfs_u64(name, counter.atomic());
        }
    }
}
