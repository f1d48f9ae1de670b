// SPDX-License-Identifier: GPL-2.0

//! RPC-over-RDMA (RFC 8166) transport for the Linux sunrpc stack.
//!
//! A drop-in replacement for `rpcrdma.ko`. The layers, top to bottom:
//! this crate root (module registration), the sunrpc transports, the pure
//! protocol core in [`proto`], the safe RDMA abstractions, and the raw
//! bindings in `sys`.

use kernel::prelude::*;

#[path = "proto/mod.rs"]
pub mod proto;
mod sys;

module! {
    type: RpcRdma,
    name: "rpcrdma_rs",
    authors: ["rpcrdma_rs developers"],
    description: "RPC/RDMA transport for sunrpc, in Rust",
    license: "GPL",
}

/// Release of this module, printed at load.
const VERSION: &str = "0.1.0";

/// The transport identifier sunrpc knows RPC-over-RDMA by (`XPRT_TRANSPORT_RDMA`).
const TRANSPORT_IDENT: i32 = 256;

struct RpcRdma;

impl kernel::Module for RpcRdma {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        pr_info!("rpcrdma_rs {VERSION} loaded (transport ident {TRANSPORT_IDENT})\n");
        Ok(RpcRdma)
    }
}

impl Drop for RpcRdma {
    fn drop(&mut self) {
        pr_info!("rpcrdma_rs {VERSION} unloaded\n");
    }
}

#[kunit_tests(rpcrdma_rs_bindings)]
mod tests {
    use super::*;

    /// Our constants must agree with the headers of the kernel we are built for.
    #[test]
    fn transport_ident_matches_headers() {
        assert_eq!(TRANSPORT_IDENT, sys::xprt_transports_XPRT_TRANSPORT_RDMA);
        // The backchannel flag is bit 31: compare as bit patterns.
        assert_eq!(
            sys::xprt_transports_XPRT_TRANSPORT_BC_RDMA as u32,
            TRANSPORT_IDENT as u32 | sys::XPRT_TRANSPORT_BC
        );
    }
}
