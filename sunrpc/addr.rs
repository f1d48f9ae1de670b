// SPDX-License-Identifier: GPL-2.0

//! The transport's address and its display strings (`address_strings`),
//! as mountstats and the logs show them.

use core::ffi::c_char;

use kernel::prelude::*;
use kernel::str::CString;

use crate::sys;

const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;

/// The port in `xprt->addr`, in host order.
///
/// # Safety
///
/// `xprt` must be live.
pub(crate) unsafe fn addr_port(xprt: *mut sys::rpc_xprt) -> u16 {
    // SAFETY: `sin_port` and `sin6_port` share offset 2 of the address.
    let bytes = unsafe { &*(&raw const (*xprt).addr).cast::<[u8; 4]>() };
    u16::from_be_bytes([bytes[2], bytes[3]])
}

/// Stores a formatted string as one of the transport's display strings.
///
/// # Safety
///
/// `xprt` must be live and not yet visible to other threads, or the
/// caller must hold `XPRT_LOCKED`.
unsafe fn set_display(xprt: *mut sys::rpc_xprt, which: u32, s: Option<CString>) {
    let ptr = match s {
        // SAFETY: `s` is NUL-terminated.
        Some(s) => unsafe { sys::rpcrdma_rs_kstrdup(s.as_char_ptr().cast()) },
        None => core::ptr::null_mut(),
    };
    // SAFETY: `which` is below RPC_DISPLAY_MAX; the old string, if any,
    // was allocated by us.
    unsafe {
        let slot = &raw mut (*xprt).address_strings[which as usize];
        sys::rpcrdma_rs_kfree((*slot).cast());
        *slot = ptr;
    }
}

/// Fills `xprt->address_strings` like `xprt_rdma_format_addresses`.
///
/// # Safety
///
/// `xprt` must be live and not yet visible to other threads.
pub(crate) unsafe fn format_addresses(xprt: *mut sys::rpc_xprt) {
    // SAFETY: `addr` is a sockaddr_storage of at least 28 bytes.
    let addr = unsafe { &*(&raw const (*xprt).addr).cast::<[u8; 28]>() };
    let family = u16::from_ne_bytes([addr[0], addr[1]]);
    let (hex, netid) = match family {
        AF_INET => {
            let a = u32::from_be_bytes([addr[4], addr[5], addr[6], addr[7]]);
            (CString::try_from_fmt(fmt!("{:08x}", a)).ok(), c"rdma")
        }
        AF_INET6 => {
            let a = u128::from_be_bytes(addr[8..24].try_into().unwrap_or([0; 16]));
            (CString::try_from_fmt(fmt!("{:032x}", a)).ok(), c"rdma6")
        }
        _ => {
            pr_err!("unrecognized address family\n");
            return;
        }
    };
    let mut buf = [0 as c_char; 128];
    // SAFETY: `addr` is a valid sockaddr; `buf` is writable for its size.
    let n = unsafe {
        sys::rpcrdma_rs_ntop(
            (&raw const (*xprt).addr).cast(),
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    let mut bytes = [0u8; 128];
    for (dst, src) in bytes.iter_mut().zip(buf.iter()) {
        *dst = *src as u8;
    }
    let printable = core::str::from_utf8(bytes.get(..n.min(127)).unwrap_or(&[])).unwrap_or("");
    // SAFETY: `xprt` is live and still private to us.
    unsafe {
        set_display(
            xprt,
            sys::rpc_display_format_t_RPC_DISPLAY_ADDR,
            CString::try_from_fmt(fmt!("{}", printable)).ok(),
        );
        set_display(xprt, sys::rpc_display_format_t_RPC_DISPLAY_HEX_ADDR, hex);
        (*xprt).address_strings[sys::rpc_display_format_t_RPC_DISPLAY_PROTO as usize] =
            c"rdma".as_char_ptr().cast();
        (*xprt).address_strings[sys::rpc_display_format_t_RPC_DISPLAY_NETID as usize] =
            netid.as_char_ptr().cast();
        format_port(xprt);
    }
}

/// # Safety
///
/// As for [`set_display`].
pub(crate) unsafe fn format_port(xprt: *mut sys::rpc_xprt) {
    // SAFETY: The caller guarantees `xprt` is live.
    let port = unsafe { addr_port(xprt) };
    // SAFETY: `xprt` is live and its display strings are ours to replace
    // (the caller's promise, as for `set_display`).
    unsafe {
        set_display(
            xprt,
            sys::rpc_display_format_t_RPC_DISPLAY_PORT,
            CString::try_from_fmt(fmt!("{}", port)).ok(),
        );
        set_display(
            xprt,
            sys::rpc_display_format_t_RPC_DISPLAY_HEX_PORT,
            CString::try_from_fmt(fmt!("{:4x}", port)).ok(),
        );
    }
}

/// Frees the display strings we allocated (not the constant PROTO and
/// NETID ones).
///
/// # Safety
///
/// `xprt` must be live and no longer used by anyone else.
pub(crate) unsafe fn free_addresses(xprt: *mut sys::rpc_xprt) {
    for which in [
        sys::rpc_display_format_t_RPC_DISPLAY_ADDR,
        sys::rpc_display_format_t_RPC_DISPLAY_PORT,
        sys::rpc_display_format_t_RPC_DISPLAY_HEX_ADDR,
        sys::rpc_display_format_t_RPC_DISPLAY_HEX_PORT,
    ] {
        // SAFETY: The caller owns `xprt`.
        unsafe { set_display(xprt, which, None) };
    }
}
