// SPDX-License-Identifier: GPL-2.0

//! The sunrpc transports, client and server side by side.
//!
//! Both are protocol glue: they turn sunrpc objects into calls on
//! [`crate::proto`] and its answers into verbs, through the safe
//! abstractions of [`crate::sunrpc`] and [`crate::rdma`]. Neither holds
//! `unsafe` code; the compiler checks that for the whole tree below.

#![deny(unsafe_code)]

pub(crate) mod client;
pub(crate) mod server;

pub(crate) use crate::sunrpc::Counter;
