// SPDX-License-Identifier: GPL-2.0
/*
 * rpcrdma-peer: a hostile RPC-over-RDMA server for tests (version 1; version
 * 2 Calls get ERR_VERS, or in the cant-reply modes RDMA2_ERR_CANT_REPLY).
 *
 * It listens on one or more ports, accepts every connection (with RFC 8797
 * private data unless -N), and answers every Call it receives with the
 * reply its port's mode asks for, malformed on purpose (or with none, in
 * mode silent): a client must fail those RPCs cleanly, never crash, and
 * never open connections it does not use. One line on stdout per
 * connection event and per Call:
 *
 *   listening port=P mode=M
 *   conn N request port=P mode=M from ADDR
 *   conn N mode=M established
 *   conn N mode=M call xid=0x... rdma_proc=R credits=C prog=P vers=V proc=X rdma_vers=W [reply-chunk]
 *   conn N mode=early early-reply xid=0x...
 *   conn N mode=M disconnected calls=K zero-call=Z total=T
 *
 * Z counts the connections, of all ports, that carried no Call by the time
 * they ended; T every connection request accepted so far.
 *
 *   rpcrdma-peer [-N] -p PORT -m MODE
 *   rpcrdma-peer [-N] -p PORT:MODE [-p PORT:MODE ...]
 *   rpcrdma-peer -l          list the RDMA devices, as ibv_devices
 *   rpcrdma-peer -c SERVER ...   the hostile client (rpcrdma-client.c)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "peer.h"

#define NBUF 32		/* receives and sends per connection; the credit cap */
#define BUFSZ 4096	/* inline size both ways */
#define MAXPORTS 16

enum mode { MSGP, BADPROC, ERR_TRUNC, ERR_UNKNOWN, ERR_CHUNK, WRITE_HUGE,
	    ZERO_REPLY_CHUNK, WRONG_XID, OK_NULL, SILENT, BCALL, CANT_REPLY,
	    CANT_REPLY_UNSIZED, EARLY, NMODES };
static const char *const mode_names[NMODES] = {
	"msgp", "badproc", "err-trunc", "err-unknown", "err-chunk",
	"write-huge", "zero-reply-chunk", "wrong-xid", "ok-null", "silent",
	"bcall", "cant-reply", "cant-reply-unsized", "early",
};

/* RPC-over-RDMA version 2 (draft-cel-nfsv4-rpcrdma-version-two) */
enum { RDMA2_ERROR = 4, RDMA2_ERR_CANT_REPLY = 3 };
/*
 * What cant-reply says the Reply needs: a NULL Reply's 24 bytes, within
 * any RPC's receive buffer, so that the client can act on it.
 */
#define CANT_REPLY_NEEDED 24

#define HANDLE 0xfeedf00d	/* stands for the Call's Reply chunk handle */

/*
 * Each mode's reply after xid, vers and credits: the header's words, then
 * (rpc) a minimal RPC reply, accepted and SUCCESS.
 */
static const struct shape {
	uint32_t w[10];
	unsigned int n, rpc;
} shapes[NMODES] = {
	/* RDMA_MSGP (obsolete in v1): align, threshold, three empty lists */
	[MSGP] = { { RDMA_MSGP, 0, 0, 0, 0, 0 }, 6, 1 },
	[BADPROC] = { { 7, 0, 0, 0 }, 4, 1 },
	/* RDMA_ERROR without its error code */
	[ERR_TRUNC] = { { RDMA_ERROR }, 1, 0 },
	[ERR_UNKNOWN] = { { RDMA_ERROR, 99 }, 2, 0 },
	[ERR_CHUNK] = { { RDMA_ERROR, RDMA_ERR_CHUNK }, 2, 0 },
	/* a Write chunk of one segment the client never offered, 2 GiB - 1 */
	[WRITE_HUGE] = { { RDMA_MSG, 0, 1, 1, 0xdeadbeef, 0x7fffffff, 0, 0, 0, 0 }, 10, 1 },
	/* RDMA_NOMSG whose Reply chunk is one segment of length 0 */
	[ZERO_REPLY_CHUNK] = { { RDMA_NOMSG, 0, 0, 1, 1, HANDLE, 0, 0, 0 }, 9, 0 },
	[WRONG_XID] = { { RDMA_MSG, 0, 0, 0 }, 4, 1 },
	[OK_NULL] = { { RDMA_MSG, 0, 0, 0 }, 4, 1 },
	/* SILENT: no reply at all */
	/* BCALL: as OK_NULL, after backward Calls the client must drop */
	[BCALL] = { { RDMA_MSG, 0, 0, 0 }, 4, 1 },
	/*
	 * CANT_REPLY, CANT_REPLY_UNSIZED: every version 2 Call is answered
	 * RDMA2_ERR_CANT_REPLY (on_call), with the segment and length the
	 * Reply needs or with zeros; version 1 Calls as OK_NULL.
	 */
	[CANT_REPLY] = { { RDMA_MSG, 0, 0, 0 }, 4, 1 },
	[CANT_REPLY_UNSIZED] = { { RDMA_MSG, 0, 0, 0 }, 4, 1 },
	/*
	 * EARLY: as OK_NULL, and EARLY_MS later the same Reply for the next
	 * XID (next_xid), whose Call the client has not sent yet: a Reply it
	 * must not take for that Call.
	 */
	[EARLY] = { { RDMA_MSG, 0, 0, 0 }, 4, 1 },
};
#define EARLY_MS 300

/*
 * The XID a Linux client sends after xid: sunrpc counts a host-order u32
 * and puts it on the wire as it lies in memory, so on a little-endian
 * client the first byte on the wire counts up.
 */
static uint32_t next_xid(uint32_t xid)
{
	return __builtin_bswap32(__builtin_bswap32(xid) + 1);
}

struct listener {
	struct rdma_cm_id *id;
	int port;
	enum mode mode;
};

struct conn {
	struct conn *next;
	struct rdma_cm_id *id;
	struct listener *l;
	unsigned int n, calls, next_send, sends_out, cq_events;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;		/* NBUF receive buffers, then NBUF send buffers */
};

static struct listener ls[MAXPORTS];
static int nl;
static struct conn *conns;
static unsigned int n_conns, n_zero;
static int send_private = 1;
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static uint8_t *recv_buf(struct conn *c, unsigned int i)
{
	return c->buf + (size_t)i * BUFSZ;
}

static uint8_t *send_buf(struct conn *c, unsigned int i)
{
	return c->buf + (size_t)(NBUF + i) * BUFSZ;
}

static int post_recv(struct conn *c, unsigned int i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)recv_buf(c, i), .length = BUFSZ, .lkey = c->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(c->id->qp, &wr, &bad);
}

static void conn_free(struct conn *c)
{
	struct conn **p;

	for (p = &conns; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	if (c->id->qp)
		rdma_destroy_qp(c->id);
	if (c->mr)
		ibv_dereg_mr(c->mr);
	if (c->cq) {
		ibv_ack_cq_events(c->cq, c->cq_events);
		ibv_destroy_cq(c->cq);
	}
	if (c->ch)
		ibv_destroy_comp_channel(c->ch);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	rdma_destroy_id(c->id);
	free(c->buf);
	free(c);
}

/* Resources for a new connection, and the receives posted before accept. */
static int conn_setup(struct conn *c)
{
	struct ibv_context *v = c->id->verbs;
	struct ibv_qp_init_attr qa = { 0 };
	unsigned int i;

	c->buf = calloc(2 * NBUF, BUFSZ);
	if (!c->buf)
		return -1;
	c->pd = ibv_alloc_pd(v);
	if (!c->pd)
		return -1;
	c->ch = ibv_create_comp_channel(v);
	if (!c->ch || fcntl(c->ch->fd, F_SETFL, fcntl(c->ch->fd, F_GETFL) | O_NONBLOCK))
		return -1;
	c->cq = ibv_create_cq(v, 2 * NBUF, c, c->ch, 0);
	if (!c->cq || ibv_req_notify_cq(c->cq, 0))
		return -1;
	c->mr = ibv_reg_mr(c->pd, c->buf, 2 * NBUF * BUFSZ, IBV_ACCESS_LOCAL_WRITE);
	if (!c->mr)
		return -1;
	qa.send_cq = c->cq;
	qa.recv_cq = c->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = NBUF;
	qa.cap.max_recv_wr = NBUF;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(c->id, c->pd, &qa))
		return -1;
	for (i = 0; i < NBUF; i++)
		if (post_recv(c, i))
			return -1;
	return 0;
}

/* 0 when accepted; on failure the caller frees after acking the event. */
static int on_connect_request(struct rdma_cm_event *ev)
{
	struct conn *c = calloc(1, sizeof(*c));
	struct rdma_conn_param cp = { 0 };
	uint8_t priv[8];
	char addr[INET6_ADDRSTRLEN] = "?";
	struct sockaddr *sa = rdma_get_peer_addr(ev->id);

	/* RFC 8797: no flags, 4 KiB each way. */
	peer_private(priv, 0, BUFSZ, BUFSZ);
	ev->id->context = NULL;
	if (!c) {
		rdma_reject(ev->id, NULL, 0);
		return -1;
	}
	c->id = ev->id;
	c->l = ev->listen_id->context;
	c->n = ++n_conns;
	ev->id->context = c;
	c->next = conns;
	conns = c;
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)sa)->sin_addr, addr, sizeof(addr));
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)sa)->sin6_addr, addr, sizeof(addr));
	printf("conn %u request port=%d mode=%s from %s\n", c->n, c->l->port,
	       mode_names[c->l->mode], addr);
	if (conn_setup(c)) {
		printf("conn %u setup failed: %s\n", c->n, strerror(errno));
		goto fail;
	}
	cp.responder_resources = ev->param.conn.initiator_depth;
	cp.initiator_depth = ev->param.conn.responder_resources;
	cp.rnr_retry_count = 7;
	if (send_private) {
		cp.private_data = priv;
		cp.private_data_len = sizeof(priv);
	}
	if (rdma_accept(c->id, &cp)) {
		printf("conn %u accept failed: %s\n", c->n, strerror(errno));
		goto fail;
	}
	return 0;
fail:
	rdma_reject(c->id, NULL, 0);
	n_zero++;
	printf("conn %u mode=%s rejected calls=0 zero-call=%u total=%u\n", c->n,
	       mode_names[c->l->mode], n_zero, n_conns);
	return -1;
}

/*
 * Skip the three chunk lists of an RDMA_MSG or RDMA_NOMSG header; note the
 * handle of the first Reply chunk segment. 0 on success.
 */
static int skip_chunks(const uint8_t *p, unsigned int len, unsigned int *off,
		       uint32_t *reply_handle)
{
	uint32_t d, n, i;

	while (!get32(p, len, off, &d) && d) {	/* read list: position, segment */
		*off += 5 * 4;
	}
	if (*off > len)
		return -1;
	while (!get32(p, len, off, &d) && d) {	/* write list: counted segments */
		if (get32(p, len, off, &n) || n > BUFSZ / 16)
			return -1;
		*off += n * 16;
	}
	if (*off > len || get32(p, len, off, &d))
		return -1;
	if (d) {				/* reply chunk */
		if (get32(p, len, off, &n) || n > BUFSZ / 16)
			return -1;
		for (i = 0; i < n; i++) {
			uint32_t h;

			if (get32(p, len, off, &h))
				return -1;
			if (i == 0)
				*reply_handle = h;
			*off += 12;
		}
	}
	return *off > len ? -1 : 0;
}

/* Posts the first len bytes of send buffer slot; false if that failed. */
static int post_send_buf(struct conn *c, unsigned int slot, unsigned int len)
{
	struct ibv_sge sge;
	struct ibv_send_wr wr = { 0 }, *bad;

	sge.addr = (uintptr_t)send_buf(c, slot);
	sge.length = len;
	sge.lkey = c->mr->lkey;
	wr.wr_id = NBUF + slot;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_send(c->id->qp, &wr, &bad)) {
		printf("conn %u post send failed\n", c->n);
		return 0;
	}
	c->sends_out++;
	return 1;
}

/*
 * Mode bcall: backward-direction Calls (RFC 8167) a client must drop
 * without harm, ahead of each Reply: one with a Write list (backward
 * messages carry no chunks), one filling the whole inline buffer, and a
 * CB_NULL, which only a client with a callback service may take (this
 * peer never grants it a session, so none has).
 */
static void send_bcalls(struct conn *c, uint32_t xid)
{
	unsigned int k, s, slot, which;
	uint8_t *r;

	for (which = 0; which < 3; which++) {
		if (c->sends_out >= NBUF)
			return;
		slot = c->next_send++ % NBUF;
		r = send_buf(c, slot);
		s = 0;
		put32(r, &s, ~xid);		/* the backchannel's own XIDs */
		put32(r, &s, 1);
		put32(r, &s, 2);		/* nfsd's backchannel credits */
		put32(r, &s, RDMA_MSG);
		put32(r, &s, 0);
		if (which == 0) {		/* a Write list of one segment */
			put32(r, &s, 1);
			put32(r, &s, 1);
			put32(r, &s, 0x1234);
			put32(r, &s, 16);
			put32(r, &s, 0);
			put32(r, &s, 0);
			put32(r, &s, 0);
		} else {
			put32(r, &s, 0);
		}
		put32(r, &s, 0);
		/* RPC Call: xid, CALL, rpcvers 2, NFS4_CALLBACK 0x40000000, 1, CB_NULL */
		put32(r, &s, ~xid);
		put32(r, &s, 0);
		put32(r, &s, 2);
		put32(r, &s, 0x40000000);
		put32(r, &s, 1);
		put32(r, &s, 0);
		for (k = 0; k < 4; k++)		/* AUTH_NULL credential, verifier */
			put32(r, &s, 0);
		if (which == 1)
			while (s < BUFSZ)
				put32(r, &s, 0);
		printf("conn %u mode=%s backward call xid=0x%08x len=%u%s\n", c->n,
		       mode_names[c->l->mode], ~xid, s, which == 0 ? " write-list" : "");
		post_send_buf(c, slot, s);
	}
}

/*
 * Answers the Call xid with an error header: xid, the Call's vers, the
 * credits granted, then the n words of w (procedure, error and details).
 * Nothing if every send buffer is out.
 */
static void send_error(struct conn *c, uint32_t xid, uint32_t vers,
		       uint32_t credits, const uint32_t *w, unsigned int n)
{
	unsigned int slot, s = 0, k;
	uint8_t *r;

	if (c->sends_out >= NBUF)
		return;
	slot = c->next_send++ % NBUF;
	r = send_buf(c, slot);
	put32(r, &s, xid);
	put32(r, &s, vers);
	put32(r, &s, credits < 1 ? 1 : credits > NBUF ? NBUF : credits);
	for (k = 0; k < n; k++)
		put32(r, &s, w[k]);
	post_send_buf(c, slot, s);
}

/* The reply of the connection's mode to XID xid; a send buffer is free. */
static void send_reply(struct conn *c, uint32_t xid, uint32_t credits, uint32_t reply_handle)
{
	unsigned int slot = c->next_send++ % NBUF, s = 0, k;
	uint8_t *r = send_buf(c, slot);

	put32(r, &s, xid);
	put32(r, &s, 1);
	put32(r, &s, credits < 1 ? 1 : credits > NBUF ? NBUF : credits);
	for (k = 0; k < shapes[c->l->mode].n; k++)
		put32(r, &s, shapes[c->l->mode].w[k] == HANDLE ? reply_handle
							       : shapes[c->l->mode].w[k]);
	if (shapes[c->l->mode].rpc) {
		/* accepted, AUTH_NULL verifier, SUCCESS, no results */
		put32(r, &s, xid);
		for (k = 0; k < 5; k++)
			put32(r, &s, k == 0);
	}
	post_send_buf(c, slot, s);
}

/* A Call arrived in receive buffer i, len bytes: log it and answer it. */
static void on_call(struct conn *c, unsigned int i, unsigned int len)
{
	const uint8_t *p = recv_buf(c, i);
	unsigned int off = 0;
	uint32_t xid, vers, credits, proc, d, prog = 0, pvers = 0, pproc = 0;
	uint32_t reply_handle = 0, rxid;
	int have_rpc = 0;

	if (get32(p, len, &off, &xid) || get32(p, len, &off, &vers) ||
	    get32(p, len, &off, &credits) || get32(p, len, &off, &proc)) {
		printf("conn %u short message of %u bytes ignored\n", c->n, len);
		return;
	}
	c->calls++;
	/* Version 2's RDMA2_MSG and NOMSG: rdma_direction and rdma_inv_handle
	 * come before the chunk lists. */
	if (vers == 2)
		off += 2 * 4;
	if ((proc == RDMA_MSG || proc == RDMA_NOMSG) &&
	    !skip_chunks(p, len, &off, &reply_handle) && proc == RDMA_MSG &&
	    !get32(p, len, &off, &d) && d == xid && !get32(p, len, &off, &d) && d == 0 &&
	    !get32(p, len, &off, &d) && !get32(p, len, &off, &prog) &&
	    !get32(p, len, &off, &pvers) && !get32(p, len, &off, &pproc))
		have_rpc = 1;
	printf("conn %u mode=%s call xid=0x%08x rdma_proc=%u credits=%u", c->n,
	       mode_names[c->l->mode], xid, proc, credits);
	if (have_rpc)
		printf(" prog=%u vers=%u proc=%u", prog, pvers, pproc);
	else
		printf(" proc=?");
	printf(" rdma_vers=%u%s\n", vers, reply_handle ? " reply-chunk" : "");

	if (c->l->mode == SILENT)
		return;
	if (vers == 2 && (c->l->mode == CANT_REPLY || c->l->mode == CANT_REPLY_UNSIZED)) {
		int sized = c->l->mode == CANT_REPLY;
		/* not processed; the first segment needs CANT_REPLY_NEEDED */
		const uint32_t err[] = { RDMA2_ERROR, RDMA2_ERR_CANT_REPLY, 0,
					 sized ? 1 : 0, sized ? CANT_REPLY_NEEDED : 0 };

		send_error(c, xid, vers, credits, err, 5);
		return;
	}
	if (vers != 1) {
		/*
		 * As a version 1 Responder must (RFC 8166 section 4.5): ERR_VERS
		 * 1..1 with rdma_vers echoed. rpcrdma_rs's version 2 probe then
		 * goes again as version 1, which the mode answers.
		 */
		const uint32_t err[] = { RDMA_ERROR, RDMA_ERR_VERS, 1, 1 };

		send_error(c, xid, vers, credits, err, 4);
		return;
	}
	if (c->l->mode == BCALL)
		send_bcalls(c, xid);
	if (c->sends_out >= NBUF) {
		printf("conn %u send queue full, no reply to xid=0x%08x\n", c->n, xid);
		return;
	}
	rxid = c->l->mode == WRONG_XID ? xid + 1 : xid;
	send_reply(c, rxid, credits, reply_handle);
	if (c->l->mode == EARLY) {
		/* The client's next Call is under way by then. */
		usleep(EARLY_MS * 1000);
		if (c->sends_out < NBUF) {
			printf("conn %u mode=early early-reply xid=0x%08x\n", c->n, next_xid(xid));
			send_reply(c, next_xid(xid), credits, reply_handle);
		}
	}
}

static void on_cq(struct conn *c)
{
	struct ibv_cq *cq;
	void *ctx;
	struct ibv_wc wc[8];
	int n, i;

	while (!ibv_get_cq_event(c->ch, &cq, &ctx))
		c->cq_events++;
	if (c->cq_events >= 64) {
		ibv_ack_cq_events(c->cq, c->cq_events);
		c->cq_events = 0;
	}
	ibv_req_notify_cq(c->cq, 0);
	while ((n = ibv_poll_cq(c->cq, 8, wc)) > 0) {
		for (i = 0; i < n; i++) {
			if (wc[i].wr_id >= NBUF) {
				c->sends_out--;
				if (wc[i].status != IBV_WC_SUCCESS)
					printf("conn %u send: %s\n", c->n, ibv_wc_status_str(wc[i].status));
				continue;
			}
			if (wc[i].status != IBV_WC_SUCCESS) {
				if (wc[i].status != IBV_WC_WR_FLUSH_ERR)
					printf("conn %u receive: %s\n", c->n,
					       ibv_wc_status_str(wc[i].status));
				continue;
			}
			on_call(c, wc[i].wr_id, wc[i].byte_len);
			if (post_recv(c, wc[i].wr_id))
				printf("conn %u post receive failed\n", c->n);
		}
	}
}

static int is_listener(const struct rdma_cm_id *id)
{
	int i;

	for (i = 0; i < nl; i++)
		if (ls[i].id == id)
			return 1;
	return 0;
}

static void on_cm_event(struct rdma_event_channel *ech)
{
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct conn *c;
	enum rdma_cm_event_type type;

	if (rdma_get_cm_event(ech, &ev))
		return;
	type = ev->event;
	id = ev->id;
	if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
		int failed = on_connect_request(ev);

		/* rdma_destroy_id waits for the id's events to be acked. */
		rdma_ack_cm_event(ev);
		if (failed && id->context)
			conn_free(id->context);
		else if (failed)
			rdma_destroy_id(id);
		return;
	}
	rdma_ack_cm_event(ev);
	if (is_listener(id)) {
		printf("listener: %s\n", rdma_event_str(type));
		return;
	}
	c = id->context;
	if (!c)
		return;
	switch (type) {
	case RDMA_CM_EVENT_ESTABLISHED:
		printf("conn %u mode=%s established\n", c->n, mode_names[c->l->mode]);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		if (!c->calls)
			n_zero++;
		printf("conn %u mode=%s %s calls=%u zero-call=%u total=%u\n", c->n,
		       mode_names[c->l->mode],
		       type == RDMA_CM_EVENT_DISCONNECTED ? "disconnected" : rdma_event_str(type),
		       c->calls, n_zero, n_conns);
		if (type == RDMA_CM_EVENT_DISCONNECTED)
			rdma_disconnect(c->id);
		conn_free(c);
		break;
	default:
		printf("conn %u %s\n", c->n, rdma_event_str(type));
		break;
	}
}

static int parse_mode(const char *s)
{
	int m;

	for (m = 0; m < NMODES; m++)
		if (!strcmp(s, mode_names[m]))
			return m;
	fprintf(stderr, "unknown mode '%s'\n", s);
	exit(2);
}

/* -l: what ibv_devices shows; fails when no device opens. */
static int list_devices(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_port_attr pa;
	int i, ok = 0;

	for (i = 0; l && l[i]; i++) {
		struct ibv_context *v = ibv_open_device(l[i]);

		if (!v || ibv_query_port(v, 1, &pa)) {
			printf("%s: cannot open: %s\n", ibv_get_device_name(l[i]), strerror(errno));
		} else {
			printf("%s: port 1 %s\n", ibv_get_device_name(l[i]),
			       ibv_port_state_str(pa.state));
			ok = 1;
		}
		if (v)
			ibv_close_device(v);
	}
	if (l)
		ibv_free_device_list(l);
	return ok ? 0 : 1;
}

static void usage(void)
{
	fprintf(stderr, "usage: rpcrdma-peer [-N] -p PORT -m MODE | -p PORT:MODE ... | -l\n"
		"       rpcrdma-peer -c SERVER [-P PORT] [-t MS] [CASE ...]\n"
		"modes: msgp badproc err-trunc err-unknown err-chunk write-huge\n"
		"       zero-reply-chunk wrong-xid ok-null silent bcall cant-reply\n"
		"       cant-reply-unsized early\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct rdma_event_channel *ech;
	struct sigaction sa = { .sa_handler = on_signal };
	struct pollfd *pfd = NULL;
	struct conn *c, **pc = NULL;
	int opt, i, n, rc = 1;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "-c"))
		return client_main(argc - 1, argv + 1);
	while ((opt = getopt(argc, argv, "lNp:m:")) != -1) {
		switch (opt) {
		case 'l':
			return list_devices();
		case 'N':
			send_private = 0;
			break;
		case 'p':
			if (nl == MAXPORTS)
				usage();
			ls[nl].port = atoi(optarg);
			ls[nl].mode = strchr(optarg, ':') ? parse_mode(strchr(optarg, ':') + 1) : OK_NULL;
			nl++;
			break;
		case 'm':
			if (!nl)
				usage();
			ls[nl - 1].mode = parse_mode(optarg);
			break;
		default:
			usage();
		}
	}
	if (!nl || optind != argc)
		usage();
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	ech = rdma_create_event_channel();
	if (!ech) {
		perror("rdma_create_event_channel");
		return 1;
	}
	for (i = 0; i < nl; i++) {
		struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(ls[i].port) };

		ls[i].id = NULL;
		if (rdma_create_id(ech, &ls[i].id, &ls[i], RDMA_PS_TCP) ||
		    rdma_bind_addr(ls[i].id, (struct sockaddr *)&sin) ||
		    rdma_listen(ls[i].id, 16)) {
			fprintf(stderr, "port %d: %s\n", ls[i].port, strerror(errno));
			goto out;
		}
		printf("listening port=%d mode=%s\n", ls[i].port, mode_names[ls[i].mode]);
	}

	while (!stop) {
		n = 1;
		for (c = conns; c; c = c->next)
			n++;
		free(pfd);
		free(pc);
		pfd = calloc(n, sizeof(*pfd));
		pc = calloc(n, sizeof(*pc));
		if (!pfd || !pc)
			goto out;
		pfd[0].fd = ech->fd;
		pfd[0].events = POLLIN;
		for (i = 1, c = conns; c; c = c->next, i++) {
			pc[i] = c;
			pfd[i].fd = c->ch->fd;
			pfd[i].events = POLLIN;
		}
		if (poll(pfd, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			perror("poll");
			goto out;
		}
		/* Completions first: a CM event may free a connection. */
		for (i = 1; i < n; i++)
			if (pfd[i].revents)
				on_cq(pc[i]);
		if (pfd[0].revents)
			on_cm_event(ech);
	}
	rc = 0;
out:
	for (c = conns; c; c = conns) {
		if (!c->calls)
			n_zero++;
		rdma_disconnect(c->id);
		conn_free(c);
	}
	printf("exit zero-call=%u total=%u\n", n_zero, n_conns);
	for (i = 0; i < nl; i++)
		if (ls[i].id)
			rdma_destroy_id(ls[i].id);
	rdma_destroy_event_channel(ech);
	free(pfd);
	free(pc);
	return rc;
}
