//! Host build of the `rpcrdma_rs` protocol core.
//!
//! The kernel module compiles the very same sources through
//! `#[path = "proto/mod.rs"] pub mod proto;`; this crate root only exists so
//! that `cargo test`, property tests, fuzzing and benchmarks run on the host.
//! Everything lives in `mod.rs` and its submodules, re-exported here.

#![no_std]

#[cfg(test)]
extern crate std;

#[path = "mod.rs"]
mod core_root;

pub use core_root::*;
