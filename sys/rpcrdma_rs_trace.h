/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rpcrdma_rs's events in rpcrdma.ko's trace system, with rpcrdma.ko's event
 * and field names (include/trace/events/rpcrdma.h), so that trace-cmd, perf
 * and tracefs filters written for the C module work unchanged. The
 * prototypes take plain values, not the C module's private structures.
 *
 * Where the C module has no twin of a value, the field keeps its name and
 * carries ours: cq_id is the CQ's restrack id as in C; completion_id is our
 * own per-queue number of the work request.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM rpcrdma

/* Found through the module's sys/ directory, which Kbuild puts on -I; the
 * name must differ from the kernel's include/trace/trace_events.h. */
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE rpcrdma_rs_trace

#if !defined(_RPCRDMA_RS_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _RPCRDMA_RS_TRACE_H

#include <linux/tracepoint.h>
#include <linux/inet.h>
#include <rdma/ib_cm.h>
#include <trace/misc/rdma.h>

/* rpcrdma.ko's enum rpcrdma_chunktype (xprt_rdma.h), numbers and names. */
#define rpcrdma_rs_show_chunktype(x)					\
		__print_symbolic(x,					\
				{ 0, "inline" },			\
				{ 1, "pullup" },			\
				{ 2, "mapped" },			\
				{ 3, "read list" },			\
				{ 4, "*read list" },			\
				{ 5, "write list" },			\
				{ 6, "reply chunk" })

/* Used by client and server. */
DECLARE_EVENT_CLASS(rpcrdma_simple_cid_class,
	TP_PROTO(u32 cq_id, int completion_id),
	TP_ARGS(cq_id, completion_id),
	TP_STRUCT__entry(
		__field(u32, cq_id)
		__field(int, completion_id)
	),
	TP_fast_assign(
		__entry->cq_id = cq_id;
		__entry->completion_id = completion_id;
	),
	TP_printk("cq.id=%d cid=%d", __entry->cq_id, __entry->completion_id)
);

/**
 ** Client
 **/

DECLARE_EVENT_CLASS(xprtrdma_connect_class,
	TP_PROTO(const char *addr, const char *port, int rc,
		 int connect_status),
	TP_ARGS(addr, port, rc, connect_status),
	TP_STRUCT__entry(
		__field(int, rc)
		__field(int, connect_status)
		__string(addr, addr)
		__string(port, port)
	),
	TP_fast_assign(
		__entry->rc = rc;
		__entry->connect_status = connect_status;
		__assign_str(addr);
		__assign_str(port);
	),
	TP_printk("peer=[%s]:%s rc=%d connection status=%d",
		__get_str(addr), __get_str(port),
		__entry->rc, __entry->connect_status)
);

#define DEFINE_CONN_EVENT(name)						\
		DEFINE_EVENT(xprtrdma_connect_class, xprtrdma_##name,	\
			TP_PROTO(const char *addr, const char *port,	\
				 int rc, int connect_status),		\
			TP_ARGS(addr, port, rc, connect_status))

DEFINE_CONN_EVENT(connect);
DEFINE_CONN_EVENT(disconnect);

TRACE_EVENT(xprtrdma_marshal,
	TP_PROTO(unsigned int task_id, unsigned int client_id, u32 xid,
		 unsigned int hdrlen, unsigned int headlen,
		 unsigned int pagelen, unsigned int taillen,
		 unsigned int rtype, unsigned int wtype),
	TP_ARGS(task_id, client_id, xid, hdrlen, headlen, pagelen, taillen,
		rtype, wtype),
	TP_STRUCT__entry(
		__field(unsigned int, task_id)
		__field(unsigned int, client_id)
		__field(u32, xid)
		__field(unsigned int, hdrlen)
		__field(unsigned int, headlen)
		__field(unsigned int, pagelen)
		__field(unsigned int, taillen)
		__field(unsigned int, rtype)
		__field(unsigned int, wtype)
	),
	TP_fast_assign(
		__entry->task_id = task_id;
		__entry->client_id = client_id;
		__entry->xid = xid;
		__entry->hdrlen = hdrlen;
		__entry->headlen = headlen;
		__entry->pagelen = pagelen;
		__entry->taillen = taillen;
		__entry->rtype = rtype;
		__entry->wtype = wtype;
	),
	TP_printk("task:%08x@%08x xid=0x%08x hdr=%u xdr=%u/%u/%u %s/%s",
		__entry->task_id, __entry->client_id, __entry->xid,
		__entry->hdrlen,
		__entry->headlen, __entry->pagelen, __entry->taillen,
		rpcrdma_rs_show_chunktype(__entry->rtype),
		rpcrdma_rs_show_chunktype(__entry->wtype))
);

TRACE_EVENT(xprtrdma_marshal_failed,
	TP_PROTO(unsigned int task_id, unsigned int client_id, u32 xid,
		 int ret),
	TP_ARGS(task_id, client_id, xid, ret),
	TP_STRUCT__entry(
		__field(unsigned int, task_id)
		__field(unsigned int, client_id)
		__field(u32, xid)
		__field(int, ret)
	),
	TP_fast_assign(
		__entry->task_id = task_id;
		__entry->client_id = client_id;
		__entry->xid = xid;
		__entry->ret = ret;
	),
	TP_printk("task:%08x@%08x xid=0x%08x ret=%d",
		__entry->task_id, __entry->client_id, __entry->xid,
		__entry->ret)
);

TRACE_EVENT(xprtrdma_inline_thresh,
	TP_PROTO(unsigned int inline_send, unsigned int inline_recv,
		 unsigned int max_send, unsigned int max_recv,
		 const struct sockaddr *src, const struct sockaddr *dst),
	TP_ARGS(inline_send, inline_recv, max_send, max_recv, src, dst),
	TP_STRUCT__entry(
		__field(unsigned int, inline_send)
		__field(unsigned int, inline_recv)
		__field(unsigned int, max_send)
		__field(unsigned int, max_recv)
		__array(unsigned char, srcaddr, sizeof(struct sockaddr_in6))
		__array(unsigned char, dstaddr, sizeof(struct sockaddr_in6))
	),
	TP_fast_assign(
		__entry->inline_send = inline_send;
		__entry->inline_recv = inline_recv;
		__entry->max_send = max_send;
		__entry->max_recv = max_recv;
		memcpy(__entry->srcaddr, src, sizeof(struct sockaddr_in6));
		memcpy(__entry->dstaddr, dst, sizeof(struct sockaddr_in6));
	),
	TP_printk("%pISpc -> %pISpc neg send/recv=%u/%u, calc send/recv=%u/%u",
		__entry->srcaddr, __entry->dstaddr,
		__entry->inline_send, __entry->inline_recv,
		__entry->max_send, __entry->max_recv)
);

TRACE_EVENT(xprtrdma_prepsend_failed,
	TP_PROTO(unsigned int task_id, unsigned int client_id, u32 xid,
		 int ret),
	TP_ARGS(task_id, client_id, xid, ret),
	TP_STRUCT__entry(
		__field(unsigned int, task_id)
		__field(unsigned int, client_id)
		__field(u32, xid)
		__field(int, ret)
	),
	TP_fast_assign(
		__entry->task_id = task_id;
		__entry->client_id = client_id;
		__entry->xid = xid;
		__entry->ret = ret;
	),
	TP_printk("task:%08x@%08x xid=0x%08x ret=%d",
		__entry->task_id, __entry->client_id, __entry->xid,
		__entry->ret)
);

/* rpcrdma.ko's xprtrdma_rdch_event: a Read chunk segment encoded, the
 * MR's fields. */
DECLARE_EVENT_CLASS(xprtrdma_rdch_event,
	TP_PROTO(unsigned int task_id, unsigned int client_id,
		 unsigned int pos, int nents, u32 handle, u32 length,
		 u64 offset, bool is_last),
	TP_ARGS(task_id, client_id, pos, nents, handle, length, offset,
		is_last),
	TP_STRUCT__entry(
		__field(unsigned int, task_id)
		__field(unsigned int, client_id)
		__field(unsigned int, pos)
		__field(int, nents)
		__field(u32, handle)
		__field(u32, length)
		__field(u64, offset)
		__field(bool, is_last)
	),
	TP_fast_assign(
		__entry->task_id = task_id;
		__entry->client_id = client_id;
		__entry->pos = pos;
		__entry->nents = nents;
		__entry->handle = handle;
		__entry->length = length;
		__entry->offset = offset;
		__entry->is_last = is_last;
	),
	TP_printk("task:%08x@%08x pos=%u %u@0x%016llx:0x%08x (%s)",
		__entry->task_id, __entry->client_id,
		__entry->pos, __entry->length,
		(unsigned long long)__entry->offset, __entry->handle,
		__entry->is_last ? "last" : "more")
);

DEFINE_EVENT(xprtrdma_rdch_event, xprtrdma_chunk_read,
	TP_PROTO(unsigned int task_id, unsigned int client_id,
		 unsigned int pos, int nents, u32 handle, u32 length,
		 u64 offset, bool is_last),
	TP_ARGS(task_id, client_id, pos, nents, handle, length, offset,
		is_last));

/* rpcrdma.ko's xprtrdma_wrch_event: a Write or Reply chunk segment (or
 * the Write chunk pad) encoded. */
DECLARE_EVENT_CLASS(xprtrdma_wrch_event,
	TP_PROTO(unsigned int task_id, unsigned int client_id, int nents,
		 u32 handle, u32 length, u64 offset, bool is_last),
	TP_ARGS(task_id, client_id, nents, handle, length, offset, is_last),
	TP_STRUCT__entry(
		__field(unsigned int, task_id)
		__field(unsigned int, client_id)
		__field(int, nents)
		__field(u32, handle)
		__field(u32, length)
		__field(u64, offset)
		__field(bool, is_last)
	),
	TP_fast_assign(
		__entry->task_id = task_id;
		__entry->client_id = client_id;
		__entry->nents = nents;
		__entry->handle = handle;
		__entry->length = length;
		__entry->offset = offset;
		__entry->is_last = is_last;
	),
	TP_printk("task:%08x@%08x %u@0x%016llx:0x%08x (%s)",
		__entry->task_id, __entry->client_id,
		__entry->length, (unsigned long long)__entry->offset,
		__entry->handle,
		__entry->is_last ? "last" : "more")
);

#define DEFINE_WRCH_EVENT(name)						\
		DEFINE_EVENT(xprtrdma_wrch_event, xprtrdma_chunk_##name,\
			TP_PROTO(unsigned int task_id,			\
				 unsigned int client_id, int nents,	\
				 u32 handle, u32 length, u64 offset,	\
				 bool is_last),				\
			TP_ARGS(task_id, client_id, nents, handle,	\
				length, offset, is_last))

DEFINE_WRCH_EVENT(write);
DEFINE_WRCH_EVENT(reply);
DEFINE_WRCH_EVENT(wp);

TRACE_EVENT(xprtrdma_post_send_err,
	TP_PROTO(u32 cq_id, unsigned int task_id, unsigned int client_id,
		 int rc),
	TP_ARGS(cq_id, task_id, client_id, rc),
	TP_STRUCT__entry(
		__field(u32, cq_id)
		__field(unsigned int, task_id)
		__field(unsigned int, client_id)
		__field(int, rc)
	),
	TP_fast_assign(
		__entry->cq_id = cq_id;
		__entry->task_id = task_id;
		__entry->client_id = client_id;
		__entry->rc = rc;
	),
	TP_printk("task:%08x@%08x cq.id=%u rc=%d",
		__entry->task_id, __entry->client_id,
		__entry->cq_id, __entry->rc)
);

DEFINE_EVENT(rpcrdma_simple_cid_class, xprtrdma_post_recv,
	TP_PROTO(u32 cq_id, int completion_id),
	TP_ARGS(cq_id, completion_id));

TRACE_EVENT(xprtrdma_post_recvs,
	TP_PROTO(const char *addr, const char *port, u32 cq_id,
		 unsigned int count, int posted),
	TP_ARGS(addr, port, cq_id, count, posted),
	TP_STRUCT__entry(
		__field(u32, cq_id)
		__field(unsigned int, count)
		__field(int, posted)
		__string(addr, addr)
		__string(port, port)
	),
	TP_fast_assign(
		__entry->cq_id = cq_id;
		__entry->count = count;
		__entry->posted = posted;
		__assign_str(addr);
		__assign_str(port);
	),
	TP_printk("peer=[%s]:%s cq.id=%d %u new recvs, %d active",
		__get_str(addr), __get_str(port), __entry->cq_id,
		__entry->count, __entry->posted)
);

TRACE_EVENT(xprtrdma_post_recvs_err,
	TP_PROTO(const char *addr, const char *port, u32 cq_id, int status),
	TP_ARGS(addr, port, cq_id, status),
	TP_STRUCT__entry(
		__field(u32, cq_id)
		__field(int, status)
		__string(addr, addr)
		__string(port, port)
	),
	TP_fast_assign(
		__entry->cq_id = cq_id;
		__entry->status = status;
		__assign_str(addr);
		__assign_str(port);
	),
	TP_printk("peer=[%s]:%s cq.id=%d rc=%d",
		__get_str(addr), __get_str(port), __entry->cq_id,
		__entry->status)
);

TRACE_EVENT(xprtrdma_fixup,
	TP_PROTO(unsigned int task_id, unsigned int client_id,
		 unsigned long fixup, size_t headlen, unsigned int pagelen,
		 size_t taillen),
	TP_ARGS(task_id, client_id, fixup, headlen, pagelen, taillen),
	TP_STRUCT__entry(
		__field(unsigned int, task_id)
		__field(unsigned int, client_id)
		__field(unsigned long, fixup)
		__field(size_t, headlen)
		__field(unsigned int, pagelen)
		__field(size_t, taillen)
	),
	TP_fast_assign(
		__entry->task_id = task_id;
		__entry->client_id = client_id;
		__entry->fixup = fixup;
		__entry->headlen = headlen;
		__entry->pagelen = pagelen;
		__entry->taillen = taillen;
	),
	TP_printk("task:%08x@%08x fixup=%lu xdr=%zu/%u/%zu",
		__entry->task_id, __entry->client_id, __entry->fixup,
		__entry->headlen, __entry->pagelen, __entry->taillen)
);

TRACE_EVENT(xprtrdma_decode_seg,
	TP_PROTO(u32 handle, u32 length, u64 offset),
	TP_ARGS(handle, length, offset),
	TP_STRUCT__entry(
		__field(u32, handle)
		__field(u32, length)
		__field(u64, offset)
	),
	TP_fast_assign(
		__entry->handle = handle;
		__entry->length = length;
		__entry->offset = offset;
	),
	TP_printk("%u@0x%016llx:0x%08x",
		__entry->length, (unsigned long long)__entry->offset,
		__entry->handle)
);

TRACE_EVENT(xprtrdma_post_send,
	TP_PROTO(u32 cq_id, int completion_id, unsigned int task_id,
		 unsigned int client_id, int num_sge, int signaled),
	TP_ARGS(cq_id, completion_id, task_id, client_id, num_sge, signaled),
	TP_STRUCT__entry(
		__field(u32, cq_id)
		__field(int, completion_id)
		__field(unsigned int, task_id)
		__field(unsigned int, client_id)
		__field(int, num_sge)
		__field(int, signaled)
	),
	TP_fast_assign(
		__entry->cq_id = cq_id;
		__entry->completion_id = completion_id;
		__entry->task_id = task_id;
		__entry->client_id = client_id;
		__entry->num_sge = num_sge;
		__entry->signaled = signaled;
	),
	TP_printk("task:%08x@%08x cq.id=%u cid=%d (%d SGE%s) %s",
		__entry->task_id, __entry->client_id,
		__entry->cq_id, __entry->completion_id,
		__entry->num_sge, (__entry->num_sge == 1 ? "" : "s"),
		(__entry->signaled ? "signaled" : ""))
);

TRACE_EVENT(xprtrdma_wc_receive,
	TP_PROTO(u32 cq_id, int completion_id, u32 received,
		 unsigned long status, unsigned int vendor_err),
	TP_ARGS(cq_id, completion_id, received, status, vendor_err),
	TP_STRUCT__entry(
		__field(u32, cq_id)
		__field(int, completion_id)
		__field(u32, received)
		__field(unsigned long, status)
		__field(unsigned int, vendor_err)
	),
	TP_fast_assign(
		__entry->cq_id = cq_id;
		__entry->completion_id = completion_id;
		__entry->received = status ? 0 : received;
		__entry->status = status;
		__entry->vendor_err = status ? vendor_err : 0;
	),
	TP_printk("cq.id=%u cid=%d status=%s (%lu/0x%x) received=%u",
		__entry->cq_id, __entry->completion_id,
		rdma_show_wc_status(__entry->status), __entry->status, __entry->vendor_err,
		__entry->received)
);

TRACE_EVENT(xprtrdma_reply,
	TP_PROTO(unsigned int task_id, unsigned int client_id, u32 xid,
		 unsigned int credits),
	TP_ARGS(task_id, client_id, xid, credits),
	TP_STRUCT__entry(
		__field(unsigned int, task_id)
		__field(unsigned int, client_id)
		__field(u32, xid)
		__field(unsigned int, credits)
	),
	TP_fast_assign(
		__entry->task_id = task_id;
		__entry->client_id = client_id;
		__entry->xid = xid;
		__entry->credits = credits;
	),
	TP_printk("task:%08x@%08x xid=0x%08x credits=%u",
		__entry->task_id, __entry->client_id, __entry->xid,
		__entry->credits)
);

/* rpcrdma.ko's xprtrdma_reply_class: a received message that matched no
 * waiting Call, or did not decode; its fixed words as far as they go (0
 * past the end). */
DECLARE_EVENT_CLASS(xprtrdma_reply_class,
	TP_PROTO(u32 xid, u32 version, u32 proc, const char *addr,
		 const char *port),
	TP_ARGS(xid, version, proc, addr, port),
	TP_STRUCT__entry(
		__field(u32, xid)
		__field(u32, version)
		__field(u32, proc)
		__string(addr, addr)
		__string(port, port)
	),
	TP_fast_assign(
		__entry->xid = xid;
		__entry->version = version;
		__entry->proc = proc;
		__assign_str(addr);
		__assign_str(port);
	),
	TP_printk("peer=[%s]:%s xid=0x%08x version=%u proc=%u",
		__get_str(addr), __get_str(port),
		__entry->xid, __entry->version, __entry->proc)
);

#define DEFINE_REPLY_EVENT(name)					\
		DEFINE_EVENT(xprtrdma_reply_class,			\
			xprtrdma_reply_##name##_err,			\
			TP_PROTO(u32 xid, u32 version, u32 proc,	\
				 const char *addr, const char *port),	\
			TP_ARGS(xid, version, proc, addr, port))

DEFINE_REPLY_EVENT(vers);
DEFINE_REPLY_EVENT(rqst);
DEFINE_REPLY_EVENT(short);
DEFINE_REPLY_EVENT(hdr);

TRACE_EVENT(xprtrdma_err_vers,
	TP_PROTO(unsigned int task_id, unsigned int client_id, u32 xid,
		 u32 min, u32 max),
	TP_ARGS(task_id, client_id, xid, min, max),
	TP_STRUCT__entry(
		__field(unsigned int, task_id)
		__field(unsigned int, client_id)
		__field(u32, xid)
		__field(u32, min)
		__field(u32, max)
	),
	TP_fast_assign(
		__entry->task_id = task_id;
		__entry->client_id = client_id;
		__entry->xid = xid;
		__entry->min = min;
		__entry->max = max;
	),
	TP_printk("task:%08x@%08x xid=0x%08x versions=[%u, %u]",
		__entry->task_id, __entry->client_id, __entry->xid,
		__entry->min, __entry->max)
);

TRACE_EVENT(xprtrdma_err_chunk,
	TP_PROTO(unsigned int task_id, unsigned int client_id, u32 xid),
	TP_ARGS(task_id, client_id, xid),
	TP_STRUCT__entry(
		__field(unsigned int, task_id)
		__field(unsigned int, client_id)
		__field(u32, xid)
	),
	TP_fast_assign(
		__entry->task_id = task_id;
		__entry->client_id = client_id;
		__entry->xid = xid;
	),
	TP_printk("task:%08x@%08x xid=0x%08x",
		__entry->task_id, __entry->client_id, __entry->xid)
);

/* rpcrdma.ko leaves xid unset here; ours carries the Call's. */
TRACE_EVENT(xprtrdma_err_unrecognized,
	TP_PROTO(unsigned int task_id, unsigned int client_id, u32 xid,
		 u32 procedure),
	TP_ARGS(task_id, client_id, xid, procedure),
	TP_STRUCT__entry(
		__field(unsigned int, task_id)
		__field(unsigned int, client_id)
		__field(u32, xid)
		__field(u32, procedure)
	),
	TP_fast_assign(
		__entry->task_id = task_id;
		__entry->client_id = client_id;
		__entry->xid = xid;
		__entry->procedure = procedure;
	),
	TP_printk("task:%08x@%08x xid=0x%08x procedure=%u",
		__entry->task_id, __entry->client_id, __entry->xid,
		__entry->procedure)
);

DECLARE_EVENT_CLASS(xprtrdma_callback_class,
	TP_PROTO(const char *addr, const char *port, u32 xid),
	TP_ARGS(addr, port, xid),
	TP_STRUCT__entry(
		__field(u32, xid)
		__string(addr, addr)
		__string(port, port)
	),
	TP_fast_assign(
		__entry->xid = xid;
		__assign_str(addr);
		__assign_str(port);
	),
	TP_printk("peer=[%s]:%s xid=0x%08x",
		__get_str(addr), __get_str(port), __entry->xid)
);

#define DEFINE_CALLBACK_EVENT(name)					\
		DEFINE_EVENT(xprtrdma_callback_class,			\
			xprtrdma_cb_##name,				\
			TP_PROTO(const char *addr, const char *port,	\
				 u32 xid),				\
			TP_ARGS(addr, port, xid))

DEFINE_CALLBACK_EVENT(call);
DEFINE_CALLBACK_EVENT(reply);

TRACE_EVENT(xprtrdma_cb_setup,
	TP_PROTO(const char *addr, const char *port, unsigned int reqs),
	TP_ARGS(addr, port, reqs),
	TP_STRUCT__entry(
		__field(unsigned int, reqs)
		__string(addr, addr)
		__string(port, port)
	),
	TP_fast_assign(
		__entry->reqs = reqs;
		__assign_str(addr);
		__assign_str(port);
	),
	TP_printk("peer=[%s]:%s %u reqs",
		__get_str(addr), __get_str(port), __entry->reqs)
);

TRACE_EVENT(xprtrdma_device_removal,
	TP_PROTO(const char *name, const struct sockaddr *sap),
	TP_ARGS(name, sap),
	TP_STRUCT__entry(
		__string(name, name)
		__array(unsigned char, addr, sizeof(struct sockaddr_in6))
	),
	TP_fast_assign(
		__assign_str(name);
		memcpy(__entry->addr, sap, sizeof(struct sockaddr_in6));
	),
	TP_printk("device %s to be removed, disconnecting %pISpc\n",
		__get_str(name), __entry->addr)
);

DECLARE_EVENT_CLASS(xprtrdma_rxprt,
	TP_PROTO(const char *addr, const char *port),
	TP_ARGS(addr, port),
	TP_STRUCT__entry(
		__string(addr, addr)
		__string(port, port)
	),
	TP_fast_assign(
		__assign_str(addr);
		__assign_str(port);
	),
	TP_printk("peer=[%s]:%s", __get_str(addr), __get_str(port))
);

DEFINE_EVENT(xprtrdma_rxprt, xprtrdma_op_inject_dsc,
	TP_PROTO(const char *addr, const char *port),
	TP_ARGS(addr, port));

TRACE_EVENT(xprtrdma_op_connect,
	TP_PROTO(const char *addr, const char *port, unsigned long delay),
	TP_ARGS(addr, port, delay),
	TP_STRUCT__entry(
		__field(unsigned long, delay)
		__string(addr, addr)
		__string(port, port)
	),
	TP_fast_assign(
		__entry->delay = delay;
		__assign_str(addr);
		__assign_str(port);
	),
	TP_printk("peer=[%s]:%s delay=%lu",
		__get_str(addr), __get_str(port), __entry->delay)
);

TRACE_EVENT(xprtrdma_op_set_cto,
	TP_PROTO(const char *addr, const char *port, unsigned long connect,
		 unsigned long reconnect),
	TP_ARGS(addr, port, connect, reconnect),
	TP_STRUCT__entry(
		__field(unsigned long, connect)
		__field(unsigned long, reconnect)
		__string(addr, addr)
		__string(port, port)
	),
	TP_fast_assign(
		__entry->connect = connect;
		__entry->reconnect = reconnect;
		__assign_str(addr);
		__assign_str(port);
	),
	TP_printk("peer=[%s]:%s connect=%lu reconnect=%lu",
		__get_str(addr), __get_str(port),
		__entry->connect / HZ, __entry->reconnect / HZ)
);

#define rpcrdma_rs_show_direction(x)					\
		__print_symbolic(x,					\
				{ DMA_BIDIRECTIONAL, "BIDIR" },		\
				{ DMA_TO_DEVICE, "TO_DEVICE" },		\
				{ DMA_FROM_DEVICE, "FROM_DEVICE" },	\
				{ DMA_NONE, "NONE" })

/* rpcrdma.ko's xprtrdma_mr_class: an MR of a Call's chunk (task 0@-1 for
 * none: the Write chunk pad). */
DECLARE_EVENT_CLASS(xprtrdma_mr_class,
	TP_PROTO(unsigned int task_id, unsigned int client_id, u32 mr_id,
		 int nents, u32 handle, u32 length, u64 offset, u32 dir),
	TP_ARGS(task_id, client_id, mr_id, nents, handle, length, offset, dir),
	TP_STRUCT__entry(
		__field(unsigned int, task_id)
		__field(unsigned int, client_id)
		__field(u32, mr_id)
		__field(int, nents)
		__field(u32, handle)
		__field(u32, length)
		__field(u64, offset)
		__field(u32, dir)
	),
	TP_fast_assign(
		__entry->task_id = task_id;
		__entry->client_id = client_id;
		__entry->mr_id = mr_id;
		__entry->nents = nents;
		__entry->handle = handle;
		__entry->length = length;
		__entry->offset = offset;
		__entry->dir = dir;
	),
	TP_printk("task:%08x@%08x mr.id=%u nents=%d %u@0x%016llx:0x%08x (%s)",
		__entry->task_id, __entry->client_id,
		__entry->mr_id, __entry->nents, __entry->length,
		(unsigned long long)__entry->offset, __entry->handle,
		rpcrdma_rs_show_direction(__entry->dir))
);

#define DEFINE_MR_EVENT(name)						\
		DEFINE_EVENT(xprtrdma_mr_class, xprtrdma_mr_##name,	\
			TP_PROTO(unsigned int task_id,			\
				 unsigned int client_id, u32 mr_id,	\
				 int nents, u32 handle, u32 length,	\
				 u64 offset, u32 dir),			\
			TP_ARGS(task_id, client_id, mr_id, nents,	\
				handle, length, offset, dir))

DEFINE_MR_EVENT(fastreg);
DEFINE_MR_EVENT(localinv);
DEFINE_MR_EVENT(reminv);
DEFINE_MR_EVENT(map);

TRACE_EVENT(xprtrdma_mr_unmap,
	TP_PROTO(u32 mr_id, int nents, u32 handle, u32 length, u64 offset,
		 u32 dir),
	TP_ARGS(mr_id, nents, handle, length, offset, dir),
	TP_STRUCT__entry(
		__field(u32, mr_id)
		__field(int, nents)
		__field(u32, handle)
		__field(u32, length)
		__field(u64, offset)
		__field(u32, dir)
	),
	TP_fast_assign(
		__entry->mr_id = mr_id;
		__entry->nents = nents;
		__entry->handle = handle;
		__entry->length = length;
		__entry->offset = offset;
		__entry->dir = dir;
	),
	TP_printk("mr.id=%u nents=%d %u@0x%016llx:0x%08x (%s)",
		__entry->mr_id, __entry->nents, __entry->length,
		(unsigned long long)__entry->offset, __entry->handle,
		rpcrdma_rs_show_direction(__entry->dir))
);

TRACE_EVENT(xprtrdma_frwr_alloc,
	TP_PROTO(u32 mr_id, int rc),
	TP_ARGS(mr_id, rc),
	TP_STRUCT__entry(
		__field(u32, mr_id)
		__field(int, rc)
	),
	TP_fast_assign(
		__entry->mr_id = mr_id;
		__entry->rc = rc;
	),
	TP_printk("mr.id=%u: rc=%d", __entry->mr_id, __entry->rc)
);

TRACE_EVENT(xprtrdma_frwr_dereg,
	TP_PROTO(u32 mr_id, int nents, u32 handle, u32 length, u64 offset,
		 u32 dir, int rc),
	TP_ARGS(mr_id, nents, handle, length, offset, dir, rc),
	TP_STRUCT__entry(
		__field(u32, mr_id)
		__field(int, nents)
		__field(u32, handle)
		__field(u32, length)
		__field(u64, offset)
		__field(u32, dir)
		__field(int, rc)
	),
	TP_fast_assign(
		__entry->mr_id = mr_id;
		__entry->nents = nents;
		__entry->handle = handle;
		__entry->length = length;
		__entry->offset = offset;
		__entry->dir = dir;
		__entry->rc = rc;
	),
	TP_printk("mr.id=%u nents=%d %u@0x%016llx:0x%08x (%s): rc=%d",
		__entry->mr_id, __entry->nents, __entry->length,
		(unsigned long long)__entry->offset, __entry->handle,
		rpcrdma_rs_show_direction(__entry->dir),
		__entry->rc)
);

TRACE_EVENT(xprtrdma_frwr_sgerr,
	TP_PROTO(u32 mr_id, u64 addr, u32 dir, int sg_nents),
	TP_ARGS(mr_id, addr, dir, sg_nents),
	TP_STRUCT__entry(
		__field(u32, mr_id)
		__field(u64, addr)
		__field(u32, dir)
		__field(int, nents)
	),
	TP_fast_assign(
		__entry->mr_id = mr_id;
		__entry->addr = addr;
		__entry->dir = dir;
		__entry->nents = sg_nents;
	),
	TP_printk("mr.id=%u DMA addr=0x%llx (%s) sg_nents=%d",
		__entry->mr_id, __entry->addr,
		rpcrdma_rs_show_direction(__entry->dir),
		__entry->nents)
);

TRACE_EVENT(xprtrdma_frwr_maperr,
	TP_PROTO(u32 mr_id, u64 addr, u32 dir, int num_mapped, int nents),
	TP_ARGS(mr_id, addr, dir, num_mapped, nents),
	TP_STRUCT__entry(
		__field(u32, mr_id)
		__field(u64, addr)
		__field(u32, dir)
		__field(int, num_mapped)
		__field(int, nents)
	),
	TP_fast_assign(
		__entry->mr_id = mr_id;
		__entry->addr = addr;
		__entry->dir = dir;
		__entry->num_mapped = num_mapped;
		__entry->nents = nents;
	),
	TP_printk("mr.id=%u DMA addr=0x%llx (%s) nents=%d of %d",
		__entry->mr_id, __entry->addr,
		rpcrdma_rs_show_direction(__entry->dir),
		__entry->num_mapped, __entry->nents)
);

/* rpcrdma.ko's rpcrdma_completion_class: vendor_err only on failure. */
TRACE_EVENT(xprtrdma_wc_send,
	TP_PROTO(u32 cq_id, int completion_id, unsigned long status,
		 unsigned int vendor_err),
	TP_ARGS(cq_id, completion_id, status, vendor_err),
	TP_STRUCT__entry(
		__field(u32, cq_id)
		__field(int, completion_id)
		__field(unsigned long, status)
		__field(unsigned int, vendor_err)
	),
	TP_fast_assign(
		__entry->cq_id = cq_id;
		__entry->completion_id = completion_id;
		__entry->status = status;
		__entry->vendor_err = status ? vendor_err : 0;
	),
	TP_printk("cq.id=%u cid=%d status=%s (%lu/0x%x)",
		__entry->cq_id, __entry->completion_id,
		rdma_show_wc_status(__entry->status),
		__entry->status, __entry->vendor_err)
);

/* rpcrdma.ko's rpcrdma_mr_completion_class: completion_id is the MR's
 * restrack id, printed as mr.id. */
DECLARE_EVENT_CLASS(rpcrdma_mr_completion_class,
	TP_PROTO(u32 cq_id, int completion_id, unsigned long status,
		 unsigned int vendor_err),
	TP_ARGS(cq_id, completion_id, status, vendor_err),
	TP_STRUCT__entry(
		__field(u32, cq_id)
		__field(int, completion_id)
		__field(unsigned long, status)
		__field(unsigned int, vendor_err)
	),
	TP_fast_assign(
		__entry->cq_id = cq_id;
		__entry->completion_id = completion_id;
		__entry->status = status;
		__entry->vendor_err = status ? vendor_err : 0;
	),
	TP_printk("cq.id=%u mr.id=%d status=%s (%lu/0x%x)",
		__entry->cq_id, __entry->completion_id,
		rdma_show_wc_status(__entry->status),
		__entry->status, __entry->vendor_err)
);

#define DEFINE_MR_COMPLETION_EVENT(name)				\
		DEFINE_EVENT(rpcrdma_mr_completion_class, name,		\
			TP_PROTO(u32 cq_id, int completion_id,		\
				 unsigned long status,			\
				 unsigned int vendor_err),		\
			TP_ARGS(cq_id, completion_id, status, vendor_err))

DEFINE_MR_COMPLETION_EVENT(xprtrdma_wc_fastreg);
DEFINE_MR_COMPLETION_EVENT(xprtrdma_wc_li);
DEFINE_MR_COMPLETION_EVENT(xprtrdma_wc_li_done);

/**
 ** Server
 **/

#define rpcrdma_rs_show_proc(x)						\
		__print_symbolic(x,					\
				{ 0, "RDMA_MSG" },			\
				{ 1, "RDMA_NOMSG" },			\
				{ 2, "RDMA_MSGP" },			\
				{ 3, "RDMA_DONE" },			\
				{ 4, "RDMA_ERROR" })

TRACE_EVENT(svcrdma_decode_rqst,
	TP_PROTO(u32 cq_id, int completion_id, u32 xid, u32 vers,
		 u32 credits, u32 proc, unsigned int hdrlen),
	TP_ARGS(cq_id, completion_id, xid, vers, credits, proc, hdrlen),
	TP_STRUCT__entry(
		__field(u32, cq_id)
		__field(int, completion_id)
		__field(u32, xid)
		__field(u32, vers)
		__field(u32, proc)
		__field(u32, credits)
		__field(unsigned int, hdrlen)
	),
	TP_fast_assign(
		__entry->cq_id = cq_id;
		__entry->completion_id = completion_id;
		__entry->xid = xid;
		__entry->vers = vers;
		__entry->credits = credits;
		__entry->proc = proc;
		__entry->hdrlen = hdrlen;
	),
	TP_printk("cq.id=%u cid=%d xid=0x%08x vers=%u credits=%u proc=%s hdrlen=%u",
		__entry->cq_id, __entry->completion_id,
		__entry->xid, __entry->vers, __entry->credits,
		rpcrdma_rs_show_proc(__entry->proc), __entry->hdrlen)
);

TRACE_EVENT(svcrdma_decode_short_err,
	TP_PROTO(u32 cq_id, int completion_id, unsigned int hdrlen),
	TP_ARGS(cq_id, completion_id, hdrlen),
	TP_STRUCT__entry(
		__field(u32, cq_id)
		__field(int, completion_id)
		__field(unsigned int, hdrlen)
	),
	TP_fast_assign(
		__entry->cq_id = cq_id;
		__entry->completion_id = completion_id;
		__entry->hdrlen = hdrlen;
	),
	TP_printk("cq.id=%u cid=%d hdrlen=%u",
		__entry->cq_id, __entry->completion_id, __entry->hdrlen)
);

DECLARE_EVENT_CLASS(svcrdma_badreq_event,
	TP_PROTO(u32 cq_id, int completion_id, u32 xid, u32 vers,
		 u32 credits, u32 proc),
	TP_ARGS(cq_id, completion_id, xid, vers, credits, proc),
	TP_STRUCT__entry(
		__field(u32, cq_id)
		__field(int, completion_id)
		__field(u32, xid)
		__field(u32, vers)
		__field(u32, proc)
		__field(u32, credits)
	),
	TP_fast_assign(
		__entry->cq_id = cq_id;
		__entry->completion_id = completion_id;
		__entry->xid = xid;
		__entry->vers = vers;
		__entry->credits = credits;
		__entry->proc = proc;
	),
	TP_printk("cq.id=%u cid=%d xid=0x%08x vers=%u credits=%u proc=%u",
		__entry->cq_id, __entry->completion_id,
		__entry->xid, __entry->vers, __entry->credits, __entry->proc)
);

#define DEFINE_BADREQ_EVENT(name)					\
		DEFINE_EVENT(svcrdma_badreq_event,			\
			svcrdma_decode_##name##_err,			\
			TP_PROTO(u32 cq_id, int completion_id, u32 xid,	\
				 u32 vers, u32 credits, u32 proc),	\
			TP_ARGS(cq_id, completion_id, xid, vers,	\
				credits, proc))

DEFINE_BADREQ_EVENT(badvers);
DEFINE_BADREQ_EVENT(drop);
DEFINE_BADREQ_EVENT(badproc);
DEFINE_BADREQ_EVENT(parse);

DECLARE_EVENT_CLASS(svcrdma_error_event,
	TP_PROTO(u32 xid),
	TP_ARGS(xid),
	TP_STRUCT__entry(
		__field(u32, xid)
	),
	TP_fast_assign(
		__entry->xid = xid;
	),
	TP_printk("xid=0x%08x", __entry->xid)
);

DEFINE_EVENT(svcrdma_error_event, svcrdma_err_vers,
	TP_PROTO(u32 xid), TP_ARGS(xid));
DEFINE_EVENT(svcrdma_error_event, svcrdma_err_chunk,
	TP_PROTO(u32 xid), TP_ARGS(xid));

TRACE_EVENT(svcrdma_post_send,
	TP_PROTO(u32 cq_id, int completion_id, unsigned int num_sge,
		 u32 inv_rkey),
	TP_ARGS(cq_id, completion_id, num_sge, inv_rkey),
	TP_STRUCT__entry(
		__field(u32, cq_id)
		__field(int, completion_id)
		__field(unsigned int, num_sge)
		__field(u32, inv_rkey)
	),
	TP_fast_assign(
		__entry->cq_id = cq_id;
		__entry->completion_id = completion_id;
		__entry->num_sge = num_sge;
		__entry->inv_rkey = inv_rkey;
	),
	TP_printk("cq.id=%u cid=%d num_sge=%u inv_rkey=0x%08x",
		__entry->cq_id, __entry->completion_id,
		__entry->num_sge, __entry->inv_rkey)
);

DEFINE_EVENT(rpcrdma_simple_cid_class, svcrdma_wc_send,
	TP_PROTO(u32 cq_id, int completion_id),
	TP_ARGS(cq_id, completion_id));

TRACE_EVENT(svcrdma_wc_recv,
	TP_PROTO(u32 cq_id, int completion_id, u32 received),
	TP_ARGS(cq_id, completion_id, received),
	TP_STRUCT__entry(
		__field(u32, cq_id)
		__field(int, completion_id)
		__field(u32, received)
	),
	TP_fast_assign(
		__entry->cq_id = cq_id;
		__entry->completion_id = completion_id;
		__entry->received = received;
	),
	TP_printk("cq.id=%u cid=%d received=%u",
		__entry->cq_id, __entry->completion_id, __entry->received)
);


/* rpcrdma.ko's completion classes with a status (Send, Read, Write,
 * Reply chunk and Receive failures). */
DECLARE_EVENT_CLASS(rpcrdma_send_flush_class,
	TP_PROTO(u32 cq_id, int completion_id, unsigned long status,
		 unsigned int vendor_err),
	TP_ARGS(cq_id, completion_id, status, vendor_err),
	TP_STRUCT__entry(
		__field(u32, cq_id)
		__field(int, completion_id)
		__field(unsigned long, status)
		__field(unsigned int, vendor_err)
	),
	TP_fast_assign(
		__entry->cq_id = cq_id;
		__entry->completion_id = completion_id;
		__entry->status = status;
		__entry->vendor_err = vendor_err;
	),
	TP_printk("cq.id=%u cid=%d status=%s (%lu/0x%x)",
		__entry->cq_id, __entry->completion_id,
		rdma_show_wc_status(__entry->status),
		__entry->status, __entry->vendor_err)
);

#define DEFINE_SEND_FLUSH_EVENT(name)					\
		DEFINE_EVENT(rpcrdma_send_flush_class, name,		\
			TP_PROTO(u32 cq_id, int completion_id,		\
				 unsigned long status,			\
				 unsigned int vendor_err),		\
			TP_ARGS(cq_id, completion_id, status, vendor_err))

/* rpcrdma_receive_flush_class: the same fields and format. */
DECLARE_EVENT_CLASS(rpcrdma_receive_flush_class,
	TP_PROTO(u32 cq_id, int completion_id, unsigned long status,
		 unsigned int vendor_err),
	TP_ARGS(cq_id, completion_id, status, vendor_err),
	TP_STRUCT__entry(
		__field(u32, cq_id)
		__field(int, completion_id)
		__field(unsigned long, status)
		__field(unsigned int, vendor_err)
	),
	TP_fast_assign(
		__entry->cq_id = cq_id;
		__entry->completion_id = completion_id;
		__entry->status = status;
		__entry->vendor_err = vendor_err;
	),
	TP_printk("cq.id=%u cid=%d status=%s (%lu/0x%x)",
		__entry->cq_id, __entry->completion_id,
		rdma_show_wc_status(__entry->status),
		__entry->status, __entry->vendor_err)
);

#define DEFINE_RECEIVE_FLUSH_EVENT(name)				\
		DEFINE_EVENT(rpcrdma_receive_flush_class, name,		\
			TP_PROTO(u32 cq_id, int completion_id,		\
				 unsigned long status,			\
				 unsigned int vendor_err),		\
			TP_ARGS(cq_id, completion_id, status, vendor_err))

DEFINE_SEND_FLUSH_EVENT(svcrdma_wc_send_flush);
DEFINE_SEND_FLUSH_EVENT(svcrdma_wc_send_err);

DEFINE_EVENT(rpcrdma_simple_cid_class, svcrdma_post_recv,
	TP_PROTO(u32 cq_id, int completion_id),
	TP_ARGS(cq_id, completion_id));

DEFINE_RECEIVE_FLUSH_EVENT(svcrdma_wc_recv_flush);
DEFINE_RECEIVE_FLUSH_EVENT(svcrdma_wc_recv_err);

TRACE_EVENT(svcrdma_rq_post_err,
	TP_PROTO(const char *addr, int status),
	TP_ARGS(addr, status),
	TP_STRUCT__entry(
		__field(int, status)
		__string(addr, addr)
	),
	TP_fast_assign(
		__entry->status = status;
		__assign_str(addr);
	),
	TP_printk("addr=%s status=%d", __get_str(addr), __entry->status)
);

TRACE_EVENT(svcrdma_send_err,
	TP_PROTO(const char *addr, u32 xid, int status),
	TP_ARGS(addr, xid, status),
	TP_STRUCT__entry(
		__field(int, status)
		__field(u32, xid)
		__string(addr, addr)
	),
	TP_fast_assign(
		__entry->status = status;
		__entry->xid = xid;
		__assign_str(addr);
	),
	TP_printk("addr=%s xid=0x%08x status=%d", __get_str(addr),
		__entry->xid, __entry->status)
);

DECLARE_EVENT_CLASS(svcrdma_post_chunk_class,
	TP_PROTO(u32 cq_id, int completion_id, int sqecount),
	TP_ARGS(cq_id, completion_id, sqecount),
	TP_STRUCT__entry(
		__field(u32, cq_id)
		__field(int, completion_id)
		__field(int, sqecount)
	),
	TP_fast_assign(
		__entry->cq_id = cq_id;
		__entry->completion_id = completion_id;
		__entry->sqecount = sqecount;
	),
	TP_printk("cq.id=%u cid=%d sqecount=%d",
		__entry->cq_id, __entry->completion_id, __entry->sqecount)
);

#define DEFINE_POST_CHUNK_EVENT(name)					\
		DEFINE_EVENT(svcrdma_post_chunk_class,			\
			svcrdma_post_##name##_chunk,			\
			TP_PROTO(u32 cq_id, int completion_id,		\
				 int sqecount),				\
			TP_ARGS(cq_id, completion_id, sqecount))

DEFINE_POST_CHUNK_EVENT(read);
DEFINE_POST_CHUNK_EVENT(write);
DEFINE_POST_CHUNK_EVENT(reply);

/* As rpcrdma.ko: the latency from the post (a ktime_get() value) to now. */
TRACE_EVENT(svcrdma_wc_read,
	TP_PROTO(u32 cq_id, int completion_id, unsigned int totalbytes,
		 s64 posttime),
	TP_ARGS(cq_id, completion_id, totalbytes, posttime),
	TP_STRUCT__entry(
		__field(u32, cq_id)
		__field(int, completion_id)
		__field(s64, read_latency)
		__field(unsigned int, totalbytes)
	),
	TP_fast_assign(
		__entry->cq_id = cq_id;
		__entry->completion_id = completion_id;
		__entry->totalbytes = totalbytes;
		__entry->read_latency = ktime_us_delta(ktime_get(), posttime);
	),
	TP_printk("cq.id=%u cid=%d totalbytes=%u latency-us=%lld",
		__entry->cq_id, __entry->completion_id,
		__entry->totalbytes, __entry->read_latency)
);

DEFINE_SEND_FLUSH_EVENT(svcrdma_wc_read_flush);
DEFINE_SEND_FLUSH_EVENT(svcrdma_wc_read_err);

DEFINE_EVENT(rpcrdma_simple_cid_class, svcrdma_wc_write,
	TP_PROTO(u32 cq_id, int completion_id),
	TP_ARGS(cq_id, completion_id));
DEFINE_SEND_FLUSH_EVENT(svcrdma_wc_write_flush);
DEFINE_SEND_FLUSH_EVENT(svcrdma_wc_write_err);

DEFINE_EVENT(rpcrdma_simple_cid_class, svcrdma_wc_reply,
	TP_PROTO(u32 cq_id, int completion_id),
	TP_ARGS(cq_id, completion_id));
DEFINE_SEND_FLUSH_EVENT(svcrdma_wc_reply_flush);
DEFINE_SEND_FLUSH_EVENT(svcrdma_wc_reply_err);

TRACE_EVENT(svcrdma_qp_error,
	TP_PROTO(unsigned int event, const char *device,
		 const struct sockaddr *sap),
	TP_ARGS(event, device, sap),
	TP_STRUCT__entry(
		__field(unsigned int, event)
		__string(device, device)
		__array(__u8, addr, INET6_ADDRSTRLEN + 10)
	),
	TP_fast_assign(
		__entry->event = event;
		__assign_str(device);
		snprintf(__entry->addr, sizeof(__entry->addr) - 1,
			 "%pISpc", sap);
	),
	TP_printk("addr=%s dev=%s event=%s (%u)",
		__entry->addr, __get_str(device),
		rdma_show_ib_event(__entry->event), __entry->event)
);

TRACE_EVENT(svcrdma_device_removal,
	TP_PROTO(const char *name, const struct sockaddr *sap),
	TP_ARGS(name, sap),
	TP_STRUCT__entry(
		__string(name, name)
		__array(unsigned char, addr, sizeof(struct sockaddr_in6))
	),
	TP_fast_assign(
		__assign_str(name);
		memcpy(__entry->addr, sap, sizeof(struct sockaddr_in6));
	),
	TP_printk("device %s to be removed, disconnecting %pISpc\n",
		__get_str(name), __entry->addr)
);

DECLARE_EVENT_CLASS(svcrdma_sendqueue_class,
	TP_PROTO(u32 cq_id, int completion_id, int avail, int depth),
	TP_ARGS(cq_id, completion_id, avail, depth),
	TP_STRUCT__entry(
		__field(u32, cq_id)
		__field(int, completion_id)
		__field(int, avail)
		__field(int, depth)
	),
	TP_fast_assign(
		__entry->cq_id = cq_id;
		__entry->completion_id = completion_id;
		__entry->avail = avail;
		__entry->depth = depth;
	),
	TP_printk("cq.id=%u cid=%d sc_sq_avail=%d/%d",
		__entry->cq_id, __entry->completion_id,
		__entry->avail, __entry->depth)
);

#define DEFINE_SQ_EVENT(name)						\
		DEFINE_EVENT(svcrdma_sendqueue_class, name,		\
			TP_PROTO(u32 cq_id, int completion_id,		\
				 int avail, int depth),			\
			TP_ARGS(cq_id, completion_id, avail, depth))

DEFINE_SQ_EVENT(svcrdma_sq_full);
DEFINE_SQ_EVENT(svcrdma_sq_retry);

TRACE_EVENT(svcrdma_sq_post_err,
	TP_PROTO(u32 cq_id, int completion_id, int avail, int depth,
		 int status),
	TP_ARGS(cq_id, completion_id, avail, depth, status),
	TP_STRUCT__entry(
		__field(u32, cq_id)
		__field(int, completion_id)
		__field(int, avail)
		__field(int, depth)
		__field(int, status)
	),
	TP_fast_assign(
		__entry->cq_id = cq_id;
		__entry->completion_id = completion_id;
		__entry->avail = avail;
		__entry->depth = depth;
		__entry->status = status;
	),
	TP_printk("cq.id=%u cid=%d sc_sq_avail=%d/%d status=%d",
		__entry->cq_id, __entry->completion_id,
		__entry->avail, __entry->depth, __entry->status)
);

DECLARE_EVENT_CLASS(svcrdma_accept_class,
	TP_PROTO(const char *addr, long status),
	TP_ARGS(addr, status),
	TP_STRUCT__entry(
		__field(long, status)
		__string(addr, addr)
	),
	TP_fast_assign(
		__entry->status = status;
		__assign_str(addr);
	),
	TP_printk("addr=%s status=%ld", __get_str(addr), __entry->status)
);

#define DEFINE_ACCEPT_EVENT(name)					\
		DEFINE_EVENT(svcrdma_accept_class, svcrdma_##name##_err,	\
			TP_PROTO(const char *addr, long status),	\
			TP_ARGS(addr, status))

DEFINE_ACCEPT_EVENT(pd);
DEFINE_ACCEPT_EVENT(qp);
DEFINE_ACCEPT_EVENT(initdepth);
DEFINE_ACCEPT_EVENT(accept);

TRACE_EVENT(svcrdma_decode_rseg,
	TP_PROTO(u32 cq_id, int completion_id, u32 segno, u32 position,
		 u32 handle, u32 length, u64 offset),
	TP_ARGS(cq_id, completion_id, segno, position, handle, length, offset),
	TP_STRUCT__entry(
		__field(u32, cq_id)
		__field(int, completion_id)
		__field(u32, segno)
		__field(u32, position)
		__field(u32, handle)
		__field(u32, length)
		__field(u64, offset)
	),
	TP_fast_assign(
		__entry->cq_id = cq_id;
		__entry->completion_id = completion_id;
		__entry->segno = segno;
		__entry->position = position;
		__entry->handle = handle;
		__entry->length = length;
		__entry->offset = offset;
	),
	TP_printk("cq.id=%u cid=%d segno=%u position=%u %u@0x%016llx:0x%08x",
		__entry->cq_id, __entry->completion_id,
		__entry->segno, __entry->position, __entry->length,
		(unsigned long long)__entry->offset, __entry->handle)
);

TRACE_EVENT(svcrdma_decode_wseg,
	TP_PROTO(u32 cq_id, int completion_id, u32 segno, u32 handle,
		 u32 length, u64 offset),
	TP_ARGS(cq_id, completion_id, segno, handle, length, offset),
	TP_STRUCT__entry(
		__field(u32, cq_id)
		__field(int, completion_id)
		__field(u32, segno)
		__field(u32, handle)
		__field(u32, length)
		__field(u64, offset)
	),
	TP_fast_assign(
		__entry->cq_id = cq_id;
		__entry->completion_id = completion_id;
		__entry->segno = segno;
		__entry->handle = handle;
		__entry->length = length;
		__entry->offset = offset;
	),
	TP_printk("cq.id=%u cid=%d segno=%u %u@0x%016llx:0x%08x",
		__entry->cq_id, __entry->completion_id,
		__entry->segno, __entry->length,
		(unsigned long long)__entry->offset, __entry->handle)
);

TRACE_EVENT(svcrdma_encode_wseg,
	TP_PROTO(u32 cq_id, int completion_id, u32 segno, u32 handle,
		 u32 length, u64 offset),
	TP_ARGS(cq_id, completion_id, segno, handle, length, offset),
	TP_STRUCT__entry(
		__field(u32, cq_id)
		__field(int, completion_id)
		__field(u32, segno)
		__field(u32, handle)
		__field(u32, length)
		__field(u64, offset)
	),
	TP_fast_assign(
		__entry->cq_id = cq_id;
		__entry->completion_id = completion_id;
		__entry->segno = segno;
		__entry->handle = handle;
		__entry->length = length;
		__entry->offset = offset;
	),
	TP_printk("cq.id=%u cid=%d segno=%u %u@0x%016llx:0x%08x",
		__entry->cq_id, __entry->completion_id,
		__entry->segno, __entry->length,
		(unsigned long long)__entry->offset, __entry->handle)
);

TRACE_EVENT(svcrdma_small_wrch_err,
	TP_PROTO(u32 cq_id, int completion_id, unsigned int remaining,
		 unsigned int seg_no, unsigned int num_segs),
	TP_ARGS(cq_id, completion_id, remaining, seg_no, num_segs),
	TP_STRUCT__entry(
		__field(u32, cq_id)
		__field(int, completion_id)
		__field(unsigned int, remaining)
		__field(unsigned int, seg_no)
		__field(unsigned int, num_segs)
	),
	TP_fast_assign(
		__entry->cq_id = cq_id;
		__entry->completion_id = completion_id;
		__entry->remaining = remaining;
		__entry->seg_no = seg_no;
		__entry->num_segs = num_segs;
	),
	TP_printk("cq.id=%u cid=%d remaining=%u seg_no=%u num_segs=%u",
		__entry->cq_id, __entry->completion_id,
		__entry->remaining, __entry->seg_no, __entry->num_segs)
);

#endif /* _RPCRDMA_RS_TRACE_H */

#include <trace/define_trace.h>
