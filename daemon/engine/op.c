/*
 * op.c: an operation's life in the daemon, whichever way it came in (a
 * collective's descriptors from the submission rings, subq.c; a send or a
 * receive in an IPC_OP record, control's job.c): its one check, its
 * buffers attached from each local rank's segments, and its end.  Made by
 * the thread that takes it in, freed by the main thread once answered.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/reduce.h"

/* An op of the job cm, with a part per local rank. */
struct op *
op_new(struct comm *cm)
{
	struct op *op;

	if ((op = calloc(1, sizeof(*op) + cm->nlocal * sizeof(op->parts[0]))) ==
	    NULL)
		return NULL;
	op->comm = cm;
	op->wait_pos = op->blame_pos = NO_POS;
	return op;
}

void
op_free(struct op *op)
{
	for (uint32_t i = 0; i < op->comm->nlocal; i++) {
		if (op->parts[i].send_seg != NULL)
			seg_unref(op->parts[i].send_seg);
		if (op->parts[i].recv_seg != NULL)
			seg_unref(op->parts[i].recv_seg);
		free(op->parts[i].vec);
	}
	free(op);
}

/*
 * An operation's own fields, whoever sent them; the library checked them
 * too, for a friendlier error.  NULL when they hold, else err.
 */
const char *
op_check(uint32_t nranks, const struct ipc_op *m, char *err, size_t len)
{
	uint64_t sb, rb;

	if (m->coll < 1 || m->coll > COLL_MAX)
		snprintf(err, len, "unknown collective %u", m->coll);
	else if (m->algo > ALGO_MAX)
		snprintf(err, len, "unknown algorithm %u", m->algo);
	else if (m->coll != COLL_BARRIER && dtype_size(m->dtype) == 0)
		snprintf(err, len, "unknown dtype %u", m->dtype);
	else if (proto_coll_reduces(m->coll) && !reduce_supported(m->dtype, m->redop))
		snprintf(err, len, "reduction %s on %s is not supported",
		    redop_name(m->redop), dtype_name(m->dtype));
	else if (proto_coll_has_root(m->coll) && m->root >= nranks &&
	    !(m->coll == COLL_RECV && m->root == IPC_ANY_SOURCE))
		snprintf(err, len, "%s %u is out of range for %u ranks",
		    proto_coll_p2p(m->coll) ? "peer" : "root", m->root, nranks);
	else if (m->wire != 0 && m->wire != MCCL_BFLOAT16 &&
	    m->wire != MCCL_FLOAT16)
		snprintf(err, len, "unknown wire format %u", m->wire);
	else if (m->wire != 0 && (!proto_coll_reduces(m->coll) ||
	    m->dtype != MCCL_FLOAT32 || (m->redop != MCCL_SUM &&
	    m->redop != MCCL_AVG)))
		snprintf(err, len, "a %s wire is for float32 sums and "
		    "averages, not %s of %s %s", dtype_name(m->wire),
		    proto_coll_name(m->coll), dtype_name(m->dtype),
		    redop_name(m->redop));
	else if (m->flags & ~IPC_OP_XMEM)
		snprintf(err, len, "unknown flags 0x%x", m->flags);
	else if ((m->flags & IPC_OP_XMEM) && (m->coll != COLL_ALLREDUCE ||
	    m->send_seg != 0 || m->recv_seg != 0))
		snprintf(err, len, "buffers in the client's own memory are for "
		    "allreduces, with no segment");
	else if (proto_vec_len(m->coll, nranks) == 0 &&	/* else: its vector */
	    (proto_op_bytes(m->coll, m->count, dtype_size(m->dtype), nranks, 0,
	    m->root, &sb, &rb) == -1 || sb > (UINT64_MAX >> 2)))
		snprintf(err, len, "count %llu is too large",
		    (unsigned long long)m->count);
	else
		return NULL;
	return err;
}

/*
 * A v-collective's vector, copied out of the rank's segment (the client may
 * still write there), and the extents of the buffers it gives.
 */
static int
op_vec(const struct comm *cm, struct op_part *part, struct segtab *segs,
    uint32_t rank, const struct ipc_op *d, uint64_t *sbytes,
    uint64_t *rbytes, char *err, size_t errlen)
{
	size_t n = proto_vec_len(d->coll, cm->nranks);
	struct seg *s;
	uint8_t *p;

	if ((s = seg_resolve(segs, d->vec_seg, d->vec_off, n * sizeof(uint64_t),
	    &p, err, errlen)) == NULL)
		return -1;
	part->vec = malloc(n * sizeof(uint64_t));
	if (part->vec != NULL)
		memcpy(part->vec, p, n * sizeof(uint64_t));
	seg_unref(s);
	if (part->vec == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return proto_vec_bytes(d->coll, d->count, dtype_size(d->dtype),
	    cm->nranks, rank, part->vec, sbytes, rbytes, err, errlen);
}

/*
 * A buffer in the client's own memory: it must not wrap (the kernel
 * checks the rest, at each access).  Never dereferenced: xmem.c reaches it.
 */
static int
op_xmem_buf(const struct segtab *segs, uint64_t addr, uint64_t bytes,
    uint8_t **p, char *err, size_t errlen)
{
	if (segs->xm.pid == 0) {
		snprintf(err, errlen, "its connection has not opened its own "
		    "memory to the daemon");
		return -1;
	}
	if (bytes > 0 && (addr == 0 || addr + bytes < addr)) {
		snprintf(err, errlen, "its buffer at 0x%llx of %llu bytes is "
		    "not in its memory", (unsigned long long)addr,
		    (unsigned long long)bytes);
		return -1;
	}
	*p = (uint8_t *)(uintptr_t)addr;
	return 0;
}

/*
 * Local rank i's (rank's) buffers for op d, resolved in its connection's
 * segments segs; -1 with why in err.
 */
int
op_attach(struct op *op, uint32_t i, struct segtab *segs, uint32_t rank,
    const struct ipc_op *d, char *err, size_t errlen)
{
	const struct comm *cm = op->comm;
	struct op_part *part = &op->parts[i];
	uint64_t sbytes, rbytes;

	if (proto_vec_len(d->coll, cm->nranks) == 0)
		proto_op_bytes(d->coll, d->count, dtype_size(d->dtype),
		    cm->nranks, rank, d->root, &sbytes, &rbytes);
	else if (op_vec(cm, part, segs, rank, d, &sbytes, &rbytes, err,
	    errlen) == -1)
		return -1;
	if (d->flags & IPC_OP_XMEM) {
		if (op_xmem_buf(segs, d->send_off, sbytes, &part->send, err,
		    errlen) == -1 || op_xmem_buf(segs, d->recv_off, rbytes,
		    &part->recv, err, errlen) == -1)
			return -1;
		part->xm = &segs->xm;
	} else {
		part->send_seg = seg_resolve(segs, d->send_seg, d->send_off,
		    sbytes, &part->send, err, errlen);
		if (part->send == NULL && sbytes > 0)
			return -1;
		part->recv_seg = seg_resolve(segs, d->recv_seg, d->recv_off,
		    rbytes, &part->recv, err, errlen);
		if (part->recv == NULL && rbytes > 0)
			return -1;
	}
	/* The engine's copies rely on it, whatever the library checked. */
	if (!proto_bufs_ok(d->coll, rank, (uintptr_t)part->send, sbytes,
	    (uintptr_t)part->recv, rbytes)) {
		snprintf(err, errlen, "its send and receive buffers overlap, "
		    "but not in the %s's in-place form",
		    proto_coll_name(d->coll));
		return -1;
	}
	part->submitted = 1;
	part->req = d->seq;
	return 0;
}
