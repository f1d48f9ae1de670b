/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Out-of-line wrappers for what bindgen cannot bind: static inline functions
 * and macros that expand KBUILD_MODNAME. Each does nothing but forward.
 */
#ifndef RPCRDMA_RS_HELPERS_H
#define RPCRDMA_RS_HELPERS_H

#include <linux/module.h>
#include <linux/workqueue.h>
#include <linux/in.h>
#include <linux/sunrpc/clnt.h>
#include <linux/sunrpc/xprt.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

struct rdma_cm_id *rpcrdma_rs_create_id(struct net *net,
					 rdma_cm_event_handler event_handler,
					 void *context, enum rdma_ucm_port_space ps,
					 enum ib_qp_type qp_type);
struct ib_pd *rpcrdma_rs_alloc_pd(struct ib_device *device, unsigned int flags);
void rpcrdma_rs_dealloc_pd(struct ib_pd *pd);
struct ib_cq *rpcrdma_rs_alloc_cq(struct ib_device *device, void *private,
				  int nr_cqe, enum ib_poll_context poll_ctx);
int rpcrdma_rs_post_send(struct ib_qp *qp, const struct ib_send_wr *wr,
			 const struct ib_send_wr **bad_wr);
int rpcrdma_rs_post_recv(struct ib_qp *qp, const struct ib_recv_wr *wr,
			 const struct ib_recv_wr **bad_wr);
u64 rpcrdma_rs_dma_map_single(struct ib_device *dev, void *cpu_addr,
			      size_t size, enum dma_data_direction dir);
bool rpcrdma_rs_device_try_get(struct ib_device *dev);
bool rpcrdma_rs_protocol_iwarp(struct ib_device *dev, u32 port);
int rpcrdma_rs_dma_mapping_error(struct ib_device *dev, u64 dma_addr);
void rpcrdma_rs_dma_unmap_single(struct ib_device *dev, u64 addr, size_t size,
				 enum dma_data_direction dir);
u64 rpcrdma_rs_dma_map_page(struct ib_device *dev, struct page *page,
			    unsigned long offset, size_t size,
			    enum dma_data_direction dir);
void rpcrdma_rs_dma_unmap_page(struct ib_device *dev, u64 addr, size_t size,
			       enum dma_data_direction dir);
void rpcrdma_rs_dma_sync_for_cpu(struct ib_device *dev, u64 addr, size_t size,
				 enum dma_data_direction dir);
void rpcrdma_rs_dma_sync_for_device(struct ib_device *dev, u64 addr,
				    size_t size, enum dma_data_direction dir);


void rpcrdma_rs_init_delayed_work(struct delayed_work *dwork, work_func_t fn);
bool rpcrdma_rs_queue_delayed_work(struct delayed_work *dwork,
				   unsigned long delay);
bool rpcrdma_rs_cancel_delayed_work_sync(struct delayed_work *dwork);

bool rpcrdma_rs_try_module_get(struct module *mod);
void rpcrdma_rs_module_put(struct module *mod);
unsigned long rpcrdma_rs_jiffies(void);
unsigned long rpcrdma_rs_hz(void);
char *rpcrdma_rs_kstrdup(const char *s);
void rpcrdma_rs_kfree(const void *p);

void rpcrdma_rs_spin_lock(spinlock_t *lock);
void rpcrdma_rs_spin_unlock(spinlock_t *lock);

bool rpcrdma_rs_xprt_connected(struct rpc_xprt *xprt);
void rpcrdma_rs_xprt_set_connected(struct rpc_xprt *xprt);
void rpcrdma_rs_xprt_clear_connected(struct rpc_xprt *xprt);
void rpcrdma_rs_xprt_clear_connecting(struct rpc_xprt *xprt);
void rpcrdma_rs_xprt_set_bound(struct rpc_xprt *xprt);
bool rpcrdma_rs_reply_expected(struct rpc_task *task);
size_t rpcrdma_rs_ntop(const struct sockaddr *sap, char *buf, size_t buflen);
void rpcrdma_rs_addr_str(const struct sockaddr *sap, char *buf, size_t buflen);
int rpcrdma_rs_read_xdr_buf(const struct xdr_buf *buf, unsigned int base,
			    void *obj, unsigned int len);
int rpcrdma_rs_write_xdr_buf(const struct xdr_buf *buf, unsigned int base,
			     void *obj, unsigned int len);
int rpcrdma_rs_alloc_sparse_pages(struct xdr_buf *buf);
struct page *rpcrdma_rs_virt_to_page(const void *addr);
void rpcrdma_rs_sg_init_table(struct scatterlist *sg, unsigned int nents);
void rpcrdma_rs_sg_set_page(struct scatterlist *sg, struct page *page,
			    unsigned int len, unsigned int offset);
int rpcrdma_rs_dma_map_sg(struct ib_device *dev, struct scatterlist *sg,
			  int nents, enum dma_data_direction dir);
void rpcrdma_rs_dma_unmap_sg(struct ib_device *dev, struct scatterlist *sg,
			     int nents, enum dma_data_direction dir);
void rpcrdma_rs_update_fast_reg_key(struct ib_mr *mr, u8 newkey);
int rpcrdma_rs_dereg_mr(struct ib_mr *mr);
void *rpcrdma_rs_task_alloc(size_t size);
bool rpcrdma_rs_debug_enabled(void);
void rpcrdma_rs_debug(const char *msg);
bool rpcrdma_rs_warn_ratelimit(void);
void rpcrdma_rs_init_waitqueue_head(struct wait_queue_head *wq);
void rpcrdma_rs_wake_up_all(struct wait_queue_head *wq);
long rpcrdma_rs_wait_until_gone(struct wait_queue_head *wq, const u64 *gone,
				u64 gen, unsigned long timeout);
void rpcrdma_rs_params(unsigned int *inline_read, unsigned int *inline_write,
		       unsigned int *slots);
bool rpcrdma_rs_fault(unsigned int bits);
bool rpcrdma_rs_fault_take(unsigned int bit);
int rpcrdma_rs_qp_error(struct ib_qp *qp);
unsigned int rpcrdma_rs_max_version(void);
long rpcrdma_rs_wait_var_masked(u32 *var, u32 mask, unsigned long timeout);
void rpcrdma_rs_wake_up_var(void *var);

struct svc_serv *rpcrdma_rs_xprt_bc_serv(struct rpc_xprt *xprt);
void rpcrdma_rs_bc_mark_in_use(struct rpc_rqst *rqst);
void rpcrdma_rs_bc_clear_in_use(struct rpc_rqst *rqst);
void rpcrdma_rs_bc_slot_count_inc(struct rpc_xprt *xprt);
void rpcrdma_rs_xprt_debugfs_u64(struct rpc_xprt *xprt, const char *name,
				 u64 *value);

struct net *rpcrdma_rs_init_net(void);

/* The nfsd server transport. */
#include <linux/sunrpc/svc_xprt.h>
void rpcrdma_rs_svc_xprt_set_flag(struct svc_xprt *xprt, unsigned int bit);
void rpcrdma_rs_svc_xprt_clear_flag(struct svc_xprt *xprt, unsigned int bit);
bool rpcrdma_rs_svc_xprt_test_flag(const struct svc_xprt *xprt,
				   unsigned int bit);
void rpcrdma_rs_svc_xprt_set_local(struct svc_xprt *xprt,
				   const struct sockaddr *sa);
void rpcrdma_rs_svc_xprt_set_remote(struct svc_xprt *xprt,
				    const struct sockaddr *sa);
void rpcrdma_rs_svc_rqst_set_secure(struct svc_rqst *rqstp);
void *rpcrdma_rs_page_address(struct page *page);
void rpcrdma_rs_release_pages(struct page **pages, int nr);
void rpcrdma_rs_module_get(struct module *mod);
void rpcrdma_rs_svc_params(unsigned int *max_requests,
			   unsigned int *max_inline);
/* sys/sysctl.c: rpcrdma.ko's sysctl tables. */
int rpcrdma_rs_sysctls_register(void);
/* The server's rdma_stat_* counters, per CPU: which, and what to add. */
#define RPCRDMA_RS_SVC_STAT_READ 0
#define RPCRDMA_RS_SVC_STAT_RECV 1
#define RPCRDMA_RS_SVC_STAT_WRITE 2
#define RPCRDMA_RS_SVC_STAT_SQ_STARVE 3
#define RPCRDMA_RS_SVC_STATS 4
void rpcrdma_rs_svc_stat_add(unsigned int which, u64 n);
void rpcrdma_rs_sysctls_unregister(void);
int rpcrdma_rs_svc_bc_buf_alloc(struct rpc_task *task);
void rpcrdma_rs_svc_bc_buf_free(struct rpc_task *task);
struct dentry *rpcrdma_rs_debugfs_dir(const char *name, struct dentry *parent);
void rpcrdma_rs_debugfs_u64(struct dentry *dir, const char *name, u64 *value);
void rpcrdma_rs_debugfs_remove(struct dentry *dir);
int rpcrdma_rs_kunit_addr(struct sockaddr_in *sin, u16 port);

#endif
