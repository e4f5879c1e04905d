/*
 * coll.c: a collective on this node, on the engine thread.  The local
 * ranks' buffers are combined in shared memory into one (the node buffer,
 * or a rank's own buffer read in place), the inter-node part runs on it
 * (ring.c, allreduce.c), and the result goes back into every local rank's
 * buffer; large ones in segments, each segment's passes on the job's crew
 * beside the network, and the ends of ops queued back to back beside each
 * other.  engine.c sets up the op's xfer and calls coll_run.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_state.h"
#include "engine/pass.h"
#include "transport/transport.h"

static uint32_t
local_index_of(const struct job *j, uint32_t rank)
{
	for (uint32_t i = 0; i < j->nlocal; i++)
		if (j->local_ranks[i] == rank)
			return i;
	return UINT32_MAX;
}

static int
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
coll_tmp(struct job *j, size_t bytes, struct xfer *x)
{
	uint8_t *p;

	if (bytes == 0 || (p = scratch_get(&j->eng->tmp, bytes, x->err,
	    sizeof(x->err))) != NULL)
		return j->eng->tmp.buf;
	x->code = MCCL_ERR_NO_MEMORY;
	return NULL;
}

/* Forget the node buffer's registration before its pages go. */
void
coll_tmp_release(struct job *j)
{
	if (j->eng->registers && j->eng->tmp.buf != NULL)
		link_mem_forget(&j->eng->tmp);
	scratch_release(&j->eng->tmp);
}

/*
 * A pass's fault, as the op's error: whose buffer, which way, why.  A
 * rank's memory that went away mid-op is its own doing (the invalid
 * argument of a buffer freed before its op ended); a rank whose process
 * went away failed as a rank that dies does.
 */
static void
coll_pass_fault(const struct job *j, const struct op *op,
    const struct pass_fault *f, struct xfer *x)
{
	uint32_t rank = UINT32_MAX;

	for (uint32_t i = 0; i < j->nlocal; i++)
		if (op->parts[i].xm == f->xm)
			rank = j->local_ranks[i];
	x->code = f->err == ESRCH ? MCCL_ERR_PEER_FAILED :
	    MCCL_ERR_INVALID_ARGUMENT;
	snprintf(x->err, sizeof(x->err), "rank %u's %s buffer: the daemon "
	    "could not %s %zu bytes at 0x%llx in its memory: %s%s", rank,
	    f->writing ? "receive" : "send", f->writing ? "write" : "read",
	    f->len, (unsigned long long)f->addr, strerror(f->err),
	    f->err == EFAULT ? " (was it freed or unmapped before the "
	    "allreduce ended?)" : f->err == ESRCH ? " (the process has "
	    "gone)" : "");
}

/* One pass over the op's local buffers (pass.c), on the job's crew. */
static int
coll_pass(struct job *j, const struct op *op, void *const *dsts,
    const struct xmem *const *dxm, uint32_t ndsts, const void *const *srcs,
    const struct xmem *const *sxm, uint32_t nsrcs, size_t count,
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
	if (pass_run(&p, j->eng->crew) == -1) {
		coll_pass_fault(j, op, &p.fault, x);
		rc = -1;
	}
	pass_free(&p);
	return rc;
}

/* The bytes of the op's count: an allreduce's buffer, each rank's. */
static size_t
op_bytes(const struct op *op)
{
	return (size_t)op->desc.count * dtype_size(op->desc.dtype);
}

/* 1 if some local rank's buffers are in its own memory (IPC_OP_XMEM). */
static int
op_in_xmem(const struct job *j, const struct op *op)
{
	for (uint32_t i = 0; i < j->nlocal; i++)
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
static uint32_t
combine_srcs(const struct job *j, const struct op *op, const uint8_t *dst,
    size_t off, const void **srcs, const struct xmem **sxm)
{
	uint32_t n = 0;

	for (int first = 1; first >= 0; first--)
		for (uint32_t i = 0; i < j->nlocal; i++) {
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
static uint32_t
fan_dsts(const struct job *j, const struct op *op, uint8_t *src, size_t off,
    uint32_t avg_div, void **dsts, const struct xmem **dxm)
{
	uint32_t n = 0;

	if (avg_div > 1) {
		dxm[n] = NULL;
		dsts[n++] = src;
	}
	for (uint32_t i = 0; i < j->nlocal; i++) {
		const struct op_part *pt = &op->parts[i];

		if (pt->xm != NULL || pt->recv + off != src) {
			dxm[n] = pt->xm;
			dsts[n++] = pt->recv + off;
		}
	}
	return n;
}

/* Combine the local ranks' send buffers, each at byte offset off, into dst. */
static int
coll_combine(struct job *j, const struct op *op, uint8_t *dst, size_t off,
    size_t count, struct xfer *x)
{
	/* one allocation: a small op's time is mostly such calls */
	const void **srcs = calloc(j->nlocal, sizeof(*srcs) + sizeof(void *));
	const struct xmem **sxm = (const struct xmem **)(srcs + j->nlocal);
	uint32_t n;
	int rc;

	if (srcs == NULL)
		return coll_nomem(x);
	n = combine_srcs(j, op, dst, off, srcs, sxm);
	rc = count == 0 ? 0 : coll_pass(j, op, (void *const *)&dst, NULL, 1,
	    srcs, op_in_xmem(j, op) ? sxm : NULL, n, count, 0, x);
	free(srcs);
	return rc;
}

/*
 * count elements of the node's result, at src (byte offset off of the op),
 * to every local rank's buffer, divided by avg_div on the way when that is
 * above 1.
 */
static int
coll_fan_out(struct job *j, const struct op *op, uint8_t *src, size_t off,
    size_t count, uint32_t avg_div, struct xfer *x)
{
	void **dsts = calloc(j->nlocal + 1, sizeof(*dsts) + sizeof(void *));
	const struct xmem **dxm = (const struct xmem **)(dsts + j->nlocal + 1);
	uint32_t n;
	int rc;

	if (dsts == NULL)
		return coll_nomem(x);
	n = fan_dsts(j, op, src, off, avg_div, dsts, dxm);
	rc = coll_pass(j, op, dsts, op_in_xmem(j, op) ? dxm : NULL, n,
	    (const void *const *)&src, NULL, 1, count, avg_div, x);
	free(dsts);
	return rc;
}

/*
 * The buffer an allreduce's node result is built in: the first local
 * rank's, or the engine's own where some rank's buffers are in its own
 * memory.  NULL: out of memory, x says so.
 */
static uint8_t *
coll_node_buf(struct job *j, const struct op *op, struct xfer *x)
{
	if (!op_in_xmem(j, op))
		return op->parts[0].recv;
	return coll_tmp(j, op_bytes(op), x);
}

/* All ranks on this node: one pass from the send buffers to the results. */
static int
coll_local_allreduce(struct job *j, struct op *op, struct xfer *x)
{
	const struct ipc_op *d = &op->desc;
	uint32_t n = j->nlocal, avg = d->redop == MCCL_AVG ? j->nranks : 0;
	void **dsts;
	const void **srcs;
	uint8_t *buf;
	int rc;

	if (op_in_xmem(j, op))		/* in the engine's buffer, between */
		return (buf = coll_node_buf(j, op, x)) == NULL ? -1 :
		    coll_combine(j, op, buf, 0, d->count, x) == -1 ? -1 :
		    coll_fan_out(j, op, buf, 0, d->count, avg, x);
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
	rc = coll_pass(j, op, dsts, NULL, n, srcs, NULL, n, d->count, avg,
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
coll_contribution(struct job *j, const struct op *op, uint8_t *dst,
    const uint8_t **src, struct xfer *x)
{
	if (j->nlocal == 1 && op->parts[0].xm == NULL) {
		*src = op->parts[0].send;
		return 0;
	}
	*src = dst;
	return coll_combine(j, op, dst, 0, op->desc.count, x);
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

/*
 * A large allreduce of a job where some node has several ranks runs in
 * segments: while the network carries segment s, the side crew hands out
 * segment s - 1 and combines segment s + 1, so that a node's passes over
 * memory hide behind the wire instead of adding to it.  Every node cuts
 * the same, by what all of them know (the count, the job's shape); each
 * segment's operation header still names the whole op.  From
 * OVERLAP_BYTES to two segments an op is one segment, which still
 * overlaps the ops queued beside it (coll_segments).
 */
#define SEGMENT_BYTES	(8u << 20)
#define OVERLAP_BYTES	(1u << 20)
#define SIDE_PARTS	3		/* threads of each side pass */

static int
coll_segmented(const struct job *j, size_t bytes)
{
	return j->nnodes > 1 && j->nranks > j->nnodes &&
	    bytes >= OVERLAP_BYTES;
}

/* Elements in each segment of op but its last. */
static size_t
seg_count(const struct op *op)
{
	const struct ipc_op *d = &op->desc;
	size_t seg = SEGMENT_BYTES / dtype_size(d->dtype);

	return d->count >= 2 * seg ? seg : d->count;
}

struct side {
	struct job	*j;
	struct pass	 pass[2];	/* the fan-out, the combine */
	uint8_t		*fan_src;	/* what the passes point at */
	uint8_t		*comb_dst;
	void		**fan;		/* their buffers (nlocal + 1 each) */
	const struct xmem **fan_xm;
	const void	**comb;
	const struct xmem **comb_xm;
	int		 started;	/* on the side crew */
	struct op	*ends;		/* the fan-out is this op's last, and
					   its last part to finish ends it */
	unsigned	 fan_left;	/* fan-out parts not finished (atomic) */
};

/* What a side pass works on: count elements of op at byte offset off. */
struct side_span {
	const struct op	*op;
	uint8_t		*buf;		/* the op's node buffer */
	size_t		 off;
	size_t		 count;
	uint32_t	 avg;		/* a fan-out's, as coll_fan_out's */
};

static void
side_part(void *arg, unsigned t)
{
	struct side *s = arg;

	if (t >= s->pass[0].nparts) {
		pass_part(&s->pass[1], t - s->pass[0].nparts);
		return;
	}
	pass_part(&s->pass[0], t);
	/* Its buffers are the daemon's segments: the pass cannot fault. */
	if (s->ends != NULL && __atomic_sub_fetch(&s->fan_left, 1,
	    __ATOMIC_ACQ_REL) == 0)
		s->j->eng->op_ended(s->j, s->ends);
}

/*
 * A segment handed out from its op's node buffer (fan) and a segment
 * combined into its op's (comb), on the side crew if it can, else here.
 * The two may be of different ops; with ends set, fan is that op's last
 * segment, and the op ends once it is handed out.
 */
static int
side_begin(struct job *j, struct side *s, const struct side_span *fan,
    const struct side_span *comb, struct op *ends)
{
	const struct ipc_op *fd = &fan->op->desc, *cd = &comb->op->desc;
	uint32_t nfan, ncomb;
	unsigned n;

	s->fan_src = fan->buf + fan->off;
	s->comb_dst = comb->buf + comb->off;
	s->started = 0;
	nfan = fan->count == 0 ? 0 : fan_dsts(j, fan->op, s->fan_src, fan->off,
	    fan->avg, s->fan, s->fan_xm);
	ncomb = comb->count == 0 ? 0 : combine_srcs(j, comb->op, s->comb_dst,
	    comb->off, s->comb, s->comb_xm);
	if (pass_init(&s->pass[0], s->fan, nfan,
	    (const void *const *)&s->fan_src, 1, fan->count, fd->dtype,
	    fd->redop, fan->avg, SIDE_PARTS) == -1 || pass_xmem(&s->pass[0], NULL,
	    op_in_xmem(j, fan->op) ? s->fan_xm : NULL) == -1) {
		pass_free(&s->pass[0]);
		return -1;
	}
	if (pass_init(&s->pass[1], (void *const *)&s->comb_dst,
	    ncomb == 0 ? 0 : 1, s->comb, ncomb, comb->count, cd->dtype,
	    cd->redop, 0, SIDE_PARTS) == -1 || pass_xmem(&s->pass[1],
	    op_in_xmem(j, comb->op) ? s->comb_xm : NULL, NULL) == -1) {
		pass_free(&s->pass[0]);
		pass_free(&s->pass[1]);
		return -1;
	}
	s->ends = ends;
	s->fan_left = s->pass[0].nparts;
	n = s->pass[0].nparts + s->pass[1].nparts;
	if (ends != NULL && s->fan_left == 0)	/* nothing to hand out */
		j->eng->op_ended(j, ends);
	if (n > 0 && crew_start(j->eng->side, n, side_part, s) == 0)
		s->started = 1;
	else
		for (unsigned t = 0; t < n; t++)	/* no threads: here */
			side_part(s, t);
	return 0;
}

/* The side passes ended; -1 with x's error if one of them failed. */
static int
side_end(struct job *j, const struct op *op, struct side *s, struct xfer *x)
{
	int rc = 0;

	if (s->started)
		crew_wait(j->eng->side);
	for (int k = 0; k < 2; k++)
		if (rc == 0 && s->pass[k].fault.err != 0) {
			coll_pass_fault(j, op, &s->pass[k].fault, x);
			rc = -1;
		}
	pass_free(&s->pass[0]);
	pass_free(&s->pass[1]);
	return rc;
}

static int
side_new(struct side *s, struct job *j)
{
	memset(s, 0, sizeof(*s));
	s->j = j;
	s->fan = calloc(j->nlocal + 1, sizeof(*s->fan));
	s->fan_xm = calloc(j->nlocal + 1, sizeof(*s->fan_xm));
	s->comb = calloc(j->nlocal, sizeof(*s->comb));
	s->comb_xm = calloc(j->nlocal, sizeof(*s->comb_xm));
	return s->fan && s->fan_xm && s->comb && s->comb_xm ? 0 : -1;
}

static void
side_free(struct side *s)
{
	free(s->fan);
	free(s->fan_xm);
	free(s->comb);
	free(s->comb_xm);
}

static int
ranges_meet(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	return a < b + blen && b < a + alen;
}

/*
 * 1 if allreduces a and b, both in the daemon's segments, share a byte of
 * any local rank's buffers.  Distinct segments are distinct memory
 * (mccl_alloc maps a new one each time), so addresses tell.
 */
static int
ops_share_memory(const struct job *j, const struct op *a, const struct op *b)
{
	size_t al = op_bytes(a), bl = op_bytes(b);

	for (uint32_t i = 0; i < j->nlocal; i++)
		for (uint32_t k = 0; k < j->nlocal; k++) {
			const uint8_t *ab[2] = { a->parts[i].send,
			    a->parts[i].recv };
			const uint8_t *bb[2] = { b->parts[k].send,
			    b->parts[k].recv };

			for (int m = 0; m < 4; m++)
				if (ranges_meet(ab[m / 2], al, bb[m % 2], bl))
					return 1;
		}
	return 0;
}

/*
 * The op after op, taken now, if its first segment may be combined beside
 * op's last one on the network (the combine that would otherwise start it
 * with the links idle): an allreduce cut in segments too, its buffers and
 * op's all in the daemon's segments and sharing no byte (it would read
 * what op has yet to write), nor with the op before op where op is one
 * segment (whose last segment is handed out beside it in the same side
 * pass).  NULL: none is ready, or it may not.
 */
static struct op *
coll_ahead(struct job *j, const struct op *op)
{
	struct op *next;

	if (j->nlocal < 2 || op_in_xmem(j, op) ||
	    (next = subq_take_ahead(j)) == NULL)
		return NULL;
	if (next->code != 0 || next->desc.coll != COLL_ALLREDUCE ||
	    !coll_segmented(j, op_bytes(next)) || op_in_xmem(j, next) ||
	    ops_share_memory(j, op, next) || (op->before != NULL &&
	    ops_share_memory(j, op->before, next)))
		return NULL;
	return next;
}

/* Op's last segment, to hand out from its node buffer buf. */
static struct side_span
last_segment(const struct job *j, const struct op *op, uint8_t *buf)
{
	const struct ipc_op *d = &op->desc;
	size_t es = dtype_size(d->dtype), seg = seg_count(op),
	    nseg = (d->count + seg - 1) / seg;

	return (struct side_span){ op, buf, (nseg - 1) * seg * es, d->count -
	    (nseg - 1) * seg, d->redop == MCCL_AVG ? j->nranks : 0 };
}

/* Op's last segment handed out from its node buffer buf, here. */
static int
fan_out_last(struct job *j, const struct op *op, uint8_t *buf, struct xfer *x)
{
	struct side_span end = last_segment(j, op, buf);

	return coll_fan_out(j, op, end.buf + end.off, end.off, end.count,
	    end.avg, x);
}

/*
 * Segment by segment, each one's combine and the fan-out of the one
 * before on the side crew while the network carries it.  Ops queued back
 * to back overlap too: the next one's first segment is combined beside
 * this one's last (coll_ahead), and then this one's last is handed out
 * beside the next one's first, which ends this op (op->handed_on).  A
 * next op that came only while this one's last segment was on the
 * network still takes the hand-out; its first combine is its own.
 */
static int
coll_segments(struct job *j, struct op *op, struct xfer *x)
{
	const struct ipc_op *d = &op->desc;
	size_t es = dtype_size(d->dtype), seg = seg_count(op),
	    nseg = (d->count + seg - 1) / seg, last = d->count - (nseg - 1) * seg;
	uint32_t avg = d->redop == MCCL_AVG ? j->nranks : 0;
	uint8_t *dst = coll_node_buf(j, op, x);
	int combines = j->nlocal > 1 || op_in_xmem(j, op);
	const uint8_t *src = combines ? dst : op->parts[0].send;
	struct op *ahead = NULL;
	uint64_t node_ns = 0, t0;
	struct side side;
	int rc = 0;

	if (dst == NULL)
		return -1;
	if (side_new(&side, j) == -1) {
		side_free(&side);
		return coll_nomem(x);
	}
	if (combines && !op->combined_ahead)
		rc = coll_combine(j, op, dst, 0, seg, x);
	for (size_t s = 0; rc == 0 && s < nseg; s++) {
		size_t at = s * seg * es, n = s + 1 < nseg ? seg : last,
		    next = combines && s + 1 < nseg ? (s + 2 < nseg ? seg :
		    last) : 0;
		struct side_span fan = { op, dst, s > 0 ? at - seg * es : 0,
		    s > 0 ? seg : 0, avg };
		struct side_span comb = { op, dst, next > 0 ? at + seg * es :
		    0, next, 0 };
		struct op *ends = s == 0 ? op->before : NULL;

		if (ends != NULL)
			fan = last_segment(j, ends, coll_node_buf(j, ends, x));
		if (s + 1 == nseg && (ahead = coll_ahead(j, op)) != NULL)
			comb = (struct side_span){ ahead, coll_node_buf(j,
			    ahead, x), 0, seg_count(ahead), 0 };
		if (side_begin(j, &side, &fan, &comb, ends) == -1) {
			rc = coll_nomem(x);	/* coll_end_before ends it */
			break;
		}
		op->before = NULL;
		t0 = now_ns();
		rc = node_allreduce(x, src + at, dst + at, n, d->dtype,
		    d->redop);
		node_ns += now_ns() - t0;
		if (side_end(j, op, &side, x) == -1)
			rc = -1;
		if (rc == 0 && ahead != NULL)
			ahead->combined_ahead = 1;
	}
	if (rc == 0 && ahead == NULL)	/* one that came since: it still */
		ahead = coll_ahead(j, op);	/* hands this one's last out */
	if (rc == 0 && ahead != NULL) {
		ahead->before = op;
		op->handed_on = 1;
	} else if (rc == 0)
		rc = fan_out_last(j, op, dst, x);
	op->node_ns = node_ns;
	side_free(&side);
	return rc;
}

/*
 * Engine, once op has run or failed: end the op before it, if op did not
 * hand out that one's last segment (it failed first), here.
 */
void
coll_end_before(struct job *j, struct op *op)
{
	struct op *before = op->before;
	struct xfer x;

	if (before == NULL)
		return;
	op->before = NULL;
	memset(&x, 0, sizeof(x));
	if (fan_out_last(j, before, coll_node_buf(j, before, &x), &x) == -1) {
		before->code = x.code;
		wire_strlcpy(before->err, x.err, sizeof(before->err));
	}
	j->eng->op_ended(j, before);
}

/* Bytes the op read and wrote in its ranks' own memory. */
static uint64_t
coll_xmem_bytes(const struct job *j, const struct op *op)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < j->nlocal; i++)
		if (op->parts[i].xm != NULL)
			n += 2 * op_bytes(op);
	return n;
}

static int
coll_allreduce(struct job *j, struct op *op, struct xfer *x)
{
	const struct ipc_op *d = &op->desc;
	uint8_t *dst;
	const uint8_t *src;
	int rc;

	if (j->nnodes == 1)
		rc = coll_local_allreduce(j, op, x);
	else if (coll_segmented(j, op_bytes(op)))
		rc = coll_segments(j, op, x);
	else if ((dst = coll_node_buf(j, op, x)) == NULL ||
	    coll_contribution(j, op, dst, &src, x) == -1 ||
	    coll_node_allreduce(op, x, src, dst) == -1)
		rc = -1;
	else
		rc = coll_fan_out(j, op, dst, 0, d->count,
		    d->redop == MCCL_AVG ? j->nranks : 0, x);
	if (rc == 0)
		op->xmem_bytes = coll_xmem_bytes(j, op);
	return rc;
}

static int
coll_reduce(struct job *j, struct op *op, struct xfer *x)
{
	const struct ipc_op *d = &op->desc;
	uint32_t root = local_index_of(j, d->root);
	size_t bytes = op_bytes(op);
	uint8_t *dst = root != UINT32_MAX ? op->parts[root].recv :
	    coll_tmp(j, bytes, x);
	const uint8_t *src;

	if (dst == NULL && bytes > 0)
		return -1;
	if (coll_contribution(j, op, dst, &src, x) == -1 ||
	    coll_node_allreduce(op, x, src, dst) == -1)
		return -1;
	if (d->redop == MCCL_AVG && bytes > 0 && root != UINT32_MAX)
		reduce_scale_avg(dst, d->count, d->dtype, j->nranks);
	return 0;
}

static int
coll_broadcast(struct job *j, struct op *op, struct xfer *x)
{
	const struct ipc_op *d = &op->desc;
	uint32_t root_pos = j->rank_pos[d->root];
	size_t bytes = op_bytes(op);
	uint8_t *buf = op->parts[0].recv;

	if (root_pos == j->me)
		buf = op->parts[local_index_of(j, d->root)].recv;
	if (node_broadcast(x, buf, bytes, root_pos) == -1)
		return -1;
	return coll_fan_out(j, op, buf, 0, d->count, 0, x);
}

/* Each position's block of a buffer in node order, blk bytes per rank. */
static int
coll_blocks(const struct job *j, size_t blk, size_t **offs, size_t **lens)
{
	*offs = calloc(j->nnodes, sizeof(size_t));
	*lens = calloc(j->nnodes, sizeof(size_t));
	if (*offs == NULL || *lens == NULL) {
		free(*offs);
		free(*lens);
		return -1;
	}
	for (uint32_t p = 0; p < j->nnodes; p++) {
		(*offs)[p] = (size_t)j->pos_first[p] * blk;
		(*lens)[p] = (size_t)j->pos_count[p] * blk;
	}
	return 0;
}

/* Copy a buffer in rank order (blk bytes per rank) into node order. */
static void
coll_reslot(const struct job *j, uint8_t *dst, const uint8_t *src,
    size_t blk)
{
	for (uint32_t r = 0; r < j->nranks && blk > 0; r++)
		memcpy(dst + (size_t)j->rank_slot[r] * blk, src + (size_t)r * blk,
		    blk);
}

/* Copy a buffer in node order (blk bytes per rank) into rank order. */
static void
coll_unslot(const struct job *j, uint8_t *dst, const uint8_t *src,
    size_t blk)
{
	if (blk == 0)		/* nothing, and the buffers may be NULL */
		return;
	if (j->slots_are_ranks) {
		if (dst != src)
			memcpy(dst, src, (size_t)j->nranks * blk);
		return;
	}
	for (uint32_t r = 0; r < j->nranks; r++)
		memcpy(dst + (size_t)r * blk, src + (size_t)j->rank_slot[r] * blk,
		    blk);
}

/*
 * The local ranks' sends into their slots of dst, blk bytes each, slots
 * counted from first_slot (0: dst holds every slot of the job).
 */
static void
coll_slot_sends(const struct job *j, const struct op *op, uint8_t *dst,
    size_t blk, uint32_t first_slot)
{
	for (uint32_t i = 0; i < j->nlocal && blk > 0; i++) {
		uint8_t *slot = dst + (size_t)(j->rank_slot[j->local_ranks[i]] -
		    first_slot) * blk;

		if (slot != op->parts[i].send)
			memcpy(slot, op->parts[i].send, blk);
	}
}

/* The other way: each local rank's block of src into its receive. */
static void
coll_slot_recvs(const struct job *j, const struct op *op,
    const uint8_t *src, size_t blk, uint32_t first_slot)
{
	for (uint32_t i = 0; i < j->nlocal && blk > 0; i++) {
		const uint8_t *slot = src + (size_t)(j->rank_slot[
		    j->local_ranks[i]] - first_slot) * blk;

		if (slot != op->parts[i].recv)
			memcpy(op->parts[i].recv, slot, blk);
	}
}

static int
coll_allgather(struct job *j, struct op *op, struct xfer *x)
{
	size_t blk = op_bytes(op);
	size_t total = blk * j->nranks, *offs, *lens;
	uint8_t *buf;
	int rc;

	buf = j->slots_are_ranks ? op->parts[0].recv :
	    coll_tmp(j, total, x);
	if (buf == NULL && total > 0)
		return -1;
	if (coll_blocks(j, blk, &offs, &lens))
		return coll_nomem(x);
	coll_slot_sends(j, op, buf, blk, 0);
	rc = ring_allgather(x, buf, offs, lens);
	free(offs);
	free(lens);
	for (uint32_t i = 0; rc == 0 && i < j->nlocal && total > 0; i++)
		coll_unslot(j, op->parts[i].recv, buf, blk);
	return rc;
}

/*
 * Gather and scatter: the root's node holds every block, in node order (in
 * the root's own buffer when that order is the ranks'); another node only
 * its ranks' blocks, side by side in `mine` (in place for a lone rank).
 */
static int
coll_rooted(struct job *j, struct op *op, struct xfer *x, int gather)
{
	const struct ipc_op *d = &op->desc;
	size_t blk = op_bytes(op);
	size_t total = blk * j->nranks, ours = blk * j->nlocal, *offs, *lens;
	uint32_t root = local_index_of(j, d->root), first = j->pos_first[j->me];
	uint8_t *buf = NULL, *mine = NULL, *user = NULL;
	int rc;

	if (root != UINT32_MAX) {
		user = gather ? op->parts[root].recv : op->parts[root].send;
		buf = j->slots_are_ranks ? user : coll_tmp(j, total, x);
		if (buf == NULL && total > 0)
			return -1;
		if (gather)
			coll_slot_sends(j, op, buf, blk, 0);
		else if (buf != user)
			coll_reslot(j, buf, user, blk);
	} else {
		mine = j->nlocal == 1 ? (gather ? op->parts[0].send :
		    op->parts[0].recv) : coll_tmp(j, ours, x);
		if (mine == NULL && ours > 0)
			return -1;
		if (gather && j->nlocal > 1)
			coll_slot_sends(j, op, mine, blk, first);
	}
	if (coll_blocks(j, blk, &offs, &lens))
		return coll_nomem(x);
	rc = (gather ? ring_gather : ring_scatter)(x, buf, offs, lens,
	    j->rank_pos[d->root], mine);
	free(offs);
	free(lens);
	if (rc == 0 && gather && buf != NULL && buf != user && total > 0)
		coll_unslot(j, user, buf, blk);
	if (rc == 0 && !gather)
		coll_slot_recvs(j, op, buf != NULL ? buf : mine, blk,
		    buf != NULL ? 0 : first);
	return rc;
}

static int
coll_gather(struct job *j, struct op *op, struct xfer *x)
{
	return coll_rooted(j, op, x, 1);
}

static int
coll_scatter(struct job *j, struct op *op, struct xfer *x)
{
	return coll_rooted(j, op, x, 0);
}

static int
coll_reduce_scatter(struct job *j, struct op *op, struct xfer *x)
{
	const struct ipc_op *d = &op->desc;
	size_t blk = op_bytes(op);
	uint8_t *buf = coll_tmp(j, blk * j->nranks, x);

	if (buf == NULL && blk > 0)
		return -1;
	if (j->slots_are_ranks) {
		if (coll_combine(j, op, buf, 0, d->count * j->nranks, x) == -1)
			return -1;
	} else
		for (uint32_t r = 0; r < j->nranks; r++)
			if (coll_combine(j, op, buf + (size_t)j->rank_slot[r] *
			    blk, (size_t)r * blk, d->count, x) == -1)
				return -1;
	if (ring_allreduce_wire(x, buf, buf, d->count * j->nranks, d->dtype,
	    d->redop) == -1)
		return -1;
	for (uint32_t i = 0; i < j->nlocal && blk > 0; i++) {
		uint8_t *mine = buf + (size_t)j->rank_slot[j->local_ranks[i]] *
		    blk;

		if (d->redop == MCCL_AVG)
			reduce_scale_avg(mine, d->count, d->dtype, j->nranks);
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
a2a_pack(const struct job *j, const struct a2a *a, uint32_t to)
{
	size_t k = 0;

	for (uint32_t i = 0; i < j->nlocal; i++)
		for (uint32_t r = 0; r < j->nranks; r++)
			if (j->rank_pos[r] == to)
				memcpy(a->spack + a->blk * k++, a->send[i] +
				    (size_t)r * a->blk, a->blk);
	return k * a->blk;
}

static void
a2a_unpack(const struct job *j, const struct op *op, const struct a2a *a,
    uint32_t from)
{
	size_t k = 0;

	for (uint32_t r = 0; r < j->nranks; r++)
		if (j->rank_pos[r] == from)
			for (uint32_t i = 0; i < j->nlocal; i++)
				memcpy(op->parts[i].recv + (size_t)r * a->blk,
				    a->rpack + a->blk * k++, a->blk);
}

static void
a2a_local(const struct job *j, const struct op *op, const struct a2a *a)
{
	for (uint32_t i = 0; i < j->nlocal; i++)
		for (uint32_t k = 0; k < j->nlocal; k++)
			memcpy(op->parts[k].recv + (size_t)j->local_ranks[i] *
			    a->blk, a->send[i] + (size_t)j->local_ranks[k] *
			    a->blk, a->blk);
}

/*
 * Scratch for an alltoall: a copy of the sends of the ranks that run it in
 * place (their receives overwrite them), then one packing buffer each way,
 * as large as the most this node exchanges with one node.
 */
static size_t
a2a_scratch(const struct job *j, const struct op *op, size_t blk,
    size_t *copies, size_t *pack)
{
	uint32_t most = 0;

	*copies = 0;
	for (uint32_t i = 0; i < j->nlocal; i++)
		if (op->parts[i].send == op->parts[i].recv)
			*copies += blk * j->nranks;
	for (uint32_t p = 0; p < j->nnodes; p++)
		if (p != j->me && j->pos_count[p] > most)
			most = j->pos_count[p];
	*pack = (size_t)most * j->nlocal * blk;
	return *copies + 2 * *pack;
}

static int
coll_alltoall(struct job *j, struct op *op, struct xfer *x)
{
	size_t blk = op_bytes(op);
	size_t copies, pack, need = a2a_scratch(j, op, blk, &copies, &pack);
	struct a2a a = { NULL, blk, NULL, NULL };
	uint8_t *tmp = coll_tmp(j, need, x), *copy;
	int rc = 0;

	if (tmp == NULL && need > 0)
		return -1;
	if ((a.send = calloc(j->nlocal, sizeof(*a.send))) == NULL)
		return coll_nomem(x);
	copy = tmp;
	for (uint32_t i = 0; i < j->nlocal; i++) {
		a.send[i] = op->parts[i].send;
		if (blk > 0 && op->parts[i].send == op->parts[i].recv) {
			memcpy(copy, a.send[i], blk * j->nranks);
			a.send[i] = copy;
			copy += blk * j->nranks;
		}
	}
	a.spack = tmp + copies;
	a.rpack = tmp + copies + pack;
	if (blk > 0)
		a2a_local(j, op, &a);
	/* Count 0 still exchanges headers: mismatches are found all the same. */
	for (uint32_t s = 1; rc == 0 && s < j->nnodes; s++) {
		uint32_t to = (j->me + s) % j->nnodes;
		uint32_t from = (j->me + j->nnodes - s) % j->nnodes;
		size_t sbytes = blk > 0 ? a2a_pack(j, &a, to) : 0;
		size_t rbytes = (size_t)j->pos_count[from] * j->nlocal * blk;

		if ((rc = xfer_exchange(x, to, a.spack, sbytes, from, a.rpack,
		    rbytes)) == 0 && blk > 0)
			a2a_unpack(j, op, &a, from);
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
v_layout(const struct job *j, const uint64_t *counts, size_t es,
    size_t **at, size_t **offs, size_t **lens)
{
	*at = calloc(j->nranks + 1, sizeof(size_t));
	*offs = calloc(j->nnodes, sizeof(size_t));
	*lens = calloc(j->nnodes, sizeof(size_t));
	if (*at == NULL || *offs == NULL || *lens == NULL) {
		free(*at);
		free(*offs);
		free(*lens);
		return -1;
	}
	for (uint32_t r = 0; r < j->nranks; r++)	/* slot sizes, shifted */
		(*at)[j->rank_slot[r] + 1] = (size_t)counts[r] * es;
	for (uint32_t s = 0; s < j->nranks; s++)
		(*at)[s + 1] += (*at)[s];
	for (uint32_t p = 0; p < j->nnodes; p++) {
		(*offs)[p] = (*at)[j->pos_first[p]];
		(*lens)[p] = (*at)[j->pos_first[p] + j->pos_count[p]] -
		    (*offs)[p];
	}
	return 0;
}

static int
coll_allgatherv(struct job *j, struct op *op, struct xfer *x)
{
	const uint64_t *counts = op->parts[0].vec;	/* the same on all */
	size_t es = dtype_size(op->desc.dtype), *at, *offs, *lens;
	uint8_t *buf;
	int rc;

	if (v_layout(j, counts, es, &at, &offs, &lens) == -1)
		return coll_nomem(x);
	if ((buf = coll_tmp(j, at[j->nranks], x)) == NULL &&
	    at[j->nranks] > 0) {
		rc = -1;
		goto out;
	}
	for (uint32_t i = 0; i < j->nlocal; i++) {
		uint32_t r = j->local_ranks[i];

		if (counts[r] > 0)
			memcpy(buf + at[j->rank_slot[r]], op->parts[i].send,
			    counts[r] * es);
	}
	/* The nodes must agree on every count: the header carries a digest. */
	x->hdr.root = proto_vec_digest(counts, j->nranks);
	if ((rc = ring_allgather(x, buf, offs, lens)) == 0)
		for (uint32_t i = 0; i < j->nlocal; i++) {
			const uint64_t *displs = op->parts[i].vec + j->nranks;

			for (uint32_t r = 0; r < j->nranks; r++)
				if (counts[r] > 0)
					memcpy(op->parts[i].recv + displs[r] *
					    es, buf + at[j->rank_slot[r]],
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
a2av_pairs(const struct job *j, const struct op *op, uint32_t pos, int recv,
    size_t (*fn)(const struct job *, const struct op *, uint32_t,
    uint32_t, void *), void *arg)
{
	uint32_t n = j->nranks;
	size_t total = 0;

	for (uint32_t a = 0; a < (recv ? n : j->nlocal); a++)
		for (uint32_t b = 0; b < (recv ? j->nlocal : n); b++) {
			uint32_t r = recv ? a : b, i = recv ? b : a;

			if (j->rank_pos[r] == pos)
				total += fn(j, op, i, r, arg);
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
a2av_size(const struct job *j, const struct op *op, uint32_t i, uint32_t r,
    void *arg)
{
	const struct a2av_cursor *c = arg;

	return A2AV_PAIR + (c->recv ? RCOUNT(op, i, j->nranks) :
	    SCOUNT(op, i, j->nranks))[r] * c->es;
}

static size_t
a2av_put(const struct job *j, const struct op *op, uint32_t i, uint32_t r,
    void *arg)
{
	struct a2av_cursor *c = arg;
	uint64_t count[2] = { SCOUNT(op, i, j->nranks)[r],
	    RCOUNT(op, i, j->nranks)[r] };

	memcpy(c->counts, count, A2AV_PAIR);
	c->counts += A2AV_PAIR;
	if (count[0] > 0)	/* else the buffer may be NULL */
		memcpy(c->data, op->parts[i].send + SDISPL(op, i,
		    j->nranks)[r] * c->es, count[0] * c->es);
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
a2av_check(const struct job *j, const struct op *op, uint32_t i, uint32_t r,
    void *arg)
{
	struct a2av_cursor *c = arg;
	uint32_t me = j->local_ranks[i];
	uint64_t count[2];

	memcpy(count, c->counts, A2AV_PAIR);
	c->counts += A2AV_PAIR;
	if (count[0] != RCOUNT(op, i, j->nranks)[r])
		a2av_bad(c, r, me, count[0], RCOUNT(op, i, j->nranks)[r]);
	else if (count[1] != SCOUNT(op, i, j->nranks)[r])
		a2av_bad(c, me, r, SCOUNT(op, i, j->nranks)[r], count[1]);
	return 0;
}

static size_t
a2av_get(const struct job *j, const struct op *op, uint32_t i, uint32_t r,
    void *arg)
{
	struct a2av_cursor *c = arg;
	size_t len = RCOUNT(op, i, j->nranks)[r] * c->es;

	if (len > 0)		/* else the buffer may be NULL */
		memcpy(op->parts[i].recv + RDISPL(op, i, j->nranks)[r] *
		    c->es, c->data, len);
	c->data += len;
	return 0;
}

/* The pairs' counts take the stream's first bytes. */
static size_t
a2av_npairs(const struct job *j, uint32_t pos)
{
	return (size_t)j->pos_count[pos] * j->nlocal * A2AV_PAIR;
}

/* Between local ranks: each pair's counts must agree, then a copy. */
static int
a2av_local(const struct job *j, const struct op *op, size_t es,
    struct xfer *x)
{
	uint32_t n = j->nranks;

	for (uint32_t i = 0; i < j->nlocal; i++)
		for (uint32_t k = 0; k < j->nlocal; k++) {
			uint32_t src = j->local_ranks[i], dst = j->local_ranks[k];
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
a2av_step(struct job *j, struct op *op, struct xfer *x, uint32_t to,
    uint32_t from, uint8_t *spack, uint8_t *rpack)
{
	size_t es = dtype_size(op->desc.dtype);
	struct a2av_cursor tx = { .es = es, .counts = spack,
	    .data = spack + a2av_npairs(j, to) };
	struct a2av_cursor rx = { .recv = 1, .es = es, .counts = rpack,
	    .data = rpack + a2av_npairs(j, from) };
	size_t sbytes = a2av_pairs(j, op, to, 0, a2av_size, &tx);
	size_t rbytes = a2av_pairs(j, op, from, 1, a2av_size, &rx);

	a2av_pairs(j, op, to, 0, a2av_put, &tx);
	if (xfer_exchange_sized(x, to, spack, sbytes, from, rpack, rbytes) == -1)
		return -1;
	a2av_pairs(j, op, from, 1, a2av_check, &rx);
	if (rx.bad) {
		x->code = MCCL_ERR_INVALID_ARGUMENT;
		snprintf(x->err, sizeof(x->err), "alltoallv: rank %u sends %llu "
		    "elements to rank %u, which expects %llu", rx.from,
		    (unsigned long long)rx.sends, rx.to,
		    (unsigned long long)rx.expects);
		return -1;
	}
	a2av_pairs(j, op, from, 1, a2av_get, &rx);
	return 0;
}

/*
 * Alltoallv in the pairwise steps of alltoall.  Each step's stream starts
 * with every pair's counts, and its header carries its length: counts that
 * disagree fail the op on the nodes of the pair's ranks, naming them,
 * before any block of that step lands.
 */
static int
coll_alltoallv(struct job *j, struct op *op, struct xfer *x)
{
	size_t es = dtype_size(op->desc.dtype), smax = 0, rmax = 0, b;
	struct a2av_cursor sz = { .es = es };
	uint8_t *tmp;
	int rc = 0;

	for (uint32_t p = 0; p < j->nnodes; p++) {
		if (p == j->me)
			continue;
		sz.recv = 0;
		if ((b = a2av_pairs(j, op, p, 0, a2av_size, &sz)) > smax)
			smax = b;
		sz.recv = 1;
		if ((b = a2av_pairs(j, op, p, 1, a2av_size, &sz)) > rmax)
			rmax = b;
	}
	if ((tmp = coll_tmp(j, smax + rmax, x)) == NULL && smax + rmax > 0)
		return -1;
	/* The other nodes first: they need not wait for a local mismatch. */
	for (uint32_t s = 1; rc == 0 && s < j->nnodes; s++)
		rc = a2av_step(j, op, x, (j->me + s) % j->nnodes,
		    (j->me + j->nnodes - s) % j->nnodes, tmp, tmp + smax);
	return rc == 0 ? a2av_local(j, op, es, x) : rc;
}

static int
coll_barrier(struct job *j, struct op *op, struct xfer *x)
{
	(void)j;
	(void)op;
	return ring_barrier(x);
}

/* Each collective of the engine, by enum coll_type (send/recv: p2p.c). */
static int (*const coll_table[])(struct job *, struct op *, struct xfer *) = {
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
coll_run(struct job *j, struct op *op, struct xfer *x)
{
	uint32_t c = op->desc.coll;

	if (c >= sizeof(coll_table) / sizeof(coll_table[0]) ||
	    coll_table[c] == NULL) {
		x->code = MCCL_ERR_INTERNAL;
		snprintf(x->err, sizeof(x->err), "collective %u not in the "
		    "engine", c);
		return -1;
	}
	return coll_table[c](j, op, x);
}
