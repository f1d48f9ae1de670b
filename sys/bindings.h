/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C interfaces rpcrdma_rs binds to: sunrpc client and server transports,
 * ib_core verbs and the RDMA connection manager. Input to bindgen only.
 */
#include <linux/sunrpc/xprt.h>
#include <linux/sunrpc/bc_xprt.h>
#include <linux/sunrpc/xprtrdma.h>
#include <linux/sunrpc/svc_xprt.h>
#include <linux/sunrpc/rpc_rdma.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>
#include <rdma/rw.h>

#include "helpers.h"
#include "rpcrdma_rs_trace.h"
