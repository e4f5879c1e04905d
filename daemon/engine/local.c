/*
 * local.c: an op's local ranks' buffers, under every collective of this
 * node (coll.h): combined into one, the node's result fanned out to each,
 * in passes over memory on the job's crew (pass.c), and the node buffer
 * the engine keeps for them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/coll.h"
#include "engine/pass.h"
#include "engine/xfer.h"
#include "engine/reduce.h"
#include "transport/transport.h"

uint32_t
local_index_of(const struct comm *cm, uint32_t rank)
{
	for (uint32_t i = 0; i < cm->nlocal; i++)
		if (cm->local_ranks[i] == rank)
			return i;
	return UINT32_MAX;
}

int
coll_nomem(struct xfer *x)
{
	x->code = MCCL_ERR_NO_MEMORY;
	snprintf(x->err, sizeof(x->err), "out of memory");
	return -1;
}

/*
 * The engine's node buffer, of at least bytes (its budget permitting: else
 * NULL, with x's error saying which limit).  Given back when the job is
 * idle (engine_idle).
 */
static uint8_t *
node_scratch(struct scratch *s, size_t bytes, struct xfer *x)
{
	if (bytes == 0 || scratch_get(s, bytes, x->err, sizeof(x->err)) !=
	    NULL)
		return s->buf;
	x->code = MCCL_ERR_NO_MEMORY;
	return NULL;
}

uint8_t *
coll_tmp(struct comm *cm, size_t bytes, struct xfer *x)
{
	return node_scratch(&cm->eng->tmp, bytes, x);
}

/* Forget the node buffers' registration before their pages go. */
void
coll_tmp_release(struct comm *cm)
{
	struct scratch *s[2] = { &cm->eng->tmp, &cm->eng->tmp_alt };

	for (int k = 0; k < 2; k++) {
		if (cm->eng->registers && s[k]->buf != NULL)
			link_mem_forget(s[k]);
		scratch_release(s[k]);
	}
}

/*
 * A pass's fault, as the op's error: whose buffer, which way, why.  A
 * rank's memory that went away mid-op is its own doing (the invalid
 * argument of a buffer freed before its op ended); a rank whose process
 * went away failed as a rank that dies does.
 */
void
coll_pass_fault(const struct comm *cm, const struct op *op,
    const struct pass_fault *f, struct xfer *x)
{
	coll_pass_fault_into(cm, op, f, &x->code, x->err, sizeof(x->err));
}

/* The same into code and err: an op's own, where it ends elsewhere. */
void
coll_pass_fault_into(const struct comm *cm, const struct op *op,
    const struct pass_fault *f, int *code, char *err, size_t errlen)
{
	uint32_t rank = UINT32_MAX;

	for (uint32_t i = 0; i < cm->nlocal; i++)
		if (op->parts[i].xm == f->xm)
			rank = cm->local_ranks[i];
	*code = f->err == ESRCH ? MCCL_ERR_PEER_FAILED :
	    MCCL_ERR_INVALID_ARGUMENT;
	snprintf(err, errlen, "rank %u's %s buffer: the daemon "
	    "could not %s %zu bytes at 0x%llx in its memory: %s%s", rank,
	    f->writing ? "receive" : "send", f->writing ? "write" : "read",
	    f->len, (unsigned long long)f->addr, strerror(f->err),
	    f->err == EFAULT ? " (was it freed or unmapped before the "
	    "allreduce ended?)" : f->err == ESRCH ? " (the process has "
	    "gone)" : "");
}

/* One pass over the op's local buffers (pass.c), on the job's crew. */
int
coll_pass(struct comm *cm, const struct op *op, void *const *dsts,
    struct xmem *const *dxm, uint32_t ndsts, const void *const *srcs,
    struct xmem *const *sxm, uint32_t nsrcs, size_t count,
    uint32_t avg_div, struct xfer *x)
{
	struct pass p;
	int rc = 0;

	if (pass_init(&p, dsts, ndsts, srcs, nsrcs, count, op->desc.dtype,
	    op->desc.redop, avg_div, PASS_PARTS_MAX) == -1 ||
	    pass_xmem(&p, sxm, dxm) == -1) {
		pass_free(&p);
		return coll_nomem(x);
	}
	if (pass_run(&p, cm->eng->crew) == -1) {
		coll_pass_fault(cm, op, &p.fault, x);
		rc = -1;
	}
	pass_free(&p);
	return rc;
}

/* The bytes of the op's count: an allreduce's buffer, each rank's. */
size_t
op_bytes(const struct op *op)
{
	return (size_t)op->desc.count * dtype_size(op->desc.dtype);
}

/* 1 if some local rank's buffers are in its own memory (IPC_OP_XMEM). */
int
op_in_xmem(const struct comm *cm, const struct op *op)
{
	for (uint32_t i = 0; i < cm->nlocal; i++)
		if (op->parts[i].xm != NULL)
			return 1;
	return 0;
}

/*
 * The local ranks' send buffers at byte offset off, the one dst aliases
 * (in place) first, as reduce_many needs, and in sxm whose own memory each
 * is in (NULL: a segment).  Their number.  A client's address never
 * aliases the daemon's.
 */
uint32_t
combine_srcs(const struct comm *cm, const struct op *op, const uint8_t *dst,
    size_t off, const void **srcs, struct xmem **sxm)
{
	uint32_t n = 0;

	for (int first = 1; first >= 0; first--)
		for (uint32_t i = 0; i < cm->nlocal; i++) {
			const struct op_part *pt = &op->parts[i];
			int alias = pt->xm == NULL && pt->send + off == dst;

			if (alias != first)
				continue;
			sxm[n] = pt->xm;
			srcs[n++] = pt->send + off;
		}
	return n;
}

/*
 * Where the node's result at src (byte offset off of the op) goes: every
 * local rank's buffer but src, and src itself (first) where an average is
 * divided on the way; dxm as combine_srcs' sxm.  Their number.
 */
uint32_t
fan_dsts(const struct comm *cm, const struct op *op, uint8_t *src, size_t off,
    uint32_t avg_div, void **dsts, struct xmem **dxm)
{
	uint32_t n = 0;

	if (avg_div > 1) {
		dxm[n] = NULL;
		dsts[n++] = src;
	}
	for (uint32_t i = 0; i < cm->nlocal; i++) {
		const struct op_part *pt = &op->parts[i];

		if (pt->xm != NULL || pt->recv + off != src) {
			dxm[n] = pt->xm;
			dsts[n++] = pt->recv + off;
		}
	}
	return n;
}

/* Combine the local ranks' send buffers, each at byte offset off, into dst. */
int
coll_combine(struct comm *cm, const struct op *op, uint8_t *dst, size_t off,
    size_t count, struct xfer *x)
{
	/* one allocation: a small op's time is mostly such calls */
	void *both = calloc(cm->nlocal, sizeof(void *) + sizeof(void *));
	const void **srcs = both;
	struct xmem **sxm = (struct xmem **)both + cm->nlocal;
	uint32_t n;
	int rc;

	if (srcs == NULL)
		return coll_nomem(x);
	n = combine_srcs(cm, op, dst, off, srcs, sxm);
	rc = count == 0 ? 0 : coll_pass(cm, op, (void *const *)&dst, NULL, 1,
	    srcs, op_in_xmem(cm, op) ? sxm : NULL, n, count, 0, x);
	free(both);
	return rc;
}

/*
 * count elements of the node's result, at src (byte offset off of the op),
 * to every local rank's buffer, divided by avg_div on the way when that is
 * above 1.
 */
int
coll_fan_out(struct comm *cm, const struct op *op, uint8_t *src, size_t off,
    size_t count, uint32_t avg_div, struct xfer *x)
{
	void **dsts = calloc(cm->nlocal + 1, sizeof(*dsts) + sizeof(void *));
	struct xmem **dxm = (struct xmem **)(dsts + cm->nlocal + 1);
	uint32_t n;
	int rc;

	if (dsts == NULL)
		return coll_nomem(x);
	n = fan_dsts(cm, op, src, off, avg_div, dsts, dxm);
	rc = coll_pass(cm, op, dsts, op_in_xmem(cm, op) ? dxm : NULL, n,
	    (const void *const *)&src, NULL, 1, count, avg_div, x);
	free(dsts);
	return rc;
}

/*
 * The buffer an allreduce's node result is built in: the first local
 * rank's, or one of the engine's two where some rank's buffers are in its
 * own memory (the second for an op taken ahead of one holding the first,
 * coll_ahead).  NULL: out of memory, x says so.
 */
uint8_t *
coll_node_buf(struct comm *cm, const struct op *op, struct xfer *x)
{
	if (!op_in_xmem(cm, op))
		return op->parts[0].recv;
	return node_scratch(op->alt_buf ? &cm->eng->tmp_alt : &cm->eng->tmp,
	    op_bytes(op), x);
}
