/*
 * transport.h: a job's data link between two nodes, as the algorithms
 * (ring.c, p2p.c) see it, whatever carries it.
 *
 * A link is a reliable, ordered byte stream in each direction.  Every link
 * starts as a TCP connection (peer.c: authenticated, then DATA_HELLO); set-up
 * (link.c) then swaps set-up messages on it (PEER_DATA_LINK, PEER_DATA_READY
 * in peer.h) and both ends pick the same transport: RDMA where both offer
 * it, else TCP.  The connection stays open either way: over RDMA it tells a
 * peer's death (a hang-up) sooner than the verbs' retries do.
 *
 * A transport is one file (tcp.c, rdma.c) and one entry in link.c's table.
 * Its data calls never block: the engine thread drives all its links from
 * one loop, and sleeps in poll(2) on what arm() gives it.
 */
#ifndef MCCL_TRANSPORT_H
#define MCCL_TRANSPORT_H

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "peer.h"

#define LINK_NODES_MAX	1024	/* nodes of a cluster */
#define LINK_HOST_MAX	256	/* an address or host name, with its NUL */
#define LINK_DEV_MAX	32	/* an RDMA device (and port): "mlx5_0:2" */

/* Where a node listens: a numeric address or a name, and a port. */
struct conf_addr {
	char		host[LINK_HOST_MAX];
	uint16_t	port;
};

/* A node of the cluster as links reach it (a row of the settings' nodes). */
struct conf_node {
	char		 name[NODE_NAME_MAX];
	struct conf_addr addr;
	char		 rdma_dev[LINK_DEV_MAX];	/* this node's RDMA device
					   (and port) to reach it, from this
					   node's "rdma"; "": any that works */
};

/* What may carry a link: the caller's setting ("transport"). */
enum link_choice { LINK_ANY, LINK_TCP, LINK_RDMA };

/*
 * Whom a link goes to and what it may use, from the caller's settings (a
 * job's, the check's): the set-up reads it, and the names go into its
 * messages.  The strings are the caller's and outlive the set-up.
 */
struct link_want {
	const char	*me;		/* this node's name */
	const char	*peer;		/* the peer's */
	const char	*rdma_dev;	/* this node's device to the peer; "": any */
	int		 choice;	/* enum link_choice */
};

#define LINK_WHY_MAX	192

struct link;

struct transport {
	const char	*name;		/* "tcp", "rdma": logs, mcclctl peers */
	uint32_t	 wire;		/* its PEER_LINK_* in PEER_DATA_LINK */

	/*
	 * Set-up.  offer: get ready to reach the node wanted, describe
	 * this end in *m; returns the half-made end, or NULL with why (then
	 * the peer is offered TCP instead).  join: with the peer's message,
	 * finish the link over the connected socket fd (the link owns fd
	 * from then on, also on failure).  drop: give a half-made end back.
	 */
	void		*(*offer)(const struct link_want *, struct peer_data_link *m,
			    char *why, size_t);
	struct link	*(*join)(void *half, int fd, const struct peer_data_link *,
			    char *why, size_t);
	void		 (*drop)(void *half);

	/*
	 * Data.  send: bytes of iov the transport is done with (their memory
	 * may change), or -1 with errno EAGAIN when none yet, any other errno
	 * when the link failed.  Bytes passed and not yet counted must be
	 * passed again, first and unchanged, by the next call: a transport
	 * may send straight from them.  recv: bytes stored into iov, 0 when
	 * the peer closed the link, -1 with errno as for send.
	 */
	ssize_t		 (*send)(struct link *, const struct iovec *, int);
	ssize_t		 (*recv)(struct link *, const struct iovec *, int);

	/*
	 * Before sleeping: fill up to two pollfds that turn ready when the
	 * link can move in the directions of `want` (POLLIN, POLLOUT), or
	 * hangs up (POLLRDHUP in want: watch for that alone).  Returns how
	 * many it filled, 0 when the link can move now (don't sleep).
	 */
	int		 (*arm)(struct link *, short want, struct pollfd *);

	void		 (*close)(struct link *);

	/*
	 * Memory the engine sends from, known ahead: a transport that sends
	 * from registered memory registers [base, base + len) under key
	 * (a client's segment, the engine's scratch) until forgotten.  May
	 * be NULL.  A failure is not fatal: data from there is staged.
	 */
	void		 (*mem_add)(const void *key, void *base, size_t len);
	void		 (*mem_forget)(const void *key);
};

struct link {
	const struct transport *tp;
	int		 fd;		/* the data connection (see above) */
	uint32_t	 node;		/* the peer's cluster index */
	char		 peer[NODE_NAME_MAX];	/* its name, for messages */
	char		 device[LINK_DEV_MAX];	/* where it leaves this node: "mlx5_0:1" */
	char		 why[LINK_WHY_MAX];	/* a transport's own words for its
					   last failure (errno EIO), or "" */
};

static inline ssize_t
link_send(struct link *l, const struct iovec *iov, int n)
{
	return l->tp->send(l, iov, n);
}

static inline ssize_t
link_recv(struct link *l, const struct iovec *iov, int n)
{
	return l->tp->recv(l, iov, n);
}

static inline int
link_arm(struct link *l, short want, struct pollfd *pfd)
{
	return l->tp->arm(l, want, pfd);
}

static inline void
link_close(struct link *l)
{
	if (l != NULL)
		l->tp->close(l);
}

/* link.c: set-up, the transports' table, what peers' links run over */

/* One end being set up: offer, then answer, then ready. */
struct link_setup {
	int		 fd;		/* connected and past DATA_HELLO */
	uint32_t	 node;		/* the peer's cluster index */
	struct link_want want;
	const struct transport *tp;	/* offered: rdma when it could */
	void		*half;
	struct peer_data_link mine;
	char		 why[LINK_WHY_MAX];	/* tp had nothing to offer */
	struct link	*link;		/* once answered */
};

int		 link_offer(struct link_setup *, char *, size_t);
int		 link_answer(struct link_setup *, int, uint64_t, char *, size_t);
int		 link_ready(struct link_setup *, int, uint64_t, char *, size_t);
void		 link_setup_drop(struct link_setup *);
struct link	*link_make(struct link_setup *, int, uint64_t, char *,
		    size_t);
void		 link_peer_info(uint32_t, char *, size_t, char *, size_t);
void		 link_mem_add(const void *, void *, size_t);
void		 link_mem_forget(const void *);

/* linkerr.c */
const char	*link_strerror(const struct link *, int, char *, size_t);
int		 link_hangup_errno(const struct link *);
int		 link_polled_ready(const struct pollfd *, size_t);
int		 link_polled_hangup(const struct pollfd *);

/* tcp.c */
struct link	*link_tcp(int, uint32_t);

extern const struct transport tcp_transport;
extern const struct transport rdma_transport;

/* dial.c: the TCP connection under a data link, any thread */
struct sockaddr_storage;
int		 dial_resolve(const struct conf_addr *, int,
		    struct sockaddr_storage *, socklen_t *, char *, size_t);
void		 dial_tune(int);
void		 dial_tune_data(int);
void		 dial_set_data_cc(const char *);
int		 dial_frame_send(int, uint16_t, const void *);
int		 dial_frame_read(int, uint16_t, void *, int, uint64_t, char *,
		    size_t);
int		 dial_data_link(const struct conf_addr *, uint32_t, uint32_t,
		    uint64_t, uint32_t, int, uint64_t, char *, size_t);

/* auth.c: peer authentication (any thread) */

#define AUTH_NONCE_LEN	32
#define AUTH_MAC_LEN	32

#define AUTH_SECRET_MAX	4096	/* bytes of a secret file read */
int		auth_init(const char *, const char *, char *, size_t);
int		auth_secret_read(const char *, const char *, size_t, uint8_t *,
		    size_t *, char *, size_t);
int		auth_host_only(void);
void		auth_nonce(uint8_t *);
void		auth_mac(uint8_t *, char, const uint8_t *, const uint8_t *,
		    uint32_t);
int		auth_check(const uint8_t *, char, const uint8_t *,
		    const uint8_t *, uint32_t);

#endif
