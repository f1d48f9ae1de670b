// SPDX-License-Identifier: GPL-2.0

//! RPC-over-RDMA (RFC 8166) transport for the Linux sunrpc stack.
//!
//! A drop-in replacement for `rpcrdma.ko`. The layers, top to bottom:
//! this crate root (module registration), the sunrpc transports, the pure
//! protocol core in [`proto`], the safe RDMA abstractions, and the raw
//! bindings in `sys`.

use kernel::prelude::*;

#[macro_use]
mod log;
mod params;
#[path = "proto/mod.rs"]
pub mod proto;
mod rdma;
mod sunrpc;
mod sys;
mod transport;

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
const TRANSPORT_IDENT: i32 = transport::client::IDENT;

struct RpcRdma {
    /// rpcrdma.ko's sysctls; first, so removed before the transports go.
    _sysctls: sunrpc::Sysctls,
    _client: transport::client::Registration,
    _server: transport::server::Registration,
    /// Last: the transports, and with them every connection, go first.
    _lingering: Pin<KBox<rdma::LingeringIds>>,
}

impl kernel::Module for RpcRdma {
    fn init(module: &'static ThisModule) -> Result<Self> {
        let lingering = rdma::LingeringIds::init()?;
        let client = transport::client::Registration::new(module).inspect_err(|e| {
            pr_err!("rpcrdma_rs: cannot register the client transport \"rdma\" ({e:?}): is rpcrdma.ko loaded?\n")
        })?;
        let server = transport::server::register(module).inspect_err(|e| {
            pr_err!("rpcrdma_rs: cannot register the server transport \"rdma\" ({e:?}): is rpcrdma.ko loaded?\n")
        })?;
        // After the transports: while rpcrdma.ko is loaded, its tables
        // hold the names, and the message above says why we cannot load.
        let sysctls = sunrpc::Sysctls::register();
        let cfg = transport::client::Config::from_params();
        pr_info!(
            "rpcrdma_rs {VERSION} loaded (transport ident {TRANSPORT_IDENT}, inline read {} write {}, {} slots)\n",
            cfg.inline_read,
            cfg.inline_write,
            cfg.slots
        );
        Ok(RpcRdma {
            _sysctls: sysctls,
            _client: client,
            _server: server,
            _lingering: lingering,
        })
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

/// The protocol core's known-answer checks, the same ones `cargo test` runs
/// on the host, here compiled by the kernel's toolchain and run in the kernel.
#[kunit_tests(rpcrdma_rs_proto)]
mod proto_tests {
    use super::proto::selftest;

    #[test]
    fn v1_header_vectors() {
        assert_eq!(selftest::v1_header_vectors(), Ok(()));
    }

    #[test]
    fn v2_header_vectors() {
        assert_eq!(selftest::v2_header_vectors(), Ok(()));
    }

    #[test]
    fn pvt_data_vectors() {
        assert_eq!(selftest::pvt_data_vectors(), Ok(()));
    }

    #[test]
    fn malformed_input() {
        assert_eq!(selftest::malformed_input(), Ok(()));
    }

    #[test]
    fn planner_decisions() {
        assert_eq!(selftest::planner_decisions(), Ok(()));
    }

    #[test]
    fn negotiation() {
        assert_eq!(selftest::negotiation(), Ok(()));
    }

    #[test]
    fn requester_chunk_rules() {
        assert_eq!(selftest::requester_chunk_rules(), Ok(()));
    }

    #[test]
    fn requester_receive_rules() {
        assert_eq!(selftest::requester_receive_rules(), Ok(()));
    }

    #[test]
    fn send_economy() {
        assert_eq!(selftest::send_economy(), Ok(()));
    }

    #[test]
    fn responder_receive_rules() {
        assert_eq!(selftest::responder_receive_rules(), Ok(()));
    }

    #[test]
    fn responder_reply_rules() {
        assert_eq!(selftest::responder_reply_rules(), Ok(()));
    }
}

/// The listener and rdma_rw on a local soft-RoCE device (loopback): run
/// when the `kunit_addr` module parameter names its IPv4 address, as the
/// `kunit` VM scenario does.
#[kunit_tests(rpcrdma_rs_rdma)]
mod rdma_tests {
    use super::rdma::selftest;

    fn check(res: selftest::Check) -> bool {
        if let Err(e) = res {
            kernel::pr_err!("kunit: {e}\n");
        }
        res.is_ok()
    }

    /// Listen, connect, accept with private data, RDMA Read and Write.
    #[test]
    fn accept_read_write() {
        if selftest::configured() {
            assert!(check(selftest::accept_read_write()));
        }
    }

    /// A rejected request gives the client REJECTED.
    #[test]
    fn reject() {
        if selftest::configured() {
            assert!(check(selftest::reject()));
        }
    }

    /// A listener that listened again takes requests on its address.
    #[test]
    fn rebind() {
        if selftest::configured() {
            assert!(check(selftest::rebind()));
        }
    }
}
