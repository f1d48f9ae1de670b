// SPDX-License-Identifier: GPL-2.0
/*
 * rpcrdma-peer -c: a hostile RPC-over-RDMA Version One client, for testing
 * a server transport (nfsd over rpcrdma.ko or rpcrdma_rs.ko).
 *
 * For each case it opens a connection of its own to SERVER:PORT (RFC 8797
 * private data: no flags, 4 KiB each way), sends one malformed Call (or a
 * well-formed one, in the good-* cases) and reports what came back within
 * the timeout. When the connection survived, it then sends a well-formed
 * NFS NULL Call on it ("probe") and reports that answer as then=. One line
 * per case on stdout:
 *
 *   case NAME start: DESCRIPTION
 *   case NAME result=R xid=0x... xid_ok=0|1 [credits=C] [vers=LOW-HIGH]
 *        [hvers=V] [rpc=ok|bad via=inline|reply-chunk wchunks=N wbytes=B
 *        rchunk=absent|BYTES] sent=BYTES sent_xid=0x...
 *        [qp="first completion error"] cm=connected|disconnected|rejected
 *        then=R2 [then_...] ms=MS
 *   done cases=N
 *
 * R is err-vers, err-chunk, err-other (an RDMA_ERROR of another code),
 * reply (RDMA_MSG or RDMA_NOMSG), bad-answer (something unparsable),
 * disconnect (the connection ended, or its QP failed), nothing (no answer
 * within the timeout, connection still up) or connect-failed. then= is
 * "-" when there was no connection left to probe. xid is the answer's
 * rdma_xid; xid_ok says whether it is the one the case sent; hvers the
 * answer's rdma_vers; rpc whether an RPC Reply to our XID, accepted and
 * SUCCESS, came inline or in our Reply chunk. cm=disconnected: the
 * connection ended (the server's DREQ) by the end of the wait;
 * cm=rejected: the server's REJ ended it (its CM had not seen our RTU
 * when it let the connection go). wchunks and wbytes: the Write chunks a
 * Reply echoed and the bytes their segments say were written; rchunk: the
 * length of the Reply chunk it echoed, or absent. The credit-burst case
 * prints granted=, sent= and answered= instead; abandon-connect prints
 * abandoned=N (connects given up, see C_ABANDON) before its result, which
 * is that of a NULL Call on a new connection afterwards; its first_ms= is
 * how long that connection and its first Call took (what a legitimate
 * client that comes after the abandoned connects waits).
 * write-many-segs and reply-many-segs (an NFSv4 READ into many small
 * segments) add, after sent_xid=, what check_many found: nfs=ok|bad and
 * the details.
 *
 *   rpcrdma-peer -c SERVER [-P PORT] [-t MS] [-u FILE] [-a N] [-l] [CASE ...]
 *
 * -l lists the cases, one per line with a short description. Without
 * CASE, all cases run in the listed order but those marked explicit
 * (abandon-connect), which run only when named. -t: the time each answer
 * may take (default 5000 ms). -u FILE: abandon-connect goes on past its
 * ABANDON_MIN connects until FILE exists (a caller that needs it running
 * while something else happens).
 */
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "peer.h"

#define RBUF 4096		/* our Receive size, as advertised */
#define NRECV 512		/* Receives posted: room for every burst reply */
#define SBUF 8192		/* Send buffer: the oversize case needs 8 KiB */
#define NSEND 512
#define CHUNKSZ (64 * 1024)	/* what the server may Read and Write */
#define BIGCHUNKSZ (1024 * 1024 + CHUNKSZ)	/* ... for reply-chunk-huge */
#define MANYCHUNKSZ (256 * 1024)	/* ... for write-many-segs, reply-many-segs */
#define CH_CALL 0		/* chunk region: a Call to pull by RDMA Read */
#define CH_REPLY 4096		/* ... room for a Reply chunk */
#define CH_WRITE 8192		/* ... room for a Write chunk */
#define CH_MANY (64 * 1024)	/* ... the *-many-segs cases' chunk: up to 192 KiB */
#define CREDITS 32		/* credits every Call asks for */
#define BAD_RKEY 0xdeadbeefu

#define NFS_PROG 100003
#define NULL_CALL_LEN 40	/* xid, CALL, 2, prog, 3, proc 0, two AUTH_NULLs */

struct cconn {
	struct rdma_event_channel *ech;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_mr *mr, *cmr;
	struct ibv_qp *qp;	/* ours, not rdma_cm's (see qp_to()), but on iWARP */
	uint8_t *buf;		/* NRECV receive buffers, then NSEND send buffers */
	uint8_t *chunk;		/* chunksz, remotely readable and writable */
	size_t chunksz;
	unsigned int cq_events, next_send;
	int established;	/* CM: connected */
	int ended;		/* CM: the connection ended (ENDED_*) */
	char qp_err[80];	/* the first completion error, if any */
	int rep_rnr;		/* the RNR retry count the server's REP asked for; -1 iWARP */
	unsigned int reply_off;	/* our Reply chunk's offset in chunk, 0: CH_REPLY */
	unsigned int first_len;	/* the first answer to the Call, as received */
	uint8_t first[RBUF];
};

enum kind { A_NONE, A_DISC, A_ERR_VERS, A_ERR_CHUNK, A_ERR_OTHER, A_REPLY, A_BAD, A_NOCONN };
static const char *const kind_names[] = {
	"nothing", "disconnect", "err-vers", "err-chunk", "err-other", "reply", "bad-answer",
	"connect-failed",
};

/* What came back for one Call. */
struct answer {
	enum kind kind;
	uint32_t xid, vers, credits, proc, err, low, high;
	uint32_t cant[3];		/* RDMA2_ERR_CANT_REPLY: processed, segment, length needed */
	int rpc_ok, via_chunk;
	uint32_t wchunks, wbytes;	/* Write chunks echoed, bytes they say were written */
	int rchunk;			/* a Reply chunk echoed */
	uint32_t rbytes;		/* ... its length */
	char why[96];
};

enum { ENDED_NOT, ENDED_DISC, ENDED_REJ };

/* Whether CM event e ends the connection, and how. */
static int cm_ended(enum rdma_cm_event_type e)
{
	switch (e) {
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		return ENDED_DISC;
	case RDMA_CM_EVENT_REJECTED:
		return ENDED_REJ;
	default:
		return ENDED_NOT;
	}
}

static struct sockaddr_storage server;
static int timeout_ms = 5000;
static size_t chunk_size = CHUNKSZ;	/* of the next connection */
static const char *until_file;		/* -u */
static unsigned int abandon_min = 200;	/* -a */
static uint32_t next_xid = 0x51c00000;

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

static uint8_t *rbuf(struct cconn *c, unsigned int i)
{
	return c->buf + (size_t)i * RBUF;
}

static uint8_t *sbuf(struct cconn *c, unsigned int i)
{
	return c->buf + (size_t)NRECV * RBUF + (size_t)i * SBUF;
}

static int post_recv(struct cconn *c, unsigned int i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)rbuf(c, i), .length = RBUF, .lkey = c->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(c->qp, &wr, &bad);
}

/* Posts the first len bytes of send slot i (len 0: a Send with no data). */
static int post_send(struct cconn *c, unsigned int i, unsigned int len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)sbuf(c, i), .length = len, .lkey = c->mr->lkey,
	};
	struct ibv_send_wr wr = { 0 }, *bad;

	wr.wr_id = NRECV + i;
	wr.sg_list = &sge;
	wr.num_sge = len ? 1 : 0;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	return ibv_post_send(c->qp, &wr, &bad);
}

static void cconn_close(struct cconn *c)
{
	if (c->id && c->established && !c->ended) {
		struct rdma_cm_event *ev;
		struct pollfd p = { .fd = c->ech->fd, .events = POLLIN };
		long end = now_ms() + 1000;

		/* Wait a moment for our DREQ to be answered. */
		rdma_disconnect(c->id);
		while (!c->ended && now_ms() < end && poll(&p, 1, 100) >= 0) {
			if (!(p.revents & POLLIN))
				continue;
			if (rdma_get_cm_event(c->ech, &ev))
				break;
			if (ev->event == RDMA_CM_EVENT_DISCONNECTED)
				c->ended = ENDED_DISC;
			rdma_ack_cm_event(ev);
		}
	}
	if (c->qp && c->id && c->id->qp == c->qp)
		rdma_destroy_qp(c->id);
	else if (c->qp)
		ibv_destroy_qp(c->qp);
	if (c->cmr)
		ibv_dereg_mr(c->cmr);
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
	if (c->id)
		rdma_destroy_id(c->id);
	if (c->ech)
		rdma_destroy_event_channel(c->ech);
	free(c->buf);
	free(c->chunk);
	memset(c, 0, sizeof(*c));
}

/* The next CM event, which must be 'want'; 0 on success. */
static int cm_expect(struct cconn *c, enum rdma_cm_event_type want, char *why, size_t n)
{
	struct rdma_cm_event *ev;
	struct pollfd p = { .fd = c->ech->fd, .events = POLLIN };
	enum rdma_cm_event_type got;
	int st;

	if (poll(&p, 1, timeout_ms * 2) <= 0) {
		snprintf(why, n, "no %s", rdma_event_str(want));
		return -1;
	}
	if (rdma_get_cm_event(c->ech, &ev)) {
		snprintf(why, n, "rdma_get_cm_event: %s", strerror(errno));
		return -1;
	}
	got = ev->event;
	st = ev->status;
	rdma_ack_cm_event(ev);
	if (got != want) {
		snprintf(why, n, "%s (status %d), not %s", rdma_event_str(got), st,
			 rdma_event_str(want));
		return -1;
	}
	return 0;
}

/*
 * Moves our QP to state s with the attributes rdma_cm gives, except that
 * RNR NAKs are retried forever. The RNR retry count comes from the
 * server's REP, and rpcrdma.ko's server asks for none: a Send that finds
 * no Receive would fail our QP at once, the server none the wiser, and a
 * burst beyond the credits would test our QP instead of the server.
 */
static int qp_to(struct cconn *c, enum ibv_qp_state s)
{
	struct ibv_qp_attr a = { .qp_state = s };
	int mask;

	if (rdma_init_qp_attr(c->id, &a, &mask))
		return -1;
	if (s == IBV_QPS_RTS) {
		c->rep_rnr = a.rnr_retry;
		a.rnr_retry = 7;
	}
	return ibv_modify_qp(c->qp, &a, mask);
}

/*
 * Resolve, set up and connect; 0 when established. early, when set,
 * builds a Call (rdma_xid xid, *len bytes) that goes out as soon as our
 * QP is ready to send, EARLY_MS before our RTU: the server's QP takes it
 * while the server's CM still waits for the RTU.
 */
#define EARLY_MS 1000
static int cconn_open(struct cconn *c, unsigned int (*early)(struct cconn *, uint8_t *, uint32_t),
		      uint32_t xid, unsigned int *len, char *why, size_t n)
{
	struct ibv_qp_init_attr qa = { 0 };
	struct rdma_conn_param cp = { 0 };
	uint8_t priv[8];
	unsigned int i;
	int iwarp;

	memset(c, 0, sizeof(*c));
	c->rep_rnr = -1;
	c->ech = rdma_create_event_channel();
	if (!c->ech || rdma_create_id(c->ech, &c->id, c, RDMA_PS_TCP)) {
		snprintf(why, n, "rdma_create_id: %s", strerror(errno));
		return -1;
	}
	if (rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&server, 2000) ||
	    cm_expect(c, RDMA_CM_EVENT_ADDR_RESOLVED, why, n))
		return -1;
	if (rdma_resolve_route(c->id, 2000) || cm_expect(c, RDMA_CM_EVENT_ROUTE_RESOLVED, why, n))
		return -1;
	c->buf = calloc(1, (size_t)NRECV * RBUF + (size_t)NSEND * SBUF);
	c->chunksz = chunk_size;
	c->chunk = calloc(1, c->chunksz);
	c->pd = ibv_alloc_pd(c->id->verbs);
	c->ch = ibv_create_comp_channel(c->id->verbs);
	if (!c->buf || !c->chunk || !c->pd || !c->ch ||
	    fcntl(c->ch->fd, F_SETFL, fcntl(c->ch->fd, F_GETFL) | O_NONBLOCK))
		goto fail;
	c->cq = ibv_create_cq(c->id->verbs, NRECV + NSEND, c, c->ch, 0);
	if (!c->cq || ibv_req_notify_cq(c->cq, 0))
		goto fail;
	c->mr = ibv_reg_mr(c->pd, c->buf, (size_t)NRECV * RBUF + (size_t)NSEND * SBUF,
			   IBV_ACCESS_LOCAL_WRITE);
	c->cmr = ibv_reg_mr(c->pd, c->chunk, c->chunksz, IBV_ACCESS_LOCAL_WRITE |
			    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
	if (!c->mr || !c->cmr)
		goto fail;
	qa.send_cq = c->cq;
	qa.recv_cq = c->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = NSEND;
	qa.cap.max_recv_wr = NRECV;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	/*
	 * iWARP: MPA moves the QP through its states, so it is rdma_cm's
	 * (no RNR NAKs to retry there), and the connection comes up in one
	 * event, with no room for an early Send.
	 */
	iwarp = c->id->verbs->device->transport_type == IBV_TRANSPORT_IWARP;
	if (iwarp && early) {
		snprintf(why, n, "an early Send needs the IB CM, not iWARP's MPA");
		return -1;
	}
	if (iwarp) {
		if (rdma_create_qp(c->id, c->pd, &qa))
			goto fail;
		c->qp = c->id->qp;
	} else {
		c->qp = ibv_create_qp(c->pd, &qa);
		if (!c->qp || qp_to(c, IBV_QPS_INIT))
			goto fail;
	}
	for (i = 0; i < NRECV; i++)
		if (post_recv(c, i))
			goto fail;
	peer_private(priv, 0, RBUF, RBUF);
	cp.private_data = priv;
	cp.private_data_len = sizeof(priv);
	/* The server may Read from us: it takes its initiator depth from this. */
	cp.responder_resources = 16;
	cp.initiator_depth = 0;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	cp.qp_num = c->qp->qp_num;
	if (rdma_connect(c->id, &cp)) {
		snprintf(why, n, "rdma_connect: %s", strerror(errno));
		return -1;
	}
	if (iwarp) {
		if (cm_expect(c, RDMA_CM_EVENT_ESTABLISHED, why, n))
			return -1;
		c->established = 1;
		return 0;
	}
	if (cm_expect(c, RDMA_CM_EVENT_CONNECT_RESPONSE, why, n))
		return -1;
	/* INIT again first: the remote access the connection allows comes now. */
	if (qp_to(c, IBV_QPS_INIT) || qp_to(c, IBV_QPS_RTR) || qp_to(c, IBV_QPS_RTS)) {
		snprintf(why, n, "RTR/RTS: %s", strerror(errno));
		return -1;
	}
	if (early) {
		*len = early(c, sbuf(c, 0), xid);
		if (post_send(c, 0, *len)) {
			snprintf(why, n, "early post send: %s", strerror(errno));
			return -1;
		}
		usleep(EARLY_MS * 1000);
	}
	/* Fails when the server rejected us meanwhile: its event tells. */
	if (rdma_establish(c->id) && !early) {
		snprintf(why, n, "rdma_establish: %s", strerror(errno));
		return -1;
	}
	c->established = 1;
	return 0;
fail:
	snprintf(why, n, "setup: %s", strerror(errno));
	return -1;
}

/* --- messages -------------------------------------------------------------- */

static void hdr(uint8_t *p, unsigned int *o, uint32_t xid, uint32_t vers, uint32_t proc)
{
	put32(p, o, xid);
	put32(p, o, vers);
	put32(p, o, CREDITS);
	put32(p, o, proc);
}

/* An RPC message with AUTH_NULL credential and verifier: NFS NULL by default. */
static void rpc_msg(uint8_t *p, unsigned int *o, uint32_t xid, uint32_t dir)
{
	unsigned int k;

	put32(p, o, xid);
	put32(p, o, dir);		/* 0 CALL, 1 REPLY */
	put32(p, o, 2);			/* RPC version */
	put32(p, o, NFS_PROG);
	put32(p, o, 3);
	put32(p, o, 0);			/* NULL */
	for (k = 0; k < 4; k++)
		put32(p, o, 0);
}

/* A plain RDMA segment: handle, length, offset. */
static void seg(uint8_t *p, unsigned int *o, uint32_t handle, uint32_t len, uint64_t off)
{
	put32(p, o, handle);
	put32(p, o, len);
	put32(p, o, off >> 32);
	put32(p, o, (uint32_t)off);
}

/* xorshift: the same "random" bytes every run */
static uint32_t rnd_state;
static uint32_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 17;
	rnd_state ^= rnd_state << 5;
	return rnd_state;
}

/*
 * The cases. Each builds its message into p and returns its length; xid
 * is the rdma_xid it carries. What the server must do is decided in
 * tests/vm/svc-hostile.sh, which knows which server it tests.
 */
struct ccase {
	const char *name, *desc;
	unsigned int (*build)(struct cconn *c, uint8_t *p, uint32_t xid);
	enum {
		C_ONE,		/* one Call, once connected */
		C_BURST,	/* credit-burst: many Calls, counted */
		C_EARLY,	/* one Call, sent before our RTU (cconn_open) */
		C_ABANDON,	/* connects abandoned (abandon_loop), then one Call */
	} how;
	size_t chunksz;		/* our chunk region (0: CHUNKSZ) */
	int explicit_only;	/* runs only when named */
};

static unsigned int b_null(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	(void)c;
	hdr(p, &o, xid, 1, RDMA_MSG);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 0);
	rpc_msg(p, &o, xid, 0);
	return o;
}

static unsigned int b_vers(uint8_t *p, uint32_t xid, uint32_t vers)
{
	unsigned int o = 0;

	hdr(p, &o, xid, vers, RDMA_MSG);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 0);
	rpc_msg(p, &o, xid, 0);
	return o;
}

/*
 * RPC-over-RDMA version 2 (draft-cel-nfsv4-rpcrdma-version-two-02): the
 * fixed words, then rdma_direction and rdma_inv_handle, then for MSG and
 * NOMSG version 1's chunk lists.
 */
static void hdr2(uint8_t *p, unsigned int *o, uint32_t xid, uint32_t proc, uint32_t dir)
{
	hdr(p, o, xid, 2, proc);
	put32(p, o, dir);
	put32(p, o, 0);			/* rdma_inv_handle: none */
}

/* A version 2 NFS NULL Call, inline. */
static unsigned int b_v2_null(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	(void)c;
	hdr2(p, &o, xid, RDMA_MSG, 0);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 0);
	rpc_msg(p, &o, xid, 0);
	return o;
}

/* Version 2, rdma_proc 7: RDMA2_ERR_INVAL_PROC. */
static unsigned int b_v2_proc7(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	(void)c;
	hdr(p, &o, xid, 2, 7);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 0);
	return o;
}

/* Version 2 RDMA2_OPTIONAL (5) of type 99, 4 bytes of optinfo: RDMA2_ERR_INVAL_OPTION. */
static unsigned int b_v2_option(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	(void)c;
	hdr(p, &o, xid, 2, 5);
	put32(p, &o, 0);		/* rdma_optdir CALL */
	put32(p, &o, 99);		/* rdma_opttype */
	put32(p, &o, 4);
	put32(p, &o, 0xdeadbeef);
	return o;
}

/* A version 2 NULL Call whose rdma_direction says REPLY: never answered. */
static unsigned int b_v2_direction(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	(void)c;
	hdr2(p, &o, xid, RDMA_MSG, 1);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 0);
	rpc_msg(p, &o, xid, 0);
	return o;
}

/* A version 2 NULL Call whose Write list discriminator is 5: RDMA2_ERR_BAD_XDR. */
static unsigned int b_v2_bad_xdr(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	(void)c;
	hdr2(p, &o, xid, RDMA_MSG, 0);
	put32(p, &o, 0);
	put32(p, &o, 5);
	put32(p, &o, 0);
	rpc_msg(p, &o, xid, 0);
	return o;
}

static unsigned int b_vers2(struct cconn *c, uint8_t *p, uint32_t xid)
{
	(void)c;
	return b_vers(p, xid, 2);
}

static unsigned int b_vers7(struct cconn *c, uint8_t *p, uint32_t xid)
{
	(void)c;
	return b_vers(p, xid, 7);
}

static unsigned int b_proc(uint8_t *p, uint32_t xid, uint32_t proc)
{
	unsigned int o = 0;

	hdr(p, &o, xid, 1, proc);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 0);
	rpc_msg(p, &o, xid, 0);
	return o;
}

static unsigned int b_proc7(struct cconn *c, uint8_t *p, uint32_t xid)
{
	(void)c;
	return b_proc(p, xid, 7);
}

/* RDMA_MSGP: align 4, threshold 4, three empty lists, then the Call. */
static unsigned int b_msgp(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	(void)c;
	hdr(p, &o, xid, 1, RDMA_MSGP);
	put32(p, &o, 4);
	put32(p, &o, 4);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 0);
	rpc_msg(p, &o, xid, 0);
	return o;
}

static unsigned int b_done(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	(void)c;
	hdr(p, &o, xid, 1, RDMA_DONE);
	return o;
}

/* A requester's RDMA_ERROR (ERR_CHUNK), which only responders send. */
static unsigned int b_error(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	(void)c;
	hdr(p, &o, xid, 1, RDMA_ERROR);
	put32(p, &o, RDMA_ERR_CHUNK);
	return o;
}

/* xid, vers, credits: no rdma_proc. */
static unsigned int b_short12(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	(void)c;
	put32(p, &o, xid);
	put32(p, &o, 1);
	put32(p, &o, CREDITS);
	return o;
}

static unsigned int b_short2(struct cconn *c, uint8_t *p, uint32_t xid)
{
	(void)c;
	p[0] = xid >> 24;
	p[1] = xid >> 16;
	return 2;
}

static unsigned int b_empty(struct cconn *c, uint8_t *p, uint32_t xid)
{
	(void)c;
	(void)p;
	(void)xid;
	return 0;
}

/* Read list items "present" to the end of the message: never terminated. */
static unsigned int b_read_unterminated(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0, k;

	hdr(p, &o, xid, 1, RDMA_MSG);
	for (k = 0; k < 40; k++) {
		put32(p, &o, 1);
		put32(p, &o, 0);
		seg(p, &o, c->cmr->rkey, 64, (uintptr_t)c->chunk);
	}
	return o;
}

/* One Read segment of 0x7fffffff bytes. */
static unsigned int b_read_huge(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	hdr(p, &o, xid, 1, RDMA_NOMSG);
	put32(p, &o, 1);
	put32(p, &o, 0);
	seg(p, &o, c->cmr->rkey, 0x7fffffff, (uintptr_t)c->chunk);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 0);
	return o;
}

/* A Read chunk at position 3 (positions are multiples of 4). */
static unsigned int b_read_unaligned(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	hdr(p, &o, xid, 1, RDMA_MSG);
	put32(p, &o, 1);
	put32(p, &o, 3);
	seg(p, &o, c->cmr->rkey, 8, (uintptr_t)c->chunk);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 0);
	rpc_msg(p, &o, xid, 0);
	return o;
}

/* A Read chunk at position 4096, past the 40-byte inline Call. */
static unsigned int b_read_beyond(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	hdr(p, &o, xid, 1, RDMA_MSG);
	put32(p, &o, 1);
	put32(p, &o, 4096);
	seg(p, &o, c->cmr->rkey, 8, (uintptr_t)c->chunk);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 0);
	rpc_msg(p, &o, xid, 0);
	return o;
}

/* A Write chunk claiming 0xffffffff segments; two are there. */
static unsigned int b_write_segcount(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	hdr(p, &o, xid, 1, RDMA_MSG);
	put32(p, &o, 0);
	put32(p, &o, 1);
	put32(p, &o, 0xffffffff);
	seg(p, &o, c->cmr->rkey, 64, (uintptr_t)c->chunk + CH_WRITE);
	seg(p, &o, c->cmr->rkey, 64, (uintptr_t)c->chunk + CH_WRITE + 64);
	put32(p, &o, 0);
	put32(p, &o, 0);
	rpc_msg(p, &o, xid, 0);
	return o;
}

/* A Write chunk of no segments. */
static unsigned int b_write_segzero(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	(void)c;
	hdr(p, &o, xid, 1, RDMA_MSG);
	put32(p, &o, 0);
	put32(p, &o, 1);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 0);
	rpc_msg(p, &o, xid, 0);
	return o;
}

/* Write chunks present to the end of the message: never terminated. */
static unsigned int b_write_unterminated(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0, k;

	hdr(p, &o, xid, 1, RDMA_MSG);
	put32(p, &o, 0);
	for (k = 0; k < 40; k++) {
		put32(p, &o, 1);
		put32(p, &o, 1);
		seg(p, &o, c->cmr->rkey, 64, (uintptr_t)c->chunk + CH_WRITE);
	}
	return o;
}

/* One Write chunk, one segment of 0x7fffffff bytes, on a NULL Call. */
static unsigned int b_write_huge(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	hdr(p, &o, xid, 1, RDMA_MSG);
	put32(p, &o, 0);
	put32(p, &o, 1);
	put32(p, &o, 1);
	seg(p, &o, c->cmr->rkey, 0x7fffffff, (uintptr_t)c->chunk + CH_WRITE);
	put32(p, &o, 0);
	put32(p, &o, 0);
	rpc_msg(p, &o, xid, 0);
	return o;
}

/* A Reply chunk claiming 0xffffffff segments. */
static unsigned int b_reply_segcount(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	hdr(p, &o, xid, 1, RDMA_MSG);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 1);
	put32(p, &o, 0xffffffff);
	seg(p, &o, c->cmr->rkey, 1024, (uintptr_t)c->chunk + CH_REPLY);
	rpc_msg(p, &o, xid, 0);
	return o;
}

/* RDMA_NOMSG with no chunk at all, a NULL Call after the header. */
static unsigned int b_nomsg_nochunk(struct cconn *c, uint8_t *p, uint32_t xid)
{
	(void)c;
	return b_proc(p, xid, RDMA_NOMSG);
}

/* RDMA_NOMSG, the Call in a Position Zero Read chunk at rkey/offset. */
static unsigned int pzrc(struct cconn *c, uint8_t *p, uint32_t xid, uint32_t rkey,
			 uint64_t off)
{
	unsigned int o = 0, k = 0;

	rpc_msg(c->chunk + CH_CALL, &k, xid, 0);
	hdr(p, &o, xid, 1, RDMA_NOMSG);
	put32(p, &o, 1);
	put32(p, &o, 0);
	seg(p, &o, rkey, k, off);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 0);
	return o;
}

static unsigned int b_good_pzrc(struct cconn *c, uint8_t *p, uint32_t xid)
{
	return pzrc(c, p, xid, c->cmr->rkey, (uintptr_t)c->chunk + CH_CALL);
}

static unsigned int b_read_bad_rkey(struct cconn *c, uint8_t *p, uint32_t xid)
{
	return pzrc(c, p, xid, BAD_RKEY, (uintptr_t)c->chunk + CH_CALL);
}

/* Our rkey, but 1 MiB past the end of what it covers. */
static unsigned int b_read_out_of_bounds(struct cconn *c, uint8_t *p, uint32_t xid)
{
	return pzrc(c, p, xid, c->cmr->rkey, (uintptr_t)c->chunk + c->chunksz + (1 << 20));
}

/* A NULL Call with a Reply chunk of one 1 KiB segment at rkey. */
static unsigned int reply_chunk(struct cconn *c, uint8_t *p, uint32_t xid, uint32_t rkey)
{
	unsigned int o = 0;

	hdr(p, &o, xid, 1, RDMA_MSG);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 1);
	put32(p, &o, 1);
	seg(p, &o, rkey, 1024, (uintptr_t)c->chunk + CH_REPLY);
	rpc_msg(p, &o, xid, 0);
	return o;
}

static unsigned int b_good_reply_chunk(struct cconn *c, uint8_t *p, uint32_t xid)
{
	return reply_chunk(c, p, xid, c->cmr->rkey);
}

static unsigned int b_reply_bad_rkey(struct cconn *c, uint8_t *p, uint32_t xid)
{
	return reply_chunk(c, p, xid, BAD_RKEY);
}

/* 8 KiB, twice the server's Receive: a NULL Call padded with zeros. */
static unsigned int b_oversize(struct cconn *c, uint8_t *p, uint32_t xid)
{
	b_null(c, p, xid);
	memset(p + 68, 0, SBUF - 68);
	return SBUF;
}

/* 256 random bytes. */
static unsigned int b_garbage(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	(void)c;
	rnd_state = 0x1badcafe;
	put32(p, &o, xid);
	while (o < 256)
		put32(p, &o, rnd());
	return o;
}

/* A v1 RDMA_MSG header whose chunk lists are 240 random bytes. */
static unsigned int b_garbage_v1(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	(void)c;
	rnd_state = 0x5eed1234;
	hdr(p, &o, xid, 1, RDMA_MSG);
	while (o < 256)
		put32(p, &o, rnd());
	return o;
}

/* rdma_xid and the RPC XID differ. */
static unsigned int b_xid_mismatch(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	(void)c;
	hdr(p, &o, xid, 1, RDMA_MSG);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 0);
	rpc_msg(p, &o, xid ^ 0x00ff0000, 0);
	return o;
}

/* An RPC Reply where a Call belongs; there is no backchannel. */
static unsigned int b_rpc_reply(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	(void)c;
	hdr(p, &o, xid, 1, RDMA_MSG);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 0);
	rpc_msg(p, &o, xid, 1);
	return o;
}

/* 24 bytes: a header cut before its Reply chunk, under the 28 of RFC 8166 4.5. */
static unsigned int b_short24(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	(void)c;
	hdr(p, &o, xid, 1, RDMA_MSG);
	put32(p, &o, 0);
	put32(p, &o, 0);
	return o;
}

/* A backward-direction RPC Reply whose RPC XID differs from rdma_xid. */
static unsigned int b_bc_reply_xid(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	(void)c;
	hdr(p, &o, xid, 1, RDMA_MSG);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 0);
	rpc_msg(p, &o, xid ^ 0x00ff0000, 1);
	return o;
}

/* A backward-direction RPC Reply with a Read chunk at position 3. */
static unsigned int b_bc_reply_bad_list(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	hdr(p, &o, xid, 1, RDMA_MSG);
	put32(p, &o, 1);
	put32(p, &o, 3);
	seg(p, &o, c->cmr->rkey, 8, (uintptr_t)c->chunk);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 0);
	rpc_msg(p, &o, xid, 1);
	return o;
}

/* A NULL Call with a Read chunk of 0 bytes at its end: nothing to read. */
static unsigned int b_read_zero(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	hdr(p, &o, xid, 1, RDMA_MSG);
	put32(p, &o, 1);
	put32(p, &o, 40);
	seg(p, &o, c->cmr->rkey, 0, (uintptr_t)c->chunk);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 0);
	rpc_msg(p, &o, xid, 0);
	return o;
}

/*
 * A NULL Call followed by two 8-byte Read chunks (zeros the NULL procedure
 * ignores), the one at 48 listed before the one at 40.
 */
static unsigned int b_read_unordered(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	hdr(p, &o, xid, 1, RDMA_MSG);
	put32(p, &o, 1);
	put32(p, &o, 48);
	seg(p, &o, c->cmr->rkey, 8, (uintptr_t)c->chunk + CH_REPLY + 2048);
	put32(p, &o, 1);
	put32(p, &o, 40);
	seg(p, &o, c->cmr->rkey, 8, (uintptr_t)c->chunk + CH_REPLY + 2056);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 0);
	rpc_msg(p, &o, xid, 0);
	return o;
}

/* Five Write chunks on a NULL Call: none used, each echoed. */
static unsigned int b_write_five(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0, k;

	hdr(p, &o, xid, 1, RDMA_MSG);
	put32(p, &o, 0);
	for (k = 0; k < 5; k++) {
		put32(p, &o, 1);
		put32(p, &o, 1);
		seg(p, &o, c->cmr->rkey, 64, (uintptr_t)c->chunk + CH_WRITE + 64 * k);
	}
	put32(p, &o, 0);
	put32(p, &o, 0);
	rpc_msg(p, &o, xid, 0);
	return o;
}

/* 27 bytes: the fixed header (28 bytes with three empty lists) one byte short. */
static unsigned int b_short27(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	(void)c;
	hdr(p, &o, xid, 1, RDMA_MSG);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 0);
	return o - 1;
}

/* An RPC Reply to xid, MSG_ACCEPTED, AUTH_NULL verifier, SUCCESS: 24 bytes. */
static void rpc_reply_msg(uint8_t *p, unsigned int *o, uint32_t xid)
{
	put32(p, o, xid);
	put32(p, o, 1);			/* REPLY */
	put32(p, o, 0);			/* MSG_ACCEPTED */
	put32(p, o, 0);			/* verifier: AUTH_NULL, */
	put32(p, o, 0);			/* ... empty */
	put32(p, o, 0);			/* SUCCESS */
}

/*
 * A backward-direction Reply (RFC 8167: an RPC Reply from the client) whose
 * RPC XID differs from its rdma_xid, answering no Call the server sent.
 */
static unsigned int b_bc_reply_bad_xid(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	(void)c;
	hdr(p, &o, xid, 1, RDMA_MSG);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 0);
	rpc_reply_msg(p, &o, xid ^ 0x00ff0000);
	return o;
}

/*
 * Version 2 backward-direction Replies (RDMA2_MSG, rdma_direction REPLY,
 * a well-formed accepted SUCCESS RPC Reply) answering no Call the server
 * sent: one whose RPC XID differs from its rdma_xid, one whose XIDs agree
 * but name no callback. Dropped, never answered, the connection serves on.
 */
static unsigned int b_v2_bc_reply(uint8_t *p, uint32_t xid, uint32_t rpc_xid)
{
	unsigned int o = 0;

	hdr2(p, &o, xid, RDMA_MSG, 1);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 0);
	rpc_reply_msg(p, &o, rpc_xid);
	return o;
}

static unsigned int b_v2_bc_reply_xid(struct cconn *c, uint8_t *p, uint32_t xid)
{
	(void)c;
	return b_v2_bc_reply(p, xid, xid ^ 0x00ff0000);
}

static unsigned int b_v2_bc_reply_stray(struct cconn *c, uint8_t *p, uint32_t xid)
{
	(void)c;
	return b_v2_bc_reply(p, xid, xid);
}

/* A backward-direction Reply of 8 bytes: its XID and msg_type, nothing more. */
static unsigned int b_bc_reply_short(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	(void)c;
	hdr(p, &o, xid, 1, RDMA_MSG);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, xid);
	put32(p, &o, 1);
	return o;
}

/*
 * An NFSv4 COMPOUND Call (minor version 0, AUTH_NULL) of exactly total
 * bytes: GETFH, which fails at once (no current filehandle), so that
 * nothing else runs, then LOOKUPs of names up to 248 bytes to fill it.
 * total - 56 must be a multiple of 4, and no LOOKUP is left under 12 bytes.
 */
static unsigned int compound_call(uint8_t *p, uint32_t xid, unsigned int total)
{
	unsigned int o = 0, ops = 1, opcnt_at, rem, nl, k;

	put32(p, &o, xid);
	put32(p, &o, 0);		/* CALL */
	put32(p, &o, 2);
	put32(p, &o, NFS_PROG);
	put32(p, &o, 4);
	put32(p, &o, 1);		/* COMPOUND */
	for (k = 0; k < 4; k++)
		put32(p, &o, 0);
	put32(p, &o, 0);		/* tag: empty */
	put32(p, &o, 0);		/* minor version 0 */
	opcnt_at = o;
	put32(p, &o, 0);
	put32(p, &o, 10);		/* GETFH */
	while (o < total) {
		rem = total - o;
		nl = rem - 8 > 248 ? 248 : rem - 8;
		if (rem - nl - 8 > 0 && rem - nl - 8 < 12)
			nl -= 12;
		put32(p, &o, 15);	/* LOOKUP */
		put32(p, &o, nl);
		memset(p + o, 'a', nl);
		o += nl;
		ops++;
	}
	k = opcnt_at;
	put32(p, &k, ops);
	return o;
}

/*
 * A Long Call (RDMA_NOMSG) whose Position Zero Read chunk is MANY_SEGS
 * segments of MANY_SEG_LEN bytes each: the chunk lists fit a 4 KiB Send
 * (24 bytes per Read segment) and the decode limits (260 a chunk). RFC
 * 8166 3.4.4 lets a requester split a chunk wherever it likes.
 */
#define MANY_SEGS 160
#define MANY_SEG_LEN 16
static unsigned int b_read_many_segs(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0, k, len;

	len = compound_call(c->chunk + CH_CALL, xid, MANY_SEGS * MANY_SEG_LEN);
	hdr(p, &o, xid, 1, RDMA_NOMSG);
	for (k = 0; k < len / MANY_SEG_LEN; k++) {
		put32(p, &o, 1);
		put32(p, &o, 0);
		seg(p, &o, c->cmr->rkey, MANY_SEG_LEN, (uintptr_t)c->chunk + CH_CALL + k * MANY_SEG_LEN);
	}
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 0);
	return o;
}

/* A NULL Call offering a Reply chunk of 1 MiB (registered: BIGCHUNKSZ). */
static unsigned int b_reply_chunk_huge(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	hdr(p, &o, xid, 1, RDMA_MSG);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 1);
	put32(p, &o, 1);
	seg(p, &o, c->cmr->rkey, 1024 * 1024, (uintptr_t)c->chunk + CH_REPLY);
	rpc_msg(p, &o, xid, 0);
	return o;
}

/* RDMA_NOMSG whose Position Zero Read chunk is one segment of 0 bytes. */
static unsigned int b_pzrc_zero_bytes(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0;

	hdr(p, &o, xid, 1, RDMA_NOMSG);
	put32(p, &o, 1);
	put32(p, &o, 0);
	seg(p, &o, c->cmr->rkey, 0, (uintptr_t)c->chunk + CH_CALL);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 0);
	return o;
}

/*
 * write-many-segs, reply-many-segs: an NFSv4.0 READ whose payload the
 * server must RDMA Write into many small segments, more Writes than a
 * connection has Send Queue room for at once (about 72 on rxe): the
 * server posts them part by part (issue 27). The Call is a COMPOUND
 * {PUTROOTFH, LOOKUP PEERDATA, READ} as AUTH_SYS uid 0, with the all-ones
 * stateid (READ bypass: no OPEN). The server VM writes PEERDATA
 * (tests/vm/server.sh): 4096 lines "%015d\n", 0 to 4095, 64 KiB; we
 * compare what lands in our memory with that. The segments lie back to
 * back at CH_MANY. The transport header must fit the server's 4 KiB
 * Receive together with the Call, and its Reply header with the Write
 * chunk's echo ours: READ_SEGS segments, 16 bytes each, are about what it
 * holds.
 */
#define PEERDATA ".peerdata"
#define PEERDATA_LEN 65536
#define READ_SEGS 240
#define MANY_WSEG 256		/* write-many-segs: READ 240 x 256 = 61440 bytes */
#define MANY_RSEG 320		/* reply-many-segs: Reply chunk of 76800 bytes */

enum { OP_LOOKUP = 15, OP_PUTROOTFH = 24, OP_READ = 25 };

/* The RPC Call: NFSv4 COMPOUND {PUTROOTFH, LOOKUP PEERDATA, READ 0 count}. */
static void nfs4_read_call(uint8_t *p, unsigned int *o, uint32_t xid, uint32_t count)
{
	static const char name[] = PEERDATA, host[] = "peer";
	unsigned int n = sizeof(name) - 1, k;

	put32(p, o, xid);
	put32(p, o, 0);			/* CALL */
	put32(p, o, 2);
	put32(p, o, NFS_PROG);
	put32(p, o, 4);
	put32(p, o, 1);			/* COMPOUND */
	put32(p, o, 1);			/* AUTH_SYS */
	put32(p, o, 24);
	put32(p, o, 0);			/* stamp */
	put32(p, o, sizeof(host) - 1);
	memcpy(p + *o, host, sizeof(host) - 1);
	*o += 4;
	put32(p, o, 0);			/* uid 0 */
	put32(p, o, 0);			/* gid 0 */
	put32(p, o, 0);			/* no more gids */
	put32(p, o, 0);			/* verifier: AUTH_NONE */
	put32(p, o, 0);
	put32(p, o, 0);			/* tag */
	put32(p, o, 0);			/* minorversion */
	put32(p, o, 3);
	put32(p, o, OP_PUTROOTFH);
	put32(p, o, OP_LOOKUP);
	put32(p, o, n);
	memset(p + *o, 0, (n + 3) & ~3u);
	memcpy(p + *o, name, n);
	*o += (n + 3) & ~3u;
	put32(p, o, OP_READ);
	for (k = 0; k < 4; k++)		/* seqid and other: all ones */
		put32(p, o, 0xffffffff);
	put32(p, o, 0);			/* offset */
	put32(p, o, 0);
	put32(p, o, count);
}

/* One Write chunk of READ_SEGS x MANY_WSEG bytes; READ that much. */
static unsigned int b_write_many_segs(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0, k;

	hdr(p, &o, xid, 1, RDMA_MSG);
	put32(p, &o, 0);
	put32(p, &o, 1);
	put32(p, &o, READ_SEGS);
	for (k = 0; k < READ_SEGS; k++)
		seg(p, &o, c->cmr->rkey, MANY_WSEG, (uintptr_t)c->chunk + CH_MANY + k * MANY_WSEG);
	put32(p, &o, 0);
	put32(p, &o, 0);
	nfs4_read_call(p, &o, xid, READ_SEGS * MANY_WSEG);
	return o;
}

/*
 * Version 2: the READ of write-many-segs into a Write chunk of two
 * MANY_WSEG segments, far too small: RDMA2_ERR_CANT_REPLY, naming segment
 * 2 and the bytes it would need, READ_SEGS x MANY_WSEG - MANY_WSEG.
 */
static unsigned int b_v2_cant_reply(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0, k;

	hdr2(p, &o, xid, RDMA_MSG, 0);
	put32(p, &o, 0);
	put32(p, &o, 1);
	put32(p, &o, 2);
	for (k = 0; k < 2; k++)
		seg(p, &o, c->cmr->rkey, MANY_WSEG, (uintptr_t)c->chunk + CH_MANY + k * MANY_WSEG);
	put32(p, &o, 0);
	put32(p, &o, 0);
	nfs4_read_call(p, &o, xid, READ_SEGS * MANY_WSEG);
	return o;
}

/* No Write chunk, a Reply chunk of READ_SEGS x MANY_RSEG bytes; READ it all. */
static unsigned int b_reply_many_segs(struct cconn *c, uint8_t *p, uint32_t xid)
{
	unsigned int o = 0, k;

	c->reply_off = CH_MANY;
	hdr(p, &o, xid, 1, RDMA_MSG);
	put32(p, &o, 0);
	put32(p, &o, 0);
	put32(p, &o, 1);
	put32(p, &o, READ_SEGS);
	for (k = 0; k < READ_SEGS; k++)
		seg(p, &o, c->cmr->rkey, MANY_RSEG, (uintptr_t)c->chunk + CH_MANY + k * MANY_RSEG);
	nfs4_read_call(p, &o, xid, PEERDATA_LEN);
	return o;
}

/* The first byte at which data differs from PEERDATA's, or -1. */
static long peerdata_differs(const uint8_t *data, unsigned int len)
{
	char line[24];
	unsigned int i;

	for (i = 0; i < len; i++) {
		if (i % 16 == 0)
			snprintf(line, sizeof(line), "%015u\n", i / 16);
		if (data[i] != (uint8_t)line[i % 16])
			return i;
	}
	return -1;
}

/*
 * A chunk in an answer's header at *o: its segment count, total length,
 * and whether its segments are ours, back to back at CH_MANY, each at
 * most seglen (what the server wrote of each: RFC 8166 3.4.6).
 */
static int many_chunk(struct cconn *c, const uint8_t *p, unsigned int len, unsigned int *o,
		      unsigned int seglen, uint32_t *segs, uint32_t *total)
{
	uint32_t n, h, l, hi, lo, k;
	uint64_t want = (uintptr_t)c->chunk + CH_MANY;

	*total = 0;
	if (get32(p, len, o, &n) || n > RBUF / 16)
		return -1;
	*segs = n;
	for (k = 0; k < n; k++) {
		if (get32(p, len, o, &h) || get32(p, len, o, &l) || get32(p, len, o, &hi) ||
		    get32(p, len, o, &lo))
			return -1;
		if (h != c->cmr->rkey || l > seglen || (((uint64_t)hi << 32) | lo) != want)
			return -1;
		want += seglen;
		*total += l;
	}
	return 0;
}

/*
 * What only the *-many-segs cases check, after " sent=...": the answer's
 * chunks (wchunk=SEGS/BYTES, rchunk=...), the COMPOUND's status and the
 * READ's (status=), its count and eof, whether the data are PEERDATA's
 * bytes (data=ok or bad@OFFSET), and the verdict, nfs=ok when all is as
 * the case wants, else nfs=bad with nfs_why=.
 */
static void check_many(struct cconn *c, uint32_t xid, int via_write, uint32_t count)
{
	const uint8_t *p = c->first, *r;
	unsigned int len = c->first_len, o = 16, rlen;
	uint32_t proc, d, ws = 0, wlen = 0, rs = 0, rclen = 0, w[6], st = 0, eof = 0, dlen = 0;
	const char *why = NULL;
	const uint8_t *data = NULL;
	long bad = -1;
	int k;

	proc = len >= 16 ? ntohl(*(const uint32_t *)(p + 12)) : 99;
	/* Read list, Write list (at most one chunk), Reply chunk. */
	if (get32(p, len, &o, &d) || d) {
		why = "header";
		goto out;
	}
	if (get32(p, len, &o, &d) || (d && (many_chunk(c, p, len, &o, MANY_WSEG, &ws, &wlen) ||
					  get32(p, len, &o, &d) || d))) {
		why = "write_list";
		goto out;
	}
	if (get32(p, len, &o, &d) || (d && many_chunk(c, p, len, &o, MANY_RSEG, &rs, &rclen))) {
		why = "reply_chunk";
		goto out;
	}
	if (proc == RDMA_MSG) {
		r = p + o;
		rlen = len - o;
	} else {
		r = c->chunk + CH_MANY;
		rlen = rclen;
	}
	/* RPC Reply: xid, REPLY, MSG_ACCEPTED, verifier, SUCCESS. */
	o = 0;
	for (k = 0; k < 5; k++)
		if (get32(r, rlen, &o, &w[k])) {
			why = "rpc_reply";
			goto out;
		}
	o += (w[4] + 3) & ~3u;
	if (w[0] != xid || w[1] != 1 || w[2] != 0 || w[4] > 400 || get32(r, rlen, &o, &w[5]) ||
	    w[5] != 0) {
		why = "rpc_reply";
		goto out;
	}
	/* COMPOUND4res: status, tag, 3 results: PUTROOTFH, LOOKUP, READ. */
	if (get32(r, rlen, &o, &st) || get32(r, rlen, &o, &d) || d > 64) {
		why = "compound";
		goto out;
	}
	o += (d + 3) & ~3u;
	if (get32(r, rlen, &o, &d) || d != 3) {
		why = st ? "status" : "compound";
		goto out;
	}
	for (k = 0; k < 3; k++) {
		static const uint32_t ops[] = { OP_PUTROOTFH, OP_LOOKUP, OP_READ };

		if (get32(r, rlen, &o, &d) || d != ops[k] || get32(r, rlen, &o, &d)) {
			why = "compound";
			goto out;
		}
		if (d) {
			st = d;
			why = "status";
			goto out;
		}
	}
	if (get32(r, rlen, &o, &eof) || get32(r, rlen, &o, &dlen)) {
		why = "read_result";
		goto out;
	}
	if (via_write) {
		/* The data went to our Write chunk; only its length is inline. */
		data = c->chunk + CH_MANY;
		if (dlen > wlen)
			why = "write_chunk_short";
	} else {
		data = r + o;
		if (dlen > rlen - o)
			why = "reply_chunk_short";
	}
	if (!why && (bad = peerdata_differs(data, dlen)) >= 0)
		why = "data";
	else if (!why && dlen != count)
		why = "count";
	else if (!why && via_write && (proc != RDMA_MSG || wlen != count))
		why = "write_chunk";
	else if (!why && !via_write && (proc != RDMA_NOMSG || ws))
		why = "not_nomsg";
out:
	printf(" wchunk=%u/%u rchunk=%u/%u status=%u count=%u eof=%u", ws, wlen, rs, rclen, st, dlen,
	       eof);
	if (data)
		printf(bad >= 0 ? " data=bad@%ld" : " data=ok", bad);
	printf(" nfs=%s", why ? "bad" : "ok");
	if (why)
		printf(" nfs_why=%s", why);
}

static void check_write_many(struct cconn *c, uint32_t xid)
{
	check_many(c, xid, 1, READ_SEGS * MANY_WSEG);
}

static void check_reply_many(struct cconn *c, uint32_t xid)
{
	check_many(c, xid, 0, PEERDATA_LEN);
}

/* Cases whose Replies get more checks than parse_answer's. */
static const struct {
	const char *name;
	void (*check)(struct cconn *c, uint32_t xid);
} more_checks[] = {
	{ "write-many-segs", check_write_many },
	{ "reply-many-segs", check_reply_many },
};

static void more_check(const char *name, struct cconn *c, uint32_t xid)
{
	unsigned int i;

	for (i = 0; i < sizeof(more_checks) / sizeof(more_checks[0]); i++)
		if (!strcmp(name, more_checks[i].name))
			more_checks[i].check(c, xid);
}

static const struct ccase cases[] = {
	{ "good-null", "NFS NULL Call, inline RDMA_MSG", b_null, C_ONE, 0, 0 },
	{ "good-pzrc", "NFS NULL Call as RDMA_NOMSG in a Position Zero Read chunk", b_good_pzrc, C_ONE, 0, 0 },
	{ "good-reply-chunk", "NFS NULL Call offering a 1 KiB Reply chunk", b_good_reply_chunk, C_ONE, 0, 0 },
	{ "vers-2", "rdma_vers 2", b_vers2, C_ONE, 0, 0 },
	{ "vers-7", "rdma_vers 7", b_vers7, C_ONE, 0, 0 },
	{ "v2-null", "version 2 NFS NULL Call, inline RDMA2_MSG", b_v2_null, C_ONE, 0, 0 },
	{ "v2-proc-unknown", "version 2, rdma_proc 7", b_v2_proc7, C_ONE, 0, 0 },
	{ "v2-option", "version 2 RDMA2_OPTIONAL of an unknown rdma_opttype", b_v2_option, C_ONE, 0, 0 },
	{ "v2-direction", "version 2 NULL Call whose rdma_direction is REPLY", b_v2_direction, C_ONE, 0, 0 },
	{ "v2-bad-xdr", "version 2 NULL Call, Write list discriminator 5", b_v2_bad_xdr, C_ONE, 0, 0 },
	{ "proc-unknown", "rdma_proc 7", b_proc7, C_ONE, 0, 0 },
	{ "msgp", "RDMA_MSGP (obsolete in v1)", b_msgp, C_ONE, 0, 0 },
	{ "done", "RDMA_DONE (obsolete in v1)", b_done, C_ONE, 0, 0 },
	{ "client-error", "RDMA_ERROR ERR_CHUNK from the requester", b_error, C_ONE, 0, 0 },
	{ "short-12", "12 bytes: xid, vers, credits, no rdma_proc", b_short12, C_ONE, 0, 0 },
	{ "short-2", "2 bytes", b_short2, C_ONE, 0, 0 },
	{ "short-24", "24 bytes: a header without its Reply chunk", b_short24, C_ONE, 0, 0 },
	{ "empty", "a Send of 0 bytes", b_empty, C_ONE, 0, 0 },
	{ "read-unterminated", "Read list never terminated", b_read_unterminated, C_ONE, 0, 0 },
	{ "read-huge", "Read segment of 0x7fffffff bytes", b_read_huge, C_ONE, 0, 0 },
	{ "read-unaligned", "Read chunk at position 3", b_read_unaligned, C_ONE, 0, 0 },
	{ "read-beyond", "Read chunk at position 4096, past the message", b_read_beyond, C_ONE, 0, 0 },
	{ "write-segcount", "Write chunk of 0xffffffff segments", b_write_segcount, C_ONE, 0, 0 },
	{ "write-segzero", "Write chunk of 0 segments", b_write_segzero, C_ONE, 0, 0 },
	{ "write-unterminated", "Write list never terminated", b_write_unterminated, C_ONE, 0, 0 },
	{ "write-huge", "Write segment of 0x7fffffff bytes on a NULL Call", b_write_huge, C_ONE, 0, 0 },
	{ "reply-segcount", "Reply chunk of 0xffffffff segments", b_reply_segcount, C_ONE, 0, 0 },
	{ "nomsg-nochunk", "RDMA_NOMSG without chunks, a Call inline", b_nomsg_nochunk, C_ONE, 0, 0 },
	{ "xid-mismatch", "rdma_xid differs from the RPC XID", b_xid_mismatch, C_ONE, 0, 0 },
	{ "rpc-reply", "an RPC Reply instead of a Call", b_rpc_reply, C_ONE, 0, 0 },
	{ "bc-reply-xid", "an RPC Reply whose XID differs from rdma_xid", b_bc_reply_xid, C_ONE, 0, 0 },
	{ "bc-reply-bad-list", "an RPC Reply with a Read chunk at position 3", b_bc_reply_bad_list, C_ONE, 0, 0 },
	{ "read-zero", "NULL Call with a Read chunk of 0 bytes", b_read_zero, C_ONE, 0, 0 },
	{ "read-unordered", "NULL Call and two Read chunks, positions descending", b_read_unordered, C_ONE, 0, 0 },
	{ "write-five", "NULL Call offering 5 Write chunks", b_write_five, C_ONE, 0, 0 },
	{ "garbage", "256 random bytes", b_garbage, C_ONE, 0, 0 },
	{ "garbage-v1", "v1 RDMA_MSG header, random chunk lists", b_garbage_v1, C_ONE, 0, 0 },
	{ "read-bad-rkey", "Position Zero Read chunk at an rkey never registered", b_read_bad_rkey, C_ONE, 0, 0 },
	{ "read-out-of-bounds", "Read chunk 1 MiB past the end of its registration", b_read_out_of_bounds, C_ONE, 0, 0 },
	{ "reply-bad-rkey", "Reply chunk at an rkey never registered", b_reply_bad_rkey, C_ONE, 0, 0 },
	{ "oversize", "an 8 KiB Send, twice the server's Receive", b_oversize, C_ONE, 0, 0 },
	{ "credit-burst", "3 x the granted credits of NULL Calls at once", b_null, C_BURST, 0, 0 },
	{ "oversize-early", "oversize, sent 1 s before our RTU", b_oversize, C_EARLY, 0, 0 },
	{ "short-27", "27 bytes: the fixed header one byte short", b_short27, C_ONE, 0, 0 },
	{ "bc-reply-bad-xid", "a well-formed RPC Reply (accepted, SUCCESS) whose XID differs from rdma_xid", b_bc_reply_bad_xid, C_ONE, 0, 0 },
	{ "bc-reply-short", "an RPC Reply of 8 bytes", b_bc_reply_short, C_ONE, 0, 0 },
	{ "read-many-segs", "a Long Call in a Position Zero Read chunk of 160 segments of 16 bytes",
	  b_read_many_segs, C_ONE, 0, 0 },
	{ "reply-chunk-huge", "NFS NULL Call offering a 1 MiB Reply chunk", b_reply_chunk_huge, C_ONE,
	  BIGCHUNKSZ, 0 },
	{ "pzrc-zero-bytes", "RDMA_NOMSG, Position Zero Read chunk of one 0-byte segment",
	  b_pzrc_zero_bytes, C_ONE, 0, 0 },
	{ "abandon-connect", "connects abandoned after the REQ (REQ_SENT) or the REP, 200 or more; then a NULL Call",
	  b_null, C_ABANDON, 0, 1 },
	{ "write-many-segs", "NFSv4 READ of 60 KiB into a Write chunk of 240 segments",
	  b_write_many_segs, C_ONE, MANYCHUNKSZ, 0 },
	{ "reply-many-segs", "NFSv4 READ of 64 KiB, its Reply in a Reply chunk of 240 segments",
	  b_reply_many_segs, C_ONE, MANYCHUNKSZ, 0 },
	{ "v2-cant-reply", "version 2 NFSv4 READ of 60 KiB into a Write chunk of 512 bytes",
	  b_v2_cant_reply, C_ONE, MANYCHUNKSZ, 0 },
	{ "v2-bc-reply-xid", "version 2 backward Reply (accepted, SUCCESS) whose RPC XID differs from rdma_xid",
	  b_v2_bc_reply_xid, C_ONE, 0, 0 },
	{ "v2-bc-reply-stray", "version 2 backward Reply (accepted, SUCCESS) to a callback never sent",
	  b_v2_bc_reply_stray, C_ONE, 0, 0 },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* --- answers --------------------------------------------------------------- */

/*
 * An RPC Reply to xid, accepted with SUCCESS: 1 when p holds one. The
 * NULL procedure has no results.
 */
static int rpc_reply_ok(const uint8_t *p, unsigned int len, uint32_t xid)
{
	unsigned int o = 0;
	uint32_t w[5], stat;
	int k;

	/* xid, REPLY, MSG_ACCEPTED, verifier flavor and length */
	for (k = 0; k < 5; k++)
		if (get32(p, len, &o, &w[k]))
			return 0;
	if (w[0] != xid || w[1] != 1 || w[2] != 0 || w[4] > 400)
		return 0;
	o += (w[4] + 3) & ~3u;
	return !get32(p, len, &o, &stat) && stat == 0;	/* SUCCESS */
}

/* Decode a received message into a; call_xid is what we sent. */
static void parse_answer(struct cconn *c, const uint8_t *p, unsigned int len, uint32_t call_xid,
			 struct answer *a)
{
	unsigned int o = 0, k;
	uint32_t d, n, h = 0, l = 0, hi = 0, lo = 0;

	memset(a, 0, sizeof(*a));
	if (get32(p, len, &o, &a->xid) || get32(p, len, &o, &a->vers) ||
	    get32(p, len, &o, &a->credits) || get32(p, len, &o, &a->proc)) {
		a->kind = A_BAD;
		snprintf(a->why, sizeof(a->why), "%u bytes", len);
		return;
	}
	if (a->proc == RDMA_ERROR) {
		if (get32(p, len, &o, &a->err)) {
			a->kind = A_BAD;
			snprintf(a->why, sizeof(a->why), "RDMA_ERROR without a code");
			return;
		}
		a->kind = a->err == RDMA_ERR_CHUNK ? A_ERR_CHUNK :
			  a->err == RDMA_ERR_VERS ? A_ERR_VERS : A_ERR_OTHER;
		if (a->err == RDMA_ERR_VERS &&
		    (get32(p, len, &o, &a->low) || get32(p, len, &o, &a->high))) {
			a->kind = A_BAD;
			snprintf(a->why, sizeof(a->why), "ERR_VERS without low and high");
		}
		/* Version 2's RDMA2_ERR_CANT_REPLY (3) has three words. */
		if (a->vers == 2 && a->err == 3 &&
		    (get32(p, len, &o, &a->cant[0]) || get32(p, len, &o, &a->cant[1]) ||
		     get32(p, len, &o, &a->cant[2]))) {
			a->kind = A_BAD;
			snprintf(a->why, sizeof(a->why), "RDMA2_ERR_CANT_REPLY cut short");
		}
		return;
	}
	if (a->proc != RDMA_MSG && a->proc != RDMA_NOMSG) {
		a->kind = A_BAD;
		snprintf(a->why, sizeof(a->why), "rdma_proc %u", a->proc);
		return;
	}
	a->kind = A_REPLY;
	/* Version 2: rdma_direction (REPLY) and rdma_inv_handle first. */
	if (a->vers == 2 && (get32(p, len, &o, &d) || d != 1 || get32(p, len, &o, &d))) {
		snprintf(a->why, sizeof(a->why), "version 2 reply not in the REPLY direction");
		a->kind = A_BAD;
		return;
	}
	/* A Reply carries no Read list; Write chunks are counted segments. */
	if (get32(p, len, &o, &d) || d) {
		snprintf(a->why, sizeof(a->why), "read list in a reply");
		a->kind = A_BAD;
		return;
	}
	while (!get32(p, len, &o, &d) && d) {
		if (get32(p, len, &o, &n) || n > RBUF / 16) {
			a->kind = A_BAD;
			return;
		}
		a->wchunks++;
		for (k = 0; k < n; k++) {
			uint32_t sl;

			o += 4;
			if (get32(p, len, &o, &sl)) {
				a->kind = A_BAD;
				return;
			}
			a->wbytes += sl;
			o += 8;
		}
	}
	if (o > len || get32(p, len, &o, &d)) {
		a->kind = A_BAD;
		snprintf(a->why, sizeof(a->why), "chunk lists cut short");
		return;
	}
	if (d) {			/* Reply chunk: its first segment */
		if (get32(p, len, &o, &n) || n < 1 || n > RBUF / 16 || get32(p, len, &o, &h) ||
		    get32(p, len, &o, &l) || get32(p, len, &o, &hi) || get32(p, len, &o, &lo)) {
			a->kind = A_BAD;
			snprintf(a->why, sizeof(a->why), "bad reply chunk");
			return;
		}
		a->rchunk = 1;
		a->rbytes = l;
		for (k = 1; k < n; k++) {
			uint32_t sl;

			o += 4;
			if (get32(p, len, &o, &sl)) {
				a->kind = A_BAD;
				return;
			}
			a->rbytes += sl;
			o += 8;
		}
	}
	if (a->proc == RDMA_MSG) {
		a->rpc_ok = o <= len && rpc_reply_ok(p + o, len - o, call_xid);
		return;
	}
	/* RDMA_NOMSG: the Reply is in our Reply chunk. */
	a->via_chunk = 1;
	k = c->reply_off ? c->reply_off : CH_REPLY;
	if (!d || h != c->cmr->rkey || l > c->chunksz - k ||
	    (((uint64_t)hi << 32) | lo) != (uintptr_t)c->chunk + k) {
		snprintf(a->why, sizeof(a->why), "RDMA_NOMSG without our reply chunk");
		return;
	}
	a->rpc_ok = rpc_reply_ok(c->chunk + k, l, call_xid);
}

/*
 * Wait up to ms for answers to the Call xid, or (burst) for want good
 * Replies to any Call. The first answer goes to a; a->kind stays A_NONE if
 * none came, A_DISC if the connection ended or its QP failed first.
 * Returns the number of answers (burst: of good Replies).
 */
static unsigned int wait_answers(struct cconn *c, uint32_t xid, unsigned int want, int burst,
				 int ms, struct answer *a)
{
	long end = now_ms() + ms;
	unsigned int got = 0, seen = 0;

	memset(a, 0, sizeof(*a));
	while (got < want && !c->ended && !c->qp_err[0]) {
		struct pollfd p[2] = { { .fd = c->ech->fd, .events = POLLIN },
				       { .fd = c->ch->fd, .events = POLLIN } };
		long left = end - now_ms();
		struct ibv_wc wc[16];
		struct ibv_cq *cq;
		void *ctx;
		int n, i;

		if (left <= 0)
			break;
		if (poll(p, 2, left) < 0 && errno != EINTR)
			break;
		while (!ibv_get_cq_event(c->ch, &cq, &ctx))
			c->cq_events++;
		ibv_req_notify_cq(c->cq, 0);
		while ((n = ibv_poll_cq(c->cq, 16, wc)) > 0) {
			for (i = 0; i < n; i++) {
				const uint8_t *m = rbuf(c, wc[i].wr_id);
				struct answer b;

				if (wc[i].status != IBV_WC_SUCCESS) {
					if (!c->qp_err[0])
						snprintf(c->qp_err, sizeof(c->qp_err), "%s %s",
							 wc[i].wr_id >= NRECV ? "send" : "receive",
							 ibv_wc_status_str(wc[i].status));
					continue;
				}
				if (wc[i].wr_id >= NRECV)
					continue;
				/* In a burst, each Reply answers the Call of its own XID. */
				parse_answer(c, m, wc[i].byte_len,
					     burst && wc[i].byte_len >= 4 ? ntohl(*(const uint32_t *)m) : xid,
					     &b);
				if (seen++ == 0) {
					*a = b;
					c->first_len = wc[i].byte_len < RBUF ? wc[i].byte_len : RBUF;
					memcpy(c->first, m, c->first_len);
				}
				if (!burst || (b.kind == A_REPLY && b.rpc_ok))
					got++;
				post_recv(c, wc[i].wr_id);
			}
		}
		if (p[0].revents & POLLIN) {
			struct rdma_cm_event *ev;

			if (!rdma_get_cm_event(c->ech, &ev)) {
				if (!c->ended)
					c->ended = cm_ended(ev->event);
				rdma_ack_cm_event(ev);
			}
		}
	}
	if (!seen && (c->ended || c->qp_err[0]))
		a->kind = A_DISC;
	/* Our QP failed: did the server end the connection too? */
	while (c->qp_err[0] && !c->ended) {
		struct pollfd p = { .fd = c->ech->fd, .events = POLLIN };
		long left = end - now_ms();
		struct rdma_cm_event *ev;

		if (left <= 0 || poll(&p, 1, left) <= 0 || rdma_get_cm_event(c->ech, &ev))
			break;
		c->ended = cm_ended(ev->event);
		rdma_ack_cm_event(ev);
	}
	return got;
}

/* " result=KIND xid=... ..." for the case's answer, " then=KIND ..." for the probe's. */
static void print_answer(const char *label, const struct answer *a, uint32_t xid)
{
	const char *pre = strcmp(label, "result") ? "then_" : "";
	int answered = a->kind != A_NONE && a->kind != A_DISC && a->kind != A_NOCONN;

	printf(" %s=%s", label, kind_names[a->kind]);
	if (!pre[0])
		printf(" xid=0x%08x xid_ok=%d", answered ? a->xid : 0, answered && a->xid == xid);
	if (!answered)
		return;
	if (pre[0] && a->xid != xid)
		printf(" %sxid_ok=0", pre);
	printf(" %scredits=%u", pre, a->credits);
	if (a->kind == A_ERR_VERS)
		printf(" %svers=%u-%u", pre, a->low, a->high);
	if (a->kind == A_ERR_VERS || a->kind == A_ERR_CHUNK || a->kind == A_ERR_OTHER)
		printf(" %shvers=%u", pre, a->vers);
	if (a->kind == A_ERR_OTHER)
		printf(" %serr=%u", pre, a->err);
	if (a->kind == A_ERR_OTHER && a->vers == 2 && a->err == 3)
		printf(" %scant=%u,%u,%u", pre, a->cant[0], a->cant[1], a->cant[2]);
	if (a->kind == A_REPLY) {
		printf(" %srpc=%s %svia=%s %swchunks=%u %swbytes=%u %srchunk=", pre,
		       a->rpc_ok ? "ok" : "bad", pre, a->via_chunk ? "reply-chunk" : "inline",
		       pre, a->wchunks, pre, a->wbytes, pre);
		if (a->rchunk)
			printf("%u", a->rbytes);
		else
			printf("absent");
	}
	if (a->why[0])
		printf(" %swhy=\"%s\"", pre, a->why);
}

/* Waits up to ms for one CM event on ech, acks it; its type, or -1. */
static int ev_wait(struct rdma_event_channel *ech, int ms)
{
	struct pollfd p = { .fd = ech->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	int e;

	if (poll(&p, 1, ms) <= 0 || rdma_get_cm_event(ech, &ev))
		return -1;
	e = ev->event;
	rdma_ack_cm_event(ev);
	return e;
}

/*
 * Connects given up: a CM id of its own each, resolved, a REQ sent (our
 * RFC 8797 private data, a QP number no QP has: we never make one), then
 * the id destroyed, which makes our CM send a REJ. Every other one goes
 * at once (REQ_SENT: the server may not have seen the REQ yet, or be
 * building the connection or accepting it); the others once the server's
 * REP came (it accepted, and waits for an RTU that never comes), or 2 s
 * passed without one. iWARP's CM connects a QP, not a number, so there
 * each attempt makes one: its MPA request then ends in a TCP reset
 * during the server's accept. abandon_min (-a, 200 by default) at least, and until
 * until_file exists (-u); ABANDON_MAX attempts at most.
 * Returns the REQs sent; *failed counts the attempts that sent none.
 */
#define ABANDON_MAX 20000

/* A QP on id's device (librdmacm makes its PD and CQs) where the CM
 * needs one: iWARP. Returns 0 or -1. */
static int abandon_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};

	if (!id->verbs || id->verbs->device->transport_type != IBV_TRANSPORT_IWARP)
		return 0;
	return rdma_create_qp(id, NULL, &qa) ? -1 : 0;
}
static unsigned int abandon_loop(unsigned int *failed, unsigned int *reps, char *why, size_t n)
{
	unsigned int sent = 0, i;
	uint8_t priv[8];

	*failed = *reps = 0;
	peer_private(priv, 0, RBUF, RBUF);
	for (i = 0; i < ABANDON_MAX; i++) {
		struct rdma_event_channel *ech;
		struct rdma_cm_id *id = NULL;
		struct rdma_conn_param cp = { 0 };
		int ok = 0;

		if (sent >= abandon_min && (!until_file || !access(until_file, F_OK)))
			break;
		ech = rdma_create_event_channel();
		if (!ech || rdma_create_id(ech, &id, NULL, RDMA_PS_TCP)) {
			snprintf(why, n, "rdma_create_id: %s", strerror(errno));
			if (ech)
				rdma_destroy_event_channel(ech);
			return sent;
		}
		cp.private_data = priv;
		cp.private_data_len = sizeof(priv);
		cp.responder_resources = 16;
		cp.retry_count = 7;
		cp.rnr_retry_count = 7;
		cp.qp_num = 0x100000 + (i & 0xfffff);
		if (!rdma_resolve_addr(id, NULL, (struct sockaddr *)&server, 2000) &&
		    ev_wait(ech, timeout_ms) == RDMA_CM_EVENT_ADDR_RESOLVED &&
		    !rdma_resolve_route(id, 2000) &&
		    ev_wait(ech, timeout_ms) == RDMA_CM_EVENT_ROUTE_RESOLVED &&
		    !abandon_qp(id) && !rdma_connect(id, &cp)) {
			ok = 1;
			sent++;
			if (i % 2 && ev_wait(ech, 2000) == RDMA_CM_EVENT_CONNECT_RESPONSE)
				(*reps)++;
		} else {
			(*failed)++;
			snprintf(why, n, "connect attempt %u: %s", i, strerror(errno));
		}
		if (id->qp)
			rdma_destroy_qp(id);
		rdma_destroy_id(id);
		rdma_destroy_event_channel(ech);
		(void)ok;
	}
	return sent;
}

/* One case on a connection of its own; returns 0 unless the peer failed. */
static int run_case(const struct ccase *k)
{
	struct cconn c;
	struct answer a, then;
	char why[128] = "";
	uint32_t xid = next_xid++;
	unsigned int len = 0, got = 0, total = 0, i;
	long t0 = now_ms(), t_first = 0;

	printf("case %s start: %s\n", k->name, k->desc);
	if (k->how == C_ABANDON) {
		unsigned int failed, reps, sent;

		sent = abandon_loop(&failed, &reps, why, sizeof(why));
		printf("case %s abandoned=%u after_rep=%u failed=%u ms=%ld%s%s%s\n", k->name, sent,
		       reps, failed, now_ms() - t0, why[0] ? " why=\"" : "", why, why[0] ? "\"" : "");
		fflush(stdout);
		why[0] = 0;
		t_first = now_ms();
	}
	chunk_size = k->chunksz ? k->chunksz : CHUNKSZ;
	if (cconn_open(&c, k->how == C_EARLY ? k->build : NULL, xid, &len, why, sizeof(why))) {
		printf("case %s result=connect-failed then=- why=\"%s\"\n", k->name, why);
		cconn_close(&c);
		return 0;
	}
	if (k->how == C_BURST) {
		/* Learn the grant, then send three times as many at once. */
		len = b_null(&c, sbuf(&c, 0), xid);
		if (post_send(&c, 0, len) || wait_answers(&c, xid, 1, 0, timeout_ms, &a) != 1 ||
		    a.kind != A_REPLY) {
			printf("case %s result=%s then=- why=\"no answer to the first NULL Call%s%s\"\n",
			       k->name, kind_names[a.kind], c.qp_err[0] ? ": " : "", c.qp_err);
			cconn_close(&c);
			return 0;
		}
		total = 3 * a.credits;
		if (total > NSEND - 1)
			total = NSEND - 1;
		if (total < 8)
			total = 8;
		for (i = 0; i < total; i++) {
			len = b_null(&c, sbuf(&c, i), next_xid++);
			if (post_send(&c, i, len))
				break;
		}
		got = wait_answers(&c, 0, i, 1, 6 * timeout_ms, &a);
		/* The grant seen, and how many of the burst were answered. */
		printf("case %s result=%s granted=%u sent=%u answered=%u", k->name,
		       got == total ? "reply" : c.ended || c.qp_err[0] ? "disconnect" : "nothing",
		       total / 3, i, got);
	} else {
		if (k->how == C_ONE || k->how == C_ABANDON) {
			len = k->build(&c, sbuf(&c, 0), xid);
			if (post_send(&c, 0, len)) {
				printf("case %s result=connect-failed then=- why=\"post send failed\"\n",
				       k->name);
				cconn_close(&c);
				return 0;
			}
		}
		wait_answers(&c, xid, 1, 0, timeout_ms, &a);
		if (t_first)
			t_first = now_ms() - t_first;
		printf("case %s", k->name);
		print_answer("result", &a, xid);
		if (k->how == C_ABANDON)
			printf(" first_ms=%ld", t_first);
		printf(" sent=%u sent_xid=0x%08x rep_rnr=%d", len, xid, c.rep_rnr);
		if (a.kind == A_REPLY)
			more_check(k->name, &c, xid);
	}
	if (c.qp_err[0])
		printf(" qp=\"%s\"", c.qp_err);
	/* cm=disconnected|rejected: the CM says the server ended the connection */
	printf(" cm=%s", c.ended == ENDED_REJ ? "rejected" : c.ended ? "disconnected" : "connected");
	/* Still connected: does it serve a well-formed Call? */
	if (!c.ended && !c.qp_err[0]) {
		xid = next_xid++;
		len = b_null(&c, sbuf(&c, NSEND - 1), xid);
		if (post_send(&c, NSEND - 1, len))
			printf(" then=disconnect");
		else {
			wait_answers(&c, xid, 1, 0, timeout_ms, &then);
			print_answer("then", &then, xid);
		}
	} else {
		printf(" then=-");
	}
	printf(" ms=%ld\n", now_ms() - t0);
	cconn_close(&c);
	return 0;
}

static int resolve(const char *host, const char *port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
	int rc = getaddrinfo(host, port, &hints, &res);

	if (rc) {
		fprintf(stderr, "%s: %s\n", host, gai_strerror(rc));
		return -1;
	}
	memcpy(&server, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

int client_main(int argc, char **argv)
{
	const char *port = "20049";
	unsigned int i, n = 0;
	int opt, j, list = 0;

	/* argv[0] is "-c"; the server comes next. */
	if (argc < 2) {
		fprintf(stderr, "usage: rpcrdma-peer -c SERVER [-P PORT] [-t MS] [-u FILE] [-a N] [-l] [CASE ...]\n");
		return 2;
	}
	optind = 2;
	while ((opt = getopt(argc, argv, "P:t:u:a:l")) != -1) {
		switch (opt) {
		case 'P':
			port = optarg;
			break;
		case 't':
			timeout_ms = atoi(optarg);
			break;
		case 'u':
			until_file = optarg;
			break;
		case 'a':
			abandon_min = (unsigned int)atoi(optarg);
			break;
		case 'l':
			list = 1;
			break;
		default:
			return 2;
		}
	}
	if (list) {
		for (i = 0; i < NCASES; i++)
			if (!cases[i].explicit_only)
				printf("%s\t%s\n", cases[i].name, cases[i].desc);
		return 0;
	}
	if (resolve(argv[1], port))
		return 2;
	next_xid ^= (uint32_t)time(NULL) << 8;
	for (j = optind; j < argc; j++) {
		for (i = 0; i < NCASES && strcmp(argv[j], cases[i].name); i++)
			;
		if (i == NCASES) {
			fprintf(stderr, "unknown case '%s'\n", argv[j]);
			return 2;
		}
	}
	for (i = 0; i < NCASES; i++) {
		if (optind < argc) {
			for (j = optind; j < argc && strcmp(argv[j], cases[i].name); j++)
				;
			if (j == argc)
				continue;
		} else if (cases[i].explicit_only) {
			continue;
		}
		run_case(&cases[i]);
		n++;
	}
	printf("done cases=%u\n", n);
	return 0;
}
