// SPDX-License-Identifier: GPL-2.0

//! Transport class "rdma" (netids "rdma" and "rdma6"): registration with
//! sunrpc, and the [`ClientTransport`] behaviour behind its `rpc_xprt_ops`,
//! whose entry points live in [`crate::sunrpc`] and whose work lives in
//! the files named for their jobs.

use core::ffi::{c_int, c_uint, c_ulong};

use kernel::prelude::*;
use kernel::seq_file::SeqFile;

use super::connection::Ep;
use super::request::{self, ReqState};
use super::state::{RdmaXprt, XprtState};
use super::xprt;
use super::{backchannel, marshal, Config, MAX_PAYLOAD};
use crate::sunrpc::{
    hz, ClassCell, ClientClass, ClientTransport, ForwardCall, SendRqst, Timeouts, XprtLocked,
};

/// `XPRT_TRANSPORT_RDMA`.
pub(crate) const IDENT: i32 = 256;

/// The registered class, for `xprt->xprt_class`.
static CLASS: ClassCell = ClassCell::new();

/// The registered "rdma" client transport class.
pub(crate) struct Registration {
    _class: ClientClass<XprtState>,
}

impl Registration {
    /// Registers the "rdma" client transport class.
    pub(crate) fn new(module: &'static ThisModule) -> Result<Self> {
        let class = ClientClass::register(module, "rdma", IDENT, &[c"rdma", c"rdma6"])?;
        Ok(Self { _class: class })
    }
}

impl ClientTransport for XprtState {
    type State = ReqState;
    type Conn = Ep;
    type Config = Config;

    const MAX_PAYLOAD: usize = MAX_PAYLOAD;

    fn class() -> &'static ClassCell {
        &CLASS
    }

    fn config() -> Config {
        Config::from_params()
    }

    fn max_slots(cfg: &Config) -> u32 {
        cfg.slots
    }

    fn timeouts() -> Timeouts {
        let hz = hz();
        Timeouts {
            rpc: 60 * hz,
            max_reconnect: 60 * hz,
            bind: 60 * hz,
            idle: 5 * 60 * hz,
        }
    }

    fn init(cfg: Config) -> impl PinInit<Self> {
        XprtState::new(cfg)
    }

    fn buffers_ready(this: &RdmaXprt, state: &ReqState, grown: usize) {
        request::buffers_ready(this, state, grown)
    }

    fn buffers_released(this: &RdmaXprt, state: &ReqState) {
        request::buffers_released(this, state)
    }

    fn buffers_stuck(this: &RdmaXprt, state: &ReqState) {
        request::buffers_stuck(this, state)
    }

    fn send_request(
        this: &RdmaXprt,
        call: &ForwardCall<'_, ReqState>,
        locked: &mut XprtLocked<'_>,
    ) -> c_int {
        marshal::send_request(this, call, locked)
    }

    fn send_backward(this: &RdmaXprt, rqst: &SendRqst<'_>, locked: &XprtLocked<'_>) -> c_int {
        this.send_bc_reply(rqst, locked)
    }

    fn connect(this: &RdmaXprt, locked: &XprtLocked<'_>) -> c_ulong {
        xprt::connect(this, locked)
    }

    fn connect_worker(this: &RdmaXprt, locked: &mut XprtLocked<'_>) -> c_int {
        xprt::connect_worker(this, locked)
    }

    fn close(this: &RdmaXprt, locked: &mut XprtLocked<'_>) {
        this.close(locked)
    }

    fn destroy(this: &RdmaXprt, locked: &mut XprtLocked<'_>) {
        xprt::destroy(this, locked)
    }

    fn set_connect_timeout(this: &RdmaXprt, connect: c_ulong, reconnect: c_ulong) {
        xprt::set_connect_timeout(this, connect, reconnect)
    }

    fn print_stats(this: &RdmaXprt, m: &SeqFile) {
        xprt::print_stats(this, m)
    }

    fn bc_setup(this: &RdmaXprt, reqs: c_uint) {
        backchannel::publish(this, reqs)
    }

    fn bc_max_payload(this: &RdmaXprt) -> usize {
        this.bc_max_payload() as usize
    }

    fn bc_num_slots(_this: &RdmaXprt) -> c_uint {
        crate::proto::backchannel::CLIENT_SLOTS
    }
}
