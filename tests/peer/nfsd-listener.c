// SPDX-License-Identifier: GPL-2.0
/*
 * nfsd-listener TRANSPORT ADDR PORT [TRANSPORT ADDR PORT]...
 *
 * Sets nfsd's listeners to exactly these (generic netlink family "nfsd",
 * NFSD_CMD_LISTENER_SET), what nfs-utils' nfsdctl does and Debian 12's
 * nfs-utils cannot: /proc/fs/nfsd/portlist only makes wildcard
 * listeners, and a listener bound to one address is the only kind rdma_cm
 * tells about a bond failover (tests/vm/server.sh bond_failover).
 * Listeners not in the list are closed, which nfsd refuses (EBUSY) while
 * it has threads. Raw netlink: libnl is not in the guests.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* include/uapi/linux/nfsd_netlink.h, which Debian 12's headers lack. */
#define NFSD_CMD_LISTENER_SET 6
#define NFSD_A_SERVER_SOCK_ADDR 1
#define NFSD_A_SOCK_ADDR 1
#define NFSD_A_SOCK_TRANSPORT_NAME 2

struct msg {
	struct nlmsghdr n;
	struct genlmsghdr g;
	char buf[4096];
};

static struct nlattr *put(struct msg *m, unsigned short type, const void *data, size_t len)
{
	struct nlattr *a = (struct nlattr *)((char *)m + NLMSG_ALIGN(m->n.nlmsg_len));
	size_t total = NLA_HDRLEN + len;

	if (NLMSG_ALIGN(m->n.nlmsg_len) + NLA_ALIGN(total) > sizeof(*m)) {
		fprintf(stderr, "nfsd-listener: too many listeners\n");
		exit(2);
	}
	a->nla_type = type;
	a->nla_len = total;
	if (len)
		memcpy((char *)a + NLA_HDRLEN, data, len);
	m->n.nlmsg_len = NLMSG_ALIGN(m->n.nlmsg_len) + NLA_ALIGN(total);
	return a;
}

/* Sends m and reads the kernel's answer into it: its error, 0 for an ACK. */
static int talk(int fd, struct msg *m)
{
	struct nlmsgerr *e = NLMSG_DATA(&m->n);
	ssize_t n;

	m->n.nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
	m->n.nlmsg_seq = 2;
	if (send(fd, m, m->n.nlmsg_len, 0) < 0)
		return -errno;
	n = recv(fd, m, sizeof(*m), 0);
	if (n < 0)
		return -errno;
	if ((size_t)n < NLMSG_LENGTH(sizeof(*e)) || m->n.nlmsg_len > (size_t)n ||
	    m->n.nlmsg_type != NLMSG_ERROR)
		return -EPROTO;
	return e->error;
}

static int family_id(int fd)
{
	struct msg m = { 0 };
	struct nlattr *a;
	int len, rc;

	m.n.nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN);
	m.n.nlmsg_type = GENL_ID_CTRL;
	m.g.cmd = CTRL_CMD_GETFAMILY;
	m.g.version = 1;
	put(&m, CTRL_ATTR_FAMILY_NAME, "nfsd", 5);
	m.n.nlmsg_flags = NLM_F_REQUEST;
	m.n.nlmsg_seq = 1;
	if (send(fd, &m, m.n.nlmsg_len, 0) < 0)
		return -errno;
	len = recv(fd, &m, sizeof(m), 0);
	if (len < 0)
		return -errno;
	if ((size_t)len < NLMSG_LENGTH(GENL_HDRLEN) || m.n.nlmsg_len > (size_t)len)
		return -EPROTO;
	if (m.n.nlmsg_type == NLMSG_ERROR) {
		rc = ((struct nlmsgerr *)NLMSG_DATA(&m.n))->error;
		return rc ? rc : -EPROTO;
	}
	len = m.n.nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);
	for (a = (struct nlattr *)m.buf; len >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN &&
	     a->nla_len <= len;
	     len -= NLA_ALIGN(a->nla_len), a = (struct nlattr *)((char *)a + NLA_ALIGN(a->nla_len)))
		if (a->nla_type == CTRL_ATTR_FAMILY_ID && a->nla_len >= NLA_HDRLEN + 2)
			return *(unsigned short *)((char *)a + NLA_HDRLEN);
	return -ENOENT;
}

int main(int argc, char **argv)
{
	struct sockaddr_nl local = { .nl_family = AF_NETLINK };
	struct msg m = { 0 };
	int fd, fam, i, rc;

	if (argc < 4 || (argc - 1) % 3) {
		fprintf(stderr, "usage: %s TRANSPORT ADDR PORT [TRANSPORT ADDR PORT]...\n", argv[0]);
		return 2;
	}
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	if (fd < 0 || bind(fd, (struct sockaddr *)&local, sizeof(local)) < 0) {
		perror("nfsd-listener: netlink");
		return 1;
	}
	fam = family_id(fd);
	if (fam < 0) {
		fprintf(stderr, "nfsd-listener: family nfsd: %s\n", strerror(-fam));
		return 1;
	}
	m.n.nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN);
	m.n.nlmsg_type = fam;
	m.g.cmd = NFSD_CMD_LISTENER_SET;
	m.g.version = 1;
	for (i = 1; i + 2 < argc; i += 3) {
		struct sockaddr_in6 s6 = { .sin6_family = AF_INET6 };
		struct sockaddr_in s4 = { .sin_family = AF_INET };
		int port = atoi(argv[i + 2]);
		struct nlattr *nest;
		const void *sa;
		size_t salen;

		if (port <= 0 || port > 65535) {
			fprintf(stderr, "nfsd-listener: bad port %s\n", argv[i + 2]);
			return 2;
		}
		if (inet_pton(AF_INET, argv[i + 1], &s4.sin_addr) == 1) {
			s4.sin_port = htons(port);
			sa = &s4;
			salen = sizeof(s4);
		} else if (inet_pton(AF_INET6, argv[i + 1], &s6.sin6_addr) == 1) {
			s6.sin6_port = htons(port);
			sa = &s6;
			salen = sizeof(s6);
		} else {
			fprintf(stderr, "nfsd-listener: bad address %s\n", argv[i + 1]);
			return 2;
		}
		nest = put(&m, NLA_F_NESTED | NFSD_A_SERVER_SOCK_ADDR, NULL, 0);
		put(&m, NFSD_A_SOCK_ADDR, sa, salen);
		put(&m, NFSD_A_SOCK_TRANSPORT_NAME, argv[i], strlen(argv[i]) + 1);
		nest->nla_len = (char *)&m + m.n.nlmsg_len - (char *)nest;
	}
	rc = talk(fd, &m);
	if (rc) {
		fprintf(stderr, "nfsd-listener: LISTENER_SET: %s\n", strerror(-rc));
		return 1;
	}
	return 0;
}
