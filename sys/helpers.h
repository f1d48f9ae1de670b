/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Out-of-line wrappers for what bindgen cannot bind: static inline functions
 * and macros that expand KBUILD_MODNAME. Each does nothing but forward.
 */
#ifndef RPCRDMA_RS_HELPERS_H
#define RPCRDMA_RS_HELPERS_H

#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

struct rdma_cm_id *rpcrdma_rs_create_id(struct net *net,
					 rdma_cm_event_handler event_handler,
					 void *context, enum rdma_ucm_port_space ps,
					 enum ib_qp_type qp_type);
struct ib_pd *rpcrdma_rs_alloc_pd(struct ib_device *device, unsigned int flags);
int rpcrdma_rs_post_send(struct ib_qp *qp, const struct ib_send_wr *wr,
			 const struct ib_send_wr **bad_wr);
int rpcrdma_rs_post_recv(struct ib_qp *qp, const struct ib_recv_wr *wr,
			 const struct ib_recv_wr **bad_wr);

#endif
