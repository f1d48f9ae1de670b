// SPDX-License-Identifier: GPL-2.0

//! Raw bindings to sunrpc, ib_core and rdma_cm, generated at build time from
//! `sys/bindings.h` (see `Kbuild`), plus the wrappers of `sys/helpers.c`.
//!
//! Only the RDMA abstractions and the sunrpc wrappers may use this module;
//! protocol logic never does.

#![allow(
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    clippy::ptr_as_ptr,
    clippy::cast_lossless,
    clippy::as_underscore,
    clippy::ref_as_ptr,
    dead_code,
    improper_ctypes,
    missing_docs,
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    unreachable_pub,
    unsafe_op_in_unsafe_fn,
    unnecessary_transmutes
)]

type __kernel_size_t = usize;
type __kernel_ssize_t = isize;
type __kernel_ptrdiff_t = isize;

include!("bindings_generated.rs");
