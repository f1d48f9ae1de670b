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
//! - Replying: the callback service sends its Reply through
//!   `send_request` on a backchannel request, which [`RdmaXprt::send_bc_reply`]
//!   recognises before anything that assumes a forward Call: no
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

use core::ffi::c_int;

use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Relaxed, Release};

use super::connection::Shared;
use super::send::SendError;
use super::xprt::RdmaXprt;
use crate::proto::backchannel::{self, CallDropped, CLIENT_SLOTS};
use crate::proto::pvt::InlineThresholds;
use crate::proto::v1;
use crate::sunrpc::{SendRqst, XprtLocked, BC_BUF};

/// The backchannel of a transport; its requests are the transport's
/// [`crate::sunrpc::BcPool`].
pub(crate) struct Backchannel {
    /// Negotiated inline thresholds of the last connection, for
    /// `bc_maxpayload`; zero before the first.
    inline_send: Atomic<u32>,
    inline_recv: Atomic<u32>,
    /// The counters are in debugfs.
    published: Atomic<bool>,
}

impl Backchannel {
    pub(super) fn new() -> Self {
        Self {
            inline_send: Atomic::new(0),
            inline_recv: Atomic::new(0),
            published: Atomic::new(false),
        }
    }

    /// Records the inline thresholds a new connection negotiated.
    pub(super) fn connected(&self, inline: InlineThresholds) {
        self.inline_send.store(inline.send, Release);
        self.inline_recv.store(inline.recv, Release);
    }
}

impl RdmaXprt {
    /// Largest backward-direction RPC message, both ways: what the last
    /// connection negotiated, or before one, what we would offer.
    pub(super) fn bc_max_payload(&self) -> u32 {
        let (send, recv) = (
            self.bc.inline_send.load(Acquire),
            self.bc.inline_recv.load(Acquire),
        );
        let (send, recv) = if send == 0 || recv == 0 {
            (self.cfg.inline_write, self.cfg.inline_read)
        } else {
            (send, recv)
        };
        backchannel::client_max_payload(send, recv, BC_BUF as u32)
    }

    /// A backward Call arrived (Receive completion): hand it to the
    /// callback service, or drop it. The Receive buffer is free again
    /// when this returns.
    pub(super) fn backward_call(&self, shared: &Shared, call: &v1::Header<'_>) {
        self.stats.bcall_received.add(1);
        let inline = shared.inline();
        let max = backchannel::client_max_payload(inline.send, inline.recv, BC_BUF as u32);
        let claimed = backchannel::check_call(call.payload, max)
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
                if let Err(err) = slot.deliver(self.xprt(), call.payload) {
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

    /// Sends the Reply of a backchannel request (`send_request`, with
    /// `XPRT_LOCKED`): inline, RDMA_MSG, the backchannel's credits. Never
    /// closes the connection: a failed post leaves that to autoclose.
    pub(super) fn send_bc_reply(&self, rqst: &SendRqst<'_>, locked: &XprtLocked<'_>) -> c_int {
        if !self.bc_pool().is_reply(rqst) {
            return EINVAL.to_errno();
        }
        if !self.connected() {
            return ENOTCONN.to_errno();
        }
        let Some(ep) = self.ep(locked) else {
            return ENOTCONN.to_errno();
        };
        let snd = rqst.snd_buf();
        let len = snd.len() as usize;
        let xid = u32::from_be(rqst.xid());
        let inline_send = ep.inline().send as usize;
        let sent = ep.send_backward(|buf| {
            let hdr = backchannel::encode_backward_v1(buf, xid, CLIENT_SLOTS).ok()?;
            let end = hdr.checked_add(len)?;
            if end > inline_send {
                return None;
            }
            snd.read(0, buf.get_mut(hdr..end)?).ok()?;
            Some((end, end))
        });
        match sent {
            Ok(()) => {
                rqst.add_bytes_sent(len);
                self.stats.bcall_replied.add(1);
                0
            }
            Err(SendError::NoBuffer) => {
                self.stats.empty_sendctx_q.add(1);
                ENOBUFS.to_errno()
            }
            Err(SendError::TooBig) => {
                rwarn!(
                    "backward reply of {} bytes exceeds the inline threshold\n",
                    len
                );
                EMSGSIZE.to_errno()
            }
            Err(SendError::Post) => {
                self.force_disconnect();
                ENOTCONN.to_errno()
            }
        }
    }
}

/// `bc_setup`, once the requests are allocated: publishes the counters
/// in the transport's debugfs directory, once.
pub(super) fn publish(rx: &RdmaXprt) {
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
