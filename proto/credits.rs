//! Credit-based flow control (RFC 8166 §3.3.1, RFC 8167 §2.1).
//!
//! A Requester may have no more Calls outstanding than the Responder last
//! granted in `rdma_credit`. The grant comes from the peer, so it is
//! sanitised before use exactly like rpcrdma.ko's `rpcrdma_reply_handler`
//! does: zero becomes one (a zero window would deadlock) and anything above
//! our own maximum is capped. Forward and backward direction windows are
//! separate instances of [`CreditWindow`].

/// Clamps a credit value received from the peer to `[1, max]`.
pub fn sanitize(raw: u32, max: u32) -> u32 {
    raw.min(max).max(1)
}

/// A sender's view of how many more Calls it may have outstanding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CreditWindow {
    max: u32,
    granted: u32,
    in_flight: u32,
}

impl CreditWindow {
    /// A fresh window: one credit until the first grant arrives
    /// (RFC 8166 §3.3.3), at most `max` (our slot table size, at least 1).
    pub fn new(max: u32) -> Self {
        Self {
            max: max.max(1),
            granted: 1,
            in_flight: 0,
        }
    }

    /// Applies the `rdma_credit` of a received Reply and returns the
    /// sanitised grant now in force.
    pub fn update(&mut self, raw: u32) -> u32 {
        self.granted = sanitize(raw, self.max);
        self.granted
    }

    /// Takes a credit for a Call about to be sent, or returns `false` if
    /// that would exceed the grant: the Call must wait.
    pub fn try_acquire(&mut self) -> bool {
        if self.in_flight >= self.granted {
            return false;
        }
        self.in_flight = self.in_flight.saturating_add(1);
        true
    }

    /// Returns the credit of a Call whose Reply arrived (or that was
    /// abandoned).
    pub fn release(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// Forgets the grant and the Calls in flight: a new connection starts
    /// over with one credit (rpcrdma.ko's `rpcrdma_reset_cwnd`).
    pub fn reset(&mut self) {
        *self = Self::new(self.max);
    }

    /// The current sanitised grant.
    pub fn granted(&self) -> u32 {
        self.granted
    }

    /// Calls sent and not yet answered.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// How many more Calls may be sent now.
    pub fn available(&self) -> u32 {
        self.granted.saturating_sub(self.in_flight)
    }
}
