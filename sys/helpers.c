// SPDX-License-Identifier: GPL-2.0
/*
 * Out-of-line wrappers for static inlines and KBUILD_MODNAME macros; see
 * helpers.h. Compiled into rpcrdma_rs.ko, so KBUILD_MODNAME names us.
 */
#include <linux/debugfs.h>
#include <linux/dynamic_debug.h>
#include <linux/inet.h>
#include <linux/jiffies.h>
#include <linux/ratelimit.h>
#include <linux/slab.h>
#include <linux/wait_bit.h>
#include <linux/mm.h>
#include <linux/scatterlist.h>
#include <linux/sunrpc/sched.h>
#include <linux/sunrpc/addr.h>
#include <linux/sunrpc/bc_xprt.h>
#include <linux/sunrpc/svc.h>
#include <linux/sunrpc/svc_xprt.h>
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

void rpcrdma_rs_dealloc_pd(struct ib_pd *pd)
{
	ib_dealloc_pd(pd);
}

struct ib_cq *rpcrdma_rs_alloc_cq(struct ib_device *device, void *private,
				  int nr_cqe, enum ib_poll_context poll_ctx)
{
	return ib_alloc_cq_any(device, private, nr_cqe, poll_ctx);
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

u64 rpcrdma_rs_dma_map_single(struct ib_device *dev, void *cpu_addr,
			      size_t size, enum dma_data_direction dir)
{
	return ib_dma_map_single(dev, cpu_addr, size, dir);
}

bool rpcrdma_rs_device_try_get(struct ib_device *dev)
{
	return ib_device_try_get(dev);
}

bool rpcrdma_rs_protocol_iwarp(struct ib_device *dev, u32 port)
{
	return rdma_is_port_valid(dev, port) && rdma_protocol_iwarp(dev, port);
}

int rpcrdma_rs_dma_mapping_error(struct ib_device *dev, u64 dma_addr)
{
	return ib_dma_mapping_error(dev, dma_addr);
}

void rpcrdma_rs_dma_unmap_single(struct ib_device *dev, u64 addr, size_t size,
				 enum dma_data_direction dir)
{
	ib_dma_unmap_single(dev, addr, size, dir);
}

u64 rpcrdma_rs_dma_map_page(struct ib_device *dev, struct page *page,
			    unsigned long offset, size_t size,
			    enum dma_data_direction dir)
{
	return ib_dma_map_page(dev, page, offset, size, dir);
}

void rpcrdma_rs_dma_unmap_page(struct ib_device *dev, u64 addr, size_t size,
			       enum dma_data_direction dir)
{
	ib_dma_unmap_page(dev, addr, size, dir);
}

void rpcrdma_rs_dma_sync_for_cpu(struct ib_device *dev, u64 addr, size_t size,
				 enum dma_data_direction dir)
{
	ib_dma_sync_single_for_cpu(dev, addr, size, dir);
}

void rpcrdma_rs_dma_sync_for_device(struct ib_device *dev, u64 addr,
				    size_t size, enum dma_data_direction dir)
{
	ib_dma_sync_single_for_device(dev, addr, size, dir);
}





void rpcrdma_rs_init_delayed_work(struct delayed_work *dwork, work_func_t fn)
{
	INIT_DELAYED_WORK(dwork, fn);
}

bool rpcrdma_rs_queue_delayed_work(struct delayed_work *dwork,
				   unsigned long delay)
{
	return queue_delayed_work(system_long_wq, dwork, delay);
}

bool rpcrdma_rs_cancel_delayed_work_sync(struct delayed_work *dwork)
{
	return cancel_delayed_work_sync(dwork);
}

bool rpcrdma_rs_try_module_get(struct module *mod)
{
	return try_module_get(mod);
}

void rpcrdma_rs_module_put(struct module *mod)
{
	module_put(mod);
}

unsigned long rpcrdma_rs_jiffies(void)
{
	return jiffies;
}

unsigned long rpcrdma_rs_hz(void)
{
	return HZ;
}

char *rpcrdma_rs_kstrdup(const char *s)
{
	return kstrdup(s, GFP_KERNEL);
}

void rpcrdma_rs_kfree(const void *p)
{
	kfree(p);
}

void rpcrdma_rs_spin_lock(spinlock_t *lock)
{
	spin_lock(lock);
}

void rpcrdma_rs_spin_unlock(spinlock_t *lock)
{
	spin_unlock(lock);
}

bool rpcrdma_rs_xprt_connected(struct rpc_xprt *xprt)
{
	return xprt_connected(xprt);
}

void rpcrdma_rs_xprt_set_connected(struct rpc_xprt *xprt)
{
	xprt_set_connected(xprt);
}

void rpcrdma_rs_xprt_clear_connected(struct rpc_xprt *xprt)
{
	xprt_clear_connected(xprt);
}

void rpcrdma_rs_xprt_clear_connecting(struct rpc_xprt *xprt)
{
	xprt_clear_connecting(xprt);
}

void rpcrdma_rs_xprt_set_bound(struct rpc_xprt *xprt)
{
	xprt_set_bound(xprt);
}

bool rpcrdma_rs_reply_expected(struct rpc_task *task)
{
	return rpc_reply_expected(task);
}

size_t rpcrdma_rs_ntop(const struct sockaddr *sap, char *buf, size_t buflen)
{
	return rpc_ntop(sap, buf, buflen);
}

void rpcrdma_rs_addr_str(const struct sockaddr *sap, char *buf, size_t buflen)
{
	/* As svc_xprt_set_remote() formats xpt_remotebuf. */
	snprintf(buf, buflen, "%pISpc", sap);
}

/*
 * Most copies lie in the head (a Call's header, a Reply's inline part):
 * copy those directly rather than through xdr_buf_subsegment()'s walk,
 * which costs more than the copy. Same bounds as the walk: the head's.
 */
static bool rpcrdma_rs_in_head(const struct xdr_buf *buf, unsigned int base,
			       unsigned int len)
{
	const size_t head = buf->head[0].iov_len;

	return base <= head && len <= head - base;
}

int rpcrdma_rs_read_xdr_buf(const struct xdr_buf *buf, unsigned int base,
			    void *obj, unsigned int len)
{
	if (rpcrdma_rs_in_head(buf, base, len)) {
		memcpy(obj, buf->head[0].iov_base + base, len);
		return 0;
	}
	return read_bytes_from_xdr_buf(buf, base, obj, len);
}

int rpcrdma_rs_write_xdr_buf(const struct xdr_buf *buf, unsigned int base,
			     void *obj, unsigned int len)
{
	if (rpcrdma_rs_in_head(buf, base, len)) {
		memcpy(buf->head[0].iov_base + base, obj, len);
		return 0;
	}
	return write_bytes_to_xdr_buf(buf, base, obj, len);
}

int rpcrdma_rs_alloc_sparse_pages(struct xdr_buf *buf)
{
	struct page **ppages;
	int len;

	len = buf->page_len;
	ppages = buf->pages + (buf->page_base >> PAGE_SHIFT);
	while (len > 0) {
		if (!*ppages)
			*ppages = alloc_page(GFP_NOWAIT);
		if (!*ppages)
			return -ENOBUFS;
		ppages++;
		len -= PAGE_SIZE;
	}
	return 0;
}

struct page *rpcrdma_rs_virt_to_page(const void *addr)
{
	return virt_to_page(addr);
}

void rpcrdma_rs_sg_init_table(struct scatterlist *sg, unsigned int nents)
{
	sg_init_table(sg, nents);
}

void rpcrdma_rs_sg_set_page(struct scatterlist *sg, struct page *page,
			    unsigned int len, unsigned int offset)
{
	sg_set_page(sg, page, len, offset);
}

int rpcrdma_rs_dma_map_sg(struct ib_device *dev, struct scatterlist *sg,
			  int nents, enum dma_data_direction dir)
{
	return ib_dma_map_sg(dev, sg, nents, dir);
}

void rpcrdma_rs_dma_unmap_sg(struct ib_device *dev, struct scatterlist *sg,
			     int nents, enum dma_data_direction dir)
{
	ib_dma_unmap_sg(dev, sg, nents, dir);
}

void rpcrdma_rs_update_fast_reg_key(struct ib_mr *mr, u8 newkey)
{
	ib_update_fast_reg_key(mr, newkey);
}

int rpcrdma_rs_dereg_mr(struct ib_mr *mr)
{
	return ib_dereg_mr(mr);
}


void *rpcrdma_rs_task_alloc(size_t size)
{
	return kmalloc(size, rpc_task_gfp_mask());
}

/*
 * One dynamic debug call site for the whole module: "module rpcrdma_rs +p"
 * in dynamic_debug/control turns it on, and Rust formats nothing while it
 * is off.
 */
static struct _ddebug *rpcrdma_rs_ddebug(void)
{
	DEFINE_DYNAMIC_DEBUG_METADATA(descriptor, "%s");

	return &descriptor;
}

bool rpcrdma_rs_debug_enabled(void)
{
	struct _ddebug *dp = rpcrdma_rs_ddebug();

	/* The control file changes the flags under us: reload them. */
	barrier();
	return dp->flags & _DPRINTK_FLAGS_PRINT;
}

void rpcrdma_rs_debug(const char *msg)
{
	__dynamic_pr_debug(rpcrdma_rs_ddebug(), "%s", msg);
}

/* One rate limit shared by every warning the peer can provoke. */
bool rpcrdma_rs_warn_ratelimit(void)
{
	static DEFINE_RATELIMIT_STATE(rs, DEFAULT_RATELIMIT_INTERVAL,
				      DEFAULT_RATELIMIT_BURST);

	return __ratelimit(&rs);
}

void rpcrdma_rs_init_waitqueue_head(struct wait_queue_head *wq)
{
	init_waitqueue_head(wq);
}

void rpcrdma_rs_wake_up_all(struct wait_queue_head *wq)
{
	wake_up_all(wq);
}

/* Waits until *gone reaches gen; returns 0 on timeout. */
long rpcrdma_rs_wait_until_gone(struct wait_queue_head *wq, const u64 *gone,
				u64 gen, unsigned long timeout)
{
	return wait_event_timeout(*wq, READ_ONCE(*gone) >= gen, timeout);
}

/*
 * Fault injection for tests, off by default. Bit 0: fail the allocation of
 * a connection's MR pool, after its QP exists, so that the connect error
 * path releases a half-built connection. Bit 1: fail posting the LOCAL_INVs
 * of a Reply, so that the RPC waits for the connection to go instead.
 * Bit 2, once (the first Call that sees it clears it): move the QP to the
 * error state before that Call's Send, telling nobody, as a responder
 * error does. Bit 3: hold each forward Call for a second before it is
 * marshalled, so that a server's Reply sent ahead of the Call finds it
 * waiting, not sent.
 */
static unsigned int fault_inject;
module_param(fault_inject, uint, 0644);
MODULE_PARM_DESC(fault_inject,
		 "Test faults, a bit mask (0: none; 1: fail MR pool allocation at connect; 2: fail posting LOCAL_INV; 4: once, the QP to the error state before a Send; 8: hold each Call 1 s before marshalling it)");

bool rpcrdma_rs_fault(unsigned int bits)
{
	return READ_ONCE(fault_inject) & bits;
}

/* Clears bit in fault_inject; whether it was set. */
bool rpcrdma_rs_fault_take(unsigned int bit)
{
	unsigned int old = READ_ONCE(fault_inject);

	while (old & bit) {
		if (try_cmpxchg(&fault_inject, &old, old & ~bit))
			return true;
	}
	return false;
}

/* Moves qp to the error state, as a responder error does. */
int rpcrdma_rs_qp_error(struct ib_qp *qp)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };

	return ib_modify_qp(qp, &attr, IB_QP_STATE);
}

/* Waits until the bits of mask in *var are clear, woken by wake_up_var(var); 0 on timeout. */
long rpcrdma_rs_wait_var_masked(u32 *var, u32 mask, unsigned long timeout)
{
	return wait_var_event_timeout(var, !(READ_ONCE(*var) & mask), timeout);
}

/* Wakes the waiters on var; var is not dereferenced (it may be gone). */
void rpcrdma_rs_wake_up_var(void *var)
{
	wake_up_var(var);
}

struct svc_serv *rpcrdma_rs_xprt_bc_serv(struct rpc_xprt *xprt)
{
	return READ_ONCE(xprt->bc_serv);
}

void rpcrdma_rs_bc_mark_in_use(struct rpc_rqst *rqst)
{
	set_bit(RPC_BC_PA_IN_USE, &rqst->rq_bc_pa_state);
}

void rpcrdma_rs_bc_clear_in_use(struct rpc_rqst *rqst)
{
	clear_bit(RPC_BC_PA_IN_USE, &rqst->rq_bc_pa_state);
}

void rpcrdma_rs_bc_slot_count_inc(struct rpc_xprt *xprt)
{
	atomic_inc(&xprt->bc_slot_count);
}

/*
 * A read-only counter in the transport's sunrpc debugfs directory
 * (/sys/kernel/debug/sunrpc/rpc_xprt/<id>/), which sunrpc removes, with
 * everything in it, before it calls the transport's destroy.
 */
void rpcrdma_rs_xprt_debugfs_u64(struct rpc_xprt *xprt, const char *name,
				 u64 *value)
{
#if IS_ENABLED(CONFIG_SUNRPC_DEBUG)
	if (!IS_ERR_OR_NULL(xprt->debugfs))
		debugfs_create_u64(name, 0400, xprt->debugfs, value);
#endif
}

struct net *rpcrdma_rs_init_net(void)
{
	return &init_net;
}

/*
 * Test only: the KUnit loopback suite (rpcrdma_rs_rdma) listens and
 * connects on this IPv4 address, which must belong to a netdev with a
 * soft-RoCE device; empty (the default) skips that suite.
 */
static char kunit_addr[INET_ADDRSTRLEN];
module_param_string(kunit_addr, kunit_addr, sizeof(kunit_addr), 0444);
MODULE_PARM_DESC(kunit_addr,
		 "Test only: local IPv4 address of an rxe device for the KUnit loopback suite");

/* Fills *sin with kunit_addr and port; -ENOENT when unset or malformed. */
int rpcrdma_rs_kunit_addr(struct sockaddr_in *sin, u16 port)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons(port);
	if (!kunit_addr[0] ||
	    !in4_pton(kunit_addr, -1, (u8 *)&sin->sin_addr.s_addr, -1, NULL))
		return -ENOENT;
	return 0;
}

/*
 * The nfsd server transport: svc_xprt's static inlines and atomic flag
 * operations, and the server's module parameters.
 */
void rpcrdma_rs_svc_xprt_set_flag(struct svc_xprt *xprt, unsigned int bit)
{
	set_bit(bit, &xprt->xpt_flags);
}

void rpcrdma_rs_svc_xprt_clear_flag(struct svc_xprt *xprt, unsigned int bit)
{
	clear_bit(bit, &xprt->xpt_flags);
}

bool rpcrdma_rs_svc_xprt_test_flag(const struct svc_xprt *xprt,
				   unsigned int bit)
{
	return test_bit(bit, &xprt->xpt_flags);
}

void rpcrdma_rs_svc_xprt_set_local(struct svc_xprt *xprt,
				   const struct sockaddr *sa)
{
	svc_xprt_set_local(xprt, sa, svc_addr_len(sa));
}

/*
 * The remote port is chosen by rdma_cm, not by the client's RPC layer: it
 * is set to 0 so that the duplicate reply cache still matches after a
 * reconnect (as svcrdma does).
 */
void rpcrdma_rs_svc_xprt_set_remote(struct svc_xprt *xprt,
				    const struct sockaddr *sa)
{
	xprt->xpt_remotelen = svc_addr_len(sa);
	memcpy(&xprt->xpt_remote, sa, xprt->xpt_remotelen);
	snprintf(xprt->xpt_remotebuf, sizeof(xprt->xpt_remotebuf) - 1,
		 "%pISc", sa);
	rpc_set_port((struct sockaddr *)&xprt->xpt_remote, 0);
}

void rpcrdma_rs_svc_rqst_set_secure(struct svc_rqst *rqstp)
{
	set_bit(RQ_SECURE, &rqstp->rq_flags);
}

void *rpcrdma_rs_page_address(struct page *page)
{
	return page_address(page);
}

void rpcrdma_rs_release_pages(struct page **pages, int nr)
{
	release_pages(pages, nr);
}

void rpcrdma_rs_module_get(struct module *mod)
{
	__module_get(mod);
}

/*
 * Buffers of a backward Call the server sends (and of its Reply): the
 * Call is copied into a Send buffer, so plain kmalloc memory does.
 */
int rpcrdma_rs_svc_bc_buf_alloc(struct rpc_task *task)
{
	struct rpc_rqst *rqst = task->tk_rqstp;

	if (rqst->rq_callsize > PAGE_SIZE)
		return -EINVAL;
	rqst->rq_buffer = kmalloc(rqst->rq_callsize, GFP_NOIO | __GFP_NOWARN);
	if (!rqst->rq_buffer)
		return -ENOMEM;
	rqst->rq_rbuffer = kmalloc(rqst->rq_rcvsize, GFP_NOIO | __GFP_NOWARN);
	if (!rqst->rq_rbuffer) {
		kfree(rqst->rq_buffer);
		rqst->rq_buffer = NULL;
		return -ENOMEM;
	}
	return 0;
}

void rpcrdma_rs_svc_bc_buf_free(struct rpc_task *task)
{
	struct rpc_rqst *rqst = task->tk_rqstp;

	kfree(rqst->rq_buffer);
	kfree(rqst->rq_rbuffer);
	rqst->rq_buffer = NULL;
	rqst->rq_rbuffer = NULL;
}

/*
 * Server counters in debugfs: /sys/kernel/debug/rpcrdma_rs/server/ for the
 * totals and one directory per connection under it. NULL when debugfs is
 * off; every call below accepts that.
 */
struct dentry *rpcrdma_rs_debugfs_dir(const char *name, struct dentry *parent)
{
	struct dentry *d = debugfs_create_dir(name, parent);

	return IS_ERR(d) ? NULL : d;
}

void rpcrdma_rs_debugfs_u64(struct dentry *dir, const char *name, u64 *value)
{
	if (dir)
		debugfs_create_u64(name, 0400, dir, value);
}

void rpcrdma_rs_debugfs_remove(struct dentry *dir)
{
	debugfs_remove(dir);
}

MODULE_ALIAS("svcrdma");
MODULE_ALIAS("xprtrdma");
MODULE_ALIAS("rpcrdma6");
