/*
 * allreduce.c: the inter-node allreduce, by the algorithm the cost model
 * picks (node_allreduce): the ring, on lanes side by side and balanced in
 * pieces, and its variant with a narrowed wire; recursive doubling and
 * Rabenseifner's halving and doubling; the one-round exchange.  Like
 * ring.c's collectives, each is a sequence of plans and lanes (duplex.h).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/bigmem.h"
#include "engine/engine.h"
#include "engine/duplex.h"
#include "engine/algo.h"
#include "engine/xfer.h"
#include "engine/reduce.h"

#define LANE_MIN_BYTES	((size_t)1 << 18)	/* an allreduce's part per lane */

/* Allreduce: segment s of total elements, the first total % n one longer. */
static void
seg_block(const struct plan *p, size_t i, size_t *off, size_t *len)
{
	size_t n = p->x->nnodes, s = ring_pos(p, i);

	*off = block_start(p->total, n, s) * p->esize;
	*len = block_start(p->total, n, s + 1) * p->esize - *off;
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
		return duplex_fail(x, MCCL_ERR_INVALID_ARGUMENT, "allreduce of "
		    "%zu elements of %s with %s", count, dtype_name(dtype),
		    redop_name(*op));
	return 0;
}

/* A ring allreduce's buffers and what it computes, as each lane sees them. */
struct lane_args {
	const void	*src;
	void		*buf;
	size_t		 count;
	int		 dtype, op;
};

/* Algorithms that work in place start from a copy of the contribution. */
static void
contribution_in(const void *src, void *buf, size_t bytes)
{
	if (src != buf && bytes > 0)
		memcpy(buf, src, bytes);
}

/*
 * Plan and lane k of a ring allreduce over elements [lo, hi) of the op,
 * data flowing right to left if reversed.
 */
static int
lane_init(struct xfer *x, size_t k, const struct lane_args *a, size_t lo,
    size_t hi, int reversed, struct plan *p, struct lane *l)
{
	size_t es = dtype_size(a->dtype), n = x->nnodes;

	if (duplex_plan(x, p, (uint8_t *)a->buf + lo * es, es) == -1)
		return -1;
	p->src = (uint8_t *)(uintptr_t)a->src + lo * es;	/* read only */
	p->links = x->links + k * n;
	p->scratch = x->scratch + k * 2 * x->chunk;
	p->reversed = reversed;
	p->block = seg_block;
	p->total = hi - lo;
	p->dtype = a->dtype;
	p->op = a->op;
	p->nreduce = n - 1;
	*l = (struct lane){ .ptx = p, .prx = p, .nown = 1,
	    .nsend = 2 * (n - 1), .nrecv = 2 * (n - 1) };
	ring_peers(p, &l->to, &l->from);
	return 0;
}

/* Elements [lo, hi) around lane k's links, on this thread. */
static int
lane_range(struct xfer *x, size_t k, const struct lane_args *a, size_t lo,
    size_t hi, int reversed)
{
	struct plan p;
	struct lane l;

	if (lane_init(x, k, a, lo, hi, reversed, &p, &l) == -1)
		return -1;
	return duplex_lanes(x, &l, 1);
}

/*
 * A large ring allreduce balances its lanes, whose connections TCP and the
 * scheduler serve unevenly: each lane starts on its share of the first
 * (PIECE_SHARE - 1) / PIECE_SHARE of the buffer, and the rest is cut into
 * PIECES_PER_LANE pieces a lane, which node 0's lanes take as each one
 * finishes and announce down their ring before running them (a 4-byte
 * index that every node but the last passes on; one past the last piece
 * ends the lane).  The lanes then end within a piece of each other.
 * A piece's direction is its index's, not its lane's, so that its sums
 * come out the same whichever lane takes it.
 */
#define PIECE_SHARE	4
#define PIECES_PER_LANE	4

/* Elements [lo, hi) of the op around lane k's links, on this thread. */
typedef int (*range_fn)(struct xfer *, size_t, const struct lane_args *,
    size_t, size_t, int);

struct pieces {
	struct lane_args a;
	range_fn	 range;
	size_t		 nl;
	size_t		 fixed;		/* elements of the lanes' first shares */
	uint32_t	 npieces;
	uint32_t	 next;		/* node 0: the next piece to hand out */
};

/*
 * Worth it when a piece still gives each node a block of a sixteenth of a
 * chunk (from 16 MiB on 4 nodes and 4 lanes, 8 MiB on 2: a segment of
 * pipeline.c's): smaller, the announcements' round trips cost more than the
 * balance saves.
 */
static int
pieces_fit(const struct xfer *x, size_t bytes, size_t nl)
{
	return nl >= 2 && bytes / PIECE_SHARE / (nl * PIECES_PER_LANE) /
	    x->nnodes >= x->chunk / 16;
}

/* Lanes for bytes of the op, and in pieces where they fit. */
static void
pieces_init(const struct xfer *x, struct pieces *ps, size_t bytes)
{
	ps->nl = ring_lanes(x, bytes);
	ps->fixed = ps->a.count;
	ps->npieces = 0;
	if (pieces_fit(x, bytes, ps->nl)) {
		ps->fixed = ps->a.count - ps->a.count / PIECE_SHARE;
		ps->npieces = (uint32_t)(ps->nl * PIECES_PER_LANE);
	}
}

/* This node's distance from node 0, downstream on lane k's ring. */
static size_t
lane_dist(const struct xfer *x, size_t k)
{
	return k % 2 ? (x->nnodes - x->me) % x->nnodes : x->me;
}

/*
 * Node 0 sends *idx down lane k's ring; every other node takes it from
 * upstream and, but for the last, passes it on.
 */
static int
piece_pass(struct xfer *x, size_t k, uint32_t *idx)
{
	size_t n = x->nnodes, d = lane_dist(x, k);
	uint8_t msg[4];
	struct plan p;
	struct lane l;

	wire_put_u32s(msg, idx, 1);
	if (duplex_plan(x, &p, msg, 1) == -1)
		return -1;
	p.links = x->links + k * n;
	p.reversed = (int)(k % 2);
	p.block = whole_block;
	p.total = sizeof(msg);
	l = (struct lane){ .ptx = &p, .prx = &p, .nown = d == 0,
	    .nsend = d < n - 1, .nrecv = d > 0 };
	ring_peers(&p, &l.to, &l.from);
	if (duplex_lanes(x, &l, 1) == -1)
		return -1;
	wire_get_u32s(idx, msg, 1);
	return 0;
}

static int
piece_bad(struct xfer *x, size_t k, uint32_t idx, uint32_t npieces)
{
	struct plan p = { .x = x, .reversed = (int)(k % 2) };
	uint32_t to, from;

	ring_peers(&p, &to, &from);
	return duplex_fail(x, MCCL_ERR_PROTOCOL, "node %s passed on piece %u "
	    "of an allreduce cut into %u (op seq %llu)", duplex_node(x, from),
	    idx, npieces, (unsigned long long)x->hdr.seq);
}

/* After lane k's first share: the pieces node 0 hands it, to the end. */
static int
pieces_after(struct xfer *x, size_t k, struct pieces *ps)
{
	size_t rest = ps->a.count - ps->fixed;
	uint32_t idx = 0;

	while (ps->npieces > 0) {
		if (lane_dist(x, k) == 0 && (idx = __atomic_fetch_add(
		    &ps->next, 1, __ATOMIC_RELAXED)) > ps->npieces)
			idx = ps->npieces;	/* none left: the end */
		if (piece_pass(x, k, &idx) == -1)
			return -1;
		if (idx == ps->npieces)
			break;
		if (idx > ps->npieces)
			return piece_bad(x, k, idx, ps->npieces);
		if (ps->range(x, k, &ps->a,
		    ps->fixed + block_start(rest, ps->npieces, idx),
		    ps->fixed + block_start(rest, ps->npieces, idx + 1),
		    (int)(idx % 2)) == -1)
			return -1;
	}
	return 0;
}

/* Lane k of a ring allreduce, on its own thread (duplex_parts). */
static int
pieces_lane(struct xfer *x, size_t k, void *arg)
{
	struct pieces *ps = arg;

	if (ps->range(x, k, &ps->a, block_start(ps->fixed, ps->nl, k),
	    block_start(ps->fixed, ps->nl, k + 1), (int)(k % 2)) == -1)
		return -1;
	return pieces_after(x, k, ps);
}

/*
 * Reduce-scatter then allgather: received blocks 1..n-1 are reduced.  A
 * large buffer is cut into one part per lane, each part a ring of its own
 * on the lane's links, odd lanes running right to left, so that both
 * directions of every link carry data and one stall does not idle the rest;
 * a larger one is balanced across the lanes in pieces (above).
 * Out of place (src not buf), the own block leaves from src and each
 * received block is reduced with src into buf: every segment of buf is
 * written once reduced or received, so src is never copied.
 */
int
ring_allreduce(struct xfer *x, const void *src, void *buf, size_t count,
    int dtype, int op)
{
	struct pieces ps = { .a = { src, buf, count, dtype, op },
	    .range = lane_range };
	size_t es = dtype_size(dtype), n = x->nnodes;
	struct plan p[PEER_LANES_MAX];
	struct lane l[PEER_LANES_MAX];
	int rc;

	if (n <= 1) {
		contribution_in(src, buf, count * es);
		return 0;
	}
	if (allreduce_args(x, count, dtype, &ps.a.op) == -1)
		return -1;
	if (x->scratch == NULL && count > 0)
		return duplex_fail(x, MCCL_ERR_INTERNAL, "no scratch buffer");
	pieces_init(x, &ps, count * es);
	if ((rc = duplex_parts(x, ps.nl, pieces_lane, &ps)) != 1)
		return rc;
	/* One thread: the first shares side by side, then each lane's
	   pieces in turn (node 0 hands lane 0 them all). */
	for (size_t k = 0; k < ps.nl; k++)
		if (lane_init(x, k, &ps.a, block_start(ps.fixed, ps.nl, k),
		    block_start(ps.fixed, ps.nl, k + 1), (int)(k % 2), &p[k],
		    &l[k]) == -1)
			return -1;
	if (duplex_lanes(x, l, ps.nl) == -1)
		return -1;
	for (size_t k = 0; k < ps.nl; k++)
		if (pieces_after(x, k, &ps) == -1)
			return -1;
	return 0;
}

/* ---- halving and doubling ---- */

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

	if (bytes > 2 * x->chunk && (tmp = bigmem_alloc(bytes)) == NULL)
		return duplex_fail(x, MCCL_ERR_NO_MEMORY, "no memory for a "
		    "%zu-byte exchange", bytes);
	for (uint32_t mask = 1; rc == 0 && mask < n; mask <<= 1) {
		uint32_t partner = x->me ^ mask;

		if ((rc = xfer_exchange(x, partner, p->buf, bytes, partner, tmp,
		    bytes)) == 0 && p->total > 0)
			reduce_into(p->buf, tmp, p->total, p->dtype, p->op);
	}
	if (tmp != x->scratch)
		bigmem_free(tmp, bytes);
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
		return duplex_fail(x, MCCL_ERR_NO_MEMORY, "%u contributions of "
		    "%zu bytes overflow", n, bytes);
	if (n * bytes > 2 * x->chunk && (tmp = bigmem_alloc(n * bytes)) == NULL)
		return duplex_fail(x, MCCL_ERR_NO_MEMORY, "no memory for %u "
		    "contributions of %zu bytes", n, bytes);
	if ((srcs = calloc(n, sizeof(*srcs))) == NULL) {
		rc = duplex_fail(x, MCCL_ERR_NO_MEMORY, "out of memory");
		goto out;
	}
	if (bytes > 0)
		memcpy(tmp + (size_t)me * bytes, p->buf, bytes);
	if ((rc = duplex_plan(x, &ptx, p->buf, 1)) == -1)
		goto out;
	ptx.block = whole_block;
	ptx.total = bytes;
	for (k0 = 1; rc == 0 && k0 < n; k0 += nl) {
		nl = MIN(n - k0, (uint32_t)PEER_LANES_MAX);
		for (k = 0; k < nl; k++) {
			uint32_t to = (me + k0 + k) % n;
			uint32_t from = (me + n - k0 - k) % n;

			if ((rc = duplex_plan(x, &prx[k], tmp + (size_t)from *
			    bytes, 1)) == -1)
				goto out;
			prx[k].block = whole_block;
			prx[k].total = bytes;
			lanes[k] = (struct lane){ .ptx = &ptx, .prx = &prx[k],
			    .nown = 1, .nsend = 1, .nrecv = 1, .to = to,
			    .from = from };
		}
		rc = duplex_lanes(x, lanes, nl);
	}
	if (rc == 0 && p->total > 0) {
		for (k = 0; k < n; k++)
			srcs[k] = tmp + (size_t)k * bytes;
		reduce_many(p->buf, srcs, n, p->total, p->dtype, p->op);
	}
out:
	free(srcs);
	if (tmp != x->scratch)
		bigmem_free(tmp, n * bytes);
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
	else if ((tx = bigmem_alloc(2 * most * 2)) == NULL)
		return duplex_fail(x, MCCL_ERR_NO_MEMORY, "no memory for the "
		    "wire's %zu-byte blocks", 2 * most * 2);
	rx = tx + 2 * most;
	rc = narrow_ring_run(x, buf, count, tx, rx);
	if (tx != x->scratch)
		bigmem_free(tx, 2 * most * 2);
	return rc;
}

/*
 * Elements [lo, hi) of a narrowed allreduce around lane k's links, in
 * lane k's scratch (pieces.range): its ring always runs right, as every
 * part of the op's does, so its sums do not depend on the lane.
 */
static int
narrow_range(struct xfer *x, size_t k, const struct lane_args *a, size_t lo,
    size_t hi, int reversed)
{
	struct link *const *links = x->links;
	uint8_t *scratch = x->scratch;
	int rc;

	(void)reversed;
	x->links += k * x->nnodes;
	if (scratch != NULL)
		x->scratch += k * 2 * x->chunk;
	rc = narrow_one(x, (float *)a->buf + lo, hi - lo);
	x->links = links;
	x->scratch = scratch;
	return rc;
}

/* Cut and balanced across the lanes as ring_allreduce's buffer is. */
static int
narrow_allreduce(struct xfer *x, const void *src, void *buf, size_t count)
{
	struct pieces ps = { .a = { buf, buf, count, MCCL_FLOAT32, MCCL_SUM },
	    .range = narrow_range };
	int rc;

	contribution_in(src, buf, count * sizeof(float));
	pieces_init(x, &ps, count * sizeof(float));
	if ((rc = duplex_parts(x, ps.nl, pieces_lane, &ps)) != 1)
		return rc;
	for (size_t k = 0; k < ps.nl; k++)	/* one thread, in order */
		if (pieces_lane(x, k, &ps) == -1)
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
	if (x->nnodes > 1 && (x->wire_run = wire_of(x, dtype, op)) != 0)
		return allreduce_args(x, count, dtype, &op) == -1 ? -1 :
		    narrow_allreduce(x, src, buf, count);
	return ring_allreduce(x, src, buf, count, dtype, op);
}

static int
doubling_run(struct xfer *x, struct plan *p)
{
	return fold_run(x, p, doubling_core);
}

static int
rabenseifner_run(struct xfer *x, struct plan *p)
{
	return fold_run(x, p, rabenseifner_core);
}

/* The algorithms that run in place on the frame engine, one row each (the
 * ring, which pipelines through its own buffers, runs before them). */
static const struct {
	int	 algo;
	int	(*run)(struct xfer *, struct plan *);
} inplace_runs[] = {
	{ ALGO_DOUBLING,	doubling_run },
	{ ALGO_RABENSEIFNER,	rabenseifner_run },
	{ ALGO_DIRECT,		direct_run },
};

/*
 * The inter-node allreduce, by the algorithm x->algo names (AUTO: by cost).
 * The one run goes in the operation header, so a node that chose another
 * fails the op naming both; so does the wire asked for (x->wire, in the
 * header whatever runs), narrowed where the ring runs a float32 sum.
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
		x->wire_run = x->hdr.algo == ALGO_RING ? wire_of(x, dtype, op) :
		    0;
		if (x->wire_run != 0)
			return narrow_allreduce(x, src, buf, count);
		if (x->hdr.algo == ALGO_RING)
			return ring_allreduce(x, src, buf, count, dtype, op);
	}
	contribution_in(src, buf, count * es);	/* the rest work in place */
	if (x->nnodes <= 1)
		return 0;
	if (x->scratch == NULL)
		return duplex_fail(x, MCCL_ERR_INTERNAL, "no scratch buffer");
	if (duplex_plan(x, &p, buf, es) == -1)
		return -1;
	p.total = count;
	p.dtype = dtype;
	p.op = op;
	for (size_t i = 0; i < sizeof(inplace_runs) / sizeof(inplace_runs[0]);
	    i++)
		if (inplace_runs[i].algo == x->hdr.algo)
			return inplace_runs[i].run(x, &p);
	return duplex_fail(x, MCCL_ERR_INVALID_ARGUMENT, "unknown allreduce "
	    "algorithm %u", x->hdr.algo);
}
