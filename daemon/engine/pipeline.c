/*
 * pipeline.c: a large allreduce of a job with several ranks on some node,
 * in segments, each segment's combine and fan-out on the side crew beside
 * the network, and the ends of allreduces queued back to back beside each
 * other.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/coll.h"
#include "engine/pass.h"
#include "engine/xfer.h"
#include "engine/crew.h"
#include "engine/reduce.h"

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

int
coll_segmented(const struct comm *cm, size_t bytes)
{
	return cm->nnodes > 1 && cm->nranks > cm->nnodes &&
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

/*
 * Op's segments: the last takes the remainder, from one to two segments'
 * worth, rather than standing alone as a sliver (DDP's buckets are a
 * little over whole MiBs), whose own round between nodes and hand-out
 * would follow the rest unhidden.
 */
static size_t
seg_total(const struct op *op)
{
	return op->desc.count / seg_count(op);
}

struct side {
	struct comm	*cm;
	struct pass	 pass[2];	/* the fan-out, the combine */
	uint8_t		*fan_src;	/* what the passes point at */
	uint8_t		*comb_dst;
	void		**fan;		/* their buffers (nlocal + 1 each) */
	struct xmem **fan_xm;
	const void	**comb;
	struct xmem **comb_xm;
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
	if (s->ends == NULL || __atomic_sub_fetch(&s->fan_left, 1,
	    __ATOMIC_ACQ_REL) != 0)
		return;
	/* The last part: a fault in the ranks' memory is the ending op's. */
	if (s->pass[0].fault.err != 0)
		coll_pass_fault_into(s->cm, s->ends, &s->pass[0].fault,
		    &s->ends->code, s->ends->err, sizeof(s->ends->err));
	s->cm->eng->op_ended(s->cm, s->ends);
}

/*
 * A segment handed out from its op's node buffer (fan) and a segment
 * combined into its op's (comb), on the side crew if it can, else here.
 * The two may be of different ops; with ends set, fan is that op's last
 * segment, and the op ends once it is handed out.
 */
static int
side_begin(struct comm *cm, struct side *s, const struct side_span *fan,
    const struct side_span *comb, struct op *ends)
{
	const struct ipc_op *fd = &fan->op->desc, *cd = &comb->op->desc;
	uint32_t nfan, ncomb;
	unsigned n;

	s->fan_src = fan->buf + fan->off;
	s->comb_dst = comb->buf + comb->off;
	s->started = 0;
	nfan = fan->count == 0 ? 0 : fan_dsts(cm, fan->op, s->fan_src, fan->off,
	    fan->avg, s->fan, s->fan_xm);
	ncomb = comb->count == 0 ? 0 : combine_srcs(cm, comb->op, s->comb_dst,
	    comb->off, s->comb, s->comb_xm);
	if (pass_init(&s->pass[0], s->fan, nfan,
	    (const void *const *)&s->fan_src, 1, fan->count, fd->dtype,
	    fd->redop, fan->avg, SIDE_PARTS) == -1 || pass_xmem(&s->pass[0], NULL,
	    op_in_xmem(cm, fan->op) ? s->fan_xm : NULL) == -1) {
		pass_free(&s->pass[0]);
		return -1;
	}
	if (pass_init(&s->pass[1], (void *const *)&s->comb_dst,
	    ncomb == 0 ? 0 : 1, s->comb, ncomb, comb->count, cd->dtype,
	    cd->redop, 0, SIDE_PARTS) == -1 || pass_xmem(&s->pass[1],
	    op_in_xmem(cm, comb->op) ? s->comb_xm : NULL, NULL) == -1) {
		pass_free(&s->pass[0]);
		pass_free(&s->pass[1]);
		return -1;
	}
	s->ends = ends;
	s->fan_left = s->pass[0].nparts;
	n = s->pass[0].nparts + s->pass[1].nparts;
	if (ends != NULL && s->fan_left == 0)	/* nothing to hand out */
		cm->eng->op_ended(cm, ends);
	if (n > 0 && crew_start(cm->eng->side, n, side_part, s) == 0)
		s->started = 1;
	else
		for (unsigned t = 0; t < n; t++)	/* no threads: here */
			side_part(s, t);
	return 0;
}

/*
 * The side passes ended; -1 with x's error if one of op's failed.  A
 * fault in the ranks' memory belongs to the op whose buffer it was: a
 * fan-out that ended the op before is that op's (side_part), a combine
 * of the next op's first segment (ahead) fails that one, which then does
 * not run, and op goes on.
 */
static int
side_end(struct comm *cm, const struct op *op, struct op *ahead,
    struct side *s, struct xfer *x)
{
	const struct pass_fault *fan = &s->pass[0].fault,
	    *comb = &s->pass[1].fault;
	int rc = 0;

	if (s->started)
		crew_wait(cm->eng->side);
	if (fan->err != 0 && s->ends == NULL) {
		coll_pass_fault(cm, op, fan, x);
		rc = -1;
	} else if (comb->err != 0 && ahead == NULL) {
		coll_pass_fault(cm, op, comb, x);
		rc = -1;
	} else if (comb->err != 0)
		coll_pass_fault_into(cm, ahead, comb, &ahead->code, ahead->err,
		    sizeof(ahead->err));
	pass_free(&s->pass[0]);
	pass_free(&s->pass[1]);
	return rc;
}

static int
side_new(struct side *s, struct comm *cm)
{
	memset(s, 0, sizeof(*s));
	s->cm = cm;
	s->fan = calloc(cm->nlocal + 1, sizeof(*s->fan));
	s->fan_xm = calloc(cm->nlocal + 1, sizeof(*s->fan_xm));
	s->comb = calloc(cm->nlocal, sizeof(*s->comb));
	s->comb_xm = calloc(cm->nlocal, sizeof(*s->comb_xm));
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
 * 1 if allreduces a and b may share a byte of some local rank's buffers.
 * In the daemon's segments addresses tell: each segment is mapped anew
 * (mccl_alloc), so any two ranks' buffers can be compared.  In a rank's
 * own memory only that rank's addresses mean the same memory (ranks that
 * map one buffer at two addresses, and pass it to back-to-back ops, are
 * not told apart); and one rank's buffers, one op in its own memory, the
 * other in a segment, may be the same pages seen both ways (an op with
 * one buffer outside its segments passes both as its own addresses).
 */
static int
ops_share_memory(const struct comm *cm, const struct op *a, const struct op *b)
{
	size_t al = op_bytes(a), bl = op_bytes(b);

	for (uint32_t i = 0; i < cm->nlocal; i++)
		for (uint32_t k = 0; k < cm->nlocal; k++) {
			const struct op_part *pa = &a->parts[i], *pb =
			    &b->parts[k];
			const uint8_t *ab[2] = { pa->send, pa->recv };
			const uint8_t *bb[2] = { pb->send, pb->recv };

			if (i != k && (pa->xm != NULL || pb->xm != NULL))
				continue;
			if ((pa->xm == NULL) != (pb->xm == NULL))
				return 1;
			for (int m = 0; m < 4; m++)
				if (ranges_meet(ab[m / 2], al, bb[m % 2], bl))
					return 1;
		}
	return 0;
}

/*
 * Where next, taken ahead of op, builds its node result: 0 if it needs
 * none of the engine's (its buffers are in the daemon's segments), else
 * 0 with next->alt_buf naming the node buffer that neither op nor the op
 * whose end op hands out holds, got now; -1 if both are held or the
 * budget refuses it.
 */
static int
ahead_node_buf(struct comm *cm, const struct op *op, struct op *next)
{
	int held[2] = { 0, 0 };
	struct xfer x;

	if (!op_in_xmem(cm, next))
		return 0;
	if (op_in_xmem(cm, op))
		held[op->alt_buf] = 1;
	if (op->before != NULL && op_in_xmem(cm, op->before))
		held[op->before->alt_buf] = 1;
	if (held[0] && held[1])
		return -1;
	next->alt_buf = held[0];
	memset(&x, 0, sizeof(x));
	if (coll_node_buf(cm, next, &x) != NULL)
		return 0;
	next->alt_buf = 0;	/* it runs after op, in the first */
	return -1;
}

/*
 * The op after op, taken now, if its first segment may be combined beside
 * op's last one on the network (the combine that would otherwise start it
 * with the links idle): an allreduce cut in segments too, sharing no byte
 * with op (it would read what op has yet to write), nor with the op
 * before op where op is one segment (whose last segment is handed out
 * beside it in the same side pass), with a node buffer of its own.  NULL:
 * none is ready, or it may not.
 */
static struct op *
coll_ahead(struct comm *cm, const struct op *op)
{
	struct op *next;

	if (cm->nlocal < 2 || (next = subq_take_ahead(cm)) == NULL)
		return NULL;
	if (next->code != 0 || next->desc.coll != COLL_ALLREDUCE ||
	    !coll_segmented(cm, op_bytes(next)) ||
	    ops_share_memory(cm, op, next) || (op->before != NULL &&
	    ops_share_memory(cm, op->before, next)) ||
	    ahead_node_buf(cm, op, next) == -1)
		return NULL;
	return next;
}

/* Op's last segment, to hand out from its node buffer buf. */
static struct side_span
last_segment(const struct comm *cm, const struct op *op, uint8_t *buf)
{
	const struct ipc_op *d = &op->desc;
	size_t es = dtype_size(d->dtype), seg = seg_count(op),
	    nseg = seg_total(op);

	return (struct side_span){ op, buf, (nseg - 1) * seg * es, d->count -
	    (nseg - 1) * seg, d->redop == MCCL_AVG ? cm->nranks : 0 };
}

/* Op's last segment handed out from its node buffer buf, here. */
static int
fan_out_last(struct comm *cm, const struct op *op, uint8_t *buf, struct xfer *x)
{
	struct side_span end = last_segment(cm, op, buf);

	return coll_fan_out(cm, op, end.buf + end.off, end.off, end.count,
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
int
coll_segments(struct comm *cm, struct op *op, struct xfer *x)
{
	const struct ipc_op *d = &op->desc;
	size_t es = dtype_size(d->dtype), seg = seg_count(op),
	    nseg = seg_total(op), last = d->count - (nseg - 1) * seg;
	uint32_t avg = d->redop == MCCL_AVG ? cm->nranks : 0;
	uint8_t *dst = coll_node_buf(cm, op, x);
	int combines = cm->nlocal > 1 || op_in_xmem(cm, op);
	const uint8_t *src = combines ? dst : op->parts[0].send;
	struct op *ahead = NULL;
	uint64_t node_ns = 0, t0;
	struct side side;
	int rc = 0;

	if (dst == NULL)
		return -1;
	if (side_new(&side, cm) == -1) {
		side_free(&side);
		return coll_nomem(x);
	}
	if (combines && !op->combined_ahead)
		rc = coll_combine(cm, op, dst, 0, seg, x);
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
			fan = last_segment(cm, ends, coll_node_buf(cm, ends, x));
		if (s + 1 == nseg && (ahead = coll_ahead(cm, op)) != NULL)
			comb = (struct side_span){ ahead, coll_node_buf(cm,
			    ahead, x), 0, seg_count(ahead), 0 };
		if (side_begin(cm, &side, &fan, &comb, ends) == -1) {
			rc = coll_nomem(x);	/* coll_end_before ends it */
			break;
		}
		op->before = NULL;
		t0 = now_ns();
		rc = node_allreduce(x, src + at, dst + at, n, d->dtype,
		    d->redop);
		node_ns += now_ns() - t0;
		if (side_end(cm, op, comb.op == op ? NULL : ahead, &side,
		    x) == -1)
			rc = -1;
		if (rc == 0 && ahead != NULL)
			ahead->combined_ahead = 1;
	}
	if (rc == 0 && ahead == NULL)	/* one that came since: it still */
		ahead = coll_ahead(cm, op);	/* hands this one's last out */
	if (rc == 0 && ahead != NULL) {
		ahead->before = op;
		op->handed_on = 1;
	} else if (rc == 0)
		rc = fan_out_last(cm, op, dst, x);
	op->node_ns = node_ns;
	side_free(&side);
	return rc;
}

/*
 * Engine, once op has run or failed: end the op before it, if op did not
 * hand out that one's last segment (it failed first), here.
 */
void
coll_end_before(struct comm *cm, struct op *op)
{
	struct op *before = op->before;
	struct xfer x;

	if (before == NULL)
		return;
	op->before = NULL;
	memset(&x, 0, sizeof(x));
	if (fan_out_last(cm, before, coll_node_buf(cm, before, &x), &x) == -1) {
		before->code = x.code;
		wire_strlcpy(before->err, x.err, sizeof(before->err));
	}
	cm->eng->op_ended(cm, before);
}
