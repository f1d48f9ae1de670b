// SPDX-License-Identifier: GPL-2.0
/*
 * Out-of-line wrappers for static inlines and KBUILD_MODNAME macros; see
 * helpers.h. Compiled into rpcrdma_rs.ko, so KBUILD_MODNAME names us.
 */
#include "helpers.h"

struct rdma_cm_id *rpcrdma_rs_create_id(struct net *net,
					 rdma_cm_event_handler event_handler,
					 void *context, enum rdma_ucm_port_space ps,
					 enum ib_qp_type qp_type)
{
	return rdma_create_id(net, event_handler, context, ps, qp_type);
}

struct ib_pd *rpcrdma_rs_alloc_pd(struct ib_device *device, unsigned int flags)
{
	return ib_alloc_pd(device, flags);
}

int rpcrdma_rs_post_send(struct ib_qp *qp, const struct ib_send_wr *wr,
			 const struct ib_send_wr **bad_wr)
{
	return ib_post_send(qp, wr, bad_wr);
}

int rpcrdma_rs_post_recv(struct ib_qp *qp, const struct ib_recv_wr *wr,
			 const struct ib_recv_wr **bad_wr)
{
	return ib_post_recv(qp, wr, bad_wr);
}
