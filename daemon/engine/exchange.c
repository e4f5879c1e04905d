/*
 * exchange.c: the collectives that move blocks rather than reduce whole
 * buffers: allgather, gather, scatter, reduce-scatter, alltoall and the
 * v forms, each between the local ranks' buffers (in rank order) and the
 * node order the algorithms between nodes use.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/coll.h"
#include "engine/xfer.h"
#include "engine/reduce.h"

/* Each position's block of a buffer in node order, blk bytes per rank. */
static int
coll_blocks(const struct comm *cm, size_t blk, size_t **offs, size_t **lens)
{
	*offs = calloc(cm->nnodes, sizeof(size_t));
	*lens = calloc(cm->nnodes, sizeof(size_t));
	if (*offs == NULL || *lens == NULL) {
		free(*offs);
		free(*lens);
		return -1;
	}
	for (uint32_t p = 0; p < cm->nnodes; p++) {
		(*offs)[p] = (size_t)cm->pos_first[p] * blk;
		(*lens)[p] = (size_t)cm->pos_count[p] * blk;
	}
	return 0;
}

/* Copy a buffer in rank order (blk bytes per rank) into node order. */
static void
coll_reslot(const struct comm *cm, uint8_t *dst, const uint8_t *src,
    size_t blk)
{
	for (uint32_t r = 0; r < cm->nranks && blk > 0; r++)
		memcpy(dst + (size_t)cm->rank_slot[r] * blk, src + (size_t)r * blk,
		    blk);
}

/* Copy a buffer in node order (blk bytes per rank) into rank order. */
static void
coll_unslot(const struct comm *cm, uint8_t *dst, const uint8_t *src,
    size_t blk)
{
	if (blk == 0)		/* nothing, and the buffers may be NULL */
		return;
	if (cm->slots_are_ranks) {
		if (dst != src)
			memcpy(dst, src, (size_t)cm->nranks * blk);
		return;
	}
	for (uint32_t r = 0; r < cm->nranks; r++)
		memcpy(dst + (size_t)r * blk, src + (size_t)cm->rank_slot[r] * blk,
		    blk);
}

/*
 * The local ranks' sends into their slots of dst, blk bytes each, slots
 * counted from first_slot (0: dst holds every slot of the job).
 */
static void
coll_slot_sends(const struct comm *cm, const struct op *op, uint8_t *dst,
    size_t blk, uint32_t first_slot)
{
	for (uint32_t i = 0; i < cm->nlocal && blk > 0; i++) {
		uint8_t *slot = dst + (size_t)(cm->rank_slot[cm->local_ranks[i]] -
		    first_slot) * blk;

		if (slot != op->parts[i].send)
			memcpy(slot, op->parts[i].send, blk);
	}
}

/* The other way: each local rank's block of src into its receive. */
static void
coll_slot_recvs(const struct comm *cm, const struct op *op,
    const uint8_t *src, size_t blk, uint32_t first_slot)
{
	for (uint32_t i = 0; i < cm->nlocal && blk > 0; i++) {
		const uint8_t *slot = src + (size_t)(cm->rank_slot[
		    cm->local_ranks[i]] - first_slot) * blk;

		if (slot != op->parts[i].recv)
			memcpy(op->parts[i].recv, slot, blk);
	}
}

int
coll_allgather(struct comm *cm, struct op *op, struct xfer *x)
{
	size_t blk = op_bytes(op);
	size_t total = blk * cm->nranks, *offs, *lens;
	uint8_t *buf;
	int rc;

	buf = cm->slots_are_ranks ? op->parts[0].recv :
	    coll_tmp(cm, total, x);
	if (buf == NULL && total > 0)
		return -1;
	if (coll_blocks(cm, blk, &offs, &lens))
		return coll_nomem(x);
	coll_slot_sends(cm, op, buf, blk, 0);
	rc = ring_allgather(x, buf, offs, lens);
	free(offs);
	free(lens);
	for (uint32_t i = 0; rc == 0 && i < cm->nlocal && total > 0; i++)
		coll_unslot(cm, op->parts[i].recv, buf, blk);
	return rc;
}

/*
 * Gather and scatter: the root's node holds every block, in node order (in
 * the root's own buffer when that order is the ranks'); another node only
 * its ranks' blocks, side by side in `mine` (in place for a lone rank).
 */
static int
coll_rooted(struct comm *cm, struct op *op, struct xfer *x, int gather)
{
	const struct ipc_op *d = &op->desc;
	size_t blk = op_bytes(op);
	size_t total = blk * cm->nranks, ours = blk * cm->nlocal, *offs, *lens;
	uint32_t root = local_index_of(cm, d->root), first = cm->pos_first[cm->me];
	uint8_t *buf = NULL, *mine = NULL, *user = NULL;
	int rc;

	if (root != UINT32_MAX) {
		user = gather ? op->parts[root].recv : op->parts[root].send;
		buf = cm->slots_are_ranks ? user : coll_tmp(cm, total, x);
		if (buf == NULL && total > 0)
			return -1;
		if (gather)
			coll_slot_sends(cm, op, buf, blk, 0);
		else if (buf != user)
			coll_reslot(cm, buf, user, blk);
	} else {
		mine = cm->nlocal == 1 ? (gather ? op->parts[0].send :
		    op->parts[0].recv) : coll_tmp(cm, ours, x);
		if (mine == NULL && ours > 0)
			return -1;
		if (gather && cm->nlocal > 1)
			coll_slot_sends(cm, op, mine, blk, first);
	}
	if (coll_blocks(cm, blk, &offs, &lens))
		return coll_nomem(x);
	rc = (gather ? ring_gather : ring_scatter)(x, buf, offs, lens,
	    cm->rank_pos[d->root], mine);
	free(offs);
	free(lens);
	if (rc == 0 && gather && buf != NULL && buf != user && total > 0)
		coll_unslot(cm, user, buf, blk);
	if (rc == 0 && !gather)
		coll_slot_recvs(cm, op, buf != NULL ? buf : mine, blk,
		    buf != NULL ? 0 : first);
	return rc;
}

int
coll_gather(struct comm *cm, struct op *op, struct xfer *x)
{
	return coll_rooted(cm, op, x, 1);
}

int
coll_scatter(struct comm *cm, struct op *op, struct xfer *x)
{
	return coll_rooted(cm, op, x, 0);
}

int
coll_reduce_scatter(struct comm *cm, struct op *op, struct xfer *x)
{
	const struct ipc_op *d = &op->desc;
	size_t blk = op_bytes(op);
	uint8_t *buf = coll_tmp(cm, blk * cm->nranks, x);

	if (buf == NULL && blk > 0)
		return -1;
	if (cm->slots_are_ranks) {
		if (coll_combine(cm, op, buf, 0, d->count * cm->nranks, x) == -1)
			return -1;
	} else
		for (uint32_t r = 0; r < cm->nranks; r++)
			if (coll_combine(cm, op, buf + (size_t)cm->rank_slot[r] *
			    blk, (size_t)r * blk, d->count, x) == -1)
				return -1;
	if (ring_allreduce_wire(x, buf, buf, d->count * cm->nranks, d->dtype,
	    d->redop) == -1)
		return -1;
	for (uint32_t i = 0; i < cm->nlocal && blk > 0; i++) {
		uint8_t *mine = buf + (size_t)cm->rank_slot[cm->local_ranks[i]] *
		    blk;

		if (d->redop == MCCL_AVG)
			reduce_scale_avg(mine, d->count, d->dtype, cm->nranks);
		memcpy(op->parts[i].recv, mine, blk);
	}
	return 0;
}

/*
 * Alltoall in pairwise steps: at step s this node sends to the node s
 * places to its right everything its ranks have for that node's ranks,
 * packed in one stream, and receives the same from the node s places to
 * its left.  Blocks between local ranks are copied directly.
 */
struct a2a {
	const uint8_t	**send;		/* each local rank's send buffer */
	size_t		  blk;
	uint8_t		 *spack, *rpack;
};

static size_t
a2a_pack(const struct comm *cm, const struct a2a *a, uint32_t to)
{
	size_t k = 0;

	for (uint32_t i = 0; i < cm->nlocal; i++)
		for (uint32_t r = 0; r < cm->nranks; r++)
			if (cm->rank_pos[r] == to)
				memcpy(a->spack + a->blk * k++, a->send[i] +
				    (size_t)r * a->blk, a->blk);
	return k * a->blk;
}

static void
a2a_unpack(const struct comm *cm, const struct op *op, const struct a2a *a,
    uint32_t from)
{
	size_t k = 0;

	for (uint32_t r = 0; r < cm->nranks; r++)
		if (cm->rank_pos[r] == from)
			for (uint32_t i = 0; i < cm->nlocal; i++)
				memcpy(op->parts[i].recv + (size_t)r * a->blk,
				    a->rpack + a->blk * k++, a->blk);
}

static void
a2a_local(const struct comm *cm, const struct op *op, const struct a2a *a)
{
	for (uint32_t i = 0; i < cm->nlocal; i++)
		for (uint32_t k = 0; k < cm->nlocal; k++)
			memcpy(op->parts[k].recv + (size_t)cm->local_ranks[i] *
			    a->blk, a->send[i] + (size_t)cm->local_ranks[k] *
			    a->blk, a->blk);
}

/*
 * Scratch for an alltoall: a copy of the sends of the ranks that run it in
 * place (their receives overwrite them), then one packing buffer each way,
 * as large as the most this node exchanges with one node.
 */
static size_t
a2a_scratch(const struct comm *cm, const struct op *op, size_t blk,
    size_t *copies, size_t *pack)
{
	uint32_t most = 0;

	*copies = 0;
	for (uint32_t i = 0; i < cm->nlocal; i++)
		if (op->parts[i].send == op->parts[i].recv)
			*copies += blk * cm->nranks;
	for (uint32_t p = 0; p < cm->nnodes; p++)
		if (p != cm->me && cm->pos_count[p] > most)
			most = cm->pos_count[p];
	*pack = (size_t)most * cm->nlocal * blk;
	return *copies + 2 * *pack;
}

int
coll_alltoall(struct comm *cm, struct op *op, struct xfer *x)
{
	size_t blk = op_bytes(op);
	size_t copies, pack, need = a2a_scratch(cm, op, blk, &copies, &pack);
	struct a2a a = { NULL, blk, NULL, NULL };
	uint8_t *tmp = coll_tmp(cm, need, x), *copy;
	int rc = 0;

	if (tmp == NULL && need > 0)
		return -1;
	if ((a.send = calloc(cm->nlocal, sizeof(*a.send))) == NULL)
		return coll_nomem(x);
	copy = tmp;
	for (uint32_t i = 0; i < cm->nlocal; i++) {
		a.send[i] = op->parts[i].send;
		if (blk > 0 && op->parts[i].send == op->parts[i].recv) {
			memcpy(copy, a.send[i], blk * cm->nranks);
			a.send[i] = copy;
			copy += blk * cm->nranks;
		}
	}
	a.spack = tmp + copies;
	a.rpack = tmp + copies + pack;
	if (blk > 0)
		a2a_local(cm, op, &a);
	/* Count 0 still exchanges headers: mismatches are found all the same. */
	for (uint32_t s = 1; rc == 0 && s < cm->nnodes; s++) {
		uint32_t to = (cm->me + s) % cm->nnodes;
		uint32_t from = (cm->me + cm->nnodes - s) % cm->nnodes;
		size_t sbytes = blk > 0 ? a2a_pack(cm, &a, to) : 0;
		size_t rbytes = (size_t)cm->pos_count[from] * cm->nlocal * blk;

		if ((rc = xfer_exchange(x, to, a.spack, sbytes, from, a.rpack,
		    rbytes)) == 0 && blk > 0)
			a2a_unpack(cm, op, &a, from);
	}
	free(a.send);
	return rc;
}

/*
 * Allgatherv: as allgather, with each slot as long as its rank's count.
 * at[s] is where slot s starts in the node-order buffer (at[nranks]: its
 * length); every position's region follows from it.
 */
static int
v_layout(const struct comm *cm, const uint64_t *counts, size_t es,
    size_t **at, size_t **offs, size_t **lens)
{
	*at = calloc(cm->nranks + 1, sizeof(size_t));
	*offs = calloc(cm->nnodes, sizeof(size_t));
	*lens = calloc(cm->nnodes, sizeof(size_t));
	if (*at == NULL || *offs == NULL || *lens == NULL) {
		free(*at);
		free(*offs);
		free(*lens);
		return -1;
	}
	for (uint32_t r = 0; r < cm->nranks; r++)	/* slot sizes, shifted */
		(*at)[cm->rank_slot[r] + 1] = (size_t)counts[r] * es;
	for (uint32_t s = 0; s < cm->nranks; s++)
		(*at)[s + 1] += (*at)[s];
	for (uint32_t p = 0; p < cm->nnodes; p++) {
		(*offs)[p] = (*at)[cm->pos_first[p]];
		(*lens)[p] = (*at)[cm->pos_first[p] + cm->pos_count[p]] -
		    (*offs)[p];
	}
	return 0;
}

int
coll_allgatherv(struct comm *cm, struct op *op, struct xfer *x)
{
	const uint64_t *counts = op->parts[0].vec;	/* the same on all */
	size_t es = dtype_size(op->desc.dtype), *at, *offs, *lens;
	uint8_t *buf;
	int rc;

	if (v_layout(cm, counts, es, &at, &offs, &lens) == -1)
		return coll_nomem(x);
	if ((buf = coll_tmp(cm, at[cm->nranks], x)) == NULL &&
	    at[cm->nranks] > 0) {
		rc = -1;
		goto out;
	}
	for (uint32_t i = 0; i < cm->nlocal; i++) {
		uint32_t r = cm->local_ranks[i];

		if (counts[r] > 0)
			memcpy(buf + at[cm->rank_slot[r]], op->parts[i].send,
			    counts[r] * es);
	}
	/* The nodes must agree on every count: the header carries a digest. */
	x->hdr.root = proto_vec_digest(counts, cm->nranks);
	if ((rc = ring_allgather(x, buf, offs, lens)) == 0)
		for (uint32_t i = 0; i < cm->nlocal; i++) {
			const uint64_t *displs = op->parts[i].vec + cm->nranks;

			for (uint32_t r = 0; r < cm->nranks; r++)
				if (counts[r] > 0)
					memcpy(op->parts[i].recv + displs[r] *
					    es, buf + at[cm->rank_slot[r]],
					    counts[r] * es);
		}
out:
	free(at);
	free(offs);
	free(lens);
	return rc;
}

/*
 * Alltoallv, rank i's view: sendcounts, sdispls, recvcounts, rdispls,
 * nranks each, in its vector.
 */
#define SCOUNT(op, i, n)	((op)->parts[i].vec)
#define SDISPL(op, i, n)	((op)->parts[i].vec + (n))
#define RCOUNT(op, i, n)	((op)->parts[i].vec + 2 * (size_t)(n))
#define RDISPL(op, i, n)	((op)->parts[i].vec + 3 * (size_t)(n))

/*
 * Each pair's block with the node at pos, in one order on both sides: by
 * sending rank, then receiving rank.  fn sees the local rank i, the other
 * rank r and the pair's count; it returns the block's bytes.
 */
static size_t
a2av_pairs(const struct comm *cm, const struct op *op, uint32_t pos, int recv,
    size_t (*fn)(const struct comm *, const struct op *, uint32_t,
    uint32_t, void *), void *arg)
{
	uint32_t n = cm->nranks;
	size_t total = 0;

	for (uint32_t a = 0; a < (recv ? n : cm->nlocal); a++)
		for (uint32_t b = 0; b < (recv ? cm->nlocal : n); b++) {
			uint32_t r = recv ? a : b, i = recv ? b : a;

			if (cm->rank_pos[r] == pos)
				total += fn(cm, op, i, r, arg);
		}
	return total;
}

/*
 * A step's stream: for each pair, what the sender sends on it and what it
 * expects back on the same pair of ranks, then the blocks.  The receiver
 * checks both directions, so a pair whose counts disagree fails on the
 * nodes of both its ranks, however the steps pair the nodes.
 */
#define A2AV_PAIR	(2 * sizeof(uint64_t))

struct a2av_cursor {
	int		 recv;
	size_t		 es;
	uint8_t		*counts;	/* the pairs' counts, in order */
	uint8_t		*data;		/* their blocks, in order */
	int		 bad;		/* unpack: a pair's counts differ */
	uint32_t	 from, to;	/* its sending and receiving rank */
	uint64_t	 sends, expects;
};

static size_t
a2av_size(const struct comm *cm, const struct op *op, uint32_t i, uint32_t r,
    void *arg)
{
	const struct a2av_cursor *c = arg;

	return A2AV_PAIR + (c->recv ? RCOUNT(op, i, cm->nranks) :
	    SCOUNT(op, i, cm->nranks))[r] * c->es;
}

static size_t
a2av_put(const struct comm *cm, const struct op *op, uint32_t i, uint32_t r,
    void *arg)
{
	struct a2av_cursor *c = arg;
	uint64_t count[2] = { SCOUNT(op, i, cm->nranks)[r],
	    RCOUNT(op, i, cm->nranks)[r] };

	memcpy(c->counts, count, A2AV_PAIR);
	c->counts += A2AV_PAIR;
	if (count[0] > 0)	/* else the buffer may be NULL */
		memcpy(c->data, op->parts[i].send + SDISPL(op, i,
		    cm->nranks)[r] * c->es, count[0] * c->es);
	c->data += count[0] * c->es;
	return 0;
}

static void
a2av_bad(struct a2av_cursor *c, uint32_t from, uint32_t to, uint64_t sends,
    uint64_t expects)
{
	if (c->bad++)
		return;
	c->from = from;
	c->to = to;
	c->sends = sends;
	c->expects = expects;
}

/* Check every pair's counts first, before any block lands. */
static size_t
a2av_check(const struct comm *cm, const struct op *op, uint32_t i, uint32_t r,
    void *arg)
{
	struct a2av_cursor *c = arg;
	uint32_t me = cm->local_ranks[i];
	uint64_t count[2];

	memcpy(count, c->counts, A2AV_PAIR);
	c->counts += A2AV_PAIR;
	if (count[0] != RCOUNT(op, i, cm->nranks)[r])
		a2av_bad(c, r, me, count[0], RCOUNT(op, i, cm->nranks)[r]);
	else if (count[1] != SCOUNT(op, i, cm->nranks)[r])
		a2av_bad(c, me, r, SCOUNT(op, i, cm->nranks)[r], count[1]);
	return 0;
}

static size_t
a2av_get(const struct comm *cm, const struct op *op, uint32_t i, uint32_t r,
    void *arg)
{
	struct a2av_cursor *c = arg;
	size_t len = RCOUNT(op, i, cm->nranks)[r] * c->es;

	if (len > 0)		/* else the buffer may be NULL */
		memcpy(op->parts[i].recv + RDISPL(op, i, cm->nranks)[r] *
		    c->es, c->data, len);
	c->data += len;
	return 0;
}

/* The pairs' counts take the stream's first bytes. */
static size_t
a2av_npairs(const struct comm *cm, uint32_t pos)
{
	return (size_t)cm->pos_count[pos] * cm->nlocal * A2AV_PAIR;
}

/* Between local ranks: each pair's counts must agree, then a copy. */
static int
a2av_local(const struct comm *cm, const struct op *op, size_t es,
    struct xfer *x)
{
	uint32_t n = cm->nranks;

	for (uint32_t i = 0; i < cm->nlocal; i++)
		for (uint32_t k = 0; k < cm->nlocal; k++) {
			uint32_t src = cm->local_ranks[i], dst = cm->local_ranks[k];
			uint64_t c = SCOUNT(op, i, n)[dst];

			if (c != RCOUNT(op, k, n)[src]) {
				x->code = MCCL_ERR_INVALID_ARGUMENT;
				snprintf(x->err, sizeof(x->err), "alltoallv: rank "
				    "%u sends %llu elements to rank %u, which "
				    "expects %llu", src, (unsigned long long)c,
				    dst, (unsigned long long)RCOUNT(op, k, n)[src]);
				return -1;
			}
			if (c > 0)
				memcpy(op->parts[k].recv + RDISPL(op, k, n)[src] *
				    es, op->parts[i].send + SDISPL(op, i, n)[dst] *
				    es, c * es);
		}
	return 0;
}

/* One pairwise step: to `to`, from `from`, through spack and rpack. */
static int
a2av_step(struct comm *cm, struct op *op, struct xfer *x, uint32_t to,
    uint32_t from, uint8_t *spack, uint8_t *rpack)
{
	size_t es = dtype_size(op->desc.dtype);
	struct a2av_cursor tx = { .es = es, .counts = spack,
	    .data = spack + a2av_npairs(cm, to) };
	struct a2av_cursor rx = { .recv = 1, .es = es, .counts = rpack,
	    .data = rpack + a2av_npairs(cm, from) };
	size_t sbytes = a2av_pairs(cm, op, to, 0, a2av_size, &tx);
	size_t rbytes = a2av_pairs(cm, op, from, 1, a2av_size, &rx);

	a2av_pairs(cm, op, to, 0, a2av_put, &tx);
	if (xfer_exchange_sized(x, to, spack, sbytes, from, rpack, rbytes) == -1)
		return -1;
	a2av_pairs(cm, op, from, 1, a2av_check, &rx);
	if (rx.bad) {
		x->code = MCCL_ERR_INVALID_ARGUMENT;
		snprintf(x->err, sizeof(x->err), "alltoallv: rank %u sends %llu "
		    "elements to rank %u, which expects %llu", rx.from,
		    (unsigned long long)rx.sends, rx.to,
		    (unsigned long long)rx.expects);
		return -1;
	}
	a2av_pairs(cm, op, from, 1, a2av_get, &rx);
	return 0;
}

/*
 * Alltoallv in the pairwise steps of alltoall.  Each step's stream starts
 * with every pair's counts, and its header carries its length: counts that
 * disagree fail the op on the nodes of the pair's ranks, naming them,
 * before any block of that step lands.
 */
int
coll_alltoallv(struct comm *cm, struct op *op, struct xfer *x)
{
	size_t es = dtype_size(op->desc.dtype), smax = 0, rmax = 0, b;
	struct a2av_cursor sz = { .es = es };
	uint8_t *tmp;
	int rc = 0;

	for (uint32_t p = 0; p < cm->nnodes; p++) {
		if (p == cm->me)
			continue;
		sz.recv = 0;
		if ((b = a2av_pairs(cm, op, p, 0, a2av_size, &sz)) > smax)
			smax = b;
		sz.recv = 1;
		if ((b = a2av_pairs(cm, op, p, 1, a2av_size, &sz)) > rmax)
			rmax = b;
	}
	if ((tmp = coll_tmp(cm, smax + rmax, x)) == NULL && smax + rmax > 0)
		return -1;
	/* The other nodes first: they need not wait for a local mismatch. */
	for (uint32_t s = 1; rc == 0 && s < cm->nnodes; s++)
		rc = a2av_step(cm, op, x, (cm->me + s) % cm->nnodes,
		    (cm->me + cm->nnodes - s) % cm->nnodes, tmp, tmp + smax);
	return rc == 0 ? a2av_local(cm, op, es, x) : rc;
}
