// SPDX-License-Identifier: GPL-2.0
/*
 * Instantiates the events of rpcrdma_rs_trace.h, and for each a
 * rust_do_trace_<event>() that Rust calls after testing the event's static
 * key itself (sunrpc/trace.rs), as drivers/android/binder does.
 */
#define CREATE_TRACE_POINTS
#define CREATE_RUST_TRACE_POINTS
#include "rpcrdma_rs_trace.h"
