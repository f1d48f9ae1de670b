// SPDX-License-Identifier: GPL-2.0

//! The sunrpc transports, client and server side by side.
//!
//! Both are protocol glue: they turn sunrpc objects into calls on
//! [`crate::proto`] and its answers into verbs, through the safe
//! abstractions of [`crate::sunrpc`] and [`crate::rdma`]. Neither holds
//! `unsafe` code; the compiler checks that for the whole tree below.

#![deny(unsafe_code)]

// Until their raw accesses have moved into the abstractions. The client's
// last ones (9 blocks) need one that does not exist yet: posting on a QP
// from completion handlers, with the QP and the posted work owned by a type
// that drains before it frees (`Qp::from_ptr`, `RecvWr::link`,
// `post_recv_chain`, `post_send_chain`, `post_send_after`, and the raw list
// of Receive contexts the Send completion scans).
#[allow(unsafe_code)]
pub(crate) mod client;
pub(crate) mod server;

pub(crate) use crate::sunrpc::Counter;
