// SPDX-License-Identifier: GPL-2.0

//! The RPC-over-RDMA version of each connection
//! (draft-cel-nfsv4-rpcrdma-version-two-02, "Protocol Version
//! Negotiation"), decided by [`Negotiator`]: the first Call on a new
//! connection goes as version 2 within 1024 bytes (the window is one
//! credit until its answer); a version 2 Reply settles on 2; ERR_VERS
//! settles on 1 and its RPC goes again, as version 1, on the same
//! connection; a connection lost with the probe unanswered means 1.
//! A server found to speak version 1 only is remembered by address, for
//! every transport, so that it is never probed twice. The `max_version`
//! module parameter at 1 turns version 2 off.

use kernel::sync::atomic::{Acquire, Atomic, Relaxed, Release};

use super::state::RdmaXprt;
use crate::proto::negotiate::{Action, Answer, Negotiator, SendAs, Version};

/// Servers known to speak version 1 only, by a hash of their address, in
/// a slot the hash picks: a collision only costs one more probe.
const KNOWN: usize = 64;
static V1_ONLY: [Atomic<u64>; KNOWN] = [const { Atomic::new(0) }; KNOWN];

/// FNV-1a of the server's address; never 0, which marks a free slot.
fn key(addr: &str) -> u64 {
    let hash = addr.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    hash.max(1)
}

fn slot(key: u64) -> &'static Atomic<u64> {
    // PANIC: the index is reduced modulo the array's length.
    &V1_ONLY[(key % KNOWN as u64) as usize]
}

fn known_v1(addr: &str) -> bool {
    let key = key(addr);
    slot(key).load(Relaxed) == key
}

fn remember(addr: &str, version: Version) {
    let key = key(addr);
    match version {
        Version::V1 => slot(key).store(key, Relaxed),
        // It was upgraded: forget it, if that slot is still its.
        Version::V2 => {
            let _ = slot(key).cmpxchg(key, 0, Relaxed);
        }
    }
}

impl RdmaXprt {
    /// A new connection is up: it probes, unless version 2 is off for it
    /// (`offers_v2`, read at its connect) or the server is known to speak
    /// version 1 only.
    pub(super) fn version_connected(&self, offers_v2: bool) {
        let v1 = !offers_v2 || known_v1(self.peer());
        let neg = if v1 {
            Negotiator::v1_only()
        } else {
            Negotiator::new()
        };
        self.with_neg(|n| *n = neg);
        self.show_version(neg.version());
        // The transport's debugfs directory exists once it connects.
        if !self.version_published.xchg(true, Relaxed) {
            self.debugfs_u64(c"rdma_version", self.stats.rdma_version.atomic());
            self.debugfs_u64(
                c"cant_reply_resends",
                self.stats.cant_reply_resends.atomic(),
            );
            self.debugfs_u64(c"unsent_replies", self.stats.unsent_replies.atomic());
            self.debugfs_u64(
                c"reply_waits_for_post",
                self.stats.reply_waits_for_post.atomic(),
            );
        }
    }

    /// The connection is going: a probe on it never answered means the
    /// server dropped what it did not understand, version 1 (its RPC goes
    /// again on the next connection, as every unanswered one).
    pub(super) fn version_lost(&self) {
        if self.with_neg(Negotiator::on_probe_lost) != Action::None {
            remember(self.peer(), Version::V1);
            rinfo!(
                "{}: version 2 probe lost with its connection: version 1\n",
                self.peer()
            );
        }
    }

    /// The version the connection settled on, if it has: the
    /// [`Negotiator`]'s, as [`RdmaXprt::with_neg`] publishes it with its
    /// every change, read without the lock.
    pub(super) fn version(&self) -> Option<Version> {
        Version::from_number(self.settled.load(Acquire))
    }

    /// Runs `f` on the [`Negotiator`], under its lock, and publishes
    /// the settled version it leaves.
    fn with_neg<R>(&self, f: impl FnOnce(&mut Negotiator) -> R) -> R {
        let mut neg = self.neg.lock();
        let r = f(&mut neg);
        self.settled
            .store(neg.version().map_or(0, Version::number), Release);
        r
    }

    /// How to send the Call with `xid` (as in `rq_xid`).
    pub(super) fn version_send(&self, xid: u32) -> SendAs {
        // Settled, the Negotiator answers that version and stays.
        match self.version() {
            Some(version) => SendAs::Version(version),
            None => self.with_neg(|n| n.send(u32::from_be(xid))),
        }
    }

    /// The Call with `xid` (as in `rq_xid`) fails before it reaches the
    /// wire: if it was the probe, the next Call probes.
    pub(super) fn version_unsent(&self, xid: u32) {
        // Settled, there is no probe to forget.
        if self.version().is_none() {
            self.with_neg(|n| n.on_unsent(u32::from_be(xid)));
        }
    }

    /// The RPC of the Call with `xid` (as on the wire) ended, answered or
    /// not: if it was the probe and still unanswered, the next Call
    /// probes, and a connection lost afterwards says nothing of the
    /// server's version.
    pub(super) fn version_abandoned(&self, xid: u32) {
        if self.version().is_none() {
            self.with_neg(|n| n.on_abandoned(xid));
        }
    }

    /// Feeds the answer to the Call with `xid` (as on the wire) to the
    /// negotiation; what the Reply's RPC must do.
    pub(super) fn version_answer(&self, xid: u32, answer: Answer) -> Action {
        // Settled, an answer changes nothing.
        if self.version().is_some() {
            return Action::None;
        }
        let (was, action, now) = self.with_neg(|neg| {
            let was = neg.version();
            let action = neg.on_answer(xid, answer);
            (was, action, neg.version())
        });
        if was != now {
            if let Some(version) = now {
                remember(self.peer(), version);
                // Once per server address, which is remembered: not rate
                // limited, so that a test can count it.
                if version == Version::V1 {
                    kernel::pr_info!("{} speaks RPC-over-RDMA version 1\n", self.peer());
                } else {
                    rdebug!("{} speaks RPC-over-RDMA version 2\n", self.peer());
                }
            }
            self.show_version(now);
        }
        if action == Action::Incompatible {
            rwarn!(
                "{} speaks neither RPC-over-RDMA version 1 nor 2\n",
                self.peer()
            );
        }
        action
    }

    /// The negotiated version in debugfs (`rdma_version`): 0 while the
    /// probe is out.
    fn show_version(&self, version: Option<Version>) {
        let n = version.map_or(0, Version::number);
        self.stats
            .rdma_version
            .atomic()
            .store(u64::from(n), Relaxed);
    }
}
