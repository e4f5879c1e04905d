/*
 * p2p.c: a job's point-to-point messages (mccl_send, mccl_recv).  They run
 * on a thread of their own with links of their own, so a send never waits
 * behind a collective and a collective never waits behind a message.
 *
 * A pair's links are made on its first message, one each way: the sender
 * dials (stream PEER_STREAM_P2P) and sends on it, the receiver only reads
 * it, so a job of hundreds of nodes starts without the links its ranks
 * never use.  The job's dialler thread dials and sets up, so messages on
 * other links keep moving; the receiving end's set-up runs on this thread,
 * where it waits only on a dialler that is in the set-up with it: no two
 * nodes ever wait on each other.
 *
 * Every message is eager: a send completes once its transport is done with
 * its bytes (another node) or they are copied (this node).  A message that arrives
 * before its receive is posted is kept in the daemon's memory, up to
 * P2P_UNEXPECTED_MAX bytes per job, max_unreceived_bytes_per_uid for all
 * of a user's jobs and max_unreceived_bytes for the daemon; past a limit
 * the send fails (or, for a message already on the wire, the job fails)
 * with an error naming it, rather than grow without bound.  Matching follows MPI: messages
 * from one rank to another match receives in the order they were sent; a
 * receive takes the first message from its peer whose tag it accepts.
 */
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/bigmem.h"
#include "engine/engine_state.h"
#include "engine/xfer.h"
#include "engine/reduce.h"
#include "transport/transport.h"

#define P2P_UNEXPECTED_MAX	((uint64_t)1 << 30)
#define P2P_HDR_LEN		(WIRE_HDR_LEN + 20)	/* frame of PEER_P2P */
#define IO_MAX			((size_t)1 << 30)

/* A message that arrived (or is arriving) before its receive. */
struct unexpected {
	TAILQ_ENTRY(unexpected) entry;
	struct peer_p2p	 m;
	uint8_t		*buf;
	uint64_t	 got;		/* bytes in buf so far */
	struct op	*waiter;	/* a receive that matched it early */
};
TAILQ_HEAD(unexpected_list, unexpected);

struct p2p_link {
	struct link	*to;		/* ours to it, on our first message */
	struct link	*from;		/* its to us, on its first message */
	int		 dialing;	/* `to` asked of the dialler */
	int		 dead;
	struct op_list	 sendq;		/* head is being sent */
	uint8_t		 txhdr[P2P_HDR_LEN];
	uint64_t	 txoff;		/* of header + payload of the head */
	uint8_t		 rxhdr[P2P_HDR_LEN];
	size_t		 rxhdr_got;
	struct peer_p2p	 rx;		/* message being received */
	uint8_t		*rxdst;		/* where its payload goes */
	uint64_t	 rxgot;
	struct op	*rxop;		/* the receive it completes, or NULL */
	struct unexpected *rxux;	/* or the buffer it fills */
};

/* A link for the p2p thread: one dialled, or one accepted to set up. */
struct arrival {
	TAILQ_ENTRY(arrival) entry;
	uint32_t	 pos;
	int		 fd;		/* accepted, to set up; or -1 */
	struct link	*link;		/* dialled and set up; or NULL */
	char		 err[ERR_MAX];	/* neither: why the dial failed */
};
TAILQ_HEAD(arrival_list, arrival);

struct p2p {
	struct comm	*comm;
	pthread_t	 thread;
	pthread_t	 dialler;
	pthread_mutex_t	 mtx;		/* inbox, dials, arrivals, quit */
	pthread_cond_t	 dial_cond;	/* a dial asked, or quit */
	int		 wake_fd;
	int		 stop_fd;	/* readable once quit: ends a set-up */
	int		 started;	/* the thread runs */
	int		 dialler_started;
	int		 quit;
	int		 exited;	/* p2p_main returned */
	int		 dialler_exited;
	struct op_list	 inbox;		/* from the main thread */
	struct arrival_list dials;	/* asked, for the dialler to fill */
	struct arrival_list arrivals;	/* for the thread to take */
	/* thread-owned from here */
	struct p2p_link	*links;		/* by position; links[me] unused */
	struct op_list	 posted;	/* receives waiting for a message */
	struct unexpected_list unexpected;
	uint64_t	 unexpected_bytes;
	int		 aborted;
};

static uint32_t
local_part(const struct comm *cm, uint32_t rank)
{
	for (uint32_t i = 0; i < cm->nlocal; i++)
		if (cm->local_ranks[i] == rank)
			return i;
	return 0;
}

static uint64_t
op_bytes(const struct op *op)
{
	return op->desc.count * dtype_size(op->desc.dtype);
}

static void
op_complete(struct p2p *p, struct op *op, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
op_complete(struct p2p *p, struct op *op, int code, const char *fmt, ...)
{
	va_list ap;

	op->code = code;
	op->err[0] = '\0';
	if (fmt != NULL) {
		va_start(ap, fmt);
		vsnprintf(op->err, sizeof(op->err), fmt, ap);
		va_end(ap);
	}
	engine_op_done(p->comm, op);
}

/* ---- memory kept for messages not yet received, across jobs ---- */

static struct budget kept_budget = BUDGET_INIT(kept_budget,
    "messages not yet received", "max_unreceived_bytes_per_uid",
    "max_unreceived_bytes");

/* The main thread, at start and on reload. */
void
p2p_limits(uint64_t per_uid, uint64_t total)
{
	budget_limits(&kept_budget, per_uid, total);
}

/* Bytes kept for all users (metrics). */
uint64_t
p2p_kept_bytes(void)
{
	return budget_held(&kept_budget, (uid_t)-1);
}

/*
 * Reserve bytes for a message kept for uid's job p: -1 with the limit it
 * would pass in err.
 */
static int
kept_reserve(struct p2p *p, uint64_t bytes, char *err, size_t errlen)
{
	if (bytes > P2P_UNEXPECTED_MAX - p->unexpected_bytes) {
		snprintf(err, errlen, "over the limit of %llu bytes of messages "
		    "not yet received in one job", (unsigned long long)
		    P2P_UNEXPECTED_MAX);
		return -1;
	}
	if (budget_take(&kept_budget, p->comm->uid, bytes, p->comm->conf.node_name,
	    err, errlen) == -1)
		return -1;
	p->unexpected_bytes += bytes;
	return 0;
}

static void
kept_release(struct p2p *p, uint64_t bytes)
{
	p->unexpected_bytes -= bytes;
	budget_give(&kept_budget, p->comm->uid, bytes);
}

static void
unexpected_free(struct p2p *p, struct unexpected *u)
{
	kept_release(p, u->m.bytes);
	bigmem_free(u->buf, u->m.bytes);
	free(u);
}

/* MCCL_ANY_TAG matches the tags a user can give (0 .. INT_MAX) only. */
static int
tag_matches(uint32_t want, uint32_t tag)
{
	return want == tag || (want == IPC_ANY_TAG && tag <= INT_MAX);
}

/* ---- matching ---- */

static void
deliver(struct p2p *p, struct op *recv, struct unexpected *u)
{
	struct comm *cm = p->comm;

	if (u->m.bytes != op_bytes(recv))
		op_complete(p, recv, MCCL_ERR_INVALID_ARGUMENT, "rank %u sent "
		    "%llu bytes with tag %u, rank %u posted a receive of %llu",
		    u->m.src, (unsigned long long)u->m.bytes, u->m.tag,
		    recv->p2p_rank, (unsigned long long)op_bytes(recv));
	else {
		if (u->m.bytes > 0)
			memcpy(recv->parts[local_part(cm, recv->p2p_rank)].recv,
			    u->buf, u->m.bytes);
		recv->p2p_source = u->m.src;
		recv->p2p_tag = u->m.tag;
		op_complete(p, recv, 0, NULL);
	}
	unexpected_free(p, u);
}

/* A receive of source want (or of any) takes messages from src. */
static int
source_matches(uint32_t want, uint32_t src)
{
	return want == src || want == IPC_ANY_SOURCE;
}

/*
 * The first message kept for recv, in arrival order: a receive from any
 * source takes the first that arrived from anyone, as in MPI.
 */
static struct unexpected *
find_unexpected(struct p2p *p, const struct op *recv)
{
	struct unexpected *u;

	TAILQ_FOREACH(u, &p->unexpected, entry)
		if (u->waiter == NULL && u->m.dst == recv->p2p_rank &&
		    source_matches(recv->desc.root, u->m.src) &&
		    tag_matches(recv->desc.tag, u->m.tag))
			return u;
	return NULL;
}

/* The first posted receive that message m completes. */
static struct op *
find_posted(struct p2p *p, const struct peer_p2p *m)
{
	struct op *op;

	TAILQ_FOREACH(op, &p->posted, entry)
		if (op->p2p_rank == m->dst &&
		    source_matches(op->desc.root, m->src) &&
		    tag_matches(op->desc.tag, m->tag))
			return op;
	return NULL;
}

static void
post_recv(struct p2p *p, struct op *recv)
{
	struct unexpected *u = find_unexpected(p, recv);

	if (u == NULL)
		TAILQ_INSERT_TAIL(&p->posted, recv, entry);
	else if (u->got < u->m.bytes)
		u->waiter = recv;	/* still arriving: finish it then */
	else {
		TAILQ_REMOVE(&p->unexpected, u, entry);
		deliver(p, recv, u);
	}
}

static struct unexpected *
keep_unexpected(struct p2p *p, const struct peer_p2p *m, char *err,
    size_t errlen)
{
	struct unexpected *u;

	if ((u = calloc(1, sizeof(*u))) == NULL ||
	    (u->buf = bigmem_alloc(m->bytes)) == NULL) {
		snprintf(err, errlen, "out of memory for a message of %llu "
		    "bytes", (unsigned long long)m->bytes);
		free(u);
		return NULL;
	}
	if (kept_reserve(p, m->bytes, err, errlen) == -1) {
		bigmem_free(u->buf, m->bytes);
		free(u);
		return NULL;
	}
	u->m = *m;
	TAILQ_INSERT_TAIL(&p->unexpected, u, entry);
	return u;
}

/* A message arrived in full (local send, or the last payload byte). */
static void
unexpected_done(struct p2p *p, struct unexpected *u)
{
	struct op *w = u->waiter;

	if (w == NULL)
		return;
	TAILQ_REMOVE(&p->unexpected, u, entry);
	deliver(p, w, u);
}

static void
send_local(struct p2p *p, struct op *send)
{
	struct comm *cm = p->comm;
	struct peer_p2p m = { send->p2p_rank, send->desc.root, send->desc.tag,
	    op_bytes(send) };
	const uint8_t *src = send->parts[local_part(cm, send->p2p_rank)].send;
	struct op *recv = find_posted(p, &m);
	struct unexpected *u;
	char why[ERR_MAX];

	if (recv != NULL && op_bytes(recv) == m.bytes) {
		TAILQ_REMOVE(&p->posted, recv, entry);
		if (m.bytes > 0)
			memcpy(recv->parts[local_part(cm, recv->p2p_rank)].recv,
			    src, m.bytes);
		recv->p2p_source = m.src;
		recv->p2p_tag = m.tag;
		op_complete(p, recv, 0, NULL);
		op_complete(p, send, 0, NULL);
		return;
	}
	if ((u = keep_unexpected(p, &m, why, sizeof(why))) == NULL) {
		op_complete(p, send, MCCL_ERR_NO_MEMORY, "send to rank %u: %s",
		    m.dst, why);
		return;
	}
	if (m.bytes > 0)
		memcpy(u->buf, src, m.bytes);
	u->got = m.bytes;
	if (recv != NULL) {		/* sizes differ: deliver() says so */
		TAILQ_REMOVE(&p->posted, recv, entry);
		u->waiter = recv;
	}
	unexpected_done(p, u);
	op_complete(p, send, 0, NULL);
}

/* ---- sending on links ---- */

/* Ask the dialler for our link to pos: -1 when out of memory. */
static int
dial_ask(struct p2p *p, uint32_t pos)
{
	struct arrival *a;

	if ((a = calloc(1, sizeof(*a))) == NULL)
		return -1;
	a->pos = pos;
	a->fd = -1;
	p->links[pos].dialing = 1;
	pthread_mutex_lock(&p->mtx);
	TAILQ_INSERT_TAIL(&p->dials, a, entry);
	pthread_cond_signal(&p->dial_cond);
	pthread_mutex_unlock(&p->mtx);
	return 0;
}

static void
send_queue(struct p2p *p, struct op *send)
{
	struct comm *cm = p->comm;
	uint32_t pos = cm->rank_pos[send->desc.root];
	struct p2p_link *l = &p->links[pos];

	if (l->dead) {
		op_complete(p, send, MCCL_ERR_PEER_FAILED, "send to rank %u: "
		    "link to node %s is down", send->desc.root, cm->names[pos]);
		return;
	}
	if (l->to == NULL && !l->dialing && dial_ask(p, pos) == -1) {
		op_complete(p, send, MCCL_ERR_NO_MEMORY, "send to rank %u: "
		    "out of memory for a link to node %s", send->desc.root,
		    cm->names[pos]);
		return;
	}
	TAILQ_INSERT_TAIL(&l->sendq, send, entry);
}

static void
tx_header(struct p2p_link *l, const struct op *send)
{
	struct peer_p2p m = { send->p2p_rank, send->desc.root, send->desc.tag,
	    op_bytes(send) };

	wire_encode(&peer_proto, PEER_P2P, &m, NULL, 0, l->txhdr,
	    sizeof(l->txhdr));
	l->txoff = 0;
}

/* Push the head message out; 1 when it moved, -1 on a link error. */
static int
tx_step(struct p2p *p, struct p2p_link *l)
{
	struct op *op = TAILQ_FIRST(&l->sendq);
	const struct op_part *part;
	struct iovec iov[2];
	uint64_t total;
	ssize_t n;
	int niov = 0;

	if (op == NULL || l->to == NULL)
		return 0;
	part = &op->parts[local_part(p->comm, op->p2p_rank)];
	if (l->txoff == 0) {
		tx_header(l, op);
		if (l->to->tp->mem_add != NULL && part->send_seg != NULL)
			link_mem_add(part->send_seg, part->send_seg->base,
			    part->send_seg->size);
	}
	total = P2P_HDR_LEN + op_bytes(op);
	if (l->txoff < P2P_HDR_LEN)
		iov[niov++] = (struct iovec){ l->txhdr + l->txoff,
		    P2P_HDR_LEN - l->txoff };
	if (total > P2P_HDR_LEN) {
		uint64_t off = l->txoff > P2P_HDR_LEN ? l->txoff - P2P_HDR_LEN : 0;
		uint64_t left = op_bytes(op) - off;

		iov[niov++] = (struct iovec){ part->send + off,
		    left > IO_MAX ? IO_MAX : left };
	}
	if ((n = link_send(l->to, iov, niov)) < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	count_bytes(DATA_SENT, p->comm->node_index, (uint32_t)(l - p->links),
	    (size_t)n);
	l->txoff += (uint64_t)n;
	if (l->txoff == total) {
		TAILQ_REMOVE(&l->sendq, op, entry);
		l->txoff = 0;
		op_complete(p, op, 0, NULL);
	}
	return 1;
}

/* ---- receiving on links ---- */

/* The header of a message from the node at pos is in: where does it go? */
static int
rx_start(struct p2p *p, struct p2p_link *l, uint32_t pos, char *err,
    size_t errlen)
{
	const struct comm *cm = p->comm;
	const struct wire_type *t;
	struct wire_hdr h;
	char why[ERR_MAX];

	if (wire_hdr_check(&peer_proto, l->rxhdr, &h, &t, err, errlen) == -1 ||
	    wire_decode(t, l->rxhdr + WIRE_HDR_LEN, h.len, &l->rx, NULL, NULL,
	    err, errlen) == -1)
		return -1;
	if (h.type != PEER_P2P || h.len != P2P_HDR_LEN - WIRE_HDR_LEN ||
	    l->rx.src >= cm->nranks || cm->rank_pos[l->rx.src] != pos ||
	    l->rx.dst >= cm->nranks || cm->rank_pos[l->rx.dst] != cm->me) {
		snprintf(err, errlen, "bad message header (type %u, rank %u to "
		    "rank %u)", h.type, l->rx.src, l->rx.dst);
		return -1;
	}
	l->rxgot = 0;
	l->rxux = NULL;
	if ((l->rxop = find_posted(p, &l->rx)) != NULL &&
	    op_bytes(l->rxop) == l->rx.bytes) {
		TAILQ_REMOVE(&p->posted, l->rxop, entry);
		l->rxdst = l->rxop->parts[local_part(cm, l->rxop->p2p_rank)].recv;
		l->rxop->p2p_source = l->rx.src;
		l->rxop->p2p_tag = l->rx.tag;
		return 0;
	}
	l->rxop = NULL;
	if ((l->rxux = keep_unexpected(p, &l->rx, why, sizeof(why))) == NULL) {
		snprintf(err, errlen, "message of %llu bytes from rank %u to "
		    "rank %u: %s", (unsigned long long)l->rx.bytes, l->rx.src,
		    l->rx.dst, why);
		return -1;
	}
	l->rxdst = l->rxux->buf;
	return 0;
}

static void
rx_finish(struct p2p *p, struct p2p_link *l)
{
	struct op *recv;

	l->rxhdr_got = 0;
	if (l->rxop != NULL) {
		op_complete(p, l->rxop, 0, NULL);
		l->rxop = NULL;
		return;
	}
	l->rxux->got = l->rx.bytes;
	if (l->rxux->waiter == NULL && (recv = find_posted(p, &l->rx)) != NULL) {
		TAILQ_REMOVE(&p->posted, recv, entry);
		l->rxux->waiter = recv;		/* sizes differ: an error */
	}
	unexpected_done(p, l->rxux);
	l->rxux = NULL;
}

/* Read what is there; 1 when it moved, 0 if nothing, -1 on an error. */
static int
rx_step(struct p2p *p, struct p2p_link *l, uint32_t pos, char *err,
    size_t errlen)
{
	uint8_t *dst;
	size_t want;
	ssize_t n = 0;

	if (l->from == NULL)
		return 0;
	if (l->rxhdr_got < P2P_HDR_LEN) {
		dst = l->rxhdr + l->rxhdr_got;
		want = P2P_HDR_LEN - l->rxhdr_got;
	} else {
		dst = l->rxdst + l->rxgot;
		want = l->rx.bytes - l->rxgot > IO_MAX ? IO_MAX :
		    (size_t)(l->rx.bytes - l->rxgot);
	}
	if (want > 0 && (n = link_recv(l->from, &(struct iovec){ dst, want },
	    1)) <= 0) {
		char why[LINK_WHY_MAX + 32];

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		snprintf(err, errlen, "link from node %s %s", p->comm->names[pos],
		    link_strerror(l->from, n == 0 ? 0 : errno, why,
		    sizeof(why)));
		return -1;
	}
	count_bytes(DATA_RECEIVED, p->comm->node_index, pos, (size_t)n);
	if (l->rxhdr_got < P2P_HDR_LEN) {
		if ((l->rxhdr_got += (size_t)n) < P2P_HDR_LEN)
			return 1;
		if (rx_start(p, l, pos, err, errlen) == -1)
			return -1;
	} else
		l->rxgot += (uint64_t)n;
	if (l->rxgot == l->rx.bytes)
		rx_finish(p, l);
	return 1;
}

/* ---- failure ---- */

/* Fail every op that involves the node at pos (all: UINT32_MAX); count. */
static int
fail_ops(struct p2p *p, uint32_t pos, int code, const char *why)
{
	struct comm *cm = p->comm;
	struct op *op, *next;
	int n = 0;

	for (uint32_t q = 0; q < cm->nnodes; q++) {
		if (pos != UINT32_MAX && q != pos)
			continue;
		while ((op = TAILQ_FIRST(&p->links[q].sendq)) != NULL) {
			TAILQ_REMOVE(&p->links[q].sendq, op, entry);
			op_complete(p, op, code, "%s", why);
			n++;
		}
	}
	for (op = TAILQ_FIRST(&p->posted); op != NULL; op = next) {
		next = TAILQ_NEXT(op, entry);
		/* from any source: the job is broken, it may never come */
		if (pos == UINT32_MAX || op->desc.root == IPC_ANY_SOURCE ||
		    cm->rank_pos[op->desc.root] == pos) {
			TAILQ_REMOVE(&p->posted, op, entry);
			op_complete(p, op, code, "%s", why);
			n++;
		}
	}
	return n;
}

static void
link_fail(struct p2p *p, uint32_t pos, const char *why)
{
	struct p2p_link *l = &p->links[pos];
	int hurt = 0;

	l->dead = 1;
	if (l->rxop != NULL) {
		op_complete(p, l->rxop, MCCL_ERR_PEER_FAILED, "%s", why);
		l->rxop = NULL;
		hurt = 1;
	}
	hurt += fail_ops(p, pos, MCCL_ERR_PEER_FAILED, why);
	/* A node whose ranks all left closes its links: news only if it hurt. */
	if (hurt)
		log_warnx("job %s: p2p: %s", p->comm->name, why);
	else
		log_debug("job %s: p2p: %s", p->comm->name, why);
}

/* Fail the ops whose deadline passed; the next deadline, 0 if none. */
static uint64_t
expire(struct p2p *p, uint64_t now)
{
	struct comm *cm = p->comm;
	uint64_t next = 0;
	struct op *op, *nop;

	for (op = TAILQ_FIRST(&p->posted); op != NULL; op = nop) {
		nop = TAILQ_NEXT(op, entry);
		if (op->deadline_ns <= now && op->desc.root == IPC_ANY_SOURCE) {
			TAILQ_REMOVE(&p->posted, op, entry);
			op_complete(p, op, MCCL_ERR_TIMEOUT, "rank %u: "
			    "timeout waiting for a message from any rank with "
			    "tag %d", op->p2p_rank, (int)op->desc.tag);
		} else if (op->deadline_ns <= now) {
			TAILQ_REMOVE(&p->posted, op, entry);
			op_complete(p, op, MCCL_ERR_TIMEOUT, "rank %u: "
			    "timeout waiting for a message from rank %u (node "
			    "%s) with tag %d", op->p2p_rank, op->desc.root,
			    cm->names[cm->rank_pos[op->desc.root]],
			    (int)op->desc.tag);
		} else if (next == 0 || op->deadline_ns < next)
			next = op->deadline_ns;
	}
	for (uint32_t q = 0; q < cm->nnodes; q++)
		if ((op = TAILQ_FIRST(&p->links[q].sendq)) != NULL) {
			if (op->deadline_ns <= now)
				link_fail(p, q, p->links[q].to == NULL ?
				    "send: no link to the node before the "
				    "deadline" : "send: node took no data "
				    "before the deadline");
			else if (next == 0 || op->deadline_ns < next)
				next = op->deadline_ns;
		}
	return next;
}

/* ---- links, made on a pair's first message ---- */

static uint64_t links_open;	/* of every job, each way (metrics) */

/* Send/recv links open on this node, all jobs (metrics). */
uint64_t
p2p_links_open(void)
{
	return __atomic_load_n(&links_open, __ATOMIC_RELAXED);
}

static void
link_install(struct link **slot, struct link *l)
{
	*slot = l;
	__atomic_add_fetch(&links_open, 1, __ATOMIC_RELAXED);
}

static void
link_uninstall(struct link **slot)
{
	if (*slot == NULL)
		return;
	link_close(*slot);
	*slot = NULL;
	__atomic_sub_fetch(&links_open, 1, __ATOMIC_RELAXED);
}

static void
p2p_wake(struct p2p *p)
{
	uint64_t one = 1;

	if (write(p->wake_fd, &one, sizeof(one)) == -1)
		log_warn("job %s: p2p wake", p->comm->name);
}

/* Dialler: our link to the node at pos, set up; or NULL with err. */
static struct link *
dial_link(struct p2p *p, uint32_t pos, char *err, size_t errlen)
{
	const struct comm *cm = p->comm;
	uint32_t ms = cm->conf.tun.connect_timeout_ms;
	struct link_setup s;
	struct link *l = NULL;
	char why[ERR_MAX] = "";

	engine_link_setup(cm, pos, cm->conf.tun.link_choice, &s);
	if ((s.fd = dial_data_link(&cm->conf.nodes[pos].addr,
	    cm->conf.node_index, s.node, cm->id, PEER_STREAM_P2P, p->stop_fd,
	    ms_from_now(ms), why, sizeof(why))) == -1 ||
	    (l = link_make(&s, p->stop_fd, ms_from_now(ms), why,
	    sizeof(why))) == NULL)
		snprintf(err, errlen, "cannot open a send/recv link to node "
		    "%s: %s", cm->names[pos], why);
	return l;
}

/* The dialler thread: one dial at a time, in the order asked. */
static void *
dialler_main(void *arg)
{
	struct p2p *p = arg;
	struct arrival *a;

	pthread_mutex_lock(&p->mtx);
	while (!p->quit) {
		if ((a = TAILQ_FIRST(&p->dials)) == NULL) {
			pthread_cond_wait(&p->dial_cond, &p->mtx);
			continue;
		}
		TAILQ_REMOVE(&p->dials, a, entry);
		pthread_mutex_unlock(&p->mtx);
		a->link = dial_link(p, a->pos, a->err, sizeof(a->err));
		pthread_mutex_lock(&p->mtx);
		TAILQ_INSERT_TAIL(&p->arrivals, a, entry);
		p2p_wake(p);
	}
	/* Under the lock: the main thread frees the event only after it. */
	p->dialler_exited = 1;
	engine_notify(p->comm);
	pthread_mutex_unlock(&p->mtx);
	return NULL;
}

/* p2p thread: a link the dialler made, or one accepted, to set up. */
static void
take_arrival(struct p2p *p, struct arrival *a)
{
	const struct comm *cm = p->comm;
	struct p2p_link *l = &p->links[a->pos];
	struct link_setup s;
	char why[ERR_MAX] = "", err[ERR_MAX];

	engine_link_setup(cm, a->pos, cm->conf.tun.link_choice, &s);
	s.fd = a->fd;

	if (a->fd == -1) {
		l->dialing = 0;
		if (a->link == NULL)
			link_fail(p, a->pos, a->err);
		else if (l->dead)
			link_close(a->link);
		else
			link_install(&l->to, a->link);
	} else if (l->from != NULL || l->dead) {
		if (l->from != NULL)
			log_warnx("job %s: a second send/recv link from node "
			    "%s: closed", cm->name, cm->names[a->pos]);
		close(a->fd);
	} else if ((a->link = link_make(&s, p->stop_fd, ms_from_now(
	    cm->conf.tun.connect_timeout_ms), why, sizeof(why))) == NULL) {
		snprintf(err, sizeof(err), "send/recv link from node %s: %s",
		    cm->names[a->pos], why);
		link_fail(p, a->pos, err);
	} else
		link_install(&l->from, a->link);
	free(a);
}

/* Whatever the dialler and the main thread left: closed unused. */
static void
arrivals_free(struct arrival_list *list)
{
	struct arrival *a;

	while ((a = TAILQ_FIRST(list)) != NULL) {
		TAILQ_REMOVE(list, a, entry);
		if (a->fd != -1)
			close(a->fd);
		link_close(a->link);
		free(a);
	}
}

/* ---- the thread ---- */

static void
take_inbox(struct p2p *p)
{
	struct op_list in = TAILQ_HEAD_INITIALIZER(in);
	struct arrival_list arrived = TAILQ_HEAD_INITIALIZER(arrived);
	struct comm *cm = p->comm;
	struct arrival *a;
	struct op *op;
	uint64_t v;

	if (read(p->wake_fd, &v, sizeof(v)) == -1 && errno != EAGAIN)
		log_warn("job %s: p2p wake", cm->name);
	pthread_mutex_lock(&p->mtx);
	TAILQ_CONCAT(&in, &p->inbox, entry);
	TAILQ_CONCAT(&arrived, &p->arrivals, entry);
	pthread_mutex_unlock(&p->mtx);
	while ((a = TAILQ_FIRST(&arrived)) != NULL) {
		TAILQ_REMOVE(&arrived, a, entry);
		take_arrival(p, a);
	}
	while ((op = TAILQ_FIRST(&in)) != NULL) {
		TAILQ_REMOVE(&in, op, entry);
		if (p->aborted)
			op_complete(p, op, MCCL_ERR_ABORTED, "job aborted");
		else if (op->desc.coll == COLL_RECV)
			post_recv(p, op);
		else if (cm->rank_pos[op->desc.root] == cm->me)
			send_local(p, op);
		else
			send_queue(p, op);
	}
}

static int
links_step(struct p2p *p)
{
	char err[ERR_MAX];
	int moved = 0, rc;

	for (uint32_t q = 0; q < p->comm->nnodes; q++) {
		struct p2p_link *l = &p->links[q];

		if (q == p->comm->me || l->dead)
			continue;
		if ((rc = tx_step(p, l)) == -1) {
			char why[LINK_WHY_MAX + 32];

			snprintf(err, sizeof(err), "link to node %s %s",
			    p->comm->names[q], link_strerror(l->to, errno, why,
			    sizeof(why)));
			link_fail(p, q, err);
			continue;
		}
		moved |= rc;
		if ((rc = rx_step(p, l, q, err, sizeof(err))) == -1)
			link_fail(p, q, err);
		else
			moved |= rc;
	}
	return moved;
}

/*
 * A link with the node at q hung up: `to` while it had nothing to send, or
 * `from` on a transport whose data arrives apart from its connection.
 */
static void
p2p_hangup(struct p2p *p, uint32_t q, const struct link *l)
{
	char why[LINK_WHY_MAX + 32], err[ERR_MAX];

	snprintf(err, sizeof(err), "link %s node %s %s",
	    l == p->links[q].to ? "to" : "from", p->comm->names[q],
	    link_strerror(l, link_hangup_errno(l), why, sizeof(why)));
	link_fail(p, q, err);
}

/* What a pollfd of p2p_wait watches: the link and its node's position. */
struct p2p_slot {
	struct link	*link;
	uint32_t	 q;
};

/*
 * Arm a link: up to two pollfds at pfd + *n, each marked with its link
 * and the link's position; 0 when it can move now.
 */
static int
arm_link(struct link *l, short want, uint32_t q, struct pollfd *pfd,
    struct p2p_slot *slot, int *n)
{
	int armed;

	if (l == NULL)
		return 1;
	if ((armed = link_arm(l, want, pfd + *n)) == 0)
		return 0;
	for (int i = 0; i < armed; i++)
		slot[(*n)++] = (struct p2p_slot){ l, q };
	return armed;
}

/* Sleep until something can move. */
static void
p2p_wait(struct p2p *p, uint64_t next_deadline)
{
	const struct comm *cm = p->comm;
	struct pollfd *pfd;
	struct p2p_slot *slot;
	int n = 0, first, timeout = -1, ready = 0;
	uint64_t now = now_ns();

	pfd = calloc(4 * cm->nnodes + 2, sizeof(*pfd));
	slot = calloc(4 * cm->nnodes + 2, sizeof(*slot));
	if (pfd == NULL || slot == NULL)
		goto out;
	pfd[n++] = (struct pollfd){ p->wake_fd, POLLIN, 0 };
	if (!p->aborted)
		pfd[n++] = (struct pollfd){ cm->eng->abort_fd, POLLIN, 0 };
	for (uint32_t q = 0; q < cm->nnodes; q++) {
		struct p2p_link *l = &p->links[q];

		if (l->dead)
			continue;
		if (arm_link(l->from, POLLIN, q, pfd, slot, &n) == 0 ||
		    arm_link(l->to, TAILQ_EMPTY(&l->sendq) ? POLLRDHUP :
		    POLLOUT, q, pfd, slot, &n) == 0)
			goto out;	/* it can move now */
	}
	if (next_deadline != 0)
		timeout = next_deadline <= now ? 0 :
		    (int)((next_deadline - now) / 1000000 + 1);
	poll(pfd, (nfds_t)n, timeout);
	/* What a peer sent before it hung up is taken first. */
	first = p->aborted ? 1 : 2;
	ready = link_polled_ready(pfd + first, (size_t)(n - first));
	for (int i = first; i < n && !ready; i++)
		if (link_polled_hangup(&pfd[i]) && !p->links[slot[i].q].dead)
			p2p_hangup(p, slot[i].q, slot[i].link);
	if (!p->aborted && pfd[1].revents != 0) {
		p->aborted = 1;
		fail_ops(p, UINT32_MAX, MCCL_ERR_ABORTED, "job aborted");
	}
out:
	free(pfd);
	free(slot);
}

static int
p2p_quitting(struct p2p *p)
{
	int quit;

	pthread_mutex_lock(&p->mtx);
	quit = p->quit;
	pthread_mutex_unlock(&p->mtx);
	return quit;
}

static void *
p2p_main(void *arg)
{
	struct p2p *p = arg;

	for (;;) {
		take_inbox(p);
		while (links_step(p))
			;
		/*
		 * Between take_inbox draining wake_fd and the sleep: a
		 * p2p_quit before this sees quit set, one after it leaves
		 * wake_fd readable.  Checked after the sleep instead, a stop
		 * whose wake-up take_inbox drained left the thread asleep.
		 */
		if (p2p_quitting(p))
			break;
		p2p_wait(p, expire(p, now_ns()));
	}
	/* Under the lock: the main thread frees the event only after it. */
	pthread_mutex_lock(&p->mtx);
	p->exited = 1;
	engine_notify(p->comm);
	pthread_mutex_unlock(&p->mtx);
	return NULL;
}

/* ---- the main thread's side ---- */

static void
p2p_free(struct p2p *p)
{
	if (p->wake_fd != -1)
		close(p->wake_fd);
	if (p->stop_fd != -1)
		close(p->stop_fd);
	free(p->links);
	free(p);
}

/* Before engine_start. */
int
p2p_init(struct comm *cm, char *err, size_t errlen)
{
	struct p2p *p;

	if ((p = calloc(1, sizeof(*p))) == NULL) {
		snprintf(err, errlen, "cannot set up send/recv: out of memory");
		return -1;
	}
	p->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	p->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p->wake_fd == -1 || p->stop_fd == -1 ||
	    (p->links = calloc(cm->nnodes, sizeof(*p->links))) == NULL) {
		snprintf(err, errlen, "cannot set up send/recv: %s",
		    strerror(errno));
		p2p_free(p);
		return -1;
	}
	p->comm = cm;
	TAILQ_INIT(&p->inbox);
	TAILQ_INIT(&p->dials);
	TAILQ_INIT(&p->arrivals);
	TAILQ_INIT(&p->posted);
	TAILQ_INIT(&p->unexpected);
	for (uint32_t q = 0; q < cm->nnodes; q++)
		TAILQ_INIT(&p->links[q].sendq);
	pthread_mutex_init(&p->mtx, NULL);
	pthread_cond_init(&p->dial_cond, NULL);
	cm->p2p = p;
	return 0;
}

/* After engine_start: the thread needs the job's abort fd. */
int
p2p_start(struct comm *cm, char *err, size_t errlen)
{
	struct p2p *p = cm->p2p;

	if ((errno = pthread_create(&p->thread, NULL, p2p_main, p)) != 0) {
		snprintf(err, errlen, "cannot start the p2p thread: %s",
		    strerror(errno));
		return -1;
	}
	p->started = 1;
	if ((errno = pthread_create(&p->dialler, NULL, dialler_main, p)) !=
	    0) {
		snprintf(err, errlen, "cannot start the p2p dialler: %s",
		    strerror(errno));
		return -1;
	}
	p->dialler_started = 1;
	return 0;
}

void
p2p_submit(struct comm *cm, struct op *op)
{
	struct p2p *p = cm->p2p;

	pthread_mutex_lock(&p->mtx);
	TAILQ_INSERT_TAIL(&p->inbox, op, entry);
	pthread_mutex_unlock(&p->mtx);
	p2p_wake(p);
}

/*
 * An accepted send/recv link from the node at position pos, whose first
 * message to this node follows: the thread sets it up.  -1 when not taken
 * (the caller closes fd).
 */
int
p2p_adopt_link(struct comm *cm, uint32_t pos, int fd)
{
	struct p2p *p = cm->p2p;
	struct arrival *a;
	int taken = 0;

	if (p == NULL || pos >= cm->nnodes || pos == cm->me ||
	    (a = calloc(1, sizeof(*a))) == NULL)
		return -1;
	a->pos = pos;
	a->fd = fd;
	pthread_mutex_lock(&p->mtx);
	if (!p->quit) {
		TAILQ_INSERT_TAIL(&p->arrivals, a, entry);
		taken = 1;
	}
	pthread_mutex_unlock(&p->mtx);
	if (!taken) {
		free(a);
		return -1;
	}
	p2p_wake(p);
	return 0;
}

/* Tell the threads to stop; each wakes the main thread when it has. */
void
p2p_quit(struct comm *cm)
{
	struct p2p *p = cm->p2p;
	uint64_t one = 1;

	if (p == NULL)
		return;
	pthread_mutex_lock(&p->mtx);
	p->quit = 1;
	pthread_cond_signal(&p->dial_cond);
	pthread_mutex_unlock(&p->mtx);
	if (write(p->stop_fd, &one, sizeof(one)) == -1)
		log_warn("job %s: stopping the p2p dialler", cm->name);
	p2p_wake(p);
}

/* The threads have returned, or never ran: p2p_finish won't block. */
int
p2p_exited(struct comm *cm)
{
	struct p2p *p = cm->p2p;
	int exited;

	if (p == NULL)
		return 1;
	pthread_mutex_lock(&p->mtx);
	exited = (!p->started || p->exited) &&
	    (!p->dialler_started || p->dialler_exited);
	pthread_mutex_unlock(&p->mtx);
	return exited;
}

/*
 * After p2p_quit: join the threads (blocks until they return, see
 * engine_finish); ops they still held go back through the engine's out
 * queue.
 */
void
p2p_finish(struct comm *cm)
{
	struct p2p *p = cm->p2p;
	struct unexpected *u;

	if (p == NULL)
		return;
	if (p->started)
		pthread_join(p->thread, NULL);
	if (p->dialler_started)
		pthread_join(p->dialler, NULL);
	arrivals_free(&p->dials);
	arrivals_free(&p->arrivals);
	p->aborted = 1;
	fail_ops(p, UINT32_MAX, MCCL_ERR_ABORTED, "job ended");
	take_inbox(p);
	for (uint32_t q = 0; q < cm->nnodes; q++) {
		if (p->links[q].rxop != NULL)
			engine_op_done(cm, p->links[q].rxop);
		link_uninstall(&p->links[q].to);
		link_uninstall(&p->links[q].from);
	}
	while ((u = TAILQ_FIRST(&p->unexpected)) != NULL) {
		TAILQ_REMOVE(&p->unexpected, u, entry);
		if (u->waiter != NULL)
			engine_op_done(cm, u->waiter);
		unexpected_free(p, u);
	}
	pthread_mutex_destroy(&p->mtx);
	pthread_cond_destroy(&p->dial_cond);
	p2p_free(p);
	cm->p2p = NULL;
}
