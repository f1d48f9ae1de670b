//! The Requester's protocol version negotiation
//! (draft-cel-nfsv4-rpcrdma-version-two-02, "Protocol Version
//! Negotiation").
//!
//! On a new connection the first Call goes out as version 2, small enough
//! for a version 1 Responder's 1024-byte inline threshold, and nothing else
//! is sent until it is answered. A valid version 2 Reply settles on
//! version 2. An ERR_VERS whose range excludes 2 settles on version 1 and
//! the probe's RPC must be sent again as version 1: it was not executed.
//! A lost probe (connection loss or timeout) also means version 1. The
//! outcome survives reconnects, so a version 1 peer is never probed twice.

use super::chunk::ChunkSlices;
use super::header::Header;
use super::pvt::InlineThresholds;
use super::{v1, v2};

/// An RPC-over-RDMA protocol version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Version {
    /// RFC 8166.
    V1,
    /// draft-cel-nfsv4-rpcrdma-version-two.
    V2,
}

impl Version {
    /// The `rdma_vers` value.
    pub fn number(self) -> u32 {
        match self {
            Self::V1 => v1::VERSION,
            Self::V2 => v2::VERSION,
        }
    }

    /// The version an `rdma_vers` value names, if we speak it.
    pub fn from_number(vers: u32) -> Option<Self> {
        match vers {
            v1::VERSION => Some(Self::V1),
            v2::VERSION => Some(Self::V2),
            _ => None,
        }
    }
}

/// How to send the next Call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendAs {
    /// Send with this version, within the connection's inline thresholds.
    Version(Version),
    /// Send as version 2, but no larger than `max_inline` bytes in all:
    /// this Call is the probe.
    Probe {
        /// Largest Send this Call may use (version 1's default threshold).
        max_inline: u32,
    },
    /// Hold the Call until the probe is answered.
    Wait,
}

/// What the Requester learned from the answer to a Call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// A valid, non-error Reply with this `rdma_vers`.
    Reply {
        /// The Reply's version.
        vers: u32,
    },
    /// ERR_VERS (or RDMA2_ERR_VERS) with the Responder's version range.
    ErrVers {
        /// Lowest version the Responder supports.
        low: u32,
        /// Highest version the Responder supports.
        high: u32,
    },
    /// Any other transport error.
    OtherError,
}

impl Answer {
    /// Reads the answer out of a decoded Reply header of either version.
    pub fn of(header: &Header<'_>) -> Self {
        match header {
            Header::V1(h) => match h.body {
                v1::Body::Error(v1::RdmaError::Vers { low, high }) => Self::ErrVers { low, high },
                // Whatever else a version 1 header says, its sender
                // speaks version 1.
                v1::Body::Error(v1::RdmaError::Chunk) => Self::Reply { vers: v1::VERSION },
                v1::Body::Msg(_) | v1::Body::Nomsg(_) => Self::Reply { vers: v1::VERSION },
            },
            Header::V2(h) => match h.body {
                v2::Body::Error(v2::RdmaError::Vers { low, high }) => Self::ErrVers { low, high },
                v2::Body::Error(_) => Self::OtherError,
                v2::Body::Msg(_) | v2::Body::Nomsg(_) | v2::Body::Optional(_) => {
                    Self::Reply { vers: v2::VERSION }
                }
            },
        }
    }
}

/// What the transport must do after an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing special; complete the RPC as usual.
    None,
    /// The probe was refused or lost: send the RPC with this XID again, as
    /// version 1. It must not be completed with an error.
    ResendAsV1 {
        /// The probe's XID.
        xid: u32,
    },
    /// The Responder supports neither version: fail and disconnect.
    Incompatible,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Connected, nothing sent yet.
    Unprobed,
    /// The probe with this XID is outstanding.
    Probing { xid: u32 },
    /// Settled for this connection.
    Settled(Version),
    /// No common version.
    Failed,
}

/// Per-peer negotiation state; keep it across reconnects to the same peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiator {
    state: State,
    /// The last settled outcome with this peer.
    remembered: Option<Version>,
}

impl Default for Negotiator {
    fn default() -> Self {
        Self::new()
    }
}

impl Negotiator {
    /// A Negotiator for a peer never talked to.
    pub fn new() -> Self {
        Self {
            state: State::Unprobed,
            remembered: None,
        }
    }

    /// A Negotiator that only ever speaks version 1.
    pub fn v1_only() -> Self {
        Self {
            state: State::Settled(Version::V1),
            remembered: Some(Version::V1),
        }
    }

    /// A new connection is up: probe again, unless the peer is already
    /// known to speak only version 1.
    pub fn on_connect(&mut self) {
        self.state = match self.remembered {
            Some(Version::V1) => State::Settled(Version::V1),
            Some(Version::V2) | None => State::Unprobed,
        };
    }

    /// The version settled on for this connection, if any.
    pub fn version(&self) -> Option<Version> {
        match self.state {
            State::Settled(version) => Some(version),
            _ => None,
        }
    }

    /// Decides how to send the Call with `xid`. Call once per Call, and
    /// again for a Call told to [`SendAs::Wait`].
    pub fn send(&mut self, xid: u32) -> SendAs {
        match self.state {
            State::Unprobed => {
                self.state = State::Probing { xid };
                SendAs::Probe {
                    max_inline: v1::DEFAULT_INLINE,
                }
            }
            State::Probing { xid: probe } if probe == xid => SendAs::Probe {
                max_inline: v1::DEFAULT_INLINE,
            },
            State::Probing { .. } | State::Failed => SendAs::Wait,
            State::Settled(version) => SendAs::Version(version),
        }
    }

    /// Feeds the answer to the Call with `xid`.
    pub fn on_answer(&mut self, xid: u32, answer: Answer) -> Action {
        let State::Probing { xid: probe } = self.state else {
            return Action::None;
        };
        if probe != xid {
            return Action::None;
        }
        match answer {
            Answer::Reply { vers } if vers == Version::V2.number() => {
                self.settle(Version::V2);
                Action::None
            }
            // A Responder that answers in version 1 speaks version 1; its
            // Reply still completes the RPC.
            Answer::Reply { .. } => {
                self.settle(Version::V1);
                Action::None
            }
            Answer::ErrVers { low, high } if (low..=high).contains(&Version::V2.number()) => {
                // Claims version 2 yet refused it: nothing sane to retry.
                self.fail()
            }
            Answer::ErrVers { low, high } if (low..=high).contains(&Version::V1.number()) => {
                self.settle(Version::V1);
                Action::ResendAsV1 { xid }
            }
            Answer::ErrVers { .. } => self.fail(),
            // Not a version problem: the probe got through as version 2.
            Answer::OtherError => {
                self.settle(Version::V2);
                Action::None
            }
        }
    }

    /// The Call with `xid` could not be sent at all (its RPC fails before
    /// reaching the wire): if it was the probe, the next Call probes
    /// instead. Nothing was learned of the peer.
    pub fn on_unsent(&mut self, xid: u32) {
        if self.state == (State::Probing { xid }) {
            self.state = State::Unprobed;
        }
    }

    /// The RPC of the Call with `xid` ended without its answer being fed
    /// here (killed, timed out): if it was the probe, the next Call
    /// probes. Its answer may still come, and is then ignored; nothing
    /// was learned of the peer, so a connection lost afterwards does not
    /// make it a version 1 peer.
    pub fn on_abandoned(&mut self, xid: u32) {
        self.on_unsent(xid);
    }

    /// The connection was lost or the probe timed out: assume the peer
    /// dropped a version 2 message it did not understand.
    pub fn on_probe_lost(&mut self) -> Action {
        match self.state {
            State::Probing { xid } => {
                self.settle(Version::V1);
                Action::ResendAsV1 { xid }
            }
            _ => Action::None,
        }
    }

    fn settle(&mut self, version: Version) {
        self.state = State::Settled(version);
        self.remembered = Some(version);
    }

    fn fail(&mut self) -> Action {
        self.state = State::Failed;
        Action::Incompatible
    }
}

/// Bytes a version 2 Call or Reply header has beyond version 1's:
/// `rdma_direction` and `rdma_inv_handle`.
pub const V2_EXTRA: u32 = 8;

/// The version a Call goes in, for [`Negotiator::send`]'s verdict, and
/// the inline thresholds to plan it with, out of the connection's
/// thresholds for each version (`v1`, `v2`: [`super::pvt::Negotiated`]);
/// `None` to hold it. A
/// version 2 Call and its Reply have [`V2_EXTRA`] bytes more of header.
/// The probe is planned with version 1's thresholds, and sent no larger
/// than `max_inline` ("Protocol Version Negotiation": version 1's 1024
/// bytes), since the peer may speak only version 1; once settled on
/// version 2, its own thresholds apply.
pub fn call_thresholds(
    send_as: SendAs,
    v1: InlineThresholds,
    v2: InlineThresholds,
) -> Option<(Version, InlineThresholds)> {
    let shrink = |t: InlineThresholds, send: u32| InlineThresholds {
        send: send.saturating_sub(V2_EXTRA),
        recv: t.recv.saturating_sub(V2_EXTRA),
    };
    match send_as {
        SendAs::Wait => None,
        SendAs::Version(Version::V1) => Some((Version::V1, v1)),
        SendAs::Version(Version::V2) => Some((Version::V2, shrink(v2, v2.send))),
        SendAs::Probe { max_inline } => Some((Version::V2, shrink(v1, v1.send.min(max_inline)))),
    }
}

/// The `rdma_inv_handle` of a version 2 Call with `chunks`: the first
/// handle of its Write list, Reply chunk or Read list, in that order,
/// where the Reply lands; zero when it has none. Every handle of ours is
/// an FRWR registration of this one RPC, so any may be invalidated
/// remotely (draft "Remote Invalidation").
pub fn inv_handle(chunks: &ChunkSlices<'_>) -> u32 {
    let writes = chunks.writes.iter().flat_map(|c| c.iter());
    let reply = chunks.reply.into_iter().flatten();
    let reads = chunks.reads.iter().map(|r| &r.segment);
    writes
        .chain(reply)
        .chain(reads)
        .map(|s| s.handle)
        .next()
        .unwrap_or(0)
}
