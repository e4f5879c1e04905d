/*
 * coll.c: a collective on this node, on the engine thread.  The local
 * ranks' buffers are combined in shared memory into one (the node buffer,
 * or a rank's own buffer read in place), the inter-node part runs on it
 * (ring.c, allreduce.c), and the result goes back into every local rank's
 * buffer.  Here: each collective's row and the reductions; a large
 * allreduce runs in segments (pipeline.c), the collectives that move
 * blocks in exchange.c, and all of them on the local buffers as local.c
 * combines and fans them out.  engine.c sets up the op's xfer and calls
 * coll_run.
 */
#include <stdio.h>
#include <stdlib.h>

#include "engine/coll.h"
#include "engine/xfer.h"
#include "engine/reduce.h"

/* All ranks on this node: one pass from the send buffers to the results. */
static int
coll_local_allreduce(struct comm *cm, struct op *op, struct xfer *x)
{
	const struct ipc_op *d = &op->desc;
	uint32_t n = cm->nlocal, avg = d->redop == MCCL_AVG ? cm->nranks : 0;
	void **dsts;
	const void **srcs;
	uint8_t *buf;
	int rc;

	if (op_in_xmem(cm, op))		/* in the engine's buffer, between */
		return (buf = coll_node_buf(cm, op, x)) == NULL ? -1 :
		    coll_combine(cm, op, buf, 0, d->count, x) == -1 ? -1 :
		    coll_fan_out(cm, op, buf, 0, d->count, avg, x);
	dsts = calloc(n, sizeof(*dsts));
	srcs = calloc(n, sizeof(*srcs));
	if (srcs == NULL || dsts == NULL) {
		free(srcs);
		free(dsts);
		return coll_nomem(x);
	}
	for (uint32_t i = 0; i < n; i++) {
		srcs[i] = op->parts[i].send;
		dsts[i] = op->parts[i].recv;
	}
	rc = coll_pass(cm, op, dsts, NULL, n, srcs, NULL, n, d->count, avg,
	    x);
	free(srcs);
	free(dsts);
	return rc;
}

/*
 * The node's contribution to a reduction whose result goes to dst: a lone
 * local rank's send buffer as it is (the algorithm reads it from there, an
 * out-of-place op costs no copy), else the local ranks' combined into dst.
 */
static int
coll_contribution(struct comm *cm, const struct op *op, uint8_t *dst,
    const uint8_t **src, struct xfer *x)
{
	if (cm->nlocal == 1 && op->parts[0].xm == NULL) {
		*src = op->parts[0].send;
		return 0;
	}
	*src = dst;
	return coll_combine(cm, op, dst, 0, op->desc.count, x);
}

/* The inter-node part, timed: the control plane fits the link cost to it. */
static int
coll_node_allreduce(struct op *op, struct xfer *x, const void *src,
    void *dst)
{
	const struct ipc_op *d = &op->desc;
	uint64_t t0 = now_ns();
	int rc = node_allreduce(x, src, dst, d->count, d->dtype, d->redop);

	op->node_ns = now_ns() - t0;
	return rc;
}

/* Bytes the op read and wrote in its ranks' own memory. */
static uint64_t
coll_xmem_bytes(const struct comm *cm, const struct op *op)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < cm->nlocal; i++)
		if (op->parts[i].xm != NULL)
			n += 2 * op_bytes(op);
	return n;
}

static int
coll_allreduce(struct comm *cm, struct op *op, struct xfer *x)
{
	const struct ipc_op *d = &op->desc;
	uint8_t *dst;
	const uint8_t *src;
	int rc;

	if (cm->nnodes == 1)
		rc = coll_local_allreduce(cm, op, x);
	else if (coll_segmented(cm, op_bytes(op)))
		rc = coll_segments(cm, op, x);
	else if ((dst = coll_node_buf(cm, op, x)) == NULL ||
	    coll_contribution(cm, op, dst, &src, x) == -1 ||
	    coll_node_allreduce(op, x, src, dst) == -1)
		rc = -1;
	else
		rc = coll_fan_out(cm, op, dst, 0, d->count,
		    d->redop == MCCL_AVG ? cm->nranks : 0, x);
	if (rc == 0)
		op->xmem_bytes = coll_xmem_bytes(cm, op);
	return rc;
}

static int
coll_reduce(struct comm *cm, struct op *op, struct xfer *x)
{
	const struct ipc_op *d = &op->desc;
	uint32_t root = local_index_of(cm, d->root);
	size_t bytes = op_bytes(op);
	uint8_t *dst = root != UINT32_MAX ? op->parts[root].recv :
	    coll_tmp(cm, bytes, x);
	const uint8_t *src;

	if (dst == NULL && bytes > 0)
		return -1;
	if (coll_contribution(cm, op, dst, &src, x) == -1 ||
	    coll_node_allreduce(op, x, src, dst) == -1)
		return -1;
	if (d->redop == MCCL_AVG && bytes > 0 && root != UINT32_MAX)
		reduce_scale_avg(dst, d->count, d->dtype, cm->nranks);
	return 0;
}

static int
coll_broadcast(struct comm *cm, struct op *op, struct xfer *x)
{
	const struct ipc_op *d = &op->desc;
	uint32_t root_pos = cm->rank_pos[d->root];
	size_t bytes = op_bytes(op);
	uint8_t *buf = op->parts[0].recv;

	if (root_pos == cm->me)
		buf = op->parts[local_index_of(cm, d->root)].recv;
	if (node_broadcast(x, buf, bytes, root_pos) == -1)
		return -1;
	return coll_fan_out(cm, op, buf, 0, d->count, 0, x);
}

static int
coll_barrier(struct comm *cm, struct op *op, struct xfer *x)
{
	(void)cm;
	(void)op;
	return ring_barrier(x);
}

/* Each collective of the engine, by enum coll_type (send/recv: p2p.c). */
static int (*const coll_table[])(struct comm *, struct op *, struct xfer *) = {
	[COLL_ALLREDUCE] = coll_allreduce,
	[COLL_BROADCAST] = coll_broadcast,
	[COLL_BARRIER] = coll_barrier,
	[COLL_REDUCE] = coll_reduce,
	[COLL_ALLGATHER] = coll_allgather,
	[COLL_REDUCE_SCATTER] = coll_reduce_scatter,
	[COLL_ALLTOALL] = coll_alltoall,
	[COLL_GATHER] = coll_gather,
	[COLL_SCATTER] = coll_scatter,
	[COLL_ALLGATHERV] = coll_allgatherv,
	[COLL_ALLTOALLV] = coll_alltoallv,
};

/* Run op on this node, x set up by the engine: 0, or -1 with x's error. */
int
coll_run(struct comm *cm, struct op *op, struct xfer *x)
{
	uint32_t c = op->desc.coll;

	if (c >= sizeof(coll_table) / sizeof(coll_table[0]) ||
	    coll_table[c] == NULL) {
		x->code = MCCL_ERR_INTERNAL;
		snprintf(x->err, sizeof(x->err), "collective %u not in the "
		    "engine", c);
		return -1;
	}
	return coll_table[c](cm, op, x);
}
