// SPDX-License-Identifier: GPL-2.0

//! The sunrpc transports, client and server side by side.
//!
//! Both are protocol glue: they turn sunrpc objects into calls on
//! [`crate::proto`] and its answers into verbs, through the safe
//! abstractions of [`crate::sunrpc`] and [`crate::rdma`]. Neither holds
//! `unsafe` code; the compiler checks that for the whole tree below.

#![deny(unsafe_code)]

// Until their raw accesses have moved into the abstractions.
#[allow(unsafe_code)]
pub(crate) mod client;
#[allow(unsafe_code)]
pub(crate) mod server;

use kernel::sync::atomic::{Atomic, Relaxed};

/// An event counter. Relaxed: it orders nothing.
pub(crate) struct Counter(Atomic<u64>);

impl Default for Counter {
    fn default() -> Self {
        Self(Atomic::new(0))
    }
}

impl Counter {
    /// A counter at zero.
    pub(crate) const fn new() -> Self {
        Self(Atomic::new(0))
    }

    /// Adds `by`.
    pub(crate) fn add(&self, by: u64) {
        self.0.add(by, Relaxed);
    }

    /// Adds one; the count before.
    pub(crate) fn inc(&self) -> u64 {
        self.0.fetch_add(1, Relaxed)
    }

    /// The count so far.
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }

    /// The counter's word, for debugfs to read.
    pub(crate) fn as_ptr(&self) -> *mut u64 {
        self.0.as_ptr()
    }
}
