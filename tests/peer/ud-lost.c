// SPDX-License-Identifier: GPL-2.0
/*
 * ud-lost DEV ADDR4 PEER4 ADDR6 SYNCDIR
 *
 * A UD send whose source GID left the table after its address handle
 * was made: what rxe's requester does when rxe_init_packet() cannot get
 * the GID entry (the path a CM message takes when the node's address is
 * removed under a connection; scripts/kernel-patches/0003-*).
 *
 * On DEV, port 1: a UD QP in RTS, an AH from ADDR4's RoCE v2 GID to
 * PEER4, and one from ADDR6's RoCE v2 GID to ADDR6 itself (rxe loopback),
 * a receive posted. Writes "IDX\n" (ADDR4's GID index) to SYNCDIR/ready
 * and waits for SYNCDIR/go: the caller removes ADDR4 meanwhile. The AH
 * holds a reference on the GID entry, so the entry stays in its slot
 * (pending deletion) and no other GID can take the index. Then it checks
 * that the entry no longer reads as valid, posts the send on the first AH
 * and prints, one "key=value" per line:
 *
 *   send_status  the send's completion status (ibv_wc_status_str)
 *   qp_state     the QP's state after it (RTS, ERR, ...)
 *   probe_send   a second send, to the QP itself over ADDR6
 *   probe_recv   the receive's completion, "success" only if it carries
 *                the probe's bytes
 *
 * Exit 0 if all of that ran, whatever the statuses (the caller judges);
 * 1 with a message if the setup or the synchronisation failed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define QKEY 0x11111111
#define PORT 1
#define GRH 40
#define PROBE "ud-lost probe"

enum { WR_RECV = 1, WR_LOST, WR_PROBE };

static void die(const char *what)
{
	fprintf(stderr, "ud-lost: %s: %s\n", what, errno ? strerror(errno) : "failed");
	exit(1);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* The RoCE v2 GID index of addr (IPv4 as ::ffff:a.b.c.d), or -1. */
static int gid_index(struct ibv_context *ctx, int tbl_len, const char *addr)
{
	union ibv_gid want = { 0 };
	struct ibv_gid_entry e;
	struct in_addr a4;
	int i;

	if (inet_pton(AF_INET, addr, &a4) == 1) {
		want.raw[10] = 0xff;
		want.raw[11] = 0xff;
		memcpy(&want.raw[12], &a4, 4);
	} else if (inet_pton(AF_INET6, addr, want.raw) != 1) {
		fprintf(stderr, "ud-lost: bad address %s\n", addr);
		exit(1);
	}
	for (i = 0; i < tbl_len; i++) {
		if (ibv_query_gid_ex(ctx, PORT, i, &e, 0))
			continue;
		if (e.gid_type == IBV_GID_TYPE_ROCE_V2 && !memcmp(e.gid.raw, want.raw, 16))
			return i;
	}
	return -1;
}

static struct ibv_ah *make_ah(struct ibv_pd *pd, int sgid, const char *dst)
{
	struct ibv_ah_attr attr = { .is_global = 1, .port_num = PORT };
	struct in_addr a4;

	attr.grh.sgid_index = sgid;
	attr.grh.hop_limit = 64;
	if (inet_pton(AF_INET, dst, &a4) == 1) {
		attr.grh.dgid.raw[10] = 0xff;
		attr.grh.dgid.raw[11] = 0xff;
		memcpy(&attr.grh.dgid.raw[12], &a4, 4);
	} else if (inet_pton(AF_INET6, dst, attr.grh.dgid.raw) != 1) {
		fprintf(stderr, "ud-lost: bad address %s\n", dst);
		exit(1);
	}
	return ibv_create_ah(pd, &attr);
}

static const char *state_name(enum ibv_qp_state s)
{
	static const char *const names[] = {
		[IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT", [IBV_QPS_RTR] = "RTR",
		[IBV_QPS_RTS] = "RTS", [IBV_QPS_SQD] = "SQD", [IBV_QPS_SQE] = "SQE",
		[IBV_QPS_ERR] = "ERR",
	};

	return (unsigned int)s < sizeof(names) / sizeof(names[0]) && names[s] ? names[s] : "?";
}

/* Polls cq until a completion for wr_id came, for 10 s at most: its
 * status, or -1. Completions for other WRs are kept in seen[]. */
static int wait_wc(struct ibv_cq *cq, uint64_t wr_id, int seen[4], uint32_t lens[4])
{
	double end = now() + 10;
	struct ibv_wc wc;
	int n;

	while (seen[wr_id] < 0) {
		n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0)
			die("ibv_poll_cq");
		if (n == 1 && wc.wr_id < 4) {
			seen[wc.wr_id] = wc.status;
			lens[wc.wr_id] = wc.byte_len;
			continue;
		}
		if (now() > end)
			return -1;
		pause_ms(1);
	}
	return seen[wr_id];
}

static const char *status_str(int st)
{
	return st < 0 ? "none in 10 s" : ibv_wc_status_str(st);
}

int main(int argc, char **argv)
{
	int seen[4] = { -1, -1, -1, -1 };
	uint32_t lens[4] = { 0 };
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_port_attr port;
	struct ibv_qp_init_attr init = { 0 };
	struct ibv_qp_attr attr;
	struct ibv_gid_entry e;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_ah *lost, *self;
	struct ibv_sge sge;
	struct ibv_recv_wr rwr = { 0 }, *bad_r;
	struct ibv_send_wr swr = { 0 }, *bad_s;
	static char buf[4096];
	char path[4096];
	int i, idx4, idx6, st, probe;
	double end;
	FILE *f;

	if (argc != 6) {
		fprintf(stderr, "usage: ud-lost DEV ADDR4 PEER4 ADDR6 SYNCDIR\n");
		return 1;
	}
	list = ibv_get_device_list(NULL);
	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		die(argv[1]);
	if (ibv_query_port(ctx, PORT, &port))
		die("ibv_query_port");
	idx4 = gid_index(ctx, port.gid_tbl_len, argv[2]);
	idx6 = gid_index(ctx, port.gid_tbl_len, argv[4]);
	if (idx4 < 0 || idx6 < 0) {
		fprintf(stderr, "ud-lost: no RoCE v2 GID for %s\n", idx4 < 0 ? argv[2] : argv[4]);
		return 1;
	}

	pd = ibv_alloc_pd(ctx);
	cq = pd ? ibv_create_cq(ctx, 8, NULL, NULL, 0) : NULL;
	if (!cq)
		die("pd/cq");
	init.send_cq = cq;
	init.recv_cq = cq;
	init.qp_type = IBV_QPT_UD;
	init.cap.max_send_wr = 4;
	init.cap.max_recv_wr = 4;
	init.cap.max_send_sge = 1;
	init.cap.max_recv_sge = 1;
	qp = ibv_create_qp(pd, &init);
	if (!qp)
		die("ibv_create_qp");
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_INIT;
	attr.port_num = PORT;
	attr.qkey = QKEY;
	if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		die("modify to INIT");
	attr.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &attr, IBV_QP_STATE))
		die("modify to RTR");
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = 1;
	if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("modify to RTS");
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		die("ibv_reg_mr");
	lost = make_ah(pd, idx4, argv[3]);
	if (!lost)
		die("ibv_create_ah toward the peer");
	self = make_ah(pd, idx6, argv[4]);
	if (!self)
		die("ibv_create_ah toward ourselves");

	/* The receive the probe must land in: posted while in RTS. */
	sge.addr = (uintptr_t)(buf + 1024);
	sge.length = GRH + 64;
	sge.lkey = mr->lkey;
	rwr.wr_id = WR_RECV;
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	if (ibv_post_recv(qp, &rwr, &bad_r))
		die("ibv_post_recv");

	snprintf(path, sizeof(path), "%s/ready", argv[5]);
	f = fopen(path, "w");
	if (!f || fprintf(f, "%d\n", idx4) < 0 || fclose(f))
		die(path);
	snprintf(path, sizeof(path), "%s/go", argv[5]);
	end = now() + 120;
	while (access(path, F_OK)) {
		if (now() > end) {
			fprintf(stderr, "ud-lost: no %s in 120 s\n", path);
			return 1;
		}
		pause_ms(10);
	}
	/* The injection: the entry must be gone now, or the send would go. */
	if (!ibv_query_gid_ex(ctx, PORT, idx4, &e, 0)) {
		fprintf(stderr, "ud-lost: GID index %d still valid: not injected\n", idx4);
		return 1;
	}
	printf("gid_index=%d\n", idx4);

	strcpy(buf, "ud-lost lost datagram");
	sge.addr = (uintptr_t)buf;
	sge.length = 32;
	swr.wr_id = WR_LOST;
	swr.sg_list = &sge;
	swr.num_sge = 1;
	swr.opcode = IBV_WR_SEND;
	swr.send_flags = IBV_SEND_SIGNALED;
	swr.wr.ud.ah = lost;
	swr.wr.ud.remote_qpn = 1; /* a datagram to the peer's QP 1, as a MAD */
	swr.wr.ud.remote_qkey = QKEY;
	if (ibv_post_send(qp, &swr, &bad_s))
		die("ibv_post_send");
	st = wait_wc(cq, WR_LOST, seen, lens);
	printf("send_status=%s\n", status_str(st));

	memset(&attr, 0, sizeof(attr));
	if (ibv_query_qp(qp, &attr, IBV_QP_STATE, &init))
		die("ibv_query_qp");
	printf("qp_state=%s\n", state_name(attr.qp_state));

	/* Can the QP still send and receive? */
	strcpy(buf + 512, PROBE);
	sge.addr = (uintptr_t)(buf + 512);
	sge.length = sizeof(PROBE);
	swr.wr_id = WR_PROBE;
	swr.wr.ud.ah = self;
	swr.wr.ud.remote_qpn = qp->qp_num;
	if (ibv_post_send(qp, &swr, &bad_s)) {
		printf("probe_send=post failed: %s\n", strerror(errno));
	} else {
		probe = wait_wc(cq, WR_PROBE, seen, lens);
		printf("probe_send=%s\n", status_str(probe));
	}
	st = wait_wc(cq, WR_RECV, seen, lens);
	if (st == IBV_WC_SUCCESS &&
	    (lens[WR_RECV] != GRH + sizeof(PROBE) || memcmp(buf + 1024 + GRH, PROBE, sizeof(PROBE))))
		printf("probe_recv=success but %u bytes, not the probe's\n", lens[WR_RECV]);
	else
		printf("probe_recv=%s\n", status_str(st));
	fflush(stdout);
	return 0;
}
