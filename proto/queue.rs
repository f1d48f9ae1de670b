//! Work queue economy: which Sends are signalled, and how many Receives
//! are reposted at once (rpcrdma.ko's `re_send_batch` and
//! `rpcrdma_post_recvs`).
//!
//! On an RC QP work requests complete in order, so the completion of one
//! signalled Send retires every Send (and REG_MR) posted before it: most
//! Sends need no completion of their own. Receives go back to the device
//! in chains, one doorbell for several buffers.

/// Sends between two signalled ones: an eighth of the credits, between 1
/// and 16 (`re_send_batch`).
pub fn send_batch(slots: u32) -> u32 {
    (slots / 8).clamp(1, 16)
}

/// Receives handed back to the device in one post: a sixteenth of the
/// credits, between 1 and 8 (`RPCRDMA_MAX_RECV_BATCH` is 7). The
/// transport keeps this many more Receives than it grants credits for, so
/// the ones waiting for a batch never leave a Reply without a buffer.
pub fn recv_batch(slots: u32) -> u32 {
    (slots / 16).clamp(1, 8)
}

/// Chooses which Sends are signalled.
///
/// Unsignalled work requests hold their Send Queue entries until a later
/// signalled one completes, so besides every `batch`-th Send, a Send is
/// signalled once the work requests posted since the last signalled one
/// (REG_MRs chained before Sends included) reach `wr_budget`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SendSignals {
    batch: u32,
    wr_budget: u32,
    sends: u32,
    wrs: u32,
}

impl SendSignals {
    /// A policy for a Send Queue of which `wr_budget` entries may wait
    /// for a signalled completion.
    pub fn new(batch: u32, wr_budget: u32) -> Self {
        Self {
            batch: batch.max(1),
            wr_budget: wr_budget.max(1),
            sends: 0,
            wrs: 0,
        }
    }

    /// Whether the Send about to be posted, behind `chained` other work
    /// requests, is signalled. `awaited` forces it: someone waits for
    /// this very Send to complete (its pages are mapped).
    pub fn next(&mut self, chained: u32, awaited: bool) -> bool {
        let sends = self.sends.saturating_add(1);
        let wrs = self.wrs.saturating_add(chained).saturating_add(1);
        if awaited || sends >= self.batch || wrs >= self.wr_budget {
            self.sends = 0;
            self.wrs = 0;
            true
        } else {
            self.sends = sends;
            self.wrs = wrs;
            false
        }
    }
}
