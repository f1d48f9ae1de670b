// SPDX-License-Identifier: GPL-2.0
/*
 * rpcrdma.ko's tunables, as sysctls and as module parameters sharing one
 * value each.
 *
 * The sysctl tables are rpcrdma.ko's (net/sunrpc/xprtrdma/transport.c
 * xr_tunables_table, svc_rdma.c svcrdma_parm_table): same names, modes,
 * ranges, handlers and so the same refusals (EINVAL out of range), so that
 * an /etc/sysctl.d file written for rpcrdma.ko works unchanged. The
 * client's table exists only with CONFIG_SUNRPC_DEBUG, as rpcrdma.ko's.
 *
 * The module parameters (max_inline_read, max_inline_write,
 * slot_table_entries, svc_max_requests, svc_max_inline) are the same
 * variables with the same ranges: they set a value at load, before any
 * sysctl exists (an "options rpcrdma_rs ..." line in modprobe.d, for a
 * module mount or nfsd loads on demand), and work without
 * CONFIG_SUNRPC_DEBUG. The module! macro of this kernel registers its
 * parameters without a sysfs mode, hence C.
 *
 * Values are read with READ_ONCE when a transport is created (slots) or
 * connects (inline sizes; the server's at accept), as rpcrdma.ko reads
 * them.
 */
#include <linux/percpu.h>
#include <linux/moduleparam.h>
#include <linux/sysctl.h>
#include <linux/sunrpc/xprtrdma.h>
#include "helpers.h"

/* rpcrdma.ko's limits (include/linux/sunrpc/xprtrdma.h, svc_rdma.c). */
static unsigned int min_slot_table_size = RPCRDMA_MIN_SLOT_TABLE;
static unsigned int max_slot_table_size = RPCRDMA_MAX_SLOT_TABLE;
static unsigned int min_inline_size = RPCRDMA_MIN_INLINE;
static unsigned int max_inline_size = RPCRDMA_MAX_INLINE;
static unsigned int min_max_requests = 4;
static unsigned int max_max_requests = 16384;
static unsigned int min_max_inline = 4096;	/* RPCRDMA_DEF_INLINE_THRESH */
static unsigned int max_max_inline = 65536;	/* RPCRDMA_MAX_INLINE_THRESH */

static unsigned int max_inline_read = RPCRDMA_DEF_INLINE;
static unsigned int max_inline_write = RPCRDMA_DEF_INLINE;
static unsigned int slot_table_entries = RPCRDMA_DEF_SLOT_TABLE;
static unsigned int svc_max_requests = 128;	/* RPCRDMA_MAX_REQUESTS */
static unsigned int svc_max_inline = 4096;	/* RPCRDMA_DEF_INLINE_THRESH */
/* Highest RPC-over-RDMA version the client offers; no sysctl of rpcrdma.ko's. */
static unsigned int max_version = 2;

static int param_set_inline(const char *val, const struct kernel_param *kp)
{
	return param_set_uint_minmax(val, kp, min_inline_size, max_inline_size);
}

static int param_set_slots(const char *val, const struct kernel_param *kp)
{
	return param_set_uint_minmax(val, kp, min_slot_table_size,
				     max_slot_table_size);
}

static int param_set_requests(const char *val, const struct kernel_param *kp)
{
	return param_set_uint_minmax(val, kp, min_max_requests,
				     max_max_requests);
}

static int param_set_req_size(const char *val, const struct kernel_param *kp)
{
	return param_set_uint_minmax(val, kp, min_max_inline, max_max_inline);
}

static int param_set_version(const char *val, const struct kernel_param *kp)
{
	return param_set_uint_minmax(val, kp, 1, 2);
}

static const struct kernel_param_ops version_ops = {
	.set = param_set_version,
	.get = param_get_uint,
};

static const struct kernel_param_ops inline_ops = {
	.set = param_set_inline,
	.get = param_get_uint,
};

static const struct kernel_param_ops slots_ops = {
	.set = param_set_slots,
	.get = param_get_uint,
};

static const struct kernel_param_ops requests_ops = {
	.set = param_set_requests,
	.get = param_get_uint,
};

static const struct kernel_param_ops req_size_ops = {
	.set = param_set_req_size,
	.get = param_get_uint,
};

module_param_cb(max_inline_read, &inline_ops, &max_inline_read, 0644);
MODULE_PARM_DESC(max_inline_read,
		 "Largest Reply received inline, bytes (1024-65536, default 4096; sysctl sunrpc.rdma_max_inline_read)");
module_param_cb(max_inline_write, &inline_ops, &max_inline_write, 0644);
MODULE_PARM_DESC(max_inline_write,
		 "Largest Call sent inline, bytes (1024-65536, default 4096; sysctl sunrpc.rdma_max_inline_write)");
module_param_cb(slot_table_entries, &slots_ops, &slot_table_entries, 0644);
MODULE_PARM_DESC(slot_table_entries,
		 "RPC slots per transport (4-16384, default 128, at most 256 used; sysctl sunrpc.rdma_slot_table_entries)");
module_param_cb(max_version, &version_ops, &max_version, 0644);
MODULE_PARM_DESC(max_version,
		 "Client: highest RPC-over-RDMA version offered at connect (1-2, default 2; 1 turns version 2 off)");
module_param_cb(svc_max_requests, &requests_ops, &svc_max_requests, 0644);
MODULE_PARM_DESC(svc_max_requests,
		 "Server: credits granted per connection (4-16384, default 128; sysctl sunrpc.svc_rdma.max_requests)");
module_param_cb(svc_max_inline, &req_size_ops, &svc_max_inline, 0644);
MODULE_PARM_DESC(svc_max_inline,
		 "Server: largest Call received and Reply sent inline, bytes (4096-65536, default 4096; sysctl sunrpc.svc_rdma.max_req_size)");

void rpcrdma_rs_params(unsigned int *inline_read, unsigned int *inline_write,
		       unsigned int *slots)
{
	*inline_read = READ_ONCE(max_inline_read);
	*inline_write = READ_ONCE(max_inline_write);
	*slots = READ_ONCE(slot_table_entries);
}

unsigned int rpcrdma_rs_max_version(void)
{
	return READ_ONCE(max_version);
}

void rpcrdma_rs_svc_params(unsigned int *max_requests, unsigned int *max_inline)
{
	*max_requests = READ_ONCE(svc_max_requests);
	*max_inline = READ_ONCE(svc_max_inline);
}

/*
 * Kept for compatibility only, as in rpcrdma.ko 7.3, which stores them
 * and reads them nowhere: FRWR is the only registration strategy,
 * padding and pad optimisation are gone, and the server's RDMA Read depth
 * is the client's initiator depth (svc_rdma_transport.c), not
 * max_outbound_read_requests.
 */
static unsigned int svc_ord = 16;
static unsigned int min_ord = 1;
static unsigned int max_ord = 255;
static unsigned int stat_unused;
static unsigned int zero;

#if IS_ENABLED(CONFIG_SUNRPC_DEBUG)
static unsigned int memreg_strategy = RPCRDMA_FRWR;
static int pad_optimize;
static unsigned int write_padding;
static unsigned int min_memreg = RPCRDMA_BOUNCEBUFFERS;
static unsigned int max_memreg = RPCRDMA_LAST - 1;
static unsigned int max_padding = PAGE_SIZE;

static struct ctl_table xr_table[] = {
	{
		.procname	= "rdma_slot_table_entries",
		.data		= &slot_table_entries,
		.maxlen		= sizeof(unsigned int),
		.mode		= 0644,
		.proc_handler	= proc_dointvec_minmax,
		.extra1		= &min_slot_table_size,
		.extra2		= &max_slot_table_size,
	},
	{
		.procname	= "rdma_max_inline_read",
		.data		= &max_inline_read,
		.maxlen		= sizeof(unsigned int),
		.mode		= 0644,
		.proc_handler	= proc_dointvec_minmax,
		.extra1		= &min_inline_size,
		.extra2		= &max_inline_size,
	},
	{
		.procname	= "rdma_max_inline_write",
		.data		= &max_inline_write,
		.maxlen		= sizeof(unsigned int),
		.mode		= 0644,
		.proc_handler	= proc_dointvec_minmax,
		.extra1		= &min_inline_size,
		.extra2		= &max_inline_size,
	},
	{
		.procname	= "rdma_inline_write_padding",
		.data		= &write_padding,
		.maxlen		= sizeof(unsigned int),
		.mode		= 0644,
		.proc_handler	= proc_dointvec_minmax,
		.extra1		= SYSCTL_ZERO,
		.extra2		= &max_padding,
	},
	{
		.procname	= "rdma_memreg_strategy",
		.data		= &memreg_strategy,
		.maxlen		= sizeof(unsigned int),
		.mode		= 0644,
		.proc_handler	= proc_dointvec_minmax,
		.extra1		= &min_memreg,
		.extra2		= &max_memreg,
	},
	{
		.procname	= "rdma_pad_optimize",
		.data		= &pad_optimize,
		.maxlen		= sizeof(unsigned int),
		.mode		= 0644,
		.proc_handler	= proc_dointvec,
	},
};
#endif

/*
 * svcrdma's counters, per CPU as svcrdma's percpu_counters are, so that
 * counting a Call writes no cache line that other CPUs write too. A read
 * prints the sum over the CPUs (svcrdma_counter_handler); any write
 * resets each CPU's part to 0, racing with adds on other CPUs as
 * percpu_counter_set() does. Unlike svcrdma's, which formats into 8
 * bytes and fails reads with EFAULT from 1000000 on, the whole count is
 * printed.
 */
static DEFINE_PER_CPU(u64, svc_stats[RPCRDMA_RS_SVC_STATS]);

void rpcrdma_rs_svc_stat_add(unsigned int which, u64 n)
{
	if (which < RPCRDMA_RS_SVC_STATS)
		this_cpu_add(svc_stats[which], n);
}

static int counter_handler(const struct ctl_table *table, int write,
			   void *buffer, size_t *lenp, loff_t *ppos)
{
	unsigned int which = *(unsigned int *)table->extra1;
	u64 sum = 0;
	char tmp[24];
	size_t len;
	int cpu;

	if (write) {
		for_each_possible_cpu(cpu)
			WRITE_ONCE(per_cpu(svc_stats[which], cpu), 0);
		return 0;
	}
	for_each_possible_cpu(cpu)
		sum += READ_ONCE(per_cpu(svc_stats[which], cpu));
	len = scnprintf(tmp, sizeof(tmp), "%llu\n", (unsigned long long)sum);
	if (*ppos >= len) {
		*lenp = 0;
		return 0;
	}
	len -= *ppos;
	if (len > *lenp)
		len = *lenp;
	memcpy(buffer, tmp + *ppos, len);
	*lenp = len;
	*ppos += len;
	return 0;
}

/* Each counter file's index into svc_stats, for counter_handler. */
static unsigned int stat_ids[RPCRDMA_RS_SVC_STATS] = {
	RPCRDMA_RS_SVC_STAT_READ, RPCRDMA_RS_SVC_STAT_RECV,
	RPCRDMA_RS_SVC_STAT_WRITE, RPCRDMA_RS_SVC_STAT_SQ_STARVE,
};

enum { SVC_STAT_READ = 3, SVC_STAT_RECV, SVC_STAT_WRITE, SVC_STAT_SQ_STARVE };

#define SVC_COUNTER(name, id)					\
	{							\
		.procname	= name,				\
		.maxlen		= sizeof(unsigned long long),	\
		.mode		= 0644,				\
		.proc_handler	= counter_handler,		\
		.extra1		= &stat_ids[id],		\
	}

/* Counters svcrdma no longer keeps: read 0, refuse all but 0. */
#define SVC_UNUSED(name)					\
	{							\
		.procname	= name,				\
		.data		= &stat_unused,			\
		.maxlen		= sizeof(unsigned int),		\
		.mode		= 0644,				\
		.proc_handler	= proc_dointvec_minmax,		\
		.extra1		= &zero,			\
		.extra2		= &zero,			\
	}

static struct ctl_table svc_table[] = {
	{
		.procname	= "max_requests",
		.data		= &svc_max_requests,
		.maxlen		= sizeof(unsigned int),
		.mode		= 0644,
		.proc_handler	= proc_dointvec_minmax,
		.extra1		= &min_max_requests,
		.extra2		= &max_max_requests,
	},
	{
		.procname	= "max_req_size",
		.data		= &svc_max_inline,
		.maxlen		= sizeof(unsigned int),
		.mode		= 0644,
		.proc_handler	= proc_dointvec_minmax,
		.extra1		= &min_max_inline,
		.extra2		= &max_max_inline,
	},
	{
		.procname	= "max_outbound_read_requests",
		.data		= &svc_ord,
		.maxlen		= sizeof(unsigned int),
		.mode		= 0644,
		.proc_handler	= proc_dointvec_minmax,
		.extra1		= &min_ord,
		.extra2		= &max_ord,
	},
	[SVC_STAT_READ] = SVC_COUNTER("rdma_stat_read", RPCRDMA_RS_SVC_STAT_READ),
	[SVC_STAT_RECV] = SVC_COUNTER("rdma_stat_recv", RPCRDMA_RS_SVC_STAT_RECV),
	[SVC_STAT_WRITE] = SVC_COUNTER("rdma_stat_write", RPCRDMA_RS_SVC_STAT_WRITE),
	[SVC_STAT_SQ_STARVE] = SVC_COUNTER("rdma_stat_sq_starve", RPCRDMA_RS_SVC_STAT_SQ_STARVE),
	SVC_UNUSED("rdma_stat_rq_starve"),
	SVC_UNUSED("rdma_stat_rq_poll"),
	SVC_UNUSED("rdma_stat_rq_prod"),
	SVC_UNUSED("rdma_stat_sq_poll"),
	SVC_UNUSED("rdma_stat_sq_prod"),
};

static struct ctl_table_header *xr_header;
static struct ctl_table_header *svc_header;

/*
 * Registers both tables. -EBUSY if
 * already registered (nothing changed); -ENOMEM if a table could not be
 * registered (a name taken, or no memory): the other may be, and
 * rpcrdma_rs_sysctls_unregister() removes whatever is.
 */
int rpcrdma_rs_sysctls_register(void)
{
	int rc = 0;

	if (xr_header || svc_header)
		return -EBUSY;
#if IS_ENABLED(CONFIG_SUNRPC_DEBUG)
	xr_header = register_sysctl("sunrpc", xr_table);
	if (!xr_header)
		rc = -ENOMEM;
#endif
	svc_header = register_sysctl("sunrpc/svc_rdma", svc_table);
	if (!svc_header)
		rc = -ENOMEM;
	return rc;
}

/* Waits for handlers running on the tables. */
void rpcrdma_rs_sysctls_unregister(void)
{
	if (svc_header)
		unregister_sysctl_table(svc_header);
	svc_header = NULL;
	if (xr_header)
		unregister_sysctl_table(xr_header);
	xr_header = NULL;
}
