/*
 * ring.c: the inter-node half of every collective but the allreduce
 * (allreduce.c).  A job's engine thread calls a ring_* function once the
 * local ranks' buffers are combined into one; it runs the node-level
 * algorithm over the job's data links and returns with the result in
 * place, or fails naming the node and the reason.  Each algorithm here is
 * a sequence of plans and lanes (duplex.h) that the frame engine
 * (duplex.c) runs; the ways to cut a buffer into blocks and the pairwise
 * step are shared with allreduce.c.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/duplex.h"
#include "engine/xfer.h"

/* ---- how each algorithm cuts its buffer into blocks ---- */

/* Position whose block is this node's block i. */
uint32_t
ring_pos(const struct plan *p, size_t i)
{
	size_t n = p->x->nnodes, me = p->x->me;

	return (uint32_t)(p->reversed ? (me + i) % n : (me + n - i % n) % n);
}

/* First element of block b when count elements are cut into n blocks. */
size_t
block_start(size_t count, size_t n, size_t b)
{
	return b * (count / n) + MIN(b, count % n);
}


static void
gather_block(const struct plan *p, size_t i, size_t *off, size_t *len)
{
	uint32_t s = ring_pos(p, i);

	*off = p->offs[s];
	*len = p->lens[s];
}

/* Broadcast and barrier: one block, the whole buffer. */
void
whole_block(const struct plan *p, size_t i, size_t *off, size_t *len)
{
	(void)i;
	*off = 0;
	*len = p->total;
}

/* The neighbour p sends to, and the one it receives from. */
void
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
int
pair_run(struct xfer *x, struct plan *p, uint32_t peer, const size_t off[2],
    const size_t len[2], int sends, int recvs)
{
	p->block = pair_block;
	p->offs = off;
	p->lens = len;
	return duplex_run(x, p, p, sends ? 1 : 0, sends ? 1 : 0, recvs ? 1 : 0,
	    peer, peer);
}

/* ---- the collectives ---- */

/* The operation header alone (an empty block) to peer, or from it. */
static int
header_with(struct xfer *x, uint32_t peer, int sends)
{
	struct plan p;

	if (duplex_plan(x, &p, NULL, 1) == -1)
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
		return duplex_fail(x, MCCL_ERR_INVALID_ARGUMENT, "broadcast root "
		    "at position %u of %u nodes", root, x->nnodes);
	return duplex_plan(x, p, buf, 1);
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
	if (duplex_plan(x, &p, buf, 1) == -1)
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

	if (duplex_plan(x, &ptx, (void *)(uintptr_t)sbuf, 1) == -1 ||
	    duplex_plan(x, &prx, rbuf, 1) == -1)
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
		return duplex_fail(x, MCCL_ERR_NO_MEMORY, "out of memory");
	}
	for (uint32_t q = 0; q < n; q++) {
		if (q == x->me)
			continue;
		if (duplex_plan(x, &p[k], buf + offs[q], 1) == -1)
			break;
		p[k].block = whole_block;
		p[k].total = lens[q];
		l[k] = (struct lane){ .ptx = &p[k], .prx = &p[k], .nown = !gather,
		    .nsend = !gather, .nrecv = gather, .to = q, .from = q };
		k++;
	}
	rc = k == n - 1 ? duplex_lanes(x, l, k) : -1;
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

	if (duplex_plan(x, &p, mine, 1) == -1)
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
		return duplex_fail(x, MCCL_ERR_INVALID_ARGUMENT, "gather root at "
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
		return duplex_fail(x, MCCL_ERR_INVALID_ARGUMENT, "scatter root at "
		    "position %u of %u nodes", root, n);
	if (x->me == root)
		return headers_run(x, none, 0) == -1 ? -1 :
		    star_run(x, buf, offs, lens, 0);
	if (headers_run(x, none, 1) == -1 || headers_run(x, root, 0) == -1)
		return -1;
	return star_leaf(x, mine, lens[x->me], root, 0);
}
