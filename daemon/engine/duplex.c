/*
 * duplex.c: the frame engine under the node-level algorithms (ring.c,
 * allreduce.c).
 * Seen from one node, every algorithm has the same shape: send its own
 * block (if any) to the right neighbour, then pass on, in order, the blocks
 * that arrive from the left, reducing some of them on the way.  This engine
 * drives both directions of a lane at once, frame by frame, so a chunk that
 * arrives from the left leaves to the right as soon as it is final; an op
 * of several lanes runs them side by side on one thread, or a lane a
 * thread on the job's crew (duplex_parts).
 */
#include <sys/uio.h>

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "engine/duplex.h"
#include "engine/xfer.h"
#include "engine/crew.h"
#include "engine/reduce.h"
#include "spin.h"
#include "transport/transport.h"

#define IO_MAX		((size_t)1 << 30)	/* bytes per send or receive call */
#define SEQ(x)		((unsigned long long)(x)->hdr.seq)

/* A receive is one frame's payload plus the next header: under IO_MAX. */
_Static_assert(PEER_DATA_MAX + WIRE_HDR_LEN <= IO_MAX, "frame over IO_MAX");

/* The bytes each node's data links carried, by way (DATA_SENT, ...). */
static uint64_t data_carried[2][LINK_NODES_MAX];

/* Add n bytes carried one way to the node at position pos (any thread). */
void
count_bytes(int way, const uint32_t *node_index, uint32_t pos, size_t n)
{
	if (node_index != NULL)
		__atomic_fetch_add(&data_carried[way][node_index[pos]], n,
		    __ATOMIC_RELAXED);
}

/* The bytes node's data links carried one way, for the control plane. */
uint64_t
data_bytes(uint32_t node, int way)
{
	return node < LINK_NODES_MAX ?
	    __atomic_load_n(&data_carried[way][node], __ATOMIC_RELAXED) : 0;
}

int
duplex_fail(struct xfer *x, int code, const char *fmt, ...)
{
	va_list ap;

	x->code = code;
	va_start(ap, fmt);
	vsnprintf(x->err, sizeof(x->err), fmt, ap);
	va_end(ap);
	return -1;
}

const char *
duplex_node(const struct xfer *x, uint32_t pos)
{
	if (x->names == NULL || x->names[pos] == NULL)
		return "?";
	return x->names[pos];
}

static int
io_again(int err)
{
	return err == EAGAIN || err == EWOULDBLOCK || err == EINTR;
}

/* err 0: the peer closed the link. */
static int
link_error(struct xfer *x, uint32_t peer, const struct link *l, int err)
{
	char buf[LINK_WHY_MAX + 32];

	return duplex_fail(x, MCCL_ERR_PEER_FAILED, "link to node %s %s",
	    duplex_node(x, peer), link_strerror(l, err, buf, sizeof(buf)));
}

/* ---- frames ---- */

/* Cut the next frame; 0 when the range is done.  Empty blocks yield none. */
static int
walk_next(const struct plan *p, struct walk *w, struct frame *f)
{
	size_t off = 0, len = 0;

	for (; w->blk < w->end; w->blk++, w->off = 0) {
		p->block(p, w->blk, &off, &len);
		if (w->off < len)
			break;
	}
	if (w->blk >= w->end)
		return 0;
	f->ptr = (w->blk == 0 ? p->src : p->buf) + off + w->off;
	f->len = MIN(p->chunk, len - w->off);
	f->type = PEER_DATA;
	f->reduce = w->blk >= 1 && w->blk <= p->nreduce;
	f->fwd = w->blk >= 1;
	w->off += f->len;
	return 1;
}

/* ---- sending ---- */

static int
tx_init(struct xfer *x, struct tx *tx, const struct plan *p, size_t nown,
    size_t nsend, uint32_t peer)
{
	uint8_t enc[WIRE_HDR_LEN + OPHDR_LEN];

	memset(tx, 0, sizeof(*tx));
	if ((tx->active = nsend > 0) == 0)
		return 0;
	tx->peer = peer;
	tx->link = p->links[tx->peer];
	tx->w.blk = 1 - nown;
	tx->w.end = tx->w.blk + nsend;
	if (wire_encode(&peer_proto, PEER_DATA_OPHDR, &x->hdr, NULL, 0, enc,
	    sizeof(enc)) != sizeof(enc))
		return duplex_fail(x, MCCL_ERR_INTERNAL, "cannot encode the "
		    "header of op seq %llu", SEQ(x));
	memcpy(tx->q[0].hdr, enc, WIRE_HDR_LEN);
	memcpy(tx->opbody, enc + WIRE_HDR_LEN, OPHDR_LEN);
	tx->q[0].data = tx->opbody;
	tx->q[0].len = OPHDR_LEN;
	tx->qlen = 1;
	tx->last_ns = now_ns();
	return 0;
}

/* Queue every frame that may leave now: forwards wait for their arrival. */
static void
tx_fill(struct tx *tx, const struct plan *p, const struct rx *rx)
{
	struct wire_hdr h = { PEER_MAGIC, PEER_VERSION, PEER_DATA, 0 };
	struct txent *e;

	while (tx->qlen < TXQ) {
		if (!tx->has_next &&
		    (tx->has_next = walk_next(p, &tx->w, &tx->next)) == 0)
			return;
		if (tx->next.fwd && tx->nfwd >= rx->done)
			return;
		e = &tx->q[(tx->qhead + tx->qlen++) % TXQ];
		h.len = (uint32_t)tx->next.len;
		wire_hdr_encode(e->hdr, &h);
		e->data = tx->next.ptr;
		e->len = tx->next.len;
		tx->nfwd += tx->next.fwd;
		tx->has_next = 0;
	}
}

static int
iov_add(struct iovec *iov, uint8_t *base, size_t len, size_t *room)
{
	if (*room == 0 || len == 0)
		return 0;
	iov->iov_base = base;
	iov->iov_len = MIN(len, *room);
	*room -= iov->iov_len;
	return 1;
}

/* Headers and payloads of the queued frames, from where the last send ended. */
static size_t
tx_iov(struct tx *tx, struct iovec *iov)
{
	size_t k, n = 0, skip = tx->qoff, room = IO_MAX;
	struct txent *e;

	for (k = 0; k < tx->qlen; k++, skip = 0) {
		e = &tx->q[(tx->qhead + k) % TXQ];
		if (skip < WIRE_HDR_LEN)
			n += iov_add(&iov[n], e->hdr + skip, WIRE_HDR_LEN - skip,
			    &room);
		skip = skip < WIRE_HDR_LEN ? 0 : skip - WIRE_HDR_LEN;
		n += iov_add(&iov[n], e->data + skip, e->len - skip, &room);
	}
	return n;
}

static void
tx_consume(struct tx *tx, size_t n)
{
	size_t rest;

	while (n > 0) {
		rest = WIRE_HDR_LEN + tx->q[tx->qhead].len - tx->qoff;
		if (n < rest) {
			tx->qoff += n;
			return;
		}
		n -= rest;
		tx->qoff = 0;
		tx->qhead = (tx->qhead + 1) % TXQ;
		tx->qlen--;
	}
}

static int
tx_step(struct xfer *x, struct tx *tx, const struct plan *p,
    const struct rx *rx, int *moved)
{
	struct iovec iov[2 * TXQ];
	ssize_t n;

	if (!tx->active)
		return 0;
	tx_fill(tx, p, rx);
	if (tx->qlen == 0)
		return 0;
	if ((n = link_send(tx->link, iov, (int)tx_iov(tx, iov))) == -1)
		return io_again(errno) ? 0 : link_error(x, tx->peer, tx->link,
		    errno);
	count_bytes(DATA_SENT, x->node_index, tx->peer, (size_t)n);
	tx_consume(tx, (size_t)n);
	tx->last_ns = now_ns();
	*moved = 1;
	return 0;
}

static int
tx_complete(const struct tx *tx)
{
	return !tx->active ||
	    (tx->qlen == 0 && !tx->has_next && tx->w.blk >= tx->w.end);
}

/* ---- receiving ---- */

/* cur becomes nxt; a reduced frame lands in the scratch half not in use. */
static void
rx_advance(struct rx *rx, const struct plan *p)
{
	rx->cur = rx->nxt;
	rx->has_cur = rx->has_nxt;
	rx->got = 0;
	if (rx->has_cur && rx->cur.reduce)
		rx->slot = p->scratch + (rx->nred++ % 2) * p->chunk;
	rx->has_nxt = rx->has_cur && walk_next(p, &rx->w, &rx->nxt);
}

static void
rx_init(struct rx *rx, const struct plan *p, size_t nrecv, uint32_t peer)
{
	memset(rx, 0, sizeof(*rx));
	if ((rx->active = nrecv > 0) == 0)
		return;
	rx->peer = peer;
	rx->link = p->links[rx->peer];
	rx->w.blk = 1;
	rx->w.end = 1 + nrecv;
	rx->nxt = (struct frame){ rx->opbody, OPHDR_LEN, PEER_DATA_OPHDR, 0, 0 };
	rx->has_nxt = 1;
	rx_advance(rx, p);
	rx->last_ns = now_ns();
}

static int
rx_complete(const struct rx *rx)
{
	return !rx->active || (!rx->has_cur && rx->npend == 0);
}

/* The payload can't start while both scratch halves await reduction. */
static int
rx_slot_busy(const struct rx *rx)
{
	return rx->cur.reduce && rx->hdr_got == WIRE_HDR_LEN && rx->npend == 2;
}

/*
 * Read the rest of the header, the rest of the payload straight into its
 * place and the next frame's header, in one call: a small frame takes one.
 * The payload counts only once its header has passed (rx_consume).  Never
 * a byte past this operation's last frame; while both scratch halves await
 * reduction, the header alone.
 */
static ssize_t
rx_recv(struct rx *rx)
{
	struct iovec iov[3];
	int n = 0;

	if (rx->hdr_got < WIRE_HDR_LEN) {
		iov[n++] = (struct iovec){ rx->hdr + rx->hdr_got,
		    WIRE_HDR_LEN - rx->hdr_got };
		if (rx->cur.reduce && rx->npend == 2)
			goto out;
	}
	iov[n++] = (struct iovec){ (rx->cur.reduce ? rx->slot : rx->cur.ptr) +
	    rx->got, rx->cur.len - rx->got };
	if (rx->has_nxt)
		iov[n++] = (struct iovec){ rx->nhdr, WIRE_HDR_LEN };
out:
	return link_recv(rx->link, iov, n);
}

static int
rx_check_hdr(struct xfer *x, const struct rx *rx)
{
	const struct wire_type *t, *want;
	struct wire_hdr h;
	char why[128];

	want = wire_type_lookup(&peer_proto, rx->cur.type);
	if (wire_hdr_check(&peer_proto, rx->hdr, &h, &t, why, sizeof(why)) == -1)
		return duplex_fail(x, MCCL_ERR_PROTOCOL, "bad frame from node %s "
		    "(op seq %llu): %s", duplex_node(x, rx->peer), SEQ(x), why);
	if (h.type != rx->cur.type)
		return duplex_fail(x, MCCL_ERR_PROTOCOL, "node %s sent %s, "
		    "expected %s (op seq %llu)", duplex_node(x, rx->peer),
		    t->name, want->name, SEQ(x));
	if (h.len != rx->cur.len)
		return duplex_fail(x, MCCL_ERR_PROTOCOL, "node %s sent a %u-byte "
		    "%s, expected %zu bytes (op seq %llu)",
		    duplex_node(x, rx->peer), h.len, t->name, rx->cur.len, SEQ(x));
	return 0;
}

static void
str_add(char *s, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
str_add(char *s, size_t size, const char *fmt, ...)
{
	size_t len = strlen(s);
	va_list ap;

	va_start(ap, fmt);
	if (len < size)
		vsnprintf(s + len, size - len, fmt, ap);
	va_end(ap);
}

/* "allreduce float32 sum count 12": the fields that matter to the collective. */
static void
op_desc(const struct peer_ophdr *h, char *s, size_t size)
{
	enum { D = 1, O = 2, C = 4, R = 8 };
	static const uint8_t show[COLL_MAX + 1] = { 0, D | O | C, D | C | R,
	    0, D | O | C | R, D | C, D | O | C, D | C, 0, 0, D | C | R,
	    D | C | R, D | C, D };
	int f = h->coll <= COLL_MAX ? show[h->coll] : D | O | C | R;

	s[0] = '\0';
	if (h->coll >= 1 && h->coll <= COLL_MAX)
		str_add(s, size, "%s", proto_coll_name(h->coll));
	else
		str_add(s, size, "collective %u", h->coll);
	if (f & D)
		str_add(s, size, " %s", dtype_name(h->dtype));
	if (f & O)
		str_add(s, size, " %s", redop_name(h->redop));
	if (f & C)
		str_add(s, size, " count %llu", (unsigned long long)h->count);
	if (f & R)
		str_add(s, size, " root %u", h->root);
	if (h->algo != ALGO_AUTO)
		str_add(s, size, " by %s", proto_algo_name(h->algo));
	if (h->wire != 0)
		str_add(s, size, " on a %s wire", dtype_name(h->wire));
}

static void
op_raw(const struct peer_ophdr *h, char *s, size_t size)
{
	snprintf(s, size, "coll %u dtype %u redop %u root %u count %llu algo %u",
	    h->coll, h->dtype, h->redop, h->root, (unsigned long long)h->count,
	    h->algo);
}

static int
ophdr_mismatch(struct xfer *x, uint32_t peer, const struct peer_ophdr *h)
{
	char theirs[96], ours[96];

	op_desc(h, theirs, sizeof(theirs));
	op_desc(&x->hdr, ours, sizeof(ours));
	if (strcmp(theirs, ours) == 0) {
		op_raw(h, theirs, sizeof(theirs));
		op_raw(&x->hdr, ours, sizeof(ours));
	}
	if (h->seq != x->hdr.seq)
		return duplex_fail(x, MCCL_ERR_INVALID_ARGUMENT, "node %s is at "
		    "op seq %llu (%s), this node at op seq %llu (%s)",
		    duplex_node(x, peer), (unsigned long long)h->seq, theirs,
		    SEQ(x), ours);
	if (h->coll == COLL_ALLGATHERV && x->hdr.coll == COLL_ALLGATHERV &&
	    h->root != x->hdr.root)	/* root: a digest of the counts */
		return duplex_fail(x, MCCL_ERR_INVALID_ARGUMENT, "the ranks on "
		    "node %s gave other allgatherv recvcounts than those on this "
		    "node (op seq %llu)", duplex_node(x, peer), SEQ(x));
	return duplex_fail(x, MCCL_ERR_INVALID_ARGUMENT, "node %s issued %s for "
	    "op seq %llu, this node %s", duplex_node(x, peer), theirs, SEQ(x),
	    ours);
}

/* The left neighbour must be running the very same operation. */
static int
ophdr_check(struct xfer *x, const struct rx *rx)
{
	const struct wire_type *t;
	const struct peer_ophdr *me = &x->hdr;
	struct peer_ophdr h;
	char why[128];

	t = wire_type_lookup(&peer_proto, PEER_DATA_OPHDR);
	if (wire_decode(t, rx->opbody, OPHDR_LEN, &h, NULL, NULL, why,
	    sizeof(why)) == -1)
		return duplex_fail(x, MCCL_ERR_PROTOCOL, "bad operation header "
		    "from node %s: %s", duplex_node(x, rx->peer), why);
	if (x->pair_bytes && h.seq == me->seq && h.coll == me->coll &&
	    h.count != x->rx_bytes)
		return duplex_fail(x, MCCL_ERR_INVALID_ARGUMENT, "%s: node %s "
		    "sends %llu bytes to this node's ranks, which expect %llu "
		    "from it: the counts of their ranks disagree (op seq %llu)",
		    proto_coll_name(h.coll), duplex_node(x, rx->peer),
		    (unsigned long long)h.count,
		    (unsigned long long)x->rx_bytes, SEQ(x));
	if (h.seq == me->seq && h.coll == me->coll && h.dtype == me->dtype &&
	    h.redop == me->redop && h.root == me->root &&
	    (h.count == me->count || x->pair_bytes) && h.algo == me->algo &&
	    h.wire == me->wire)
		return 0;
	return ophdr_mismatch(x, rx->peer, &h);
}

static void
rx_reduce(struct rx *rx, const struct plan *p)
{
	struct pend *e = &rx->pend[0];
	const void *srcs[2] = { e->own, e->src };

	if (e->own == e->dst)
		reduce_into(e->dst, e->src, e->len / p->esize, p->dtype, p->op);
	else
		reduce_many(e->dst, srcs, 2, e->len / p->esize, p->dtype,
		    p->op);
	rx->pend[0] = rx->pend[1];
	rx->npend--;
	rx->done++;
}

/* cur is in: check it, queue its reduction or count it final; go on. */
static int
rx_frame_done(struct xfer *x, struct rx *rx, const struct plan *p)
{
	if (rx->cur.type == PEER_DATA_OPHDR) {
		if (ophdr_check(x, rx) == -1)
			return -1;
	} else if (rx->cur.reduce) {
		rx->pend[rx->npend++] = (struct pend){ rx->cur.ptr,
		    p->src + (rx->cur.ptr - p->buf), rx->slot, rx->cur.len };
	} else {
		while (rx->npend > 0)
			rx_reduce(rx, p);
		rx->done++;
	}
	rx_advance(rx, p);
	return 0;
}

static int
rx_consume(struct xfer *x, struct rx *rx, const struct plan *p, size_t n)
{
	size_t take;

	if (rx->hdr_got < WIRE_HDR_LEN) {
		take = MIN(n, WIRE_HDR_LEN - rx->hdr_got);
		rx->hdr_got += take;
		n -= take;
		if (rx->hdr_got < WIRE_HDR_LEN)
			return 0;
		if (rx_check_hdr(x, rx) == -1)
			return -1;
	}
	take = MIN(n, rx->cur.len - rx->got);
	rx->got += take;
	if (rx->got < rx->cur.len)
		return 0;
	if (rx_frame_done(x, rx, p) == -1)
		return -1;
	rx->hdr_got = n - take;		/* of the next header, read ahead */
	memcpy(rx->hdr, rx->nhdr, rx->hdr_got);
	return rx->hdr_got < WIRE_HDR_LEN ? 0 : rx_check_hdr(x, rx);
}

static int
rx_step(struct xfer *x, struct rx *rx, const struct plan *p, int *moved)
{
	ssize_t n;

	if (!rx->active)
		return 0;
	if (rx->has_cur && !rx_slot_busy(rx)) {
		if ((n = rx_recv(rx)) > 0) {
			count_bytes(DATA_RECEIVED, x->node_index, rx->peer,
			    (size_t)n);
			*moved = 1;
			rx->last_ns = now_ns();
			return rx_consume(x, rx, p, (size_t)n);
		}
		if (n == 0 || !io_again(errno))
			return link_error(x, rx->peer, rx->link, n == 0 ? 0 :
			    errno);
	}
	/* Nothing to read this instant: reduce while the socket refills. */
	if (rx->npend > 0) {
		rx_reduce(rx, p);
		*moved = 1;
	}
	return 0;
}

/* ---- the duplex engine ---- */


static int
lane_complete(const struct lane *l)
{
	return tx_complete(&l->tx) && rx_complete(&l->rx);
}

/*
 * The poll timeout until the op's deadline; past it, fail naming the node
 * waited on (x->blame: the main thread asks it why).  Before each sleep the
 * node waited on is published for mcclctl (x->waiting).
 */
static int
wait_timeout(struct xfer *x, const struct lane *lanes, size_t nl,
    int *timeout)
{
	const struct lane *l = lanes;
	uint64_t now, ms;
	uint32_t peer;
	int rx;
	char what[96];

	while (l < lanes + nl - 1 && lane_complete(l))
		l++;
	rx = !rx_complete(&l->rx);
	peer = rx ? l->rx.peer : l->tx.peer;
	if (x->waiting != NULL)
		__atomic_store_n(x->waiting, peer, __ATOMIC_RELAXED);
	*timeout = -1;
	if (x->deadline_ns == 0)
		return 0;
	if ((now = now_ns()) < x->deadline_ns) {
		ms = (x->deadline_ns - now + 999999) / 1000000;
		*timeout = ms > INT_MAX ? INT_MAX : (int)ms;
		return 0;
	}
	x->blame = peer;
	op_desc(&x->hdr, what, sizeof(what));
	return duplex_fail(x, MCCL_ERR_TIMEOUT, "timeout waiting for node %s: "
	    "%s it for %llu ms (op seq %llu: %s)", duplex_node(x, peer),
	    rx ? "no data from" : "no data taken by", (unsigned long long)
	    (now - (rx ? l->rx.last_ns : l->tx.last_ns)) / 1000000, SEQ(x),
	    what);
}

/*
 * poll, after spinning for up to x->spin_ns on polls that do not wait: a
 * frame that arrives meanwhile is taken without a wake-up (spin.h).
 */
static int
links_poll(const struct xfer *x, struct pollfd *pfd, nfds_t n, int timeout)
{
	uint64_t until;
	int rc;

	if (x->spin_ns > 0) {
		until = now_ns() + x->spin_ns;
		do {
			if ((rc = poll(pfd, n, 0)) != 0)
				return rc;
			spin_pause();
		} while (now_ns() < until);
	}
	return poll(pfd, n, timeout);
}

/*
 * What io_wait sleeps on: the abort fd and, on a lane of a crew, the
 * crew's stop fd, then what the links armed, at most WATCH_PER_LANE per
 * lane.  Room for PEER_LANES_MAX lanes is on the stack; a star over more
 * nodes brings its own (watch_init).
 */
#define WATCH_PER_LANE	4
#define WATCH_CTL	2
#define WATCH_STACK	(WATCH_CTL + WATCH_PER_LANE * PEER_LANES_MAX)

struct watch_slot {
	struct link	*link;
	uint32_t	 peer;
};

struct watch {
	struct pollfd	 *pfd;
	struct watch_slot *slot;
	nfds_t		 n;
	nfds_t		 nctl;		/* pfd[0..nctl): abort and stop fds */
	struct pollfd	 pfd_stack[WATCH_STACK];
	struct watch_slot slot_stack[WATCH_STACK];
};

static int
watch_init(struct watch *w, size_t nl)
{
	size_t cap = WATCH_CTL + WATCH_PER_LANE * nl;

	w->pfd = w->pfd_stack;
	w->slot = w->slot_stack;
	if (cap <= WATCH_STACK)
		return 0;
	w->pfd = calloc(cap, sizeof(*w->pfd));
	w->slot = calloc(cap, sizeof(*w->slot));
	return w->pfd == NULL || w->slot == NULL ? -1 : 0;
}

static void
watch_free(struct watch *w)
{
	if (w->pfd != w->pfd_stack)
		free(w->pfd);
	if (w->slot != w->slot_stack)
		free(w->slot);
}

/* Arm l for `want`; 0: it can move already, no need to sleep. */
static int
watch_add(struct watch *w, struct link *l, uint32_t peer, short want)
{
	int n = link_arm(l, want, w->pfd + w->n);

	for (int i = 0; i < n; i++)
		w->slot[w->n + (nfds_t)i] = (struct watch_slot){ l, peer };
	w->n += (nfds_t)n;
	return n;
}

/*
 * Two events that end an op only if nothing more arrives: a node we still
 * send to hung up (it may have taken all we sent and ended the op, its
 * close overtaking the acknowledgement that tells our transport so: RDMA,
 * a completion not yet polled), and the job aborted (a later op failed on
 * nodes that ended this one, whose last frames may still be on the way).
 * Each gets LINK_GRACE_NS (engine.h) from when it was first seen in this
 * op.
 */

static int
grace_over(uint64_t *since_ns)
{
	uint64_t now = now_ns();
	struct timespec nap = { 0, 1000000 };

	if (*since_ns == 0)
		*since_ns = now;
	else if (now - *since_ns >= LINK_GRACE_NS)
		return 1;
	nanosleep(&nap, NULL);	/* the event stays readable: no busy loop */
	return 0;
}

/*
 * Another lane of the op failed (its crew is stopped): this one ends too,
 * at once, with a code that its caller knows to pass over for the first
 * failure's (duplex_parts).
 */
static int
lane_stopped(struct xfer *x)
{
	if (x->stop_by == NULL || !crew_stopped(x->stop_by))
		return 0;
	duplex_fail(x, MCCL_ERR_ABORTED, "stopped: another lane failed");
	return 1;
}

/*
 * Sleep until a link can move, the job is aborted or the deadline passes.
 * A sending link is watched for a hang-up even when nothing is queued for
 * it: its node can't finish this operation before taking all we send.
 */
static int
io_wait(struct xfer *x, const struct lane *lanes, size_t nl,
    struct watch *w)
{
	int timeout;
	char buf[128];

	if (wait_timeout(x, lanes, nl, &timeout) == -1)
		return -1;
	w->pfd[0] = (struct pollfd){ x->abort_fd, POLLIN, 0 };
	w->n = 1;
	if (x->stop_by != NULL)
		w->pfd[w->n++] = (struct pollfd){ crew_stop_fd(x->stop_by),
		    POLLIN, 0 };
	w->nctl = w->n;
	for (size_t k = 0; k < nl; k++) {
		const struct tx *tx = &lanes[k].tx;
		const struct rx *rx = &lanes[k].rx;

		if ((!tx_complete(tx) && watch_add(w, tx->link, tx->peer,
		    (short)(POLLRDHUP | (tx->qlen > 0 ? POLLOUT : 0))) == 0) ||
		    (!rx_complete(rx) && watch_add(w, rx->link, rx->peer,
		    POLLIN) == 0))
			return 0;
	}
	if (links_poll(x, w->pfd, w->n, timeout) == -1)
		return errno == EINTR ? 0 : duplex_fail(x, MCCL_ERR_INTERNAL,
		    "poll: %s", strerror_r(errno, buf, sizeof(buf)));
	if (lane_stopped(x))
		return -1;
	/* What a peer sent before it hung up is taken first. */
	for (nfds_t i = w->nctl; i < w->n &&
	    !link_polled_ready(w->pfd + w->nctl, w->n - w->nctl); i++)
		if (link_polled_hangup(&w->pfd[i]))
			return grace_over(&x->hup_ns) ? link_error(x,
			    w->slot[i].peer, w->slot[i].link,
			    link_hangup_errno(w->slot[i].link)) : 0;
	/*
	 * Aborted: give up once no link has moved for the grace.  The op may
	 * still end well here, as it did on the nodes that sent its last
	 * frames before the failure of a later op aborted the job.
	 */
	if (w->pfd[0].revents != 0 &&
	    !link_polled_ready(w->pfd + w->nctl, w->n - w->nctl))
		return grace_over(&x->abort_ns) ? duplex_fail(x,
		    MCCL_ERR_ABORTED, "job aborted") : 0;
	return 0;
}

/* Add position q to want[*n] if its lane-0 link (links) is not made. */
static int
link_wanted(const struct xfer *x, struct link *const *links, uint32_t q,
    uint32_t *want, uint32_t *n)
{
	if (links[q] != NULL)
		return 0;
	if (links != x->links)		/* lanes past 0: made at the start */
		return -1;
	for (uint32_t i = 0; i < *n; i++)
		if (want[i] == q)
			return 0;
	want[(*n)++] = q;
	return 0;
}

/*
 * The lanes' links, lane 0's made now where an algorithm first talks over
 * them (the engine's link_on_use; not on a crew's thread: lanes there are
 * a ring's, made at the start).
 */
static int
links_for(struct xfer *x, const struct lane *lanes, size_t nl)
{
	uint32_t want[2 * PEER_LANES_MAX], n = 0;

	for (const struct lane *l = lanes; l < lanes + nl; l++)
		if (x->me >= x->nnodes || l->to >= x->nnodes ||
		    l->from >= x->nnodes || nl > PEER_LANES_MAX ||
		    link_wanted(x, l->ptx->links, l->to, want, &n) == -1 ||
		    link_wanted(x, l->prx->links, l->from, want, &n) == -1)
			return duplex_fail(x, MCCL_ERR_INTERNAL, "no data link at "
			    "node position %u of %u", x->me, x->nnodes);
	if (n == 0)
		return 0;
	if (x->link_on_use == NULL || x->stop_by != NULL)
		return duplex_fail(x, MCCL_ERR_INTERNAL, "no data link from "
		    "node position %u to %u", x->me, want[0]);
	return x->link_on_use(x, want, n);
}

/* Before the lanes move: their links made, and the job not aborted. */
static int
lanes_start(struct xfer *x, const struct lane *lanes, size_t nl)
{
	struct pollfd pfd = { x->abort_fd, POLLIN, 0 };

	x->code = MCCL_SUCCESS;
	x->err[0] = '\0';
	x->hup_ns = x->abort_ns = 0;
	if (links_for(x, lanes, nl) == -1)
		return -1;
	/* The flag costs no system call, on every op of a tight loop. */
	if (x->aborted != NULL ? __atomic_load_n(x->aborted, __ATOMIC_ACQUIRE) :
	    x->abort_fd >= 0 && poll(&pfd, 1, 0) == 1)
		return duplex_fail(x, MCCL_ERR_ABORTED, "job aborted");
	return 0;
}

/*
 * The duplex engine, over nl lanes at once: on each, send by ptx to
 * position `to` (the own block if nown, then forwarded ones, nsend blocks
 * in all) while receiving nrecv blocks by prx from position `from`.  Each
 * side that has any block, even an empty one, starts with the operation
 * header.
 */
static int
lanes_step(struct xfer *x, struct lane *lanes, size_t nl, struct watch *w)
{
	struct lane *l;
	int moved, done;

	for (l = lanes; l < lanes + nl; l++) {
		if (tx_init(x, &l->tx, l->ptx, l->nown, l->nsend, l->to) == -1)
			return -1;
		rx_init(&l->rx, l->prx, l->nrecv, l->from);
	}
	for (;;) {
		moved = 0;
		done = 1;
		for (l = lanes; l < lanes + nl; l++) {
			if (tx_step(x, &l->tx, l->ptx, &l->rx, &moved) == -1 ||
			    rx_step(x, &l->rx, l->prx, &moved) == -1)
				return -1;
			done &= lane_complete(l);
		}
		if (done)
			return 0;
		if (moved ? lane_stopped(x) : io_wait(x, lanes, nl, w) == -1)
			return -1;
	}
}

int
duplex_lanes(struct xfer *x, struct lane *lanes, size_t nl)
{
	struct watch w;
	int rc;

	if (lanes_start(x, lanes, nl) == -1)
		return -1;
	if (watch_init(&w, nl) == -1) {
		watch_free(&w);
		return duplex_fail(x, MCCL_ERR_NO_MEMORY, "out of memory for "
		    "watching %zu links", nl);
	}
	rc = lanes_step(x, lanes, nl, &w);
	watch_free(&w);
	return rc;
}

/*
 * An op's parts on threads of their own (x->crew), one each, part k on
 * lane k's links: a core's worth of copies, reductions and TCP per lane.
 * Each runs on a copy of x, so that its failure is its own; the first
 * part to fail stops the others and its failure becomes x's.  Those
 * threads are for large ops only, where a wake-up costs nothing: they
 * sleep at once rather than spin.  0 or -1: ran, as x says; 1: the crew
 * could not take them, the caller runs them on this thread.
 */

struct parts {
	part_fn		 fn;
	void		*arg;
	struct crew	*crew;
	unsigned	 first;		/* 1 + the part that failed first */
	uint64_t	 end_ns[PEER_LANES_MAX];	/* each part's */
	struct xfer	 xs[PEER_LANES_MAX];
};

static void
part_main(void *arg, unsigned k)
{
	struct parts *par = arg;
	unsigned none = 0;

	if (par->fn(&par->xs[k], k, par->arg) == -1 &&
	    __atomic_compare_exchange_n(&par->first, &none, k + 1, 0,
	    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		crew_stop(par->crew);
	par->end_ns[k] = now_ns();
}

/*
 * The lanes' time, from start to the last one's end, and of it what the
 * lanes that ended first spent waiting: lanes that should take the same
 * time and do not (connections sharing a link unfairly) show there.
 */
static void
parts_timed(struct xfer *x, const struct parts *par, size_t nl,
    uint64_t start_ns)
{
	uint64_t last = start_ns;

	for (size_t k = 0; k < nl; k++)
		last = MAX(last, par->end_ns[k]);
	for (size_t k = 0; k < nl; k++) {
		x->lane_ns += last - start_ns;
		x->lane_wait_ns += last - MAX(par->end_ns[k], start_ns);
	}
}

int
duplex_parts(struct xfer *x, size_t nl, part_fn fn, void *arg)
{
	struct parts *par;
	const struct xfer *bad;
	uint64_t start_ns;

	if (x->crew == NULL || nl < 2 || (par = malloc(sizeof(*par))) == NULL)
		return 1;
	*par = (struct parts){ .fn = fn, .arg = arg, .crew = x->crew };
	for (size_t k = 0; k < nl; k++) {
		par->xs[k] = *x;
		par->xs[k].crew = NULL;
		par->xs[k].stop_by = x->crew;
		par->xs[k].spin_ns = 0;
		par->xs[k].wire_saved = 0;
		if (k > 0)	/* the node waited on: as one thread saw it */
			par->xs[k].waiting = NULL;
	}
	start_ns = now_ns();
	if (crew_run(x->crew, (unsigned)nl, part_main, par) == -1) {
		free(par);
		return 1;
	}
	x->code = MCCL_SUCCESS;
	x->err[0] = '\0';
	for (size_t k = 0; k < nl; k++)
		x->wire_saved += par->xs[k].wire_saved;
	parts_timed(x, par, nl, start_ns);
	if (par->first != 0) {
		bad = &par->xs[par->first - 1];
		x->code = bad->code;
		x->blame = bad->blame;
		memcpy(x->err, bad->err, sizeof(x->err));
	}
	free(par);
	return x->code == MCCL_SUCCESS ? 0 : -1;
}

/* One lane: the two-plan exchanges and the single ring. */
int
duplex_run(struct xfer *x, const struct plan *ptx, const struct plan *prx,
    size_t nown, size_t nsend, size_t nrecv, uint32_t to, uint32_t from)
{
	struct lane l = { .ptx = ptx, .prx = prx, .nown = nown, .nsend = nsend,
	    .nrecv = nrecv, .to = to, .from = from };

	return duplex_lanes(x, &l, 1);
}

int
duplex_plan(struct xfer *x, struct plan *p, void *buf, size_t esize)
{
	size_t c = MIN(x->chunk, (size_t)PEER_DATA_MAX);

	memset(p, 0, sizeof(*p));
	p->x = x;
	p->links = x->links;
	p->scratch = x->scratch;
	p->buf = p->src = buf;
	p->esize = esize;
	p->chunk = c - c % esize;
	if (p->chunk == 0)
		return duplex_fail(x, MCCL_ERR_INVALID_ARGUMENT, "pipeline chunk "
		    "of %zu bytes holds no %zu-byte element", x->chunk, esize);
	return 0;
}
