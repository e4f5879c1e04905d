/*
 * ring.c: the inter-node half of every collective.  A job's engine thread
 * calls a ring_* function once the local ranks' buffers are combined into
 * one; it runs the node-level algorithm over the job's data links and
 * returns with the result in place, or fails naming the node and the reason.
 *
 * Seen from one node, every algorithm here has the same shape: send its own
 * block (if any) to the right neighbour, then pass on, in order, the blocks
 * that arrive from the left, reducing some of them on the way.  One duplex
 * engine drives both directions at once, frame by frame, so a chunk that
 * arrives from the left leaves to the right as soon as it is final.
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
#include "spin.h"
#include "engine/algo.h"
#include "transport/transport.h"

#define IO_MAX		((size_t)1 << 30)	/* bytes per send or receive call */
#define TXQ		8			/* frames one sendmsg may carry */
#define OPHDR_LEN	25			/* body of PEER_DATA_OPHDR */
#define MIN(a, b)	((a) < (b) ? (a) : (b))
#define MAX(a, b)	((a) > (b) ? (a) : (b))
#define LANE_MIN_BYTES	((size_t)1 << 18)	/* an allreduce's part per lane */
#define SEQ(x)		((unsigned long long)(x)->hdr.seq)

/* A receive is one frame's payload plus the next header: under IO_MAX. */
_Static_assert(PEER_DATA_MAX + WIRE_HDR_LEN <= IO_MAX, "frame over IO_MAX");

/* One frame's payload and where it lives. */
struct frame {
	uint8_t		*ptr;
	size_t		 len;
	uint16_t	 type;		/* PEER_DATA_OPHDR or PEER_DATA */
	uint8_t		 reduce;	/* received into scratch, then reduced */
	uint8_t		 fwd;		/* sent: a received frame passed on */
};

/*
 * An operation as this node sees it.  Blocks are numbered from here: block
 * 0 is this node's own contribution, block i >= 1 the i-th to arrive from
 * upstream (the left, or the right on a reversed lane).  Sent block i
 * (i >= 1) is always received block i, so the ring moves every block one
 * position per step and the sender needs no list.
 */
struct plan {
	const struct xfer *x;
	struct link *const *links;	/* its lane's link to each position */
	uint8_t		*scratch;	/* its lane's two reduction slots */
	int		 reversed;	/* data flows right to left */
	uint8_t		*buf;
	uint8_t		*src;		/* allreduce: this node's contribution,
					   only read; buf when in place */
	size_t		 chunk;		/* payload bytes per frame, whole elements */
	size_t		 esize;
	int		 dtype, op;
	size_t		 nreduce;	/* received blocks 1..nreduce are reduced */
	size_t		 total;		/* allreduce: elements; otherwise bytes */
	const size_t	*offs, *lens;	/* allgather: block of each position */
	void		(*block)(const struct plan *, size_t, size_t *, size_t *);
};

/* Cuts a range of blocks into frames of at most plan->chunk bytes. */
struct walk {
	size_t		 blk, end;	/* next block, one past the last */
	size_t		 off;		/* bytes of blk already cut */
};

struct txent {
	uint8_t		 hdr[WIRE_HDR_LEN];
	uint8_t		*data;
	size_t		 len;
};

/* The link to the right: the frames this node sends. */
struct tx {
	int		 active;
	struct link	*link;
	uint32_t	 peer;
	struct walk	 w;
	struct frame	 next;		/* cut, not yet queued */
	int		 has_next;
	size_t		 nfwd;		/* forwarded frames queued so far */
	struct txent	 q[TXQ];	/* being sent, oldest at qhead */
	size_t		 qhead, qlen;
	size_t		 qoff;		/* bytes of q[qhead] already sent */
	uint8_t		 opbody[OPHDR_LEN];
	uint64_t	 last_ns;	/* last byte accepted */
};

struct pend {
	uint8_t		*dst;
	const uint8_t	*own;		/* this node's contribution to dst */
	const uint8_t	*src;		/* the received frame */
	size_t		 len;
};

/* The link to the left: the frames this node receives. */
struct rx {
	int		 active;
	struct link	*link;
	uint32_t	 peer;
	struct walk	 w;
	struct frame	 cur, nxt;
	int		 has_cur, has_nxt;
	uint8_t		 hdr[WIRE_HDR_LEN];
	size_t		 hdr_got;	/* of cur's header */
	uint8_t		 nhdr[WIRE_HDR_LEN];	/* the next one, read ahead */
	size_t		 got;		/* of cur's payload */
	uint8_t		*slot;		/* cur's half of scratch, when reduced */
	size_t		 nred;		/* reduced frames started */
	struct pend	 pend[2];	/* received, not yet reduced; oldest first */
	size_t		 npend;
	size_t		 done;		/* data frames final in buf, in order */
	uint8_t		 opbody[OPHDR_LEN];
	uint64_t	 last_ns;	/* last byte received */
};

static int	ring_fail(struct xfer *, int, const char *, ...)
		    __attribute__((format(printf, 3, 4)));
/* Add n bytes to the counter of the node at position pos (any thread). */
void
count_bytes(uint64_t *ctr, const uint32_t *node_index, uint32_t pos, size_t n)
{
	if (ctr != NULL && node_index != NULL)
		__atomic_fetch_add(&ctr[node_index[pos]], n, __ATOMIC_RELAXED);
}

static int
ring_fail(struct xfer *x, int code, const char *fmt, ...)
{
	va_list ap;

	x->code = code;
	va_start(ap, fmt);
	vsnprintf(x->err, sizeof(x->err), fmt, ap);
	va_end(ap);
	return -1;
}

static const char *
node_name(const struct xfer *x, uint32_t pos)
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

	return ring_fail(x, MCCL_ERR_PEER_FAILED, "link to node %s %s",
	    node_name(x, peer), link_strerror(l, err, buf, sizeof(buf)));
}

/* ---- blocks and frames ---- */

/* Position whose block is this node's block i. */
static uint32_t
ring_pos(const struct plan *p, size_t i)
{
	size_t n = p->x->nnodes, me = p->x->me;

	return (uint32_t)(p->reversed ? (me + i) % n : (me + n - i % n) % n);
}

/* First element of block b when count elements are cut into n blocks. */
static size_t
block_start(size_t count, size_t n, size_t b)
{
	return b * (count / n) + MIN(b, count % n);
}

/* Allreduce: segment s of total elements, the first total % n one longer. */
static void
seg_block(const struct plan *p, size_t i, size_t *off, size_t *len)
{
	size_t n = p->x->nnodes, s = ring_pos(p, i);

	*off = block_start(p->total, n, s) * p->esize;
	*len = block_start(p->total, n, s + 1) * p->esize - *off;
}

static void
gather_block(const struct plan *p, size_t i, size_t *off, size_t *len)
{
	uint32_t s = ring_pos(p, i);

	*off = p->offs[s];
	*len = p->lens[s];
}

/* Broadcast and barrier: one block, the whole buffer. */
static void
whole_block(const struct plan *p, size_t i, size_t *off, size_t *len)
{
	(void)i;
	*off = 0;
	*len = p->total;
}

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
		return ring_fail(x, MCCL_ERR_INTERNAL, "cannot encode the "
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
	count_bytes(x->tx_ctr, x->node_index, tx->peer, (size_t)n);
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
		return ring_fail(x, MCCL_ERR_PROTOCOL, "bad frame from node %s "
		    "(op seq %llu): %s", node_name(x, rx->peer), SEQ(x), why);
	if (h.type != rx->cur.type)
		return ring_fail(x, MCCL_ERR_PROTOCOL, "node %s sent %s, "
		    "expected %s (op seq %llu)", node_name(x, rx->peer),
		    t->name, want->name, SEQ(x));
	if (h.len != rx->cur.len)
		return ring_fail(x, MCCL_ERR_PROTOCOL, "node %s sent a %u-byte "
		    "%s, expected %zu bytes (op seq %llu)",
		    node_name(x, rx->peer), h.len, t->name, rx->cur.len, SEQ(x));
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
		return ring_fail(x, MCCL_ERR_INVALID_ARGUMENT, "node %s is at "
		    "op seq %llu (%s), this node at op seq %llu (%s)",
		    node_name(x, peer), (unsigned long long)h->seq, theirs,
		    SEQ(x), ours);
	if (h->coll == COLL_ALLGATHERV && x->hdr.coll == COLL_ALLGATHERV &&
	    h->root != x->hdr.root)	/* root: a digest of the counts */
		return ring_fail(x, MCCL_ERR_INVALID_ARGUMENT, "the ranks on "
		    "node %s gave other allgatherv recvcounts than those on this "
		    "node (op seq %llu)", node_name(x, peer), SEQ(x));
	return ring_fail(x, MCCL_ERR_INVALID_ARGUMENT, "node %s issued %s for "
	    "op seq %llu, this node %s", node_name(x, peer), theirs, SEQ(x),
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
		return ring_fail(x, MCCL_ERR_PROTOCOL, "bad operation header "
		    "from node %s: %s", node_name(x, rx->peer), why);
	if (x->pair_bytes && h.seq == me->seq && h.coll == me->coll &&
	    h.count != x->rx_bytes)
		return ring_fail(x, MCCL_ERR_INVALID_ARGUMENT, "%s: node %s "
		    "sends %llu bytes to this node's ranks, which expect %llu "
		    "from it: the counts of their ranks disagree (op seq %llu)",
		    proto_coll_name(h.coll), node_name(x, rx->peer),
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
			count_bytes(x->rx_ctr, x->node_index, rx->peer,
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

/* One pair of directions the engine drives: frames out by ptx, in by prx. */
struct lane {
	const struct plan *ptx, *prx;
	size_t		 nown, nsend, nrecv;
	uint32_t	 to, from;
	struct tx	 tx;
	struct rx	 rx;
};

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
	return ring_fail(x, MCCL_ERR_TIMEOUT, "timeout waiting for node %s: "
	    "%s it for %llu ms (op seq %llu: %s)", node_name(x, peer),
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

static int
links_ready(const struct pollfd *pfd, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (pfd[i].revents & (POLLIN | POLLOUT))
			return 1;
	return 0;
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
 * failure's (parts_par).
 */
static int
lane_stopped(struct xfer *x)
{
	if (x->stop_by == NULL || !crew_stopped(x->stop_by))
		return 0;
	ring_fail(x, MCCL_ERR_ABORTED, "stopped: another lane failed");
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
		return errno == EINTR ? 0 : ring_fail(x, MCCL_ERR_INTERNAL,
		    "poll: %s", strerror_r(errno, buf, sizeof(buf)));
	if (lane_stopped(x))
		return -1;
	/* What a peer sent before it hung up is taken first. */
	for (nfds_t i = w->nctl; i < w->n &&
	    !links_ready(w->pfd + w->nctl, w->n - w->nctl); i++)
		if ((w->pfd[i].events & POLLRDHUP) &&
		    (w->pfd[i].revents & (POLLERR | POLLHUP | POLLRDHUP)))
			return grace_over(&x->hup_ns) ? link_error(x,
			    w->slot[i].peer, w->slot[i].link,
			    link_hangup_errno(w->slot[i].link)) : 0;
	/*
	 * Aborted: give up once no link has moved for the grace.  The op may
	 * still end well here, as it did on the nodes that sent its last
	 * frames before the failure of a later op aborted the job.
	 */
	if (w->pfd[0].revents != 0 &&
	    !links_ready(w->pfd + w->nctl, w->n - w->nctl))
		return grace_over(&x->abort_ns) ? ring_fail(x,
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
			return ring_fail(x, MCCL_ERR_INTERNAL, "no data link at "
			    "node position %u of %u", x->me, x->nnodes);
	if (n == 0)
		return 0;
	if (x->link_on_use == NULL || x->stop_by != NULL)
		return ring_fail(x, MCCL_ERR_INTERNAL, "no data link from "
		    "node position %u to %u", x->me, want[0]);
	return x->link_on_use(x, want, n);
}

static int
ring_start(struct xfer *x, const struct lane *lanes, size_t nl)
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
		return ring_fail(x, MCCL_ERR_ABORTED, "job aborted");
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

static int
lanes_run(struct xfer *x, struct lane *lanes, size_t nl)
{
	struct watch w;
	int rc;

	if (ring_start(x, lanes, nl) == -1)
		return -1;
	if (watch_init(&w, nl) == -1) {
		watch_free(&w);
		return ring_fail(x, MCCL_ERR_NO_MEMORY, "out of memory for "
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
typedef int (*part_fn)(struct xfer *, size_t, void *);

struct parts {
	part_fn		 fn;
	void		*arg;
	struct crew	*crew;
	unsigned	 first;		/* 1 + the part that failed first */
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
}

static int
parts_par(struct xfer *x, size_t nl, part_fn fn, void *arg)
{
	struct parts *par;
	const struct xfer *bad;

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
	if (crew_run(x->crew, (unsigned)nl, part_main, par) == -1) {
		free(par);
		return 1;
	}
	x->code = MCCL_SUCCESS;
	x->err[0] = '\0';
	for (size_t k = 0; k < nl; k++)
		x->wire_saved += par->xs[k].wire_saved;
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
static int
duplex_run(struct xfer *x, const struct plan *ptx, const struct plan *prx,
    size_t nown, size_t nsend, size_t nrecv, uint32_t to, uint32_t from)
{
	struct lane l = { .ptx = ptx, .prx = prx, .nown = nown, .nsend = nsend,
	    .nrecv = nrecv, .to = to, .from = from };

	return lanes_run(x, &l, 1);
}

/* The neighbour p sends to, and the one it receives from. */
static void
ring_peers(const struct plan *p, uint32_t *to, uint32_t *from)
{
	uint32_t n = p->x->nnodes, right = (p->x->me + 1) % n,
	    left = (p->x->me + n - 1) % n;

	*to = p->reversed ? left : right;
	*from = p->reversed ? right : left;
}

/* Around the ring: one plan for both directions of the link. */
static int
ring_run(struct xfer *x, const struct plan *p, size_t nown, size_t nsend,
    size_t nrecv)
{
	uint32_t to, from;

	ring_peers(p, &to, &from);
	return duplex_run(x, p, p, nown, nsend, nrecv, to, from);
}

/* ---- the collectives ---- */

static int
plan_init(struct xfer *x, struct plan *p, void *buf, size_t esize)
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
		return ring_fail(x, MCCL_ERR_INVALID_ARGUMENT, "pipeline chunk "
		    "of %zu bytes holds no %zu-byte element", x->chunk, esize);
	return 0;
}

/*
 * Lanes a ring allreduce of this many bytes runs on: 256 KiB each at
 * least, each on a thread of its own where the job has a crew (a wake-up
 * is a few microseconds; a lane's 256 KiB, 100 or more).
 */
static size_t
ring_lanes(const struct xfer *x, size_t bytes)
{
	size_t nl = MIN((size_t)x->nlanes, bytes / LANE_MIN_BYTES);

	return MIN(MAX(nl, (size_t)1), (size_t)PEER_LANES_MAX);
}

/* An allreduce's type and operation; MCCL_AVG sums, the caller divides. */
static int
allreduce_args(struct xfer *x, size_t count, int dtype, int *op)
{
	size_t es = dtype_size(dtype);

	if (*op == MCCL_AVG)
		*op = MCCL_SUM;
	if (es == 0 || !reduce_supported(dtype, *op) || count > SIZE_MAX / es)
		return ring_fail(x, MCCL_ERR_INVALID_ARGUMENT, "allreduce of "
		    "%zu elements of %s with %s", count, dtype_name(dtype),
		    redop_name(*op));
	return 0;
}

/* Algorithms that work in place start from a copy of the contribution. */
static void
contribution_in(const void *src, void *buf, size_t bytes)
{
	if (src != buf && bytes > 0)
		memcpy(buf, src, bytes);
}

/* Lane k of a ring allreduce, on its own thread (parts_par). */
static int
lane_part(struct xfer *x, size_t k, void *lanes)
{
	return lanes_run(x, (struct lane *)lanes + k, 1);
}

/*
 * Reduce-scatter then allgather: received blocks 1..n-1 are reduced.  A
 * large buffer is cut into one part per lane, each part a ring of its own
 * on the lane's links, odd lanes running right to left, so that both
 * directions of every link carry data and one stall does not idle the rest.
 * Out of place (src not buf), the own block leaves from src and each
 * received block is reduced with src into buf: every segment of buf is
 * written once reduced or received, so src is never copied.
 */
int
ring_allreduce(struct xfer *x, const void *src, void *buf, size_t count,
    int dtype, int op)
{
	size_t es = dtype_size(dtype), n = x->nnodes, nl, lo, hi;
	struct plan p[PEER_LANES_MAX];
	struct lane l[PEER_LANES_MAX];
	int rc;

	if (n <= 1) {
		contribution_in(src, buf, count * es);
		return 0;
	}
	if (allreduce_args(x, count, dtype, &op) == -1)
		return -1;
	if (x->scratch == NULL && count > 0)
		return ring_fail(x, MCCL_ERR_INTERNAL, "no scratch buffer");
	nl = ring_lanes(x, count * es);
	for (size_t k = 0; k < nl; k++) {
		lo = block_start(count, nl, k);
		hi = block_start(count, nl, k + 1);
		if (plan_init(x, &p[k], (uint8_t *)buf + lo * es, es) == -1)
			return -1;
		p[k].src = (uint8_t *)(uintptr_t)src + lo * es;	/* read only */
		p[k].links = x->links + k * n;
		p[k].scratch = x->scratch + k * 2 * x->chunk;
		p[k].reversed = (int)(k % 2);
		p[k].block = seg_block;
		p[k].total = hi - lo;
		p[k].dtype = dtype;
		p[k].op = op;
		p[k].nreduce = n - 1;
		l[k] = (struct lane){ .ptx = &p[k], .prx = &p[k], .nown = 1,
		    .nsend = 2 * (n - 1), .nrecv = 2 * (n - 1) };
		ring_peers(&p[k], &l[k].to, &l[k].from);
	}
	if ((rc = parts_par(x, nl, lane_part, l)) != 1)
		return rc;
	return lanes_run(x, l, nl);	/* one thread drives them all */
}

static int	pair_run(struct xfer *, struct plan *, uint32_t,
		    const size_t[2], const size_t[2], int, int);

/* The operation header alone (an empty block) to peer, or from it. */
static int
header_with(struct xfer *x, uint32_t peer, int sends)
{
	struct plan p;

	if (plan_init(x, &p, NULL, 1) == -1)
		return -1;
	p.block = whole_block;
	return duplex_run(x, &p, &p, sends, sends, !sends, peer, peer);
}

/*
 * The operation header alone (an empty block) to every node but `skip`
 * (sends), or from every node but `skip` (checks): one frame per link.
 */
static int
headers_run(struct xfer *x, uint32_t skip, int sends)
{
	for (uint32_t q = 0; q < x->nnodes; q++)
		if (q != x->me && q != skip && header_with(x, q, sends) == -1)
			return -1;
	return 0;
}

/* A broadcast's plan over buf, from a root that must be a position. */
static int
broadcast_plan(struct xfer *x, struct plan *p, void *buf, uint32_t root)
{
	if (root >= x->nnodes)
		return ring_fail(x, MCCL_ERR_INVALID_ARGUMENT, "broadcast root "
		    "at position %u of %u nodes", root, x->nnodes);
	return plan_init(x, p, buf, 1);
}

/*
 * A chain from the root; the node left of the root passes nothing on.  In
 * a chain a node's data depends on the nodes upstream alone, so a node
 * could return before a node downstream finds that the collectives differ.
 * Each node therefore also sends its operation header to every node its
 * data does not go to, and checks one from every node its data does not
 * come from: a node returns only once every node's header matched its own,
 * and a mismatched broadcast fails on every node, never on some.
 */
int
ring_broadcast(struct xfer *x, void *buf, size_t bytes, uint32_t root)
{
	uint32_t n = x->nnodes, last = (root + n - 1) % n, none = UINT32_MAX;
	struct plan p;

	if (n <= 1)
		return 0;
	if (broadcast_plan(x, &p, buf, root) == -1)
		return -1;
	p.block = whole_block;
	p.total = bytes;
	if (headers_run(x, x->me == last ? none : (x->me + 1) % n, 1) == -1)
		return -1;
	if ((x->me == root ? ring_run(x, &p, 1, 1, 0) : ring_run(x, &p, 0,
	    x->me == last ? 0 : 1, 1)) == -1)
		return -1;
	return headers_run(x, x->me == root ? none : (x->me + n - 1) % n, 0);
}

/*
 * A binomial tree from the root, for small buffers on many nodes.  In node
 * numbers relative to the root, v receives the whole buffer from v less
 * its highest bit, then sends it on to v + 2^k for each 2^k above v, in
 * that order: child v + 2^k heads every node that is it plus multiples of
 * 2^(k+1), so the first child has the largest subtree, and the buffer
 * reaches all n nodes in ceil(log2 n) steps where the chain takes n - 1.
 * As in the chain, no node may return while another might still find that
 * the collectives differ: each node confirms to its parent once its
 * children have confirmed to it (their headers, checked), and returns once
 * the root's confirmation has come back down, so a mismatch anywhere fails
 * every node (by the deadline, or by the abort mccld sends at once).
 */
static uint32_t
tree_pos(uint32_t v, uint32_t root, uint32_t n)
{
	return (v + root) % n;
}

/* Sends (or receives, !sends) the header to (from) each child of v. */
static int
tree_children_headers(struct xfer *x, uint32_t v, uint32_t root,
    uint32_t low, int sends)
{
	for (uint32_t mask = low; mask < x->nnodes - v; mask <<= 1)
		if (header_with(x, tree_pos(v + mask, root, x->nnodes), sends) ==
		    -1)
			return -1;
	return 0;
}

int
tree_broadcast(struct xfer *x, void *buf, size_t bytes, uint32_t root)
{
	uint32_t n = x->nnodes, v = (x->me + n - root) % n, low = 1, parent;
	size_t off[2] = { 0, 0 }, len[2] = { bytes, bytes };
	struct plan p;

	if (n <= 1)
		return 0;
	if (broadcast_plan(x, &p, buf, root) == -1)
		return -1;
	while (low <= v)
		low <<= 1;		/* children: v + mask, low <= mask */
	parent = tree_pos(v - (low >> 1), root, n);
	if (v > 0 && pair_run(x, &p, parent, off, len, 0, 1) == -1)
		return -1;
	for (uint32_t mask = low; mask < n - v; mask <<= 1)
		if (pair_run(x, &p, tree_pos(v + mask, root, n), off, len, 1,
		    0) == -1)
			return -1;
	if (tree_children_headers(x, v, root, low, 0) == -1)
		return -1;
	if (v > 0 && (header_with(x, parent, 1) == -1 ||
	    header_with(x, parent, 0) == -1))
		return -1;
	return tree_children_headers(x, v, root, low, 1);
}

/* The inter-node broadcast, by x->algo where it is one (else by cost). */
int
node_broadcast(struct xfer *x, void *buf, size_t bytes, uint32_t root)
{
	x->hdr.algo = (uint8_t)algo_choose(COLL_BROADCAST, x->algo, x->nnodes,
	    bytes, 0, &x->cost);
	if (x->hdr.algo == ALGO_TREE)
		return tree_broadcast(x, buf, bytes, root);
	return ring_broadcast(x, buf, bytes, root);
}

int
ring_allgather(struct xfer *x, void *buf, const size_t *offs,
    const size_t *lens)
{
	uint32_t n = x->nnodes;
	struct plan p;

	if (n <= 1)
		return 0;
	if (plan_init(x, &p, buf, 1) == -1)
		return -1;
	p.block = gather_block;
	p.offs = offs;
	p.lens = lens;
	return ring_run(x, &p, 1, n - 1, n - 1);
}

/*
 * An allgather of one byte per node: a node returns once a byte that
 * every other node sent on entering has reached it.
 */
int
ring_barrier(struct xfer *x)
{
	uint8_t token = 0;
	struct plan p;

	if (x->nnodes <= 1)
		return 0;
	memset(&p, 0, sizeof(p));
	p.x = x;
	p.links = x->links;
	p.buf = p.src = &token;
	p.chunk = p.esize = p.total = 1;
	p.block = whole_block;
	return ring_run(x, &p, 1, x->nnodes - 1, x->nnodes - 1);
}

/*
 * Send sbytes of sbuf to the node at position `to` while receiving rbytes
 * into rbuf from the node at position `from` (alltoall's pairwise steps).
 */
int
xfer_exchange(struct xfer *x, uint32_t to, const void *sbuf, size_t sbytes,
    uint32_t from, void *rbuf, size_t rbytes)
{
	struct plan ptx, prx;

	if (plan_init(x, &ptx, (void *)(uintptr_t)sbuf, 1) == -1 ||
	    plan_init(x, &prx, rbuf, 1) == -1)
		return -1;
	ptx.block = prx.block = whole_block;
	ptx.total = sbytes;
	prx.total = rbytes;
	return duplex_run(x, &ptx, &prx, 1, 1, 1, to, from);
}

/*
 * xfer_exchange where the two sides' sizes differ by pair (alltoallv):
 * the header this node sends carries sbytes, and the one it receives must
 * carry rbytes, or the op fails naming the node.
 */
int
xfer_exchange_sized(struct xfer *x, uint32_t to, const void *sbuf,
    size_t sbytes, uint32_t from, void *rbuf, size_t rbytes)
{
	uint64_t count = x->hdr.count;
	int rc;

	x->hdr.count = sbytes;
	x->rx_bytes = rbytes;
	x->pair_bytes = 1;
	rc = xfer_exchange(x, to, sbuf, sbytes, from, rbuf, rbytes);
	x->hdr.count = count;
	x->pair_bytes = 0;
	return rc;
}

/*
 * The star of gather and scatter: the root's node and each other node
 * exchange that node's block (offs[p], lens[p] of buf) at once, a lane per
 * node.  The root receives (gather) or sends (scatter) on n - 1 lanes; a
 * node sends from or receives into `mine` (lens[me] bytes).  Data carries
 * the operation header between the root and the others; the others also
 * swap headers among themselves (headers_run), so that, as in a
 * broadcast, every node returns only once every node's header matched.
 */
static int
star_run(struct xfer *x, uint8_t *buf, const size_t *offs,
    const size_t *lens, int gather)
{
	uint32_t n = x->nnodes, k = 0;
	struct plan *p;
	struct lane *l;
	int rc;

	p = calloc(n, sizeof(*p));
	l = calloc(n, sizeof(*l));
	if (p == NULL || l == NULL) {
		free(p);
		free(l);
		return ring_fail(x, MCCL_ERR_NO_MEMORY, "out of memory");
	}
	for (uint32_t q = 0; q < n; q++) {
		if (q == x->me)
			continue;
		if (plan_init(x, &p[k], buf + offs[q], 1) == -1)
			break;
		p[k].block = whole_block;
		p[k].total = lens[q];
		l[k] = (struct lane){ .ptx = &p[k], .prx = &p[k], .nown = !gather,
		    .nsend = !gather, .nrecv = gather, .to = q, .from = q };
		k++;
	}
	rc = k == n - 1 ? lanes_run(x, l, k) : -1;
	free(p);
	free(l);
	return rc;
}

/* A node other than the root's: its block, to or from the root. */
static int
star_leaf(struct xfer *x, uint8_t *mine, size_t len, uint32_t root,
    int gather)
{
	struct plan p;

	if (plan_init(x, &p, mine, 1) == -1)
		return -1;
	p.block = whole_block;
	p.total = len;
	return gather ? duplex_run(x, &p, &p, 1, 1, 0, root, root) :
	    duplex_run(x, &p, &p, 0, 0, 1, root, root);
}

int
ring_gather(struct xfer *x, void *buf, const size_t *offs, const size_t *lens,
    uint32_t root, void *mine)
{
	uint32_t n = x->nnodes, none = UINT32_MAX;

	if (n <= 1)
		return 0;
	if (root >= n)
		return ring_fail(x, MCCL_ERR_INVALID_ARGUMENT, "gather root at "
		    "position %u of %u nodes", root, n);
	if (x->me == root)
		return headers_run(x, none, 1) == -1 ? -1 :
		    star_run(x, buf, offs, lens, 1);
	if (headers_run(x, root, 1) == -1 || headers_run(x, none, 0) == -1)
		return -1;
	return star_leaf(x, mine, lens[x->me], root, 1);
}

int
ring_scatter(struct xfer *x, void *buf, const size_t *offs, const size_t *lens,
    uint32_t root, void *mine)
{
	uint32_t n = x->nnodes, none = UINT32_MAX;

	if (n <= 1)
		return 0;
	if (root >= n)
		return ring_fail(x, MCCL_ERR_INVALID_ARGUMENT, "scatter root at "
		    "position %u of %u nodes", root, n);
	if (x->me == root)
		return headers_run(x, none, 0) == -1 ? -1 :
		    star_run(x, buf, offs, lens, 0);
	if (headers_run(x, none, 1) == -1 || headers_run(x, root, 0) == -1)
		return -1;
	return star_leaf(x, mine, lens[x->me], root, 0);
}

/* ---- halving and doubling ---- */

/* The two blocks of a pairwise step: 0 is sent, 1 is received. */
static void
pair_block(const struct plan *p, size_t i, size_t *off, size_t *len)
{
	*off = p->offs[i];
	*len = p->lens[i];
}

/*
 * One pairwise step with `peer`: send len[0] bytes of p->buf at off[0]
 * (none if !sends) while receiving len[1] bytes into off[1] (none if
 * !recvs), reduced into place through the scratch halves if p->nreduce.
 * The two ranges must not overlap.
 */
static int
pair_run(struct xfer *x, struct plan *p, uint32_t peer, const size_t off[2],
    const size_t len[2], int sends, int recvs)
{
	p->block = pair_block;
	p->offs = off;
	p->lens = len;
	return duplex_run(x, p, p, sends ? 1 : 0, sends ? 1 : 0, recvs ? 1 : 0,
	    peer, peer);
}

/* Byte range of blocks [lo, hi) of p's buffer, cut into n blocks. */
static void
block_range(const struct plan *p, size_t n, size_t lo, size_t hi, size_t *off,
    size_t *len)
{
	*off = block_start(p->total, n, lo) * p->esize;
	*len = block_start(p->total, n, hi) * p->esize - *off;
}

/*
 * Recursive doubling over positions 0..n-1 (n a power of two): log2(n)
 * exchanges of the whole buffer with the node whose position differs in
 * one bit, each followed by a reduction.  Partners combine the same two
 * partial results in either order, and the ops are commutative, so every
 * node ends with the same bits.
 */
static int
doubling_core(struct xfer *x, struct plan *p, uint32_t n)
{
	size_t bytes = p->total * p->esize;
	uint8_t *tmp = x->scratch;
	int rc = 0;

	if (bytes > 2 * x->chunk && (tmp = malloc(bytes)) == NULL)
		return ring_fail(x, MCCL_ERR_NO_MEMORY, "no memory for a "
		    "%zu-byte exchange", bytes);
	for (uint32_t mask = 1; rc == 0 && mask < n; mask <<= 1) {
		uint32_t partner = x->me ^ mask;

		if ((rc = xfer_exchange(x, partner, p->buf, bytes, partner, tmp,
		    bytes)) == 0 && p->total > 0)
			reduce_into(p->buf, tmp, p->total, p->dtype, p->op);
	}
	if (tmp != x->scratch)
		free(tmp);
	return rc;
}

/*
 * Rabenseifner's allreduce over positions 0..n-1 (n a power of two): a
 * reduce-scatter by recursive halving leaves block `me` of n final here,
 * then an allgather by recursive doubling spreads the blocks.  Each node
 * sends 2(n-1)/n of the buffer, as in the ring, in 2 log2(n) steps instead
 * of 2(n-1).  Every element is reduced on one node only, then copied.
 */
static int
rabenseifner_core(struct xfer *x, struct plan *p, uint32_t n)
{
	size_t lo = 0, hi = n, mid, off[2], len[2];
	uint32_t me = x->me, mask, partner;

	p->nreduce = 1;
	for (mask = n / 2; mask >= 1; mask /= 2) {
		partner = me ^ mask;
		mid = (lo + hi) / 2;
		if (me & mask) {
			block_range(p, n, lo, mid, &off[0], &len[0]);
			lo = mid;
		} else {
			block_range(p, n, mid, hi, &off[0], &len[0]);
			hi = mid;
		}
		block_range(p, n, lo, hi, &off[1], &len[1]);
		if (pair_run(x, p, partner, off, len, 1, 1) == -1)
			return -1;
	}
	p->nreduce = 0;
	for (mask = 1; mask < n; mask *= 2) {
		size_t width = hi - lo, plo = me & mask ? lo - width : hi;

		partner = me ^ mask;
		block_range(p, n, lo, hi, &off[0], &len[0]);
		block_range(p, n, plo, plo + width, &off[1], &len[1]);
		if (pair_run(x, p, partner, off, len, 1, 1) == -1)
			return -1;
		lo = MIN(lo, plo);
		hi = lo + 2 * width;
	}
	return 0;
}

static uint32_t
fold_pow2(uint32_t n)
{
	uint32_t pow2 = 1;

	while (pow2 * 2 <= n)
		pow2 *= 2;
	return pow2;
}

/*
 * Whether positions me and q of n exchange in recursive doubling and
 * Rabenseifner's: a helper and the node it folds into, and within the
 * first power of two, the nodes whose positions differ in one bit.
 */
int
ring_pairs_with(uint32_t me, uint32_t q, uint32_t n)
{
	uint32_t pow2 = fold_pow2(n), d = me ^ q;

	if (me >= n || q >= n || me == q)
		return 0;
	if (me >= pow2 || q >= pow2)
		return me == q + pow2 || q == me + pow2;
	return (d & (d - 1)) == 0;
}

/*
 * The power-of-two algorithms on any node count: the r nodes past the
 * largest power of two p first hand their buffer to the node p positions
 * before them, which reduces it into its own; the first p nodes run the
 * algorithm; the r helpers send the result back.
 */
static int
fold_run(struct xfer *x, struct plan *p,
    int (*core)(struct xfer *, struct plan *, uint32_t))
{
	uint32_t n = x->nnodes, pow2 = fold_pow2(n), me = x->me;
	size_t off[2] = { 0, 0 }, len[2];

	len[0] = len[1] = p->total * p->esize;
	if (me >= pow2) {
		p->nreduce = 0;
		return pair_run(x, p, me - pow2, off, len, 1, 0) == -1 ||
		    pair_run(x, p, me - pow2, off, len, 0, 1) == -1 ? -1 : 0;
	}
	if (me + pow2 < n) {
		p->nreduce = 1;
		if (pair_run(x, p, me + pow2, off, len, 0, 1) == -1)
			return -1;
	}
	p->nreduce = 0;
	if (core(x, p, pow2) == -1)
		return -1;
	return me + pow2 < n ? pair_run(x, p, me + pow2, off, len, 1, 0) : 0;
}

/*
 * The one-round allreduce for small buffers on few nodes: every node sends
 * its contribution to every other node and receives theirs, all at once
 * (in batches of PEER_LANES_MAX peers on more nodes), then reduces the n
 * contributions in position order, the same on every node, so that every
 * node ends with the same bits.  One round trip on the wire where
 * recursive doubling takes log2(n), for (n - 1) times the bytes sent.
 */
static int
direct_run(struct xfer *x, struct plan *p)
{
	uint32_t n = x->nnodes, me = x->me, k0, k, nl;
	size_t bytes = p->total * p->esize;
	struct lane lanes[PEER_LANES_MAX];
	struct plan ptx, prx[PEER_LANES_MAX];
	const void **srcs;
	uint8_t *tmp = x->scratch;
	int rc = 0;

	if (bytes > SIZE_MAX / n)
		return ring_fail(x, MCCL_ERR_NO_MEMORY, "%u contributions of "
		    "%zu bytes overflow", n, bytes);
	if (n * bytes > 2 * x->chunk && (tmp = malloc(n * bytes)) == NULL)
		return ring_fail(x, MCCL_ERR_NO_MEMORY, "no memory for %u "
		    "contributions of %zu bytes", n, bytes);
	if ((srcs = calloc(n, sizeof(*srcs))) == NULL) {
		rc = ring_fail(x, MCCL_ERR_NO_MEMORY, "out of memory");
		goto out;
	}
	if (bytes > 0)
		memcpy(tmp + (size_t)me * bytes, p->buf, bytes);
	if ((rc = plan_init(x, &ptx, p->buf, 1)) == -1)
		goto out;
	ptx.block = whole_block;
	ptx.total = bytes;
	for (k0 = 1; rc == 0 && k0 < n; k0 += nl) {
		nl = MIN(n - k0, (uint32_t)PEER_LANES_MAX);
		for (k = 0; k < nl; k++) {
			uint32_t to = (me + k0 + k) % n;
			uint32_t from = (me + n - k0 - k) % n;

			if ((rc = plan_init(x, &prx[k], tmp + (size_t)from *
			    bytes, 1)) == -1)
				goto out;
			prx[k].block = whole_block;
			prx[k].total = bytes;
			lanes[k] = (struct lane){ .ptx = &ptx, .prx = &prx[k],
			    .nown = 1, .nsend = 1, .nrecv = 1, .to = to,
			    .from = from };
		}
		rc = lanes_run(x, lanes, nl);
	}
	if (rc == 0 && p->total > 0) {
		for (k = 0; k < n; k++)
			srcs[k] = tmp + (size_t)k * bytes;
		reduce_many(p->buf, srcs, n, p->total, p->dtype, p->op);
	}
out:
	free(srcs);
	if (tmp != x->scratch)
		free(tmp);
	return rc;
}

/*
 * One step of the narrowed ring: block sb (16-bit, in tx) to the right
 * while block rb arrives from the left into rx; *off and *len: rb's.
 */
static int
narrow_step(struct xfer *x, size_t count, size_t sb, size_t rb,
    const uint8_t *tx, uint8_t *rx, size_t *off, size_t *len)
{
	uint32_t n = x->nnodes;
	size_t slen = block_start(count, n, sb + 1) - block_start(count, n, sb);

	*off = block_start(count, n, rb);
	*len = block_start(count, n, rb + 1) - *off;
	if (xfer_exchange(x, (x->me + 1) % n, tx, 2 * slen,
	    (x->me + n - 1) % n, rx, 2 * *len) == -1)
		return -1;
	x->wire_saved += 2 * slen;	/* of float32's 4 bytes */
	return 0;
}

/*
 * The ring allreduce of float32 with a narrowed wire (x->wire: bfloat16 or
 * float16): what crosses the network is rounded to the 16-bit format, to
 * nearest even, and every sum is taken in float32.  Reduce-scatter: for
 * n - 1 steps a node sends its partial sum of one block, narrowed, to the
 * right and adds the one from the left, widened, to its own.  The block a
 * node then holds whole is rounded once to the wire format, and the
 * allgather passes those 16-bit blocks on as they are: every node widens
 * the same bits, so every node ends with the same result.  Step by step,
 * each step one exchange of a block with both neighbours (its frames
 * pipelined on the link); a large buffer in parts, one per lane.
 */
static int
narrow_ring_run(struct xfer *x, float *buf, size_t count, uint8_t *tx,
    uint8_t *rx)
{
	uint32_t n = x->nnodes, me = x->me;
	size_t off, len;
	uint8_t *t;

	off = block_start(count, n, me);
	wire_narrow(tx, buf + off, block_start(count, n, me + 1) - off,
	    x->wire);
	for (uint32_t s = 0; s + 1 < n; s++) {
		if (narrow_step(x, count, (me + n - s) % n,
		    (me + 2 * n - s - 1) % n, tx, rx, &off, &len) == -1)
			return -1;
		/* what arrived, added, leaves next; the last step's block is
		 * whole here: its wire bits are what every node gets */
		wire_add_narrow(buf + off, buf + off, rx, tx, len, x->wire,
		    s + 2 == n);
	}
	for (uint32_t s = 0; s + 1 < n; s++) {
		if (narrow_step(x, count, (me + 1 + n - s) % n, (me + n - s) %
		    n, tx, rx, &off, &len) == -1)
			return -1;
		wire_widen(buf + off, rx, len, x->wire);
		t = tx;			/* what arrived leaves next, as it is */
		tx = rx;
		rx = t;
	}
	return 0;
}

/* A narrowed ring over count floats of buf, on x's first lane. */
static int
narrow_one(struct xfer *x, float *buf, size_t count)
{
	size_t most = count / x->nnodes + 1;
	uint8_t *tx, *rx;
	int rc;

	if (2 * most * 2 <= 2 * x->chunk && x->scratch != NULL)
		tx = x->scratch;
	else if ((tx = malloc(2 * most * 2)) == NULL)
		return ring_fail(x, MCCL_ERR_NO_MEMORY, "no memory for the "
		    "wire's %zu-byte blocks", 2 * most * 2);
	rx = tx + 2 * most;
	rc = narrow_ring_run(x, buf, count, tx, rx);
	if (tx != x->scratch)
		free(tx);
	return rc;
}

struct narrow_parts {
	float		*buf;
	size_t		 count;
	size_t		 nl;
};

/*
 * Part k of a narrowed allreduce: its share of the buffer, a ring of its
 * own on lane k's links and in lane k's scratch, as ring_allreduce cuts
 * a large buffer.
 */
static int
narrow_part(struct xfer *x, size_t k, void *arg)
{
	const struct narrow_parts *np = arg;
	size_t lo = block_start(np->count, np->nl, k);
	size_t hi = block_start(np->count, np->nl, k + 1);
	struct link *const *links = x->links;
	uint8_t *scratch = x->scratch;
	int rc;

	x->links += k * x->nnodes;
	if (scratch != NULL)
		x->scratch += k * 2 * x->chunk;
	rc = narrow_one(x, np->buf + lo, hi - lo);
	x->links = links;
	x->scratch = scratch;
	return rc;
}

static int
narrow_allreduce(struct xfer *x, const void *src, void *buf, size_t count)
{
	struct narrow_parts np = { buf, count, ring_lanes(x, count * 4) };
	int rc;

	contribution_in(src, buf, count * sizeof(float));
	if ((rc = parts_par(x, np.nl, narrow_part, &np)) != 1)
		return rc;
	for (size_t k = 0; k < np.nl; k++)	/* one thread, in order */
		if (narrow_part(x, k, &np) == -1)
			return -1;
	return 0;
}

/* The wire a float32 sum or average crosses on where the ring runs it. */
static uint8_t
wire_of(const struct xfer *x, int dtype, int op)
{
	return x->wire != 0 && dtype == MCCL_FLOAT32 &&
	    (op == MCCL_SUM || op == MCCL_AVG) ? (uint8_t)x->wire : 0;
}

/*
 * The ring allreduce, on x->wire where it applies (reduce-scatter's: the
 * whole buffer, each node then takes its ranks' blocks).
 */
int
ring_allreduce_wire(struct xfer *x, const void *src, void *buf, size_t count,
    int dtype, int op)
{
	if (x->nnodes > 1 && (x->hdr.wire = wire_of(x, dtype, op)) != 0)
		return allreduce_args(x, count, dtype, &op) == -1 ? -1 :
		    narrow_allreduce(x, src, buf, count);
	return ring_allreduce(x, src, buf, count, dtype, op);
}

/*
 * The inter-node allreduce, by the algorithm x->algo names (AUTO: by cost).
 * The one run goes in the operation header, so a node that chose another
 * fails the op naming both; so does the wire, narrowed where the ring runs
 * a float32 sum and x->wire asks for it.
 */
int
node_allreduce(struct xfer *x, const void *src, void *buf, size_t count,
    int dtype, int op)
{
	size_t es = dtype_size(dtype);
	struct plan p;

	if (x->nnodes > 1) {
		if (allreduce_args(x, count, dtype, &op) == -1)
			return -1;
		x->hdr.algo = (uint8_t)algo_choose(COLL_ALLREDUCE, x->algo,
		    x->nnodes, count * es, wire_of(x, dtype, op) != 0,
		    &x->cost);
		x->hdr.wire = x->hdr.algo == ALGO_RING ? wire_of(x, dtype, op) :
		    0;
		if (x->hdr.wire != 0)
			return narrow_allreduce(x, src, buf, count);
		if (x->hdr.algo == ALGO_RING)
			return ring_allreduce(x, src, buf, count, dtype, op);
	}
	contribution_in(src, buf, count * es);	/* the rest work in place */
	if (x->nnodes <= 1)
		return 0;
	if (x->scratch == NULL)
		return ring_fail(x, MCCL_ERR_INTERNAL, "no scratch buffer");
	if (plan_init(x, &p, buf, es) == -1)
		return -1;
	p.total = count;
	p.dtype = dtype;
	p.op = op;
	if (x->hdr.algo == ALGO_RABENSEIFNER)
		return fold_run(x, &p, rabenseifner_core);
	if (x->hdr.algo == ALGO_DOUBLING)
		return fold_run(x, &p, doubling_core);
	if (x->hdr.algo == ALGO_DIRECT)
		return direct_run(x, &p);
	return ring_fail(x, MCCL_ERR_INVALID_ARGUMENT, "unknown allreduce "
	    "algorithm %u", x->hdr.algo);
}
