//! Pure protocol core of `rpcrdma_rs`: RPC-over-RDMA without I/O.
//!
//! Everything here is `core`-only, allocation-free and panic-free on any
//! input, so the same files build into the kernel module and into the host
//! crate `rpcrdma-proto` (see `lib.rs`) for tests, fuzzing and benchmarks.
//!
//! - [`header`], [`v1`], [`v2`]: transport header codecs (RFC 8166 §4,
//!   draft-cel-nfsv4-rpcrdma-version-two-02), decoding in place over the
//!   receive buffer and encoding into a caller-provided send buffer.
//! - [`chunk`]: RDMA segments and the borrowing views over the Read list,
//!   Write list and Reply chunk.
//! - [`limits`], [`error`]: bounds on peer input and the RDMA_ERROR each
//!   violation calls for.
//! - [`pvt`]: RDMA-CM private data and inline threshold negotiation
//!   (RFC 8797).
//! - [`negotiate`]: the requester's version 2 -> version 1 negotiation.
//! - [`backchannel`]: message direction and backward credits (RFC 8167).
//! - [`plan`], [`credits`]: chunk planning, the Send layout of a Call and
//!   the credit window.
//! - [`queue`]: Send signalling and Receive batching.
//! - [`reply`]: what a Requester does with a received message.
//! - [`responder`]: what a Responder does with a received Call, how it
//!   assembles the Call and how it sends the Reply.
//! - [`selftest`]: known-answer checks shared by `cargo test` and KUnit.
//!
//! # From the transport
//!
//! Receiving: [`header::decode`] the buffer. On error, a Responder answers
//! [`error::DecodeError::reply_error`] (or `v2_reply_error`) to the XID
//! from [`header::peek_fixed`], and a Requester drops the message. The
//! server applies the whole of RFC 8166 §4.5 through
//! [`responder::receive`], which also drops what is shorter than the
//! minimal header and every backward-direction Reply it cannot use. A
//! decoded message is routed with [`backchannel::classify`]; a forward
//! Reply's credits go to [`credits::CreditWindow::update`] and its
//! [`negotiate::Answer::of`] to the [`negotiate::Negotiator`].
//!
//! Sending: the Negotiator picks the version, [`plan::plan`] the chunks;
//! once memory is registered, [`v1::encode`] or [`v2::encode`] writes the
//! header into the Send buffer, ahead of the RPC message.
//!
//! Module code refers to its siblings with `super::`, never `crate::`,
//! because the crate root differs between the two builds.

#![forbid(unsafe_code)]

pub mod backchannel;
pub mod chunk;
pub mod credits;
pub mod error;
pub mod header;
pub mod limits;
pub mod negotiate;
pub mod plan;
pub mod pvt;
pub mod queue;
pub mod reply;
pub mod responder;
// Test vectors ship only where they run: on the host and in KUnit builds.
#[cfg(any(not(CONFIG_RUST), CONFIG_KUNIT = "y"))]
pub mod selftest;
pub mod v1;
pub mod v2;

mod xdr;
