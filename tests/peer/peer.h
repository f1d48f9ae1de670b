/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the two halves of rpcrdma-peer share: RPC-over-RDMA Version One
 * constants (RFC 8166), XDR words, and the RFC 8797 private data.
 * rpcrdma-peer.c is the hostile server, rpcrdma-client.c the hostile client
 * (rpcrdma-peer -c); one binary.
 */
#ifndef RPCRDMA_PEER_H
#define RPCRDMA_PEER_H

#include <arpa/inet.h>
#include <stdint.h>
#include <string.h>

/* RPC-over-RDMA v1 procedures and errors (RFC 8166 section 4.2). */
enum { RDMA_MSG = 0, RDMA_NOMSG = 1, RDMA_MSGP = 2, RDMA_DONE = 3, RDMA_ERROR = 4 };
enum { RDMA_ERR_VERS = 1, RDMA_ERR_CHUNK = 2 };

/* RFC 8797: magic, version 1, flags, then (n >> 10) - 1 for each size. */
#define RPCRDMA_CMP_MAGIC 0xf6ab0e18u
#define RPCRDMA_CMP_F_SND_W_INV 1

static inline void peer_private(uint8_t priv[8], uint8_t flags, unsigned int send_size,
				unsigned int recv_size)
{
	uint32_t magic = htonl(RPCRDMA_CMP_MAGIC);

	memcpy(priv, &magic, 4);
	priv[4] = 1;
	priv[5] = flags;
	priv[6] = send_size / 1024 - 1;
	priv[7] = recv_size / 1024 - 1;
}

static inline void put32(uint8_t *p, unsigned int *off, uint32_t v)
{
	v = htonl(v);
	memcpy(p + *off, &v, 4);
	*off += 4;
}

static inline int get32(const uint8_t *p, unsigned int len, unsigned int *off, uint32_t *v)
{
	if (*off + 4 > len)
		return -1;
	memcpy(v, p + *off, 4);
	*v = ntohl(*v);
	*off += 4;
	return 0;
}

int client_main(int argc, char **argv);

#endif
