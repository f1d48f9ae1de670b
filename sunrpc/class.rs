// SPDX-License-Identifier: GPL-2.0

//! Registering an RPC client transport class (`struct xprt_class`) with
//! sunrpc: the client's "rdma" and the server's "rdma backchannel".

use core::ffi::c_char;

use kernel::prelude::*;
use kernel::types::Opaque;

use crate::sys;

/// The class followed by its netid list, like `struct xprt_class` with its
/// flexible `netid[]` array filled in: up to two netids and the empty
/// string sunrpc's netid lookups stop at.
#[repr(C)]
struct ClassWithNetids {
    class: sys::xprt_class,
    netid: [*const c_char; 3],
}

const _: () = assert!(
    core::mem::offset_of!(ClassWithNetids, netid) == core::mem::size_of::<sys::xprt_class>()
);

/// What sunrpc calls to create a transport of the class.
pub(crate) type Setup = unsafe extern "C" fn(*mut sys::xprt_create) -> *mut sys::rpc_xprt;

/// A registered transport class; unregistered on drop.
///
/// # Invariants
///
/// `class` is registered with sunrpc while this value exists.
pub(crate) struct XprtClass {
    class: Pin<KBox<Opaque<ClassWithNetids>>>,
}

// SAFETY: After registration the class is only read by sunrpc, under its
// own lock; we only pass its address to `xprt_unregister_transport`.
unsafe impl Send for XprtClass {}

// SAFETY: `&XprtClass` only gives the class's address.
unsafe impl Sync for XprtClass {}

impl XprtClass {
    /// Registers class `name` (at most 31 bytes) with transport `ident`,
    /// created by `setup`, known by `netids` (at most two); fails with
    /// `EEXIST` when another module (rpcrdma.ko) registered the ident.
    /// `publish` gets the class's address before sunrpc can call `setup`.
    pub(crate) fn register(
        module: &'static ThisModule,
        name: &str,
        ident: i32,
        setup: Setup,
        netids: &[&'static CStr],
        publish: impl FnOnce(*mut sys::xprt_class),
    ) -> Result<Self> {
        if netids.len() > 2 || name.len() > 31 {
            return Err(EINVAL);
        }
        let mut cname = [0 as c_char; 32];
        for (dst, src) in cname.iter_mut().zip(name.bytes()) {
            *dst = src as c_char;
        }
        let mut netid = [c"".as_char_ptr().cast(); 3];
        for (dst, src) in netid.iter_mut().zip(netids) {
            *dst = src.as_char_ptr().cast();
        }
        let class = KBox::pin(
            Opaque::new(ClassWithNetids {
                class: sys::xprt_class {
                    ident,
                    setup: Some(setup),
                    owner: module.as_ptr().cast(),
                    name: cname,
                    ..Default::default()
                },
                netid,
            }),
            GFP_KERNEL,
        )?;
        publish(class.get().cast());
        // SAFETY: The class is pinned in the heap and stays registered
        // until `drop` unregisters it.
        kernel::error::to_result(unsafe { sys::xprt_register_transport(class.get().cast()) })?;
        // INVARIANT: registered.
        Ok(Self { class })
    }

    /// The class, for `xprt->xprt_class`.
    pub(crate) fn as_ptr(&self) -> *mut sys::xprt_class {
        self.class.get().cast()
    }
}

impl Drop for XprtClass {
    fn drop(&mut self) {
        // SAFETY: Registered in `register`. Module references held by live
        // transports keep us from being dropped while one exists.
        unsafe { sys::xprt_unregister_transport(self.as_ptr()) };
    }
}
